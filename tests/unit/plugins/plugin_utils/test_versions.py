# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet version drift (issue 33): plugin_utils/versions.py (per hardware class: pin, qualified
combinations, majority), the per-node rule versions.node_stack, and
what the pre-flight's reports and the scheduler act get from them.

The version strings are real: drivers 570.124.04 (RTX 3060) and 535.54.03 (A100 SXM4) with their
VBIOS from telegraf's nvidia-smi -q -x captures, and the real H200's driver 580.159.04, VBIOS
96.00.A5.00.1A and InfoROM G520.0282.02.02 (tests/data/real/versions, SOURCES.md) - read from those
files here, never typed. A fault no capture shows is that capture with one figure changed, and the
test says which."""
import copy
import json
import os
import re
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu.stack import parse_smi_versions
from ansible_collections.dlrack.node.plugins.plugin_utils import scheduler, versions
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, run_preflight
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import evaluate_host

from hwdocs import GOOD
from realdata import read, real
from testpaths import ROOT

NEW = parse_smi_versions(read(real("nvidia-smi-q-xml", "telegraf-rtx-3060-v12.xml")))
OLD = parse_smi_versions(read(real("nvidia-smi-q-xml", "telegraf-a100-sxm4-v12.xml")))
H200 = parse_smi_versions(read(real("versions", "h200-nvidia-smi-q-x.xml")))


def _versions(smi, gpus=8, **extra):
    out = {"gpu_driver": smi["driver"], "cuda_driver": smi["cuda_driver"], "kernel": "5.15.0-105-generic",
           "gpus": [dict(smi["gpus"][0], driver=smi["driver"]) for dummy in range(gpus)]}
    out.update(extra)
    return out


def _host(name, ver, pin=None):
    doc = dict(copy.deepcopy(GOOD), versions=ver)
    variables = {"dlrack_hw": doc}
    return collect_host_inputs(name, variables), pin


def _fleet(specs):
    inputs, pins = {}, {}
    for name, ver, pin in specs:
        inputs[name], pin = _host(name, ver, pin)
        if pin is not None:
            pins[name] = pin
    return inputs, pins


def _minority_fleet(pin=None):
    """Ten declared H200 x8 hosts: seven on driver 570.124.04, three (gpu-08..10) on 535.54.03."""
    return _fleet([("gpu-%02d" % i, _versions(OLD if i > 7 else NEW), pin) for i in range(1, 11)])


def _finding(res):
    return [f for f in res["findings"] if f["rule"] == versions.RULE]


def test_real_strings_are_what_the_tests_say():
    assert (NEW["driver"], OLD["driver"], H200["driver"]) == ("570.124.04", "535.54.03", "580.159.04")
    assert H200["gpus"][0]["vbios"] == "96.00.A5.00.1A"


def test_minority_on_an_old_driver_is_named_against_the_majority(tmp_path):
    inputs, pins = _minority_fleet()
    out = run_preflight(inputs, report_dir=str(tmp_path), fail_on="error")
    doc = json.loads((tmp_path / "report.json").read_text())
    matrix = doc["summary"]["versions"]
    assert [c["class"] for c in matrix] == ["NVIDIA H200 x8"] and matrix[0]["outliers"] == 3
    row = [r for r in matrix[0]["rows"] if r["component"] == "gpu_driver"][0]
    assert row["expected"] == "570.124.04" and row["drift"]
    assert row["values"] == [{"value": "570.124.04", "hosts": 7, "outliers": []},
                             {"value": "535.54.03", "hosts": 3, "outliers": ["gpu-08", "gpu-09", "gpu-10"]}]
    # the three outliers with the same differences share one finding: one rendering in the reports
    assert len(set(json.dumps(_finding(doc["hosts"][h])) for h in ("gpu-08", "gpu-09", "gpu-10"))) == 1
    for host in ("gpu-08", "gpu-09", "gpu-10"):
        f = _finding(doc["hosts"][host])
        assert len(f) == 1 and f[0]["severity"] == "warning" and f[0]["shadow"] == "error"
        assert f[0]["message"].startswith("[shadow] this host differs from its hardware class NVIDIA H200 x8 (10 hosts)")
        assert "GPU driver 535.54.03 (the class majority: 570.124.04)" in f[0]["message"]
        assert f[0]["observed"].startswith("GPU driver 535.54.03") and f[0]["required"].startswith("GPU driver 570.124.04")
        assert doc["hosts"][host]["rules"][versions.RULE] == "warn"
    assert doc["hosts"]["gpu-01"]["rules"][versions.RULE] == "pass" and not _finding(doc["hosts"]["gpu-01"])
    # shadow: the gate does not fail on it
    assert out["failed_hosts"] == []
    # the console shows the matrix per class, not a line per host and component
    lines = [line for line in out["lines"] if line.startswith("  GPU driver")]
    assert lines == ["  GPU driver      570.124.04 (7) | 535.54.03 (3: gpu-08, gpu-09, gpu-10)"]
    assert "versions NVIDIA H200 x8: 10 host(s), 3 outlier(s)" in out["lines"]
    # JUnit: one suite for the matrix, the drifting component a skipped warning case
    xml = ET.parse(str(tmp_path / "report.xml")).getroot()
    suite = [s for s in xml.iter("testsuite") if s.get("name") == "dlrack.node fleet versions"][0]
    case = [c for c in suite.iter("testcase") if c.get("name") == "NVIDIA H200 x8: GPU driver"][0]
    assert case.find("skipped").get("message").startswith("warning: [shadow] GPU driver drifts")
    # HTML: the matrix section
    html = (tmp_path / "report.html").read_text()
    assert 'id="versions"' in html and "gpu-08, gpu-09, gpu-10" in html


def test_the_scheduler_act_sees_the_outliers_as_shadow(tmp_path):
    inputs, pins = _minority_fleet()
    run_preflight(inputs, report_dir=str(tmp_path), fail_on="error")
    doc = json.loads((tmp_path / "report.json").read_text())
    failing, dummy = scheduler.verdicts([doc])
    assert failing["gpu-08"] == [versions.RULE] and failing["gpu-01"] == []


def test_a_pin_decides_over_the_majority():
    """Pinned to the old driver, the seven on the new one are the outliers."""
    inputs, pins = _minority_fleet(pin={"gpu_driver": "535.54.03"})
    out = run_preflight(inputs)
    outliers = sorted(h for h, s in out["host_status"].items() if s == "warn")
    assert outliers == ["gpu-08", "gpu-09", "gpu-10"]
    out = run_preflight(inputs, pins=pins)
    results = dict((h, evaluate_host(h, **kw)) for h, kw in inputs.items())
    outliers = versions.compare(results, pins)[1]
    assert sorted(h for h, (dummy, gaps) in outliers.items() if ("gpu_driver", "570.124.04", "535.54.03", "pin") in gaps) \
        == ["gpu-%02d" % i for i in range(1, 8)]
    # gpu-08..10 run the pinned driver; their CUDA and VBIOS still differ from the class majority
    assert [g[0] for g in outliers["gpu-08"][1]] == ["cuda_driver", "vbios"]
    assert [line for line in out["lines"] if "pinned by dlrack_versions: 535.54.03" in line]


def _combo(smi):
    """A qualified combination: the driver, its CUDA and the board's VBIOS of one capture."""
    return {"gpu_driver": smi["driver"], "cuda_driver": smi["cuda_driver"], "vbios": smi["gpus"][0]["vbios"]}


