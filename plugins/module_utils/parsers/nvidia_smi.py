# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-smi outputs: ``-q -x`` XML, ``-q`` text, ``--query-gpu --format=csv`` and ``topo -m``.

``parse_xml``, ``parse_q_text`` and ``gpus_from_csv`` return the same per-GPU shape::

    {index, product_name, uuid, serial, pci_bus_id ('0000:18:00.0'), minor_number,
     memory_total_mib,
     pcie: {gen, gen_max, gen_host_max, gen_device_max, gen_device_current, width, width_max},
     ecc_mode: {current, pending}            # True / False / None
     virtualization_mode,                    # 'None', 'Pass-Through', 'VGPU', ... or None
     mig_mode: {current, pending},           # True / False / None
     retired_pages: {single_bit, double_bit, pending} or None,
     remapped_rows: {correctable, uncorrectable, pending, failure} or None,
     ecc_errors: {volatile: {...}, aggregate: {...}, volatile_corrected, volatile_uncorrected,
                  aggregate_corrected, aggregate_uncorrected} or None}
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import csv
import io
import re
import xml.etree.ElementTree as ET

from ansible_collections.dlrack.node.plugins.module_utils.cpulist import (
    CpuListError, format_cpulist, parse_cpulist)
from ansible_collections.dlrack.node.plugins.module_utils.parsers import (
    ParseError, na, normalize_pci_bus_id, strip_ansi, to_bool, to_int)

__all__ = ["ParseError", "parse_xml", "parse_q_text", "parse_query_gpu_csv", "gpus_from_csv",
           "parse_topo"]


def _blank_gpu(index):
    return {
        "index": index,
        "product_name": None,
        "uuid": None,
        "serial": None,
        "pci_bus_id": None,
        "minor_number": None,
        "memory_total_mib": None,
        "pcie": {"gen": None, "gen_max": None, "gen_host_max": None, "gen_device_max": None,
                 "gen_device_current": None, "width": None, "width_max": None},
        "ecc_mode": {"current": None, "pending": None},
        "virtualization_mode": None,
        "mig_mode": {"current": None, "pending": None},
        "retired_pages": None,
        "remapped_rows": None,
        "ecc_errors": None,
    }


def _bus_id(value, where):
    try:
        return normalize_pci_bus_id(value)
    except ParseError as exc:
        raise ParseError("%s: %s" % (where, exc))


def _summarise_ecc(volatile, aggregate):
    """Totals of corrected / uncorrected errors from the flat counters of either schema."""
    out = {"volatile": volatile, "aggregate": aggregate}
    for name, counters in (("volatile", volatile), ("aggregate", aggregate)):
        corr = unc = None
        for key, val in counters.items():
            if val is None or not isinstance(val, int) or isinstance(val, bool):
                continue
            # new schema: *_correctable / *_uncorrectable*; old schema: single_bit_total/double_bit_total
            if key.endswith("_correctable") or key == "single_bit_total":
                corr = (corr or 0) + val
            elif "_uncorrectable" in key or key == "double_bit_total":
                unc = (unc or 0) + val
        out[name + "_corrected"] = corr
        out[name + "_uncorrected"] = unc
    return out


# ---------------------------------------------------------------------------------------------
# -q -x (XML)

def _text(elem, path):
    if elem is None:
        return None
    node = elem.find(path)
    if node is None or node.text is None:
        return None
    return node.text.strip()


def _flat_counters(elem, prefix=""):
    out = {}
    if elem is None:
        return out
    for child in elem:
        key = prefix + child.tag
        if len(child):
            out.update(_flat_counters(child, key + "_"))
        else:
            txt = (child.text or "").strip()
            ival = to_int(txt)
            if ival is None and na(txt) is not None and not re.match(r"^-?\d+$", txt):
                # Yes/No flags such as sram_threshold_exceeded
                bval = to_bool(txt)
                out[key] = bval
            else:
                out[key] = ival
    return out


