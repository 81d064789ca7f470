"""Shared by the scheduler act's integration tests (test_scheduler_playbooks.py: Slurm through
tests/slurmfake.py; test_scheduler_kubernetes.py: Kubernetes through tests/k8sfake.py): running
ansible-playbook from this checkout, and the real pre-flight reports of the declared fleets in
molecule/scheduler/fleets that drive playbooks/scheduler.yml."""
import datetime
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLEETS = os.path.join(ROOT, "molecule", "scheduler", "fleets")
BIN = os.path.join(ROOT, ".venv", "bin")
REPORT_FLEETS = ("fail-slurm01", "pass-all", "fail-two")


def env():
    return dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), PATH=BIN + os.pathsep + os.environ["PATH"])


def playbook(*args, timeout=300):
    """(rc, stdout + stderr) of ansible-playbook ARGS run in the checkout."""
    res = subprocess.run([os.path.join(BIN, "ansible-playbook")] + list(args), cwd=ROOT, env=env(),
                         capture_output=True, text=True, timeout=timeout, check=False)
    return res.returncode, res.stdout + res.stderr


def preflight_reports(base):
    """A pre-flight report (never failing the run) of each fleet in REPORT_FLEETS, written to
    BASE/<fleet>/report.json; returns BASE."""
    for fleet in REPORT_FLEETS:
        rc, out = playbook("playbooks/preflight.yml", "-i", os.path.join(FLEETS, fleet + ".yml"),
                           "-e", "dlrack_report_dir=%s/%s" % (base, fleet), "-e", "dlrack_fail_on=never")
        assert rc == 0, out[-3000:]
    return base


def this_run(path, ahead_s=120):
    """Make the report at PATH one of the next run's: the act judges only reports written after its
    ansible-playbook started (plugin_utils/scheduler.py, issue 28.8), and these tests act on reports
    that a fixture wrote earlier; their summary.generated_at is moved to just after the next run
    starts, as if its pre-flight play had written them. Returns PATH."""
    with open(path) as f:
        doc = json.load(f)
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=ahead_s)
    doc["summary"]["generated_at"] = later.replace(microsecond=0).isoformat()
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def fake_slurm(tmp_path, more=()):
    """A stand-in slurmctld (tests/slurmfake.py) in TMP_PATH: (state file, scontrol wrapper). slurm01
    IDLE (a captured line), ghost01-03 and future01 as captured; ``more``: names of further IDLE nodes
    (slurm01's line renamed)."""
    with open(os.path.join(ROOT, "tests", "data", "slurm", "show-node-states.txt")) as f:
        lines = dict((ln.split()[0][9:], ln) for ln in f.read().splitlines() if ln.startswith("NodeName="))
    with open(os.path.join(ROOT, "tests", "data", "slurm", "show-node-draining.txt")) as f:
        lines["slurm01"] = f.read().splitlines()[0]
    for name in more:
        lines[name] = lines["slurm01"].replace("slurm01", name)
    state = tmp_path / "state.json"
    state.write_text(json.dumps(lines))
    wrapper = tmp_path / "scontrol"
    wrapper.write_text("#!/bin/sh\nexec %s %s %s \"$@\"\n" % (sys.executable, os.path.join(ROOT, "tests", "slurmfake.py"), state))
    wrapper.chmod(0o755)
    return state, str(wrapper)


def node_state(state, name):
    """(State=, the reason without Slurm's [user@time]) of NAME in a fake_slurm state file."""
    line = json.loads(state.read_text())[name]
    return re.search(r"State=(\S+)", line).group(1), (re.search(r"Reason=(.*?) \[", line) or [None, None])[1]
