"""The rule engine against declared and gathered documents, one test per behaviour."""
import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jinja2 import StrictUndefined

from ansible_collections.dlrack.node.plugins.plugin_utils import rules
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import Unresolved, check_hw
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import (
    DEFAULT_THRESHOLDS, RULE_IDS, RULES, classify_disks, evaluate_fleet, evaluate_host, resolve_settings)

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


# --------------------------------------------------------------------------------------------
# Hostile settings: an error finding on that host, the default used, the others unaffected
# --------------------------------------------------------------------------------------------

def _schema_errors(res):
    return [f["message"] for f in _by_rule(res, "inventory.schema") if f["severity"] == "error"]


@pytest.mark.parametrize("kwargs,names", [
    ({"thresholds": "recommended_cores_per_gpu=4"}, "dlrack_thresholds: expected a mapping"),
    ({"thresholds": {"recommended_cores_per_gpu": float("nan")}}, "dlrack_thresholds.recommended_cores_per_gpu"),
    ({"thresholds": {"recommended_cores_per_gpu": "Infinity"}}, "dlrack_thresholds.recommended_cores_per_gpu"),
    ({"thresholds": {"min_gpus": 10 ** 400}}, "dlrack_thresholds.min_gpus: expected an integer from 0 to 128"),
    ({"thresholds": {"min_gpus": "\u00b2"}}, "dlrack_thresholds.min_gpus"),
    ({"thresholds": {"min_gpus": 1.5}}, "dlrack_thresholds.min_gpus"),
    ({"thresholds": {"workload_bytes_per_param": "16"}}, "dlrack_thresholds.workload_bytes_per_param: expected a mapping"),
    ({"thresholds": {"workload_bytes_per_param": {"lora": float("nan")}}}, "workload_bytes_per_param.lora"),
    ({"thresholds": {"workload_bytes_per_param": {"qlora": 1}}}, "workload_bytes_per_param.qlora"),
    ({"severity": "memory.ecc=off"}, "dlrack_severity: expected a mapping"),
    ({"severity": {"memory.ecc": 0}}, "dlrack_severity.memory.ecc: expected one of error, warning, info, off"),
    ({"severity": {"memory.ecc": StrictUndefined(name="lvl")}}, "an undefined variable (lvl)"),
    ({"severity": {"inventory.schema": "off"}}, "dlrack_severity.inventory.schema: expected error or warning"),
    ({"severity": {"no.such.rule": "off"}}, "dlrack_severity.no.such.rule: expected a rule id"),
    ({"workload": "lora 7b"}, "dlrack_workload: expected a mapping"),
    ({"workload": {"kind": "lora", "model_params_b": float("nan")}}, "dlrack_workload.model_params_b"),
    ({"workload": {"kind": "lora", "model_params_b": "inf"}}, "dlrack_workload.model_params_b"),
    ({"workload": {"kind": "dreaming", "model_params_b": 7}}, "dlrack_workload.kind: expected one of"),
    ({"external_archive": 42}, "dlrack_external_archive: expected the archive's URL"),
    ({"external_archive": "{{ archive_url }}"}, "unresolved Jinja expression"),
    ({"profile": "gaming"}, "dlrack_profile: expected one of inference, training, workstation"),
    ({"profile": Unresolved("'prof' is undefined")}, "could not template ('prof' is undefined)"),
])
def test_bad_per_host_settings_are_findings_on_that_host(kwargs, names):
    doc = _hw(workload=None)
    results, summary = evaluate_fleet({"bad": dict(hw=doc, **kwargs), "good": {"hw": GOOD}})
    bad = results["bad"]
    assert bad["status"] == "fail" and results["good"]["status"] == "pass"
    errors = _schema_errors(bad)
    assert len(errors) == 1 and errors[0].startswith("host bad: ") and names in errors[0], errors
    # the default replaced the bad value and every other rule still judged the host
    assert bad["rules"]["memory.exceeds_vram"] == "pass" and bad["rules"]["cpu.pcie_lanes"] == "pass"
    text = json.dumps(results, allow_nan=False)
    assert "nanB" not in text and "NaN" not in text


def test_the_default_threshold_is_used_when_the_override_is_bad():
    res = evaluate_host("x", _hw(cpu__cores=48, cpu__threads=96), thresholds={"recommended_cores_per_gpu": "lots"})
    assert [f["required"] for f in _by_rule(res, "cpu.cores_exceed_gpus")] == [">= 64 (8 per GPU)"]


def test_valid_overrides_as_strings_and_mixed_case():
    res = evaluate_host("x", _hw(cpu__cores=48, cpu__threads=96), thresholds={"recommended_cores_per_gpu": "6"},
                        severity={"gpu.interconnect": " Off "}, profile="Training")
    assert _schema_errors(res) == [] and _sev(res, "cpu.cores_exceed_gpus") == ["info"]
    assert "gpu.interconnect" not in res["rules"]


# --------------------------------------------------------------------------------------------
# Severity overrides: off = not run, not reported; info = reported as information only
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("doc,rule", [
    (_hw(cpu__cores=48, cpu__threads=96), "cpu.cores_exceed_gpus"),                 # a "below recommended" warning
    (_hw(memory__total_mb=1536 * 1024), "memory.exceeds_vram"),                       # a warning
    (_hw(memory__total_mb=512 * 1024), "memory.exceeds_vram"),                        # an error
    (_hw(disks=[{"kind": "ssd", "size_bytes": 10 ** 12}]), "storage.nvme_hot_cache"),  # a warning
    (_hw(cpu__model="Acme 9000"), "cpu.pcie_lanes"),                                  # cannot verify
])
def test_off_and_info_are_honoured_for_every_kind_of_finding(doc, rule):
    plain = evaluate_host("x", doc)
    assert set(_sev(plain, rule)) & {"error", "warning"}
    off = evaluate_host("x", doc, severity={rule: "off"})
    assert _by_rule(off, rule) == [] and rule not in off["rules"]
    info = evaluate_host("x", doc, severity={rule: "info"})
    assert _sev(info, rule) == ["info"] and info["rules"][rule] == "pass"
    assert _by_rule(info, rule)[0]["message"] == _by_rule(plain, rule)[0]["message"]
    warn = evaluate_host("x", doc, severity={rule: "warning"})
    assert _sev(warn, rule) == ["warning"]


