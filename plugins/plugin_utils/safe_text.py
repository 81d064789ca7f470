# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Text from hosts and nodes on the operator's console: shown as it is, never acted on.

Host names and node strings (a CPU model, a disk serial, an error a tool printed) can hold
control characters: ESC starts terminal escape sequences (colours, cursor moves, OSC 52 writes
the operator's clipboard), CR and a line feed let a string overwrite or forge a console line
(``PASS  host``), BEL, C1 controls (U+0080-U+009F, 8-bit CSI/OSC) act on some terminals,
and bidirectional overrides (U+202A-U+202E, U+2066-U+2069) reorder what is shown. console()
writes each of them as a visible escape (``\\x1b``, ``\\n``, ``\\u202e``); everything else, also
non-ASCII text, stays as it is. Every console line of the collection's own reports goes through
console_line() (plugin_utils/preflight.py for the pre-flight, site and drift summaries).

setting_error() is the check for run-wide settings strings (e.g. dlrack_external_archive): a
control character there is a mistake or an attack, and the error names the variable.

host_list() names hosts in one console message (a verdict) within a bound: a 10,000-host job's
verdict naming 6,000 failing hosts was one 60 kB line of the job's stdout (an AWX job's output is
read in a browser); the reports name every host.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dlrack.node.plugins.plugin_utils.hostlist import compress

# C0 controls and DEL, C1 controls, line/paragraph separators, bidirectional embeddings,
# overrides and isolates, and the BOM/zero-width no-break space.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match):
    char = match.group(0)
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code


def console(text):
    """``text`` (any value: str() of it) with every control character written as a visible
    escape. A text without control characters comes back as it is (the usual case: one regular
    expression search)."""
    text = text if isinstance(text, str) else str(text)
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_escape, text)


def console_line(line):
    """One console line: console(line), so that the line stays one line (a line feed inside it
    is shown as ``\\n``, never starts a new line)."""
    return console(line)


def has_control(text):
    """Whether ``text`` (a str) holds a character console() would escape."""
    return isinstance(text, str) and _CONTROL.search(text) is not None


def setting_error(variable, value):
    """One sentence when the settings string ``value`` of ``variable`` holds a control character
    (None when it is fine, or not a string)."""
    if not has_control(value):
        return None
    return ("%s holds a control character (%s): settings strings are plain text; remove it from the "
            "inventory or extra vars" % (variable, console(value)))


HOST_LIST_MAX_CHARS = 1000    # the host names of one console message (a verdict) take at most this many characters
_TRAILING = re.compile(r"^(.*?)(\d+)$", re.S)


def _name_order(name):
    """Names by prefix, then by their trailing number (gpu-9 before gpu-10), as the hostlist form orders them."""
    m = _TRAILING.match(name)
    return (m.group(1), int(m.group(2)), len(m.group(2))) if m else (name, -1, 0)


def host_list(names, max_chars=HOST_LIST_MAX_CHARS):
    """Console text naming ``names`` (host names, distinct) in at most about ``max_chars``
    characters: every name as given, joined by ", ", while that fits; else every name in Slurm's
    hostlist form (``gpu-[0001-6000]``, plugin_utils/hostlist.py; ``scontrol show hostnames``
    reads it back) while that fits; else the hostlist of the first hosts in name order that fit,
    then `` and N more host(s)``. Control characters are escaped (console()), and the bound is
    on the escaped text."""
    names = [n if isinstance(n, str) else str(n) for n in names]
    plain = console(", ".join(names))
    if len(plain) <= max_chars:
        return plain
    whole = console(compress(names))
    if len(whole) <= max_chars:
        return whole
    ordered = sorted(names, key=_name_order)
    # The longest prefix of the ordered names whose hostlist fits: fits(lo), not fits(hi) throughout
    # (a bisection, ~log2(len(names)) compressions; the text returned is the one measured).
    lo, hi, text = 0, len(ordered), ""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        candidate = console(compress(ordered[:mid]))
        if len(candidate) <= max_chars:
            lo, text = mid, candidate
        else:
            hi = mid
    if not lo:
        return "%d host(s), named in the reports" % len(names)
    return "%s and %d more host(s)" % (text, len(names) - lo)
