"""Every controller-side action validates its options against its module's DOCUMENTATION (issue 19.1):
the options it accepts, their types, elements, defaults and required flags are the documented ones,
and a value outside an option's documented choices is refused while each documented choice passes.

The actions run for real (their run(), on a stand-in task: none needs a connection), and what they
validate with is read where Ansible validates - ArgumentSpecValidator.validate is wrapped to record
each spec and result - so the test sees the spec an action uses, however the action builds it. The
documentation is read here on its own (yaml), not through the collection's converter."""
import importlib
from unittest import mock

import pytest
import yaml
from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.playbook.play_context import PlayContext

ACTIONS = ("preflight_report", "acceptance_report", "report_merge", "scheduler_plan")
PKG = "ansible_collections.dlrack.node.plugins"
_KEYS = ("type", "elements", "default", "required")   # and choices, checked below
# A value each type accepts, for the required options (and for the choices runs).
_SAMPLE = {"list": ["x"], "str": "x", "path": "/nonexistent/x", "dict": {}, "bool": False, "int": 1, "float": 1.0}


def _doc_options(name):
    return yaml.safe_load(importlib.import_module("%s.modules.%s" % (PKG, name)).DOCUMENTATION)["options"]


def _minimal(options):
    args = {}
    for opt, doc in options.items():
        if doc.get("required"):
            args[opt] = doc["choices"][0] if "choices" in doc else _SAMPLE[doc.get("type", "str")]
    if "hosts" in options:
        args["hosts"] = []
    if "select_only" in options:
        args["select_only"] = True   # preflight_report: settle the settings and stop (no report written)
    return args


def _run(name, args):
    """Run action ``name`` on ``args``; returns ([(spec, result) of every validation], the exception)."""
    module = importlib.import_module("%s.action.%s" % (PKG, name))
    seen = []
    original = ArgumentSpecValidator.validate

    def recording(self, parameters, *a, **kw):
        result = original(self, parameters, *a, **kw)
        seen.append((self.argument_spec, result))
        return result

    task = mock.MagicMock(args=args, async_val=0, check_mode=False, diff=False)
    action = module.ActionModule(task, mock.MagicMock(), PlayContext(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    error = None
    with mock.patch.object(ArgumentSpecValidator, "validate", recording):
        try:
            action.run(task_vars={"hostvars": {}, "inventory_hostname": "localhost"})
        except AnsibleActionFail as exc:
            error = exc
    return seen, error


@pytest.mark.parametrize("name", ACTIONS)
def test_action_validates_with_its_documented_options(name):
    options = _doc_options(name)
    given = _minimal(options)
    seen, _error = _run(name, given)
    assert seen, "%s validated nothing with Ansible's ArgumentSpecValidator" % name
    spec, result = seen[0]
    assert sorted(spec) == sorted(options), "%s accepts other options than its DOCUMENTATION" % name
    for opt, doc in options.items():
        for key in _KEYS:
            documented = doc.get(key, {"type": "str", "required": False}.get(key))
            used = spec[opt].get(key, {"type": "str", "required": False}.get(key))
            assert used == documented, "%s option %s: %s is %r in the action, %r in DOCUMENTATION" % (
                name, opt, key, used, documented)
        if "default" in doc and "choices" not in doc and opt not in given:
            assert result.validated_parameters[opt] == doc["default"], (name, opt)
    assert not result.error_messages, result.error_messages
    for opt, doc in options.items():
        # preflight_report checks fail_on's choices once the run's value is settled (a later validation)
        used = [sorted(s[opt]["choices"]) for s, _r in seen if opt in s and "choices" in s[opt]]
        if "choices" in doc:
            assert used and all(c == sorted(doc["choices"]) for c in used), (name, opt, used, doc["choices"])
        else:
            assert not used, (name, opt, used)


@pytest.mark.parametrize("name", ACTIONS)
def test_an_undocumented_option_is_refused(name):
    args = dict(_minimal(_doc_options(name)), no_such_option=1)
    _seen, error = _run(name, args)
    assert error is not None and "no_such_option" in str(error)


def _choice_cases():
    for name in ACTIONS:
        for opt, doc in sorted(_doc_options(name).items()):
            if "choices" in doc:
                yield name, opt, doc


@pytest.mark.parametrize("name, opt, doc", list(_choice_cases()), ids=lambda v: v if isinstance(v, str) else "")
def test_documented_choices_are_the_accepted_ones(name, opt, doc):
    options = _doc_options(name)
    _seen, error = _run(name, dict(_minimal(options), **{opt: "no-such-choice"}))
    assert error is not None and opt in str(error) and "no-such-choice" in str(error), (name, opt, error)
    for choice in doc["choices"]:
        seen, error = _run(name, dict(_minimal(options), **{opt: choice}))
        assert all(not result.error_messages for _spec, result in seen), (name, opt, choice, seen)
        assert error is None or opt not in str(error), (name, opt, choice, error)
    if "default" in doc:
        seen, _error = _run(name, _minimal(options))
        assert seen[-1][1].validated_parameters.get(opt, doc["default"]) == doc["default"]
