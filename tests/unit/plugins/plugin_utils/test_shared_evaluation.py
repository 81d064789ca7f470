"""Hosts with identical inputs share one evaluation (rules.evaluate_fleet) and one rendering per
report (report.share_key): the results and the three reports must be exactly what evaluating and
writing every host on its own gives, whatever the names and inputs."""
import copy
import json

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils import report, rules
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import Unresolved
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, guard_non_finite

from hwdocs import GATHERED, GOOD

# Schema errors whose remedies name the host ("fix dlrack_hw.cpu.sockets for NAME ...").
NAMED = {"schema": 1, "source": "declared", "cpu": {"model": "AMD EPYC 7763 64-Core Processor", "sockets": -2},
         "memory": {"total_gb": 512, "ecc": "yes-please"}, "gpu": {"model": "NVIDIA A100-SXM4-80GB", "count": 8}}
NAN = {"schema": 1, "source": "declared", "cpu": {"model": "AMD EPYC 7763 64-Core Processor", "sockets": 2},
       "memory": {"total_gb": float("nan"), "ecc": "multi-bit"}, "gpu": {"model": "NVIDIA A100-SXM4-80GB", "count": 8}}
MARK = rules._THIS_HOST


def _fleet():
    """Many hosts per build, hostile names, inputs that cannot or must not be shared."""
    hosts = {}
    for i in range(6):
        hosts["good-%d" % i] = {"hw": GOOD}
        hosts["named-%d" % i] = {"hw": NAMED}
        hosts["live-%d" % i] = collect_host_inputs("live", {"dlrack_hw_gathered": GATHERED})
        hosts["strict-%d" % i] = {"hw": GOOD, "thresholds": {"min_cpu_cores_per_gpu": 64}, "severity": {"cpu.cores_per_gpu": "warning"}}
        hosts["nan-%d" % i] = {"hw": NAN, "workload": {"model_params_b": float("inf")}}
    hosts['x" onmouseover="alert(%d)' % 1] = {"hw": NAMED}
    hosts["ctl\x02host\udfff"] = {"hw": NAMED}
    hosts["tab\there & <amp>"] = {"hw": GOOD}
    hosts["mark" + MARK] = {"hw": NAMED}                        # the name holds the stand-in itself
    hosts["in-data"] = {"hw": dict(NAMED, host={"hostname": MARK})}  # so does an input
    hosts["unresolved-%d" % 0] = {"hw": GOOD, "thresholds": Unresolved("'rack_min' is undefined")}
    hosts["unresolved-%d" % 1] = {"hw": GOOD, "thresholds": Unresolved("'rack_min' is undefined")}
    hosts["priv\ue000dlrack-host\ue001"] = {"hw": NAMED}        # the JUnit stand-in in a name
    hosts["quote\"d"] = {"hw": GOOD}
    return hosts


def _alone(hosts, finish=None):
    """Every host evaluated on its own, as before sharing existed."""
    out = {}
    for name in sorted(hosts, key=str):
        out[name] = rules.evaluate_host(name, **copy.deepcopy(hosts[name]))
        if finish is not None:
            finish({name: out[name]})
    return out, rules.summarize(out)


def test_shared_evaluation_equals_evaluating_each_host_alone():
    hosts = _fleet()
    shared, summary = rules.evaluate_fleet(hosts)
    alone, summary_alone = _alone(hosts)
    assert summary == summary_alone
    assert json.dumps(shared, sort_keys=True, default=repr) == json.dumps(alone, sort_keys=True, default=repr)
    # it was shared: one finding object for all hosts of a build, each host its own lists
    assert shared["good-0"]["findings"][0] is shared["good-5"]["findings"][0]
    assert shared["good-0"]["findings"] is not shared["good-5"]["findings"]
    assert shared["good-0"]["rules"] is not shared["good-5"]["rules"]
    # a host named in its messages gets its own name, never the stand-in or another host's name
    text = json.dumps(shared["named-3"]["findings"])
    assert "named-3" in text and "named-0" not in text and "dlrack:this-host" not in text
    assert any("mark" + MARK in f["remedy"] for f in shared["mark" + MARK]["findings"] if f.get("remedy"))


def test_the_guard_runs_once_per_distinct_input_and_names_each_host():
    hosts = _fleet()
    seen = []

    def guard(results):
        seen.append(sorted(results))
        guard_non_finite(results)

    shared, summary = rules.evaluate_fleet(hosts, finish=guard)
    alone, summary_alone = _alone(hosts, finish=guard_non_finite)
    assert summary == summary_alone
    assert json.dumps(shared, sort_keys=True, default=repr) == json.dumps(alone, sort_keys=True, default=repr)
    assert len(seen) < len(hosts) / 2
    nan = [f for f in shared["nan-4"]["findings"] if "non-finite" in (f.get("message") or "")]
    assert nan and "host nan-4:" in nan[0]["message"]
    assert shared["nan-4"]["status"] == "fail"


