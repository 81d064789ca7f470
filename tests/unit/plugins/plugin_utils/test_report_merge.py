"""Sliced pre-flights (issue 23): the per-slice verdict in the run's stats survives AWX's artifact
merge, and N slices' report.json files merge into the reports one unsliced run writes.

AWX's two rules are reproduced here, in the test harness only (never in the collection), from
ansible/awx at e21dd0a0933fd544d1fe2513c54fe41203775eb5:
  awx/main/models/inventory.py  Inventory.get_sliced_hosts: host_queryset[slice_number - 1::slice_count]
  awx/main/models/workflow.py   WorkflowJob.get_effective_artifacts: artifacts.update(job artifacts) for
                                the jobs ordered by ('finished', 'id'), the last to finish winning per key
"""
import copy
import json
import os
import re

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils import report_merge
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, run_preflight
from ansible_collections.dlrack.node.plugins.plugin_utils.report_merge import (
    MergeError, fleet_verdict, load_report, merge_report_files, merge_reports, slice_artifact)

from awxrules import awx_effective_artifacts, awx_sliced_hosts
from hwdocs import GATHERED, GOOD

BAD = {"schema": 1, "source": "declared", "cpu": {"model": "AMD EPYC 7763 64-Core Processor", "sockets": -2},
       "gpu": {"model": "NVIDIA A100-SXM4-80GB", "count": 8}}


def _host_vars(name, i):
    warm = copy.deepcopy(GOOD)
    warm["memory"] = dict(warm.get("memory") or {}, ecc="disabled")   # a finding of its own
    doc = (GOOD, BAD, warm, GOOD)[i % 4]
    if i % 5 == 0:
        return {"dlrack_hw_gathered": GATHERED}
    return {"dlrack_hw": doc}


HOSTS = ["gpu-%02d" % i for i in range(1, 15)]


def _inputs(hosts):
    return dict((h, collect_host_inputs(h, _host_vars(h, HOSTS.index(h)))) for h in hosts)


def _json(path):
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    doc["summary"].pop("generated_at")
    doc["summary"].pop("run_id")
    return doc


def _xml(path):
    with open(path, encoding="utf-8") as fh:
        return re.sub(r'name="run_id" value="[^"]*"', 'name="run_id" value=""', fh.read())


def _sliced(tmp_path, count, fail_on="error"):
    paths, stats = [], []
    for n in range(1, count + 1):
        hosts = awx_sliced_hosts(HOSTS, n, count)
        out = run_preflight(_inputs(hosts), report_dir=str(tmp_path / ("slice%d" % n)), fail_on=fail_on)
        paths.append(out["report_paths"]["json"])
        key, value = slice_artifact(hosts, out["host_status"], out["failed_hosts"], fail_on)
        stats.append({key: value, "dlrack_preflight_failed_hosts": out["failed_hosts"]})
    return paths, stats


@pytest.mark.parametrize("count,fail_on", [(2, "error"), (3, "error"), (4, "warning"), (14, "error")])
def test_slices_merge_to_the_unsliced_reports(tmp_path, count, fail_on):
    whole = run_preflight(_inputs(HOSTS), report_dir=str(tmp_path / "whole"), fail_on=fail_on)
    assert whole["failed_hosts"] and len(whole["failed_hosts"]) < len(HOSTS)
    paths = _sliced(tmp_path, count, fail_on)[0]
    merged = merge_report_files(paths, str(tmp_path / "merged"))
    assert merged["failed_hosts"] == whole["failed_hosts"]
    assert merged["summary"] == whole["summary"]
    w, m = whole["report_paths"], merged["report_paths"]
    assert _json(m["json"]) == _json(w["json"])
    assert _xml(m["xml"]) == _xml(w["xml"])
    with open(m["html"], encoding="utf-8") as fh:
        page = fh.read()
    for host in HOSTS:
        assert host in page


