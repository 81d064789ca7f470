"""The glue between Ansible's variables and the rules (plugin_utils/preflight.py): one read of each
host's variables, templating only values that hold a template, which hosts must be gathered, and
drift records with their status (error / drifted / clean) in the three reports."""
import json
import marshal
import os
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import (
    HostView, _plain, _plain_raw, _Template, drift_record, host_view, hosts_to_gather, load_drift, read_host,
    run_preflight)

from hwdocs import GATHERED, GOOD


class FakeHostVars(object):
    """What the action plugin sees: raw_get(host) gives the variables as written; hostvars[host][name]
    templates in that host's context (here: replaces '{{ inventory_hostname }}', and counts calls)."""

    def __init__(self, raw):
        self.raw = raw
        self.templated = []

    def raw_get(self, host):
        return self.raw.get(host, object())   # Ansible returns a Marker for an unknown host

    def __getitem__(self, host):
        outer = self

        class View(object):
            def __getitem__(self, name):
                outer.templated.append((host, name))
                return json.loads(json.dumps(outer.raw[host][name]).replace("{{ inventory_hostname }}", host))
        return View()


def test_plain_declarations_are_not_templated_and_templates_are():
    model = dict(GOOD["cpu"], model="{{ inventory_hostname }}")
    hv = FakeHostVars({"plain": {"dlrack_hw": GOOD, "dlrack_profile": "training"},
                       "tmpl": {"dlrack_hw": dict(GOOD, cpu=model)}})
    inputs, gather = read_host("plain", host_view(hv, "plain"))
    assert inputs["hw"] == GOOD and inputs["profile"] == "training" and gather is False
    assert hv.templated == []                                   # nothing to template: raw values used
    inputs = read_host("tmpl", host_view(hv, "tmpl"))[0]
    assert inputs["hw"]["cpu"]["model"] == "tmpl" and hv.templated == [("tmpl", "dlrack_hw")]
    assert "dlrack_hw" not in HostView(hv, "unknown")           # an unknown host declares nothing


def _may_template(value):
    """The reference for _plain_raw: the walk it replaced, which decided whether a raw value goes
    through Ansible's templating (a Jinja expression in a string or key, or not plain data)."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value or "{#" in value
    if isinstance(value, dict):
        return any(_may_template(k) or _may_template(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_may_template(v) for v in value)
    return not isinstance(value, (int, float, bool, type(None)))


class _Str(str):
    """Like Ansible 2.19's tagged values: subclasses of the builtin types."""


class _Int(int):
    pass


class _Float(float):
    pass


class _Dict(dict):
    pass


class _List(list):
    pass


_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(alphabet="{}%#a ", max_size=5),
    st.text(alphabet="{}%#a ", max_size=5).map(_Str), st.integers().map(_Int), st.floats().map(_Float),
    st.just(object()), st.binary(max_size=2))
_KEYS = st.one_of(st.text(alphabet="{}%#a", max_size=4), st.text(alphabet="{}#a", max_size=3).map(_Str),
                  st.integers(-3, 3), st.none(), st.floats(-1, 1), st.just(frozenset()))
_RAW = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple), st.lists(inner, max_size=3).map(_List),
    st.dictionaries(_KEYS, inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=3).map(_Dict)), max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(_RAW)
def test_plain_raw_property_is_plain_data_unless_the_value_needs_ansible(value):
    """One walk gives what the two walks gave: _Template exactly where the value may hold a template
    or is not plain data, else _plain()'s copy - the same values of the same builtin types (marshal
    writes only builtin types and tells True, 1 and 1.0 apart; NaN compares by its bytes)."""
    if _may_template(value):
        with pytest.raises(_Template):
            _plain_raw(value)
    else:
        assert marshal.dumps(_plain_raw(value)) == marshal.dumps(_plain(value))


