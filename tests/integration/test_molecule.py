"""Run every molecule scenario (molecule/<name>/molecule.yml) as one pytest test each.

Each scenario runs `molecule --base-config molecule/base.yml test -s <name>` from the repository
root (the scenario's own verify playbook asserts the behaviour); the test fails with the tail of
molecule's output. The scenarios of the background lanes (molecule_runs.LANES: storage_vm, a QEMU
guest) start when the session begins and run beside the rest of the suite; their tests come
last and wait for the runs (tests/conftest.py), so the pytest summary line counts every scenario.
"""
import pytest

import molecule_runs  # noqa: E402  (tests/ is on sys.path: conftest)

SCENARIOS = molecule_runs.scenarios()


@pytest.mark.molecule
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario):
    if not molecule_runs.can_run():
        pytest.skip("molecule scenarios need root and podman (make test installs podman)")
    lane = molecule_runs.lane_of(scenario)
    if lane is not None:         # started in a background lane at session start
        rc, run = lane.result(scenario)
        if run is None:
            pytest.fail("molecule test -s %s did not run: the background lane was stopped first" % scenario)
        if rc is None:
            pytest.fail("molecule test -s %s did not run to its end in the background lane: %s; log %s"
                        % (scenario, run.error, run.log_path))
    else:
        run = molecule_runs.RUNS[scenario] = molecule_runs.Run(scenario).start()
        rc = run.wait()
    if rc != 0:
        pytest.fail("molecule test -s %s failed (rc=%d%s) after %.0f s; full log %s\n%s"
                    % (scenario, rc, ", timed out" if rc == 124 else "", run.seconds(), run.log_path, run.tail()))
