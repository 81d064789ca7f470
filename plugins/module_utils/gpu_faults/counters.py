# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU counters beside the kernel log, read from ``nvidia-smi -q -x`` and ``nvidia-smi nvlink -e``:

- remapped rows pending / failed and retired pages pending (pre-HBM3 GPUs; HBM3e says N/A);
- the PCIe replay counter and the NVLink CRC / replay / recovery counters as rates between two reads
  (the previous read is kept in the caller's state; a counter that went down was reset: its rate is
  read from zero);
- clock-event reasons that mean a fault: HW slowdown, HW thermal slowdown, HW power brake, SW thermal
  slowdown; not the SW power cap (a GPU at its power limit under full load), idle, application clocks,
  sync boost or display clocks (NVML nvmlClocksEventReason* constants);
- a GPU on the PCI bus whose driver no longer answers (present in sysfs, absent from nvidia-smi, or
  nvidia-smi saying it cannot reach it).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import xml.etree.ElementTree as ET

from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.parse import escape, norm_bus

FAULT_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
# NVML nvmlClocksEventReason* bits (nvml.h): the hex value of clocks_event_reasons.active
REASON_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
               0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
               0x80: "hw_power_brake_slowdown", 0x100: "display_clocks_setting"}
# defaults: a PCIe replay rate above this many per hour, any NVLink CRC/replay/recovery growth per hour
PCIE_REPLAYS_PER_HOUR = 100
NVLINK_ERRORS_PER_HOUR = 1
_NVLINK_GPU = re.compile(r"^GPU\s+(\d{1,4}):\s*(.*?)(?:\s*\(UUID:\s*([^)]*)\))?\s*$")
_NVLINK_ERR = re.compile(r"^Link\s+(\d{1,3}):\s*(Replay|Recovery|CRC|CRC Flit|CRC Data)\s+Errors?:\s*(\d{1,20})\s*$", re.I)
_LOST_RE = re.compile(r"(?:Unable to determine the device handle for GPU\s*([0-9A-Fa-f:.]{7,16})|GPU ([0-9A-Fa-f:.]{7,16}) is lost"
                      r"|GPU is lost)", re.I)


def _text(elem, path):
    found = elem.find(path)
    return None if found is None or found.text is None else found.text.strip()


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _yes(value):
    if value is None:
        return None
    low = value.strip().lower()
    return True if low in ("yes", "true", "active") else False if low in ("no", "false", "not active") else None


