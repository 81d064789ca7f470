"""Where the tests find the collection, its data and the generated sysfs trees.

Works in both layouts: a checkout bootstrapped by scripts/bootstrap.sh (.collections/ links it as
dlrack.node) and a copy under ansible_collections/dlrack/node (ansible-test units, make sanity).
"""
import atexit
import importlib.util
import os
import shutil
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")


def _collections_path():
    """The folder holding ansible_collections/ from which dlrack.node imports (for PYTHONPATH)."""
    parts = ROOT.split(os.sep)
    if parts[-3:-1] == ["ansible_collections", "dlrack"] and parts[-1] == "node":
        return os.sep.join(parts[:-3])
    bootstrap = os.path.join(ROOT, ".collections")
    if os.path.isdir(os.path.join(bootstrap, "ansible_collections", "dlrack", "node")):
        return bootstrap
    return None


COLLECTIONS = _collections_path()
# The checkout bootstrap.sh set up (.venv with ansible-playbook, .collections linking it), as opposed
# to the copy under ansible_collections/dlrack/node that ansible-test units runs (make units-ansible-test).
BOOTSTRAPPED = COLLECTIONS == os.path.join(ROOT, ".collections") and os.path.isdir(os.path.join(ROOT, ".venv", "bin"))


def needs_checkout(why):
    """Mark a test that needs the bootstrapped checkout itself (runs .venv's ansible-playbook or
    ansible-galaxy, reads .venv/collections...): in any other layout it is reported as skipped with
    this reason, never passed silently. Every other test works in both layouts."""
    import pytest
    return pytest.mark.skipif(not BOOTSTRAPPED, reason="needs the checkout bootstrapped by scripts/bootstrap.sh (.venv, .collections), "
                                                       "not a copy under ansible_collections/dlrack/node: " + why)


def module_pythonpath():
    """PYTHONPATH for running a module file as a script: this collection and the ansible-core
    the tests import (ansible-test units puts it on sys.path, not in site-packages)."""
    import ansible
    return os.pathsep.join([COLLECTIONS, os.path.dirname(os.path.dirname(os.path.abspath(ansible.__file__)))])


_TREES = {}


def sysfs_tree(name):
    """Path of a sysfs/procfs tree built by tests/data/sysfs/build_trees.py (once per run).

    The trees hold ':' in names and dangling symlinks like a real /sys, so they are generated
    into a temporary folder instead of being committed (the collection must build and pass
    ansible-test sanity)."""
    path = os.path.join(_built(), name)
    if not os.path.isdir(path):
        raise LookupError("no sysfs tree %r: build_trees.py builds %s" % (name, sysfs_trees()))
    return path


def sysfs_trees():
    """The names of every tree build_trees.py builds (for parametrize; sysfs_tree(name) is its path)."""
    return sorted(os.listdir(_built()))


def _built():
    if "out" not in _TREES:
        out = tempfile.mkdtemp(prefix="dlrack-sysfs-")
        atexit.register(shutil.rmtree, out, True)
        script = os.path.join(DATA, "sysfs", "build_trees.py")
        spec = importlib.util.spec_from_file_location("dlrack_build_trees", script)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mod.build_all(out)
        _TREES["out"] = out
    return _TREES["out"]


def tracked_copy(dest):
    """Copy the files git would commit (tracked and new, not ignored; uncommitted edits included,
    deleted files left out) to dest: a clean clone of the working tree, without .venv, reports..."""
    import subprocess
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         stdout=subprocess.PIPE, check=True).stdout.decode()
    for rel in filter(None, out.split("\0")):
        path = os.path.join(ROOT, rel)
        if not os.path.lexists(path):
            continue
        os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(path, os.path.join(dest, rel), follow_symlinks=False)
    return dest


def build_collection(workdir, env):
    """ansible-galaxy collection build from a clean copy of the working tree; the tarball's path."""
    import subprocess
    src = tracked_copy(os.path.join(workdir, "src"))
    out = os.path.join(workdir, "dist")
    proc = subprocess.run(["ansible-galaxy", "collection", "build", "--output-path", out], cwd=src, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    if proc.returncode != 0:
        raise AssertionError("ansible-galaxy collection build failed:\n" + proc.stdout)
    return os.path.join(out, os.listdir(out)[0])