def test_memory_errors_follow_the_severity_override():
    hw = copy.deepcopy(GATHERED)
    hw["memory"]["edac"] = {"driver": "amd64_edac", "controllers": 24, "corrected": 0, "uncorrected": 2}
    assert _sev(evaluate_host("d", hw, severity={"memory.ecc_errors": "warning"}), "memory.ecc_errors") == ["warning"]
    assert _sev(evaluate_host("d", hw, severity={"memory.ecc_errors": "info"}), "memory.ecc_errors") == ["info"]
    assert _by_rule(evaluate_host("d", hw, severity={"memory.ecc_errors": "off"}), "memory.ecc_errors") == []


# --------------------------------------------------------------------------------------------
# Profiles
# --------------------------------------------------------------------------------------------

def test_inference_profile():
    doc = _hw(cpu__cores=32, cpu__threads=64, memory__total_mb=int(1.5 * 8 * 143771), workload=None,
              gpus={"model": "NVIDIA L40S", "count": 8})
    training, inference = evaluate_host("x", doc), evaluate_host("x", doc, profile="inference")
    assert inference["profile"] == "inference" and training["profile"] == "training"
    assert _sev(training, "cpu.cores_exceed_gpus") == ["warning"]      # 4 per GPU < 8
    assert _sev(inference, "cpu.cores_exceed_gpus") == ["info"]        # 4 per GPU is enough to serve
    assert _sev(training, "gpu.interconnect") == ["warning"] and _sev(inference, "gpu.interconnect") == ["info"]
    ram_short = _hw(memory__total_mb=512 * 1024)
    assert _sev(evaluate_host("x", ram_short), "memory.exceeds_vram") == ["error"]
    assert _sev(evaluate_host("x", ram_short, profile="inference"), "memory.exceeds_vram") == ["warning"]
    desk = _hw(cpu__model="13th Gen Intel(R) Core(TM) i9-13900K", cpu__sockets=1,
               gpus={"model": "NVIDIA GeForce RTX 4090", "count": 4})
    assert _sev(evaluate_host("x", desk, profile="inference"), "cpu.pcie_lanes") == ["warning"]
    no_hdd = _hw(disks=[{"kind": "nvme", "size_bytes": 10 ** 12}])
    assert _sev(evaluate_host("x", no_hdd, profile="inference"), "storage.hdd_cold_archive") == ["info"]
    # RAM 1.5x VRAM: below training's 2x recommendation, at inference's 1x
    ram = _hw(memory__total_mb=int(1.5 * 8 * 143771 / 1.0))
    assert _sev(evaluate_host("x", ram), "memory.exceeds_vram") == ["warning"]
    assert _sev(evaluate_host("x", ram, profile="inference"), "memory.exceeds_vram") == ["info"]


def test_workstation_profile():
    doc = _hw(cpu__model="13th Gen Intel(R) Core(TM) i9-13900K", cpu__sockets=1, memory__ecc="none",
              gpus={"model": "NVIDIA GeForce RTX 4090", "count": 2}, disks=[{"kind": "nvme", "size_bytes": 10 ** 12}],
              workload=None)
    res = evaluate_host("ws", doc, profile="workstation")
    assert _sev(res, "memory.ecc") == ["warning"] and _sev(res, "cpu.pcie_lanes") == ["warning"]
    assert _sev(res, "gpu.interconnect") == ["info"] and _sev(res, "storage.hdd_cold_archive") == ["info"]
    assert res["status"] == "warn"
    assert _sev(evaluate_host("ws", doc), "memory.ecc") == ["error"]
    hw = copy.deepcopy(GATHERED)
    assert _sev(evaluate_host("d", hw, profile="workstation"), "gpu.ecc_mode") == ["info"]
    assert _sev(evaluate_host("d", hw, profile="workstation"), "memory.edac_active") == ["info"]
    hw = copy.deepcopy(GATHERED)
    hw["cpu"].update(cores=16, threads=16)      # 4 per GPU: enough on a workstation, not for training
    assert _sev(evaluate_host("d", hw, profile="workstation"), "cpu.cores_exceed_gpus") == ["info"]
    assert _sev(evaluate_host("d", copy.deepcopy(hw)), "cpu.cores_exceed_gpus") == ["warning"]


# --------------------------------------------------------------------------------------------
# Boundaries
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cores,expected", [(8, "error"), (9, "warning"), (63, "warning"), (64, "info"), (65, "info")])
def test_cores_per_gpu_boundaries(cores, expected):
    res = evaluate_host("x", _hw(cpu__cores=cores, cpu__threads=cores))      # 8 GPUs
    assert _sev(res, "cpu.cores_exceed_gpus") == [expected]


def test_no_gpu_and_unknown_cores():
    res = evaluate_host("x", _hw(gpus=[], workload=None))
    f = _by_rule(res, "cpu.cores_exceed_gpus")[0]
    assert f["severity"] == "info" and f["required"] == "> 0"
    res = evaluate_host("x", _hw(cpu__model=None))
    assert _sev(res, "cpu.cores_exceed_gpus") == ["warning"] and _sev(res, "cpu.pcie_lanes") == ["warning"]


