# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host lists in Slurm's hostlist form: ``gpu-[001-120,200],login1`` for 121 GPU nodes and a login node.

The one implementation: the reports (plugin_utils/hostlist.py re-exports it) and the scontrol calls
(scheduler/slurm.py, on the admin host and in the node's own health check) use it. Standard library
only, Python 3.6+.

The form is the one Slurm documents for its hostlist functions (Slurm::Hostlist(3pm), e.g.
https://manpages.ubuntu.com/manpages/noble/man3/Slurm::Hostlist.3pm.html, and
slurm_hostlist_create(3)): "one or more hostnames or bracketed hostlists separated by either ','
or whitespace. A bracketed hostlist is denoted by a common prefix followed by a list of numeric
ranges contained within brackets: e.g. tux[0-5,12,20-25]". A range keeps the zero padding of its
lower bound (``[001-120]`` is 001 ... 120; ``[8-10]`` is 8, 9, 10), as Slurm pads every number of a
range to the width of the range's lower bound.

compress() writes that form and expand() reads it back; expand(compress(names)) is the sorted,
de-duplicated names. Only the digits at the end of a name are ranged (the documented "prefix
followed by ranges"); a name whose trailing digits are absent, longer than MAX_DIGITS, or that
holds a character the form uses itself (``[ ] ,`` or whitespace) is written as it is and is not
ranged (it could not be read back otherwise: such names only reach the report from a hostile
inventory, and the report lists every name in full next to the compressed form).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

MAX_DIGITS = 18          # longer digit runs are part of the name, never a number to range over
_TRAILING = re.compile(r"^(.*?)(\d+)$", re.S)
_SPECIAL = re.compile(r"[\[\],\s]")
_ITEM = re.compile(r"([^\s,\[\]]*)\[([^\]]*)\]|([^\s,\[\]]+)")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


class HostlistError(ValueError):
    """A hostlist expression that does not follow the documented syntax."""


def _split(name):
    """(prefix, number, width) of a name that can be ranged, else None."""
    if _SPECIAL.search(name):
        return None
    m = _TRAILING.match(name)
    if m is None or len(m.group(2)) > MAX_DIGITS:
        return None
    return m.group(1), int(m.group(2)), len(m.group(2))


def _ranges(numbers):
    """'001-120,200' from [(number, digits as written)] sorted by number: a run goes on while the
    next number is one more and is written as the run's lower bound pads it."""
    out = []
    lo = prev = None
    width = 0
    for n, text in numbers:
        if lo is not None and n == prev + 1 and text == str(n).zfill(width):
            prev = n
            continue
        if lo is not None:
            out.append((lo, prev, width))
        lo = prev = n
        width = len(text)
    if lo is not None:
        out.append((lo, prev, width))
    return ",".join(str(a).zfill(w) if a == b else "%s-%s" % (str(a).zfill(w), str(b).zfill(w)) for a, b, w in out)


def compress(names):
    """``names`` (any iterable of strings) in Slurm's hostlist form, sorted and de-duplicated:
    names with the same prefix share one bracket, ``prefix[ranges]``; a prefix with one name is
    written plainly (``login1``, not ``login[1]``)."""
    groups = {}       # prefix -> {(number, digits)}
    plain = set()
    for name in names:
        name = name if isinstance(name, str) else str(name)
        part = _split(name)
        if part is None:
            plain.add(name)
        else:
            groups.setdefault(part[0], set()).add((part[1], str(part[1]).zfill(part[2])))
    items = [(name, name) for name in plain]
    for prefix, members in groups.items():
        if len(members) == 1:
            only = prefix + next(iter(members))[1]
            items.append((only, only))
            continue
        # Numbers written with different paddings (node1 and node01) never share a range: each
        # padding width is a run of its own (a number without padding joins the width it has,
        # so n08, n09, n10 is n[08-10]); all stay within one bracket.
        padded = {len(t) for dummy, t in members if len(t) > 1 and t[0] == "0"}
        ordered = sorted(members, key=lambda m: (len(m[1]) if len(m[1]) in padded else 0, m[0]))
        items.append((prefix + min(members)[1], "%s[%s]" % (prefix, _ranges(ordered))))
    return ",".join(text for dummy, text in sorted(items, key=lambda i: _sort_key(i[0])))


def _sort_key(name):
    part = _split(name)
    return (part[0], part[1], part[2]) if part else (name, -1, 0)


def expand(expression):
    """Every host name of a hostlist expression, in the order written (``tux[0-2],a`` ->
    ``["tux0", "tux1", "tux2", "a"]``). HostlistError for what the documented syntax does not
    allow (an unclosed bracket, a range that runs backwards, a bound that is not a number)."""
    out = []
    text = expression.strip()
    pos = 0
    while pos < len(text):
        if text[pos] in ", \t\r\n":
            pos += 1
            continue
        m = _ITEM.match(text, pos)
        if m is None or m.end() == pos:
            raise HostlistError("hostlist %r: cannot read from position %d (%r)" % (expression, pos, text[pos:pos + 20]))
        if m.group(3) is not None:
            out.append(m.group(3))
        else:
            prefix = m.group(1)
            for part in m.group(2).split(","):
                r = _RANGE.match(part.strip())
                if r is None:
                    raise HostlistError("hostlist %r: %r is not a number or a range a-b" % (expression, part))
                lo_text, hi_text = r.group(1), r.group(2) or r.group(1)
                lo, hi = int(lo_text), int(hi_text)
                if hi < lo:
                    raise HostlistError("hostlist %r: range %s runs backwards" % (expression, part))
                out.extend(prefix + str(n).zfill(len(lo_text)) for n in range(lo, hi + 1))
        pos = m.end()
        if pos < len(text) and text[pos] not in ", \t\r\n":
            raise HostlistError("hostlist %r: expected ',' or whitespace at position %d" % (expression, pos))
    return out
