# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Misspelled variables are not silently ignored (issue 30.6).

A variable with one of the collection's prefixes (``dlrack_``, and each role's name: ``preflight_``,
``storage_tiers_``, ``acceptance_``, ...) that the operator set (extra vars, the inventory) but that
no role or playbook of the collection reads is most likely a misspelling - ``dlrack_failon`` for
``dlrack_fail_on``, ``acceptance_hot_pth`` for ``acceptance_hot_path`` - and would change nothing
without a word. The entry points warn about each one once per run (the inventory_check action, the
first task of preflight.yml, drift.yml, acceptance.yml and site.yml), naming the closest known
name (difflib).

The known names are computed from the installed collection itself, not kept in a list: every
option of every role's ``meta/argument_specs.yml``, the keys of its ``defaults/`` and ``vars/``
files, and every name with one of the prefixes that the roles' tasks, handlers and templates, the
playbooks and the controller and node code (``plugins/``) spell out.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_WARNINGS = 20     # names warned about in one run, at most (the rest are counted in the last one)
_SELF = os.path.abspath(__file__).replace(".pyc", ".py")
_SCANNED = (("playbooks", (".yml", ".yaml")), ("roles", (".yml", ".yaml", ".j2")), ("plugins", (".py", ".yml")))


def _read(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (IOError, OSError, UnicodeDecodeError):
        return ""


def _yaml(path):
    try:
        doc = yaml.load(_read(path), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # nosec: a safe loader
    except yaml.YAMLError:
        return None
    return doc


def prefixes(root=ROOT):
    """("dlrack_", "<role>_" for every role of the collection)."""
    roles_dir = os.path.join(root, "roles")
    roles = sorted(d for d in os.listdir(roles_dir) if os.path.isdir(os.path.join(roles_dir, d))) if os.path.isdir(roles_dir) else []
    return ("dlrack_",) + tuple(r + "_" for r in roles)


def _role_names(role_dir):
    names = set()
    spec = _yaml(os.path.join(role_dir, "meta", "argument_specs.yml"))
    for entry in ((spec or {}).get("argument_specs") or {}).values() if isinstance(spec, dict) else ():
        if isinstance(entry, dict) and isinstance(entry.get("options"), dict):
            names.update(entry["options"])
    for sub in ("defaults", "vars"):
        folder = os.path.join(role_dir, sub)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
            doc = _yaml(os.path.join(folder, name)) if name.endswith((".yml", ".yaml")) else None
            if isinstance(doc, dict):
                names.update(k for k in doc if isinstance(k, str))
    return names


_CACHE = {}
_WORD = re.compile(r"[A-Za-z0-9_]*")


def _tokens(text, pre, out):
    """Add to ``out`` every name in ``text`` that starts with one of ``pre`` at a word boundary (a
    find per prefix, then one short match: 4x faster than one regex over the whole text)."""
    for prefix in pre:
        i = text.find(prefix)
        while i >= 0:
            if i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"):
                name = (prefix + _WORD.match(text, i + len(prefix)).group()).rstrip("_")
                if len(name) > len(prefix):
                    out.add(name)
            i = text.find(prefix, i + 1)


def known_names(root=ROOT):
    """The variable names the collection knows (see the module's docstring), once per process."""
    if root in _CACHE:
        return _CACHE[root]
    pre = prefixes(root)
    names = set()
    roles_dir = os.path.join(root, "roles")
    for role in sorted(os.listdir(roles_dir)) if os.path.isdir(roles_dir) else ():
        if os.path.isdir(os.path.join(roles_dir, role)):
            names.update(_role_names(os.path.join(roles_dir, role)))
    for top, exts in _SCANNED:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(exts) and os.path.join(folder, name) != _SELF:   # (this file names misspellings)
                    _tokens(_read(os.path.join(folder, name)), pre, names)
    _CACHE[root] = frozenset(n for n in names if n.startswith(pre))
    return _CACHE[root]


def families():
    """Names the collection makes up at run time, so no file spells them: the pre-flight's
    per-slice artifact ``dlrack_preflight_slice_<16 hex>`` (report_merge.slice_key), which an AWX
    workflow hands every later job node as an extra variable."""
    from ansible_collections.dlrack.node.plugins.plugin_utils.report_merge import SLICE_PREFIX
    return (re.compile("^%s[0-9a-f]{16}$" % re.escape(SLICE_PREFIX)),)


def unknown_variables(names, known=None, pre=None):
    """[(name, closest known name or None)] for every name of ``names`` with one of the
    collection's prefixes that the collection does not know, sorted."""
    known = known_names() if known is None else known
    pre = prefixes() if pre is None else pre
    made_up = families()
    out = []
    for name in sorted(set(n for n in names if isinstance(n, str))):
        if not name.startswith(pre) or name in known or not NAME_RE.match(name) or any(f.match(name) for f in made_up):
            continue
        same_prefix = [k for k in known if k.startswith(tuple(p for p in pre if name.startswith(p)))]
        close = difflib.get_close_matches(name, same_prefix or known, n=1, cutoff=0.6)
        out.append((name, close[0] if close else None))
    return out


def warnings_for(found, where="extra vars or the inventory"):
    """One sentence per unknown variable (at most MAX_WARNINGS, then one that counts the rest)."""
    out = []
    for name, close in found[:MAX_WARNINGS]:
        out.append("dlrack.node: the variable %s is set (%s) but no role or playbook of dlrack.node reads it, so it "
                   "changes nothing%s" % (name, where, "; did you mean %s?" % close if close else
                                          "; docs/roles.md lists every role variable"))
    if len(found) > MAX_WARNINGS:
        out.append("dlrack.node: %d more variable(s) with the collection's prefixes that nothing reads: %s"
                   % (len(found) - MAX_WARNINGS, ", ".join(n for n, dummy in found[MAX_WARNINGS:MAX_WARNINGS + 20])))
    return out


def inventory_variable_names(inventory, extra_vars=None, loader=None):
    """The names of the variables the operator set: extra vars, and the variables of every group
    and host of the inventory - those of the inventory sources and those the vars plugins
    (group_vars/, host_vars/ next to the inventory) give. One pass over groups and hosts."""
    names = set(extra_vars or ())
    entities = []
    for group in (getattr(inventory, "groups", None) or {}).values():
        names.update(group.get_vars())
        entities.append(group)
    for host in (getattr(inventory, "hosts", None) or {}).values():
        names.update(host.get_vars())
        entities.append(host)
    if loader is not None and entities:
        try:
            from ansible.vars.plugins import get_vars_from_inventory_sources
            for stage in ("inventory", "task"):
                names.update(get_vars_from_inventory_sources(loader, inventory._sources, entities, stage) or ())
        except Exception:  # pylint: disable=broad-except  # another ansible-core: the inventory's own variables only
            pass
    return names