@pytest.mark.parametrize("ram_mb,expected", [(8 * 143771, "error"), (8 * 143771 + 1, "warning"),
                                             (2 * 8 * 143771 - 1, "warning"), (2 * 8 * 143771, "info")])
def test_ram_to_vram_boundaries(ram_mb, expected):
    res = evaluate_host("x", _hw(memory__total_mb=ram_mb, gpus=[{"model": "NVIDIA H200", "memory_mb": 143771}] * 8))
    assert _sev(res, "memory.exceeds_vram") == [expected]


@pytest.mark.parametrize("lanes,expected", [(127, "error"), (128, "info")])
def test_lane_boundary(lanes, expected):
    res = evaluate_host("x", _hw(cpu__pcie_lanes=lanes))
    f = _by_rule(res, "cpu.pcie_lanes")[0]
    assert f["severity"] == expected and f["required"] == ">= 128 (x16 per GPU)"
    assert f["observed"] == str(lanes)


@pytest.mark.parametrize("n,need,expected", [(1, 1, "info"), (1, 2, "error"), (0, 0, "info")])
def test_min_gpus_boundary(n, need, expected):
    res = evaluate_host("x", _hw(gpus=[{"model": "NVIDIA H200"}] * n, workload=None), thresholds={"min_gpus": need})
    assert _sev(res, "gpu.present") == [expected] and _by_rule(res, "gpu.present")[0]["observed"] == n


def test_undeclared_gpus_are_unknown_not_none():
    res = evaluate_host("x", _hw(gpus=None, workload=None))
    assert _sev(res, "gpu.present") == ["warning"] and "unknown" in _by_rule(res, "gpu.present")[0]["message"]


@pytest.mark.parametrize("params_b,mem_mb,count,kind,expected", [
    (7, 81920, 1, "full_finetune", "error"),         # 7 * 16 * 1.2 = 134.4 GB on one 80 GB GPU
    (7, 81920, 2, "full_finetune", "info"),          # 67.2 GB per GPU
    (7, 49152, 8, "full_finetune", "error"),         # 7B is "large": needs 80 GB-class GPUs
    (6.9, 49152, 8, "full_finetune", "info"),        # 6.9B is not
    (7, 79 * 1024 + 512, 8, "full_finetune", "info"),  # 79.5 GB counts as 80 GB-class (half a GB of slack)
    (7, 79 * 1024 + 511, 8, "full_finetune", "error"),
    (10, 12288, 1, "lora", "error"),                 # 10 * 2 * 1.2 = 24 GB, unsharded
    (10, 24576, 1, "lora", "info"),                  # exactly fits
    (10, 24576, 8, "lora", "info"),
    (40, 12288, 8, "inference", "info"),             # 96 GB sharded over 8: 12 GB each, exactly fits
    (40, 12287, 8, "inference", "error"),
    (1, 16384, 2, "pretrain", "info"),
])
def test_workload_estimate_boundaries(params_b, mem_mb, count, kind, expected):
    doc = _hw(gpus=[{"model": "NVIDIA L40S", "memory_mb": mem_mb}] * count,
              workload={"kind": kind, "model_params_b": params_b})
    assert _sev(evaluate_host("x", doc), "gpu.vram_for_workload") == [expected]


def test_workload_kinds_and_sources():
    doc = _hw(workload=None, gpus=[{"model": "NVIDIA L40S", "memory_mb": 49152}] * 2)
    res = evaluate_host("x", doc, workload={"model_params_b": 7})           # kind defaults to full fine-tuning
    f = _by_rule(res, "gpu.vram_for_workload")[0]
    assert f["severity"] == "error" and f["required"] == "67 GB per GPU for full_finetune 7B"
    res = evaluate_host("x", _hw(workload={"kind": "lora", "model_params_b": 1}), workload={"model_params_b": 1000})
    assert _sev(res, "gpu.vram_for_workload") == ["info"]                   # the document's workload wins
    res = evaluate_host("x", _hw(gpus=[], workload={"kind": "lora", "model_params_b": 1}))
    assert _sev(res, "gpu.vram_for_workload") == ["error"]
    res = evaluate_host("x", _hw(gpus=[{"model": "Acme X"}], workload={"kind": "lora", "model_params_b": 1}))
    assert _sev(res, "gpu.vram_for_workload") == ["warning"]
    res = evaluate_host("x", _hw(workload={"kind": "lora", "model_params_b": 0}))
    assert res["rules"]["gpu.vram_for_workload"] == "skip"
    res = evaluate_host("x", doc, workload={"model_params_b": 1}, thresholds={"workload_bytes_per_param": {
        "full_finetune": 100}})
    assert _sev(res, "gpu.vram_for_workload") == ["error"] and _schema_errors(res) == []


@pytest.mark.parametrize("controllers,expected", [(0, "warning"), (1, "info"), (24, "info")])
def test_exactly_one_edac_controller_is_active(controllers, expected):
    hw = copy.deepcopy(GATHERED)
    hw["memory"]["edac"] = {"driver": "skx_edac", "controllers": controllers, "corrected": 0, "uncorrected": 0}
    res = evaluate_host("d", hw)
    assert _sev(res, "memory.edac_active") == [expected]
    if controllers:
        assert _by_rule(res, "memory.edac_active")[0]["observed"] == "skx_edac"


def test_edac_without_ecc_dimms():
    hw = copy.deepcopy(GATHERED)
    hw["memory"].update(ecc="unknown", edac={"driver": "ghes_edac", "controllers": 1, "corrected": 0, "uncorrected": 0})
    assert _sev(evaluate_host("d", hw), "memory.edac_active") == ["info"]
    hw["memory"]["edac"] = None
    res = evaluate_host("d", hw)
    assert _sev(res, "memory.edac_active") == ["warning"] and res["rules"]["memory.ecc_errors"] == "skip"
    assert _by_rule(evaluate_host("x", GOOD), "memory.edac_active")[0]["skipped"] is True


