# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-smi outputs the collection reads: ``-q -x`` (XML) and ``nvlink -s``.

``parse_xml`` returns per GPU::

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

import re
import xml.etree.ElementTree as ET

from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import (
    ParseError, na, normalize_pci_bus_id, to_bool, to_int)

__all__ = ["ParseError", "parse_xml", "parse_nvlink_status"]


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
# nvlink -s

_NVLINK_GPU = re.compile(r"^GPU\s+([0-9]{1,4}):\s*(.*?)\s*\(UUID:\s*([^)]*)\)\s*$")
_NVLINK_LINK = re.compile(r"^Link\s+([0-9]{1,3}):\s*(.*?)\s*$")
_NVLINK_SPEED = re.compile(r"^([0-9]{1,6}(?:\.[0-9]{1,6})?)\s*GB/s$")
# Lines nvidia-smi prints instead of links; "none" means the GPU has no active link.
_NVLINK_NONE = ("does not have or support nvlink", "all links are inactive")


def parse_nvlink_status(text):
    """Parse ``nvidia-smi nvlink -s`` (all GPUs in one call).

    Returns [{index, name, uuid, links: {n: GB/s float, or None when inactive / not a speed},
    active, note}] where ``active`` is the number of links with a speed; 0 when nvidia-smi
    says the GPU has no NVLink or all links are inactive; None (unknown) otherwise, e.g. in MIG
    mode ("Nvlink queries are not supported for Devices in MIG mode"). ``note`` keeps such a
    line. Empty output (seen on a PCIe H200 VM with driver 580) -> []. Raises ParseError for
    text nvidia-smi does not print (a link line before any GPU, a GPU listed twice).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise ParseError("nvidia-smi nvlink -s: expected text, got %s" % type(text).__name__)
    gpus, cur = [], None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _NVLINK_GPU.match(line)
        if m:
            index = int(m.group(1))
            if any(g["index"] == index for g in gpus):
                raise ParseError("nvidia-smi nvlink -s: GPU %d listed twice" % index)
            cur = {"index": index, "name": m.group(2) or None, "uuid": na(m.group(3)),
                   "links": {}, "active": None, "note": None}
            gpus.append(cur)
            continue
        if cur is None:
            raise ParseError("nvidia-smi nvlink -s: %r before the first 'GPU n: ...' line" % line[:80])
        m = _NVLINK_LINK.match(line)
        if m:
            speed = _NVLINK_SPEED.match(m.group(2))
            cur["links"][int(m.group(1))] = float(speed.group(1)) if speed else None
        elif cur["note"] is None:
            cur["note"] = line[:200]
    for g in gpus:
        if g["links"]:
            g["active"] = sum(1 for v in g["links"].values() if v is not None)
        elif g["note"] and any(n in g["note"].lower() for n in _NVLINK_NONE):
            g["active"] = 0
    return gpus