def counters_from_xml(text):
    """{bus id: {uuid, remapped_pending, remapped_failure, retired_pending, pcie_replays, clock_reasons}}."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    root = ET.fromstring(text.strip().encode("utf-8"))
    out = {}
    for gpu in root.findall("gpu"):
        bus = norm_bus(_text(gpu, "pci/pci_bus_id") or gpu.get("id") or "")
        if not bus:
            continue
        reasons = gpu.find("clocks_event_reasons")
        if reasons is None:
            reasons = gpu.find("clocks_throttle_reasons")
        active = []
        if reasons is not None:
            for child in reasons:
                name = re.sub(r"^clocks_(?:event|throttle)_reasons?_", "", child.tag)
                if _yes(child.text):
                    active.append(name)
        out[bus] = {
            "uuid": _text(gpu, "uuid"),
            "remapped_pending": _yes(_text(gpu, "remapped_rows/remapped_row_pending")),
            "remapped_failure": _yes(_text(gpu, "remapped_rows/remapped_row_failure")),
            "retired_pending": _yes(_text(gpu, "retired_pages/pending_retirement")),
            "pcie_replays": _int(_text(gpu, "pci/replay_counter")),
            "pcie_replay_rollovers": _int(_text(gpu, "pci/replay_rollover_counter")),
            "clock_reasons": sorted(active),
        }
    return out


def reasons_from_mask(value):
    """'0x0000000000000004' (clocks_event_reasons.active) -> ['sw_power_cap']."""
    try:
        mask = int(str(value).strip(), 16)
    except ValueError:
        return None
    return sorted(name for bit, name in REASON_BITS.items() if mask & bit)


def fault_reasons(reasons):
    return [r for r in (reasons or []) if r in FAULT_REASONS]


def nvlink_errors(text):
    """``nvidia-smi nvlink -e`` -> {gpu index: {"uuid": u, "replay": n, "recovery": n, "crc": n}} (summed over links)."""
    out = {}
    current = None
    for raw in (text or "").splitlines()[:100000]:
        line = raw.strip()
        m = _NVLINK_GPU.match(line)
        if m:
            current = out.setdefault(int(m.group(1)), {"uuid": m.group(3), "replay": 0, "recovery": 0, "crc": 0})
            continue
        m = _NVLINK_ERR.match(line)
        if m and current is not None:
            kind = m.group(2).lower()
            key = "crc" if kind.startswith("crc") else kind
            current[key] += int(m.group(3))
    return out


def attach_nvlink(cur, nvlink):
    """Puts nvlink_errors' counters (by nvidia-smi's GPU index) on the GPUs of counters_from_xml (by bus id), as
    ``"nvlink": {replay, recovery, crc}``: by UUID where ``nvlink -e`` prints it, else by position (both list the
    GPUs in nvidia-smi's index order). Returns ``cur``."""
    by_uuid = dict((str(c.get("uuid")).lower(), bus) for bus, c in cur.items() if c.get("uuid"))
    order = list(cur)
    for index, errs in sorted(nvlink.items()):
        bus = by_uuid.get(str(errs.get("uuid")).lower()) if errs.get("uuid") else None
        if bus is None and 0 <= index < len(order):
            bus = order[index]
        if bus is not None:
            cur[bus]["nvlink"] = dict((key, errs[key]) for key in ("replay", "recovery", "crc"))
    return cur


def rate_per_hour(prev, cur, seconds):
    """Growth per hour between two reads; a counter that went down was reset (read from zero)."""
    if cur is None or prev is None or not seconds or seconds <= 0:
        return None
    grown = cur - prev if cur >= prev else cur
    return grown * 3600.0 / seconds


def lost_gpus(on_bus, answered, smi_error=None):
    """Bus ids on the PCI bus (sysfs) that nvidia-smi does not answer for, and those it says it lost."""
    lost = set(b for b in (norm_bus(x) for x in on_bus) if b) - set(b for b in (norm_bus(x) for x in answered) if b)
    for m in _LOST_RE.finditer(smi_error or ""):
        bus = norm_bus((m.group(1) or m.group(2) or "").rstrip(":."))
        if bus:
            lost.add(bus)
    return sorted(lost)


def judge_counters(prev, cur, seconds, pcie_limit=PCIE_REPLAYS_PER_HOUR, nvlink_limit=NVLINK_ERRORS_PER_HOUR, lost=()):
    """prev/cur: {bus: counters (+ "nvlink": {replay, recovery, crc})}. Returns {"rules", "gpus", "notes"}."""
    rules, gpus, notes = set(), {}, []

    def flag(bus, rule, why):
        rules.add(rule)
        gpus.setdefault(bus, []).append(rule)
        notes.append("GPU %s: %s" % (bus, why))

    for bus, c in sorted((cur or {}).items()):
        p = (prev or {}).get(bus) or {}
        if c.get("remapped_failure"):
            flag(bus, "gpu.xid", "row remapping failed (service the GPU)")
        elif c.get("remapped_pending"):
            flag(bus, "gpu.xid", "a remapped row is pending (reset the GPU to activate it)")
        if c.get("retired_pending"):
            flag(bus, "gpu.xid", "a retired page is pending (reset the GPU)")
        rate = rate_per_hour(p.get("pcie_replays"), c.get("pcie_replays"), seconds)
        if rate is not None and rate > pcie_limit:
            flag(bus, "gpu.pcie_replays", "PCIe replays at %.0f/h (limit %d/h): reseat the GPU or its riser, check the slot" % (rate, pcie_limit))
        for key in ("crc", "replay", "recovery"):
            rate = rate_per_hour((p.get("nvlink") or {}).get(key), (c.get("nvlink") or {}).get(key), seconds)
            if rate is not None and rate >= nvlink_limit and rate > 0:
                flag(bus, "gpu.nvlink_errors", "NVLink %s errors at %.1f/h" % (key, rate))
        faults = fault_reasons(c.get("clock_reasons"))
        if faults:
            notes.append("GPU %s: clocks held down by %s" % (bus, ", ".join(faults)))
            gpus.setdefault(bus, [])
    for bus in lost:
        flag(escape(bus, 20), "gpu.lost", "on the PCI bus but the driver does not answer for it (reboot; service if it stays)")
    return {"rules": sorted(rules), "gpus": {b: sorted(set(r)) for b, r in gpus.items()}, "notes": notes}