def test_a_declared_versions_section_pins_the_gathered_host():
    """Declared: driver 570.124.04 (the RTX 3060 capture's); gathered: the real H200's 580.159.04."""
    declared = dict(copy.deepcopy(GOOD), versions={"gpu_driver": NEW["driver"]})
    inputs = {}
    for name in ("a", "b", "c"):
        gathered = dict(copy.deepcopy(GOOD), source="gathered", versions=_versions(H200))
        inputs[name] = collect_host_inputs(name, {"dlrack_hw": declared if name == "a" else GOOD,
                                                  "dlrack_hw_gathered": gathered})
    assert versions.declared_pins(inputs) == {"a": {"gpu_driver": "570.124.04"}}
    out = run_preflight(inputs)
    drift = [line for line in out["lines"] if versions.RULE in line]
    assert len(drift) == 1 and "pinned by dlrack_versions: 570.124.04" in drift[0]
    assert out["summary"]["rules"][versions.RULE] == {"fail": 0, "warn": 1, "pass": 2, "skip": 0}
    # the operator's dlrack_versions decides over the declaration
    out = run_preflight(inputs, pins={"a": {"gpu_driver": "580.159.04"}})
    assert out["summary"]["rules"][versions.RULE] == {"fail": 0, "warn": 0, "pass": 3, "skip": 0}


