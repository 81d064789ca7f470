"""playbooks/callback_plugins/dlrack_node_drift.py: the drift recorder that Ansible loads next to
drift.yml without configuration (issue 20.2). It is the collection's dlrack.node.drift callback,
needs no enabling, and stays inactive when callbacks_enabled names dlrack.node.drift too (then
that instance records), so one run never has two recorders writing the same file."""
import importlib.util
import os

import pytest
from ansible import constants as C

from ansible_collections.dlrack.node.plugins.callback.drift import CallbackModule as Recorder
from testpaths import ROOT

SHIM = os.path.join(ROOT, "playbooks", "callback_plugins", "dlrack_node_drift.py")


def _shim():
    spec = importlib.util.spec_from_file_location("dlrack_node_drift_under_test", SHIM)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.CallbackModule


def test_the_adjacent_recorder_is_the_collection_callback_without_enabling():
    cls = _shim()
    assert issubclass(cls, Recorder) and cls.CALLBACK_NEEDS_ENABLED is False and Recorder.CALLBACK_NEEDS_ENABLED is True
    assert cls.CALLBACK_TYPE == "aggregate"   # never replaces the user's stdout callback


@pytest.mark.parametrize("enabled, disabled", [
    ([], False), (None, False), (["ansible.posix.profile_tasks"], False),
    (["dlrack.node.drift"], True), (["ansible.posix.timer", "dlrack.node.drift"], True)])
def test_it_steps_aside_when_the_collection_callback_is_enabled(monkeypatch, enabled, disabled):
    monkeypatch.setattr(C, "CALLBACKS_ENABLED", enabled)
    assert _shim()().disabled is disabled
