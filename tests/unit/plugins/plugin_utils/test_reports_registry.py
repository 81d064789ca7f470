"""The reports package (issue 19.4): a new report format is one writer and one register() line, and
every report set - pre-flight, drift, the merge of a sliced run, acceptance - is then written in it
too, in the same atomic set, with its path in report_paths and in the console's "reports:" line."""
import collections
import os
import re

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils import acceptance, report_merge, reports
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, run_preflight
from ansible_collections.dlrack.node.plugins.plugin_utils.reports.files import LOCK_NAME

from hwdocs import GOOD
from testpaths import ROOT

SMALL = dict(GOOD, memory=dict(GOOD["memory"], total_mb=65536))


def csv_writer(report):
    """A toy format: one line per host with its status, from the set's JSON document."""
    return "host,status\n" + "".join("%s,%s\n" % (h, r["status"]) for h, r in sorted(report.doc["hosts"].items()))


@pytest.fixture
def registry(monkeypatch):
    """The registry as it is, restored after the test (a toy writer must not leak into others)."""
    monkeypatch.setattr(reports, "WRITERS", collections.OrderedDict(reports.WRITERS))
    return reports


def _listing(path):
    return sorted(os.listdir(str(path)))


def test_a_registered_writer_is_written_by_every_report_set(tmp_path, registry):
    registry.register("csv", csv_writer)            # the one line a new format needs
    assert registry.formats() == ("json", "xml", "html", "csv")
    inputs = {"good": collect_host_inputs("good", {"dlrack_hw": GOOD}),
              "small": collect_host_inputs("small", {"dlrack_hw": SMALL})}
    # pre-flight: written with the others, in report_paths and on the console
    out = run_preflight(inputs, report_dir=str(tmp_path / "pre"))
    assert _listing(tmp_path / "pre") == [LOCK_NAME, "report.csv", "report.html", "report.json", "report.xml"]
    assert open(out["report_paths"]["csv"]).read() == "host,status\ngood,pass\nsmall,fail\n"
    assert out["lines"][-1] == "reports: " + ", ".join(str(tmp_path / "pre" / ("report." + f))
                                                       for f in ("csv", "html", "json", "xml"))
    # drift
    drift = {"good": {"status": "clean", "changes": [], "failures": [], "unreachable": False},
             "small": {"status": "clean", "changes": [], "failures": [], "unreachable": False}}
    out = run_preflight(inputs, report_dir=str(tmp_path / "drift"), drift=drift, prefix="drift")
    assert "drift.csv" in _listing(tmp_path / "drift") and out["report_paths"]["csv"].endswith("drift.csv")
    # the merge of two slices
    slices = []
    for host in sorted(inputs):
        slices.append(run_preflight({host: inputs[host]}, report_dir=str(tmp_path / host))["report_paths"]["json"])
    merged = report_merge.merge_report_files(slices, str(tmp_path / "merged"))
    assert open(merged["report_paths"]["csv"]).read() == "host,status\ngood,pass\nsmall,fail\n"
    assert merged["lines"][-1].startswith("reports: %s" % (tmp_path / "merged" / "report.csv"))
    # acceptance
    doc = acceptance.evaluate({"gpu-01": {}}, "error")
    paths = acceptance.write_reports(str(tmp_path / "acc"), doc)
    assert sorted(paths) == ["csv", "html", "json", "xml"]
    assert open(paths["csv"]).read() == "host,status\ngpu-01,error\n"


def test_a_writer_may_render_bytes_and_a_set_may_be_some_formats(tmp_path, registry):
    registry.register("bin", lambda report: b"\x00\xff" + report.kind.encode())
    doc = acceptance.evaluate({"gpu-01": {}}, "error")
    paths = acceptance.write_reports(str(tmp_path), doc, only=("bin", "json"))
    assert sorted(paths) == ["bin", "json"] and _listing(tmp_path) == [LOCK_NAME, "acceptance.bin", "acceptance.json"]
    assert open(paths["bin"], "rb").read() == b"\x00\xffacceptance"
    with pytest.raises(reports.ReportWriteError, match=r"unknown report format\(s\) 'pdf': choose from json, xml, html, bin"):
        acceptance.write_reports(str(tmp_path / "none"), doc, only=("pdf",))
    assert not os.path.exists(str(tmp_path / "none"))     # refused before anything is written
    with pytest.raises(ValueError, match="lowercase alphanumeric"):
        registry.register("../x", csv_writer)


def test_a_writer_that_fails_leaves_no_file_of_the_set(tmp_path, registry):
    def broken(report):
        raise RuntimeError("broken writer")
    registry.register("zzz", broken)
    inputs = {"good": collect_host_inputs("good", {"dlrack_hw": GOOD})}
    with pytest.raises(RuntimeError):
        run_preflight(inputs, report_dir=str(tmp_path))
    assert [n for n in _listing(tmp_path) if n != LOCK_NAME] == []


FORMAT_LIST = re.compile(r"""\(\s*["'](html|json|xml)["']\s*,\s*["'](html|json|xml)["']\s*,\s*["'](html|json|xml)["']\s*\)""")


def test_no_hard_coded_format_list_outside_the_registry():
    """The formats are the registry's: no ("html", "json", "xml") tuple (in any order) in the code
    that writes or names the reports."""
    found = []
    for top in ("plugins", "roles", "playbooks"):
        for dirpath, dummy, names in os.walk(os.path.join(ROOT, top)):
            for name in names:
                if name.endswith((".py", ".yml", ".yaml", ".j2")):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as fh:
                        if FORMAT_LIST.search(fh.read()):
                            found.append(os.path.relpath(path, ROOT))
    assert found == []