def test_one_host_finding_added_later_stays_on_that_host():
    shared, dummy = rules.evaluate_fleet({"a": {"hw": GOOD}, "b": {"hw": GOOD}})
    shared["a"]["findings"].append({"rule": "x"})
    shared["a"]["rules"]["x"] = "fail"
    assert len(shared["b"]["findings"]) == len(shared["a"]["findings"]) - 1 and "x" not in shared["b"]["rules"]


@pytest.mark.parametrize("warnings", ["skipped", "failed", "passed"])
def test_reports_of_shared_results_equal_reports_written_host_by_host(monkeypatch, warnings):
    monkeypatch.setattr(report, "now_iso", lambda: "2026-12-01T00:00:00Z")
    hosts = _fleet()
    shared, summary = rules.evaluate_fleet(hosts, finish=guard_non_finite)
    alone = dict((h, copy.deepcopy(r)) for h, r in shared.items())   # one copy per host: nothing shared
    # good-*, live-* and strict-* share (15 hosts, 3 keys); hosts named in their messages do not
    assert len({report.share_key(r) for r in shared.values()}) == len(shared) - 15 + 3
    assert len({report.share_key(r) for r in alone.values()}) == len(alone)
    drift = {"good-2": {"changes": [{"task": "t", "role": "r", "diff": None}]}}
    for d in (None, drift):
        assert (report.strict_json_document(report.build_json(shared, summary, d, run_id="r"))
                == report.strict_json_document(report.build_json(alone, summary, d, run_id="r")))
        assert (report.build_junit(shared, summary, d, warnings=warnings, run_id="r")
                == report.build_junit(alone, summary, d, warnings=warnings, run_id="r"))
        assert report.build_html(shared, summary, d, run_id="r") == report.build_html(alone, summary, d, run_id="r")
    # JUnit written the plain way: every suite from its host's own cases, no stand-in name
    plain = report.junit_xml([{"name": h, "cases": report._host_cases(h, r, warnings)} for h, r in sorted(alone.items())],
                             name="dlrack.node preflight", properties={"run_id": "r"})
    assert report.build_junit(shared, summary, warnings=warnings, run_id="r") == plain


def test_junit_names_each_host_of_a_shared_suite():
    shared, summary = rules.evaluate_fleet(_fleet())
    xml = report.build_junit(shared, summary, run_id="r")
    assert '<testsuite name="good-4"' in xml and 'classname="good-4.preflight"' in xml
    assert 'name="tab&#9;here &amp; &lt;amp&gt;"' in xml
    assert "\ue000dlrack-host\ue001" not in xml.replace("priv\ue000dlrack-host\ue001", "")


def test_hosts_whose_sections_read_the_same_share_one_section():
    """Documents that differ only where the page does not show it (host.hostname) share a section
    that names both hosts; a different verdict or drawing gets its own."""
    hosts = {"a": {"hw": dict(GOOD, host={"hostname": "a.example"})},
             "b": {"hw": dict(GOOD, host={"hostname": "b.example"})},
             "c": {"hw": dict(GOOD, memory=dict(GOOD["memory"], ecc="none"))}}
    results, summary = rules.evaluate_fleet(hosts)
    assert report.share_key(results["a"]) != report.share_key(results["b"])     # not one evaluation
    views = [report._host_view(h, results[h], ()) for h in sorted(results)]
    sections = report._sections(views)
    assert [(s["view"]["name"], s["same"]) for s in sections] == [("a", ["b"]), ("c", [])]
    html = report.build_html(results, summary, run_id="r")
    assert html.count('id="host-b"') == 1 and "and 1 more host(s) like it" in html


@pytest.mark.parametrize("value,found", [
    (["a", {"k": "x" + MARK}], True), ({"x" + MARK: 1}, True), (("no", 1.5, None), False),
    ([{"s": {"e\ue000dlrack-host\ue001"}}], False),   # a set: marshal writes it, it holds no mark
    ([object(), "y" + MARK], True),                   # marshal cannot write object(): the walk decides
    ([object(), "clean"], False), ("\udfff" + MARK, True)])
def test_mentions_finds_the_text_in_any_string(value, found):
    assert rules.mentions(value, MARK) is found
