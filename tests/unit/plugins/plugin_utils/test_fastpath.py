"""The fleet fast path (plugin_utils/fastpath.py) against the plain reference path beside it
(DLRACK_FAST_PATH=false): the same verdicts, findings, host_status, failed_hosts, summary lines,
verdict message and report bytes (run id and time normalised), on ordinary and hostile fleets.

Read from a real ansible-core inventory (InventoryManager, VariableManager with cached facts,
HostVars: what the action gets), through the action's own steps (read_variables, read_host,
host_notes, host_fail_on, run_preflight, verdict_message); and at the rule-engine level on fleets
hypothesis draws. The end-to-end run of playbooks/preflight.yml both ways is
tests/integration/test_fastpath_playbook.py."""
import copy
import gc
import json
import os
import re
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.dlrack.node.plugins.action.preflight_report import read_variables
from ansible_collections.dlrack.node.plugins.plugin_utils import fastpath, rules
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import Unresolved
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import (
    host_fail_on, host_notes, read_host, run_preflight, untrusted_facts, verdict_message)
from ansible_collections.dlrack.node.plugins.plugin_utils.run_settings import fact_names

from hwdocs import GATHERED, GOOD
from testpaths import ROOT

RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{12}")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00")
EXAMPLE = os.path.join(ROOT, "inventories", "example")


def _load_example(name, path="host_vars"):
    with open(os.path.join(EXAMPLE, path, name + ".yml")) as fh:
        return yaml.safe_load(fh)["dlrack_hw"]


RACK_A = _load_example("rack_a", "group_vars")     # passes (what benchmarks/fleet.py builds on)
GPU_B01 = _load_example("gpu-b01")                  # fails: too little RAM for 8x H100


def normalized(data):
    text = data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data
    return TIME.sub("TIME", RUN_ID.sub("RUN-ID", text))


def _mode(monkeypatch, fast):
    if fast:
        monkeypatch.delenv(fastpath.ENV, raising=False)
    else:
        monkeypatch.setenv(fastpath.ENV, "false")
    assert fastpath.enabled() is fast


# ------------------------------------------------------------------------- the action's steps

def hostvars_of(inv_path, facts=None):
    """Ansible's own HostVars over the inventory at ``inv_path``, with ``facts`` ({host: facts}) in
    the fact cache as a node's modules would have left them (unsafe: never templated)."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.utils.unsafe_proxy import wrap_var
    from ansible.vars.hostvars import HostVars
    from ansible.vars.manager import VariableManager

    from ansible import constants

    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(inv_path)])
    with mock.patch.object(constants, "CACHE_PLUGIN", "memory"):   # not the checkout's fact cache
        vm = VariableManager(loader=loader, inventory=inventory)
    for host, values in (facts or {}).items():
        vm.set_host_facts(host, wrap_var(copy.deepcopy(values)))
    return HostVars(inventory=inventory, variable_manager=vm, loader=loader), sorted(h.name for h in inventory.get_hosts())


def pipeline(hostvars, hosts, report_dir, fail_on="error"):
    """What preflight_report's run() does with the hosts' variables once the run's settings are
    settled (the settings themselves: test_fastpath_playbook.py)."""
    variables = read_variables(hostvars, hosts)
    untrusted = untrusted_facts(fact_names(hostvars, hosts))
    own, bad = host_fail_on(variables, untrusted, hosts, fail_on)
    inputs, notes = {}, {}
    for host in hosts:
        inputs[host], dummy = read_host(host, variables[host], False, False, plain=True)
        found = host_notes(host, variables[host], untrusted.get(host, ()))
        if host in bad:
            found.append(bad[host])
        if found:
            notes[host] = found
    out = run_preflight(inputs, report_dir=str(report_dir), fail_on=fail_on, host_fail_on=own, notes=notes)
    where = (out.get("report_paths") or {}).get("html")
    out["verdict_msg"] = verdict_message(out["failed_hosts"], fail_on, where, own)
    return variables, out


def compared(out, report_dir):
    """Everything a run gives, as text: results, lines, verdict and every report file's bytes."""
    files = dict((name, normalized(open(os.path.join(str(report_dir), name), "rb").read()))
                 for name in sorted(os.listdir(str(report_dir))) if not name.startswith("."))
    assert {"report.json", "report.xml", "report.html"} <= set(files), files.keys()
    keep = dict((k, out[k]) for k in ("summary", "host_status", "failed_hosts", "lines", "verdict_msg", "drift_hosts",
                                      "error_hosts"))
    return normalized(json.dumps(keep, sort_keys=True, default=repr)), files


