"""The one verdict vocabulary (plugin_utils/verdict.py): each part's states, the shared levels, the
fail_on table, and that the pre-flight, acceptance and the scheduler all answer from it."""
import re

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils import verdict
from ansible_collections.dlrack.node.plugins.plugin_utils.acceptance import failed_hosts as acceptance_failed
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import failed_hosts as preflight_failed
from ansible_collections.dlrack.node.plugins.plugin_utils.scheduler import verdicts


# (part, state, fails under error, under warning, under never)
TABLE = [
    ("preflight", "pass", False, False, False),
    ("preflight", "warn", False, True, False),
    ("preflight", "fail", True, True, False),
    ("acceptance", "pass", False, False, False),
    ("acceptance", "warning", False, True, False),
    ("acceptance", "error", True, True, False),
    ("acceptance", "incomplete", True, True, False),
    ("acceptance", "skip", False, False, False),
    ("drift", "clean", False, False, False),
    ("drift", "drifted", True, True, True),
    ("drift", "error", True, True, True),
]


@pytest.mark.parametrize("part,status,on_error,on_warning,on_never", TABLE)
def test_each_state_fails_as_the_table_says(part, status, on_error, on_warning, on_never):
    assert [verdict.fails(part, status, f) for f in ("error", "warning", "never")] == [on_error, on_warning, on_never]


def test_every_state_is_in_the_table_and_maps_to_a_shared_level():
    assert {row[:2] for row in TABLE} == {(p, s) for p, states in verdict.STATES.items() for s in states}
    assert all(st.level in verdict.LEVELS + (None,) for states in verdict.STATES.values() for st in states.values())
    assert set(verdict.FAILING) == set(verdict.FAIL_ON)


def test_an_unknown_state_fails_closed():
    for status in ("FAIL", "drift", None, 3):
        assert verdict.fails("acceptance", status, "never") and verdict.fails("preflight", status, "never")


def test_failed_hosts_with_a_hosts_own_fail_on_and_closed_hosts():
    statuses = {"a": "pass", "b": "warn", "c": "fail", "d": "fail"}
    assert verdict.failed_hosts("preflight", statuses, "error") == ["c", "d"]
    assert verdict.failed_hosts("preflight", statuses, "error", {"b": "warning", "c": "never"}) == ["b", "d"]
    assert verdict.failed_hosts("preflight", statuses, "never", closed={"c"}) == ["c"]


def test_the_parts_answer_from_the_one_table():
    results = {"a": {"status": "pass"}, "b": {"status": "warn"}, "c": {"status": "fail", "findings": []},
               "g": {"status": "fail", "findings": [{"rule": "host.gathered"}]}}
    assert preflight_failed(results, "warning") == ["b", "c", "g"]
    assert preflight_failed(results, "never") == ["g"]         # could not be gathered: fails closed
    hosts = {h: {"status": s} for h, s in (("p", "pass"), ("w", "warning"), ("e", "error"), ("i", "incomplete"), ("s", "skip"))}
    assert acceptance_failed(hosts, "error") == ["e", "i"]
    assert acceptance_failed(hosts, "warning") == ["e", "i", "w"]
    assert acceptance_failed(hosts, "never") == []


def test_the_scheduler_acts_on_judged_error_states_only():
    acc = {"hosts": {h: {"status": s, "measurements": [{"name": "gpu.h2d_bandwidth", "verdict": s}]}
                     for h, s in (("p", "pass"), ("w", "warning"), ("e", "error"), ("i", "incomplete"), ("s", "skip"))}}
    pre = {"hosts": {"f": {"status": "fail", "findings": [{"rule": "cpu.pcie_lanes", "severity": "error"}]},
                     "v": {"status": "warn", "findings": []}},
           "drift": {"d": {"status": "drifted"}, "x": {"status": "error"}, "c": {"status": "clean"}}}
    out, dummy = verdicts([acc, pre])
    assert out == {"p": [], "w": [], "e": ["acceptance.gpu.h2d_bandwidth"], "f": ["cpu.pcie_lanes"], "v": [],
                   "d": ["drift.drifted"], "x": ["drift.error"], "c": []}


def test_the_verdict_message_names_every_host_once_by_reason():
    assert verdict.verdict_message("drift", [("drifted", []), ("could not be checked", [])], "x", "r.html") == ""
    msg = verdict.verdict_message("drift", [("drifted", ["a", "b"]), ("could not be checked (status error)", ["b", "c"]),
                                            ("pre-flight findings", ["a"])], "dlrack_fail_on=error", "r/drift.html")
    assert msg == ("drift failed for 3 host(s) (dlrack_fail_on=error): drifted: a, b; "
                   "could not be checked (status error): b, c; pre-flight findings: a; see r/drift.html")
    assert verdict.verdict_message("acceptance", [(None, ["h"])], "fail_on=error", None).endswith("; see the reports")
    evil = verdict.verdict_message("acceptance", [("error", ["a\x1b]52;c;eA==\x07\nPASS  x"])], "fail_on=error", "r")
    assert not re.search(r"[\x00-\x1f\x7f]", evil) and "a\\x1b]52;c;eA==\\x07\\nPASS  x" in evil


def test_a_drift_run_fails_its_drifted_and_unchecked_hosts_whatever_fail_on_says():
    from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import drift_record, drift_verdict
    drift = {"clean": drift_record([], [], False), "moved": drift_record([{"task": "t"}], [], False),
             "dead": drift_record([], [{"msg": "x"}], True), "both": drift_record([{"task": "t"}], [{"msg": "x"}], False),
             "bare": {"changes": [{"task": "t"}]}}               # a record without its status (as tests pass them)
    failing, msg = drift_verdict(["finding"], drift, "never", "r/drift.html")
    assert failing == ["bare", "both", "dead", "finding", "moved"]
    assert msg == ("drift failed for 5 host(s) (dlrack_fail_on=never for the findings): drifted: bare, both, moved; "
                   "could not be checked (status error): both, dead; pre-flight findings: finding; see r/drift.html")
    assert drift_verdict([], {"clean": drift["clean"]}, "error", "r") == ([], "")
