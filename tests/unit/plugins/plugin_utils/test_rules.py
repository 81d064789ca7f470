"""The rule engine against declared and gathered documents, one test per behaviour."""
import copy

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils.rules import (
    RULE_IDS, evaluate_fleet, evaluate_host, resolve_settings)

from hwdocs import GATHERED, GOOD  # noqa: E402  (shared documents, tests/hwdocs.py)


def _hw(**changes):
    doc = copy.deepcopy(GOOD)
    for path, value in changes.items():
        node = doc
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[k]
        if value is None:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = value
    return doc


def _by_rule(result, rule):
    return [f for f in result["findings"] if f["rule"] == rule]


def _sev(result, rule):
    return sorted(set(f["severity"] for f in _by_rule(result, rule)))


def test_good_node_passes_with_catalogue_figures():
    res = evaluate_host("gpu-a01", GOOD)
    bad = [f for f in res["findings"] if f["severity"] in ("error", "warning")]
    assert bad == [] and res["status"] == "pass"
    # 2 x 56 cores and 2 x 80 lanes come from the catalogue, and say so.
    assert res["hw"]["cpu"]["cores"] == 112
    assert res["hw"]["cpu"]["pcie_lanes"] == 160
    assert "catalogue" in res["provenance"]["cpu.pcie_lanes"]
    assert res["hw"]["gpus"][0]["memory_mb"] > 140000


def test_every_finding_has_the_contract_fields():
    res = evaluate_host("ws", _hw(cpu__model="13th Gen Intel(R) Core(TM) i9-13900K", cpu__sockets=1,
                                  gpus={"model": "NVIDIA GeForce RTX 4090", "count": 4}))
    for f in res["findings"]:
        assert set(f) >= {"rule", "severity", "observed", "required", "message", "remedy"}
        assert f["rule"] in RULE_IDS
        assert f["severity"] in ("error", "warning", "info")
        if f["severity"] != "info":
            assert f["remedy"]


def test_desktop_cpu_breaks_the_lane_rule():
    res = evaluate_host("ws", _hw(cpu__model="13th Gen Intel(R) Core(TM) i9-13900K", cpu__sockets=1,
                                  gpus={"model": "NVIDIA GeForce RTX 4090", "count": 4}))
    f = _by_rule(res, "cpu.pcie_lanes")[0]
    assert f["severity"] == "error"
    assert f["required"].startswith(">= 64")
    assert str(f["observed"]).startswith("20")
    assert res["status"] == "fail"


def test_unknown_cpu_is_a_cannot_verify_warning_never_a_pass():
    res = evaluate_host("x", _hw(cpu__model="Acme Hyperscale 9000", cpu__sockets=2))
    f = _by_rule(res, "cpu.pcie_lanes")[0]
    assert f["severity"] == "warning" and "cannot verify" in f["message"]
    f = _by_rule(res, "cpu.cores_exceed_gpus")[0]
    assert f["severity"] == "warning" and "unknown" in f["message"]


def test_declared_lanes_override_the_catalogue():
    res = evaluate_host("x", _hw(cpu__model="Acme Hyperscale 9000", cpu__sockets=2, cpu__pcie_lanes=256,
                                 cpu__cores=128))
    assert _sev(res, "cpu.pcie_lanes") == ["info"]


def test_cores_fewer_than_gpus_is_an_error_and_below_recommended_a_warning():
    res = evaluate_host("x", _hw(cpu__cores=8, cpu__threads=16))
    assert _sev(res, "cpu.cores_exceed_gpus") == ["error"]
    res = evaluate_host("x", _hw(cpu__cores=48, cpu__threads=96))
    f = _by_rule(res, "cpu.cores_exceed_gpus")[0]
    assert f["severity"] == "warning" and "6.0 per GPU" in f["message"]


def test_ram_below_vram_is_error_below_twice_is_warning():
    res = evaluate_host("x", _hw(memory__total_mb=512 * 1024))
    assert _sev(res, "memory.exceeds_vram") == ["error"]
    res = evaluate_host("x", _hw(memory__total_mb=1536 * 1024))
    assert _sev(res, "memory.exceeds_vram") == ["warning"]


@pytest.mark.parametrize("ecc,expected", [("multi-bit", "info"), ("single-bit", "info"),
                                          ("none", "error"), ("unknown", "warning")])
def test_ecc_types(ecc, expected):
    res = evaluate_host("x", _hw(memory__ecc=ecc))
    assert _sev(res, "memory.ecc") == [expected]


