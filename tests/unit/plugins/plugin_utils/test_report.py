"""Fleet reports: the JSON contract, JUnit that CI systems parse, a self-contained HTML page; their
integrity with hostile input (NaN, control characters, markup in names) and concurrent writers."""
import copy
import json
import os
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils import report
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, run_preflight
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import RULE_IDS, evaluate_fleet

from hwdocs import GATHERED, GOOD

BAD = {"schema": 1, "source": "declared", "cpu": {"model": "AMD EPYC 7763 64-Core Processor", "sockets": -2},
       "gpu": {"model": "NVIDIA A100-SXM4-80GB", "count": 8}}
# Four independent schema errors in one declaration.
FOUR_BAD = {"schema": 1, "source": "declared", "cpu": {"model": "AMD EPYC 7763 64-Core Processor", "sockets": -2},
            "memory": {"total_gb": 512, "ecc": "yes-please"}, "gpu": {"model": "NVIDIA A100-SXM4-80GB", "count": 8}}

HOSTILE_HOST = 'x" onmouseover="alert(1)'
HOSTILE_MODEL = '<script>alert(1)</script> ]]> </svg><img src=x onerror=alert(2)> \'"&amp;'


def _fleet(tmp_path, fail_on="error", **kw):
    inputs = {"good": collect_host_inputs("good", {"dlrack_hw": GOOD}),
              "broken": collect_host_inputs("broken", {"dlrack_hw": BAD}),
              "live": collect_host_inputs("live", {"dlrack_hw_gathered": GATHERED})}
    return run_preflight(inputs, report_dir=str(tmp_path), fail_on=fail_on, **kw)


def _read(tmp_path, name):
    with open(os.path.join(str(tmp_path), name), encoding="utf-8") as fh:
        return fh.read()


def _strict_json(text):
    def bad_constant(name):
        raise AssertionError("non-standard JSON constant %s" % name)
    return json.loads(text, parse_constant=bad_constant)


def test_json_contract(tmp_path):
    out = _fleet(tmp_path)
    doc = _strict_json(_read(tmp_path, "report.json"))
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


def _suites(tmp_path):
    root = ET.parse(os.path.join(str(tmp_path), "report.xml")).getroot()
    return root, {s.get("name"): s for s in root.findall("testsuite")}


def test_junit_one_failure_per_failing_finding(tmp_path):
    inputs = {"four": collect_host_inputs("four", {"dlrack_hw": FOUR_BAD}),
              "good": collect_host_inputs("good", {"dlrack_hw": GOOD})}
    run_preflight(inputs, report_dir=str(tmp_path))
    results, dummy = evaluate_fleet(inputs)
    errors = [f for f in results["four"]["findings"] if f["severity"] == "error"]
    assert len(errors) == 4 and {f["rule"] for f in errors} == {"inventory.schema"}
    root, suites = _suites(tmp_path)
    failed = [c for c in suites["four"].findall("testcase") if c.find("failure") is not None]
    assert len(failed) == 4 and int(suites["four"].get("failures")) == 4
    assert sorted(c.find("failure").get("message") for c in failed) == sorted(f["message"] for f in errors)
    names = [c.get("name") for c in suites["four"].findall("testcase")]
    assert len(names) == len(set(names))                             # CI systems key cases by name
    assert int(root.get("failures")) == sum(int(s.get("failures")) for s in suites.values()) == 4
    assert int(root.get("tests")) == sum(len(s.findall("testcase")) for s in suites.values())
    good = [c.get("name") for c in suites["good"].findall("testcase")]
    assert len(good) == len(set(good)) and "cpu.pcie_lanes" in good


@pytest.mark.parametrize("mode", ["skipped", "failed", "passed"])
def test_junit_warnings_setting(tmp_path, mode):
    _fleet(tmp_path, junit_warnings=mode)
    results, dummy = evaluate_fleet({"live": collect_host_inputs("live", {"dlrack_hw_gathered": GATHERED})})
    warnings = [f for f in results["live"]["findings"] if f["severity"] == "warning" and not f.get("skipped")]
    assert warnings and results["live"]["status"] == "warn"
    dummy, suites = _suites(tmp_path)
    cases = suites["live"].findall("testcase")
    failures = [c.find("failure") for c in cases if c.find("failure") is not None]
    skipped = [c.find("skipped") for c in cases if c.find("skipped") is not None]
    warn_skips = [s for s in skipped if s.get("message", "").startswith("warning: ")]
    if mode == "failed":
        assert len(failures) == len(warnings) and all(f.get("type") == "warning" for f in failures)
        assert not warn_skips
    elif mode == "skipped":
        assert not failures and len(warn_skips) == len(warnings)
        assert int(suites["live"].get("skipped")) == len(skipped)
    else:
        assert not failures and not warn_skips
    with pytest.raises(ValueError, match="dlrack_junit_warnings"):
        report.build_junit(results, {}, warnings="loud")