def parse_xml(text):
    """Parse ``nvidia-smi -q -x`` output -> {driver_version, cuda_version, attached_gpus, gpus}."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str) or not text.strip():
        raise ParseError("nvidia-smi -q -x: empty output")
    try:
        root = ET.fromstring(text.strip().encode("utf-8"))
    except ET.ParseError as exc:
        raise ParseError("nvidia-smi -q -x: not well-formed XML (%s)" % exc)
    except (ValueError, RecursionError) as exc:
        raise ParseError("nvidia-smi -q -x: unreadable XML (%s)" % exc)
    if root.tag != "nvidia_smi_log":
        raise ParseError("nvidia-smi -q -x: root element is <%s>, expected <nvidia_smi_log>" % root.tag)
    gpus = []
    for i, g in enumerate(root.findall("gpu")):
        gpu = _blank_gpu(i)
        gpu["product_name"] = na(_text(g, "product_name"))
        gpu["uuid"] = na(_text(g, "uuid"))
        gpu["serial"] = na(_text(g, "serial"))
        gpu["minor_number"] = to_int(_text(g, "minor_number"))
        bus = _text(g, "pci/pci_bus_id") or g.get("id")
        gpu["pci_bus_id"] = _bus_id(bus, "nvidia-smi -q -x gpu %d pci_bus_id" % i)
        gpu["memory_total_mib"] = to_int(_text(g, "fb_memory_usage/total"))
        link = g.find("pci/pci_gpu_link_info")
        if link is not None:
            gpu["pcie"] = {
                "gen": to_int(_text(link, "pcie_gen/current_link_gen")),
                "gen_max": to_int(_text(link, "pcie_gen/max_link_gen")),
                "gen_host_max": to_int(_text(link, "pcie_gen/max_host_link_gen")),
                "gen_device_max": to_int(_text(link, "pcie_gen/max_device_link_gen")),
                "gen_device_current": to_int(_text(link, "pcie_gen/device_current_link_gen")),
                "width": to_int(_text(link, "link_widths/current_link_width")),
                "width_max": to_int(_text(link, "link_widths/max_link_width")),
            }
        gpu["ecc_mode"] = {"current": to_bool(_text(g, "ecc_mode/current_ecc")),
                           "pending": to_bool(_text(g, "ecc_mode/pending_ecc"))}
        gpu["virtualization_mode"] = na(_text(g, "gpu_virtualization_mode/virtualization_mode"))
        gpu["mig_mode"] = {"current": to_bool(_text(g, "mig_mode/current_mig")),
                           "pending": to_bool(_text(g, "mig_mode/pending_mig"))}
        rp = g.find("retired_pages")
        if rp is not None and len(rp):
            gpu["retired_pages"] = {
                "single_bit": to_int(_text(rp, "multiple_single_bit_retirement/retired_count")),
                "double_bit": to_int(_text(rp, "double_bit_retirement/retired_count")),
                "pending": to_bool(_text(rp, "pending_retirement")),
            }
        rr = g.find("remapped_rows")
        if rr is not None and len(rr):
            gpu["remapped_rows"] = {
                "correctable": to_int(_text(rr, "remapped_row_corr")),
                "uncorrectable": to_int(_text(rr, "remapped_row_unc")),
                "pending": to_bool(_text(rr, "remapped_row_pending")),
                "failure": to_bool(_text(rr, "remapped_row_failure")),
            }
        ee = g.find("ecc_errors")
        if ee is not None and len(ee):
            gpu["ecc_errors"] = _summarise_ecc(_flat_counters(ee.find("volatile")),
                                               _flat_counters(ee.find("aggregate")))
        gpus.append(gpu)
    return {
        "driver_version": na(_text(root, "driver_version")),
        "cuda_version": na(_text(root, "cuda_version")),
        "attached_gpus": to_int(_text(root, "attached_gpus")),
        "gpus": gpus,
    }


# ---------------------------------------------------------------------------------------------
# -q (text)

_KV = re.compile(r"^(\s*)(\S.*?)\s+:\s?(.*)$")


def _text_tree(lines):
    """Indentation tree of 'Key : value' lines -> nested dicts. A key that has a value and
    children keeps its value under ''. Repeated sections keep the first occurrence."""
    root = {}
    stack = [(-1, root, None, None)]  # (indent, container, parent, key)
    for line in lines:
        if not line.strip():
            continue
        m = _KV.match(line)
        if m:
            indent, key, value = len(m.group(1)), m.group(2).strip(), m.group(3).strip()
        else:
            indent, key, value = len(line) - len(line.lstrip()), line.strip(), None
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        dummy, container, gparent, gkey = stack[-1]
        if isinstance(container, str):
            container = {"": container}
            gparent[gkey] = container
            stack[-1] = (stack[-1][0], container, gparent, gkey)
        if key in container:
            # repeated key (MIG Device, Process ...): children go to a throw-away sink
            sink = {}
            stack.append((indent, sink, {}, key))
            continue
        container[key] = {} if value is None else value
        stack.append((indent, container[key], container, key))
    return root


def _tget(tree, *path):
    node = tree
    for p in path:
        if not isinstance(node, dict) or p not in node:
            return None
        node = node[p]
    if isinstance(node, dict):
        node = node.get("")
    return node


def parse_q_text(text):
    """Parse plain ``nvidia-smi -q`` output -> {driver_version, cuda_version, attached_gpus, gpus}."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("nvidia-smi -q: empty output")
    lines = strip_ansi(text).splitlines()
    header, blocks, cur = [], [], None
    for line in lines:
        m = re.match(r"^GPU\s+([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-7])\s*$", line)
        if m:
            cur = (m.group(1), [])
            blocks.append(cur)
            continue
        (cur[1] if cur else header).append(line)
    head = _text_tree([ln for ln in header if ":" in ln])
    if not blocks and _tget(head, "Driver Version") is None:
        raise ParseError("nvidia-smi -q: no 'Driver Version' and no 'GPU <bus id>' section found")
    gpus = []
    for i, (bus, body) in enumerate(blocks):
        t = _text_tree(body)
        gpu = _blank_gpu(i)
        gpu["product_name"] = na(_tget(t, "Product Name"))
        gpu["uuid"] = na(_tget(t, "GPU UUID"))
        gpu["serial"] = na(_tget(t, "Serial Number"))
        gpu["minor_number"] = to_int(_tget(t, "Minor Number"))
        gpu["pci_bus_id"] = _bus_id(_tget(t, "PCI", "Bus Id") or bus, "nvidia-smi -q GPU %d" % i)
        gpu["memory_total_mib"] = to_int(_tget(t, "FB Memory Usage", "Total"))
        gl = ("PCI", "GPU Link Info")
        gpu["pcie"] = {
            "gen": to_int(_tget(t, *(gl + ("PCIe Generation", "Current")))),
            "gen_max": to_int(_tget(t, *(gl + ("PCIe Generation", "Max")))),
            "gen_host_max": to_int(_tget(t, *(gl + ("PCIe Generation", "Host Max")))),
            "gen_device_max": to_int(_tget(t, *(gl + ("PCIe Generation", "Device Max")))),
            "gen_device_current": to_int(_tget(t, *(gl + ("PCIe Generation", "Device Current")))),
            "width": to_int(_tget(t, *(gl + ("Link Width", "Current")))),
            "width_max": to_int(_tget(t, *(gl + ("Link Width", "Max")))),
        }
        gpu["ecc_mode"] = {"current": to_bool(_tget(t, "ECC Mode", "Current")),
                           "pending": to_bool(_tget(t, "ECC Mode", "Pending"))}
        gpu["virtualization_mode"] = na(_tget(t, "GPU Virtualization Mode", "Virtualization Mode"))
        gpu["mig_mode"] = {"current": to_bool(_tget(t, "MIG Mode", "Current")),
                           "pending": to_bool(_tget(t, "MIG Mode", "Pending"))}
        if isinstance(t.get("Retired Pages"), dict):
            gpu["retired_pages"] = {
                "single_bit": to_int(_tget(t, "Retired Pages", "Single Bit ECC")),
                "double_bit": to_int(_tget(t, "Retired Pages", "Double Bit ECC")),
                "pending": to_bool(_tget(t, "Retired Pages", "Pending Page Blacklist")),
            }
        if isinstance(t.get("Remapped Rows"), dict):
            gpu["remapped_rows"] = {
                "correctable": to_int(_tget(t, "Remapped Rows", "Correctable Error")),
                "uncorrectable": to_int(_tget(t, "Remapped Rows", "Uncorrectable Error")),
                "pending": to_bool(_tget(t, "Remapped Rows", "Pending")),
                "failure": to_bool(_tget(t, "Remapped Rows", "Remapping Failure Occurred")),
            }
        ee = t.get("ECC Errors")
        if isinstance(ee, dict):
            def flat(d):
                out = {}
                for k, v in (d or {}).items() if isinstance(d, dict) else ():
                    if k == "" or isinstance(v, dict):
                        continue
                    key = re.sub(r"[^a-z0-9]+", "_", k.lower()).strip("_")
                    key = key.replace("sec_ded", "secded")
                    key = re.sub(r"_(correctable|uncorrectable)", r"_\1", key)
                    out[key] = to_int(v) if to_bool(v) is None else to_bool(v)
                return out
            gpu["ecc_errors"] = _summarise_ecc(flat(ee.get("Volatile")), flat(ee.get("Aggregate")))
        gpus.append(gpu)
    return {
        "driver_version": na(_tget(head, "Driver Version")),
        "cuda_version": na(_tget(head, "CUDA Version")),
        "attached_gpus": to_int(_tget(head, "Attached GPUs")),
        "gpus": gpus,
    }


