"""Fleet reports: the JSON contract, JUnit that CI systems parse, a self-contained HTML page."""
import json
import os
import xml.etree.ElementTree as ET

from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, run_preflight
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import RULE_IDS

from hwdocs import GATHERED, GOOD

BAD = {"schema": 1, "source": "declared", "cpu": {"model": "AMD EPYC 7763 64-Core Processor", "sockets": -2},
       "gpu": {"model": "NVIDIA A100-SXM4-80GB", "count": 8}}


def _fleet(tmp_path, fail_on="error"):
    inputs = {"good": collect_host_inputs("good", {"dlrack_hw": GOOD}),
              "broken": collect_host_inputs("broken", {"dlrack_hw": BAD}),
              "live": collect_host_inputs("live", {"dlrack_hw_gathered": GATHERED})}
    return run_preflight(inputs, report_dir=str(tmp_path), fail_on=fail_on)


def test_json_contract(tmp_path):
    out = _fleet(tmp_path)
    doc = json.load(open(os.path.join(str(tmp_path), "report.json")))
    assert set(doc) == {"hosts", "summary"}
    assert set(doc["hosts"]) == {"good", "broken", "live"}
    for host in doc["hosts"].values():
        assert host["status"] in ("pass", "warn", "fail")
        for f in host["findings"]:
            assert set(f) == {"rule", "severity", "observed", "required", "message", "remedy"}
            assert f["rule"] in RULE_IDS
    assert doc["hosts"]["good"]["status"] == "pass"
    assert doc["hosts"]["broken"]["status"] == "fail"
    assert doc["summary"]["hosts"] == 3 and doc["summary"]["fail"] >= 1
    assert out["failed_hosts"] == sorted(h for h, s in out["host_status"].items() if s == "fail")


def test_fail_on_levels(tmp_path):
    assert "good" not in _fleet(tmp_path, "warning")["failed_hosts"]
    assert "live" in _fleet(tmp_path, "warning")["failed_hosts"]      # live has warnings only
    assert _fleet(tmp_path, "never")["failed_hosts"] == []


def test_junit_one_testcase_per_host_and_rule(tmp_path):
    _fleet(tmp_path)
    root = ET.parse(os.path.join(str(tmp_path), "report.xml")).getroot()
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"good", "broken", "live"}
    names = [c.get("name") for c in suites["good"].findall("testcase")]
    assert len(names) == len(set(names)) and "cpu.pcie_lanes" in names
    failed = [c.get("name") for c in suites["broken"].findall("testcase") if c.find("failure") is not None]
    assert "inventory.schema" in failed
    assert int(root.get("failures")) == sum(int(s.get("failures")) for s in suites.values())


def test_html_is_self_contained_with_topology(tmp_path):
    _fleet(tmp_path)
    html = open(os.path.join(str(tmp_path), "report.html")).read()
    assert "<svg" in html and "NUMA node 1" in html          # gathered topology drawn
    assert "Socket 1" in html                                # declared sockets drawn
    assert "x16/x16" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # no external assets
    assert "<script src" not in html and "<link " not in html


def test_terminal_summary_lines(tmp_path):
    out = _fleet(tmp_path)
    assert out["lines"][0].startswith("dlrack.node preflight: 3 host(s)")
    assert any(line.startswith("FAIL  broken") for line in out["lines"])
    assert out["lines"][-1].startswith("reports: ")