@pytest.mark.parametrize("corrected,expected", [(9, "info"), (10, "warning")])
def test_corrected_error_budget_boundary(corrected, expected):
    hw = copy.deepcopy(GATHERED)
    hw["memory"]["edac"] = {"driver": "amd64_edac", "controllers": 2, "corrected": corrected, "uncorrected": 0}
    hw["uptime_s"] = 86400
    assert _sev(evaluate_host("d", hw), "memory.ecc_errors") == [expected]
    assert _sev(evaluate_host("d", hw, thresholds={"ecc_corrected_budget_24h": 20}), "memory.ecc_errors") == ["info"]


def test_pcie_link_unknown_width_and_declared_skip():
    hw = copy.deepcopy(GATHERED)
    hw["gpus"][1]["pcie"] = {"width": None, "width_max": 16}
    f = _by_rule(evaluate_host("d", hw), "gpu.pcie_link")[0]
    assert f["severity"] == "warning" and f["observed"] == "unknown for GPU1 0000:02:00.0"
    hw["gpus"][1]["pcie"] = {"width": 16, "width_max": 16}
    assert _by_rule(evaluate_host("d", hw), "gpu.pcie_link")[0]["observed"] == "x16"
    assert evaluate_host("x", GOOD)["rules"]["gpu.pcie_link"] == "skip"


def test_interconnect_states():
    hw = copy.deepcopy(GATHERED)
    for g in hw["gpus"]:
        g["nvlink_active"] = 4
    f = _by_rule(evaluate_host("d", hw), "gpu.interconnect")[0]
    assert f["severity"] == "info" and f["observed"] == "NVLink (4 links on GPU0)"
    hw["gpus"][3]["nvlink_active"] = 0
    f = _by_rule(evaluate_host("d", hw), "gpu.interconnect")[0]
    assert f["severity"] == "warning" and f["observed"] == "NVLink on 3 of 4 GPUs"
    for g in hw["gpus"]:
        g["nvlink_active"] = None
    assert _by_rule(evaluate_host("d", hw), "gpu.interconnect")[0]["observed"] == \
        "no NVLink (model NVIDIA RTX 6000 Ada Generation)"
    assert _by_rule(evaluate_host("d", copy.deepcopy(GATHERED)), "gpu.interconnect")[0]["observed"] == "PCIe only"
    for g in hw["gpus"]:
        g["model"], g["memory_mb"] = None, 49140
    f = _by_rule(evaluate_host("d", hw), "gpu.interconnect")[0]
    assert f["severity"] == "warning" and "GPU model unknown" in f["message"]
    assert evaluate_host("x", _hw(gpus=[{"model": "NVIDIA L40S"}], workload=None))["rules"]["gpu.interconnect"] == "skip"


def test_gpu_ecc_states():
    hw = copy.deepcopy(GATHERED)
    f = _by_rule(evaluate_host("d", hw), "gpu.ecc_mode")[0]
    assert f["observed"] == "disabled on GPU0, GPU1, GPU2, GPU3"
    for g in hw["gpus"]:
        g["ecc_enabled"] = True
    assert _sev(evaluate_host("d", hw), "gpu.ecc_mode") == ["info"]
    hw["gpus"][0]["ecc_enabled"] = None
    assert evaluate_host("d", hw)["rules"]["gpu.ecc_mode"] == "skip"
    hw = copy.deepcopy(GATHERED)
    for g in hw["gpus"]:
        g["model"] = "NVIDIA GeForce RTX 4090"          # no ECC on this card: disabled is not a finding
    assert _sev(evaluate_host("d", hw), "gpu.ecc_mode") == ["info"]


# --------------------------------------------------------------------------------------------
# Storage: one classification of data disks (issue 11.4), on what the h200-vm capture reports
# --------------------------------------------------------------------------------------------

def _vm_disk(name, size, mounted, system, serial):
    return {"name": name, "path": "/dev/" + name, "by_id": None, "by_id_all": [], "kind": "hdd", "transport": "virtio",
            "size_bytes": size, "model": None, "serial": serial, "wwid": None, "wwn": None, "rotational": True,
            "removable": False, "probe": None,
            "in_use": {"mounted": mounted, "holders": [], "partitions": [], "signatures": [], "system": system}}


# What hw_facts reports on the h200-vm capture (tests data: ../shared/fixtures/real/h200-vm, SOURCES.md):
# vda the root ext4, vdb a 318 MB read-only squashfs holding the NVIDIA driver.
H200_VM = {
    "schema": 1, "source": "gathered",
    "cpu": {"model": "Intel(R) Xeon(R) Processor", "vendor": "intel", "sockets": 1, "cores": 16, "threads": 16,
            "pcie_lanes": None, "numa_nodes": [{"id": 0, "cpus": "0-15", "memory_mb": 128887}],
            "cores_per_socket": 16, "threads_per_core": 1, "vendor_id": "GenuineIntel", "family": 6,
            "model_id": 207, "stepping": 2},
    "memory": {"total_mb": 128887, "ecc": "unknown", "edac": None},
    "gpus": [{"index": 0, "uuid": "GPU-0", "model": "NVIDIA H200", "memory_mb": 143771, "pci_bus_id": "0000:00:06.0",
              "numa_node": -1, "local_cpus": "0-15",
              "pcie": {"width": 16, "width_max": 16, "gen": 5, "gen_max": 5, "gen_host_max": None, "speed": 32.0,
                       "speed_max": 32.0},
              "ecc_enabled": True, "nvlink_active": None, "driver": "nvidia", "vendor_id": "0x10de",
              "device_id": "0x2335", "pci_name": None}],
    "disks": [_vm_disk("vda", 274877906944, ["/"], True, "overlayblk"),
              _vm_disk("vdb", 318332928, ["/usr/local/nvidia"], False, "199048143072")],
    "host": {"hostname": "h200", "kernel": "6.8", "virtualization": "kvm", "product": None, "manufacturer": None},
    "uptime_s": 5000.0, "errors": [],
}


