"""The hw_facts action (issue 18.2): what a node returns is only its dlrack_hw_gathered document.
A compromised node controls its whole module result; every other fact, ansible_stats, a claimed
change and the console text of its answer are handled here. (The real ansible-playbook runs with a
stand-in node are in tests/integration/test_hostile_nodes.py.)"""
from ansible_collections.dlrack.node.plugins.action.hw_facts import FACT, sanitize

DOC = {"schema": 1, "source": "gathered", "cpu": {"model": "AMD EPYC 9654 96-Core Processor"}}


def test_a_plain_answer_is_kept():
    out = sanitize({"changed": False, "dlrack_hw": DOC, "ansible_facts": {FACT: DOC}, "_ansible_parsed": True})
    assert out == {"changed": False, "dlrack_hw": DOC, "ansible_facts": {FACT: DOC}, "warnings": []}


def test_hostile_facts_and_stats_are_left_out_and_named():
    out = sanitize({"changed": True, "dlrack_hw": {"source": "declared"},
                    "ansible_facts": {FACT: DOC, "preflight_fail_on": "never", "preflight_report_dir": "/tmp/x",
                                      "dlrack_hw": {"source": "declared"}, "dlrack_fail_on": "never"},
                    "ansible_stats": {"data": {"dlrack_preflight_failed_hosts": []}}})
    assert out["ansible_facts"] == {FACT: DOC} and out["dlrack_hw"] is DOC and out["changed"] is False
    assert "ansible_stats" not in out
    (warning,) = out["warnings"]
    for name in ("dlrack_fail_on", "dlrack_hw", "preflight_fail_on", "preflight_report_dir", "ansible_stats (result key)"):
        assert name in warning


def test_a_missing_document_fails_the_host_clearly():
    for facts in (None, {}, {FACT: "text"}, {FACT: ["x"]}):
        out = sanitize({"ansible_facts": facts})
        assert out["failed"] and "holds no dlrack_hw_gathered document" in out["msg"] and "ansible_facts" not in out
    assert sanitize("not a dict")["failed"]


def test_what_the_console_shows_is_escaped_and_bounded():
    out = sanitize({"failed": True, "msg": "boom\x1b]52;c;cm0gLXJmIH4=\x07\r\nPASS  gpu-a01" + "x" * 5000,
                    "warnings": ["w\x1b[2J"] * 50, "ansible_facts": {FACT: DOC}})
    assert "\x1b" not in out["msg"] and "\\x1b]52" in out["msg"] and "\\r\\nPASS" in out["msg"]
    assert len(out["msg"]) < 2100 and "ansible_facts" not in out
    assert len(out["warnings"]) == 20 and out["warnings"][0] == "w\\x1b[2J"


def test_a_command_past_its_limit_keeps_its_names_and_the_partial_document():
    """hw_facts fails the host naming the command and the limit (issue 18.3): kept, escaped."""
    out = sanitize({"failed": True, "msg": "nvidia-smi -q -x: killed after 60 s", "dlrack_hw": DOC,
                    "command_failures": ["nvidia-smi -q -x: killed after 60 s\x1b[2J"]})
    assert out["failed"] and out["dlrack_hw"] is DOC and "ansible_facts" not in out and out["warnings"] == []
    assert out["command_failures"] == ["nvidia-smi -q -x: killed after 60 s\\x1b[2J"]
