# -*- coding: utf-8 -*-
"""Slurm node state (plugins/module_utils/scheduler/slurm.py) against real `scontrol show node -o`
output of Slurm 22.05.8 (tests/data/slurm, captured from a real slurmctld; README there). The
decisions are driven through a stand-in runner that answers in the captured format and applies
updates the way slurmctld did in that capture; molecule/scheduler runs the real slurmctld."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.scheduler import slurm
from ansible_collections.dlrack.node.plugins.module_utils.scheduler.hostlist import expand
from slurmfake import FakeSlurmctld
from testpaths import DATA

SLURM = os.path.join(DATA, "slurm")
OURS = "dlrack: gpu.pcie_link,memory.ecc_errors 20261201T164500Z-0a1b2c3d4e5f"


def _read(name):
    with open(os.path.join(SLURM, name)) as f:
        return f.read()


def test_parse_real_states():
    nodes = slurm.parse_show_node(_read("show-node-states.txt"))
    assert sorted(nodes) == ["future01", "ghost01", "ghost02", "ghost03", "slurm01"]
    assert nodes["slurm01"]["base"] == "IDLE" and nodes["slurm01"]["drained"]
    assert nodes["slurm01"]["reason"] == OURS
    assert nodes["slurm01"]["reason_by"] == "root" and nodes["slurm01"]["reason_at"] == "2026-12-01T16:32:42"
    assert nodes["ghost03"]["state"] == "DOWN+DRAIN+NOT_RESPONDING"
    assert nodes["ghost03"]["reason"] == "maintenance: rack 7 PDU swap"
    assert nodes["ghost01"]["drained"] is False and nodes["ghost01"]["reason"] == "cable"
    assert nodes["future01"]["base"] == "FUTURE" and nodes["future01"]["reason"] is None


def test_parse_keeps_os_with_spaces_and_reason_with_equals():
    line = _read("show-node-draining.txt").splitlines()[0]
    fields = slurm.parse_node_line(line)
    assert fields["OS"].startswith("Linux ") and "#1 SMP" in fields["OS"]
    assert fields["NodeHostName"] == "slurm01" and fields["State"] == "IDLE+NOT_RESPONDING"
    odd = line + " Reason=swap PSU a=b [ops@2026-12-01T10:00:00]"
    assert slurm.parse_node_line(odd)["Reason"] == "swap PSU a=b"


def test_fields_slurm_prints_after_the_reason():
    """Slurm prints Comment=, Extra=, InstanceId=/InstanceType= and ReservationName= after Reason=
    when they are set (src/api/node_info.c slurm_sprint_node_table, one-liner: each on the same
    line); the reason and its [user@time] stamp stop there. The line is the captured drained slurm01
    with those fields added in Slurm's order."""
    line = _read("show-node-states.txt").splitlines()
    line = [ln for ln in line if ln.startswith("NodeName=slurm01 ")][0]
    for tail in (" Comment=rack 7, row B", " Extra={\"rack\": 7}", " InstanceId=i-0abc InstanceType=p5.48xlarge",
                 " ReservationName=maint_0412", " Comment=c Extra=e ReservationName=r"):
        node = slurm.parse_show_node(line + tail + "\n")["slurm01"]
        assert node["reason"] == OURS and slurm.is_ours(node["reason"]), tail
        assert node["reason_by"] == "root" and node["reason_at"] == "2026-12-01T16:32:42", tail
    fields = slurm.parse_node_line(line + " Comment=rack 7, row B ReservationName=maint_0412")
    assert fields["Comment"] == "rack 7, row B" and fields["ReservationName"] == "maint_0412"
    theirs = line.replace("Reason=" + OURS, "Reason=PSU swap") + " ReservationName=maint"
    assert slurm.parse_show_node(theirs)["slurm01"]["reason"] == "PSU swap"
    # a person's reason that imitates ours and a stamp is still theirs (the last stamp ends it)
    fake = line.replace("Reason=" + OURS, "Reason=" + OURS + " [root@2026-12-01T16:32:42] Comment=x")
    assert not slurm.is_ours(slurm.parse_show_node(fake)["slurm01"]["reason"])


def test_reason_grammar():
    assert slurm.format_reason(["memory.ecc_errors", "gpu.pcie_link", "gpu.pcie_link"],
                               "20261201T164500Z-0a1b2c3d4e5f") == OURS
    assert slurm.parse_reason(OURS) == (("gpu.pcie_link", "memory.ecc_errors"), "20261201T164500Z-0a1b2c3d4e5f")
    for theirs in ("maintenance", "dlrack: hand written note here", "dlrack:x y", "NHC: dlrack: a b", ""):
        assert not slurm.is_ours(theirs), theirs
    with pytest.raises(slurm.SlurmError, match="rule ids"):
        slurm.format_reason(["Bad Rule"], "r1")
    with pytest.raises(slurm.SlurmError, match="grammar"):
        slurm.check_reason("maintenance")


