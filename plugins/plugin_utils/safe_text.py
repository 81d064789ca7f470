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
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

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