def test_per_slice_stats_survive_the_awx_merge_in_any_finish_order(tmp_path):
    whole = run_preflight(_inputs(HOSTS), fail_on="error")
    stats = _sliced(tmp_path, 4)[1]
    for order in (stats, stats[::-1], stats[1:] + stats[:1]):
        artifacts = awx_effective_artifacts(order)
        verdict = fleet_verdict(artifacts)
        assert verdict["failed_hosts"] == whole["failed_hosts"]
        assert verdict["slices"] == 4 and verdict["hosts"] == len(HOSTS)
        assert (verdict["pass"], verdict["warn"], verdict["fail"]) == tuple(
            whole["summary"][s] for s in ("pass", "warn", "fail"))
        # the one shared key holds only the last slice's hosts: what the per-slice keys are for
        assert artifacts["dlrack_preflight_failed_hosts"] == order[-1]["dlrack_preflight_failed_hosts"]
        assert artifacts["dlrack_preflight_failed_hosts"] != whole["failed_hosts"]


def test_slice_keys_differ_per_slice_and_stay_small():
    keys = set(report_merge.slice_key(awx_sliced_hosts(HOSTS, n, 4)) for n in range(1, 5))
    assert len(keys) == 4 and all(k.startswith("dlrack_preflight_slice_") for k in keys)
    assert report_merge.slice_key(["b", "a"]) == report_merge.slice_key(["a", "b"])
    fleet = ["node%05d" % i for i in range(2500)]
    value = slice_artifact(fleet, dict((h, "fail") for h in fleet), fleet, "error")[1]
    assert len(json.dumps(value)) < 2500 * 14      # names and counts only, no findings


def test_overlapping_slices_are_refused(tmp_path):
    paths = _sliced(tmp_path, 2)[0]
    with pytest.raises(MergeError, match=r"host gpu-01 is in report merge inputs .*slice1.* and .*slice1.* with the "
                                         r"same result: each host must come from exactly one slice"):
        merge_report_files([paths[0], paths[0]], str(tmp_path / "m"))
    doc = load_report(paths[0])
    other = copy.deepcopy(doc)
    other["hosts"]["gpu-01"]["findings"].append({"rule": "x", "severity": "info", "message": "other"})
    with pytest.raises(MergeError, match="with different results"):
        merge_reports([(paths[0], doc), ("other.json", other)])


def test_slices_of_different_runs_are_refused(tmp_path):
    a = run_preflight(_inputs(HOSTS[:5]), report_dir=str(tmp_path / "a"), fail_on="error")
    b = run_preflight(_inputs(HOSTS[5:]), report_dir=str(tmp_path / "b"), fail_on="warning")
    with pytest.raises(MergeError, match=r"disagree on fail_on \(error vs warning\): merge only the slices of one run"):
        merge_report_files([a["report_paths"]["json"], b["report_paths"]["json"]], str(tmp_path / "m"))
    doc = load_report(a["report_paths"]["json"])
    versioned = copy.deepcopy(load_report(b["report_paths"]["json"]))
    versioned["summary"]["fail_on"] = "error"
    versioned["summary"]["rules_version"] = "2"
    with pytest.raises(MergeError, match="disagree on rules_version"):
        merge_reports([("a.json", doc), ("b.json", versioned)])