def both_ways(monkeypatch, tmp_path, build):
    """Run the action's steps on the fleet ``build()`` makes ((hostvars, hosts)) with the fast path
    and with the reference path; assert they agree on everything. Returns the fast run's output."""
    got = {}
    for fast in (True, False):
        _mode(monkeypatch, fast)
        hostvars, hosts = build()
        report_dir = tmp_path / ("fast" if fast else "reference")
        variables, out = pipeline(hostvars, hosts, report_dir)
        text, files = compared(out, report_dir)
        got[fast] = (json.dumps(variables, sort_keys=True, default=repr), text.replace("reference", "fast"),
                     dict((k, v.replace(str(report_dir), "DIR")) for k, v in files.items()), out)
    assert got[True][0] == got[False][0], "the variables read differ"
    assert got[True][1] == got[False][1], "verdicts, findings, lines or the verdict message differ"
    for name in got[True][2]:
        assert got[True][2][name] == got[False][2][name], "%s differs between the fast and the reference path" % name
    assert set(got[True][2]) == set(got[False][2])
    return got[True][3]


def write_inventory(path, data, group_vars=None, host_vars=None):
    path.mkdir(parents=True, exist_ok=True)
    (path / "hosts.yml").write_text(yaml.safe_dump(data, allow_unicode=True))
    for kind, items in (("group_vars", group_vars), ("host_vars", host_vars)):
        for name, values in (items or {}).items():
            (path / kind).mkdir(exist_ok=True)
            (path / kind / (name + ".yml")).write_text(yaml.safe_dump(values, allow_unicode=True))
    return path / "hosts.yml"


def test_example_inventory(monkeypatch, tmp_path):
    out = both_ways(monkeypatch, tmp_path, lambda: hostvars_of(EXAMPLE))
    assert out["failed_hosts"] and "gpu-a01" not in out["failed_hosts"]


@pytest.mark.parametrize("distinct", [False, True], ids=["shared-declarations", "every-declaration-distinct"])
def test_heavy_declared_fleet(monkeypatch, tmp_path, distinct):
    """benchmarks/fleet.py's fleet (rack_a's HGX H200 node and gpu-b01, 60 % failing), 150 hosts:
    one declaration for a rack (group_vars) or every host its own (host.hostname)."""
    hosts, host_vars = {}, {}
    for i in range(150):
        name = "node-%05d" % i
        hosts[name] = None
        doc = GPU_B01 if (i * 90) // 150 != ((i + 1) * 90) // 150 else RACK_A
        if distinct:
            doc = dict(doc, host=dict(doc.get("host") or {}, hostname="%s.example" % name))
        host_vars[name] = {"dlrack_hw": doc}
    inv = write_inventory(tmp_path / "inv", {"all": {"hosts": hosts}}, host_vars=host_vars)
    out = both_ways(monkeypatch, tmp_path, lambda: hostvars_of(inv))
    assert len(out["failed_hosts"]) == 90


def test_many_hosts_share_a_declaration_through_group_vars(monkeypatch, tmp_path):
    """Racks declared once in group_vars, thresholds and profiles per group, some hosts' own."""
    data = {"all": {"children": {
        "rack_a": {"hosts": dict(("a%02d" % i, None) for i in range(40))},
        "rack_b": {"hosts": dict(("b%02d" % i, {"dlrack_profile": "inference"} if i % 3 else None) for i in range(40))}}}}
    group_vars = {"all": {"dlrack_thresholds": {"min_gpus": 1}, "dlrack_external_archive": "nfs://archive/x"},
                  "rack_a": {"dlrack_hw": RACK_A}, "rack_b": {"dlrack_hw": GPU_B01, "dlrack_severity": {"memory.exceeds_vram": "warning"}}}
    inv = write_inventory(tmp_path / "inv", data, group_vars=group_vars,
                          host_vars={"a07": {"dlrack_hw": GOOD}, "b11": {"dlrack_fail_on": "never"}})
    out = both_ways(monkeypatch, tmp_path, lambda: hostvars_of(inv))
    assert out["summary"]["hosts"] == 80


