# -*- coding: utf-8 -*-
"""From a run's reports to the scheduler plan (plugins/plugin_utils/scheduler.py): verdicts, the
node-name mapping, warnings never drain, the blast-radius cap. The report documents follow the
JSON contracts written by plugin_utils/report.py (pre-flight, drift) and plugin_utils/acceptance.py;
molecule/scheduler runs the plan on a real pre-flight report."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils import scheduler

RUN = "20261201T163000Z-0a1b2c3d4e5f"


def _finding(rule, severity):
    return {"rule": rule, "severity": severity, "observed": 1, "required": 2, "message": "m", "remedy": "r"}


def _write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def _preflight(tmp_path, n_pass=18, fail=("gpu-01.rack7",), warn=("gpu-02.rack7",)):
    hosts = {}
    for i in range(n_pass):
        hosts["gpu-%02d.rack7" % (i + 3)] = {"status": "pass", "findings": []}
    for h in fail:
        hosts[h] = {"status": "fail", "findings": [
            _finding("memory.ecc_errors", "error"), _finding("gpu.pcie_link", "error"), _finding("gpu.interconnect", "warning")]}
    for h in warn:
        hosts[h] = {"status": "warn", "findings": [_finding("cpu.cores_exceed_gpus", "warning")]}
    return _write(tmp_path, "report.json", {"hosts": hosts, "summary": {"run_id": RUN}})


def test_fail_drains_with_error_rules_only_and_warnings_pass(tmp_path):
    out = scheduler.plan([_preflight(tmp_path)], max_nodes=5, max_percent=10)
    assert out["judged"] == 20 and out["limit"] == 2
    assert out["drain"] == [{"rules": ["gpu.pcie_link", "memory.ecc_errors"], "nodes": ["gpu-01"],
                             "reason": "dlrack: gpu.pcie_link,memory.ecc_errors " + RUN}]
    assert "gpu-02" in out["resume"] and "gpu-01" not in out["resume"] and len(out["resume"]) == 19
    assert out["over_cap"] is None


def test_drift_and_acceptance_verdicts_merge(tmp_path):
    drift = _write(tmp_path, "drift.json", {
        "hosts": {"a": {"status": "pass", "findings": []}, "b": {"status": "pass", "findings": []},
                  "c": {"status": "pass", "findings": []}},
        "drift": {"a": {"status": "drifted"}, "b": {"status": "error"}, "c": {"status": "clean"}},
        "summary": {"run_id": RUN}})
    acc = _write(tmp_path, "acceptance.json", {"hosts": {
        "c": {"status": "error", "measurements": [{"name": "gpu.h2d_bandwidth", "verdict": "error"},
                                                  {"name": "fio.hot_read", "verdict": "pass"}]},
        "d": {"status": "skip", "measurements": [{"name": "host.measured", "verdict": "skip"}]}},
        "summary": {}})
    found, run_id = scheduler.verdicts([json.load(open(drift)), json.load(open(acc))])
    assert found == {"a": ["drift.drifted"], "b": ["drift.error"], "c": ["acceptance.gpu.h2d_bandwidth"]}
    assert run_id == RUN
    out = scheduler.plan([drift, acc], max_nodes=5, max_percent=100)
    assert [g["nodes"] for g in out["drain"]] == [["a"], ["b"], ["c"]] and out["resume"] == []


def test_incomplete_acceptance_is_not_judged(tmp_path):
    """A host acceptance could not fully measure (fio missing, a tier not mounted) is neither
    drained nor resumed: it was not judged, and a drain of ours stays until a real verdict."""
    acc = _write(tmp_path, "acceptance.json", {"hosts": {
        "e": {"status": "incomplete", "measurements": [{"name": "fio.hot_read", "verdict": "incomplete"},
                                                       {"name": "gpu.h2d_bandwidth", "verdict": "pass"}]},
        "f": {"status": "pass", "measurements": [{"name": "fio.hot_read", "verdict": "pass"}]}},
        "summary": {}})
    found, dummy = scheduler.verdicts([json.load(open(acc))])
    assert found == {"f": []}
    out = scheduler.plan([acc], max_nodes=5, max_percent=100)
    assert out["judged"] == 1 and out["resume"] == ["f"] and out["drain"] == []


def test_over_the_cap_drains_nothing_and_names_the_count(tmp_path):
    path = _preflight(tmp_path, n_pass=17, fail=("f1", "f2", "f3"), warn=())
    out = scheduler.plan([path], max_nodes=5, max_percent=10)
    assert out["limit"] == 2 and out["drain"] == [] and out["resume"] == []
    assert out["over_cap"].startswith("3 of 20 judged nodes fail, more than the cap of 2")
    assert "f1, f2, f3" in out["over_cap"]
    assert scheduler.plan([path], max_nodes=5, max_percent=15)["over_cap"] is None


def test_cap_arithmetic():
    assert scheduler.cap(1, 5, 10) == 1          # never below one node
    assert scheduler.cap(20, 5, 10) == 2
    assert scheduler.cap(1000, 5, 10) == 5       # the smaller of the two


def test_mapping_and_bad_names(tmp_path):
    path = _preflight(tmp_path, n_pass=1, fail=("gpu-01.rack7",), warn=())
    out = scheduler.plan([path], node_names={"gpu-01.rack7": "n001"}, max_percent=100)
    assert out["drain"][0]["nodes"] == ["n001"] and out["hosts"]["n001"] == "gpu-01.rack7"
    assert scheduler.plan([path], hosts=["gpu-03.rack7"])["judged"] == 1


def test_a_bad_node_name_leaves_only_that_host_out(tmp_path):
    """One host whose scheduler node name is unusable is named in ``problems`` (the role fails on
    it after acting); the other hosts are still planned - a failing one is still taken out."""
    path = _preflight(tmp_path, n_pass=2, fail=("gpu-01.rack7", "gpu-02.rack7"), warn=())
    out = scheduler.plan([path], node_names={"gpu-01.rack7": "a b"}, max_percent=100)
    assert len(out["problems"]) == 1 and out["problems"][0].startswith("host gpu-01.rack7: scheduler node name 'a b'")
    assert out["problems"][0] in out["lines"]
    assert [g["nodes"] for g in out["drain"]] == [["gpu-02"]] and out["resume"] == ["gpu-03", "gpu-04"]
    assert out["judged"] == 3 and "a b" not in out["hosts"]
    out = scheduler.plan([path], node_names={"gpu-01.rack7": "x", "gpu-03.rack7": "x"}, max_percent=100)
    assert out["problems"] == ["hosts gpu-01.rack7 and gpu-03.rack7 both map to the scheduler node x: neither is "
                               "drained or resumed; give each its own name in scheduler_node_names"]
    assert [g["nodes"] for g in out["drain"]] == [["gpu-02"]] and out["resume"] == ["gpu-04"]
    assert scheduler.plan([path], max_percent=100)["problems"] == []


def test_unreadable_or_foreign_report(tmp_path):
    with pytest.raises(scheduler.PlanError, match="cannot read the report .*nope.json"):
        scheduler.plan([str(tmp_path / "nope.json")])
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(scheduler.PlanError, match="not JSON"):
        scheduler.plan([str(tmp_path / "x.json")])
    with pytest.raises(scheduler.PlanError, match="no 'hosts' mapping"):
        scheduler.plan([_write(tmp_path, "y.json", {"hosts": []})])


def test_untrusted_rule_ids_never_reach_the_reason(tmp_path):
    path = _write(tmp_path, "r.json", {"hosts": {"n1": {"status": "fail", "findings": [
        _finding("x; scontrol delete", "error")]}}, "summary": {"run_id": "bad id; rm"}})
    out = scheduler.plan([path])
    assert out["drain"][0]["rules"] == ["invalid-rule-id"]
    assert out["run_id"] != "bad id; rm" and out["drain"][0]["reason"].startswith("dlrack: invalid-rule-id ")


def test_long_rule_lists_fit_the_reason(tmp_path):
    rules = ["rule.number_%03d" % i for i in range(40)]
    reason = scheduler.reason_for(rules, RUN)
    assert len(reason) <= 240 and reason.startswith("dlrack: etc,rule.number_000,rule.number_001,")
    assert reason.endswith(" " + RUN)


def _node(name, labels=None, annotations=None, taints=None):
    return {"metadata": {"name": name, "labels": dict({"kubernetes.io/hostname": name}, **(labels or {})),
                         "annotations": annotations or {}}, "spec": {"taints": taints or []}}


def test_kubernetes_changes_touch_only_ours(tmp_path):
    path = _preflight(tmp_path, n_pass=2, fail=("gpu-01.rack7",), warn=())
    theirs = {"key": "maintenance.example.com/psu", "effect": "NoSchedule"}
    nodes = [_node("gpu-01", labels={"dlrack.node/gpu.present": "fail", "team": "a"}, taints=[theirs]),
             _node("gpu-03", labels={"dlrack.node/memory.ecc_errors": "fail"}, annotations={"dlrack.node/reason": "x"},
                   taints=[theirs, {"key": "dlrack.node/unhealthy", "effect": "NoSchedule", "value": "dlrack"}])]
    out = scheduler.plan([path], backend="kubernetes", max_percent=100, k8s_nodes=nodes)
    k = out["k8s"]
    assert k["taint"] == ["gpu-01"] and k["untaint"] == ["gpu-03"] and k["skipped"] == ["gpu-04"]
    patches = dict((p["name"], p["definition"]["metadata"]) for p in k["patch"])
    # the stale verdict label goes, the new ones come, the team label is not in the patch
    assert patches["gpu-01"]["labels"] == {"dlrack.node/gpu.present": None, "dlrack.node/gpu.pcie_link": "fail",
                                           "dlrack.node/memory.ecc_errors": "fail"}
    assert patches["gpu-01"]["annotations"]["dlrack.node/reason"].startswith("dlrack: gpu.pcie_link,memory.ecc_errors ")
    assert patches["gpu-03"] == {"name": "gpu-03", "labels": {"dlrack.node/memory.ecc_errors": None},
                                 "annotations": {"dlrack.node/reason": None}}
    out = scheduler.plan([path], backend="kubernetes", node_names={"gpu-01.rack7": "GPU_01"}, max_percent=100)
    assert "not a valid kubernetes node name" in out["problems"][0] and out["k8s"]["taint"] == []
