# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``numactl --hardware`` -> {available, nodes: [{id, cpus, cpu_ids, size_mb, free_mb}],
distances: {from: {to: distance}}}. CPU-less nodes keep cpus ''."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dlrack.node.plugins.module_utils.cpulist import format_cpulist
from ansible_collections.dlrack.node.plugins.module_utils.parsers import ParseError

__all__ = ["ParseError", "parse_numactl_hardware"]


def parse_numactl_hardware(text):
    if not isinstance(text, str) or not text.strip():
        raise ParseError("numactl --hardware: empty output")
    if "No NUMA available" in text:
        return {"available": False, "nodes": [], "distances": {}}
    nodes, distances, dist_cols = {}, {}, None
    seen_available = False
    for ln in text.replace("\r\n", "\n").split("\n"):
        s = ln.strip()
        if not s:
            continue
        if s.startswith("available:"):
            seen_available = True
            continue
        m = re.match(r"^node (\d+) cpus:\s*(.*)$", s)
        if m:
            ids = m.group(2).split()
            if not all(i.isdecimal() for i in ids):
                raise ParseError("numactl --hardware: bad cpu list in %r" % s[:80])
            n = nodes.setdefault(int(m.group(1)), {"id": int(m.group(1)), "size_mb": None,
                                                   "free_mb": None})
            n["cpu_ids"] = sorted(int(i) for i in ids)
            n["cpus"] = format_cpulist(n["cpu_ids"])
            continue
        m = re.match(r"^node (\d+) (size|free):\s*(\d+)\s*MB$", s)
        if m:
            n = nodes.setdefault(int(m.group(1)), {"id": int(m.group(1)), "cpus": "",
                                                   "cpu_ids": [], "size_mb": None, "free_mb": None})
            n[m.group(2) + "_mb"] = int(m.group(3))
            continue
        if s == "node distances:":
            continue
        m = re.match(r"^node((?:\s+\d+)+)$", s)
        if m:
            dist_cols = [int(x) for x in m.group(1).split()]
            continue
        m = re.match(r"^(\d+):((?:\s+\d+)+)$", s)
        if m and dist_cols is not None:
            vals = [int(x) for x in m.group(2).split()]
            if len(vals) != len(dist_cols):
                raise ParseError("numactl --hardware: distance row %r has %d values for %d nodes"
                                 % (s, len(vals), len(dist_cols)))
            distances[int(m.group(1))] = dict(zip(dist_cols, vals))
            continue
        if s.startswith(("[sudo]", "$")):
            continue
        raise ParseError("numactl --hardware: unexpected line %r" % s[:80])
    if not seen_available and not nodes:
        raise ParseError("numactl --hardware: no 'available:' line and no node lines")
    for n in nodes.values():
        n.setdefault("cpus", "")
        n.setdefault("cpu_ids", [])
    return {"available": True, "nodes": [nodes[k] for k in sorted(nodes)], "distances": distances}