def test_hostlist():
    # one bracket per prefix; each range keeps the width of its lower bound (010 is gpu010)
    names = ["gpu03", "gpu01", "gpu02", "gpu07", "login", "gpu010", "n1"]
    assert slurm.compress_hostlist(names) == "gpu[01-03,07,010],login,n1"
    assert sorted(expand(slurm.compress_hostlist(names))) == sorted(names)
    assert sorted(FakeSlurmctld("")._expand(slurm.compress_hostlist(names))) == sorted(names)
    with pytest.raises(slurm.SlurmError, match="list each node"):
        slurm.check_names(["gpu[01-02]"])


def _fake():
    return FakeSlurmctld(_read("show-node-states.txt") + _read("show-node-draining.txt").splitlines()[0].replace(
        "NodeName=slurm01", "NodeName=gpu01").replace("NodeHostName=slurm01", "NodeHostName=gpu01") + "\n")


def test_drain_idempotent_batched_and_owner_rule():
    fake = _fake()
    sc = slurm.Scontrol(runner=fake)
    names = ["gpu01", "ghost01", "ghost03", "future01", "slurm01", "nosuch"]
    res = slurm.apply(sc, names, "drain", OURS)
    assert res["drained"] == ["gpu01"] and res["changed"]
    assert "skipped" not in res   # Ansible would report the whole task as skipped
    assert res["unchanged"] == ["slurm01"]               # already ours for the same rules
    skipped = dict((s["node"], s["why"]) for s in res["skipped_nodes"])
    assert sorted(skipped) == ["future01", "ghost01", "ghost03", "nosuch"]
    assert "down" in skipped["ghost01"] and "not known" in skipped["nosuch"]
    # one show, one update (a hostlist of the nodes to change), one read back
    assert [c[1] for c in fake.calls] == ["show", "update", "show"]
    assert fake.calls[1][2] == "NodeName=gpu01" and fake.calls[1][4] == "Reason=" + OURS
    again = slurm.apply(slurm.Scontrol(runner=fake), names, "drain",
                        OURS.replace("0a1b2c3d4e5f", "ffffffffffff"))
    assert not again["changed"] and again["drained"] == []
    # ghost03's operator reason is never replaced, also when it comes back up
    fake.lines["ghost03"] = fake.lines["ghost03"].replace("DOWN+DRAIN+NOT_RESPONDING", "IDLE+DRAIN")
    res = slurm.apply(slurm.Scontrol(runner=fake), ["ghost03"], "drain", OURS)
    assert not res["changed"] and res["left_alone"][0]["reason"] == "maintenance: rack 7 PDU swap"
    res = slurm.apply(slurm.Scontrol(runner=fake), ["ghost03"], "resume")
    assert not res["changed"] and "someone else" in res["messages"][0]


def test_resume_only_ours_and_check_mode():
    fake = _fake()
    res = slurm.apply(slurm.Scontrol(runner=fake), ["slurm01", "gpu01"], "resume", check_mode=True)
    assert res["would"] == ["slurm01"] and res["changed"] and len(fake.calls) == 1
    assert res["after"]["slurm01"] == "IDLE" and "DRAIN" in res["before"]["slurm01"]
    res = slurm.apply(slurm.Scontrol(runner=fake), ["slurm01", "gpu01"], "resume")
    assert res["resumed"] == ["slurm01"] and res["unchanged"] == ["gpu01"]
    assert "DRAIN" not in slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["state"]


def test_reason_update_when_rules_differ():
    fake = _fake()
    new = "dlrack: gpu.present 20261201T170000Z-000000000001"
    res = slurm.apply(slurm.Scontrol(runner=fake), ["slurm01"], "drain", new)
    assert res["drained"] == ["slurm01"]
    assert slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["reason"] == new


def test_scontrol_failure_is_one_sentence():
    sc = slurm.Scontrol(runner=lambda argv: (1, "", "slurm_load_node error: Unable to contact slurm controller"))
    with pytest.raises(slurm.SlurmError, match="scontrol show node failed .*Unable to contact.*scontrol ping"):
        slurm.apply(sc, ["gpu01"], "drain", OURS)