def test_h200_vm_storage_rules_agree():
    disks = classify_disks(copy.deepcopy(H200_VM), 8)
    assert [(d["name"], why) for d, why in disks["excluded"]] == [("vda", "system disk"), ("vdb", "0.3 GB, below 8 GB")]
    assert disks["nvme"] == disks["ssd"] == disks["hdd"] == disks["virtual"] == []
    res = evaluate_host("h200", copy.deepcopy(H200_VM))
    hot = _by_rule(res, "storage.nvme_hot_cache")[0]
    assert hot["severity"] == "error" and hot["message"] == "no local data disk at all"
    assert hot["observed"] == "no data disk (vda: system disk; vdb: 0.3 GB, below 8 GB)"
    cold = _by_rule(res, "storage.hdd_cold_archive")[0]
    assert cold["severity"] == "warning" and cold["observed"] == "no HDD"
    assert _sev(res, "memory.exceeds_vram") == ["error"]        # 126 GiB RAM < 140 GiB GPU
    assert _sev(res, "gpu.pcie_link") == ["info"] and _sev(res, "gpu.ecc_mode") == ["info"]
    assert _schema_errors(res) == []


@pytest.mark.parametrize("kind", ["hdd", None])       # virtio: rotational=1 means nothing, hw_facts says None
def test_h200_vm_with_a_data_volume(kind):
    hw = copy.deepcopy(H200_VM)
    hw["disks"].append(dict(_vm_disk("vdc", 2 * 10 ** 12, [], False, "data"), kind=kind))
    res = evaluate_host("h200", hw)
    hot = _by_rule(res, "storage.nvme_hot_cache")[0]
    assert hot["severity"] == "warning" and hot["observed"] == "1 virtual disk(s), no data NVMe"
    assert _by_rule(res, "storage.hdd_cold_archive")[0]["observed"] == "no HDD"      # virtio: medium unknown


@pytest.mark.parametrize("disk,why", [
    ({"kind": "hdd", "size_bytes": 10 ** 13, "read_only": True}, "read-only"),
    ({"kind": "hdd", "size_bytes": 10 ** 13, "in_use": {"signatures": ["squashfs"]}}, "read-only squashfs"),
    ({"kind": "ssd", "size_bytes": 10 ** 12, "removable": True}, "removable"),
    ({"kind": "nvme", "size_bytes": 8 * 10 ** 9 - 1}, "8.0 GB, below 8 GB"),
    ({"size_bytes": 10 ** 12}, "kind unknown"),
    ({"kind": "nvme", "size_bytes": 10 ** 12, "in_use": {"system": True}}, "system disk"),
    ({"kind": "hdd", "size_bytes": 10 ** 13, "in_use": {"signatures": ["vdb:squashfs"]}}, "read-only squashfs"),
    ({"kind": "ssd", "size_bytes": 10 ** 12, "role": "removable"}, "removable"),     # hw_facts' own verdict
    ({"kind": "ssd", "size_bytes": 10 ** 12, "role": "system"}, "system disk"),
])
def test_what_is_not_a_data_disk(disk, why):
    clean, problems = check_hw({"source": "declared", "disks": [disk]})
    assert problems == []
    assert [w for dummy, w in classify_disks(clean, 8)["excluded"]] == [why]


def test_data_disks_by_kind():
    clean, dummy = check_hw({"source": "declared", "disks": [
        {"kind": "nvme", "size_bytes": 8 * 10 ** 9}, {"kind": "hdd", "transport": "sas", "count": 3},
        {"kind": "ssd", "transport": "sata"}, {"kind": "nvme", "transport": "virtio"}]})
    disks = classify_disks(clean, 8)
    assert [len(disks[k]) for k in ("nvme", "ssd", "hdd", "virtual", "excluded")] == [2, 1, 3, 0, 0]


def test_only_the_system_nvme():
    res = evaluate_host("x", _hw(disks=[{"kind": "nvme", "size_bytes": 10 ** 12, "in_use": {"system": True}}]))
    f = _by_rule(res, "storage.nvme_hot_cache")[0]
    assert f["severity"] == "warning" and f["observed"] == "only the system NVMe"
    res = evaluate_host("x", _hw(disks=[{"kind": "ssd", "transport": "sata", "size_bytes": 10 ** 12},
                                        {"kind": "hdd", "transport": "sas", "size_bytes": 10 ** 13}]))
    f = _by_rule(res, "storage.nvme_hot_cache")[0]
    assert f["observed"] == "1 SATA/SAS SSD, 1 HDD, no data NVMe"
    assert _by_rule(res, "storage.hdd_cold_archive")[0]["observed"] == "1 HDD"
    res = evaluate_host("x", _hw(disks=None))
    assert _sev(res, "storage.nvme_hot_cache") == ["warning"] and _sev(res, "storage.hdd_cold_archive") == ["warning"]
    res = evaluate_host("x", _hw(disks=None), external_archive="s3://cold")
    assert _by_rule(res, "storage.hdd_cold_archive")[0]["observed"] == "external: s3://cold"