def test_pins_and_qualified_combinations():
    results = {}
    inputs, dummy = _minority_fleet()
    for name, kw in inputs.items():
        results[name] = evaluate_host(name, **kw)
    both = {"qualified": [_combo(NEW), _combo(OLD)]}
    matrix, outliers, errors = versions.compare(results, dict((h, both) for h in results))
    assert outliers == {} and errors == {}
    only_new = {"qualified": [_combo(NEW)]}
    matrix, outliers, errors = versions.compare(results, dict((h, only_new) for h in results))
    assert sorted(outliers) == ["gpu-08", "gpu-09", "gpu-10"]
    assert outliers["gpu-08"][1][0] == ("gpu_driver", "535.54.03", "570.124.04", "qualified")
    pinned = versions.compare(results, {"gpu-01": {"gpu_driver": "535.54.03"}})[1]
    assert pinned["gpu-01"][1] == [("gpu_driver", "570.124.04", "535.54.03", "pin")]
    # gpu-01 against its pin; the majority of the rest still names gpu-08..10
    assert sorted(pinned) == ["gpu-01", "gpu-08", "gpu-09", "gpu-10"] and pinned["gpu-01"][1][0][3] == "pin"


def test_a_bad_pin_is_one_sentence_on_that_host():
    inputs, pins = _minority_fleet()
    out = run_preflight(inputs, pins={"gpu-01": {"gpu_drvier": "570.124.04"}, "gpu-02": "570"})
    assert out["host_status"]["gpu-01"] == "warn"
    with pytest.raises(versions.PinError, match=r"dlrack_versions of host gpu-01.gpu_drvier is not a component"):
        versions.check_pin({"gpu_drvier": "1"}, "gpu-01")
    with pytest.raises(versions.PinError, match="must be a mapping"):
        versions.check_pin("570", "gpu-02")
    with pytest.raises(versions.PinError, match="qualified must be a non-empty list"):
        versions.check_pin({"qualified": []}, "gpu-02")


def test_an_even_split_names_every_host_and_unknown_is_not_drift():
    inputs, dummy = _fleet([("a", _versions(NEW), None), ("b", _versions(OLD), None),
                            ("c", {"kernel": "5.15.0-105-generic"}, None)])
    results = dict((h, evaluate_host(h, **kw)) for h, kw in inputs.items())
    matrix, outliers, dummy = versions.compare(results)
    assert sorted(outliers) == ["a", "b"] and outliers["a"][1][0][3] == "split"
    assert "c" not in outliers


def test_classes_are_model_and_count():
    h100 = dict(copy.deepcopy(GOOD), gpus={"model": "NVIDIA H100 80GB HBM3", "count": 8}, versions=_versions(OLD))
    four = dict(copy.deepcopy(GOOD), gpus={"model": "NVIDIA H200", "count": 4}, versions=_versions(OLD, gpus=4))
    inputs, dummy = _minority_fleet()
    inputs["h100"] = collect_host_inputs("h100", {"dlrack_hw": h100})
    inputs["four"] = collect_host_inputs("four", {"dlrack_hw": four})
    results = dict((h, evaluate_host(h, **kw)) for h, kw in inputs.items())
    matrix, outliers, dummy = versions.compare(results)
    assert [(c["class"], c["hosts"]) for c in matrix] == [
        ("NVIDIA H100 80GB HBM3 x8", 1), ("NVIDIA H200 x4", 1), ("NVIDIA H200 x8", 10)]
    assert sorted(outliers) == ["gpu-08", "gpu-09", "gpu-10"]     # alone in their class, h100 and four are not


def test_mixed_vbios_on_one_node_fails_the_node_rule_in_shadow():
    """The real H200's GPU entry eight times, the last with VBIOS 96.00.A5.00.1B (its last byte
    changed): one node on two VBIOS versions."""
    ver = _versions(H200)
    ver["gpus"][7] = dict(ver["gpus"][7], vbios="96.00.A5.00.1B")
    res = evaluate_host("gpu-01", dict(copy.deepcopy(GOOD), versions=ver))
    f = [x for x in res["findings"] if x["rule"] == "versions.node_stack"]
    assert len(f) == 1 and f[0]["severity"] == "warning" and f[0]["shadow"] == "error"
    assert "VBIOS 96.00.A5.00.1A, 96.00.A5.00.1B" in f[0]["message"] and f[0]["message"].startswith("[shadow] ")
    assert res["rules"]["versions.node_stack"] == "warn"
    assert versions.components(ver)["vbios"] == "mixed: 96.00.A5.00.1A, 96.00.A5.00.1B"
    same = evaluate_host("gpu-02", dict(copy.deepcopy(GOOD), versions=_versions(H200)))
    assert same["rules"]["versions.node_stack"] == "pass"
    assert [x["message"] for x in same["findings"] if x["rule"] == "versions.node_stack"] == [
        "all 8 GPUs run one driver and VBIOS 96.00.A5.00.1A (no Fabric Manager installed: needed only on NVSwitch systems)"]


