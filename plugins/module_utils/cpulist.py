# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel cpulist strings ("0-13,112-125", "0-62:2") <-> sorted lists of CPU ids.

The one implementation of cpulist handling in the collection: parsers, the affinity planner,
the rule engine and the roles all call these functions.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type


class CpuListError(ValueError):
    """A cpulist string that the kernel would not have printed."""


def parse_cpulist(text):
    """Parse a kernel cpulist ("0-3,8,10-14", "0-62:2", "") into a sorted list of ints.

    Accepts the stride form that lscpu and the kernel print (``a-b:stride``) and tolerates
    whitespace and a trailing newline. Raises CpuListError on anything else.
    """
    if text is None:
        return []
    if isinstance(text, (list, tuple, set)):
        out = set()
        for item in text:
            if isinstance(item, bool) or not isinstance(item, int) or item < 0:
                raise CpuListError("cpu ids must be non-negative integers, got %r" % (item,))
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
            if not stride_s.isdecimal() or int(stride_s) < 1:
                raise CpuListError("bad stride in cpulist %r" % text)
            stride = int(stride_s)
        if "-" in part:
            lo_s, dummy, hi_s = part.partition("-")
            if not (lo_s.strip().isdecimal() and hi_s.strip().isdecimal()):
                raise CpuListError("bad range %r in cpulist %r" % (part, text))
            lo, hi = int(lo_s), int(hi_s)
            if hi < lo:
                raise CpuListError("descending range %r in cpulist %r" % (part, text))
            cpus.update(range(lo, hi + 1, stride))
        else:
            if not part.isdecimal():
                raise CpuListError("bad cpu id %r in cpulist %r" % (part, text))
            cpus.add(int(part))
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


def parse_cpumask(text):
    """Parse a kernel hex cpumask ("ffffffff,00000000" as in local_cpus) into sorted CPU ids."""
    if text is None:
        return []
    words = text.strip().replace("0x", "").split(",")
    bits = "".join(w.rjust(8, "0") for w in words)
    try:
        value = int(bits, 16) if bits else 0
    except ValueError:
        raise CpuListError("bad cpumask %r" % text)
    out = []
    i = 0
    while value:
        if value & 1:
            out.append(i)
        value >>= 1
        i += 1
    return out
