# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fail closed on a broken inventory (issue 18.5).

Ansible warns and goes on when an inventory source cannot be parsed: ``-i`` pointing at nothing
leaves only the implicit localhost (every play on ``all`` matches no host and the run exits 0), and
a file with one typo inside an inventory directory is skipped while its siblings are kept (1 of 3
hosts). ``unparsed_is_failed`` / ``any_unparsed_is_failed`` in ansible.cfg would stop that, but a
user of the installed collection does not have the repository's ansible.cfg. So the entry points
check it themselves, from the inventory manager of the run: every source given must exist and
every file of it that Ansible would read (directories walked the way Ansible walks them, with its
ignore rules) must be among the sources Ansible parsed (``processed_sources``), and the
inventory must hold at least one host. ``problems()`` returns one sentence per broken source.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import console, has_control


def _ignored():
    try:
        from ansible.inventory.manager import IGNORED
    except ImportError:  # pragma: no cover - every ansible-core since 2.4 has it
        return None
    return IGNORED


def _files(path, ignored):
    """The files Ansible's InventoryManager.parse_source() reads for ``path`` (a file or a
    directory, walked in sorted order, skipping the names its IGNORED pattern matches)."""
    if not os.path.isdir(path):
        return [path]
    out = []
    for name in sorted(os.listdir(path)):
        if ignored is not None and ignored.search(os.fsencode(name)):
            continue
        out.extend(_files(os.path.join(path, name), ignored))
    return out


def _norm(path):
    return os.path.normpath(os.path.abspath(os.path.expanduser(str(path))))


def problems(sources, processed, host_count, default_source="/etc/ansible/hosts"):
    """Sentences naming each inventory source that is missing or was not (fully) parsed, and an
    inventory without hosts; [] when the inventory is whole.

    ``sources``: the run's inventory sources (InventoryManager._sources, the -i values);
    ``processed``: InventoryData.processed_sources (the files and host lists Ansible parsed);
    ``host_count``: hosts in the inventory, the implicit localhost not counted."""
    ignored = _ignored()
    done = set(_norm(p) for p in processed or [] if p and "," not in str(p))
    out = []
    for source in sources or []:
        source = str(source)
        if not source or "," in source:       # a host list ("a,b,"): parsed by host_list
            continue
        path = _norm(source)
        if not os.path.exists(path):
            if path == _norm(default_source):
                continue   # Ansible's built-in default, absent: the host count below speaks
            out.append("inventory source %s does not exist: check the -i path (or the inventory "
                       "setting of ansible.cfg)" % ascii(source)[1:-1])
            continue
        missed = [f for f in _files(path, ignored) if _norm(f) not in done]
        for f in missed:
            out.append("inventory source %s could not be parsed by Ansible (see its warning above: "
                       "a syntax error?): its hosts are missing from this run; fix the file"
                       % ascii(f)[1:-1])
    if not out and not host_count:
        shown = ", ".join(ascii(str(s))[1:-1] for s in sources or []) or "(none)"
        out.append("the inventory holds no host (sources: %s): give the fleet's inventory with -i" % shown)
    return out


FILE_CACHES = ("jsonfile", "ansible.builtin.jsonfile", "yaml", "community.general.yaml", "pickle",
               "community.general.pickle")
NAME_MAX = 255 - 16   # a file name, less the cache plugin's prefix (2.19's jsonfile: "s1_" + prefix)


def host_name_problems(names, cache_plugin=None):
    """Host names that Ansible's file-based fact cache (one file per host name) cannot store: past
    NAME_MAX bytes or holding a path separator or NUL. Ansible itself then fails deep in a task
    ("Error while accessing the cache file", or an undefined-variable error on that host), so they
    are named here first, with the fix. [] for other cache plugins (memory, redis, ...)."""
    if str(cache_plugin or "") not in FILE_CACHES:
        return []
    out = []
    for name in names:
        name = str(name)
        size = len(name.encode("utf-8", "surrogateescape"))
        why = ("is %d bytes long" % size if size > NAME_MAX else
               "holds a path separator" if "/" in name or os.sep in name else
               "holds a NUL character" if "\0" in name else None)
        if why:
            shown = ascii(name[:60])[1:-1] + ("..." if len(name) > 60 else "")
            out.append("host name %s %s: the fact cache (fact_caching=%s) keeps one file per host name; "
                       "rename the host in the inventory (its address goes in ansible_host)"
                       % (shown, why, cache_plugin))
    return out


def host_name_warnings(names, shown_max=5):
    """One warning naming the hosts whose names hold a control character (ESC, BEL, a line feed,
    a bidirectional override... safe_text.has_control), escaped; [] when none does. Every console
    line of this collection shows such a name escaped, but Ansible's own output - its task headers
    (``ok: [host]``), failure lines and the PLAY RECAP - prints host names as they are, so the
    characters reach the operator's terminal raw (OSC 52 can write the clipboard, a line feed forges
    a line). Ansible has no setting to escape them: rename the host (docs/trust.md)."""
    bad = [str(n) for n in names if has_control(str(n))]
    if not bad:
        return []
    shown = ", ".join(console(n[:60]) + ("..." if len(n) > 60 else "") for n in bad[:shown_max])
    more = " and %d more" % (len(bad) - shown_max) if len(bad) > shown_max else ""
    return ["%d host name(s) hold control characters: %s%s. Ansible prints host names as they are in its task "
            "headers and PLAY RECAP (this collection's own lines show them escaped): rename the hosts in the "
            "inventory with plain characters (the address goes in ansible_host)" % (len(bad), shown, more)]


def inventory_warnings(inventory):
    """host_name_warnings() for an Ansible InventoryManager."""
    data = getattr(inventory, "_inventory", None)
    return host_name_warnings(list(getattr(data, "hosts", None) or {}))


def inventory_problems(inventory, cache_plugin=None):
    """problems() and host_name_problems() for an Ansible InventoryManager."""
    data = getattr(inventory, "_inventory", None)
    hosts = list(getattr(data, "hosts", None) or {})
    return problems(getattr(inventory, "_sources", []) or [], getattr(data, "processed_sources", []) or [],
                    len(hosts)) + host_name_problems(hosts, cache_plugin)
