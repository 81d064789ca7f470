"""The background lane of molecule scenarios (tests/molecule_runs.py, hooks in tests/conftest.py),
with short Python child processes in the place of molecule (the real scenarios run in
tests/integration/test_molecule.py): ordering, exit status, timeout, stopping a whole process group."""
import os
import sys
import time

import pytest

import molecule_runs


class _Item(object):
    def __init__(self, name, scenario=None):
        self.name = name
        if scenario is not None:
            self.originalname = "test_molecule_scenario"
            self.callspec = type("CallSpec", (), {"params": {"scenario": scenario}})()


@pytest.fixture
def logs(tmp_path, monkeypatch):
    monkeypatch.setattr(molecule_runs, "LOG_DIR", str(tmp_path))
    return tmp_path


def _py(code):
    return [sys.executable, "-c", code]


def test_background_scenarios_go_last_in_lane_order_and_the_rest_keep_theirs():
    items = [_Item("a"), _Item("m1", "default"), _Item("vm", "storage_vm"), _Item("b"), _Item("m2", "site")]
    assert [i.name for i in molecule_runs.order(items, ("storage_vm",))] == ["a", "m1", "b", "m2", "vm"]
    assert [i.name for i in molecule_runs.order(items, ("storage_vm", "default"))] == ["a", "b", "m2", "vm", "m1"]


def test_the_lane_is_configurable(monkeypatch):
    monkeypatch.delenv("DLRACK_MOLECULE_BACKGROUND", raising=False)
    assert molecule_runs.background() == molecule_runs.BACKGROUND
    monkeypatch.setenv("DLRACK_MOLECULE_BACKGROUND", "storage_vm, acceptance")
    assert molecule_runs.background() == ("storage_vm", "acceptance")
    monkeypatch.setenv("DLRACK_MOLECULE_BACKGROUND", "")
    assert molecule_runs.background() == ()


def test_lanes_split_by_semicolon_and_the_default_lanes_share_no_scenario(monkeypatch):
    monkeypatch.setenv("DLRACK_MOLECULE_BACKGROUND", "storage_vm; site, ecc_monitor;;")
    assert molecule_runs.lanes() == (("storage_vm",), ("site", "ecc_monitor"))
    assert molecule_runs.background() == ("storage_vm", "site", "ecc_monitor")
    monkeypatch.delenv("DLRACK_MOLECULE_BACKGROUND")
    assert molecule_runs.LANES and all(molecule_runs.LANES)
    assert len(molecule_runs.BACKGROUND) == len(set(molecule_runs.BACKGROUND))


def test_each_lane_runs_beside_the_others_and_a_scenario_finds_its_lane(logs, monkeypatch):
    """Two lanes: both first scenarios start before either ends (they overlap); lane_of names the
    lane of a background scenario and None for one of the foreground."""
    monkeypatch.setattr(molecule_runs, "RUNS", {})
    monkeypatch.setattr(molecule_runs, "LANE_LIST", [])
    monkeypatch.setattr(molecule_runs, "can_run", lambda: True)
    monkeypatch.setenv("DLRACK_MOLECULE_BACKGROUND", "vm;c1")
    real = molecule_runs.Lane
    make_run = _lane([], {"vm": "time.sleep(1)", "c1": "time.sleep(1)"}, logs).make_run

    class _Lane(real):
        def __init__(self, names):
            real.__init__(self, names, make_run=make_run)
    monkeypatch.setattr(molecule_runs, "Lane", _Lane)
    started = molecule_runs.start_background([_Item("vm", "vm"), _Item("c1", "c1"), _Item("d", "default")])
    assert [lane.names for lane in started] == [["vm"], ["c1"]]
    assert molecule_runs.lane_of("c1") is started[1] and molecule_runs.lane_of("default") is None
    assert started[0].result("vm")[0] == 0 and started[1].result("c1")[0] == 0
    assert float((logs / "c1.t0").read_text()) < float((logs / "vm.t1").read_text())
    assert float((logs / "vm.t0").read_text()) < float((logs / "c1.t1").read_text())
    for lane in started:
        lane.join(timeout=10)


def test_the_critical_path_runs_at_its_priority_and_the_rest_at_the_sessions(logs, monkeypatch):
    monkeypatch.setattr(molecule_runs, "NICE", {"vm": 3})
    code = "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"
    base = os.getpriority(os.PRIO_PROCESS, 0)
    vm = molecule_runs.Run("vm", runner=_py(code)).start()
    other = molecule_runs.Run("c1", runner=_py(code)).start()
    assert vm.wait(timeout=60) == 0 and other.wait(timeout=60) == 0
    assert int(vm.tail().split()[-1]) == min(19, base + 3) and int(other.tail().split()[-1]) == base
    assert molecule_runs.NICE is not None and molecule_runs._priority(0) is None


