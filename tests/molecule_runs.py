"""Molecule scenario runs for tests/integration/test_molecule.py, and the background lane.

A scenario listed in BACKGROUND is started when the pytest session begins (tests/conftest.py,
pytest_collection_finish) and runs side by side with everything else; its test is moved to the end
of the session and waits for it there, so one pytest run still counts every scenario and ends with
pytest's summary line. On a 2-core CI machine this is what keeps a clean `make test` within budget:
storage_vm is one QEMU TCG process (~20 min, mostly one busy vCPU) while the rest of the suite is
mostly one busy Python process at a time (benchmarks/RESULTS.md, "CI wall time").
"""
import os
import shutil
import signal
import subprocess
import time

from testpaths import ROOT

# Scenarios that share no state with the others (own VM, port, run dir) and run in the background.
BACKGROUND = ("storage_vm",)
RUNS = {}          # scenario -> Run of this session (the terminal summary lists their wall times)
TIMEOUT = 45 * 60
LOG_DIR = os.path.join(ROOT, ".cache", "molecule-logs")
# prerun: false: molecule would otherwise `ansible-galaxy collection install` this checkout into
# ~/.ansible before every scenario (~14 s each, and a race between two scenarios running at once);
# the scenarios use the checkout itself through collections_path = .collections.
BASE_CONFIG = os.path.join(ROOT, "molecule", "base.yml")


def can_run():
    return os.geteuid() == 0 and shutil.which("podman") is not None


def scenarios():
    base = os.path.join(ROOT, "molecule")
    return sorted(d for d in os.listdir(base) if os.path.isfile(os.path.join(base, d, "molecule.yml")))


def environment():
    env = dict(os.environ)
    env["PATH"] = os.path.join(ROOT, ".venv", "bin") + os.pathsep + env.get("PATH", "")
    env["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(ROOT, ".collections")
    env.setdefault("ANSIBLE_FORCE_COLOR", "0")
    env["PY_COLORS"] = "0"
    return env


def argv(scenario, command="test"):
    return ["molecule", "--base-config", BASE_CONFIG, command, "-s", scenario]


class Run(object):
    """One `molecule test -s NAME`, its output in .cache/molecule-logs/NAME.log."""

    def __init__(self, scenario, runner=None):
        self.scenario = scenario
        self.argv = runner or argv(scenario)
        self.log_path = os.path.join(LOG_DIR, scenario + ".log")
        self.proc = None
        self.started = self.ended = None
        self.background = False

    def start(self):
        os.makedirs(LOG_DIR, exist_ok=True)
        with open(self.log_path, "w") as log:
            # Own process group, so that stop() reaches molecule's ansible-playbook children.
            self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=environment(), stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.started = time.time()
        return self

    def wait(self, timeout=TIMEOUT):
        """The exit status; a run past its time is stopped and reads as 124 (as timeout(1))."""
        left = max(1, timeout - (time.time() - self.started))
        try:
            rc = self.proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            self.stop()
            rc = 124
        if self.ended is None:
            self.ended = time.time()
        return rc

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def seconds(self):
        return None if self.started is None else (self.ended or time.time()) - self.started

    def tail(self, size=6000):
        with open(self.log_path, errors="replace") as log:
            return log.read()[-size:]

    def stop(self, destroy=None):
        """Stop a run that is still going (its process group), then tear the scenario down."""
        if not self.running:
            return
        for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        self.ended = time.time()
        # The guest's QEMU daemonizes out of the process group: molecule destroy stops it.
        cmd = argv(self.scenario, "destroy") if destroy is None else destroy
        if cmd:
            with open(self.log_path, "a") as log:
                log.write("\n--- stopped; %s\n" % " ".join(cmd))
                log.flush()
                subprocess.run(cmd, cwd=ROOT, env=environment(), stdout=log, stderr=subprocess.STDOUT,
                               timeout=300, check=False)


def order(items, background):
    """Items of background scenarios last (their tests only wait), the others in their order."""
    first = [i for i in items if scenario_of(i) not in background]
    return first + [i for i in items if scenario_of(i) in background]


def scenario_of(item):
    callspec = getattr(item, "callspec", None)
    if callspec is None or getattr(item, "originalname", None) != "test_molecule_scenario":
        return None
    return callspec.params.get("scenario")


def start_background(items):
    """Start the background scenarios among these (collected, selected) items; the started runs."""
    started = []
    for item in items:
        name = scenario_of(item)
        if name in BACKGROUND and name not in RUNS and can_run():
            run = RUNS[name] = Run(name).start()
            run.background = True
            started.append(run)
    return started


def stop_all():
    for run in RUNS.values():
        run.stop()


def summary_lines():
    lines = []
    for name, run in sorted(RUNS.items(), key=lambda kv: kv[1].started):
        state = "still running" if run.running else "rc=%s" % run.proc.returncode
        lines.append("%-14s %6.0f s  %-10s %s" % (name, run.seconds(), "background" if run.background else "", state))
    return lines
