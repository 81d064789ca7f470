"""A compromised node for ansible-playbook runs (tests/integration/test_hostile_nodes.py,
test_act_trust.py): a stand-in ``ansible_python_interpreter`` that answers any module with crafted
JSON. Ansible runs it exactly as it runs a node's Python (connection local), so everything on the
controller's side is the real thing. Each run has its own fact cache (ANSIBLE_CACHE_PLUGIN_CONNECTION)
and the repository's ansible.cfg (jsonfile fact cache on)."""
import json
import os
import subprocess
import sys

from testpaths import ROOT  # noqa: E402  (tests/ is on sys.path: conftest)

VENV_BIN = os.path.join(ROOT, ".venv", "bin")

STAND_IN = """#!%s
# stand-in node: answers any module with the crafted result next to this script
import sys
try:
    sys.stdin.read()   # the module (pipelining); nothing of it is run
except Exception:
    pass
with open(%r) as handle:
    sys.stdout.write(handle.read())
"""


class Node(object):
    """A stand-in node in ``base``: ``interpreter`` is its ansible_python_interpreter; answer()
    sets what every module run on it returns."""

    def __init__(self, base, name="node"):
        self.dir = base / name
        self.dir.mkdir()
        self.answer_path = self.dir / "answer.json"
        self.interpreter = self.dir / "python"
        self.interpreter.write_text(STAND_IN % (sys.executable, str(self.answer_path)))
        self.interpreter.chmod(0o755)

    def answer(self, doc, **facts):
        facts["dlrack_hw_gathered"] = doc
        self.answer_path.write_text(json.dumps({"changed": False, "dlrack_hw": doc, "ansible_facts": facts}))


def playbook(tmp_path, name, inventory, *extra, cache="jsonfile"):
    env = dict(os.environ, ANSIBLE_CACHE_PLUGIN=cache, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"),
               PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", str(inventory),
            os.path.join(ROOT, "playbooks", name), "-e", "dlrack_become=false"]  # an absolute name is kept
    for item in extra:
        argv += ["-e", item]
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=str(tmp_path),
                          timeout=600, check=False, universal_newlines=True)


def inventory(tmp_path, hosts, name="inventory"):
    """An inventory directory with hosts.yml: {host: host vars}."""
    inv = tmp_path / name
    inv.mkdir(parents=True)
    (inv / "hosts.yml").write_text(json.dumps({"all": {"hosts": hosts}}))
    return inv


def node_vars(node, **more):
    more.update(ansible_connection="local", ansible_python_interpreter=str(node.interpreter))
    return more