def test_workload_80gb_rule_and_estimate():
    res = evaluate_host("x", _hw(gpus={"model": "NVIDIA L40S", "count": 4},
                                 workload={"kind": "full_finetune", "model_params_b": 13}))
    f = _by_rule(res, "gpu.vram_for_workload")[0]
    assert f["severity"] == "error" and ">= 80 GB" in f["message"]
    # 34B full fine-tune: 34 * 16 * 1.2 = 653 GB, / 8 = 82 GB per GPU: too much for 80 GB H100s...
    res = evaluate_host("x", _hw(gpus={"model": "NVIDIA H100 80GB HBM3", "count": 8}))
    assert _sev(res, "gpu.vram_for_workload") == ["error"]
    # ... fits on H200 (141 GB), and LoRA of 70B (168 GB) fits unsharded on nothing but... it is not sharded
    res = evaluate_host("x", GOOD)
    assert _sev(res, "gpu.vram_for_workload") == ["info"]
    res = evaluate_host("x", _hw(workload={"kind": "lora", "model_params_b": 7},
                                 gpus={"model": "NVIDIA GeForce RTX 4090", "count": 4}))
    assert _sev(res, "gpu.vram_for_workload") == ["info"]


def test_no_workload_is_not_checked_not_passed():
    res = evaluate_host("x", _hw(workload=None))
    f = _by_rule(res, "gpu.vram_for_workload")[0]
    assert f["severity"] == "info" and f["message"].startswith("not checked")
    assert res["rules"]["gpu.vram_for_workload"] == "skip"


def test_pcie_interconnect_warning_for_pcie_cards():
    res = evaluate_host("x", _hw(gpus={"model": "NVIDIA L40S", "count": 4}, workload=None))
    assert _sev(res, "gpu.interconnect") == ["warning"]
    assert _sev(evaluate_host("x", GOOD), "gpu.interconnect") == ["info"]


def test_storage_rules():
    res = evaluate_host("x", _hw(disks=[{"kind": "ssd", "transport": "sata", "size_bytes": 10 ** 12}]))
    assert _sev(res, "storage.nvme_hot_cache") == ["warning"]
    assert _sev(res, "storage.hdd_cold_archive") == ["warning"]
    res = evaluate_host("x", _hw(disks=[{"kind": "nvme", "size_bytes": 10 ** 12}]),
                        external_archive="nfs://archive/datasets")
    assert _sev(res, "storage.hdd_cold_archive") == ["info"]
    res = evaluate_host("x", _hw(disks=[]))
    assert _sev(res, "storage.nvme_hot_cache") == ["error"]


def test_gathered_link_width_downgrade_is_an_error_speed_is_not():
    hw = copy.deepcopy(GATHERED)
    res = evaluate_host("d", hw)
    assert _sev(res, "gpu.pcie_link") == ["info"]          # gen 1 of 4 at idle is fine
    hw["gpus"][2]["pcie"]["width"] = 8
    res = evaluate_host("d", hw)
    f = _by_rule(res, "gpu.pcie_link")[0]
    assert f["severity"] == "error" and "x8 of x16" in f["observed"] and "0000:03:00.0" in f["observed"]


def test_ecc_disabled_on_a_capable_gpu_warns():
    res = evaluate_host("d", copy.deepcopy(GATHERED))
    assert _sev(res, "gpu.ecc_mode") == ["warning"]


def test_edac_missing_with_ecc_dimms_warns_and_errors_feed_back():
    res = evaluate_host("d", copy.deepcopy(GATHERED))
    assert _sev(res, "memory.edac_active") == ["warning"]
    hw = copy.deepcopy(GATHERED)
    hw["memory"]["edac"] = {"driver": "amd64_edac", "controllers": 24, "corrected": 0, "uncorrected": 2}
    res = evaluate_host("d", hw)
    assert _sev(res, "memory.edac_active") == ["info"]
    assert _sev(res, "memory.ecc_errors") == ["error"]
    hw["memory"]["edac"].update(uncorrected=0, corrected=40)
    hw["uptime_s"] = 2 * 86400
    res = evaluate_host("d", hw)
    assert _sev(res, "memory.ecc_errors") == ["warning"]       # 20 per 24 h > 9
    hw["uptime_s"] = 30 * 86400
    assert _sev(evaluate_host("d", hw), "memory.ecc_errors") == ["info"]


def test_matches_declared_names_each_difference():
    declared = {"schema": 1, "source": "declared", "cpu": {"model": "AMD EPYC 9374F 32-Core Processor", "sockets": 2},
                "memory": {"total_mb": 393216, "ecc": "multi-bit"},
                "gpus": {"model": "NVIDIA RTX 6000 Ada Generation", "count": 8}}
    res = evaluate_host("d", copy.deepcopy(GATHERED), declared=declared)
    diffs = [f for f in _by_rule(res, "inventory.matches_declared") if f["severity"] == "error"]
    assert [f["message"] for f in diffs] == ["gpus.count: declared 8, gathered 4"]
    declared["gpus"]["count"] = 4
    res = evaluate_host("d", copy.deepcopy(GATHERED), declared=declared)
    assert _sev(res, "inventory.matches_declared") == ["info"]       # 386000 vs 393216 MB is within 5 %
    declared["memory"]["total_mb"] = 786432
    res = evaluate_host("d", copy.deepcopy(GATHERED), declared=declared)
    assert "memory.total_mb" in _by_rule(res, "inventory.matches_declared")[0]["message"]


