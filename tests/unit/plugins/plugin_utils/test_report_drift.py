"""drift.html as an operator reads it (issue 30.2): its headline counts what its table and the
console list, and each would-be change is shown per host and role as a bounded, escaped unified
diff - not a Python dict with whole files and Ansible's temporary paths in it.

The diffs are real: what ansible-core 2.19.14 returned in check mode with --diff for copy,
template, lineinfile and file (tests/data/drift/README.md)."""
import json
import os
import re
import xml.etree.ElementTree as ET

from ansible_collections.dlrack.node.plugins.plugin_utils import report
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, run_preflight
from hwdocs import GOOD
from testpaths import DATA


def _real_diffs():
    with open(os.path.join(DATA, "drift", "check_mode_diffs.jsonl"), encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _change(role, task, rec):
    return {"role": role, "task": task, "action": rec["task"], "diff": rec["diff"]}


def _drift():
    """13 would-be changes on three hosts; one of them also had a check that failed (it is both
    drifted and not checked), one host is clean, one unreachable."""
    copy, template, lineinfile, newdir = _real_diffs()
    changes = {
        "gpu-a01": [_change("gpu_affinity", "Write the affinity plan", copy), _change("gpu_affinity", "Render the launcher", template),
                    _change("storage_tiers", "Mount the hot tier", lineinfile), _change("storage_tiers", "Make the mount point", newdir),
                    _change("ecc_monitor", "Install rasdaemon", {"task": "dlrack.node.packages_missing", "diff": None})],
        "gpu-a02": [_change("gpu_affinity", "Write the affinity plan", copy), _change("gpu_affinity", "Render the launcher", template),
                    _change("storage_tiers", "Mount the hot tier", lineinfile), _change("storage_tiers", "Make the mount point", newdir)],
        "gpu-a03": [_change("gpu_affinity", "Write the affinity plan", copy), _change("gpu_affinity", "Render the launcher", template),
                    _change("storage_tiers", "Mount the hot tier", lineinfile), _change("storage_tiers", "Make the mount point", newdir)],
    }
    drift = {h: {"status": "drifted", "changes": c, "failures": [], "unreachable": False} for h, c in changes.items()}
    drift["gpu-a03"]["failures"] = [{"role": "ecc_monitor", "task": "Load the EDAC driver", "msg": "modprobe: FATAL"}]
    drift["gpu-a03"]["status"] = "error"
    drift["gpu-a04"] = {"status": "clean", "changes": [], "failures": [], "unreachable": False}
    drift["gpu-a05"] = {"status": "error", "changes": [], "unreachable": True,
                        "failures": [{"role": None, "task": "Gather hardware facts", "msg": "ssh: connect to host gpu-a05 port 22: No route to host"}]}
    return drift


def _run(tmp_path, drift):
    inputs = {h: collect_host_inputs(h, {"dlrack_hw": GOOD}) for h in drift}
    out = run_preflight(inputs, report_dir=str(tmp_path), drift=drift, prefix="drift")
    with open(str(tmp_path / "drift.html"), encoding="utf-8") as fh:
        html = fh.read()
    with open(str(tmp_path / "drift.xml"), encoding="utf-8") as fh:
        xml = fh.read()
    return out, html, xml


def test_the_headline_counts_what_the_table_and_the_console_list(tmp_path):
    drift = _drift()
    out, html, dummy = _run(tmp_path, drift)
    changes = sum(len(d["changes"]) for d in drift.values())
    assert changes == 13
    table = html[html.index('<table class="drift wide">'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r'<tr class="change"><td class="hn">([^<]*)</td>', table)
    assert len(rows) == 13 and len(set(rows)) == 3
    cards = html[html.index('<div class="cards">'):html.index("</div>\n<section")]
    # the headline and the cards: 13 changes on 3 drifted hosts (gpu-a03 also had a check that failed)
    assert '<b class="fail">13</b>would-be change(s)' in cards and '<b class="fail">3</b>drifted' in cards
    assert '<b class="fail">2</b>not checked (error)' in cards
    assert "Drift: 13 would-be change(s) on 3 host(s) drifted, 2 host(s) not checked" in html
    # the console says the same, and lists each change once
    assert "dlrack.node drift: 13 would-be change(s) on 3 host(s) drifted, 2 host(s) not checked (2 failed check(s)), of 5 host(s)" in out["lines"]
    assert sum(1 for line in out["lines"] if line.startswith("DRIFT ")) == 13
    # the verdict names every drifted host, gpu-a03 included
    assert out["drift_hosts"] == ["gpu-a01", "gpu-a02", "gpu-a03"]
    # per host and role: one group row each, with its count
    assert re.findall(r'<tr class="grp" data-host="gpu-a01" data-role="([^"]*)">', table) == ["gpu_affinity", "storage_tiers", "ecc_monitor"]
    assert "gpu-a01 &middot; storage_tiers: 2 would-be change(s)" in table
    # a host that drifted and could not be checked fully says both
    row = html[html.index('<tr data-host="gpu-a03">'):]
    assert "not checked, drifted" in row[:row.index("</tr>")]


def test_a_change_is_a_unified_diff_without_dicts_or_temporary_paths(tmp_path):
    out, html, xml = _run(tmp_path, _drift())
    for text in (html, xml):
        assert "/.ansible/tmp" not in text and "ansible-local-" not in text     # the template's temporary source
        assert "before_header" not in text and "{&#39;before" not in text and '{"before' not in text
        assert "&#34;before&#34;" not in text and "&quot;before&quot;" not in text
    # copy: a JSON file, one line changed
    assert "--- /tmp/dr/f.json\n+++ /tmp/dr/f.json\n@@ -1,2 +1,2 @@\n {&#34;a&#34;: 1,\n- &#34;b&#34;: 2}\n+ &#34;b&#34;: 3}" in html
    # template: the temporary source is named by the destination
    assert "--- /tmp/dr/t.conf\n+++ /tmp/dr/t.conf\n@@ -1,3 +1,2 @@\n x=1\n-y=1\n-z=0\n+y=2" in html
    # file: a mapping is key: value lines
    assert "-state: absent\n+state: directory" in html
    # lineinfile: the line that would be added
    assert "+UUID=abc /mnt/hot xfs defaults,nofail 0 0" in html
    # drift.xml: the same diff in the failure's text
    case = [c for c in ET.fromstring(xml.encode("utf-8")).iter("testcase")
            if c.get("classname") == "gpu-a01.drift" and c.get("name") == "drift: Render the launcher"][0]
    assert "-y=1\n-z=0\n+y=2" in case.find("failure").text and "role: gpu_affinity" in case.find("failure").text
    # drift.json keeps what the module returned, whole
    with open(str(tmp_path / "drift.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    assert doc["drift"]["gpu-a01"]["changes"][1]["diff"][0]["after"] == "x=1\ny=2\n"


def test_a_diff_is_bounded_and_escaped():
    huge = {"before": "".join("line %d\n" % i for i in range(10000)), "after": "<script>alert(1)</script>\x1b[31m\n" + "y" * 5000 + "\n",
            "before_header": "/etc/dlrack/gpu-affinity.json", "after_header": "/root/.ansible/tmp/ansible-tmp-1/source"}
    text = report.unified_diff(huge)
    lines = text.split("\n")
    assert len(lines) == report.DIFF_MAX_LINES + 1
    assert lines[-1].endswith("more line(s) of this diff: drift.json has it whole")
    assert lines[0] == "--- /etc/dlrack/gpu-affinity.json" and lines[1] == "+++ /etc/dlrack/gpu-affinity.json"
    assert max(len(line) for line in lines) < report.DIFF_MAX_LINE + 40
    assert "\x1b" not in text and "\\x1b" in report.unified_diff({"before": "", "after": "\x1b[31m"})
    page = report.build_html({"h": {"status": "pass", "findings": [], "rules": {}}}, {"hosts": 1, "pass": 1, "warn": 0, "fail": 0},
                             drift={"h": {"changes": [{"role": "r", "task": "t", "diff": {"before": "", "after": "<script>x</script>\n"}}]}})
    assert "+&lt;script&gt;x&lt;/script&gt;" in page and "<script>x" not in page
    assert report.unified_diff(None) == "" and report.unified_diff([{}, None]) == ""
    assert report.unified_diff({"prepared": "The following NEW packages will be installed:\n  rasdaemon"}) == \
        "The following NEW packages will be installed:\n  rasdaemon"
