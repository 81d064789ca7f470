# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""lscpu outputs: the text report (old flat and new hierarchical layouts, wrapped Flags, an
appended ``lscpu -p`` parsable section), ``lscpu -e`` tables and ``lscpu -J`` JSON.

``parse_lscpu`` / ``parse_lscpu_json`` return::

    {fields: {key: value}, architecture, model_name, vendor_id, vendor (amd|intel|arm|other),
     cpus, online, threads_per_core, cores_per_socket, sockets, physical_cores,
     numa_nodes: [{id, cpus ('0-62:2' normalised to '0,2,4,...' ranges), cpu_ids: [...]}],
     hypervisor_vendor, virtualization_type, flags: [...],
     topology_reliable: bool, parsable: [{cpu, core, socket, node, ...}] or []}

``topology_reliable`` is False when the counts cannot be trusted: a Xen dom0 reports every CPU
as a thread of one core (Thread(s) per core: 112), and then ``physical_cores`` is None.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.dlrack.node.plugins.module_utils.cpulist import (
    CpuListError, format_cpulist, parse_cpulist)
from ansible_collections.dlrack.node.plugins.module_utils.parsers import (
    ParseError, na, strip_ansi, to_int)

__all__ = ["ParseError", "parse_lscpu", "parse_lscpu_json", "parse_lscpu_e", "vendor_from_id"]

_KEY = re.compile(r"^(\s*)([A-Za-z][^:]*?):(?:\s+(.*)|\s*)$")
_NODE_KEY = re.compile(r"^NUMA node(\d+) CPU\(s\)$")


def vendor_from_id(vendor_id, model_name=None, architecture=None):
    v = (vendor_id or "").lower()
    m = (model_name or "").lower()
    a = (architecture or "").lower()
    if "amd" in v or m.startswith("amd"):
        return "amd"
    if "intel" in v or m.startswith("intel"):
        return "intel"
    if v in ("arm", "apm", "cavium", "ampere", "hisilicon", "nvidia", "qualcomm", "fujitsu") \
            or a.startswith(("aarch64", "arm")):
        return "arm"
    return "other" if (v or m) else None


def _interpret(fields, parsable):
    if not any(k in fields for k in ("CPU(s)", "Model name", "Architecture", "Vendor ID")):
        raise ParseError("lscpu: none of 'CPU(s)', 'Model name', 'Architecture', 'Vendor ID' found")
    nodes = []
    for key, value in fields.items():
        m = _NODE_KEY.match(key)
        if not m:
            continue
        try:
            ids = parse_cpulist(value or "")
        except CpuListError as exc:
            raise ParseError("lscpu: %s: %s" % (key, exc))
        nodes.append({"id": int(m.group(1)), "cpus": format_cpulist(ids), "cpu_ids": ids})
    nodes.sort(key=lambda n: n["id"])
    tpc = to_int(fields.get("Thread(s) per core"))
    cps = to_int(fields.get("Core(s) per socket")) or to_int(fields.get("Core(s) per cluster"))
    sockets = to_int(fields.get("Socket(s)"))
    cpus = to_int(fields.get("CPU(s)"))
    hyp = na(fields.get("Hypervisor vendor"))
    vtype = na(fields.get("Virtualization type"))
    reliable = True
    if tpc is not None and tpc > 8:
        reliable = False
    if hyp and hyp.lower() == "xen" and (vtype or "").lower() == "none":
        reliable = False  # Xen dom0: topology is the hypervisor's view, not the silicon's
    if cpus and tpc and cps and sockets and tpc * cps * sockets != cpus and not parsable:
        # offline CPUs can make this differ; only flag when wildly off
        if tpc * cps * sockets > 2 * cpus:
            reliable = False
    physical = cps * sockets if (reliable and cps and sockets) else None
    if parsable and reliable:
        cores = set((r.get("socket"), r.get("core")) for r in parsable
                    if r.get("core") is not None)
        socks = set(r.get("socket") for r in parsable if r.get("socket") is not None)
        if cores and physical is None:
            physical = len(cores)
        if socks and sockets is None:
            sockets = len(socks)
    flags = (fields.get("Flags") or "").split()
    model = na(fields.get("Model name"))
    if model:
        model = re.sub(r"\s+", " ", model)
    return {
        "fields": fields,
        "architecture": na(fields.get("Architecture")),
        "model_name": model,
        "vendor_id": na(fields.get("Vendor ID")),
        "vendor": vendor_from_id(fields.get("Vendor ID"), model, fields.get("Architecture")),
        "cpus": cpus,
        "online": na(fields.get("On-line CPU(s) list")),
        "threads_per_core": tpc,
        "cores_per_socket": cps,
        "sockets": sockets,
        "physical_cores": physical,
        "numa_node_count": to_int(fields.get("NUMA node(s)")),
        "numa_nodes": nodes,
        "hypervisor_vendor": hyp,
        "virtualization_type": vtype,
        "flags": flags,
        "topology_reliable": reliable,
        "parsable": parsable,
    }