@pytest.mark.parametrize("hostvars, gather, cache, expected", [
    ({"dlrack_hw": GOOD}, False, False, False),                 # declared: validated without connecting
    ({}, False, False, True),                                   # nothing declared: gather
    ({"dlrack_hw": None}, False, False, True),                  # declared empty = nothing declared
    ({"dlrack_hw": GOOD}, True, False, True),                   # run-wide dlrack_gather
    ({"dlrack_hw": GOOD, "dlrack_gather": "yes"}, False, False, True),
    ({"dlrack_hw_gathered": GATHERED}, False, True, False),     # fact cache may be used and holds it
    ({"dlrack_hw_gathered": GATHERED}, False, False, True),     # cache not allowed: gather again
    ({"dlrack_hw_gathered": GATHERED, "dlrack_use_fact_cache": True}, False, False, False),
])
def test_which_hosts_are_gathered(hostvars, gather, cache, expected):
    assert read_host("h", hostvars, gather, cache)[1] is expected
    assert hosts_to_gather([("h", hostvars)], gather, cache) == (["h"] if expected else [])


def test_drift_status():
    assert drift_record([], [], False)["status"] == "clean"
    assert drift_record([{"task": "t"}], [], False)["status"] == "drifted"
    assert drift_record([{"task": "t"}], [{"task": "x", "msg": "boom"}], False)["status"] == "error"
    assert drift_record([], [], True)["status"] == "error"


def test_drift_errors_in_every_report(tmp_path):
    records = {"ok": {"changes": []},
               "drifted": {"changes": [{"role": "gpu_affinity", "task": "Write the plan", "action": "copy", "diff": None}]},
               "broken": {"changes": [], "failures": [{"role": "storage_tiers", "task": "Plan the tiers", "action": "x",
                                                       "msg": "refused /dev/sdz <in use>"}]},
               "dead": {"changes": [], "unreachable": True,
                        "failures": [{"role": None, "task": "Gather hardware facts", "action": "dlrack.node.hw_facts",
                                      "msg": "ssh: connect to host 127.0.0.2 port 1: Connection refused"}]}}
    path = tmp_path / "records.json"
    path.write_text(json.dumps(records))
    hosts = ["ok", "drifted", "broken", "dead", "never-seen"]
    drift = load_drift(str(path), hosts)
    assert {h: d["status"] for h, d in drift.items()} == {
        "ok": "clean", "drifted": "drifted", "broken": "error", "dead": "error", "never-seen": "clean"}
    out = run_preflight({h: {"hw": GOOD} for h in hosts}, report_dir=str(tmp_path), drift=drift, prefix="drift")
    assert out["drift_hosts"] == ["drifted"] and out["error_hosts"] == ["broken", "dead"]
    assert "ERROR broken: [storage_tiers] Plan the tiers: refused /dev/sdz <in use>" in out["lines"]
    doc = json.load(open(os.path.join(str(tmp_path), "drift.json")))
    assert doc["drift"]["dead"]["status"] == "error" and doc["drift"]["dead"]["unreachable"] is True
    errors = ET.parse(os.path.join(str(tmp_path), "drift.xml")).getroot().findall(".//error")
    assert sorted((e.get("type"), e.get("message")) for e in errors) == [
        ("check_failed", "Plan the tiers: refused /dev/sdz <in use>"),
        ("unreachable", "Gather hardware facts: ssh: connect to host 127.0.0.2 port 1: Connection refused")]
    html = open(os.path.join(str(tmp_path), "drift.html")).read()
    assert "refused /dev/sdz &lt;in use&gt;" in html and "unreachable: ssh: connect" in html


def test_verdict_host_is_the_first_failing_host_still_in_the_play():
    from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import verdict_host
    assert verdict_host(["a", "b", "c"], ["b", "c", "x"]) == ["b"]        # "a" became unreachable while gathering
    assert verdict_host(["a", "b"], ["x"]) == []                           # every failing host is gone
    assert verdict_host([], ["a"]) == []                                   # nothing failed
    assert verdict_host(["a", "b"], None) == ["a"]                         # play hosts unknown: the first


def test_verdict_message_names_every_failing_host_once():
    from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import verdict_message
    assert verdict_message([], "error", "r/report.html") == ""
    msg = verdict_message(["b-1", "a-2"], "warning", "r/report.html")
    assert msg == "pre-flight failed for 2 host(s) (dlrack_fail_on=warning): b-1, a-2; see r/report.html"
    assert verdict_message(["h"], "error", None).endswith("; see the reports")