def test_three_files_carry_one_run_id(tmp_path):
    out = _fleet(tmp_path)
    run_id = _strict_json(_read(tmp_path, "report.json"))["summary"]["run_id"]
    root, suites = _suites(tmp_path)
    for s in suites.values():
        assert {p.get("name"): p.get("value") for p in s.iter("property")}["run_id"] == run_id
    assert '<meta name="dlrack-run-id" content="%s">' % run_id in _read(tmp_path, "report.html")
    assert set(out["report_paths"]) == {"json", "xml", "html"}
    assert not [n for n in os.listdir(str(tmp_path)) if n.endswith(".tmp")]


def test_non_finite_numbers_never_reach_json_and_become_a_finding(tmp_path):
    hw = copy.deepcopy(GATHERED)
    hw["memory"]["total_mb"] = float("nan")
    inputs = {"nan": collect_host_inputs("nan", {"dlrack_hw_gathered": hw}),
              "good": collect_host_inputs("good", {"dlrack_hw": GOOD})}
    results, dummy = evaluate_fleet(inputs)
    results["nan"]["findings"][0]["observed"] = float("inf")        # whatever a rule may compute
    report.write_reports(str(tmp_path), results, {"hosts": 2, "pass": 1, "warn": 0, "fail": 1})
    _strict_json(_read(tmp_path, "report.json"))
    out = run_preflight(inputs, report_dir=str(tmp_path / "run"))
    doc = _strict_json(_read(tmp_path / "run", "report.json"))
    assert doc["hosts"]["nan"]["status"] == "fail" and out["failed_hosts"] == ["nan"]
    assert doc["hosts"]["good"]["status"] == "pass"
    assert any("non-finite" in f["message"] for f in doc["hosts"]["nan"]["findings"])


def test_guard_replaces_non_finite_and_names_the_path():
    from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import guard_non_finite
    results, dummy = evaluate_fleet({"h": collect_host_inputs("h", {"dlrack_hw": GOOD})})
    assert guard_non_finite(results) == [] and results["h"]["status"] == "pass"
    results["h"]["findings"][2]["required"] = float("-inf")
    assert guard_non_finite(results) == ["h"]
    assert results["h"]["findings"][3]["required"] is None and results["h"]["status"] == "fail"
    f = results["h"]["findings"][0]
    assert f["severity"] == "error" and "findings[2].required" in f["message"] and "host h" in f["message"]
    assert results["h"]["rules"]["inventory.schema"] == "fail"
    results["h"]["findings"][3]["observed"] = 10 ** 5000                 # str() of it raises in Python >= 3.11
    assert guard_non_finite(results) == ["h"] and results["h"]["findings"][4]["observed"] is None
    assert "findings[3].observed" in results["h"]["findings"][0]["message"]
    assert report.finite_copy([True, 2 ** 1024 - 1, 2 ** 1024]) == [True, 2 ** 1024 - 1, None]
    assert _strict_json(report.strict_json_dumps({"a": [float("nan"), 1.5, {2, 1}, float("inf")]})) == {"a": [None, 1.5, [1, 2], None]}


def _hostile_fleet():
    hw = copy.deepcopy(GATHERED)
    for g in hw["gpus"]:
        g["model"] = HOSTILE_MODEL + "\x01\x1b[31m\ud800"
    hw["cpu"]["model"] = "CPU </text></svg><script>alert(3)</script>\x00"
    hw["disks"][3]["model"] = "]]><!-- -->\x07"
    bad = copy.deepcopy(FOUR_BAD)
    bad["cpu"]["model"] = HOSTILE_MODEL + "\x0c"
    return {HOSTILE_HOST: collect_host_inputs(HOSTILE_HOST, {"dlrack_hw_gathered": hw}),
            "ctl\x02host\udfff": collect_host_inputs("ctl\x02host\udfff", {"dlrack_hw": bad}),
            "good": collect_host_inputs("good", {"dlrack_hw": GOOD})}


