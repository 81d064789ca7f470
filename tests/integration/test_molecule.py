"""Run every molecule scenario (molecule/<name>/molecule.yml) as one pytest test each.

`make test` runs these after lint and the unit tests, so the pytest summary line covers them.
Each scenario runs `molecule test -s <name>` from the repository root (the scenario's own
verify playbook asserts the behaviour); the test fails with the tail of molecule's output.
"""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCENARIOS = sorted(
    d for d in os.listdir(os.path.join(ROOT, "molecule"))
    if os.path.isfile(os.path.join(ROOT, "molecule", d, "molecule.yml"))
)


@pytest.mark.molecule
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario):
    if os.geteuid() != 0 or shutil.which("podman") is None:
        pytest.skip("molecule scenarios need root and podman (make test installs podman)")
    env = dict(os.environ)
    env["PATH"] = os.path.join(ROOT, ".venv", "bin") + os.pathsep + env.get("PATH", "")
    env["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(ROOT, ".collections")
    env.setdefault("ANSIBLE_FORCE_COLOR", "0")
    env["PY_COLORS"] = "0"
    log_dir = os.path.join(ROOT, ".cache", "molecule-logs")
    os.makedirs(log_dir, exist_ok=True)
    log_path = os.path.join(log_dir, scenario + ".log")
    with open(log_path, "w") as log:
        proc = subprocess.run(
            ["molecule", "test", "-s", scenario],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=45 * 60, check=False,
        )
    if proc.returncode != 0:
        with open(log_path) as log:
            tail = log.read()[-6000:]
        pytest.fail("molecule test -s %s failed (rc=%d); full log %s\n%s"
                    % (scenario, proc.returncode, log_path, tail))