def test_only_molecule_items_have_a_scenario():
    plain = _Item("x")
    plain.callspec = type("CallSpec", (), {"params": {"scenario": "storage_vm"}})()   # another test's parameter
    assert molecule_runs.scenario_of(plain) is None
    assert molecule_runs.scenario_of(_Item("vm", "storage_vm")) == "storage_vm"


def test_storage_vm_is_in_the_background_lane():
    assert "storage_vm" in molecule_runs.BACKGROUND
    assert set(molecule_runs.BACKGROUND) <= set(molecule_runs.scenarios())


def test_run_reports_exit_status_time_and_log(logs):
    run = molecule_runs.Run("fake", runner=_py("import sys; print('converged'); sys.exit(3)")).start()
    assert run.wait(timeout=60) == 3
    assert "converged" in run.tail()
    assert run.log_path == os.path.join(str(logs), "fake.log")
    assert 0 <= run.seconds() < 60 and not run.running


def test_run_past_its_time_is_stopped_with_its_children_and_destroyed(logs, monkeypatch):
    pidfile = logs / "child.pid"
    # molecule's children (ansible-playbook) are in its process group: they must go too.
    code = ("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']);"
            " open(%r, 'w').write(str(c.pid)); time.sleep(300)" % str(pidfile))
    marker = logs / "destroyed"
    run = molecule_runs.Run("slow", runner=_py(code)).start()
    for dummy in range(100):
        if pidfile.exists() and pidfile.read_text():
            break
        time.sleep(0.1)
    child = int(pidfile.read_text())
    monkeypatch.setattr(molecule_runs, "argv",
                        lambda scenario, command="test": _py("open(%r, 'w').write(%r)" % (str(marker), command)))
    started = time.time()
    assert run.wait(timeout=2) == 124
    assert time.time() - started < 40
    assert not run.running
    assert marker.read_text() == "destroy"
    assert "--- stopped" in run.tail()
    for dummy in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the run's child %d outlived the stop" % child)


def test_stop_all_stops_what_is_still_running(logs, monkeypatch):
    monkeypatch.setattr(molecule_runs, "RUNS", {})
    # never the session's own lanes: make test runs this test while storage_vm still runs in the
    # background (a clean run's storage_vm was stopped here: rc=-15 after 2720 s)
    monkeypatch.setattr(molecule_runs, "LANE_LIST", [])
    monkeypatch.setattr(molecule_runs, "LANE", None)
    done = molecule_runs.Run("done", runner=_py("pass")).start()
    done.wait(timeout=30)
    going = molecule_runs.Run("going", runner=_py("import time; time.sleep(300)")).start()
    going.background = True
    molecule_runs.RUNS.update(done=done, going=going)
    lines = molecule_runs.summary_lines()
    assert any(line.startswith("going") and "background" in line and "still running" in line for line in lines)
    monkeypatch.setattr(molecule_runs, "argv", lambda scenario, command="test": _py("pass"))
    molecule_runs.stop_all()
    assert not going.running and going.proc.returncode is not None
    assert any(line.startswith("done") and "rc=0" in line for line in molecule_runs.summary_lines())


def test_scenarios_run_with_the_base_config_without_prerun():
    argv = molecule_runs.argv("default")
    assert argv[:3] == ["molecule", "--base-config", molecule_runs.BASE_CONFIG] and argv[-2:] == ["-s", "default"]
    with open(molecule_runs.BASE_CONFIG) as fh:
        assert "\nprerun: false\n" in fh.read()


def _lane(names, codes, logs):
    """A Lane whose scenario NAME runs a Python child: codes[NAME] (the child writes NAME.t0/.t1 times)."""
    def make_run(name):
        code = ("import sys, time; open(%r, 'w').write(repr(time.time())); %s; open(%r, 'w').write(repr(time.time()))"
                % (str(logs / (name + ".t0")), codes[name], str(logs / (name + ".t1"))))
        return molecule_runs.Run(name, runner=_py(code))
    return molecule_runs.Lane(names, make_run=make_run)


