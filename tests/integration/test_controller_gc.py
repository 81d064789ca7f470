"""The preflight_report action freezes the controller's heap (gc.freeze) when ansible-playbook
loads it: checked in a real ansible-playbook run by a callback that reads the main process's
garbage collector at the end of the run. The figures it buys are in benchmarks/RESULTS.md."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Reads the garbage collector of ansible-playbook's main process (callbacks run there) when the
# run ends, and what the first play's first host got: the verdict must not depend on it.
_PROBE = '''
import gc, json, os
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gc_probe"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        self._at_start = gc.get_freeze_count()

    def v2_playbook_on_stats(self, stats):
        with open(os.environ["GC_PROBE_OUT"], "w") as fh:
            json.dump({"pid": os.getpid(), "at_start": self._at_start, "at_end": gc.get_freeze_count(),
                       "failures": sorted(stats.failures)}, fh)
'''


def _run(tmp_path, playbook, env_extra=None):
    cb = tmp_path / "cb"
    cb.mkdir(exist_ok=True)
    (cb / "gc_probe.py").write_text(_PROBE)
    out = tmp_path / "probe.json"
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), ANSIBLE_CALLBACK_PLUGINS=str(cb),
               ANSIBLE_CALLBACKS_ENABLED="gc_probe", GC_PROBE_OUT=str(out), ANSIBLE_NOCOLOR="1")
    env.pop("DLRACK_GC_FREEZE", None)
    env.update(env_extra or {})
    proc = subprocess.run(
        [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), os.path.join(ROOT, playbook),
         "-i", os.path.join(ROOT, "inventories", "example"), "-e", "dlrack_report_dir=%s" % (tmp_path / "reports")],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    return proc, json.loads(out.read_text())


@pytest.mark.parametrize("setting, frozen", [(None, True), ("false", False), ("0", False), ("true", True)])
def test_preflight_freezes_the_controller_heap_unless_told_not_to(tmp_path, setting, frozen):
    proc, probe = _run(tmp_path, "playbooks/preflight.yml", None if setting is None else {"DLRACK_GC_FREEZE": setting})
    # The example fleet fails (5 hosts), once, the same way whether or not the heap was frozen.
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert probe["failures"] == ["gpu-b01"]
    assert probe["at_start"] == 0
    if frozen:
        # the inventory and everything else ansible-playbook held when it loaded the action
        assert probe["at_end"] > 10000
    else:
        assert probe["at_end"] == 0
    assert json.loads((tmp_path / "reports" / "report.json").read_text())["summary"]["fail"] == 5


def test_a_playbook_without_the_action_is_left_alone(tmp_path):
    proc, probe = _run(tmp_path, "benchmarks/noop.yml")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert probe["at_end"] == 0


_IMPORT = '''
import gc, json, sys
from ansible import context
from ansible.module_utils.common.collections import ImmutableDict
if sys.argv[1] == "cli":
    context.CLIARGS = ImmutableDict(verbosity=0)   # what an Ansible command line sets after parsing
from ansible_collections.dlrack.node.plugins.action import preflight_report
print(json.dumps([preflight_report.CONTROLLER_HEAP_FROZEN, gc.get_freeze_count() > 0]))
'''


@pytest.mark.parametrize("how, setting, expected", [
    ("cli", None, [True, True]),
    ("cli", "off", [False, False]),
    ("library", None, [False, False]),      # imported by a test or a program: never
])
def test_only_an_ansible_command_line_is_frozen(how, setting, expected):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, ".collections"))
    env.pop("DLRACK_GC_FREEZE", None)
    if setting is not None:
        env["DLRACK_GC_FREEZE"] = setting
    out = subprocess.run([sys.executable, "-c", _IMPORT, how], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, check=True).stdout
    assert json.loads(out) == expected