def test_gathered_hosts(monkeypatch, tmp_path):
    """Hosts with dlrack_hw_gathered in the fact cache (hw_facts' document), some declared too."""
    broken = copy.deepcopy(GATHERED)
    broken["gpus"][0]["pcie"]["width"] = 4
    hosts = dict(("g%02d" % i, {"dlrack_hw": GOOD} if i % 4 == 0 else None) for i in range(12))
    inv = write_inventory(tmp_path / "inv", {"all": {"hosts": hosts}})
    facts = dict(("g%02d" % i, {"dlrack_hw_gathered": broken if i % 3 == 0 else GATHERED, "ansible_local": {"k": i}})
                 for i in range(12))
    out = both_ways(monkeypatch, tmp_path, lambda: hostvars_of(inv, facts))
    assert out["failed_hosts"]


HOSTILE_NAMES = ("gpu\x1bc\x07\x9b2J\nPASS  forged", 'x" onmouseover="alert(1)', "tab\there & <amp>", u"узел-ü-\u2603",
                 "priv\ue000dlrack-host\ue001", "quote'd", "mark\x00dlrack:this-host\x00", "1")


def hostile_fleet(tmp_path):
    """What tests/integration/test_hostile_nodes.py builds, read the way the action reads it:
    hostile host names, Jinja in node-sent facts, facts that set settings and inputs, undefined
    variables inside declarations, huge values, unicode, control characters, NaN and infinity."""
    jinja = copy.deepcopy(GATHERED)
    jinja["cpu"]["model"] = "{{ lookup('pipe', 'touch %s') }}" % (tmp_path / "PWNED")
    jinja["disks"][1]["serial"] = "S{{ 6 * 7 }}X"
    escape = copy.deepcopy(GATHERED)
    escape["gpus"][0]["model"] = "\x1b]52;c;cm0gLXJmIH4=\x07NVIDIA H100\rPASS  x"
    nan = copy.deepcopy(GOOD)
    nan["memory"]["total_mb"] = float("nan")
    huge = copy.deepcopy(GOOD)
    huge["cpu"]["model"] = "Z" * 200000
    huge["disks"][0]["count"] = 10 ** 400
    hosts = {}
    for i, name in enumerate(HOSTILE_NAMES):
        hosts[name] = {"dlrack_hw": [GOOD, GPU_B01, nan][i % 3]}
    hosts.update({
        "jinja-fact": None,                                            # gathered: Jinja in the node's strings
        "escape-fact": {"dlrack_hw": {"schema": 1, "source": "declared", "gpus": {"model": "NVIDIA RTX 6000 Ada Generation", "count": 4}},
                        "dlrack_external_archive": "nfs://x\x1b[2J"},
        "sets-settings": {"dlrack_hw": GPU_B01},                       # its facts try to open the gate, move the reports
        "undefined-decl": {"dlrack_hw": dict(GOOD, cpu={"model": "{{ rack_cpu_model }}", "sockets": 2})},
        "undefined-th": {"dlrack_hw": GOOD, "dlrack_thresholds": "{{ rack_thresholds }}"},
        "templated-ok": {"dlrack_hw": GOOD, "dlrack_thresholds": {"min_gpus": "{{ 4 + 4 }}"}},
        "huge": {"dlrack_hw": huge},
        "inf-workload": {"dlrack_hw": GOOD, "dlrack_workload": {"kind": "full_finetune", "model_params_b": float("inf")}},
        "bad-fail-on": {"dlrack_hw": GOOD, "dlrack_fail_on": "sometimes"},
        "own-fail-on": {"dlrack_hw": GPU_B01, "preflight_fail_on": "never"},
        "workload-differs": {"dlrack_hw": GOOD, "dlrack_workload": {"kind": "inference", "model_params_b": 70}},
        "says-gathered": {"dlrack_hw": dict(GOOD, source="gathered")},
        "not-a-mapping": {"dlrack_hw": "just text {{ 1 }}"},
    })
    facts = {
        "jinja-fact": {"dlrack_hw_gathered": jinja},
        "escape-fact": {"dlrack_hw_gathered": escape},
        "sets-settings": {"dlrack_hw_gathered": GATHERED, "preflight_fail_on": "never", "dlrack_fail_on": "never",
                          "dlrack_report_dir": str(tmp_path / "moved"), "dlrack_hw": GOOD, "dlrack_profile": "workstation",
                          "__dlrack_verdict_deferred": True},
        HOSTILE_NAMES[0]: {"dlrack_hw_gathered": escape, "dlrack_thresholds": {"min_gpus": 0}},
    }
    inv = write_inventory(tmp_path / "inv", {"all": {"hosts": hosts}})
    return inv, facts


