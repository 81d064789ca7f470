# -*- coding: utf-8 -*-
"""Node-side Python ships one way (docs/node_code.md): module_utils files installed by dlrack.node.node_code.

Every file a role lists exists, each list is import-closed, everything else imported is standard
library, the files parse as Python 3.6, and the layout works from an *installed* collection
(ansible-galaxy build + install): a bare interpreter with only <lib> on its path imports
dlrack_affinity and the ECC collector.
"""
import ast
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from nodelib import NODE_ROLES, ROOT, install_node_lib, module_utils_files
from testpaths import needs_checkout

COLLECTION_PREFIX = "ansible_collections.dlrack.node.plugins.module_utils"
STDLIB = frozenset(sys.stdlib_module_names)


def _imports(path):
    """(module, names) of every import statement in a file."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module, tuple(a.name for a in node.names)


def _as_file(module):
    """ansible_collections...module_utils.hw.parsers.nvidia_smi -> parsers/nvidia_smi.py."""
    rel = module[len(COLLECTION_PREFIX):].lstrip(".").replace(".", "/")
    src = os.path.join(ROOT, "plugins", "module_utils", rel)
    return rel + "/__init__.py" if os.path.isdir(src) else rel + ".py"


LIB_DIR_VAR = {"ecc_monitor": "ecc_monitor_lib_dir", "gpu_affinity": "gpu_affinity_lib_dir",
               "scheduler": "scheduler_health_check_lib_dir"}


def _tasks(role):
    """Every task of a role's tasks/*.yml, blocks flattened."""
    found = []

    def walk(items):
        for task in items or []:
            found.append(task)
            for key in ("block", "rescue", "always"):
                walk(task.get(key))
    tasks_dir = os.path.join(ROOT, "roles", role, "tasks")
    for name in sorted(os.listdir(tasks_dir)):
        with open(os.path.join(tasks_dir, name)) as f:
            walk(yaml.safe_load(f))
    return found


@pytest.mark.parametrize("role", NODE_ROLES)
def test_role_installs_its_list_from_the_collection_in_one_node_code_task(role):
    """The role's list goes to its lib dir through dlrack.node.node_code (one module run; the
    action reads the files from the collection's plugins/module_utils), never file by file."""
    ships = [t for t in _tasks(role) if "dlrack.node.node_code" in t]
    assert len(ships) == 1, "roles/%s: one dlrack.node.node_code task" % role
    args = ships[0]["dlrack.node.node_code"]
    assert args == {"files": "{{ __%s_module_utils }}" % role, "lib_dir": "{{ %s }}" % LIB_DIR_VAR[role]}
    for task in _tasks(role):
        copy = task.get("ansible.builtin.copy") or {}
        assert "module_utils" not in str(copy.get("src", "")), "roles/%s copies module_utils file by file" % role
    for name in module_utils_files(role):
        assert os.path.isfile(os.path.join(ROOT, "plugins", "module_utils", name)), name
    # no collection code kept as a copy inside the role
    files = os.path.join(ROOT, "roles", role, "files")
    for name in os.listdir(files) if os.path.isdir(files) else []:
        if name.endswith(".py"):
            assert os.path.getsize(os.path.join(files, name)) < 1200, "%s/files/%s: code belongs in module_utils" % (role, name)


@pytest.mark.parametrize("role", NODE_ROLES)
def test_each_list_is_import_closed_stdlib_only_and_python36(role):
    listed = set(module_utils_files(role))
    for name in sorted(listed):
        path = os.path.join(ROOT, "plugins", "module_utils", name)
        with open(path) as f:
            ast.parse(f.read(), path, feature_version=(3, 6))
        for module, names in _imports(path):
            if module == "__future__":
                continue
            if module.startswith(COLLECTION_PREFIX):
                targets = [_as_file(module)]
                if module == COLLECTION_PREFIX:          # from ...module_utils import gpu_bind
                    targets = [n + ".py" for n in names]
                for t in targets:
                    assert t in listed, "%s imports %s: add %s to roles/%s/vars/main.yml" % (name, module, t, role)
            else:
                assert module.split(".")[0] in STDLIB, "%s imports %s, not in the standard library" % (name, module)


def test_alias_module_parses_as_python36():
    path = os.path.join(ROOT, "roles", "gpu_affinity", "files", "dlrack_affinity.py")
    with open(path) as f:
        ast.parse(f.read(), path, feature_version=(3, 6))


def _bare_python(lib, code):
    """Run code in an interpreter that sees only the standard library and <lib>."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": lib}
    return subprocess.run([sys.executable, "-S", "-c", code], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, env=env, timeout=60, check=False)


def test_import_fails_without_lib_and_works_with_it(node_lib, tmp_path):
    code = ("import dlrack_affinity as d, pickle;"
            "from ansible_collections.dlrack.node.plugins.module_utils.ecc import metrics as ecc_metrics;"
            "p = pickle.loads(pickle.dumps(d.WorkerPinner(split=True, cpus='0-3')));"
            "print(d.__name__, d.__file__.startswith(%r), p.cpus, callable(ecc_metrics.main))"
            % node_lib)
    r = _bare_python(str(tmp_path / "empty"), code)
    assert r.returncode == 1 and "No module named 'dlrack_affinity'" in r.stderr
    r = _bare_python(node_lib, code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [COLLECTION_PREFIX + ".programs.gpu_bind", "True", "[0,", "1,", "2,", "3]", "True"]


@pytest.mark.skipif(not shutil.which("ansible-galaxy", path=os.path.dirname(sys.executable)),
                    reason="ansible-galaxy of this venv")
@needs_checkout("ansible-galaxy of .venv builds and installs the collection")   # the innermost mark's reason is the one shown
def test_layout_works_from_an_installed_collection(tmp_path):
    """An installed collection has every listed file in the plugins/module_utils beside the
    node_code action (which reads them there), and a node lib built from it imports."""
    src = tmp_path / "src"
    src.mkdir()
    for item in ("galaxy.yml", "meta", "plugins", "roles"):
        s = os.path.join(ROOT, item)
        if os.path.isdir(s):
            shutil.copytree(s, str(src / item), ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(s, str(src / item))
    galaxy = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")
    env = dict(os.environ)
    subprocess.run([galaxy, "collection", "build", "--output-path", str(tmp_path / "out"), str(src)],
                   check=True, stdout=subprocess.PIPE, env=env)
    tarball = [f for f in os.listdir(str(tmp_path / "out")) if f.endswith(".tar.gz")][0]
    subprocess.run([galaxy, "collection", "install", "--no-deps", "--force", "-p", str(tmp_path / "inst"),
                    str(tmp_path / "out" / tarball)], check=True, stdout=subprocess.PIPE, env=env)
    installed = str(tmp_path / "inst" / "ansible_collections" / "dlrack" / "node")
    # the node_code action reads plugins/module_utils next to its own plugins/action
    assert os.path.isfile(os.path.join(installed, "plugins", "action", "node_code.py"))
    for role in NODE_ROLES:
        mu = os.path.join(installed, "plugins", "module_utils")
        for name in module_utils_files(role, installed):
            assert os.path.isfile(os.path.join(mu, name)), (role, name)
    lib = install_node_lib(str(tmp_path / "lib"), root=installed)
    r = _bare_python(lib, "import dlrack_affinity as d; print(d.split_cpus([0, 1, 2, 3], 2, 1, '/nonexistent'))")
    assert r.returncode == 0 and r.stdout.strip() == "[2, 3]", r.stderr