def test_bad_inputs_get_one_sentence(tmp_path):
    out = run_preflight(_inputs(HOSTS[:4]), report_dir=str(tmp_path / "a"))
    path = out["report_paths"]["json"]
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    cut = tmp_path / "cut.json"
    doc = json.loads(text)
    del doc["hosts"]["gpu-02"]
    cut.write_text(json.dumps(doc))
    with pytest.raises(MergeError, match=r"counts 4/.* host\(s\) \(all/pass/warn/fail\) in its summary but holds 3/.*: the file is cut or edited"):
        merge_report_files([str(cut)], str(tmp_path / "m"))
    half = tmp_path / "half.json"
    half.write_text(text[:len(text) // 2])
    with pytest.raises(MergeError, match=r"half.json is not JSON"):
        merge_report_files([str(half)], str(tmp_path / "m"))
    with pytest.raises(MergeError, match=r"missing.json cannot be read"):
        merge_report_files([str(tmp_path / "missing.json")], str(tmp_path / "m"))
    other = tmp_path / "other.json"
    other.write_text('{"hosts": []}')
    with pytest.raises(MergeError, match="is no pre-flight report.json"):
        merge_report_files([str(other)], str(tmp_path / "m"))
    with pytest.raises(MergeError, match="dlrack_report_merge_inputs is empty"):
        merge_report_files([], str(tmp_path / "m"))
    assert not os.path.exists(str(tmp_path / "m"))


@pytest.mark.parametrize("edit", [
    lambda d, h: d["summary"].update(fail_on_hosts=[h]),
    lambda d, h: d["summary"].update(fail_on_hosts={h: ["error"]}),
    lambda d, h: d["summary"].update(fail_on="sometimes"),
    lambda d, h: d["hosts"][h].update(findings=[1]),
    lambda d, h: d["hosts"][h].update(findings=[{"rule": "x"}]),
    lambda d, h: d["hosts"][h].update(rules={"memory.ecc": 3}),
    lambda d, h: d["hosts"][h].update(provenance="catalogue"),
    lambda d, h: d["hosts"][h].update(profile={"name": "training"}),
])
def test_an_edited_input_gets_one_sentence_not_a_traceback(tmp_path, edit):
    """A report.json edited by hand (or by another tool) in a shape the writers cannot read is
    refused naming the input and the host, before anything is written."""
    out = run_preflight(_inputs(HOSTS[:4]), report_dir=str(tmp_path / "a"))
    doc = _json(out["report_paths"]["json"])
    edit(doc, "gpu-02")
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(MergeError, match=r"report merge input .*edited.json.*give the report.json as the pre-flight wrote it"):
        merge_report_files([str(path)], str(tmp_path / "m"))
    assert not os.path.exists(str(tmp_path / "m"))


def test_slices_of_different_awx_workflows_are_refused(tmp_path):
    """28.8: slices carry the run they belong to (AWX's workflow job id, from the extra vars):
    slices of two runs with the same settings are refused."""
    a = run_preflight(_inputs(HOSTS[:5]), report_dir=str(tmp_path / "a"), run_group="4711")
    b = run_preflight(_inputs(HOSTS[5:]), report_dir=str(tmp_path / "b"), run_group="4712")
    with pytest.raises(MergeError, match=r"disagree on run_group \(4711 vs 4712\): merge only the slices of one run"):
        merge_report_files([a["report_paths"]["json"], b["report_paths"]["json"]], str(tmp_path / "m"))
    c = run_preflight(_inputs(HOSTS[5:]), report_dir=str(tmp_path / "c"), run_group="4711")
    merge_report_files([a["report_paths"]["json"], c["report_paths"]["json"]], str(tmp_path / "m"))


def test_a_slice_setting_hosts_it_does_not_hold_is_refused(tmp_path):
    out = run_preflight(_inputs(HOSTS[:4]), report_dir=str(tmp_path / "a"), fail_on="error", host_fail_on={"gpu-02": "never"})
    doc = load_report(out["report_paths"]["json"])
    doc["summary"]["fail_on_hosts"] = {"gpu-02": "never", "gpu-09": "never"}      # gpu-09 is another slice's
    path = tmp_path / "reach.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(MergeError, match=r"reach.json: its summary's fail_on_hosts names gpu-09, which the slice does not hold"):
        merge_report_files([str(path)], str(tmp_path / "m"))


@pytest.mark.parametrize("status", ["pass", "warn"])
def test_an_edited_status_is_refused(tmp_path, status):
    out = run_preflight(_inputs(HOSTS[:4]), report_dir=str(tmp_path / "a"))
    doc = load_report(out["report_paths"]["json"])
    failing = [h for h, e in doc["hosts"].items() if e["status"] == "fail"][0]
    old = doc["hosts"][failing]["status"]
    doc["hosts"][failing]["status"] = status
    doc["summary"]["fail"] -= 1
    doc["summary"][status] += 1
    assert old == "fail"
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(MergeError, match=r"host %s has the status %s but findings that give another: the file was edited" % (failing, status)):
        merge_report_files([str(path)], str(tmp_path / "m"))


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_an_input_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path, kind):
    path = tmp_path / "input.json"
    if kind == "fifo":
        os.mkfifo(str(path))
    elif kind == "dev-zero":
        path = "/dev/zero"
    else:
        path.mkdir()
    with pytest.raises(MergeError, match="is not a regular file"):
        merge_report_files([str(path)], str(tmp_path / "m"))
