"""The GPU vendors' sysfs trees and hw_facts' root= replay of them: one helper for the AMD, Ascend
and ECC-metrics tests (they had a copy each).

``build(script, tmp_path_factory)`` builds the trees of tests/data/<script> (amd/build_trees.py,
amd/build_real_trees.py, ascend/build_trees.py) into a fresh temporary folder - once per test
module, as each module's fixture did - and returns name -> path. ``replay(root, dest, answers)``
runs gather(root=) on a copy of a tree in which the answered tools exist (usr/bin), each answering
with a captured file (or an (rc, out, err) tuple), every other command with 127."""
import importlib.util
import os
import shutil

from testpaths import DATA  # noqa: E402  (tests/ is on sys.path: conftest)

from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather


def load(script):
    """The module of a tree builder, tests/data/<script>."""
    name = "dlrack_trees_" + script.replace("/", "_").replace(".py", "")
    spec = importlib.util.spec_from_file_location(name, os.path.join(DATA, script))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(script, tmp_path_factory):
    """name -> path of the trees tests/data/<script> builds, in a new temporary folder."""
    out = tmp_path_factory.mktemp(os.path.basename(os.path.dirname(script)) + "-trees")
    load(script).build_all(str(out))
    return lambda name: str(out / name)


class Run(object):
    """Stands in for the vendors' tools: ``answers`` {tool, or "tool subcommand": a captured file's
    path, or an (rc, out, err) tuple}; a command not answered exits 127. ``calls``: [[tool, args...]]."""

    def __init__(self, answers=None):
        self.answers, self.calls = answers or {}, []

    def __call__(self, argv):
        tool = os.path.basename(argv[0])
        self.calls.append([tool] + list(argv[1:]))
        answer = self.answers.get("%s %s" % (tool, argv[1]) if len(argv) > 1 else tool, self.answers.get(tool))
        if answer is None:
            return 127, "", "%s: not found" % argv[0]
        if isinstance(answer, tuple):
            return answer
        with open(answer) as fh:
            return 0, fh.read(), ""


def replay(root, dest, answers=None):
    """gather(root=, subset=["gpus"]) of a copy of ``root`` at ``dest`` in which every tool named in
    ``answers`` (see Run) exists under usr/bin; (gpus, errors, calls)."""
    answers = answers or {}
    shutil.copytree(root, dest, symlinks=True)
    tools = sorted(set(key.split()[0] for key in answers))
    if tools:
        os.makedirs(os.path.join(dest, "usr", "bin"))
    for tool in tools:
        open(os.path.join(dest, "usr", "bin", tool), "w").close()
    run = Run(answers)
    d = gather(root=dest, subset=["gpus"], run_command=run, is_root=False)
    return d["gpus"], d["errors"], run.calls
