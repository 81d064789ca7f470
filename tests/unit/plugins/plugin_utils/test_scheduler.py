# -*- coding: utf-8 -*-
"""From a run's reports to the scheduler plan (plugins/plugin_utils/scheduler.py): verdicts, the
node-name mapping, warnings never drain, the blast-radius cap. The report documents follow the
JSON contracts written by plugin_utils/report.py (pre-flight, drift) and plugin_utils/acceptance.py;
molecule/scheduler runs the plan on a real pre-flight report."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

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


def test_over_the_cap_drains_nothing_puts_the_passing_back_and_names_the_count(tmp_path):
    """Over the cap nothing new is drained, but the passing nodes are still put back (a breaker
    that keeps healthy nodes out empties the cluster slowly), and every refusal is audited."""
    path = _preflight(tmp_path, n_pass=17, fail=("f1", "f2", "f3"), warn=())
    out = scheduler.plan([path], max_nodes=5, max_percent=10)
    assert out["limit"] == 2 and out["drain"] == [] and len(out["resume"]) == 17
    assert [(a["action"], a["why"], a["node"]) for a in out["audit"]] == [("refused", "cap", n) for n in ("f1", "f2", "f3")]
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
    # a rule id nobody knows is no rule of 0.1.0: shadow (would take out), never a drain by default
    assert out["drain"] == [] and out["would_drain"] == [{"rules": ["invalid-rule-id"], "nodes": ["n1"]}]
    assert out["run_id"] != "bad id; rm" and scheduler.ansible_run_id(out["run_id"])
    out = scheduler.plan([path], modes={"invalid-rule-id": "enforce"})
    assert out["drain"][0]["reason"] == "dlrack: invalid-rule-id " + out["run_id"]


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
    ours = {"key": "dlrack.node/unhealthy", "effect": "NoSchedule", "value": "20261130T080000Z-00112233aabb"}
    nodes = [_node("gpu-01", labels={"dlrack.node/gpu.present": "fail", "team": "a"}, taints=[theirs]),
             _node("gpu-03", labels={"dlrack.node/memory.ecc_errors": "fail"},
                   annotations={"dlrack.node/reason": "x", "dlrack.node/taint-run-id": ours["value"]}, taints=[theirs, ours])]
    out = scheduler.plan([path], backend="kubernetes", max_percent=100, k8s_nodes=nodes)
    k = out["k8s"]
    assert k["taint"] == [{"name": "gpu-01", "spec": {"key": "dlrack.node/unhealthy", "effect": "NoSchedule", "value": RUN}}]
    assert k["untaint"] == ["gpu-03"] and k["skipped"] == ["gpu-04"] and k["left_alone"] == []
    patches = dict((p["name"], p["definition"]["metadata"]) for p in k["patch"])
    # the stale verdict label goes, the new ones come, the team label is not in the patch; the run id is
    # annotated before the taint lands
    assert patches["gpu-01"]["labels"] == {"dlrack.node/gpu.present": None, "dlrack.node/gpu.pcie_link": "fail",
                                           "dlrack.node/memory.ecc_errors": "fail"}
    assert patches["gpu-01"]["annotations"]["dlrack.node/reason"].startswith("dlrack: gpu.pcie_link,memory.ecc_errors ")
    assert patches["gpu-01"]["annotations"]["dlrack.node/taint-run-id"] == RUN
    after = dict((p["name"], p["definition"]["metadata"]) for p in k["patch_after"])
    assert after["gpu-03"] == {"name": "gpu-03", "labels": {"dlrack.node/memory.ecc_errors": None},
                               "annotations": {"dlrack.node/reason": None, "dlrack.node/taint-run-id": None}}
    out = scheduler.plan([path], backend="kubernetes", node_names={"gpu-01.rack7": "GPU_01"}, max_percent=100)
    assert "not a valid kubernetes node name" in out["problems"][0] and out["k8s"]["taint"] == []


@pytest.mark.parametrize("taint, annotations", [
    ({"value": "dlrack"}, {}),                                             # 0.1.0's value, or a person's
    ({"value": "do-not-schedule"}, {"dlrack.node/taint-run-id": "do-not-schedule"}),
    ({"value": RUN}, {}),                                                  # our format, no annotation
    ({"value": RUN}, {"dlrack.node/taint-run-id": "20261130T080000Z-00112233aabb"}),   # another run's annotation
])
def test_a_persons_taint_with_our_key_is_never_removed_or_overwritten(tmp_path, taint, annotations):
    path = _preflight(tmp_path, n_pass=1, fail=("gpu-01.rack7",), warn=())
    spec = dict({"key": "dlrack.node/unhealthy", "effect": "NoSchedule"}, **taint)
    nodes = [_node("gpu-01", taints=[spec], annotations=dict(annotations)), _node("gpu-03", taints=[spec], annotations=dict(annotations))]
    k = scheduler.plan([path], backend="kubernetes", max_percent=100, k8s_nodes=nodes)["k8s"]
    assert k["taint"] == [] and k["untaint"] == [] and k["left_alone"] == ["gpu-01", "gpu-03"]
    assert k["patch"] == [] and k["patch_after"] == []
    assert any("not ours" in m for m in k["messages"])


def _fresh(tmp_path, name, hosts, **summary):
    summary.setdefault("run_id", RUN)
    summary.setdefault("generated_at", "2026-12-04T18:00:00+00:00")
    return _write(tmp_path, name, {"hosts": hosts, "summary": summary})


NOT_BEFORE = 1796407200.0   # 2026-12-04T18:00:00Z


def test_only_this_runs_reports_and_hosts(tmp_path):
    """28.8: a report written before this run is refused, naming the file; hosts a report lists
    outside this run are neither judged nor counted for the cap."""
    fail = {"status": "fail", "findings": [_finding("gpu.pcie_link", "error")]}
    old = _fresh(tmp_path, "old.json", {"n1": fail}, generated_at="2026-11-04T18:00:00+00:00")
    with pytest.raises(scheduler.PlanError, match=r"report .*old.json was written at 2026-11-04T18:00:00\+00:00, before this run"):
        scheduler.plan([old], hosts=["n1"], not_before=NOT_BEFORE)
    bare = _write(tmp_path, "bare.json", {"hosts": {"n1": fail}, "summary": {}})
    with pytest.raises(scheduler.PlanError, match="no summary.generated_at"):
        scheduler.plan([bare], hosts=["n1"], not_before=NOT_BEFORE)
    hosts = dict(("x%05d" % i, {"status": "pass", "findings": []}) for i in range(10000))
    hosts.update({"n1": fail, "n2": {"status": "pass", "findings": []}})
    path = _fresh(tmp_path, "inflated.json", hosts)
    out = scheduler.plan([path], hosts=["n1", "n2"], max_nodes=5, max_percent=10, not_before=NOT_BEFORE)
    assert out["judged"] == 2 and out["limit"] == 1 and len(out["outside"]) == 10000
    assert any(line.startswith("10000 host(s) in the reports are not hosts of this run") for line in out["lines"])


@pytest.mark.parametrize("kind", ["fifo", "device", "link-to-device", "directory"])
def test_a_report_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path, kind):
    path = tmp_path / "report.json"
    if kind == "fifo":
        os.mkfifo(str(path))
    elif kind == "device":
        path = "/dev/zero"
    elif kind == "link-to-device":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    with pytest.raises(scheduler.PlanError, match="not a regular file|cannot read the report"):
        scheduler.plan([str(path)], hosts=["n1"])


def test_shadow_rules_would_drain_and_modes_decide(tmp_path):
    """28.4: a rule new since 0.1.0 (no drain by default) is a 'would take out' line; the operator
    enforces it run-wide or per group; off drops it; groups disagreeing take the least acting mode."""
    shadow = {"rule": "gpu.xid", "severity": "warning", "shadow": "error", "observed": 79, "required": None,
              "message": "[shadow] Xid 79", "remedy": "r"}
    hosts = {"n1": {"status": "warn", "findings": [shadow]},
             "n2": {"status": "fail", "findings": [_finding("gpu.pcie_link", "error"), shadow]},
             "n3": {"status": "pass", "findings": []}}
    path = _fresh(tmp_path, "r.json", hosts)
    out = scheduler.plan([path], hosts=["n1", "n2", "n3"], max_percent=100)
    assert out["would_drain"] == [{"rules": ["gpu.xid"], "nodes": ["n1", "n2"]}]
    assert [g["nodes"] for g in out["drain"]] == [["n2"]] and out["drain"][0]["rules"] == ["gpu.pcie_link"]
    assert out["resume"] == ["n1", "n3"]
    assert "would take out n1, n2 (shadow mode, nothing done): gpu.xid" in out["lines"]
    out = scheduler.plan([path], hosts=["n1", "n2", "n3"], max_percent=100, modes={"gpu.xid": "enforce"})
    assert [(g["nodes"], g["rules"]) for g in out["drain"]] == [(["n1"], ["gpu.xid"]), (["n2"], ["gpu.pcie_link", "gpu.xid"])]
    out = scheduler.plan([path], hosts=["n1", "n2", "n3"], max_percent=100, modes={"gpu.*": "off"})
    assert out["drain"] == [] and out["would_drain"] == [] and out["resume"] == ["n1", "n2", "n3"]
    groups = {"n1": ["rack_a"], "n2": ["rack_a", "rack_b"]}
    out = scheduler.plan([path], hosts=["n1", "n2", "n3"], max_percent=100, modes={"gpu.xid": "enforce"},
                         group_modes={"rack_b": {"gpu.xid": "shadow"}, "rack_a": {"gpu.xid": "enforce"}}, host_groups=groups)
    assert [(g["nodes"], g["rules"]) for g in out["drain"]] == [(["n1"], ["gpu.xid"]), (["n2"], ["gpu.pcie_link"])]
    with pytest.raises(scheduler.PlanError, match="scheduler_rule_modes.gpu.xid is 'always'"):
        scheduler.plan([path], modes={"gpu.xid": "always"})


def test_a_host_whose_facts_set_a_setting_is_neither_drained_nor_resumed(tmp_path):
    hosts = {"evil": {"status": "fail", "findings": [_finding("gpu.pcie_link", "error")]},
             "n2": {"status": "pass", "findings": []}}
    path = _fresh(tmp_path, "r.json", hosts)
    why = "host evil: its facts set scheduler_max_drain_nodes - ..."
    out = scheduler.plan([path], hosts=["evil", "n2"], untrusted={"evil": why}, max_percent=100)
    assert out["drain"] == [] and out["resume"] == ["n2"] and out["judged"] == 1
    assert out["problems"] == [why]
    assert out["audit"][0] == {"action": "refused", "why": "trust", "host": "evil", "rules": [], "run_id": RUN, "backend": "slurm"}


def test_run_ids_of_ours_only(tmp_path):
    path = _fresh(tmp_path, "r.json", {"n1": {"status": "pass", "findings": []}})
    for bad in ("pending", "ticket-4711", "20261304T180000Z-0a1b2c3d4e5f", "20261204T180000Z-0A1B2C3D4E5F"):
        with pytest.raises(scheduler.PlanError, match="a run id of ours is"):
            scheduler.plan([path], run_id=bad)