def test_lane_runs_its_scenarios_one_after_another_and_reports_each(logs, monkeypatch):
    monkeypatch.setattr(molecule_runs, "RUNS", {})
    lane = _lane(["vm", "c1"], {"vm": "time.sleep(1); sys.exit(2)", "c1": "time.sleep(0.2)"}, logs)
    lane.start()
    rc, run = lane.result("vm")
    assert rc == 2 and run.background and run.scenario == "vm"
    assert lane.result("c1")[0] == 0
    c1_began = float((logs / "c1.t0").read_text())
    assert c1_began >= molecule_runs.RUNS["vm"].ended       # c1 began once vm had ended
    assert set(molecule_runs.RUNS) == {"vm", "c1"}
    lane.join(timeout=10)
    assert not lane.is_alive()


def test_stopping_the_lane_stops_its_run_and_cancels_the_rest(logs, monkeypatch):
    monkeypatch.setattr(molecule_runs, "RUNS", {})
    monkeypatch.setattr(molecule_runs, "argv", lambda scenario, command="test": _py("pass"))   # the destroy
    lane = _lane(["vm", "c1"], {"vm": "time.sleep(300)", "c1": "pass"}, logs)
    lane.start()
    for dummy in range(100):
        if (logs / "vm.t0").exists():
            break
        time.sleep(0.1)
    started = time.time()
    lane.stop()
    assert time.time() - started < 40 and not lane.is_alive()
    rc, run = lane.result("vm")
    assert run is not None and rc != 0 and not run.running
    assert lane.result("c1") == (None, None) and not (logs / "c1.t0").exists()


_TERMINATED_SESSION = r"""
import subprocess, sys, time
sys.path.insert(0, %(tests)r)
import molecule_runs
molecule_runs.LOG_DIR = %(logs)r
molecule_runs.argv = lambda scenario, command="test": [sys.executable, "-c", "open(%(marker)r, 'w').write(%%r)" %% command]
code = ("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']);"
        " open(%(pidfile)r, 'w').write(str(c.pid)); time.sleep(300)")
molecule_runs.RUNS["vm"] = molecule_runs.Run("vm", runner=[sys.executable, "-c", code]).start()
if %(handler)r:
    molecule_runs.stop_on_termination()
print("ready", flush=True)
time.sleep(300)
"""


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("handler", [True, False])
def test_sigterm_to_the_session_stops_and_destroys_its_runs(logs, handler):
    """A CI time limit sends SIGTERM to pytest: its scenario runs (own sessions, so the signal does
    not reach them) are stopped with their children and destroyed before pytest ends by that
    signal. Without the handler (handler=False, as before it) the run's child outlives pytest."""
    import signal
    import subprocess
    pidfile, marker = logs / "child.pid", logs / "destroyed"
    tests_dir = os.path.dirname(os.path.abspath(molecule_runs.__file__))
    code = _TERMINATED_SESSION % {"tests": tests_dir, "logs": str(logs), "marker": str(marker), "pidfile": str(pidfile),
                                  "handler": handler}
    session = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert session.stdout.readline().strip() == "ready"
        for dummy in range(100):
            if pidfile.exists() and pidfile.read_text():
                break
            time.sleep(0.1)
        child = int(pidfile.read_text())
        session.send_signal(signal.SIGTERM)
        assert session.wait(timeout=60) == -signal.SIGTERM      # it still ends the way it was asked to
        for dummy in range(50):
            if not _alive(child):
                break
            time.sleep(0.1)
        if handler:
            assert not _alive(child), "the run's child %d outlived the terminated session" % child
            assert marker.read_text() == "destroy"
        else:
            assert _alive(child) and not marker.exists()
    finally:
        if session.poll() is None:
            session.kill()
        if pidfile.exists() and pidfile.read_text() and _alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_a_lane_run_that_cannot_start_says_why_and_the_summary_still_prints(logs, monkeypatch):
    """molecule missing from .venv (or any failure to start): the scenario's result is no exit
    status with the reason, the lane goes on to the next scenario, and the terminal summary
    (which read run.proc.returncode) prints instead of failing the session with a traceback."""
    monkeypatch.setattr(molecule_runs, "RUNS", {})
    made = {"vm": molecule_runs.Run("vm", runner=[str(logs / "no-such-molecule"), "test"]),
            "c1": molecule_runs.Run("c1", runner=_py("pass"))}
    lane = molecule_runs.Lane(["vm", "c1"], make_run=made.get)
    lane.start()
    rc, run = lane.result("vm")
    assert rc is None and run.error.startswith(("FileNotFoundError", "PermissionError")), run.error
    assert lane.result("c1")[0] == 0
    lines = molecule_runs.summary_lines()
    assert any(line.startswith("vm") and "did not start: FileNotFoundError" in line for line in lines), lines
    lane.join(timeout=10)
