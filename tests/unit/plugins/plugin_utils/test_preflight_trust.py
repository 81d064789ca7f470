"""The pre-flight glue's trust rules (issue 18.2, 18.8, 18.9b/c), on plain host variables: a host's
own fail_on is its own, run-wide settings must read one way, facts never set inputs or settings,
the verdict play gets a host name that is a host pattern, console lines are escaped, and a
gathered document nobody measured or two conflicting workloads are named."""
import copy

from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import (
    collect_host_inputs, failed_hosts, host_fail_on, host_notes, own_values, run_preflight,
    run_wide_conflict, untrusted_facts, verdict_host, verdict_message)

from hwdocs import GATHERED, GOOD  # noqa: E402


def test_a_hosts_own_fail_on_is_its_own():
    variables = {"a": {"dlrack_fail_on": "never"}, "b": {}, "c": {"preflight_fail_on": "warning", "dlrack_fail_on": "never"},
                 "d": {"dlrack_fail_on": "error"}}
    own, bad = host_fail_on(variables, {}, sorted(variables), "error")
    assert own == {"a": "never", "c": "warning"} and bad == {}        # d says what the run says
    results = {h: {"status": "fail"} for h in variables}
    results["c"] = {"status": "warn"}
    assert failed_hosts(results, "error", own) == ["b", "c", "d"]
    assert failed_hosts(results, "never", {"b": "error"}) == ["b"]


def test_a_fail_on_that_a_fact_set_is_not_the_hosts():
    variables = {"a": {"dlrack_fail_on": "never"}}
    assert host_fail_on(variables, {"a": ["dlrack_fail_on"]}, ["a"], "error") == ({}, {})


def test_a_bad_own_fail_on_is_that_hosts_error_naming_the_variable():
    own, bad = host_fail_on({"a": {}, "b": {"preflight_fail_on": "sometimes"}}, {}, ["a", "b"], "error")
    assert own == {} and list(bad) == ["b"]
    rule, severity, message, _remedy = bad["b"]
    assert (rule, severity) == ("inventory.schema", "error")
    assert message == 'host b: preflight_fail_on is "sometimes", not one of error, warning, never'


def test_run_wide_settings_must_read_one_way():
    hosts = ["a", "b", "c"]
    same = {h: {"dlrack_report_dir": "/r"} for h in hosts}
    seen, missing = own_values(same, {}, hosts, "report_dir")
    assert run_wide_conflict("report_dir", seen, missing, "/r") is None
    one = {"a": {"dlrack_report_dir": "/first"}, "b": {}, "c": {}}
    seen, missing = own_values(one, {}, hosts, "report_dir")
    msg = run_wide_conflict("report_dir", seen, missing, "reports")
    assert msg.startswith("dlrack_report_dir is a run-wide setting, but the hosts' variables give it different values "
                          "(dlrack_report_dir=/first on a; reports on the other 2 host(s))")
    assert run_wide_conflict("report_dir", seen, missing, "/first") is None   # the play says the same
    # a fact's value does not count
    seen, missing = own_values(one, {"a": ["dlrack_report_dir"]}, hosts, "report_dir")
    assert (seen, missing) == ({}, 3)
    two = {"a": {"preflight_junit_warnings": "passed"}, "b": {"dlrack_junit_warnings": "failed"}, "c": {}}
    seen, missing = own_values(two, {}, ["a", "b"], "junit_warnings")
    assert "dlrack_junit_warnings is a run-wide setting" in run_wide_conflict("junit_warnings", seen, missing, "passed")


def test_only_protected_facts_are_untrusted():
    facts = {"a": ["dlrack_hw_gathered", "ansible_hostname"], "b": ["dlrack_hw_gathered", "preflight_fail_on", "dlrack_hw"],
             "c": ["__dlrack_verdict_deferred", "dlrack_report_dir"]}
    assert untrusted_facts(facts) == {"b": ["dlrack_hw", "preflight_fail_on"],
                                      "c": ["__dlrack_verdict_deferred", "dlrack_report_dir"]}