def test_xml_is_well_formed_with_control_characters_and_surrogates(tmp_path):
    run_preflight(_hostile_fleet(), report_dir=str(tmp_path))
    root, suites = _suites(tmp_path)                                  # expat rejects any invalid character
    assert HOSTILE_HOST in suites and "ctl\\x02host\\udfff" in suites
    text = ET.tostring(root, encoding="unicode")
    assert HOSTILE_MODEL[:20] in text or "&lt;script&gt;" in text
    _strict_json(_read(tmp_path, "report.json"))
    assert report.xml_safe("a\x00b\ud800c\ufffe") == "a\\x00b\\ud800c\\ufffe"
    assert report.xml_safe(None) == "" and report.xml_safe(3) == "3"


class _Collector(HTMLParser):
    def __init__(self):
        HTMLParser.__init__(self, convert_charrefs=True)
        self.tags, self.attrs, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend((tag, k, v) for k, v in attrs)

    def handle_data(self, data):
        self.text.append(data)


def test_html_escapes_hostile_names_in_every_context(tmp_path):
    run_preflight(_hostile_fleet(), report_dir=str(tmp_path))
    html = _read(tmp_path, "report.html")
    p = _Collector()
    p.feed(html)
    assert "script" not in p.tags and "img" not in p.tags
    assert not [a for a in p.attrs if a[1].lower().startswith("on")]           # no event handler injected
    text = "".join(p.text)
    assert HOSTILE_HOST in text and "<script>alert(1)</script>" in text        # shown literally, as text
    # attribute contexts keep the hostile string whole inside one attribute value
    assert ("a", "href", "#host-" + HOSTILE_HOST) in p.attrs
    assert ("section", "id", "host-" + HOSTILE_HOST) in p.attrs
    assert any(t == "tr" and k == "data-host" and v == HOSTILE_HOST for t, k, v in p.attrs)
    # SVG context: the hostile GPU model is inside <text>, escaped (cut to the box, full text in <title>)
    results, dummy = evaluate_fleet(_hostile_fleet())
    assert p.tags.count("svg") == sum(1 for r in results.values() if r["hw"]) == 3
    assert "&lt;script&gt;" in html and "\x01" not in html and "\x00" not in html


def test_html_is_self_contained_with_topology(tmp_path):
    _fleet(tmp_path)
    html = _read(tmp_path, "report.html")
    assert "<svg" in html and "NUMA node 1" in html          # gathered topology drawn
    assert "Socket 1" in html                                # declared sockets drawn
    assert "x16/x16" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # no external assets
    assert "<script" not in html and "<link " not in html
    # failures first: the list of error findings comes before the matrix, and names every one
    assert html.index('id="failures"') < html.index('class="matrix"')
    assert html.count('<tr class="failure"') == sum(1 for line in _fleet(tmp_path)["lines"] if line.startswith("      error "))
    # every matrix cell carries a symbol, not colour alone, and the legend explains them
    for outcome, symbol in report.SYMBOLS.items():
        assert ('class="c %s"' % outcome) in html and symbol in html
    assert 'class="legend"' in html


def test_topology_is_bounded_whatever_the_declared_numbers():
    hw = {"source": "declared", "cpu": {"model": "X", "sockets": 1000000000000},
          "gpus": [{"index": i, "model": "NVIDIA H100 80GB HBM3", "memory_mb": 81559} for i in range(5000)],
          "disks": [{"name": "d%d" % i, "kind": "nvme", "size_bytes": 10 ** 12 + i} for i in range(5000)]}
    t0 = time.process_time()
    topo = report.topology(hw)
    svg = report.render("topology.svg.j2", topo=topo)
    assert time.process_time() - t0 < 5
    assert len(topo["columns"]) == report.MAX_COLUMNS + 2                      # + "more sockets" + "Storage"
    assert topo["columns"][-2]["title"] == "+%d more sockets" % (10 ** 12 - report.MAX_COLUMNS)
    assert topo["columns"][-1]["title"] == "Storage"
    assert all(len(c["items"]) <= report.MAX_ROWS for c in topo["columns"])
    assert "more GPU/disk lines" in svg and len(svg) < 200000
    # gathered NUMA nodes are capped the same way; absurd cpulists are not expanded
    many = {"source": "gathered", "cpu": {"numa_nodes": [{"id": i, "cpus": "0-4294967295", "memory_mb": 1} for i in range(100)]}}
    topo = report.topology(many)
    assert topo["columns"][-1]["title"] == "+92 more NUMA nodes" and "CPUs ?" in topo["columns"][0]["subtitle"]