# ---------------------------------------------------------------------------------------------
# --query-gpu=... --format=csv

_UNIT = re.compile(r"^(.*?)\s*\[([^\]]*)\]\s*$")


def parse_query_gpu_csv(text):
    """Parse ``--query-gpu=<fields> --format=csv[,nounits]`` -> list of {field: value}.

    The header drives the keys; a unit in the header ('memory.total [MiB]') is removed from the
    key and from the value ('81559 MiB' -> '81559'). '[N/A]', 'N/A', '[Not Supported]' -> None.
    Values stay strings (or None). Accepts a missing trailing newline; a row whose cell count
    does not match the header is an error.
    """
    if not isinstance(text, str) or not text.strip():
        raise ParseError("nvidia-smi --query-gpu: empty output")
    lines = [ln for ln in text.replace("\r\n", "\n").split("\n") if ln.strip()]
    try:
        rows = list(csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True))
    except csv.Error as exc:
        raise ParseError("nvidia-smi --query-gpu: bad CSV (%s)" % exc)
    header = rows[0]
    keys, units = [], []
    for h in header:
        h = h.strip()
        m = _UNIT.match(h)
        key, unit = (m.group(1), m.group(2)) if m else (h, None)
        if not key or not re.match(r"^[A-Za-z_][A-Za-z0-9_.]*$", key):
            raise ParseError("nvidia-smi --query-gpu: header cell %r is not a query field name" % h)
        keys.append(key)
        units.append(unit)
    if "index" not in keys and "name" not in keys and "uuid" not in keys and "pci.bus_id" not in keys:
        raise ParseError("nvidia-smi --query-gpu: header has none of index/name/uuid/pci.bus_id")
    out = []
    for n, row in enumerate(rows[1:], 2):
        if len(row) != len(keys):
            raise ParseError("nvidia-smi --query-gpu: line %d has %d cells, header has %d"
                             % (n, len(row), len(keys)))
        rec = {}
        for key, unit, val in zip(keys, units, row):
            val = na(val)
            if val is not None and unit and val.endswith(" " + unit):
                val = val[: -len(unit) - 1].strip()
            rec[key] = val
        out.append(rec)
    return out


