"""The scheduler act through ansible-playbook: a real pre-flight report of a declared fleet
(molecule/scheduler/fleets) drives playbooks/scheduler.yml - the play that site.yml, drift.yml and
acceptance.yml import - against a stand-in scontrol (tests/slurmfake.py: lines of real Slurm 22.05.8
output, updates applied as that slurmctld did). molecule/scheduler runs the same role against a
real slurmctld; this test covers the playbook wiring, the switch and check mode without one."""
import json
import os
import re

import pytest

from schedulerlib import FLEETS, ROOT, fake_slurm, node_state, preflight_reports, this_run
from schedulerlib import playbook as _playbook

TESTS = os.path.join(ROOT, "tests")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return preflight_reports(tmp_path_factory.mktemp("reports"))


@pytest.fixture()
def slurm(tmp_path):
    """State file + scontrol wrapper; slurm01 IDLE (captured line), ghost01-03 as captured."""
    return fake_slurm(tmp_path)


_node = node_state


def _act(reports, fleet, scontrol, *extra):
    return _playbook("playbooks/scheduler.yml", "-i", os.path.join(FLEETS, fleet + ".yml"),
                     "-e", "dlrack_scheduler=slurm", "-e", "scheduler_scontrol=" + scontrol,
                     "-e", json.dumps({"__dlrack_scheduler_reports": [this_run("%s/%s/report.json" % (reports, fleet))]}), *extra)


def _recap(out):
    return dict((k, int(v)) for k, v in re.findall(r"(ok|changed|failed)=(\d+)", out.split("PLAY RECAP")[-1]))


def test_drain_again_check_mode_resume(reports, slurm):
    state, scontrol = slurm
    run_id = json.loads((reports / "fail-slurm01" / "report.json").read_text())["summary"]["run_id"]
    rc, out = _act(reports, "fail-slurm01", scontrol)
    assert rc == 0, out[-3000:]
    assert _node(state, "slurm01") == ("IDLE+DRAIN+NOT_RESPONDING", "dlrack: memory.exceeds_vram " + run_id)
    assert _node(state, "ghost03")[1] == "maintenance: rack 7 PDU swap"     # a person's drain, untouched
    rc, out = _act(reports, "fail-slurm01", scontrol)
    assert rc == 0 and _recap(out)["changed"] == 0, out[-3000:]
    rc, out = _act(reports, "pass-all", scontrol, "--check")
    assert rc == 0 and "DRAIN" in _node(state, "slurm01")[0], out[-3000:]
    assert re.search(r"would.*slurm01", out.replace("\n", " ")), out[-3000:]
    rc, out = _act(reports, "pass-all", scontrol)
    assert rc == 0 and _node(state, "slurm01") == ("IDLE+NOT_RESPONDING", None), out[-3000:]
    # --limit keeps the act (it runs over the run's hosts, delegated to the admin host)
    rc, out = _act(reports, "fail-slurm01", scontrol, "--limit", "ghost02.rack7.example")
    assert rc == 0 and _node(state, "slurm01")[1].startswith("dlrack: memory.exceeds_vram "), out[-3000:]


def test_over_the_cap_and_the_switch(reports, slurm):
    state, scontrol = slurm
    before = state.read_text()
    rc, out = _act(reports, "fail-two", scontrol)
    assert rc != 0 and "2 of 4 judged nodes fail, more than the cap of 1" in out, out[-3000:]
    assert state.read_text() == before
    rc, out = _playbook("playbooks/scheduler.yml", "-i", os.path.join(FLEETS, "fail-slurm01.yml"), "-e", "scheduler_scontrol=" + scontrol,
                        "-e", json.dumps({"__dlrack_scheduler_reports": ["%s/fail-slurm01/report.json" % reports]}))
    assert rc == 0 and "skipping: no hosts matched" in out and state.read_text() == before, out[-3000:]


