"""Every boolean role option that decides a conditional is read through `| bool` (issue 30.10).

An option given on the command line (`-e ecc_monitor_rasdaemon=false`) or in an INI inventory is
the string "false": the role's argument_specs accept it as a bool but leave the variable a string,
so a bare `when: ecc_monitor_rasdaemon` fails on ansible-core 2.19.14 ("Conditional result (True) was
derived from value of type 'str'") and counts as true on 2.16 (a non-empty string): rasdaemon was
installed and started although the operator said false. Module arguments (`x: "{{ opt }}"`) are
converted by the module's own argument spec and are not conditionals; comments are not code."""
import glob
import os
import re

import yaml

from testpaths import ROOT

CONDITIONAL_KEYS = ("when", "failed_when", "changed_when", "until")


def _bool_options(role):
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as fh:
        spec = yaml.safe_load(fh)["argument_specs"]
    return {name for ep in spec.values() for name, opt in (ep.get("options") or {}).items() if opt.get("type") == "bool"}


def _conditionals(node):
    """The conditional expressions of a task file: when/failed_when/changed_when/until values and
    the inline `if` of every templated string."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in CONDITIONAL_KEYS:
                for expr in value if isinstance(value, list) else [value]:
                    if isinstance(expr, str):
                        yield expr
            else:
                yield from _conditionals(value)
    elif isinstance(node, list):
        for item in node:
            yield from _conditionals(item)
    elif isinstance(node, str):
        for expr in re.findall(r"\{\{(.*?)\}\}", node, re.S):
            yield from re.findall(r"\bif\s+(.*?)\s+else\b", expr, re.S)


def bare_uses(role):
    """[(file, expression, option)] where a bool option is used in a conditional without `| bool`."""
    out = []
    options = _bool_options(role)
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", role, "tasks", "*.yml"))):
        with open(path, encoding="utf-8") as fh:
            tasks = yaml.safe_load(fh)
        for expr in _conditionals(tasks):
            for opt in options:
                for m in re.finditer(r"\b%s\b(\s*\|\s*bool\b)?" % re.escape(opt), expr):
                    if not m.group(1):
                        out.append((os.path.relpath(path, ROOT), expr.strip(), opt))
    return out


def test_ecc_monitor_reads_rasdaemon_and_edac_required_as_bools():
    """The two options of the issue: on the old tasks, four bare uses of ecc_monitor_rasdaemon
    (package list, two whens) and one of ecc_monitor_edac_required (failed_when)."""
    assert {"ecc_monitor_rasdaemon", "ecc_monitor_edac_required"} <= _bool_options("ecc_monitor")
    assert bare_uses("ecc_monitor") == []


def test_no_role_uses_a_bool_option_bare_in_a_conditional():
    roles = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
                   for p in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))
    assert "ecc_monitor" in roles and len(roles) >= 5
    assert [u for role in roles for u in bare_uses(role)] == []


def test_the_check_sees_a_bare_use():
    """The scanner itself: a bare when, an inline if and a when list are found; `| bool` is not."""
    tasks = [{"name": "a", "when": "ecc_monitor_rasdaemon or x"},
             {"name": "b", "debug": {"msg": "{{ 1 if ecc_monitor_rasdaemon else 0 }}"}},
             {"name": "c", "when": ["y", "ecc_monitor_edac_required and z"]},
             {"name": "d", "when": "ecc_monitor_rasdaemon | bool", "failed_when": "ecc_monitor_edac_required|bool"}]
    found = list(_conditionals(tasks))
    assert found == ["ecc_monitor_rasdaemon or x", "ecc_monitor_rasdaemon", "y", "ecc_monitor_edac_required and z",
                     "ecc_monitor_rasdaemon | bool", "ecc_monitor_edac_required|bool"]
