"""Lint gates run inside the one pytest session of `make test`: ansible-lint (production
profile, see .ansible-lint) and yamllint (see .yamllint) over the whole collection."""
import os
import subprocess

import pytest

from testpaths import ROOT  # noqa: E402  (tests/ is on sys.path: conftest)
BIN = os.path.join(ROOT, ".venv", "bin")


def _run(argv):
    env = dict(os.environ)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(ROOT, ".collections")
    env["NO_COLOR"] = "1"
    # Not ~/.ansible: ansible-lint also resolves collections from ANSIBLE_HOME/collections, and a
    # copy of dlrack.node installed there earlier (an older ansible-galaxy install) shadowed this
    # checkout: its new modules were "couldn't resolve module/action" (seen with node_code).
    env["ANSIBLE_HOME"] = os.path.join(ROOT, ".cache", "lint-ansible-home")
    os.makedirs(env["ANSIBLE_HOME"], exist_ok=True)
    return subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=1200, check=False)


@pytest.mark.lint
def test_yamllint_clean():
    proc = _run(["yamllint", "--strict", "."])
    assert proc.returncode == 0, proc.stdout[-8000:]


@pytest.mark.lint
def test_ansible_lint_production_profile_clean():
    proc = _run(["ansible-lint", "--profile", "production", "--offline"])
    assert proc.returncode == 0, proc.stdout[-8000:]