def test_matches_declared_disks_and_models():
    declared = {"schema": 1, "source": "declared", "cpu": {"model": "AMD EPYC 9374F 32-Core Processor", "sockets": 2},
                "gpus": {"model": "NVIDIA RTX 6000 Ada Generation", "count": 4},
                "disks": [{"kind": "nvme", "count": 16}]}
    res = evaluate_host("d", copy.deepcopy(GATHERED), declared=declared)      # 16 data NVMe + the system one
    assert _sev(res, "inventory.matches_declared") == ["info"]
    declared["disks"] = [{"kind": "nvme", "count": 17}]
    assert _sev(evaluate_host("d", copy.deepcopy(GATHERED), declared=declared), "inventory.matches_declared") == ["info"]
    declared["disks"] = [{"kind": "nvme", "count": 8}, {"kind": "hdd", "count": 2}]
    res = evaluate_host("d", copy.deepcopy(GATHERED), declared=declared)
    assert [f["message"] for f in _by_rule(res, "inventory.matches_declared")] == [
        "disks.nvme: declared 8, gathered 16", "disks.hdd: declared 2, gathered 0"]
    declared.update(disks=None, cpu={"model": "Intel(R) Xeon(R) Platinum 8480+", "sockets": 1},
                    gpus={"model": "NVIDIA H100 80GB HBM3", "count": 4})
    msgs = [f["message"] for f in _by_rule(evaluate_host("d", copy.deepcopy(GATHERED), declared=declared),
                                           "inventory.matches_declared")]
    assert [m.split(":")[0] for m in msgs] == ["gpus.model", "cpu.model", "cpu.sockets"]
    declared["cpu"]["sockets"] = "two"
    f = _by_rule(evaluate_host("d", copy.deepcopy(GATHERED), declared=declared), "inventory.matches_declared")[0]
    assert f["severity"] == "warning" and "malformed" in f["message"] and "cpu.sockets" in f["message"]
    assert "inventory.matches_declared" not in evaluate_host("x", GOOD, declared=GOOD)["rules"]


def test_registry_declares_each_rule_once():
    assert len(RULE_IDS) == len(set(RULE_IDS)) == len(rules.registry())
    assert RULE_IDS[0] == "inventory.schema" and RULE_IDS[-1] == "inventory.matches_declared"
    assert dict(RULES)["memory.ecc"] == "ECC memory"
    for r in rules.registry():
        assert r.doc.format(**DEFAULT_THRESHOLDS) and r.severity in ("error", "warning", "info")
    with pytest.raises(ValueError):
        rules.rule("memory.ecc", "a second rule with the same id", "error", doc="x")
    with pytest.raises(ValueError):
        rules.rule("memory.new", "a rule with an unknown severity", "fatal", doc="x")
    assert len(rules.registry()) == len(RULE_IDS)


@pytest.mark.parametrize("doc", [GOOD, GATHERED], ids=["declared", "gathered"])
def test_each_check_files_its_findings_under_its_own_id(doc):
    """A check reports through ctx.report/ctx.skip without naming a rule: each finding it makes
    carries the id of the rule that ran it."""
    th, sev, dummy = resolve_settings()
    ctx = rules._Ctx("h", sev)
    ctx.th = th
    ctx.declared = copy.deepcopy(GOOD)
    assert rules._prepare(ctx, copy.deepcopy(doc))
    ctx.workload = ctx.hw.get("workload")
    seen = set()
    for r in rules.registry():
        before = len(ctx.findings)
        r.run(ctx)
        assert set(f["rule"] for f in ctx.findings[before:]) <= {r.id}
        seen.update(f["rule"] for f in ctx.findings[before:])
    # every rule of 0.1.0 reports on these documents (one may skip silently); the shadow rules added
    # since judge optional sections (pcie, power, fabric, versions, gpu_faults) that these documents do
    # not hold, and a document without the section gets no outcome from them (goldens unchanged)
    first = [r.id for r in rules.registry() if not r.shadow]
    assert len(seen & set(first)) >= len(first) - 1


def test_hostile_names_and_documents_in_a_fleet():
    hosts = {'x" onmouseover="alert(1)': {"hw": GOOD}, "\x00\x1b[31m": {"hw": "junk"}, "n": {"hw": None},
             "u": {"hw": {"cpu": {"model": StrictUndefined(name="m")}}}, "plain": {"hw": GOOD}}
    results, summary = evaluate_fleet(hosts)
    assert set(results) == set(hosts) and summary["hosts"] == 5
    assert [results[h]["status"] for h in sorted(hosts)] == ["fail", "fail", "pass", "fail", "pass"]
    assert "host n: dlrack_hw: expected a hardware description, got None" in _schema_errors(results["n"])
    assert "undefined variable (m)" in _schema_errors(results["u"])[0]
    json.dumps(results, allow_nan=False)


# --------------------------------------------------------------------------------------------
# Property: whatever the declarations, settings and names, every host gets a finite verdict
# --------------------------------------------------------------------------------------------

_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10 ** 30), max_value=10 ** 30), st.just(10 ** 400),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["\u00b2", "{{ x }}", "nan", "Infinity", "1e999", "0-99999999", "NVIDIA H200", "-1", "8",
                     "multi-bit", "nvme", "lora", "off", "info"]),
    st.builds(StrictUndefined, name=st.just("v")), st.builds(Unresolved, st.just("'v' is undefined")))
_VALUES = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(
        ["id", "cpus", "model", "count", "memory_mb", "kind", "size_bytes", "index", "numa_node", "sockets",
         "model_params_b", "x"]), inner, max_size=4)), max_leaves=12)
_FIELDS = {
    "cpu": ["model", "sockets", "cores", "threads", "pcie_lanes", "numa_nodes", "core_cpus", "vendor"],
    "memory": ["total_mb", "ecc", "edac"],
    "workload": ["kind", "model_params_b", "dataset_gb"],
}


def _section(name):
    return st.one_of(_VALUES, st.dictionaries(st.sampled_from(_FIELDS[name] + ["bogus"]), _VALUES, max_size=5))


