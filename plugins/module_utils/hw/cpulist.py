# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel cpulist strings ("0-13,112-125", "0-62:2") <-> sorted lists of CPU ids.

The one implementation of cpulist handling in the collection: parsers, the affinity planner,
the rule engine and the roles all call these functions.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type


# Linux caps NR_CPUS at 8192 on every architecture; ids at or above this bound are not CPUs, and
# parsing never expands a range beyond it (a cpulist of "0-4294967295" costs nothing).
MAX_CPUS = 16384


class CpuListError(ValueError):
    """A cpulist string that the kernel would not have printed."""


def _number(text):
    """ASCII digits only: str.isdigit() also accepts "\u00b2", which int() then rejects."""
    text = text.strip()
    if not text or not text.isascii() or not text.isdigit() or len(text) > 9:
        return None
    return int(text)


def parse_cpulist(text, max_cpus=MAX_CPUS):
    """Parse a kernel cpulist ("0-3,8,10-14", "0-62:2", "") into a sorted list of ints.

    Accepts the stride form that lscpu and the kernel print (``a-b:stride``) and tolerates
    whitespace and a trailing newline. Raises CpuListError on anything else, including a CPU
    id >= ``max_cpus`` (checked before any range is expanded).
    """
    if text is None:
        return []
    if isinstance(text, (list, tuple, set)):
        out = set()
        for item in text:
            if isinstance(item, bool) or not isinstance(item, int) or item < 0 or item >= max_cpus:
                raise CpuListError("cpu ids must be integers from 0 to %d, got %r" % (max_cpus - 1, item))
            out.add(item)
        return sorted(out)
    if not isinstance(text, str):
        raise CpuListError("expected a cpulist string such as '0-3,8', got %r" % (text,))
    text = text.strip()
    if not text:
        return []
    cpus = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise CpuListError("empty element in cpulist %r" % text)
        stride = 1
        if ":" in part:
            part, dummy, stride_s = part.partition(":")
            stride = _number(stride_s)
            if not stride:
                raise CpuListError("bad stride in cpulist %r" % text)
        lo_s, dummy, hi_s = part.partition("-")
        lo = _number(lo_s)
        hi = _number(hi_s) if "-" in part else lo
        if lo is None or hi is None:
            raise CpuListError("bad %s %r in cpulist %r" % ("range" if "-" in part else "cpu id", part, text))
        if hi < lo:
            raise CpuListError("descending range %r in cpulist %r" % (part, text))
        if hi >= max_cpus:
            raise CpuListError("cpu id %d in cpulist %r is above the limit of %d CPUs" % (hi, text, max_cpus))
        cpus.update(range(lo, hi + 1, stride))
    return sorted(cpus)


def format_cpulist(cpus):
    """Format CPU ids as the kernel does: sorted, consecutive runs collapsed ("0-13,112-125")."""
    ids = sorted(set(int(c) for c in cpus))
    if not ids:
        return ""
    runs = []
    start = prev = ids[0]
    for c in ids[1:]:
        if c == prev + 1:
            prev = c
            continue
        runs.append((start, prev))
        start = prev = c
    runs.append((start, prev))
    return ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in runs)