def test_hostile_fleet(monkeypatch, tmp_path):
    inv, facts = hostile_fleet(tmp_path)
    out = both_ways(monkeypatch, tmp_path, lambda: hostvars_of(inv, facts))
    assert not (tmp_path / "PWNED").exists()
    status = out["host_status"]
    assert status["sets-settings"] == status["undefined-th"] == status["huge"] == status["bad-fail-on"] == "fail"
    assert "own-fail-on" not in out["failed_hosts"] and "sets-settings" in out["failed_hosts"]
    assert len(status) == len(HOSTILE_NAMES) + 13


class PublicOnly(object):
    """HostVars through its public mapping interface and nothing else (no raw_get)."""

    def __init__(self, real):
        self.real = real

    def __contains__(self, host):
        return host in self.real

    def get(self, host):
        return self.real.get(host)


def test_the_reference_path_reads_through_the_public_mapping_only(monkeypatch, tmp_path):
    """Switched off, the action reads from Ansible's HostVars exactly what it reads through the
    public mapping interface alone, and ansible-core's clean_facts is left in place (it is called
    for every host, empty fact sets too); the fast path reads the same values."""
    from ansible.vars import manager

    inv, facts = hostile_fleet(tmp_path)
    hostvars, hosts = hostvars_of(inv, facts)
    fast = json.dumps(read_variables(hostvars, hosts), sort_keys=True, default=repr)
    _mode(monkeypatch, False)
    calls = []
    original = manager.clean_facts
    monkeypatch.setattr(manager, "clean_facts", lambda facts: calls.append(1) or original(facts))
    hostvars, hosts = hostvars_of(inv, facts)
    reference = read_variables(hostvars, hosts)
    assert len(calls) == len(hosts)
    assert json.dumps(reference, sort_keys=True, default=repr) == fast
    assert json.dumps(read_variables(PublicOnly(hostvars), hosts), sort_keys=True, default=repr) == fast
    # 2.19 raises on the undefined variable (that host's finding); 2.16's HostVarsVars leaves the text
    undefined = reference["undefined-th"]["dlrack_thresholds"]
    assert isinstance(undefined, Unresolved) or undefined == "{{ rack_thresholds }}", undefined


def test_without_the_internals_the_fast_path_falls_back_piece_by_piece(monkeypatch, tmp_path):
    """Another ansible-core: no ansible.vars.manager.clean_facts (the shortcut changes nothing), a
    hostvars without raw_get (read through the mapping), no gc.freeze (nothing frozen)."""
    from ansible.vars import manager

    inv, facts = hostile_fleet(tmp_path)
    hostvars, hosts = hostvars_of(inv, facts)
    expected = json.dumps(read_variables(hostvars, hosts), sort_keys=True, default=repr)
    monkeypatch.delattr(manager, "clean_facts")
    with fastpath._empty_facts_shortcut():
        assert not hasattr(manager, "clean_facts")
    monkeypatch.undo()
    hostvars, hosts = hostvars_of(inv, facts)
    assert json.dumps(read_variables(PublicOnly(hostvars), hosts), sort_keys=True, default=repr) == expected
    monkeypatch.delattr(gc, "freeze")
    assert fastpath.worker_start() is False
    assert fastpath.controller_freeze(environ={}, cli_args={"x": 1}) is False


@pytest.mark.parametrize("value, on", [(None, True), ("true", True), ("1", True), ("yes", True), ("", True),
                                       ("false", False), ("0", False), ("no", False), ("off", False), (" OFF ", False)])
def test_the_switch(value, on):
    environ = {} if value is None else {fastpath.ENV: value}
    assert fastpath.enabled(environ) is on


