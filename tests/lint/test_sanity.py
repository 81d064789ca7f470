"""ansible-test sanity inside the one pytest session of `make test`: `make sanity` copies the files
git would commit under ansible_collections/dlrack/node and runs every sanity test that can run
here (shellcheck comes from apt, scripts/test-deps.sh)."""
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.lint
@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, ".git")), reason="make sanity copies the files git tracks")
def test_ansible_test_sanity_clean():
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["PATH"] = os.path.join(ROOT, ".venv", "bin") + os.pathsep + env.get("PATH", "")
    proc = subprocess.run(["./scripts/sanity.sh"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=1800, check=False)
    noise = ("  ", "Collecting", "Downloading", "Installing", "Successfully", "Looking in", "WARNING: Location")
    report = "\n".join(line for line in proc.stdout.splitlines() if not line.startswith(noise))
    assert proc.returncode == 0, report[-8000:]
    for test in ("pylint", "pep8", "validate-modules", "shellcheck", "no-illegal-filenames", "symlinks", "import"):
        assert 'Running sanity test "%s"' % test in proc.stdout, test
    assert "Skipping" not in proc.stdout      # every test ran: none skipped for a missing tool