_GPU = st.dictionaries(st.sampled_from(["model", "memory_mb", "index", "numa_node", "count", "local_cpus", "pcie",
                                        "ecc_enabled", "nvlink_active"]), _VALUES, max_size=5)
_DISK = st.dictionaries(st.sampled_from(["kind", "size_bytes", "count", "transport", "in_use", "read_only"]),
                        _VALUES, max_size=4)
_DOCS = st.one_of(_VALUES, st.fixed_dictionaries({}, optional={
    "schema": st.one_of(st.just(1), _VALUES), "source": st.sampled_from(["declared", "gathered", "x"]),
    "cpu": _section("cpu"), "memory": _section("memory"), "workload": _section("workload"),
    "gpus": st.one_of(st.lists(_GPU, max_size=3), _GPU, _VALUES), "disks": st.one_of(st.lists(_DISK, max_size=3), _VALUES),
    "uptime_s": _VALUES}))
_SETTINGS = st.fixed_dictionaries({"hw": _DOCS}, optional={
    "profile": st.one_of(st.sampled_from(["training", "inference", "workstation", "gaming"]), _VALUES),
    "thresholds": st.one_of(st.dictionaries(st.sampled_from(sorted(DEFAULT_THRESHOLDS) + ["bogus"]), _VALUES,
                                            max_size=3), _VALUES),
    "severity": st.one_of(st.dictionaries(st.sampled_from(list(RULE_IDS) + ["bogus"]),
                                          st.one_of(st.sampled_from(["error", "warning", "info", "off"]), _VALUES),
                                          max_size=3), _VALUES),
    "workload": _section("workload"), "external_archive": _VALUES, "declared": _DOCS})


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.text(max_size=20), _SETTINGS, min_size=1, max_size=4))
def test_fleet_property_every_host_gets_a_finite_verdict(fleet):
    results, summary = evaluate_fleet(fleet)
    assert set(results) == set(fleet) and summary["hosts"] == len(fleet)
    for name, res in results.items():
        assert res["status"] in ("pass", "warn", "fail")
        assert res["profile"] in ("training", "inference", "workstation")
        for f in res["findings"]:
            assert f["rule"] in RULE_IDS and f["severity"] in ("error", "warning", "info")
            assert isinstance(f["message"], str)
            assert f["observed"] is None or isinstance(f["observed"], (str, int, float))
        if any(f["rule"] == "inventory.schema" and f["severity"] == "error" for f in res["findings"]):
            assert res["status"] == "fail"
            assert all(f["message"].startswith("host %s: " % name) for f in _by_rule(res, "inventory.schema"))
    json.dumps([results, summary], allow_nan=False)


@pytest.mark.parametrize("key,lowest,highest", [
    ("min_gpus", 0, 128), ("recommended_cores_per_gpu", 0, 1024), ("pcie_lanes_per_gpu", 0, 64),
    ("ram_to_vram_min", 0, 100), ("ram_to_vram_recommended", 0, 100), ("large_model_params_b", 0, 1e6),
    ("large_model_min_vram_gb", 0, 1e6), ("workload_overhead", 1, 100), ("ram_match_tolerance_pct", 0, 100),
    ("ecc_corrected_budget_24h", 0, 1e9), ("data_disk_min_gb", 0, 1e6)])
def test_threshold_bounds(key, lowest, highest):
    for value, ok in ((lowest, True), (highest, True), (lowest - 1, False), (highest + 1, False)):
        th, dummy, problems = resolve_settings("training", {key: value})
        assert (problems == [] and th[key] == value) if ok else (
            [p.path for p in problems] == ["dlrack_thresholds." + key] and th[key] == DEFAULT_THRESHOLDS[key])


@pytest.mark.parametrize("value,ok", [(0, False), (0.5, True), (1024, True), (1025, False)])
def test_bytes_per_param_bounds(value, ok):
    for kind in ("full_finetune", "pretrain", "lora", "inference"):
        th, dummy, problems = resolve_settings("training", {"workload_bytes_per_param": {kind: value}})
        assert (problems == []) is ok
        assert th["workload_bytes_per_param"][kind] == (value if ok else DEFAULT_THRESHOLDS["workload_bytes_per_param"][kind])


def test_catalogue_provenance_is_named():
    res = evaluate_host("x", GOOD)
    assert res["hw"]["cpu"]["threads"] == 224 and res["hw"]["cpu"]["vendor"] == "intel"
    assert res["provenance"]["cpu.cores"] == res["provenance"]["cpu.threads"] == "catalogue: Intel Xeon Platinum 8480+ x 2"
    assert res["provenance"]["cpu.pcie_lanes"] == "catalogue: 2 x 80 lanes per socket (Intel Xeon Platinum 8480+)"
    res = evaluate_host("x", _hw(cpu__sockets=None))
    assert res["provenance"]["cpu.sockets"] == "assumed 1 socket (not declared)" and res["hw"]["cpu"]["cores"] == 56
    res = evaluate_host("x", _hw(cpu__threads=200, cpu__cores=100, cpu__vendor="other"))
    assert "cpu.threads" not in res["provenance"] and res["hw"]["cpu"]["vendor"] == "other"


def test_schema_pass_finding():
    doc = _hw()
    del doc["schema"]
    f = _by_rule(evaluate_host("x", doc), "inventory.schema")[0]
    assert (f["severity"], f["observed"], f["required"]) == ("info", "schema 1", "schema 1")
    assert f["message"] == "declared hardware description is well formed"


