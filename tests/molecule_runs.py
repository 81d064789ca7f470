"""Molecule scenario runs for tests/integration/test_molecule.py, and the background lanes.

The scenarios of the background lanes (LANES, or DLRACK_MOLECULE_BACKGROUND="a;b,c": lanes split
by ";", the scenarios of one lane by ","; "" for none) start when the pytest session begins
(tests/conftest.py, pytest_collection_finish); each lane runs its scenarios one after another,
beside the other lanes and everything else. Their tests are moved to the end of the session and wait
for their runs there, so one pytest run still counts every scenario and ends with pytest's summary
line. On a 2-core CI machine this is what keeps a clean `make test` near its budget: storage_vm is
one QEMU TCG process (~20 min alone, mostly one busy vCPU) beside the rest of the suite. More lanes
and a priority per scenario (NICE) can be set; a second lane of container scenarios was measured
to slow storage_vm more than it saved (benchmarks/RESULTS.md, "CI wall time").
"""
import os
import shutil
import signal
import subprocess
import threading
import time

from testpaths import ROOT

# Lanes of scenarios that share no state with the others (own VM or container, loop-device files,
# port, run dir) and run in the background, each lane in this order.
# Measured in a clean make test (benchmarks/RESULTS.md, "CI wall time"): a second lane of container
# scenarios beside storage_vm made storage_vm slower (2,720 s and not done, against 2,047 s) -
# the machine's two cores were the limit, not the scenarios' waiting - so one lane, storage_vm's.
LANES = (("storage_vm",),)
BACKGROUND = tuple(name for lane in LANES for name in lane)
# CPU priority (nice) of a scenario's processes, QEMU included (it inherits it): the critical path
# first. Only a root session can raise a priority; elsewhere the run keeps the session's.
# Empty: with storage_vm off the critical path, a higher priority for it only slows the foreground.
NICE = {}
LANE = None        # the first Lane of this session, once started (LANE_LIST: all of them)
LANE_LIST = []
RUNS = {}          # scenario -> Run of this session (the terminal summary lists their wall times)
TIMEOUT = 45 * 60
# A background run shares the CPU with the rest of the suite by design (storage_vm took ~20 min alone
# on a quiet machine); it gets more time, still well inside CI's 90 minutes.
BACKGROUND_TIMEOUT = 60 * 60
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
        self.rc = None      # the exit status, once waited for
        self.error = None   # why the run could not start or be waited for (the lane's runs)

    def start(self):
        os.makedirs(LOG_DIR, exist_ok=True)
        with open(self.log_path, "w") as log:
            # Own process group, so that stop() reaches molecule's ansible-playbook children.
            self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=environment(), stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=_priority(NICE.get(self.scenario, 0)))
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
                try:
                    subprocess.run(cmd, cwd=ROOT, env=environment(), stdout=log, stderr=subprocess.STDOUT,
                                   timeout=300, check=False)
                except subprocess.TimeoutExpired:
                    log.write("\n--- %s did not finish in 300 s: the scenario may still be up\n" % " ".join(cmd))


def _priority(nice):
    """A preexec_fn that sets the child's nice value (None for none): a value it may not set (not
    root) leaves the priority as it was, never a run that does not start."""
    if not nice:
        return None

    def apply():
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except OSError:
            pass
    return apply


def order(items, names):
    """Items of background scenarios last, in lane order (their tests only wait); the rest as they were."""
    first = [i for i in items if scenario_of(i) not in names]
    last = [i for i in items if scenario_of(i) in names]
    return first + sorted(last, key=lambda i: list(names).index(scenario_of(i)))


def scenario_of(item):
    callspec = getattr(item, "callspec", None)
    if callspec is None or getattr(item, "originalname", None) != "test_molecule_scenario":
        return None
    return callspec.params.get("scenario")


def lanes():
    """The background lanes: LANES, or DLRACK_MOLECULE_BACKGROUND ("a;b,c": lanes by ';')."""
    env = os.environ.get("DLRACK_MOLECULE_BACKGROUND")
    if env is None:
        return LANES
    found = (tuple(n.strip() for n in lane.split(",") if n.strip()) for lane in env.split(";"))
    return tuple(lane for lane in found if lane)