def test_no_gpu_host_gets_honest_findings():
    hw = copy.deepcopy(GATHERED)
    hw["gpus"] = []
    res = evaluate_host("container", hw)
    f = _by_rule(res, "gpu.present")[0]
    assert f["severity"] == "error" and "no NVIDIA GPU" in f["message"]
    for rule in ("cpu.pcie_lanes", "gpu.pcie_link", "memory.exceeds_vram", "gpu.interconnect", "gpu.ecc_mode"):
        assert res["rules"][rule] == "skip"
    res = evaluate_host("container", hw, thresholds={"min_gpus": 0})
    assert _sev(res, "gpu.present") == ["info"]


@pytest.mark.parametrize("doc,path", [
    ({"schema": 1, "source": "declared", "cpu": {"sockets": -2}}, "cpu.sockets"),
    ({"schema": 1, "source": "declared", "cpu": {"cores": "many"}}, "cpu.cores"),
    ({"schema": 1, "source": "declared", "gpu": {"model": "x"}}, "gpu"),
    ({"schema": 1, "source": "declared", "memory": {"ecc": "yes-please"}}, "memory.ecc"),
    ({"schema": 1, "source": "declared", "memory": []}, "memory"),
    ({"schema": 1, "source": "declared", "gpus": [{"memory_mb": -1}]}, "gpus[0].memory_mb"),
    ({"schema": 1, "source": "declared", "cpu": {"numa_nodes": [{"id": 0, "cpus": "0-x"}]}}, "cpu.numa_nodes[0].cpus"),
    ({"schema": 2, "source": "declared"}, "schema"),
    ("not a mapping", "dlrack_hw: expected a mapping"),
])
def test_malformed_input_names_host_and_field(doc, path):
    res = evaluate_host("gpu-x01", doc)
    errs = [f for f in _by_rule(res, "inventory.schema") if f["severity"] == "error"]
    assert errs, res["findings"]
    assert any("gpu-x01" in f["message"] and path in f["message"] and "expected" in f["message"] for f in errs)
    assert res["status"] == "fail"


def test_settings_errors_name_host_and_setting():
    assert "dlrack_profile" in resolve_settings("gaming")[2][0].message()
    assert "dlrack_thresholds.cores_per_gpu" in resolve_settings("training", {"cores_per_gpu": 4})[2][0].message()
    msg = resolve_settings("training", None, {"memory.ecc": "fatal"})[2][0].message()
    assert "dlrack_severity.memory.ecc" in msg and "one of error, warning, info, off" in msg
    results, summary = evaluate_fleet({"h": {"hw": GOOD, "profile": "gaming"}, "ok": {"hw": GOOD}})
    assert results["h"]["status"] == "fail" and results["ok"]["status"] == "pass"
    assert summary["fail"] == 1 and summary["pass"] == 1
    bad = [f for f in results["h"]["findings"] if f["severity"] == "error"]
    assert [f["rule"] for f in bad] == ["inventory.schema"]
    assert "host h: dlrack_hw.dlrack_profile" not in bad[0]["message"] and "dlrack_profile" in bad[0]["message"]
    # the other rules still judged the host with the training profile
    assert results["h"]["rules"]["memory.exceeds_vram"] == "pass"


def test_profiles_and_overrides_change_severity():
    ws = _hw(memory__ecc="none")
    assert _sev(evaluate_host("x", ws, profile="workstation"), "memory.ecc") == ["warning"]
    assert _sev(evaluate_host("x", ws, severity={"memory.ecc": "off"}), "memory.ecc") == []
    res = evaluate_host("x", _hw(cpu__cores=48, cpu__threads=96), thresholds={"recommended_cores_per_gpu": 4})
    assert _sev(res, "cpu.cores_exceed_gpus") == ["info"]


def test_no_hw_at_all_is_an_error_naming_the_host():
    res = evaluate_host("lost-01", None)
    assert res["status"] == "fail"
    assert "lost-01" in res["findings"][0]["message"]


def test_deterministic():
    assert evaluate_host("x", GOOD) == evaluate_host("x", GOOD)


def test_ambiguous_gpu_model_asks_for_the_exact_one():
    res = evaluate_host("x", _hw(gpus={"model": "H100", "count": 8}))
    f = [f for f in _by_rule(res, "inventory.schema") if f["severity"] == "warning"][0]
    assert "ambiguous" in f["message"] and "H100" in f["message"]
    assert _sev(res, "memory.exceeds_vram") in (["warning"], ["info"])


def test_gathered_gpu_without_driver_gets_its_model_from_pci_ids():
    import copy as _copy
    from hwdocs import GATHERED
    hw = _copy.deepcopy(GATHERED)
    for g in hw["gpus"]:
        g["model"], g["memory_mb"] = None, None
        g["pci_name"] = "AD102GL [L6000 / RTX 6000 Ada Generation]"
    res = evaluate_host("d", hw)
    assert res["hw"]["gpus"][0]["model"] == "RTX 6000 Ada Generation"
    assert "pci.ids" in res["provenance"]["gpus.model"]
    assert res["rules"]["memory.exceeds_vram"] in ("pass", "warn")      # memory known from the catalogue