def test_ambiguous_cpu_model(monkeypatch):
    from ansible_collections.dlrack.node.plugins.plugin_utils import rules as rules_mod
    real = rules_mod._lookup
    amb = {"ambiguous": True, "model": None, "candidates": ["Acme A1", "Acme A2"]}
    monkeypatch.setattr(rules_mod, "_lookup", lambda kind, name: amb if kind == "cpu" else real(kind, name))
    res = evaluate_host("x", _hw(cpu__model="Acme A", cpu__cores=128, cpu__pcie_lanes=256))
    f = [f for f in _by_rule(res, "inventory.schema") if f["severity"] == "warning"][0]
    assert f["observed"] == "Acme A" and f["required"] == "one of: Acme A1, Acme A2"
    assert f["message"] == ("host x: cpu.model is ambiguous in the catalogue (Acme A1, Acme A2); figures that differ "
                            "between them are unknown") and f["remedy"] == "declare the exact model, e.g. 'Acme A1'"


def test_unknown_gpu_memory_says_why():
    res = evaluate_host("x", _hw(gpus=[{"pci_bus_id": "0000:01:00.0"}], workload=None))
    assert "GPU model unknown" in _by_rule(res, "memory.exceeds_vram")[0]["message"]
    res = evaluate_host("x", _hw(gpus=[{"model": "Acme X"}], workload=None))
    assert _by_rule(res, "memory.exceeds_vram")[0]["message"] == \
        "cannot verify: GPU memory (model 'Acme X' not in the catalogue) unknown"
    res = evaluate_host("x", _hw(memory__total_mb=None))
    assert _by_rule(res, "memory.exceeds_vram")[0]["message"] == "cannot verify: system RAM unknown"


def test_memory_messages_pinned():
    f = _by_rule(evaluate_host("x", GOOD), "memory.exceeds_vram")[0]
    assert f["message"] == "system RAM 3072 GiB is 2.7x GPU memory 1123 GiB" and f["required"] == ">= 2246 GiB"
    f = _by_rule(evaluate_host("x", _hw(memory__ecc="none")), "memory.ecc")[0]
    assert (f["observed"], f["required"]) == ("none", "ECC")
    f = _by_rule(evaluate_host("x", _hw(memory__ecc=None)), "memory.ecc")[0]
    assert (f["severity"], f["observed"]) == ("warning", "unknown")


def test_edac_observed_values():
    hw = copy.deepcopy(GATHERED)          # ECC DIMMs, no EDAC driver
    assert _by_rule(evaluate_host("d", hw), "memory.edac_active")[0]["observed"] == "none loaded"
    hw["memory"]["ecc"] = "single-bit"
    assert _by_rule(evaluate_host("d", hw), "memory.edac_active")[0]["observed"] == "none loaded"
    hw["memory"]["ecc"] = "unknown"
    assert _by_rule(evaluate_host("d", hw), "memory.edac_active")[0]["observed"] == "no EDAC"
    hw["memory"].update(ecc="multi-bit", edac={"driver": "skx_edac", "controllers": 1, "corrected": 0, "uncorrected": 0})
    assert _by_rule(evaluate_host("d", hw), "memory.edac_active")[0]["message"] == \
        "EDAC driver skx_edac reports 1 memory controller(s)"
    hw["memory"]["edac"]["controllers"] = None
    assert _by_rule(evaluate_host("d", hw), "memory.edac_active")[0]["observed"] == "none loaded"


@pytest.mark.parametrize("fs", ["squashfs", "iso9660", "erofs", "udf", "cramfs"])
def test_read_only_images_are_not_data_disks(fs):
    clean, dummy = check_hw({"source": "declared", "disks": [{"kind": "hdd", "size_bytes": 10 ** 13,
                                                             "in_use": {"signatures": ["sdb:" + fs]}}]})
    assert [w for dummy, w in classify_disks(clean, 8)["excluded"]] == ["read-only " + fs]


def test_defaults_and_fleet_summary_counts():
    th, sev, problems = resolve_settings()
    assert problems == [] and th["recommended_cores_per_gpu"] == 8 and sev["storage.hdd_cold_archive"] == "warning"
    results, summary = evaluate_fleet({"a": {"hw": GOOD}, "b": {"hw": _hw(memory__ecc="none")},
                                       "c": {"hw": _hw(memory__total_mb=1536 * 1024)}})
    assert (summary["hosts"], summary["pass"], summary["warn"], summary["fail"], summary["status"]) == (3, 1, 1, 1, "fail")
    assert summary["rules"]["memory.ecc"] == {"fail": 1, "warn": 0, "pass": 2, "skip": 0}
    assert summary["rules"]["memory.exceeds_vram"] == {"fail": 0, "warn": 1, "pass": 2, "skip": 0}
    assert summary["rules"]["gpu.pcie_link"] == {"fail": 0, "warn": 0, "pass": 0, "skip": 3}


def test_required_values_pinned():
    hw = copy.deepcopy(GATHERED)
    assert _by_rule(evaluate_host("d", hw), "gpu.ecc_mode")[0]["required"] == "enabled"
    f = _by_rule(evaluate_host("x", GOOD), "gpu.interconnect")[0]
    assert (f["observed"], f["required"]) == ("NVLink-capable model", "NVLink/NVSwitch")
    res = evaluate_host("x", _hw(disks=[{"size_bytes": 10 ** 6}]))
    assert _by_rule(res, "storage.nvme_hot_cache")[0]["observed"] == "no data disk (disk: 0.0 GB, below 8 GB)"


def test_declared_small_disks_still_count_in_the_declaration():
    declared = {"source": "declared", "gpus": {"model": "NVIDIA RTX 6000 Ada Generation", "count": 4},
                "disks": [{"kind": "nvme", "size_bytes": 5 * 10 ** 8, "count": 16}]}
    res = evaluate_host("d", copy.deepcopy(GATHERED), declared=declared)
    assert _sev(res, "inventory.matches_declared") == ["info"]