def test_a_bad_node_name_fails_after_the_others_are_acted_on(reports, slurm):
    """One host mapped to an unusable Slurm node name fails the act naming it - after slurm01,
    which fails its pre-flight, is drained (a bad mapping must not keep a failing node in service)."""
    state, scontrol = slurm
    rc, out = _act(reports, "fail-slurm01", scontrol, "-e", json.dumps({"scheduler_node_names": {"ghost02.rack7.example": "bad name"}}))
    assert rc != 0 and "host ghost02.rack7.example: scheduler node name 'bad name' is not a valid slurm node name" in out, out[-3000:]
    assert _node(state, "slurm01")[1].startswith("dlrack: memory.exceeds_vram "), out[-3000:]


def test_the_three_playbooks_import_the_act():
    for playbook, where in (("playbooks/site.yml", "Site - apply the verdicts to the scheduler"),
                            ("roles/acceptance/tasks/main.yml", "Apply the verdicts to the scheduler"),
                            ("playbooks/drift.yml", "Apply the verdicts to the scheduler")):
        with open(os.path.join(ROOT, playbook)) as f:
            text = f.read()
        assert where in text, playbook
    with open(os.path.join(ROOT, "playbooks", "site.yml")) as f:
        site = f.read()
    assert site.index("scheduler.yml") < site.index("- name: Site - verdict")


def test_drift_playbook_acts_before_its_hosts_fail(tmp_path, slurm):
    """drift.yml (always --check for the nodes) drains a host it could not check (drift status
    error), then still fails it: the act runs between the report and the per-host failures."""
    state, scontrol = slurm
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    gpu-x99:\n      ansible_host: 127.0.0.1\n      ansible_port: 1\n"
                         "      ansible_connection: ssh\n")
    rc, out = _playbook("playbooks/drift.yml", "--check", "--diff", "-i", str(inventory),
                        "-e", "dlrack_report_dir=%s" % (tmp_path / "drift"), "-e", "dlrack_scheduler=slurm",
                        "-e", "scheduler_scontrol=" + scontrol, "-e", json.dumps({"scheduler_node_names": {"gpu-x99": "slurm01"}}))
    run_id = json.loads((tmp_path / "drift" / "drift.json").read_text())["summary"]["run_id"]
    assert rc != 0 and "could not be checked (status error)" in out, out[-3000:]
    assert _node(state, "slurm01")[1] == "dlrack: drift.error,inventory.schema " + run_id


def test_acceptance_acts_before_its_hosts_fail(tmp_path, slurm):
    """acceptance.yml: a host that could not be measured is an acceptance error; the role acts on the
    scheduler before it fails the host, so the act also runs when every measured host fails."""
    state, scontrol = slurm
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01.rack7:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: /usr/bin/python3\n"
                         "    gpu-x99:\n      ansible_host: 127.0.0.1\n      ansible_port: 1\n      ansible_connection: ssh\n")
    rc, out = _playbook("playbooks/acceptance.yml", "-i", str(inventory), "-e", "dlrack_become=false",
                        "-e", "acceptance_become=false", "-e", "acceptance_memory=false",
                        "-e", "dlrack_report_dir=%s" % (tmp_path / "acc"), "-e", "dlrack_scheduler=slurm",
                        "-e", "scheduler_scontrol=" + scontrol, "-e", json.dumps({"scheduler_node_names": {"gpu-x99": "slurm01"}}))
    assert rc != 0 and "ERROR   gpu-x99" in out, out[-3000:]
    assert _node(state, "slurm01")[1].startswith("dlrack: acceptance.host.measured ")


def test_the_play_alone_says_it_has_no_reports_of_this_run(slurm):
    """playbooks/scheduler.yml acts on the reports of the run that imports it; run alone (even in
    check mode) it fails with one sentence saying what to run instead, not an undefined variable."""
    state, scontrol = slurm
    before = state.read_text()
    rc, out = _playbook("playbooks/scheduler.yml", "-i", os.path.join(FLEETS, "fail-slurm01.yml"), "--check",
                        "-e", "dlrack_scheduler=slurm", "-e", "scheduler_scontrol=" + scontrol)
    assert rc != 0 and "no reports of this run to act on (scheduler_reports is empty)" in out, out[-3000:]
    assert "is undefined" not in out and state.read_text() == before