def test_real_timeout_bounds_the_call(tmp_path):
    tool = tmp_path / "scontrol"
    tool.write_text("#!/bin/sh\nsleep 30\n")
    tool.chmod(0o755)
    sc = slurm.Scontrol(path=str(tool), timeout=0.5)
    with pytest.raises(slurm.SlurmError, match="did not answer within 0.5 s"):
        sc.show(["gpu01"])


# A person's reasons that start with our tag (issue 28.2): with the old grammar any two words after
# "dlrack: " were ours, so the next passing run resumed them (seen on the real slurmctld).
PERSONS = ("dlrack: rma pending", "dlrack: do-not-resume ticket-4711", "dlrack: gpu.x health-anything",
           "dlrack: gpu.present 20261201T164500Z", "dlrack: gpu.present 20261201T164500Z-0A1B2C3D4E5F",
           "dlrack: gpu.present 20261301T164500Z-0a1b2c3d4e5f", "dlrack: gpu.present 20260230T120000Z-0a1b2c3d4e5f",
           "dlrack: gpu.present 20261201T246000Z-0a1b2c3d4e5f", "dlrack: gpu.present health-20261201T164500Z",
           "dlrack: gpu.present health-20261201T164500Z-0a1b2c3d4e5f-x", "dlrack: gpu.present run-20261201T164500Z-0a1b2c3d4e5f",
           "dlrack: gpu..present 20261201T164500Z-0a1b2c3d4e5f", "dlrack:  gpu.present 20261201T164500Z-0a1b2c3d4e5f",
           "dlrack: gpu.present 20261201T164500Z-0a1b2c3d4e5f please keep")


def test_strict_run_ids():
    from ansible_collections.dlrack.node.plugins.plugin_utils.reports.common import new_run_id
    for dummy in range(50):
        made = new_run_id()
        assert slurm.valid_run_id(made) and slurm.valid_run_id(made, "ansible") and not slurm.valid_run_id(made, "health")
        health = slurm.new_health_run_id()
        assert slurm.is_health_run_id(health) and slurm.valid_run_id(health) and not slurm.valid_run_id(health, "ansible")
    assert slurm.new_health_run_id(now=1796445610, token="0a1b2c3d4e5f") == "health-20261205T044010Z-0a1b2c3d4e5f"
    for bad in ("r1", "20261201T164500Z-ab12", "20260229T000000Z-0a1b2c3d4e5f", "health-anything", None, 7):
        assert not slurm.valid_run_id(bad), bad
    assert slurm.valid_run_id("20280229T235959Z-0a1b2c3d4e5f")   # a leap day
    with pytest.raises(slurm.SlurmError, match="run id 'r1'"):
        slurm.format_reason(["gpu.present"], "r1")


@pytest.mark.parametrize("reason", PERSONS)
def test_a_persons_dlrack_reason_is_never_ours(reason):
    assert not slurm.is_ours(reason) and slurm.parse_reason(reason) is None
    with pytest.raises(slurm.SlurmError, match="grammar"):
        slurm.check_reason(reason)


@pytest.mark.parametrize("reason", PERSONS[:3])
def test_a_persons_dlrack_drain_is_neither_resumed_nor_overwritten(reason):
    """The captured drained slurm01 with a person's reason in place of ours: a passing run does not
    resume it, a failing one does not replace the reason."""
    fake = _fake()
    fake(["scontrol", "update", "NodeName=slurm01", "State=DRAIN", "Reason=" + reason])
    res = slurm.apply(slurm.Scontrol(runner=fake), ["slurm01"], "resume")
    assert not res["changed"] and res["left_alone"][0]["reason"] == reason
    res = slurm.apply(slurm.Scontrol(runner=fake), ["slurm01"], "drain", OURS)
    assert not res["changed"] and res["left_alone"][0]["reason"] == reason
    assert slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["reason"] == reason


def test_service_required_is_lifted_by_a_person_only():
    fake = _fake()
    service = "dlrack: gpu.present,service.required health-20261201T170000Z-0a1b2c3d4e5f"
    fake(["scontrol", "update", "NodeName=slurm01", "State=DRAIN", "Reason=" + service])
    assert slurm.needs_service(service) and not slurm.needs_service(OURS)
    res = slurm.apply(slurm.Scontrol(runner=fake), ["slurm01"], "resume")
    assert not res["changed"] and res["resumed"] == []
    res = slurm.apply(slurm.Scontrol(runner=fake), ["slurm01"], "drain", OURS)
    assert not res["changed"]
    assert slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["reason"] == service
