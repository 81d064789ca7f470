"""ansible-test units inside the one pytest session of `make test` (issue 34.6): the unit tests run
from a copy under ansible_collections/dlrack/node, the layout collection CI and ansible-test use,
where there is no .venv, no .collections and no ../shared, and where ansible-test's module_utils
and modules groups cannot import controller code (ansible.plugins).

The whole of tests/unit there is `make units-ansible-test` (2,857 tests, 10.4 to 17 min on this
shared 2-core machine: too much for CI's 45 minutes on top of the plain run of the same tests;
this part: 568 tests of 30 files, 3.2 min).
This test runs the files whose outcome can depend on where the collection lies: every test of
plugins/modules (modules run as scripts) and each file that starts processes or takes checkout
paths from testpaths (ROOT, COLLECTIONS, module_pythonpath, needs_checkout). What the layout
changes for the other files, the imports the modules and module_utils groups allow, is checked
without running them (test_module_utils_tests_import_no_controller_code)."""
import ast
import glob
import os
import re
import subprocess
from xml.etree import ElementTree

import pytest

from testpaths import ROOT  # noqa: E402  (tests/ is on sys.path: conftest)

UNIT = os.path.join(ROOT, "tests", "unit")
# What ties a test file to the layout: a child process (it does not inherit the collection loader
# of ansible-test's pytest) or a path of the checkout beyond tests/data (DATA and the generated
# sysfs trees are the same files in both layouts).
LAYOUT_BOUND = re.compile(r"sys\.executable|subprocess|\b(ROOT|COLLECTIONS|module_pythonpath|needs_checkout)\b")
# ansible-test runs tests/unit/plugins/{modules,module_utils} with only module_utils, modules and the
# collection loader of ansible-core importable (ansible_test/_internal/commands/units/__init__.py).
GROUP_DIRS = (os.path.join("plugins", "modules"), os.path.join("plugins", "module_utils"))
ALLOWED = re.compile(r"^ansible(\.(module_utils|modules|utils\.collection_loader)\b.*)?$")
PREFIX = "ansible_collections.dlrack.node."


def _unit_tests():
    for top, dirs, files in os.walk(UNIT):
        dirs.sort()
        for name in sorted(files):
            if name.startswith("test_") and name.endswith(".py"):
                yield os.path.relpath(os.path.join(top, name), ROOT)


def layout_bound_tests():
    """tests/unit/... files ansible-test runs inside `make test`."""
    chosen = []
    for rel in _unit_tests():
        with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
            text = fh.read()
        if rel.startswith(os.path.join("tests", "unit", GROUP_DIRS[0], "")) or LAYOUT_BOUND.search(text):
            chosen.append(rel)
    return chosen


def _imports(path):
    """(line, module) of the imports that run when the file is imported (not those inside functions)."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, node.module + "." + alias.name
        else:
            todo.extend(ast.iter_child_nodes(node))


def _source(module):
    """The collection's file of a dotted module name (or a helper of tests/: hwdocs, testpaths...), or
    None (not ours, or a name inside a module)."""
    helper = os.path.join(ROOT, "tests", module + ".py")
    if "." not in module and os.path.isfile(helper):
        return helper
    if not module.startswith(PREFIX):
        return None
    base = os.path.join(ROOT, *module[len(PREFIX):].split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def _forbidden(path, seen):
    """The first chain of imports from path that reaches ansible-core beyond what the group may import."""
    for line, mod in _imports(path):
        if mod.split(".")[0] == "ansible" and not ALLOWED.match(mod):
            return ["%s:%d imports %s" % (os.path.relpath(path, ROOT), line, mod)]
        src = _source(mod)
        if src and src not in seen:
            seen.add(src)
            chain = _forbidden(src, seen)
            if chain:
                return ["%s:%d imports %s" % (os.path.relpath(path, ROOT), line, mod)] + chain
    return []


def test_module_utils_tests_import_no_controller_code():
    """A test under tests/unit/plugins/modules or module_utils that imports, directly or through the
    collection's own files, an action or anything of ansible-core beyond module_utils (ansible.plugins,
    ansible.errors...) fails to import under ansible-test units: that group cannot see them."""
    bad = []
    for rel in _unit_tests():
        if any(rel.startswith(os.path.join("tests", "unit", d, "")) for d in GROUP_DIRS):
            chain = _forbidden(os.path.join(ROOT, rel), set())
            if chain:
                bad.append(" -> ".join(chain))
    assert not bad, "move these tests beside the code they import (tests/unit/plugins/action/...):\n" + "\n".join(bad)


def test_the_selection_covers_the_tests_that_broke():
    chosen = layout_bound_tests()
    for rel in ("tests/unit/plugins/modules/test_packages_missing.py", "tests/unit/plugins/modules/test_acceptance_measure.py",
                "tests/unit/plugins/module_utils/acceptance/test_smallfiles.py", "tests/unit/plugins/plugin_utils/test_report_paths.py",
                "tests/unit/roles/test_node_code.py", "tests/unit/molecule/test_podman_connection.py"):
        assert rel in chosen, rel
    assert len(chosen) < len(list(_unit_tests()))


@pytest.mark.lint
@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, ".git")), reason="make units-ansible-test copies the files git tracks")
def test_ansible_test_units_pass():
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["PATH"] = os.path.join(ROOT, ".venv", "bin") + os.pathsep + env.get("PATH", "")
    targets = layout_bound_tests()
    proc = subprocess.run(["./scripts/sanity.sh", "units"] + targets, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=1800, check=False)
    noise = ("  ", "Collecting", "Downloading", "Installing", "Successfully", "Looking in", "WARNING: Location", "Processing")
    report = "\n".join(line for line in proc.stdout.splitlines() if not line.startswith(noise))
    assert proc.returncode == 0, report[-8000:]
    # every chosen file ran there (ansible-test's JUnit files name each test's module)
    ran = set()
    for path in glob.glob(os.path.join(ROOT, ".cache", "units", "ansible_collections", "dlrack", "node", "tests", "output", "junit", "*.xml")):
        ran.update(case.get("classname") for case in ElementTree.parse(path).getroot().iter("testcase"))
    missing = [rel for rel in targets
               if not any(c == rel[:-3].replace(os.sep, ".") or c.startswith(rel[:-3].replace(os.sep, ".") + ".") for c in ran)]
    assert not missing, "no test of these files ran under ansible-test units:\n" + "\n".join(missing)