def test_topology_text_is_cut_to_its_box_with_the_full_text_kept():
    long_model = "NVIDIA RTX 6000 Ada Generation with a very long marketing name that cannot fit in any box"
    hw = {"source": "gathered", "cpu": {"numa_nodes": [{"id": 0, "cpus": "0-31", "memory_mb": 193000}]},
          "gpus": [{"index": 0, "model": long_model, "memory_mb": 49140, "numa_node": 0,
                    "pcie": {"width": 8, "width_max": 16}}]}
    topo = report.topology(hw)
    col = topo["columns"][0]
    item = col["items"][0]
    assert col["w"] == report.COL_MAX and item["label_fit"].endswith(u"\u2026") and item["bad"]
    right_w = report.text_width(item["right_fit"], 11) + 10
    assert report.text_width(item["label_fit"], 12) <= item["w"] - 12 - right_w
    svg = report.render("topology.svg.j2", topo=topo)
    assert "<title>GPU0 %s 48 GB</title>" % long_model.replace("NVIDIA ", "") in svg and "x8/x16" in svg
    assert report.fit_text("short", 100, 12) == "short"
    assert report.text_width("WWW", 12) > report.text_width("iii", 12)


def test_unusable_report_dir_is_a_clear_error_and_the_summary_stays(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    inputs = {"good": collect_host_inputs("good", {"dlrack_hw": GOOD}),
              "broken": collect_host_inputs("broken", {"dlrack_hw": BAD})}
    for bad_dir in (str(afile), str(afile / "sub"), "", "   "):
        out = run_preflight(inputs, report_dir=bad_dir)
        assert "dlrack_report_dir" in out["report_error"]
        if bad_dir.strip():
            assert bad_dir in out["report_error"]
        else:
            assert "empty" in out["report_error"]
        assert out["lines"][0].startswith("dlrack.node preflight: 2 host(s)")
        assert any(line.startswith("FAIL  broken") for line in out["lines"])
        assert out["lines"][-1].startswith("reports NOT written: ") and "report_paths" not in out
    assert afile.read_text() == "x"
    assert "report_error" not in run_preflight(inputs)                 # None: no report asked for


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_report_dir(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    with pytest.raises(report.ReportWriteError, match=str(ro)):
        report.write_file_set(str(ro), {"a.json": "{}"})


def test_concurrent_writers_leave_one_complete_set(tmp_path, monkeypatch):
    """Two runs renaming into one directory at once: the first rename of all pauses, so that
    without the directory lock the other run's three renames land in the middle of the first
    run's (leaving its json next to the first run's xml and html)."""
    real_replace = os.replace
    calls = []

    def slow_replace(src, dst):
        real_replace(src, dst)
        calls.append(dst)
        if len(calls) == 1:
            time.sleep(0.3)
    monkeypatch.setattr(os, "replace", slow_replace)   # the os module the reports package writes with
    results, summary = evaluate_fleet({"good": collect_host_inputs("good", {"dlrack_hw": GOOD})})
    errors = []

    def writer():
        try:
            report.write_reports(str(tmp_path), results, summary)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
    threads = [threading.Thread(target=writer) for dummy in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(_run_ids(tmp_path)) == 1


def _run_ids(d):
    ids = {_strict_json(_read(d, "report.json"))["summary"]["run_id"]}
    ids |= {p.get("value") for p in ET.parse(os.path.join(str(d), "report.xml")).getroot().iter("property")}
    html = _read(d, "report.html")
    ids.add(html.split('name="dlrack-run-id" content="', 1)[1].split('"', 1)[0])
    return ids


_WRITER = """
import json, sys
from ansible_collections.dlrack.node.plugins.plugin_utils import report
d, n, data = sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3]))
for dummy in range(n):
    report.write_reports(d, data["results"], data["summary"])
"""


def test_concurrent_processes_leave_one_complete_set(tmp_path):
    # Two real processes (not a fork of this one: forking a pytest process that has other tests'
    # threads alive can deadlock the child) write the same directory 15 times each.
    results, summary = evaluate_fleet({"good": collect_host_inputs("good", {"dlrack_hw": GOOD}),
                                       "live": collect_host_inputs("live", {"dlrack_hw_gathered": GATHERED})})
    data = tmp_path / "fleet.json"
    data.write_text(json.dumps({"results": results, "summary": summary}))
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(out), "15", str(data)], env=env)
             for dummy in range(2)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    assert len(_run_ids(out)) == 1
    assert sorted(os.listdir(str(out))) == [report.LOCK_NAME, "report.html", "report.json", "report.xml"]


def test_reusable_building_blocks(tmp_path):
    env = report.jinja_env()
    assert env.autoescape is True
    xml = report.junit_xml([{"name": "acceptance.h1", "cases": [
        report.junit_case("acc.h1", "nccl", "failure", "busbw 12 < 300", "threshold", "detail\x01"),
        report.junit_case("acc.h1", "gpu_burn", "passed", system_out="ok"),
        report.junit_case("acc.h1", "dcgm", "skipped", "not installed")]}], name="acc", properties={"run_id": "r1"})
    root = ET.fromstring(xml)
    s = root.find("testsuite")
    assert (s.get("tests"), s.get("failures"), s.get("skipped"), root.get("failures")) == ("3", "1", "1", "1")
    assert s.find("testcase/failure").text == "detail\\x01"
    paths = report.write_file_set(str(tmp_path / "new"), {"a.json": "{}\n", "a.xml": xml})
    assert sorted(os.listdir(str(tmp_path / "new"))) == [report.LOCK_NAME, "a.json", "a.xml"]
    assert open(paths["a.json"]).read() == "{}\n"
    assert report.atomic_write(str(tmp_path / "new" / "b.txt"), "b") == str(tmp_path / "new" / "b.txt")
    with pytest.raises(ValueError):
        report.junit_case("c", "n", "warning")


def test_terminal_summary_lines(tmp_path):
    out = _fleet(tmp_path)
    assert out["lines"][0].startswith("dlrack.node preflight: 3 host(s)")
    assert any(line.startswith("FAIL  broken") for line in out["lines"])
    assert out["lines"][-1].startswith("reports: ")


def test_terminal_summary_is_bounded_for_a_big_fleet():
    """A 10,000-host job's console summary (issue 23.3): every host while it fits; past the
    budget the failing hosts come first and one line counts the rest."""
    finding = {"severity": "error", "rule": "gpu.pcie_link", "message": "x8 of x16"}
    results = {}
    for i in range(10000):
        failing = i % 5 < 3
        results["gpu-%05d" % i] = {"status": "fail" if failing else "pass", "findings": [finding] if failing else []}
    summary = {"hosts": 10000, "pass": 4000, "warn": 0, "fail": 6000}
    lines = report.summary_lines(results, summary)
    assert len(lines) <= report.CONSOLE_MAX_LINES
    assert all(not line.startswith("PASS") for line in lines)
    listed = sum(1 for line in lines if line.startswith("FAIL  "))
    assert listed == (report.CONSOLE_MAX_LINES - 2) // 2
    assert lines[-1].startswith("... %d more host(s) not listed here (%d fail, 4000 pass)" % (10000 - listed, 6000 - listed))
    small = dict(list(results.items())[:10])
    assert report.summary_lines(small, summary)[1:] == sum(
        (report._host_lines(h, small[h]) for h in sorted(small)), [])


def test_drift_section_and_drift_failures(tmp_path):
    inputs = {"good": collect_host_inputs("good", {"dlrack_hw": GOOD}),
              "live": collect_host_inputs("live", {"dlrack_hw_gathered": GATHERED})}
    drift = {"good": {"changes": [], "failures": [], "unreachable": False},
             "live": {"changes": [{"role": "ecc_monitor", "task": "Install <rasdaemon>", "action": "apt",
                                   "diff": {"before": "x" * 5000, "after": float("nan")}}], "failures": [], "unreachable": False}}
    out = run_preflight(inputs, report_dir=str(tmp_path), drift=drift, prefix="drift")
    assert out["drift_hosts"] == ["live"] and sorted(os.listdir(str(tmp_path)))[1:] == ["drift.html", "drift.json", "drift.xml"]
    root = ET.parse(str(tmp_path / "drift.xml")).getroot()
    drifted = [c for c in root.iter("testcase") if c.get("classname") == "live.drift"]
    assert [c.get("name") for c in drifted] == ["drift: Install <rasdaemon>"]
    assert drifted[0].find("failure").get("type") == "drift"
    html = _read(tmp_path, "drift.html")
    # a 5,000-character line of a diff is cut at report.DIFF_MAX_LINE characters, saying how many more there were
    assert "Install &lt;rasdaemon&gt;" in html and "-" + "x" * (report.DIFF_MAX_LINE - 1) in html and "x" * (report.DIFF_MAX_LINE + 1) not in html
    assert "(%d more characters)" % (5000 + 1 - report.DIFF_MAX_LINE) in html
    assert _strict_json(_read(tmp_path, "drift.json"))["drift"]["live"]["changes"][0]["diff"]["after"] is None
    no_drift = report.build_html(*evaluate_fleet(inputs), drift={"good": {"changes": []}})
    assert "no drift: every managed setting is as the roles leave it" in no_drift


def test_html_survives_absurd_numbers_in_the_hardware_document():
    huge, nan = 10 ** 5000, float("nan")
    hw = {"source": "gathered",
          "cpu": {"model": "X", "sockets": huge, "cores": huge,
                  "numa_nodes": [{"id": huge, "cpus": "0-3", "memory_mb": nan}, {"id": 1, "cpus": huge, "memory_mb": huge}]},
          "memory": {"total_mb": huge, "ecc": "multi-bit"},
          "gpus": [{"index": huge, "model": "NVIDIA H100", "memory_mb": nan, "numa_node": 1,
                    "pcie": {"width": huge, "width_max": 16}}],
          "disks": [{"name": "d", "kind": "nvme", "size_bytes": huge}, {"name": "e", "kind": "hdd", "size_bytes": nan}]}
    results = {"h": {"status": "pass", "profile": "training", "findings": [], "rules": {}, "hw": hw, "provenance": {}}}
    html = report.build_html(results, {"hosts": 1, "pass": 1, "warn": 0, "fail": 0, "rules": {}})
    assert "NUMA node ?" in html and "? x X, ? cores" in html and "GPU? H100" in html
    decl = dict(hw, source="declared", cpu={"model": "X", "sockets": huge})
    assert report.topology(decl)["columns"][0]["title"] == "Socket 0"      # absurd count: drawn as one socket


def test_long_failure_lists_stay_in_the_failures_section(monkeypatch):
    """The failures are grouped by rule and finding (issue 20.9): 20 hosts with the same 4 schema
    errors are 4 rows of 20 hosts each, in hostlist form with every host a link (their messages
    name their own host: grouped all the same); past FAILURES_OPEN groups the rest are folded."""
    inputs = {"bad-%02d" % i: collect_host_inputs("bad-%02d" % i, {"dlrack_hw": FOUR_BAD}) for i in range(20)}
    results, summary = evaluate_fleet(inputs)
    html = report.build_html(results, summary)
    section = html[html.index('<section id="failures">'):html.index("</section>")]
    assert "80 error finding(s) on 20 host(s), 4 distinct" in section
    rows = section.split('<tr class="failure"')[1:]
    assert len(rows) == 4 and all('data-count="20"' in r and "bad-[00-19]" in r for r in rows)
    for r in rows:
        assert all('href="#host-bad-%02d"' % i in r for i in range(20))
    assert all(("bad-%02d" % i) in section for i in range(20))
    monkeypatch.setattr(report, "FAILURES_OPEN", 1)
    section = report.build_html(results, summary)
    section = section[section.index('<section id="failures">'):section.index("</section>")]
    assert "3 more distinct error finding(s)" in section
    assert section.split("<details><summary>3 more")[0].count('<tr class="failure"') == 1      # the rest folded


def test_identical_hosts_share_one_section_that_names_them_all():
    """A rack of identical nodes is one drawing: hosts with the same hardware, verdict and findings
    share a section listing every name (each a link target), other hosts keep their own; the matrix
    keeps one row per host."""
    inputs = {"rack-%02d" % i: collect_host_inputs("rack-%02d" % i, {"dlrack_hw": GOOD}) for i in range(5)}
    inputs["odd"] = collect_host_inputs("odd", {"dlrack_hw": BAD})
    results, summary = evaluate_fleet(inputs)
    html = report.build_html(results, summary)
    assert html.count('<section class="host"') == 2
    assert html.count("<svg") == 2
    first = html.index('<section class="host" id="host-odd"'), html.index('<section class="host" id="host-rack-00"')
    assert all(i > 0 for i in first)
    rack = html[first[1]:html.index("</section>", first[1])]
    assert "and 4 more host(s) like it" in rack
    assert all('<a id="host-rack-%02d" href="#host-rack-%02d">' % (i, i) in rack for i in range(1, 5))
    assert "rack-0" not in html[first[0]:html.index("</section>", first[0])]
    assert html.count('<tr data-host="') == 6
    # A host whose findings differ (here: its own hardware) is never folded into another's section.
    results["rack-03"]["hw"] = dict(results["rack-03"]["hw"], memory={"total_mb": 1, "ecc": "none"})
    assert report.build_html(results, summary).count('<section class="host"') == 3


def test_report_json_is_one_host_per_line_and_the_same_value():
    inputs = {"good": collect_host_inputs("good", {"dlrack_hw": GOOD}),
              "caf\u00e9 \u2603": collect_host_inputs("caf\u00e9 \u2603", {"dlrack_hw": BAD})}
    results, summary = evaluate_fleet(inputs)
    doc = report.build_json(results, summary, drift={"good": {"changes": [{"task": "t", "diff": None}]}}, run_id="r")
    text = report.strict_json_document(doc)
    assert json.loads(text) == json.loads(report.strict_json_dumps(doc))
    lines = text.splitlines()
    assert lines[0] == "{" and lines[1] == '  "hosts": {' and lines[-1] == "}"
    assert [ln.split(":")[0].strip() for ln in lines[2:4]] == ['"caf\\u00e9 \\u2603"', '"good"']
    assert json.loads(lines[2].split(": ", 1)[1].rstrip(","))["status"] == "fail"
    assert report.strict_json_document({"hosts": {}, "summary": {"hosts": 0}}) == '{\n  "hosts": {},\n  "summary": {\n    "hosts": 0\n  }\n}\n'
    # Non-finite numbers never reach the text, whichever layout writes them.
    assert json.loads(report.strict_json_document({"hosts": {"h": {"x": float("nan")}}})) == {"hosts": {"h": {"x": None}}}


def _unreachable(msg="ssh: connect to host 127.0.0.2 port 1: Connection refused"):
    return {"status": "error", "changes": [], "unreachable": True,
            "failures": [{"role": None, "task": "Gather hardware facts", "msg": msg}]}


def test_drift_html_never_shows_an_unchecked_host_as_passing(tmp_path):
    """Issue 20.3: two unreachable hosts whose declarations pass, one drifted and one clean host:
    drift.html is titled a drift report, its headline counts the drifted and the unchecked hosts
    (no green "No failures"), and neither unreachable host has a pass badge or pass cells."""
    inputs = {h: collect_host_inputs(h, {"dlrack_hw": GOOD}) for h in ("dead-1", "dead-2", "moved", "clean")}
    drift = {"dead-1": _unreachable(), "dead-2": _unreachable(),
             "moved": {"status": "drifted", "changes": [{"role": "ecc_monitor", "task": "Install rasdaemon", "diff": None}],
                       "failures": [], "unreachable": False},
             "clean": {"status": "clean", "changes": [], "failures": [], "unreachable": False}}
    out = run_preflight(inputs, report_dir=str(tmp_path), drift=drift, prefix="drift")
    assert out["summary"]["pass"] == 4                     # the declarations all pass the rules ...
    html = _read(tmp_path, "drift.html")
    assert "<title>dlrack.node drift report</title>" in html and "pre-flight report" not in html
    assert "No failures" not in html
    assert "Drift: 1 would-be change(s) on 1 host(s) drifted, 2 host(s) not checked (unreachable or a check failed) of 4" in html
    cards = html[html.index('<div class="cards">'):html.index("</div>\n<section")]
    assert '<b class="fail">1</b>drifted' in cards and '<b class="fail">2</b>not checked (error)' in cards
    assert '<b class="pass">1</b>pass (checked, no drift)' in cards
    for host in ("dead-1", "dead-2"):                      # ... but the hosts were never checked
        row = html[html.index('<tr data-host="%s">' % host):]
        row = row[:row.index("</tr>")]
        assert '<span class="badge unchecked">not checked</span>' in row and "pass" not in row
        assert "unreachable: ssh: connect to host 127.0.0.2" in row
    row = html[html.index('<tr data-host="moved">'):]
    assert '<span class="badge drifted">drifted</span>' in row[:row.index("</tr>")]
    sections = html[html.index('<section class="host"'):]
    assert sections.count("badge unchecked") >= 1 and "what follows is its declaration, not the host" in sections
    # A clean drift run says so; the pre-flight report keeps its title and headline.
    calm = report.build_html(*evaluate_fleet({"clean": inputs["clean"]}), drift={"clean": drift["clean"]})
    assert "No drift and no failures on 1 host(s)" in calm and "<title>dlrack.node drift report</title>" in calm
    plain = report.build_html(*evaluate_fleet({"clean": inputs["clean"]}))
    assert "<title>dlrack.node pre-flight report</title>" in plain and "No failures</h2>" in plain


def _fleet_inputs(n, fail_ratio=0.6):
    """n declared hosts as benchmarks/fleet.py builds them: GOOD and FOUR_BAD-free failing builds,
    every declaration distinct (its own host.hostname)."""
    bad = dict(GOOD, memory=dict(GOOD["memory"], total_gb=64))
    nf = int(round(n * fail_ratio))
    out = {}
    for i in range(n):
        failing = (i * nf) // n != ((i + 1) * nf) // n
        doc = dict(bad if failing else GOOD, host={"hostname": "node-%05d.example" % i})
        out["node-%05d" % i] = collect_host_inputs("node-%05d" % i, {"dlrack_hw": doc})
    return out, nf


def test_fleet_scale_html_groups_failures_and_matrix_rows(tmp_path):
    """Issue 20.9: past MATRIX_HOSTS hosts the page is a few grouped rows - failures by rule and
    finding with a count and the hosts in hostlist form, the matrix by outcome pattern - while
    every host stays reachable (a link target) and report.json/report.xml keep every host."""
    n = report.MATRIX_HOSTS * 2 + 50
    inputs, nf = _fleet_inputs(n)
    out = run_preflight(inputs, report_dir=str(tmp_path), fail_on="never")
    html = _read(tmp_path, "report.html")
    assert html.count("<tr") < 40, html.count("<tr")
    fails = html[html.index('<section id="failures">'):html.index("</section>")]
    rows = fails.split('<tr class="failure"')[1:]
    assert rows and all('data-count="%d"' % nf in r for r in rows)
    assert "node-[" in rows[0]
    failing = sorted(h for h, s in out["host_status"].items() if s == "fail")
    assert len(failing) == nf
    for h in failing:                                     # each failing host is listed behind its group
        assert 'data-host="%s" href="#host-%s"' % (h, h) in rows[0]
    for h in inputs:                                      # and every host has its link target
        assert ('id="host-%s"' % h) in html
    matrix = html[html.index('<table class="matrix">'):html.index("</table>", html.index('<table class="matrix">'))]
    assert matrix.count('<tr data-hosts="') == 2 and '<tr data-host="' not in matrix
    assert len(html) < 400 * n                            # bytes per host: the old page took ~2,000
    doc = _strict_json(_read(tmp_path, "report.json"))
    assert len(doc["hosts"]) == n and sum(1 for v in doc["hosts"].values() if v["status"] == "fail") == nf
    root = ET.parse(str(tmp_path / "report.xml")).getroot()
    assert len(root.findall("testsuite")) == n


def test_small_fleets_keep_a_matrix_row_per_host():
    inputs, nf = _fleet_inputs(12)
    html = report.build_html(*evaluate_fleet(inputs))
    assert html.count('<tr data-host="') == 12 and '<tr data-hosts="' not in html


def test_an_outage_on_a_big_fleet_is_one_matrix_row_and_one_section(tmp_path):
    """A drift run during a network outage: every host unreachable, and ssh names each host in its
    message. Past MATRIX_HOSTS the hosts share one matrix row and one section (which says that
    each host's message names that host) instead of a row and a section per host (15 MB for
    2,000 hosts); every host keeps its link target and its own message in drift.json and the table."""
    n = report.MATRIX_HOSTS + 20
    hosts = ["gpu-%04d" % i for i in range(n)]
    inputs = {h: collect_host_inputs(h, {"dlrack_hw": GOOD}) for h in hosts}
    drift = {h: _unreachable("ssh: connect to host %s port 22: Connection timed out" % h) for h in hosts}
    run_preflight(inputs, report_dir=str(tmp_path), drift=drift, prefix="drift")
    html = _read(tmp_path, "drift.html")
    matrix = html[html.index('<table class="matrix">'):html.index("</table>", html.index('<table class="matrix">'))]
    assert matrix.count('<tr data-hosts="%d">' % n) == 1 and matrix.count("<tr") == 2, matrix.count("<tr")
    assert "gpu-[0000-%04d]" % (n - 1) in matrix and "badge unchecked" in matrix and "pass" not in matrix.split("</tr>", 1)[1]
    assert html.count('<section class="host"') == 1
    assert "on each host they name that host" in html
    for h in hosts:
        assert 'id="host-%s"' % h in html and "connect to host %s port 22" % h in html   # the drift table row
    assert "Drift: %d host(s) not checked" % n in html
    doc = _strict_json(_read(tmp_path, "drift.json"))
    assert {h: doc["drift"][h]["failures"][0]["msg"] for h in hosts} == {h: drift[h]["failures"][0]["msg"] for h in hosts}
