"""report.xml, drift.xml and acceptance.xml as real CI consumers read them (issue 20.5): valid
against the Jenkins xUnit plugin's JUnit schema (tests/data/junit/junit-10.xsd, provenance in
SOURCES.md there) with xmlschema, read back with junitparser (a maintained JUnit library), host
names with dots kept whole where Jenkins splits a classname into package and class, and warnings
told apart from rules that could not be checked by the <skipped> type, not by a message prefix."""
import os

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils import acceptance as acc
from ansible_collections.dlrack.node.plugins.plugin_utils import report
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, run_preflight

from hwdocs import GATHERED, GOOD
from testpaths import DATA

xmlschema = pytest.importorskip("xmlschema", reason="xmlschema (requirements-dev.txt) validates against junit-10.xsd")
junitparser = pytest.importorskip("junitparser", reason="junitparser (requirements-dev.txt) reads the JUnit files")

XSD = os.path.join(DATA, "junit", "junit-10.xsd")
BAD = {"schema": 1, "source": "declared", "cpu": {"model": "AMD EPYC 7763 64-Core Processor", "sockets": -2},
       "gpu": {"model": "NVIDIA A100-SXM4-80GB", "count": 8}}
DOTTED = "gpu-01.rack7.example.com"     # passes
LIVE = "live.rack7.example.com"         # gathered: warnings and rules not checked
BROKEN = "broken.rack7.example.com"     # schema errors


@pytest.fixture(scope="module")
def schema():
    return xmlschema.XMLSchema10(XSD)


def _inputs():
    return {DOTTED: collect_host_inputs(DOTTED, {"dlrack_hw": GOOD}),
            BROKEN: collect_host_inputs(BROKEN, {"dlrack_hw": BAD}),
            LIVE: collect_host_inputs(LIVE, {"dlrack_hw_gathered": GATHERED}),
            "twin.rack7.example.com": collect_host_inputs("twin.rack7.example.com", {"dlrack_hw": GOOD})}


def _cases(path):
    """{(classname, name): case} read by junitparser, which also checks the counts it reads."""
    xml = junitparser.JUnitXml.fromfile(path)
    out = {}
    for suite in xml:
        for case in suite:
            assert (case.classname, case.name) not in out, "CI systems key cases by classname and name"
            out[(case.classname, case.name)] = case
    return xml, out


def _package_and_class(classname):
    """How Jenkins' junit plugin reads a classname (CaseResult.getPackageName/getSimpleName of
    jenkinsci/junit-plugin: split at the last dot)."""
    idx = classname.rfind(".")
    return ("(root)", classname) if idx < 0 else (classname[:idx], classname[idx + 1:])


@pytest.mark.parametrize("warnings", ["skipped", "failed", "passed"])
def test_report_xml_is_valid_junit_10_and_keeps_hosts_whole(tmp_path, schema, warnings):
    out = run_preflight(_inputs(), report_dir=str(tmp_path), junit_warnings=warnings)
    path = out["report_paths"]["xml"]
    schema.validate(path)                                   # raises with the offending element and rule
    xml, cases = _cases(path)
    hosts = {_package_and_class(c)[0] for c, dummy in cases}
    assert hosts == set(_inputs())                          # each host is one package, dots and all
    assert {_package_and_class(c)[1] for c, dummy in cases} == {"preflight"}
    broken = [c for (cn, dummy), c in cases.items() if cn.startswith(BROKEN + ".")]
    assert any(isinstance(r, junitparser.Failure) and r.type == "error" for c in broken for r in c.result)
    total = sum(suite.tests for suite in xml)
    assert total == len(cases) and xml.tests == total


def test_warnings_and_unchecked_rules_differ_by_type(tmp_path, schema):
    run_preflight(_inputs(), report_dir=str(tmp_path))
    path = str(tmp_path / "report.xml")
    schema.validate(path)
    dummy, cases = _cases(path)
    skips = [(r.type, r.message) for c in cases.values() for r in c.result if isinstance(r, junitparser.Skipped)]
    kinds = {t for t, dummy in skips}
    assert kinds == {report.SKIP_WARNING, report.SKIP_NOT_CHECKED}, skips
    for kind, message in skips:
        assert message.startswith("warning: " if kind == report.SKIP_WARNING else "not checked: "), (kind, message)


def test_drift_xml_is_valid_junit_10_with_unreachable_hosts(tmp_path, schema):
    drift = {DOTTED: {"changes": [{"role": "ecc_monitor", "task": "Install rasdaemon", "action": "apt", "diff": None}],
                      "failures": [], "unreachable": False},
             BROKEN: {"changes": [], "failures": [{"role": None, "task": "Gather hardware facts", "msg": "ssh: timeout"}],
                      "unreachable": True},
             LIVE: {"changes": [], "failures": [], "unreachable": False},
             "twin.rack7.example.com": {"changes": [], "unreachable": True,
                                        "failures": [{"role": None, "task": "Gather hardware facts", "msg": "timeout"}]}}
    out = run_preflight(_inputs(), report_dir=str(tmp_path), drift=drift, prefix="drift")
    path = out["report_paths"]["xml"]
    schema.validate(path)
    dummy, cases = _cases(path)
    [changed] = [c for (cn, dummy), c in cases.items() if cn == DOTTED + ".drift"]
    assert [(type(r), r.type) for r in changed.result] == [(junitparser.Failure, "drift")]
    [gone] = [c for (cn, dummy), c in cases.items() if cn == BROKEN + ".drift"]
    assert [(type(r), r.type) for r in gone.result] == [(junitparser.Error, "unreachable")]
    assert _package_and_class(BROKEN + ".drift") == (BROKEN, "drift")
    # The twin's declaration passes every rule, but the host was never reached: no passing case.
    twin = [c for (cn, dummy), c in cases.items() if cn.startswith("twin.rack7.example.com.")]
    assert twin and all(c.result for c in twin), [(c.name, c.result) for c in twin]
    assert {r.type for c in twin for r in c.result} == {report.SKIP_NOT_CHECKED, "unreachable"}


def test_acceptance_xml_is_valid_junit_10(tmp_path, schema):
    doc = acc.evaluate({DOTTED: {}, BROKEN: {}}, "error", skipped={BROKEN: "failed the pre-flight of this run"})
    paths = acc.write_reports(str(tmp_path), doc)
    schema.validate(paths["xml"])
    dummy, cases = _cases(paths["xml"])
    assert {_package_and_class(c) for c, dummy in cases} == {(DOTTED, "acceptance"), (BROKEN, "acceptance")}


def test_the_schema_is_the_one_that_refused_the_old_files(tmp_path, schema):
    """The copy of junit-10.xsd refuses what report.xml used to carry (skipped on <testsuites>),
    so the validations above are not vacuous."""
    bad = tmp_path / "bad.xml"
    bad.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="x" tests="0" failures="0" errors="0" '
                   'skipped="0"></testsuites>\n', encoding="utf-8")
    assert not schema.is_valid(str(bad))
    assert schema.is_valid(report.junit_xml([{"name": "s", "cases": [report.junit_case("h.c", "n", "skipped", "m", "warning")]}]))