def gpus_from_csv(rows):
    """Map parse_query_gpu_csv() rows to the per-GPU shape of parse_xml()."""
    gpus = []
    for i, r in enumerate(rows):
        gpu = _blank_gpu(to_int(r.get("index")) if to_int(r.get("index")) is not None else i)
        gpu["product_name"] = r.get("name")
        gpu["uuid"] = r.get("uuid")
        gpu["serial"] = r.get("serial")
        if r.get("pci.bus_id"):
            gpu["pci_bus_id"] = _bus_id(r.get("pci.bus_id"), "--query-gpu row %d pci.bus_id" % i)
        gpu["memory_total_mib"] = to_int(r.get("memory.total"))
        gpu["pcie"] = {
            "gen": to_int(r.get("pcie.link.gen.current")),
            "gen_max": to_int(r.get("pcie.link.gen.max")),
            "gen_host_max": to_int(r.get("pcie.link.gen.hostmax")),
            "gen_device_max": to_int(r.get("pcie.link.gen.gpumax")),
            "gen_device_current": to_int(r.get("pcie.link.gen.gpucurrent")),
            "width": to_int(r.get("pcie.link.width.current")),
            "width_max": to_int(r.get("pcie.link.width.max")),
        }
        gpu["ecc_mode"] = {"current": to_bool(r.get("ecc.mode.current")),
                           "pending": to_bool(r.get("ecc.mode.pending"))}
        gpu["mig_mode"] = {"current": to_bool(r.get("mig.mode.current")),
                           "pending": to_bool(r.get("mig.mode.pending"))}
        gpu["virtualization_mode"] = r.get("virtualization_mode")
        if any(k.startswith("retired_pages.") for k in r):
            gpu["retired_pages"] = {"single_bit": to_int(r.get("retired_pages.single_bit_ecc.count")
                                                         or r.get("retired_pages.sbe")),
                                    "double_bit": to_int(r.get("retired_pages.double_bit.count")
                                                         or r.get("retired_pages.dbe")),
                                    "pending": to_bool(r.get("retired_pages.pending"))}
        vol = {k[len("ecc.errors."):].replace(".volatile.", "_volatile_"): to_int(v)
               for k, v in r.items() if k.startswith("ecc.errors.") and ".volatile." in k}
        agg = {k[len("ecc.errors."):].replace(".aggregate.", "_aggregate_"): to_int(v)
               for k, v in r.items() if k.startswith("ecc.errors.") and ".aggregate." in k}
        if vol or agg:
            def tot(d, word):
                vals = [v for k, v in d.items() if k.endswith("_total") and k.startswith(word)
                        and v is not None]
                return sum(vals) if vals else None
            gpu["ecc_errors"] = {"volatile": vol, "aggregate": agg,
                                 "volatile_corrected": tot(vol, "corrected"),
                                 "volatile_uncorrected": tot(vol, "uncorrected"),
                                 "aggregate_corrected": tot(agg, "corrected"),
                                 "aggregate_uncorrected": tot(agg, "uncorrected")}
        gpus.append(gpu)
    return gpus