def test_the_switch_turns_off_every_piece(monkeypatch):
    """DLRACK_FAST_PATH=false: no freeze in the controller or the worker, no shared evaluation or
    report fragment; DLRACK_GC_FREEZE=false alone still turns off the controller's freeze only."""
    try:
        assert fastpath.controller_freeze(environ={"DLRACK_GC_FREEZE": "false"}, cli_args={"x": 1}) is False
        assert fastpath.controller_freeze(environ={fastpath.ENV: "off"}, cli_args={"x": 1}) is False
        assert fastpath.controller_freeze(environ={}, cli_args={}) is False            # not under a command line
        assert fastpath.controller_freeze(environ={}, cli_args={"x": 1}) is True
        _mode(monkeypatch, False)
        assert fastpath.worker_start() is False and fastpath.controller_loaded() is False
        assert not fastpath.shares_evaluations() and not fastpath.shares_reports()
        results, dummy = rules.evaluate_fleet({"a": {"hw": GOOD}, "b": {"hw": GOOD}})
        assert results["a"]["findings"][0] is not results["b"]["findings"][0]
        _mode(monkeypatch, True)
        assert fastpath.worker_start() is True
        results, dummy = rules.evaluate_fleet({"a": {"hw": GOOD}, "b": {"hw": GOOD}})
        assert results["a"]["findings"][0] is results["b"]["findings"][0]
    finally:
        gc.unfreeze()     # what the test froze in this process


# ------------------------------------------------------------------------ the rule engine level

_DOCS = [GOOD, GPU_B01, RACK_A, GATHERED,
         dict(GOOD, memory={"total_mb": float("nan"), "ecc": "multi-bit"}),
         dict(GOOD, cpu={"model": "AMD EPYC 7763 64-Core Processor", "sockets": -2}),
         {"schema": 1, "source": "declared", "gpus": {"model": "NVIDIA RTX 6000 Ada Generation", "count": 4}},
         "not a document"]
_NAMES = st.one_of(st.sampled_from(HOSTILE_NAMES + ("a", "b", "c", "d")),
                   st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12))
_HOST = st.fixed_dictionaries({"hw": st.sampled_from(_DOCS)}, optional={
    "thresholds": st.sampled_from([{"min_gpus": 1}, {"min_cpu_cores_per_gpu": 64}, Unresolved("'x' is undefined")]),
    "severity": st.sampled_from([{"cpu.cores_per_gpu": "warning"}, {"memory.exceeds_vram": "warning"}]),
    "profile": st.sampled_from(["training", "inference", "workstation"]),
    "workload": st.sampled_from([{"kind": "inference", "model_params_b": float("inf")}, {"kind": "full_finetune", "model_params_b": 70}]),
    "external_archive": st.sampled_from(["nfs://a/b", "s3://x\x1b[2J"])})


def run_both(monkeypatch, tmp_path, fleet, fail_on="error", junit_warnings="skipped"):
    got = {}
    for fast in (True, False):
        _mode(monkeypatch, fast)
        report_dir = tmp_path / ("fast" if fast else "ref")
        out = run_preflight(copy.deepcopy(fleet), report_dir=str(report_dir), fail_on=fail_on, junit_warnings=junit_warnings)
        out["verdict_msg"] = verdict_message(out["failed_hosts"], fail_on, "DIR")
        text, files = compared(out, report_dir)
        got[fast] = (text.replace(str(report_dir), "DIR"), dict((k, v.replace(str(report_dir), "DIR")) for k, v in files.items()))
    return got


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(fleet=st.dictionaries(_NAMES, _HOST, min_size=1, max_size=12),
       copies=st.integers(min_value=1, max_value=4),
       fail_on=st.sampled_from(["error", "warning", "never"]), warnings=st.sampled_from(["skipped", "failed", "passed"]))
def test_rule_engine_and_reports_agree_on_drawn_fleets(monkeypatch, tmp_path_factory, fleet, copies, fail_on, warnings):
    """Drawn fleets, every host's inputs repeated ``copies`` times under other names (so hosts
    share evaluations on the fast path): every result and every report byte the same both ways."""
    hosts = {}
    for name, inputs in fleet.items():
        for i in range(copies):
            hosts[name if i == 0 else "%s~%d" % (name, i)] = inputs
    got = run_both(monkeypatch, tmp_path_factory.mktemp("drawn"), hosts, fail_on, warnings)
    assert got[True][0] == got[False][0]
    assert got[True][1] == got[False][1]
