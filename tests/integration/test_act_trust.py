"""Issue 28.1: nothing a node sends reaches a setting of the scheduler act - real ansible-playbook
runs of playbooks/scheduler.yml (the play site.yml, drift.yml and acceptance import).

The compromised node is a stand-in ``ansible_python_interpreter`` (test_hostile_nodes.Node): it
answers any module - here ansible.builtin.setup, as any module could - with crafted
``ansible_facts`` and ``ansible_stats`` that try every setting of the act: the cap, the node-name
mapping (the failing host mapped to a healthy node), check mode, the switch, the deferral, scontrol,
where the act runs and the Kubernetes endpoint. It is the play's first host, whose variables a
run_once task is templated with. The act must drain the failing host slurm01 with our reason,
touch nothing else, name the node, and do the same on the next run when the facts come from the
jsonfile fact cache only. slurmctld is tests/slurmfake.py (real Slurm 22.05 output)."""
import json
import os

import pytest

from schedulerlib import ROOT, fake_slurm, node_state
from hostile import Node, inventory, node_vars, playbook

STEER = {
    "scheduler_max_drain_nodes": 1000, "scheduler_max_drain_percent": 100, "dlrack_scheduler_check": True,
    "scheduler_check": True, "scheduler_node_names": {"slurm01": "slurm02"}, "dlrack_scheduler": "none",
    "scheduler_backend": "none", "__dlrack_scheduler_deferred": True, "scheduler_scontrol": "/bin/false",
    "dlrack_scheduler_host": "a-evil", "scheduler_admin_host": "a-evil", "scheduler_k8s_host": "http://127.0.0.1:9",
    "scheduler_rule_modes": {"memory.*": "off"}, "dlrack_rule_modes": {"memory.*": "off"},
    "__dlrack_scheduler_reports": ["/dev/zero"], "scheduler_reports": ["/dev/zero"], "scheduler_audit_log": "/tmp/dlrack-pwned-audit.jsonl",
}


@pytest.fixture()
def slurm(tmp_path):
    return fake_slurm(tmp_path, more=("slurm02",))     # slurm02: a healthy node outside the run


def _report(tmp_path):
    """This run's report (written now, before the act's run starts it would be refused: the run
    starts after it, so it is dated a little ahead as the pre-flight play of the run would be)."""
    import datetime
    later = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=120)).replace(microsecond=0)
    doc = {"summary": {"run_id": "20261204T180000Z-0a1b2c3d4e5f", "generated_at": later.isoformat()},
           "hosts": {"a-evil": {"status": "pass", "findings": []},
                     "slurm01": {"status": "fail", "findings": [
                         {"rule": "memory.exceeds_vram", "severity": "error", "observed": 1, "required": 2,
                          "message": "m", "remedy": "r"}]},
                     "ghost02": {"status": "pass", "findings": []}}}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc))
    return str(path)


_state = node_state