def background():
    """Every background scenario, lane by lane."""
    return tuple(name for lane in lanes() for name in lane)


class Lane(threading.Thread):
    """Scenarios run one after another in a thread of their own; result() waits for one."""

    def __init__(self, names, make_run=Run):
        threading.Thread.__init__(self, name="molecule-lane", daemon=True)
        self.names, self.make_run = list(names), make_run
        self.runs, self.cancelled = {}, False
        self.lock = threading.Lock()
        self.done = dict((n, threading.Event()) for n in self.names)

    def run(self):
        try:
            for name in self.names:
                with self.lock:   # stop() either sees this run started or the lane cancelled, never neither
                    if self.cancelled:
                        break
                    run = self.runs[name] = RUNS[name] = self.make_run(name)
                    run.background = True
                    try:
                        run.start()
                    except Exception as exc:  # pylint: disable=broad-except  # the test says why
                        run.error = "%s: %s" % (type(exc).__name__, exc)
                if run.error is None:
                    try:
                        run.rc = run.wait(BACKGROUND_TIMEOUT)
                    except Exception as exc:  # pylint: disable=broad-except  # the test says why
                        run.error = "%s: %s" % (type(exc).__name__, exc)
                self.done[name].set()
        finally:
            for event in self.done.values():
                event.set()

    def result(self, name):
        """(exit status, Run) of a scenario of this lane; (None, None) when the lane was stopped first."""
        self.done[name].wait()
        run = self.runs.get(name)
        return (None, None) if run is None else (getattr(run, "rc", None), run)

    def stop(self):
        with self.lock:
            self.cancelled = True
            runs = list(self.runs.values())
        for run in runs:
            run.stop()
        self.join(timeout=600)


def start_background(items):
    """Start the lanes with the background scenarios among these (collected, selected) items; the
    started lanes (none: [])."""
    global LANE  # pylint: disable=global-statement
    selected = set(scenario_of(i) for i in items)
    if LANE_LIST or not can_run():
        return []
    for names in lanes():
        names = [n for n in names if n in selected]
        if names:
            lane = Lane(names)
            LANE_LIST.append(lane)
            lane.start()
    LANE = LANE_LIST[0] if LANE_LIST else None
    return list(LANE_LIST)


def lane_of(scenario):
    """The started lane that runs this scenario, or None (it runs in the foreground)."""
    for lane in LANE_LIST:
        if scenario in lane.names:
            return lane
    return None


def stop_all():
    for lane in LANE_LIST:
        lane.stop()
    for run in list(RUNS.values()):
        run.stop()


TERMINATING = (signal.SIGTERM, signal.SIGHUP)


def stop_on_termination():
    """Make SIGTERM and SIGHUP to this pytest (a CI job's time limit, a closed terminal) stop and
    destroy the scenario runs first (stop_all), then end the process as the signal would have.
    The runs have sessions of their own, so without this they would outlive pytest: a storage_vm
    guest and its molecule going on for up to an hour beside the next job. Ctrl-C needs nothing:
    pytest turns it into KeyboardInterrupt and pytest_sessionfinish calls stop_all()."""
    previous = {}

    def handler(signum, dummy_frame):
        signal.signal(signum, previous.get(signum) or signal.SIG_DFL)
        try:
            stop_all()
        finally:
            os.kill(os.getpid(), signum)

    for sig in TERMINATING:
        try:
            if signal.getsignal(sig) == signal.SIG_IGN:   # nohup: an ignored signal stays ignored
                continue
            previous[sig] = signal.signal(sig, handler)
        except ValueError:   # not the main thread: leave the signals as they are
            break
    return previous


def summary_lines():
    lines = []
    for name, run in sorted(RUNS.items(), key=lambda kv: kv[1].started or 0):
        if run.proc is None:
            state = "did not start: %s" % (run.error or "?")
        else:
            state = "still running" if run.running else "rc=%s" % run.proc.returncode
        lines.append("%-14s %6.0f s  %-10s %s" % (name, run.seconds() or 0, "background" if run.background else "", state))
    return lines
