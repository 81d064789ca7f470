"""AMD Instinct nodes through the rules (issue 21): the same verdicts as the equivalent NVIDIA node,
XGMI as the interconnect, ECC mode from RAS features, MI250X counted per package where a rule is
about packages. Documents are built like hw_facts' output (tests/unit/plugins/module_utils/hw/gpu/
gathers the AMD trees themselves)."""
import copy

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_hw
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import evaluate_host

GPU_RULES = ("gpu.present", "cpu.cores_exceed_gpus", "cpu.pcie_lanes", "gpu.pcie_link", "memory.exceeds_vram",
             "gpu.vram_for_workload", "gpu.interconnect", "gpu.ecc_mode")


def node(gpus, total_mb, cores=192, lanes=160):
    return {"schema": 1, "source": "gathered",
            "cpu": {"model": "AMD EPYC 9654 96-Core Processor", "vendor": "amd", "sockets": 2, "cores": cores,
                    "threads": cores * 2, "pcie_lanes": lanes,
                    "numa_nodes": [{"id": 0, "cpus": "0-95", "memory_mb": total_mb // 2},
                                   {"id": 1, "cpus": "96-191", "memory_mb": total_mb // 2}]},
            "memory": {"total_mb": total_mb, "ecc": "multi-bit",
                       "edac": {"driver": "amd64_edac", "controllers": 24, "corrected": 0, "uncorrected": 0}},
            "gpus": gpus,
            "disks": [{"name": "nvme0n1", "kind": "nvme", "transport": "nvme", "size_bytes": 3840755982336,
                       "role": "data"}],
            "uptime_s": 86400}


def pcie(gen):
    return {"width": 16, "width_max": 16, "gen": gen, "gen_max": gen}


def nvidia(i):      # as nvidia.py gathers it: schema-1 shape, no vendor key
    return {"index": i, "model": "NVIDIA B200", "memory_mb": 184320, "pci_bus_id": "0000:%02x:00.0" % (16 + i),
            "numa_node": i // 4, "pcie": pcie(5), "ecc_enabled": True, "nvlink_active": 18, "vendor_id": "0x10de"}


def amd(i, model="AMD Instinct MI300X", memory_mb=196608, links=7):
    return {"index": i, "model": model, "memory_mb": memory_mb, "pci_bus_id": "0000:%02x:00.0" % (16 + i),
            "numa_node": i // 4, "pcie": pcie(5), "ecc_enabled": True, "vendor": "amd", "vendor_id": "0x1002",
            "interconnect": {"kind": "xgmi", "links_active": links, "hive_id": "0x1"}, "render_node": "renderD%d" % (128 + i)}


def _mutate(kind, gpus):
    for g in gpus:
        if kind == "no-links":
            g["nvlink_active"] = 0 if "nvlink_active" in g else None
            if g.get("interconnect"):
                g["interconnect"]["links_active"] = 0
        elif kind == "links-unknown":
            g["nvlink_active"] = None
            if g.get("interconnect"):
                g["interconnect"]["links_active"] = None
    if kind == "x8":
        gpus[6]["pcie"]["width"] = 8
    if kind == "ecc-off":
        gpus[2]["ecc_enabled"] = False
    if kind == "ecc-unknown":
        gpus[2]["ecc_enabled"] = None
    return gpus


def _verdicts(hw, workload=None):
    res = evaluate_host("n", hw, workload=workload)
    return dict((r, res["rules"][r]) for r in GPU_RULES), res


# RAM as a multiple of the node's GPU memory: below 1x fails, below 2x warns, above passes, for either vendor
@pytest.mark.parametrize("ram_factor", [0.9, 1.5, 3.0])
@pytest.mark.parametrize("case", ["as-is", "x8", "ecc-off", "ecc-unknown", "no-links", "links-unknown", "few-cores",
                                  "few-lanes"])
@pytest.mark.parametrize("workload", [None, {"kind": "full_finetune", "model_params_b": 70},
                                      {"kind": "pretrain", "model_params_b": 1000}, {"kind": "lora", "model_params_b": 7}])
def test_amd_node_gets_the_verdicts_of_the_equivalent_nvidia_node(ram_factor, case, workload):
    out = {}
    for vendor, make, vram in (("nvidia", nvidia, 184320), ("amd", amd, 196608)):
        gpus = _mutate(case, [make(i) for i in range(8)])
        hw = node(gpus, int(8 * vram * ram_factor), cores=12 if case == "few-cores" else 192,
                  lanes=64 if case == "few-lanes" else 160)
        out[vendor], res = _verdicts(hw, workload)
        assert not [f for f in res["findings"] if f["rule"] == "inventory.schema" and f["severity"] != "info"
                    and "fail" in str(f)], res["findings"]
    assert out["amd"] == out["nvidia"]


def test_amd_verdicts_speak_of_xgmi_and_ras():
    dummy, res = _verdicts(node(_mutate("no-links", [amd(i) for i in range(8)]), 4 << 20))
    f = [x for x in res["findings"] if x["rule"] == "gpu.interconnect"][0]
    assert (f["observed"], f["required"]) == ("PCIe only", "Infinity Fabric (XGMI)") and "Infinity Fabric" in f["remedy"]
    dummy, res = _verdicts(node([amd(i) for i in range(8)], 4 << 20))
    f = [x for x in res["findings"] if x["rule"] == "gpu.interconnect"][0]
    assert f["observed"] == "XGMI (7 links on GPU0)"
    dummy, res = _verdicts(node(_mutate("ecc-off", [amd(i) for i in range(8)]), 4 << 20))
    f = [x for x in res["findings"] if x["rule"] == "gpu.ecc_mode"][0]
    assert "amdgpu.ras_enable" in f["remedy"] and "nvidia-smi" not in f["remedy"]


def test_declared_amd_node_capable_model_passes_interconnect():
    hw = {"schema": 1, "source": "declared", "cpu": {"model": "AMD EPYC 9654", "sockets": 2},
          "memory": {"total_mb": 4 << 20, "ecc": "multi-bit"}, "gpus": {"model": "AMD Instinct MI300X", "count": 8},
          "disks": []}
    res = evaluate_host("d", hw)
    assert res["rules"]["gpu.interconnect"] == "pass" and res["rules"]["memory.exceeds_vram"] == "pass"
    f = [x for x in res["findings"] if x["rule"] == "gpu.interconnect"][0]
    assert f["observed"] == "XGMI-capable model"


def test_mi250x_counts_lanes_per_package_and_cores_per_gcd():
    gcds = [amd(i, "AMD Instinct MI250X", 65536, 3) for i in range(8)]
    hw = node(gcds, 2 << 20, cores=64, lanes=64)
    hw["cpu"]["model"] = "AMD EPYC 7A53"        # not catalogued: the declared lanes count
    out, res = _verdicts(hw)
    lanes = [x for x in res["findings"] if x["rule"] == "cpu.pcie_lanes"][0]
    assert out["cpu.pcie_lanes"] == "pass" and "8 GPUs in 4 packages (64 needed for x16 per package)" in lanes["message"]
    cores = [x for x in res["findings"] if x["rule"] == "cpu.cores_exceed_gpus"][0]
    assert cores["observed"] == 64 and "8 GPUs" in cores["message"]      # 8 logical devices, 8 cores each
    # the same 64 lanes for 8 single-package GPUs fail
    out, dummy = _verdicts(node([amd(i) for i in range(8)], 4 << 20, lanes=64))
    assert out["cpu.pcie_lanes"] == "fail"
    # VRAM per logical device (64 GB), so a 7B full fine-tune fits and a 34B pretrain on 8 GCDs does not
    out, dummy = _verdicts(hw, {"kind": "full_finetune", "model_params_b": 7})
    assert out["gpu.vram_for_workload"] == "fail"     # needs >= 80 GB per device for full-parameter >= 7B


def test_amd_gathered_document_is_valid_and_schema_1_stays_valid():
    hw = node([amd(i) for i in range(2)], 1 << 20)
    hw["gpus"][0].update({"ras": {"features": 16383, "blocks": {"umc": {"ue": 0, "ce": 5, "de": 0}}},
                          "retired_pages": {"retired": 1, "pending": 0, "failed": 0}, "kfd_node": 2, "package": 0})
    clean, problems = check_hw(hw, strict=True)
    assert problems == [] and clean["gpus"][0]["interconnect"]["kind"] == "xgmi"
    decl = {"schema": 1, "source": "declared", "gpus": [{"model": "H100 SXM5 80GB", "nvlink_active": 18}]}
    assert check_hw(decl)[1] == []
    bad = {"schema": 1, "source": "declared", "gpus": [{"model": "X", "vendor": "matrox",
                                                       "interconnect": {"kind": "smoke-signals", "links_active": 99}}]}
    paths = sorted(p.path for p in check_hw(bad)[1])
    assert paths == ["gpus[0].interconnect.kind", "gpus[0].interconnect.links_active", "gpus[0].vendor"]


def test_pci_ids_name_of_an_amd_gpu_without_driver():
    g = amd(0)
    g.update({"model": None, "memory_mb": None, "interconnect": None, "pci_name": "Aqua Vanjaram [Instinct MI300X]"})
    res = evaluate_host("n", node([g, copy.deepcopy(g)], 4 << 20))
    assert res["hw"]["gpus"][0]["model"] == "Instinct MI300X" and res["hw"]["gpus"][0]["memory_mb"] == 196608
    g["pci_name"] = "Aldebaran/MI200 [Instinct MI250X/MI250]"      # one device id, two products: no guess
    res = evaluate_host("n", node([g], 4 << 20))
    assert res["hw"]["gpus"][0]["model"] is None


def test_mi300a_apu_shares_its_hbm_so_ram_versus_vram_does_not_apply():
    apus = [amd(i, "AMD Instinct MI300A", 131072, 3) for i in range(4)]
    out, res = _verdicts(node(apus, 4 * 131072))
    assert out["memory.exceeds_vram"] == "skip"
    f = [x for x in res["findings"] if x["rule"] == "memory.exceeds_vram"][0]
    assert "share the same HBM" in f["message"]


# --- declarations that count MI250X packages where entries count GCDs (issue 21) ---

def _declared(gpus, total_mb=2 << 20):
    return {"schema": 1, "source": "declared",
            "cpu": {"model": "AMD EPYC 7A53", "sockets": 1, "cores": 64, "pcie_lanes": 128},
            "memory": {"total_mb": total_mb, "ecc": "multi-bit"}, "gpus": gpus, "disks": []}


def _schema(res, severity):
    return [f for f in res["findings"] if f["rule"] == "inventory.schema" and f["severity"] == severity]


def test_mi250x_count_without_packages_warns_what_it_is_read_as():
    res = evaluate_host("gpu-m01", _declared({"model": "AMD Instinct MI250X", "count": 4}))
    assert res["rules"]["inventory.schema"] == "warn" and not _schema(res, "error")
    (f,) = _schema(res, "warning")
    assert f["message"] == ("host gpu-m01: 4 AMD Instinct MI250X entries are read as 4 logical devices (GCDs) = 2 "
                            "packages (2 GCDs per package); a declaration that counted packages is 8 GCDs")
    assert "count: 8 with packages: 4" in f["remedy"]
    lanes = [x for x in res["findings"] if x["rule"] == "cpu.pcie_lanes"][0]
    assert "4 GPUs in 2 packages" in lanes["message"]


def test_mi250x_count_with_packages_is_well_formed_and_counted_per_package():
    res = evaluate_host("gpu-m01", _declared({"model": "AMD Instinct MI250X", "count": 8, "packages": 4}))
    assert res["rules"]["inventory.schema"] == "pass" and not _schema(res, "warning")
    lanes = [x for x in res["findings"] if x["rule"] == "cpu.pcie_lanes"][0]
    assert "8 GPUs in 4 packages (64 needed for x16 per package)" in lanes["message"]
    cores = [x for x in res["findings"] if x["rule"] == "cpu.cores_exceed_gpus"][0]
    assert "8 GPUs" in cores["message"]


@pytest.mark.parametrize("gpus, path, fix", [
    ({"model": "AMD Instinct MI250X", "count": 3}, "dlrack_hw.gpus[0].count", "declare count: 6 for 3 packages"),
    ({"model": "AMD Instinct MI250X", "count": 4, "packages": 4}, "dlrack_hw.gpus[0].packages",
     "declare count: 8 with packages: 4"),
    ([{"model": "AMD Instinct MI250", "count": 4, "packages": 2}, {"model": "AMD Instinct MI250", "count": 4, "packages": 4}],
     "dlrack_hw.gpus[0].packages", "declare packages once"),
])
def test_mi250x_counts_that_cannot_be_gcds_are_errors(gpus, path, fix):
    res = evaluate_host("gpu-m01", _declared(gpus))
    (f,) = _schema(res, "error")
    assert f["message"].startswith("host gpu-m01: %s: expected " % path) and fix in f["remedy"]


def test_mi250x_entries_with_a_package_s_memory_are_errors_and_count_as_one_gcd():
    # 8 entries each claiming the package's 128 GB: 1 TiB of GPU memory against 768 GiB of RAM would
    # fail memory.exceeds_vram; read per GCD (64 GB) it is 512 GiB, below 2x: a warning
    res = evaluate_host("gpu-m01", _declared({"model": "AMD Instinct MI250X", "count": 8, "packages": 4,
                                              "memory_mb": 131072}, total_mb=768 * 1024))
    (f,) = _schema(res, "error")
    assert f["message"] == ("host gpu-m01: dlrack_hw.gpus[0].memory_mb: expected the memory of one logical device: "
                            "65536 MiB (an AMD Instinct MI250X package of 128 GB is 2 GCDs of 65536 MiB, and each "
                            "entry is one GCD), got 131072")
    assert res["rules"]["memory.exceeds_vram"] == "warn"
    assert [g["memory_mb"] for g in res["hw"]["gpus"]] == [65536] * 8


def test_gcd_entries_that_name_their_device_and_other_models_are_left_alone():
    # declare.yml writes the gathered GCDs one entry each, with their bus ids: no question what they count
    gcds = [dict(amd(i, "AMD Instinct MI250X", 65536, 3)) for i in range(8)]
    res = evaluate_host("gpu-m01", _declared(gcds))
    assert not _schema(res, "warning") and not _schema(res, "error")
    for gpus in ({"model": "AMD Instinct MI300X", "count": 8}, {"model": "NVIDIA H100 80GB HBM3", "count": 8}):
        res = evaluate_host("gpu-m01", _declared(gpus))
        assert not _schema(res, "warning") and not _schema(res, "error")


# --- MI300X compute partitions: one package, several logical devices (issue 21) ---

def _partitioned(mode, partitions, cores=192):
    gpus = [dict(amd(i), compute_partition=mode, partitions=partitions) for i in range(8)]
    return node(gpus, 4 << 20, cores=cores)


def test_cpx_counts_logical_devices_for_cores_and_packages_for_lanes():
    out, res = _verdicts(_partitioned("cpx", 8))
    cores = [x for x in res["findings"] if x["rule"] == "cpu.cores_exceed_gpus"][0]
    # 192 cores for 64 logical devices is 3 per GPU (below 8); SPX, 8 devices, is 24 per GPU
    assert out["cpu.cores_exceed_gpus"] == "warn" and cores["required"] == ">= 512 (8 per GPU)"
    assert cores["message"] == ("192 physical cores for 64 GPUs is 3.0 per GPU, below the recommended 8 "
                                "(64 logical devices: 8 packages in compute partition mode CPX)")
    lanes = [x for x in res["findings"] if x["rule"] == "cpu.pcie_lanes"][0]
    assert out["cpu.pcie_lanes"] == "pass" and "128" in lanes["required"]
    out, res = _verdicts(_partitioned("spx", 1))
    assert out["cpu.cores_exceed_gpus"] == "pass"
    assert "compute partitions" not in [x for x in res["findings"] if x["rule"] == "cpu.cores_exceed_gpus"][0]["message"]
    out, dummy = _verdicts(_partitioned("cpx", 8, cores=48))
    assert out["cpu.cores_exceed_gpus"] == "fail"           # 48 cores for 64 logical devices


def test_cpx_with_unknown_partition_count_cannot_be_verified():
    out, res = _verdicts(_partitioned("cpx", None))
    f = [x for x in res["findings"] if x["rule"] == "cpu.cores_exceed_gpus"][0]
    assert out["cpu.cores_exceed_gpus"] == "warn" and f["message"].startswith("cannot verify: GPU 0, 1, 2")


def test_gathered_gcds_against_a_declaration_of_packages_names_the_fix():
    gathered = node([amd(i, "AMD Instinct MI250X", 65536, 3) for i in range(8)], 2 << 20, cores=64, lanes=128)
    declared = _declared({"model": "AMD Instinct MI250X", "count": 4})
    res = evaluate_host("gpu-m01", gathered, declared=declared)
    (f,) = [x for x in res["findings"] if x["rule"] == "inventory.matches_declared" and "gpus.count" in x["message"]]
    assert f["message"] == "gpus.count: declared 4, gathered 8"
    assert f["remedy"] == ("the declaration counts packages: the node lists 8 AMD Instinct MI250X GCDs (2 per package) "
                           "= the declared 4 packages; entries count logical devices: declare count: 8 with packages: 4")
    # a real shortfall (6 of 8 GCDs seen) keeps the usual remedy
    res = evaluate_host("gpu-m01", node([amd(i, "AMD Instinct MI250X", 65536, 3) for i in range(6)], 2 << 20,
                                        cores=64, lanes=128), declared=_declared({"model": "AMD Instinct MI250X", "count": 8}))
    (f,) = [x for x in res["findings"] if x["rule"] == "inventory.matches_declared" and "gpus.count" in x["message"]]
    assert f["remedy"].startswith("fix the hardware")
