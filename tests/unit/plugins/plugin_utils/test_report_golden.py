"""Every report the collection writes, rendered from one fixed fleet, is byte for byte the golden
copy in tests/data/reports_golden/ (written by the code before the reports became a package of
registered writers, issue 19.4; see the README there). The run id and the generation time are the
only parts of a report that differ from one run to the next: both are replaced by placeholders
before the comparison, nothing else is.

Regenerate the golden copies only when a change means to change what a report says, and say so in
its commit: ``python tests/unit/plugins/plugin_utils/test_report_golden.py`` (with the checkout's
.venv and .collections, as for pytest)."""
import copy
import json
import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if __name__ == "__main__":   # run as a script: the same import setup as pytest's tests/conftest.py
    sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "..")))
    import conftest  # noqa: F401  pylint: disable=unused-import

from ansible_collections.dlrack.node.plugins.plugin_utils import acceptance, report, report_merge  # noqa: E402
from testpaths import DATA  # noqa: E402

GOLDEN = os.path.join(DATA, "reports_golden")
RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{12}")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00")
# the golden files: DIR/PREFIX.FORMAT of each report set
FILES = [("%s/%s.%s" % (d, p, ext)) for d, p in (("preflight", "report"), ("preflight_failed", "report"),
                                                 ("drift", "drift"), ("merge", "report"),
                                                 ("acceptance", "acceptance"))
         for ext in ("html", "json", "xml")]
# junit_warnings changes report.xml and report.json only: its page is the plain pre-flight's, kept once
SAME_AS = {"preflight_failed/report.html": "preflight/report.html"}


def _load(name):
    with open(os.path.join(GOLDEN, name), encoding="utf-8") as fh:
        return json.load(fh)


def fleet_results():
    """The fixed fleet (fleet.json): hosts with equal entries share one result object, as the
    hosts with identical inputs of a run share their evaluation (the writers render it once)."""
    fleet = _load("fleet.json")
    shared, results = {}, {}
    for host, entry in fleet["results"].items():
        key = json.dumps(entry, sort_keys=True)
        results[host] = shared.setdefault(key, entry)
    return results, fleet["summary"], fleet["drift"]


def normalized(text):
    return TIME.sub("<time>", RUN_ID.sub("<run-id>", text))


def render_all(out):
    """Write every report set of the fixed fleet under ``out``; return {golden name: text}."""
    results, summary, drift = fleet_results()
    report.write_reports(os.path.join(out, "preflight"), results, summary, meta={"fail_on": "error"})
    report.write_reports(os.path.join(out, "preflight_failed"), results, summary, junit_warnings="failed",
                         meta={"fail_on": "warning", "fail_on_hosts": {"gpu-01": "never"}})
    checked = {h: results[h] for h in sorted(results) if h in drift or h.startswith("gpu-")}
    from ansible_collections.dlrack.node.plugins.plugin_utils.rules import summarize
    report.write_reports(os.path.join(out, "drift"), checked, summarize(checked), drift=drift,
                         meta={"fail_on": "error"}, prefix="drift")
    # two slices of the fleet, written as a sliced run writes them, then merged
    hosts = sorted(results)
    inputs = []
    for i, part in enumerate((hosts[0::2], hosts[1::2])):
        sub = {h: results[h] for h in part}
        paths = report.write_reports(os.path.join(out, "slice%d" % i), sub, summarize(sub), meta={"fail_on": "error"})
        inputs.append(paths["json"])
    report_merge.merge_report_files(inputs, os.path.join(out, "merge"))
    acceptance.write_reports(os.path.join(out, "acceptance"), _load("acceptance_doc.json"))
    texts = {}
    for name in FILES:
        with open(os.path.join(out, name), encoding="utf-8") as fh:
            texts[name] = normalized(fh.read())
    return texts


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """One rendering of every report set for all the cases."""
    return render_all(str(tmp_path_factory.mktemp("reports")))


@pytest.mark.parametrize("name", FILES)
def test_report_is_the_golden_copy(rendered, name):
    with open(os.path.join(GOLDEN, SAME_AS.get(name, name)), encoding="utf-8") as fh:
        golden = fh.read()
    assert rendered[name] == golden, "%s differs from tests/data/reports_golden/%s" % (name, name)