# ---------------------------------------------------------------------------------------------
# topo -m

_EXTRA_COLS = (("GPU NUMA ID", "gpu_numa_id"), ("CPU Affinity", "cpu_affinity"),
               ("NUMA Affinity", "numa_affinity"))
_CELL = re.compile(r"^(X|NV\d+|[A-Z]{2,4}|N/A)$")
_DEV = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|[A-Za-z][A-Za-z0-9_]*\d+)$")


def parse_topo(text):
    """Parse ``nvidia-smi topo -m``.

    Returns {devices: [column names], gpus: [{name, index, links: {dev: 'NV2'|'SYS'|...},
    cpu_affinity (cpulist str or None), numa_affinity (int or None), gpu_numa_id}],
    gpu_links: {GPUi: {GPUj: cell}} (GPU x GPU only), nics: {NIC0: 'mlx5_0'}, nvlink: bool}.
    Handles ANSI escapes, tabs or spaces, the old layout without NUMA Affinity, indented pastes
    and wrapped legends.
    """
    if not isinstance(text, str) or not text.strip():
        raise ParseError("nvidia-smi topo -m: empty output")
    lines = [strip_ansi(ln).replace("\t", "    ").rstrip() for ln in text.splitlines()]
    hidx = None
    for i, ln in enumerate(lines):
        toks = ln.split()
        if "GPU0" in toks and toks[toks.index("GPU0") + 1:][:1] != ["X"]:
            hidx = i
            break
    if hidx is None:
        raise ParseError("nvidia-smi topo -m: no header line with a GPU0 column")
    head = lines[hidx]
    for label, slug in _EXTRA_COLS:
        head = head.replace(label, "@" + slug)
    cols = head.split()
    devices = [c for c in cols if not c.startswith("@")]
    extras = [c[1:] for c in cols if c.startswith("@")]
    if cols[: len(devices)] != devices:
        raise ParseError("nvidia-smi topo -m: device columns after affinity columns in %r" % lines[hidx])
    for d in devices:
        if not _DEV.match(d):
            raise ParseError("nvidia-smi topo -m: bad device column %r" % d)
    gpus, nics = [], {}
    seen = set()
    in_legend = False
    for ln in lines[hidx + 1:]:
        s = ln.strip()
        if not s:
            continue
        if s.startswith("Legend") or s.startswith("NIC Legend"):
            in_legend = True
            continue
        if in_legend:
            m = re.match(r"^(NIC\d+):\s*(\S+)$", s)
            if m:
                nics[m.group(1)] = m.group(2)
            continue
        toks = s.split()
        name = toks[0]
        if name not in devices:
            raise ParseError("nvidia-smi topo -m: row %r is not one of the columns %s" % (name, devices))
        if name in seen:
            raise ParseError("nvidia-smi topo -m: row %r appears twice" % name)
        seen.add(name)
        cells = toks[1: 1 + len(devices)]
        if len(cells) != len(devices):
            raise ParseError("nvidia-smi topo -m: row %r has %d link cells, expected %d"
                             % (name, len(cells), len(devices)))
        for c in cells:
            if not _CELL.match(c):
                raise ParseError("nvidia-smi topo -m: row %r has bad cell %r" % (name, c))
        if cells[devices.index(name)] != "X":
            raise ParseError("nvidia-smi topo -m: row %r does not have X on the diagonal" % name)
        rest = toks[1 + len(devices):]
        if len(rest) > len(extras):
            raise ParseError("nvidia-smi topo -m: row %r has %d trailing cells, header has %d"
                             % (name, len(rest), len(extras)))
        if not name.startswith("GPU"):
            continue
        ext = dict(zip(extras, rest))
        cpu_aff = na(ext.get("cpu_affinity"))
        if cpu_aff is not None:
            try:
                cpu_aff = format_cpulist(parse_cpulist(cpu_aff))
            except CpuListError as exc:
                raise ParseError("nvidia-smi topo -m: row %r CPU Affinity: %s" % (name, exc))
        numa = na(ext.get("numa_affinity"))
        if numa is not None and not re.match(r"^\d+(-\d+)?(,\d+(-\d+)?)*$", numa):
            raise ParseError("nvidia-smi topo -m: row %r NUMA Affinity %r" % (name, numa))
        gpus.append({
            "name": name,
            "index": int(name[3:]),
            "links": dict((d, c) for d, c in zip(devices, cells) if d != name),
            "cpu_affinity": cpu_aff,
            "numa_affinity": int(numa) if numa is not None and numa.isdecimal() else numa,
            "gpu_numa_id": to_int(ext.get("gpu_numa_id")),
        })
    if not gpus:
        raise ParseError("nvidia-smi topo -m: no GPU rows")
    gpu_names = [g["name"] for g in gpus]
    gpu_links = dict((g["name"], dict((n, g["links"][n]) for n in gpu_names if n != g["name"]))
                     for g in gpus)
    nvlink = any(c.startswith("NV") and c != "N/A" for g in gpu_links.values() for c in g.values())
    return {"devices": devices, "gpus": gpus, "gpu_links": gpu_links, "nics": nics, "nvlink": nvlink}