def test_fabric_manager_one_patch_off():
    """The real H200's driver 580.159.04 with Fabric Manager 580.159.03 (one patch version below)."""
    res = evaluate_host("gpu-01", dict(copy.deepcopy(GOOD), versions=_versions(H200, fabric_manager="580.159.03")))
    f = [x for x in res["findings"] if x["rule"] == "versions.node_stack"]
    assert len(f) == 1 and f[0]["shadow"] == "error" and f[0]["severity"] == "warning"
    assert "Fabric Manager 580.159.03 is not the GPU driver's version 580.159.04" in f[0]["message"]
    ok = evaluate_host("gpu-01", dict(copy.deepcopy(GOOD), versions=_versions(H200, fabric_manager="580.159.04")))
    assert ok["rules"]["versions.node_stack"] == "pass"
    nothing = evaluate_host("gpu-01", dict(copy.deepcopy(GOOD), versions={"kernel": "5.15.0-105-generic"}))
    assert nothing["rules"]["versions.node_stack"] == "skip"
    unknown = evaluate_host("gpu-01", dict(copy.deepcopy(GOOD), versions={"fabric_manager": "580.159.04"}))
    assert unknown["rules"]["versions.node_stack"] == "warn"
    both = _versions(H200, fabric_manager="580.159.03")
    both["gpus"][0] = dict(both["gpus"][0], vbios="96.00.A5.00.1B")
    assert len([x for x in evaluate_host("g", dict(copy.deepcopy(GOOD), versions=both))["findings"]
                if x["rule"] == "versions.node_stack"]) == 2


def test_no_versions_no_outcome():
    """A document without versions (every golden host) gets nothing from the version rules."""
    res = evaluate_host("gpu-01", copy.deepcopy(GOOD))
    assert not any(r.startswith("versions.") for r in res["rules"])
    assert versions.apply({"gpu-01": res}) == [] and versions.RULE not in res["rules"]


def test_hostile_values_are_escaped(tmp_path):
    """A node's version string is data: bounded, and escaped on the console and in the HTML."""
    ver = _versions(NEW, kernel="6.1\x1b[2J<script>x</script>" + "9" * 2000)
    inputs, dummy = _fleet([("a", ver, None), ("b", _versions(NEW), None), ("c", _versions(NEW), None)])
    out = run_preflight(inputs, report_dir=str(tmp_path))
    assert not any("\x1b" in line for line in out["lines"])
    html = (tmp_path / "report.html").read_text()
    assert "<script>x" not in html
    assert all(len(v["value"]) <= versions.MAX_VALUE for c in out["summary"]["versions"] for r in c["rows"]
               for v in r["values"])


def test_schema_keeps_versions_and_rejects_a_bad_one():
    res = evaluate_host("gpu-01", dict(copy.deepcopy(GOOD), versions={"gpu_driver": ["570"], "cuda": "12"}))
    schema = [f["message"] for f in res["findings"] if f["rule"] == "inventory.schema"]
    assert any("versions.gpu_driver" in m for m in schema) and any("versions.cuda: unknown key" in m for m in schema)


def test_each_document_is_read_once(monkeypatch):
    """Hosts that share an evaluation share its document, which compare() reads once: 2,000 hosts
    over the ten evaluations of the minority fleet cost ten components() calls, not 2,000."""
    calls = []
    real_components = versions.components
    monkeypatch.setattr(versions, "components", lambda v: calls.append(1) or real_components(v))
    inputs, dummy = _minority_fleet()
    results = dict((h, evaluate_host(h, **kw)) for h, kw in inputs.items())
    big = dict(("n%04d" % i, dict(results["gpu-%02d" % (i % 10 + 1)])) for i in range(2000))
    matrix, outliers, dummy = versions.compare(big)
    assert len(calls) == 10 and matrix[0]["hosts"] == 2000 and len(outliers) == 600


def test_the_docs_name_the_variable():
    text = read(os.path.join(ROOT, "docs", "dlrack_hw.md"))
    assert "dlrack_versions" in text and re.search(r"fleet\.version_drift", text)