def test_golden_copies_are_not_trivial():
    """The fixed fleet exercises what the writers do differently per host: failures, warnings,
    shared evaluations (identical hosts), hostile names, drift changes and unreachable hosts."""
    results, summary, drift = fleet_results()
    assert summary["fail"] and summary["warn"] and summary["pass"]
    assert len({id(r) for r in results.values()}) < len(results)          # some hosts share a result
    assert any('"' in h or "<" in h for h in results)                      # a hostile host name
    assert any(d.get("unreachable") for d in drift.values()) and any(d.get("changes") for d in drift.values())
    doc = _load("acceptance_doc.json")
    assert {r["status"] for r in doc["hosts"].values()} >= {"pass", "warning", "error", "skip"}


def _make_fixed_inputs():
    """How fleet.json and acceptance_doc.json were made (once, with the code of their commit):
    the rules engine's results for a mixed fleet and an acceptance document of judged figures."""
    from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, guard_non_finite
    from ansible_collections.dlrack.node.plugins.plugin_utils.rules import evaluate_fleet
    from hwdocs import GATHERED, GOOD
    bad = {"schema": 1, "source": "declared", "cpu": {"model": "AMD EPYC 7763 64-Core Processor", "sockets": -2},
           "memory": {"total_gb": 512, "ecc": "yes-please"}, "gpu": {"model": "NVIDIA A100-SXM4-80GB", "count": 8}}
    small = dict(GOOD, memory=dict(GOOD["memory"], total_mb=65536))
    hostile = dict(GOOD, cpu=dict(GOOD["cpu"], model='<script>alert(1)</script> ]]> \'"&amp; \x1b[31m'))
    inputs = {"gpu-%02d" % i: collect_host_inputs("gpu-%02d" % i, {"dlrack_hw": GOOD}) for i in range(1, 4)}
    inputs.update({"live": collect_host_inputs("live", {"dlrack_hw_gathered": GATHERED}),
                   "broken": collect_host_inputs("broken", {"dlrack_hw": bad}),
                   "small-1": collect_host_inputs("small-1", {"dlrack_hw": small}),
                   "small-2": collect_host_inputs("small-2", {"dlrack_hw": small}),
                   'x" onmouseover="alert(1)': collect_host_inputs('x" onmouseover="alert(1)', {"dlrack_hw": hostile})})
    results, summary = evaluate_fleet(inputs, finish=guard_non_finite)
    unreachable = {"status": "error", "changes": [], "unreachable": True, "failures": [
        {"role": None, "task": "Gather hardware facts",
         "msg": "Failed to connect to the host via ssh: ssh: connect to host 127.0.0.2 port 22: Connection refused"}]}
    drift = {"gpu-01": {"status": "drifted", "changes": [{"role": "ecc_monitor", "task": "Install rasdaemon",
                                                          "action": "ansible.builtin.apt", "diff": None}],
                        "failures": [], "unreachable": False},
             "gpu-02": copy.deepcopy(unreachable), "gpu-03": {"status": "clean", "changes": [], "failures": [],
                                                              "unreachable": False},
             "small-1": {"status": "error", "changes": [], "unreachable": False, "failures": [
                 {"role": "storage_tiers", "task": "Mount the hot tier", "msg": "<b>mount</b> failed \x07"}]}}
    from test_acceptance import _h200_raw
    slow = _h200_raw(h2d=20.0)
    slow["storage"]["hot"] = {"path": "/mnt/hot", "status": "error", "reason": "fio said \x1b[31m<bad> & \x00worse"}
    check = _h200_raw()
    check["check_mode"] = True
    doc = acceptance.evaluate({"gpu-01": {"raw": _h200_raw()}, "gpu-02": {"raw": slow}, "gpu-03": {"raw": _h200_raw(h2d=47.0)},
                               "gpu-04": {"raw": check}, "gpu-05": {}, "gpu-06": {}}, "error",
                              skipped={"gpu-06": "failed the pre-flight of this run"})
    doc["summary"]["generated_at"] = "2026-12-01T00:00:00+00:00"
    return ({"results": results, "summary": summary, "drift": drift}, doc)


if __name__ == "__main__":
    import tempfile
    sys.path.insert(0, HERE)
    os.makedirs(GOLDEN, exist_ok=True)
    if "--inputs" in sys.argv:   # the fixed inputs themselves (only when the fleet must change)
        for name, value in zip(("fleet.json", "acceptance_doc.json"), _make_fixed_inputs()):
            with open(os.path.join(GOLDEN, name), "w", encoding="utf-8") as fh:
                fh.write(report.strict_json_dumps(value))
    for name, text in render_all(tempfile.mkdtemp(prefix="dlrack-golden-")).items():
        if name in SAME_AS:
            continue
        os.makedirs(os.path.dirname(os.path.join(GOLDEN, name)), exist_ok=True)
        with open(os.path.join(GOLDEN, name), "w", encoding="utf-8") as fh:
            fh.write(text)
        print(name)
