"""End to end on one real GPU host (issue 11.6): the h200-vm capture (tests/data/hosts/h200-vm)
through hw_facts (run as Ansible runs a module, its nvidia-smi a stand-in printing the host's
captured XML) -> pre-flight verdicts and reports -> affinity plan -> ECC textfile.

What the real machine showed, asserted here: 1x H200 143771 MiB at 0000:00:06.0, ECC on, Gen5
x16; 16 vCPUs, one socket, no SMT; 126 GiB RAM < 140 GiB of GPU memory (memory.exceeds_vram is
an error); GPU 0 pinned to CPUs 1-15 with CPU 0 reserved; GPU ECC metrics with zero errors.
"""
import json
import os
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.dlrack.node.plugins.module_utils.ecc import metrics as ecc_metrics
from ansible_collections.dlrack.node.plugins.plugin_utils.affinity import plan_gpu_affinity_report
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, run_preflight

from realhost import ROOT, h200_vm

UUID = "GPU-84ef4d21-7100-fb54-14a3-d165c2f55af7"
MODULE = os.path.join(ROOT, "plugins", "modules", "hw_facts.py")


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    base = tmp_path_factory.mktemp("h200-vm")
    root, bin_dir = h200_vm(base)
    return {"base": base, "root": root, "bin": bin_dir}


@pytest.fixture(scope="module")
def gathered(host):
    """hw_facts, run as Ansible runs it: args file in, JSON out, real subprocess calls."""
    args = host["base"] / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"root": host["root"]}}))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, ".collections"))
    proc = subprocess.run([sys.executable, MODULE, str(args)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env, timeout=120, check=False)
    res = json.loads(proc.stdout.decode())
    assert res.get("failed") is not True, res
    assert res["changed"] is False
    return res["ansible_facts"]["dlrack_hw_gathered"]


def test_hw_facts(gathered):
    hw = gathered
    assert hw["errors"] == []
    cpu = hw["cpu"]
    assert (cpu["model"], cpu["vendor"], cpu["family"], cpu["model_id"]) == ("Intel(R) Xeon(R) Processor", "intel", 6, 207)
    assert (cpu["sockets"], cpu["cores"], cpu["threads"], cpu["threads_per_core"]) == (1, 16, 16, 1)
    assert [n["id"] for n in cpu["numa_nodes"]] == [0] and cpu["numa_nodes"][0]["cpus"] == "0-15"
    assert hw["memory"]["total_mb"] == 128887 and hw["memory"]["edac"] is None
    assert hw["memory"]["ecc"] == "unknown"            # not root, and a VM: no dmidecode
    (gpu,) = hw["gpus"]
    assert (gpu["model"], gpu["uuid"], gpu["memory_mb"], gpu["pci_bus_id"]) == ("NVIDIA H200", UUID, 143771, "0000:00:06.0")
    assert (gpu["ecc_enabled"], gpu["mig_mode"], gpu["virtualization_mode"]) == (True, False, "Pass-Through")
    assert gpu["pcie"] == {"width": 16, "width_max": 16, "gen": 5, "gen_max": 5, "gen_host_max": None,
                           "speed": 32.0, "speed_max": 32.0}
    assert (gpu["numa_node"], gpu["local_cpus"], gpu["driver"], gpu["device_id"]) == (-1, "0-15", "nvidia", "0x2335")
    assert gpu["nvlink_active"] is None                 # one GPU: `nvlink -s` is not asked
    assert gpu["ecc_errors"] == {"volatile_corrected": 0, "volatile_uncorrected": 0,
                                 "aggregate_corrected": 0, "aggregate_uncorrected": 0}
    assert hw["host"]["virtualization"] == "vm-other" and hw["host"]["hostname"] == "vm"
    assert sorted(d["name"] for d in hw["disks"]) == ["vda", "vdb"]


def test_preflight_verdicts_and_reports(gathered, tmp_path):
    inputs = {"h200-vm": collect_host_inputs("h200-vm", {"dlrack_hw_gathered": gathered})}
    out = run_preflight(inputs, report_dir=str(tmp_path), fail_on="error")
    assert out["failed_hosts"] == ["h200-vm"] and out["host_status"] == {"h200-vm": "fail"}
    report = json.loads((tmp_path / "report.json").read_text())
    host = report["hosts"]["h200-vm"]
    by_rule = {}
    for f in host["findings"]:
        by_rule.setdefault(f["rule"], []).append(f)
    ram = by_rule["memory.exceeds_vram"][0]
    assert (ram["severity"], ram["observed"], ram["required"]) == ("error", "126 GiB", "> 140 GiB")
    assert host["rules"]["memory.exceeds_vram"] == "fail"
    assert host["rules"]["gpu.ecc_mode"] == "pass" and by_rule["gpu.ecc_mode"][0]["observed"] == "enabled"
    assert host["rules"]["gpu.pcie_link"] == "pass" and by_rule["gpu.pcie_link"][0]["observed"] == "x16"
    assert host["rules"]["gpu.present"] == "pass" and host["rules"]["cpu.cores_exceed_gpus"] == "pass"
    assert host["rules"]["gpu.interconnect"] == "skip"          # one GPU
    assert host["rules"]["inventory.schema"] == "pass"
    # the errors on this host: the RAM, and no data disk at all (vda is the system disk, vdb the
    # 300 MB read-only squashfs with the driver: neither counts, for either storage rule)
    assert sorted(r for r, o in host["rules"].items() if o == "fail") == ["memory.exceeds_vram", "storage.nvme_hot_cache"]
    hot, cold = by_rule["storage.nvme_hot_cache"][0], by_rule["storage.hdd_cold_archive"][0]
    assert hot["message"] == "no local data disk at all" and "vda: system disk" in hot["observed"]
    assert "vdb: " in hot["observed"] and (cold["severity"], cold["observed"]) == ("warning", "no HDD")


def test_affinity_plan(gathered):
    plan = plan_gpu_affinity_report(gathered)
    assert plan["reserved_cpus"] == "0" and plan["warnings"] == []
    (gpu,) = plan["gpus"]
    assert (gpu["index"], gpu["uuid"], gpu["cpus"], gpu["cores"], gpu["mems"]) == (0, UUID, "1-15", 15, "0")


def test_ecc_textfile(host, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", host["bin"] + os.pathsep + os.environ.get("PATH", ""))
    smi = ecc_metrics.find_nvidia_smi()
    assert smi == os.path.join(host["bin"], "nvidia-smi")       # the stand-in, found on PATH
    assert ecc_metrics.main(["--root", host["root"], "--textfile-dir", str(tmp_path), "--nvidia-smi", smi]) == 0
    (name,) = os.listdir(str(tmp_path))
    values = {}
    for family in text_string_to_metric_families((tmp_path / name).read_text()):
        for s in family.samples:
            values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    gpu = (("gpu", "0"), ("uuid", UUID))
    assert values[("dlrack_gpu_ecc_collector_up", ())] == 1
    assert values[("dlrack_gpu_ecc_supported", gpu)] == 1 and values[("dlrack_gpu_ecc_enabled", gpu)] == 1
    for metric in ("dlrack_gpu_ecc_corrected_errors_total", "dlrack_gpu_ecc_uncorrected_errors_total"):
        for scope in ("volatile", "aggregate"):
            assert values[(metric, tuple(sorted(gpu + (("scope", scope),))))] == 0
    assert values[("dlrack_gpu_remapped_rows_failed", gpu)] == 0
    # no EDAC in the VM: the memory error state is unknown, not healthy
    assert values[("dlrack_edac_supported", ())] == 0
    assert values[("dlrack_edac_status", (("status", "unknown"),))] == 1
