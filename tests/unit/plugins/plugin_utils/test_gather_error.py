"""A host the pre-flight could not gather (issue 18.4): the gather play's __dlrack_gather_error
becomes a host.gathered error finding on that host alone, with the reason (cut), and such a host
fails the gate whatever dlrack_fail_on says."""
import json

from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import (
    GATHER_RULE, failed_hosts, read_host, run_preflight)

from hwdocs import GOOD


def test_gather_error_is_an_error_finding_naming_the_reason(tmp_path):
    inputs = {"good-01": read_host("good-01", {"dlrack_hw": GOOD, "dlrack_external_archive": "nfs://a/b"})[0],
              "gone-01": read_host("gone-01", {"__dlrack_gather_error": "unreachable: ssh: connect refused"})[0],
              "hang-01": read_host("hang-01", {"__dlrack_gather_error": "Task failed: Timed out after 300 second(s).",
                                               "dlrack_hw_gathered": GOOD})[0]}   # a stale fact-cache copy
    out = run_preflight(inputs, report_dir=str(tmp_path), fail_on="never")
    assert out["failed_hosts"] == ["gone-01", "hang-01"]
    results = json.loads((tmp_path / "report.json").read_text())["hosts"]
    for host, why in (("gone-01", "unreachable: ssh: connect refused"),
                      ("hang-01", "Task failed: Timed out after 300 second(s).")):
        mine = [f for f in results[host]["findings"] if f["rule"] == GATHER_RULE]
        assert len(mine) == 1 and mine[0]["severity"] == "error"
        assert mine[0]["message"] == "host %s was not checked: %s" % (host, why)
        assert results[host]["status"] == "fail"
    assert results["good-01"]["status"] == "pass"


def test_long_reasons_are_cut():
    inputs = read_host("h", {"__dlrack_gather_error": "x" * 5000})[0]
    assert len(inputs["extra_findings"][0]["observed"]) == 503


def test_failed_hosts_without_gather_errors_follow_fail_on():
    results = {"a": {"status": "fail", "findings": [{"rule": "cpu.pcie_lanes"}]}, "b": {"status": "warn", "findings": []}}
    assert failed_hosts(results, "never") == []
    assert failed_hosts(results, "error") == ["a"]
    assert failed_hosts(results, "warning") == ["a", "b"]