def _parse_parsable(lines):
    """Rows of `lscpu -p`: a '# CPU,Core,Socket,...' header comment then CSV rows. Only the
    first section is used (util-linux test files append a second one)."""
    header, rows, started = None, [], False
    for ln in lines:
        s = ln.strip()
        if s.startswith("#"):
            if rows:
                break
            m = re.match(r"^#\s*(CPU,.*)$", s)
            if m:
                header = [h.strip().lower() for h in m.group(1).split(",")]
                started = True
            continue
        if not started:
            continue
        if not s:
            if rows:
                break
            continue
        cells = s.split(",")
        if len(cells) != len(header):
            raise ParseError("lscpu -p: row %r has %d cells, header has %d"
                             % (s, len(cells), len(header)))
        row = {}
        for h, c in zip(header, cells):
            if not h:
                continue
            if c == "":
                row[h] = None
            elif c.isdecimal():
                row[h] = int(c)
            elif h in ("cpu", "core", "socket", "node"):
                raise ParseError("lscpu -p: %s %r is not a number in row %r" % (h, c, s))
            else:
                row[h] = c
        rows.append(row)
    return rows


def parse_lscpu(text):
    """Parse ``lscpu`` text output (optionally followed by ``lscpu -p`` output)."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("lscpu: empty output")
    lines = strip_ansi(text).replace("\r\n", "\n").split("\n")
    fields = {}
    last = None
    report, rest = [], []
    for i, ln in enumerate(lines):
        if ln.startswith("#"):
            rest = lines[i:]
            break
        report.append(ln)
    wrap_w = col = prev_len = 0
    for ln in report:
        if not ln.strip():
            last = None
            continue
        m = _KEY.match(ln)
        if m and not (last == "Flags" and len(m.group(1)) > 10 and " " in m.group(2).strip()):
            key, value = m.group(2).strip(), (m.group(3) or "").strip()
            if key not in fields:
                fields[key] = value
            last = key
            wrap_w = prev_len = len(ln)
            col = m.start(3) if m.group(3) is not None else len(ln)
            continue
        if last is not None and ln[:1].isspace():
            # A value wrapped by the terminal (the Flags line in the new layout): the break is
            # at a fixed width, so a full previous line means the word continues here.
            piece = ln[col:] if not ln[:col].strip() else ln.strip()
            if prev_len >= wrap_w:
                fields[last] = fields[last] + piece.rstrip()
            else:
                fields[last] = (fields[last] + " " + piece.strip()).strip()
            prev_len = len(ln)
            continue
        if ln.startswith("[sudo]") or ln.lstrip().startswith("$"):
            continue
        raise ParseError("lscpu: unexpected line %r" % ln[:80])
    return _interpret(fields, _parse_parsable(rest))


def parse_lscpu_json(text):
    """Parse ``lscpu -J``: the old flat {"lscpu": [{field, data}]} and the newer nested form
    (entries with "children")."""
    try:
        doc = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ParseError("lscpu -J: not JSON (%s)" % exc)
    if not isinstance(doc, dict) or not isinstance(doc.get("lscpu"), list):
        raise ParseError("lscpu -J: expected an object with an 'lscpu' list")
    fields = {}

    def walk(items):
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("field"), str):
                raise ParseError("lscpu -J: entry %r has no 'field' string" % (item,))
            key = item["field"].strip().rstrip(":").strip()
            data = item.get("data")
            fields.setdefault(key, "" if data is None else str(data))
            if isinstance(item.get("children"), list):
                walk(item["children"])
    walk(doc["lscpu"])
    return _interpret(fields, [])


def parse_lscpu_e(text):
    """Parse ``lscpu -e`` (extended table) -> list of {cpu, node, socket, core, online, ...}."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("lscpu -e: empty output")
    lines = [ln for ln in strip_ansi(text).splitlines() if ln.strip()]
    header = lines[0].split()
    if not header or header[0] != "CPU":
        raise ParseError("lscpu -e: header does not start with CPU: %r" % lines[0][:80])
    keys = [h.lower() for h in header]
    out = []
    for ln in lines[1:]:
        cells = ln.split()
        if len(cells) != len(keys):
            raise ParseError("lscpu -e: row %r has %d cells, header has %d"
                             % (ln.strip()[:80], len(cells), len(keys)))
        row = {}
        for k, c in zip(keys, cells):
            if k in ("cpu", "node", "socket", "core", "drawer", "book", "cluster"):
                if c == "-":
                    row[k] = None
                elif c.isdecimal():
                    row[k] = int(c)
                else:
                    raise ParseError("lscpu -e: %s %r is not a number" % (k, c))
            elif k == "online":
                row[k] = {"yes": True, "no": False}.get(c)
            else:
                row[k] = c
        out.append(row)
    return out
