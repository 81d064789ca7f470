"""A role option that a role hands to one of the collection's modules is declared like that module's
option (issue 19.1): the same type and choices in the role's meta/argument_specs.yml (every entry
point that lists it) as in the module's DOCUMENTATION, which its action validates with. And a
default written in argument_specs (for ansible-doc and the role's validation) is the value of
defaults/main.yml: the role's default lives in defaults/main.yml, the spec only repeats it.

The role -> module mapping is read from the roles' task files: a module option whose value is
exactly "{{ role_option }}" (or "{{ role_option | bool }}")."""
import glob
import importlib
import os
import re

import yaml

from testpaths import ROOT

_PASS = re.compile(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(\|\s*bool\s*)?\}\}$")
_NOT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*!=\s*'([^']*)'\s*$")   # when: var != 'value'
_PREFIX = "dlrack.node."


def _tasks(node):
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always"):
            yield from _tasks(node.get(key))


def _documented(module):
    try:
        doc = importlib.import_module("ansible_collections.dlrack.node.plugins.modules." + module).DOCUMENTATION
    except ImportError:
        return None
    return yaml.safe_load(doc).get("options") or {}


def _role_specs(role):
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml")) as fh:
        return yaml.safe_load(fh)["argument_specs"]


def _excluded(task):
    """{role option: values with which the task does not run} from its ``when: var != 'value'``."""
    out = {}
    when = task.get("when")
    for cond in when if isinstance(when, list) else [when]:
        match = _NOT.match(cond) if isinstance(cond, str) else None
        if match:
            out.setdefault(match.group(1), set()).add(match.group(2))
    return out


def passed_options():
    """[(role, task file, module, module option, role option, values the task never gets)] of
    every pass-through."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml"))):
        role = path.split(os.sep)[-3]
        with open(path) as fh:
            for task in _tasks(yaml.safe_load(fh)):
                for key, args in task.items():
                    if not key.startswith(_PREFIX) or not isinstance(args, dict):
                        continue
                    for opt, value in args.items():
                        match = _PASS.match(value) if isinstance(value, str) else None
                        if match:
                            out.append((role, os.path.basename(path), key[len(_PREFIX):], opt, match.group(1),
                                        _excluded(task).get(match.group(1), set())))
    return out


def test_the_mapping_is_found():
    found = set((r, m, o, v) for r, _f, m, o, v, _x in passed_options())
    assert ("preflight", "preflight_report", "fail_on", "preflight_fail_on") in found
    assert ("acceptance", "acceptance_report", "fail_on", "acceptance_fail_on") in found
    assert ("preflight", "preflight_report", "report_dir", "preflight_report_dir") in found


def test_role_options_are_declared_like_the_module_options_they_feed():
    wrong = set()
    for role, path, module, opt, var, excluded in passed_options():
        doc = _documented(module)
        if doc is None or opt not in doc:
            continue
        for entry, spec in sorted(_role_specs(role).items()):
            mine = (spec.get("options") or {}).get(var)
            if mine is None:
                continue
            for key, fallback in (("type", "str"), ("choices", None), ("elements", None)):
                theirs, ours = doc[opt].get(key, fallback), mine.get(key, fallback)
                if key == "choices" and theirs is not None:
                    theirs, ours = sorted(theirs), sorted(set(ours or []) - excluded)
                if theirs != ours:
                    wrong.add("roles/%s entry point %s: %s %s is %r; tasks/%s passes it to %s's %s, documented %r"
                              % (role, entry, var, key, ours, path, module, opt, theirs))
    assert not wrong, "\n".join(sorted(wrong))


def test_argument_spec_defaults_are_the_roles_defaults():
    wrong = []
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        role = path.split(os.sep)[-3]
        defaults_file = os.path.join(ROOT, "roles", role, "defaults", "main.yml")
        defaults = {}
        if os.path.exists(defaults_file):
            with open(defaults_file) as fh:
                defaults = yaml.safe_load(fh) or {}
        for entry, spec in sorted(_role_specs(role).items()):
            for var, opt in sorted((spec.get("options") or {}).items()):
                templated = isinstance(defaults.get(var), str) and "{{" in defaults[var]
                if "default" in opt and var in defaults and not templated and defaults[var] != opt["default"]:
                    wrong.append("roles/%s entry point %s: %s default %r, defaults/main.yml %r"
                                 % (role, entry, var, opt["default"], defaults[var]))
    assert not wrong, "\n".join(wrong)