@pytest.mark.parametrize("cache", ["jsonfile", "memory"])
def test_a_compromised_first_host_changes_nothing_in_the_act(tmp_path, slurm, cache):
    state, scontrol = slurm
    evil = Node(tmp_path, "evil")
    evil.answer({"schema": 1}, **STEER)
    answer = json.loads(evil.answer_path.read_text())
    answer["ansible_stats"] = {"data": {"dlrack_verdict": "pass"}, "per_host": False, "aggregate": True}
    evil.answer_path.write_text(json.dumps(answer))
    inv = inventory(tmp_path, {"a-evil": node_vars(evil), "slurm01": {"ansible_connection": "local"},
                               "ghost02": {"ansible_connection": "local"}})
    play = tmp_path / "act.yml"
    play.write_text(
        "- name: Any module on the node (its answer sets facts)\n  hosts: a-evil\n  gather_facts: false\n"
        "  tasks:\n    - name: Gather\n      ansible.builtin.setup:\n"
        "      when: not (cache_only | default(false) | bool)\n"
        "- name: The act\n  ansible.builtin.import_playbook: %s\n" % os.path.join(ROOT, "playbooks", "scheduler.yml"))
    before = dict((n, _state(state, n)) for n in ("ghost02", "slurm02"))
    report = _report(tmp_path)
    extra = ["dlrack_scheduler=slurm", "scheduler_scontrol=" + scontrol,
             json.dumps({"__dlrack_scheduler_reports": [report], "scheduler_audit_log": str(tmp_path / "act.jsonl")})]
    run = playbook(tmp_path, str(play), inv / "hosts.yml", *extra, cache=cache)
    out = run.stdout
    assert _state(state, "slurm01") == ("IDLE+DRAIN+NOT_RESPONDING", "dlrack: memory.exceeds_vram 20261204T180000Z-0a1b2c3d4e5f"), out[-4000:]
    assert dict((n, _state(state, n)) for n in ("ghost02", "slurm02")) == before
    assert "host a-evil: its facts set __dlrack_scheduler_deferred, __dlrack_scheduler_reports, dlrack_rule_modes" in out, out[-4000:]
    assert run.returncode != 0 and "scheduler: host a-evil" in out     # named, after the act
    assert not os.path.exists("/tmp/dlrack-pwned-audit.jsonl")            # the audit log is the operator's
    lines = [json.loads(line) for line in (tmp_path / "act.jsonl").read_text().splitlines()]
    assert {(r["action"], r.get("node") or r.get("host"), r["outcome"]) for r in lines} == {
        ("refused", "a-evil", "not_acted"), ("drain", "slurm01", "done"), ("resume", "ghost02", "skipped")}
    if cache == "jsonfile":
        # the next run reads the facts from the cache only (the node is not contacted): same act
        _report(tmp_path)
        run = playbook(tmp_path, str(play), inv / "hosts.yml", *extra, "cache_only=true", cache=cache)
        assert "host a-evil: its facts set" in run.stdout, run.stdout[-4000:]
        assert "already drained by dlrack for the same rules" in run.stdout or _state(state, "slurm01")[0].endswith("NOT_RESPONDING")
        assert dict((n, _state(state, n)) for n in ("ghost02", "slurm02")) == before


@pytest.mark.parametrize("module, args", [
    ("dlrack.node.packages_missing", "name: [bash]"),
    ("dlrack.node.node_code", "files: [hw/cpulist.py]\n        lib_dir: /tmp/dlrack-never-written"),
    ("dlrack.node.acceptance_measure", "{}"),
])
def test_the_collections_node_modules_keep_no_facts_stats_hosts_or_groups(tmp_path, module, args):
    """Every action that runs a module of ours on a node filters its result as hw_facts' does: the
    answer's ansible_facts, ansible_stats, add_host and add_group never reach the run."""
    evil = Node(tmp_path, "evil")
    evil.answer_path.write_text(json.dumps({
        "changed": False, "ansible_facts": {"scheduler_max_drain_nodes": 1000, "dlrack_fail_on": "never"},
        "ansible_stats": {"data": {"dlrack_verdict": "pass"}, "per_host": False, "aggregate": True},
        "add_group": "exempt_rack", "_ansible_verbose_override": True}))
    inv = inventory(tmp_path, {"evil": node_vars(evil)})
    play = tmp_path / "play.yml"
    play.write_text(
        "- name: One module of ours on the node\n  hosts: evil\n  gather_facts: false\n  tasks:\n"
        "    - name: The module\n      %s:\n        %s\n      register: answer\n"
        "    - name: What the run sees\n      ansible.builtin.debug:\n"
        "        msg: \"STEERED={{ scheduler_max_drain_nodes | default('no') }}/{{ dlrack_fail_on | default('no') }}"
        "/{{ groups['exempt_rack'] | default('no') }}/{{ answer.ansible_facts | default('no') }}\"\n" % (module, args))
    run = playbook(tmp_path, str(play), inv / "hosts.yml")
    assert "STEERED=no/no/no/no" in run.stdout, run.stdout[-3000:]
    assert "left out what the node returned that Ansible would turn into variables" in run.stdout
    assert "_ansible_verbose_override" in run.stdout and "add_group" in run.stdout
    assert "CUSTOM STATS" not in run.stdout and "dlrack_verdict" not in run.stdout.split("left out")[0]
