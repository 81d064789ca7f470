# -*- coding: utf-8 -*-
"""The act's settings (plugin_utils/act_settings.py) and its audit trail (plugin_utils/act_audit.py).
tests/integration/test_act_trust.py runs both through ansible-playbook with a compromised node."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils import act_audit, act_settings

GOOD = {"admin_host": "localhost", "backend": "slurm", "deferred": False, "become": "no", "check": None, "reports": ["r.json"],
        "hosts": [], "node_names": {"gpu-01.rack7": "n001"}, "short_names": True, "max_nodes": 5, "max_percent": 10.0,
        "run_id": "", "rule_modes": {"gpu.xid": "enforce"}, "rule_modes_groups": {"rack_b": {"gpu.xid": "off"}},
        "scontrol": "scontrol", "scontrol_timeout": 30, "audit_log": "", "k8s": {"host": "https://api:6443", "api_key": "t"}}


def test_good_settings_and_the_runs_own_check_mode():
    out = act_settings.check(dict(GOOD), check_mode=True)
    assert out["become"] is False and out["check"] is True and out["max_percent"] == 10
    assert out["k8s"] == {"kubeconfig": "", "context": "", "host": "https://api:6443", "api_key": "t", "validate_certs": True,
                          "timeout": 60}
    assert act_settings.check(dict(GOOD, check="false"), check_mode=True)["check"] is False
    assert act_settings.check(dict(GOOD, deferred=True), check_mode=False)["backend"] == "none"


@pytest.mark.parametrize("change, words", [
    ({"backend": "pbs"}, "dlrack_scheduler is 'pbs': use none, slurm or kubernetes"),
    ({"max_nodes": 0}, "scheduler_max_drain_nodes is 0: a whole number from 1"),
    ({"max_percent": 0}, "scheduler_max_drain_percent is 0: a number above 0, at most 100"),
    ({"max_percent": 250}, "scheduler_max_drain_percent is 250"),
    ({"become": "sometimes"}, "dlrack_scheduler_become is 'sometimes', not true or false"),
    ({"rule_modes": {"gpu.xid": "on"}}, "scheduler_rule_modes.gpu.xid is 'on'"),
    ({"node_names": {"a": 1}}, "scheduler_node_names must be a mapping of inventory host to scheduler node name"),
    ({"admin_host": " "}, "dlrack_scheduler_host is ' '"),
])
def test_a_bad_setting_is_one_sentence_naming_the_variable(change, words):
    with pytest.raises(act_settings.ActSettingsError) as exc:
        act_settings.check(dict(GOOD, **change), check_mode=False)
    assert words in str(exc.value)


class _Cache(object):
    def __init__(self, facts):
        self.facts = facts

    def keys(self):
        return list(self.facts)

    def get(self, host):
        return self.facts[host]


class _HostVars(object):
    def __init__(self, facts):
        self._variable_manager = type("M", (), {"_fact_cache": _Cache(facts)})()


def test_hosts_whose_facts_set_a_setting_are_named():
    hv = _HostVars({"evil": {"scheduler_max_drain_nodes": 1000, "__dlrack_scheduler_deferred": True, "ansible_os_family": "x",
                             "dlrack_hw_gathered": {}}, "good": {"ansible_os_family": "x", "dlrack_hw_gathered": {}}})
    out = act_settings.untrusted_hosts(hv, ["evil", "good"])
    assert list(out) == ["evil"]
    assert out["evil"].startswith("host evil: its facts set __dlrack_scheduler_deferred, scheduler_max_drain_nodes - ")


def test_the_runs_start_from_proc(tmp_path):
    started = act_settings.run_started(pid=os.getpid())
    assert started is not None and started <= time.time() + 1
    assert act_settings.run_started(pid=os.getpid(), proc=str(tmp_path)) is None


def test_the_audit_trail_records_every_decision_and_counts_them(tmp_path):
    plan = {"run_id": "20261204T180000Z-0a1b2c3d4e5f", "backend": "slurm", "hosts": {"n1": "n1.rack", "n2": "n2.rack", "n3": "n3.rack"},
            "resume": ["n2", "n3"],
            "audit": [{"action": "drain", "node": "n1", "host": "n1.rack", "rules": ["gpu.pcie_link"], "reason": "dlrack: ..."},
                      {"action": "would_drain", "why": "shadow", "node": "n2", "host": "n2.rack", "rules": ["gpu.xid"]}]}
    results = [{"state": "drain", "drained": ["n1"]},
               {"state": "resume", "resumed": [], "unchanged": ["n2", "n3"],
                "left_alone": [{"node": "n3", "state": "IDLE+DRAIN", "reason": "dlrack: rma pending"}]}]
    recs = act_audit.records(plan, results, check=False, now="2026-12-04T18:00:00+00:00")
    assert [(r["action"], r["node"], r["outcome"]) for r in recs] == [
        ("drain", "n1", "done"), ("would_drain", "n2", "not_acted"), ("resume", "n3", "refused")]
    assert "ownership" in recs[2]["why"] and recs[0]["run_id"] == plan["run_id"] and recs[0]["side"] == "ansible"
    log = tmp_path / "audit" / "act.jsonl"
    act_audit.write(str(log), recs)
    act_audit.write(str(log), recs[:1])
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) == 4 and lines[3]["node"] == "n1"
    prom = (tmp_path / "audit" / "act.jsonl.prom").read_text()
    assert 'dlrack_act_decisions_total{action="drain",outcome="done"} 2' in prom
    assert 'dlrack_act_decisions_total{action="resume",outcome="refused"} 1' in prom
    os.symlink("/dev/null", str(tmp_path / "link.jsonl"))
    with pytest.raises(act_audit.AuditError, match="cannot write the act's audit log"):
        act_audit.write(str(tmp_path / "link.jsonl"), recs)