def test_the_verdict_host_is_a_host_pattern():
    assert verdict_host(["a", "b"]) == ["a"]
    assert verdict_host(["a", "b"], avoid={"a": ["dlrack_hw"]}) == ["b"]
    assert verdict_host(["a"], avoid={"a": ["__dlrack_verdict_deferred"]}) == ["localhost"]
    assert verdict_host(["gpu\nPASS x", "b,c", "ok-1.rack"]) == ["ok-1.rack"]
    assert verdict_host(["gpu\nPASS x", "b:c", "x[1:2]", "!y", "h*"]) == ["localhost"]
    assert verdict_host(["a"], play_hosts=[]) == []                   # unreachable while gathering: as before


def test_the_verdict_message_is_console_text():
    msg = verdict_message(["a\x1b]52;c;eA==\x07"], "error", "/r/report.html", {"b": "never"})
    assert msg == ("pre-flight failed for 1 host(s) (dlrack_fail_on=error; 1 host(s) with their own): "
                   "a\\x1b]52;c;eA==\\x07; see /r/report.html")


def _notes(values, untrusted=()):
    return [(rule, sev, msg) for rule, sev, msg, _remedy in host_notes("h", values, untrusted)]


def test_notes_for_untrusted_facts_and_settings_with_controls():
    (note,) = _notes({"dlrack_hw": GOOD}, ["dlrack_hw", "preflight_fail_on"])
    assert note[:2] == ("inventory.schema", "error") and "its facts set dlrack_hw, preflight_fail_on" in note[2]
    (note,) = _notes({"dlrack_hw": GOOD, "dlrack_external_archive": "nfs://a\x1b[2J"})
    assert note == ("inventory.schema", "error", "host h: dlrack_external_archive holds a control character "
                    "(nfs://a\\x1b[2J): settings strings are plain text; remove it from the inventory or extra vars")
    assert _notes({"dlrack_hw": GOOD, "dlrack_external_archive": "nfs://archive/raw"}) == []


def test_a_gathered_document_in_the_inventory_that_was_not_measured_is_named():
    doc = copy.deepcopy(GATHERED)
    (note,) = _notes({"dlrack_hw": doc})
    assert note[:2] == ("inventory.matches_declared", "warning") and "nothing was measured on this run" in note[2]
    assert _notes({"dlrack_hw": doc, "dlrack_hw_gathered": doc}) == []   # measured (or from the fact cache)
    assert _notes({"dlrack_hw": GOOD}) == []


def test_conflicting_workloads_are_named_with_the_one_judged():
    wl = {"kind": "lora", "model_params_b": 7}
    (note,) = _notes({"dlrack_hw": GOOD, "dlrack_workload": wl})
    assert note[:2] == ("gpu.vram_for_workload", "warning")
    assert "dlrack_workload" in note[2] and "differ: the rules judge dlrack_hw.workload" in note[2]
    assert _notes({"dlrack_hw": GOOD, "dlrack_workload": GOOD["workload"]}) == []
    bare = dict(GOOD)
    del bare["workload"]
    assert _notes({"dlrack_hw": bare, "dlrack_workload": wl}) == []
    # a gathered host: its document has no workload, so dlrack_workload is the one judged
    (note,) = _notes({"dlrack_hw": GOOD, "dlrack_hw_gathered": GATHERED, "dlrack_workload": wl})
    assert note[2].endswith("the rules judge dlrack_workload")


def test_notes_change_the_verdict_the_summary_and_the_console():
    hosts = {"a": {"dlrack_hw": GOOD}, "b\n PASS  c": {"dlrack_hw": GOOD}}
    inputs = {h: collect_host_inputs(h, v) for h, v in hosts.items()}
    out = run_preflight(inputs, notes={"a": host_notes("a", hosts["a"], ["dlrack_profile"])})
    assert out["host_status"] == {"a": "fail", "b\n PASS  c": "pass"} and out["failed_hosts"] == ["a"]
    assert (out["summary"]["fail"], out["summary"]["pass"]) == (1, 1)
    assert "PASS  b\\n PASS  c" in out["lines"] and all("\n" not in line for line in out["lines"])
    assert out["text"].count("\n") == len(out["lines"]) - 1
