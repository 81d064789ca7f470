# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU health for acceptance: ``nvidia-smi -q -x`` (row remapping, retired pages, volatile ECC,
active clock-event (throttle) reasons and their counters, persistence mode, PCIe link capability)
and ``dcgmi diag -r 1 -j`` when DCGM is installed. AMD/Hygon GPUs: amdgpu's RAS sysfs, read by the
vendor seam (hw/gpu/amd.py; formats of the kernel's Documentation/gpu/amdgpu/ras.rst): uncorrected
errors per RAS block since the driver loaded, bad pages retired, pending and failed
(``gpu_vram_bad_pages``), the ECC (UMC) state. Clock throttling is not checked on AMD (amdgpu's
sysfs keeps no throttle history) and each AMD entry says so in ``not_checked``.

The per-GPU fields that the shared parser already reads (remapped rows, retired pages, ECC
counters, PCIe link) come from parsers.nvidia_smi.parse_xml; this file reads only what that parser
does not: persistence mode and the clock-event reasons (``clocks_event_reasons`` since driver 535,
``clocks_throttle_reasons`` before).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import xml.etree.ElementTree as ET

from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import gather_gpus
from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu.pci import SysReader
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError, na, to_bool, to_int
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers.nvidia_smi import parse_xml

# Clock-event reasons that mean a fault or a cooling/power problem when active on an acceptance run.
# gpu_idle, applications_clocks_setting, sw_power_cap (normal under full load), sync_boost and
# display_clocks_setting are not faults.
FAULT_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
# Time (µs) a GPU has spent throttled for thermal/power-brake reasons since the driver loaded.
FAULT_COUNTERS = ("hw_therm_slowdown", "hw_power_brake", "sw_therm_slowdown")


def _reasons(gpu_elem):
    """{reason: bool} of the active clock-event reasons and {counter: µs} of their counters."""
    active, counters = {}, {}
    for tag, prefix in (("clocks_event_reasons", "clocks_event_reason_"),
                        ("clocks_throttle_reasons", "clocks_throttle_reason_")):
        elem = gpu_elem.find(tag)
        if elem is None:
            continue
        for child in elem:
            value = na(child.text)
            if value is None:
                continue
            active[child.tag.replace(prefix, "", 1)] = value.lower() == "active"
    elem = gpu_elem.find("clocks_event_reasons_counters")
    if elem is not None:
        for child in elem:
            counters[child.tag.replace("clocks_event_reasons_counters_", "", 1)] = to_int(child.text)
    return active, counters


def health_from_xml(text):
    """``nvidia-smi -q -x`` -> {driver_version, gpus: [{index, pci_bus_id, product_name, persistence_mode,
    remapped_rows, retired_pages, ecc_volatile_uncorrected, throttle_active, throttle_counters, pcie}]}."""
    parsed = parse_xml(text)
    root = ET.fromstring(text.strip().encode("utf-8") if isinstance(text, str) else text)
    out = []
    for gpu, elem in zip(parsed["gpus"], root.findall("gpu")):
        active, counters = _reasons(elem)
        pm = elem.find("persistence_mode")
        ecc = gpu.get("ecc_errors") or {}
        out.append({
            "index": gpu["index"], "pci_bus_id": gpu["pci_bus_id"], "product_name": gpu["product_name"],
            "persistence_mode": to_bool(pm.text) if pm is not None else None,
            "remapped_rows": gpu["remapped_rows"], "retired_pages": gpu["retired_pages"],
            "ecc_mode": gpu["ecc_mode"]["current"],
            "ecc_volatile_uncorrected": ecc.get("volatile_uncorrected"),
            "throttle_active": sorted(r for r, on in active.items() if on),
            "throttle_counters": counters,
            "pcie": gpu["pcie"],
        })
    return {"driver_version": parsed["driver_version"], "cuda_version": parsed["cuda_version"], "gpus": out}


def gpu_health(nvidia_smi, run):
    """{status: ok|skip|error, reason, driver_version, gpus}. ``run(argv, timeout)`` -> (rc, out, err)."""
    if not nvidia_smi:
        return {"status": "skip", "reason": "nvidia-smi is not installed (no NVIDIA driver on this node)", "gpus": []}
    rc, out, err = run([nvidia_smi, "-q", "-x"], 120)
    if rc != 0:
        msg = (err or out).strip()[-300:]
        if "couldn't communicate with the nvidia driver" in msg.lower() or "no devices were found" in msg.lower():
            return {"status": "skip", "reason": "nvidia-smi: %s" % msg, "gpus": []}
        return {"status": "error", "reason": "nvidia-smi -q -x exited %d: %s" % (rc, msg), "gpus": []}
    try:
        doc = health_from_xml(out)
    except (ParseError, ET.ParseError) as exc:
        return {"status": "error", "reason": str(exc), "gpus": []}
    if not doc["gpus"]:
        return dict(doc, status="skip", reason="nvidia-smi lists no GPU")
    return dict(doc, status="ok", reason=None)


AMD_NOT_CHECKED = "clock throttling (amdgpu sysfs keeps no throttle history; not checked on AMD)"


def _amd_entry(g):
    rp = g.get("retired_pages") or {}
    ecc = g.get("ecc_errors") or {}
    not_checked = [AMD_NOT_CHECKED]
    if g.get("ras") is None:
        not_checked.append("ECC errors and retired pages (amdgpu exposes no RAS files for this GPU)")
    pending = rp.get("pending")
    checked = [what for what, value in (("ECC (UMC) state", g.get("ecc_enabled")),
                                        ("uncorrected errors", ecc.get("volatile_uncorrected")),
                                        ("bad pages", rp or None)) if value is not None]
    return {
        "index": g.get("index"), "pci_bus_id": g.get("pci_bus_id"), "vendor": g.get("vendor") or "amd",
        "product_name": g.get("model") or g.get("pci_name"), "persistence_mode": None, "remapped_rows": None,
        "retired_pages": {"retired": rp.get("retired"), "pending": None if pending is None else pending > 0,
                          "failed": rp.get("failed")} if rp else None,
        "ecc_mode": g.get("ecc_enabled"), "ecc_volatile_uncorrected": ecc.get("volatile_uncorrected"),
        "throttle_active": [], "throttle_counters": {}, "pcie": g.get("pcie"), "checked": checked,
        "not_checked": not_checked,
    }


def amd_gpu_health(root="/"):
    """The AMD/Hygon GPUs' health from amdgpu sysfs alone (no tool runs), or None on a node
    without them: {status: ok|error, reason, source, gpus: [entries shaped as gpu_health's, plus
    vendor and not_checked]}."""
    errors = []
    rd = SysReader(root)
    try:
        gpus = gather_gpus(rd, None, {}, errors, vendors=("amd",))
    except Exception as exc:  # pylint: disable=broad-except  # an odd tree is a reason, never a traceback
        return {"status": "error", "reason": "amdgpu sysfs: unexpected %s: %s" % (type(exc).__name__, exc),
                "source": "amdgpu sysfs", "gpus": []}
    if not gpus:
        return None
    doc = {"status": "ok", "reason": None, "source": "amdgpu sysfs", "driver_version": None,
           "gpus": [_amd_entry(g) for g in gpus]}
    unreadable = errors + rd.errors
    if unreadable:
        doc["unreadable"] = unreadable[:20]
    return doc


def node_gpu_health(nvidia_smi, run, root="/"):
    """gpu_health (nvidia-smi) and amd_gpu_health (amdgpu sysfs) of one node: an AMD node without
    nvidia-smi gets the AMD entries; a mixed node gets both when nvidia-smi answers (a failed
    nvidia-smi stays the error it is)."""
    doc = gpu_health(nvidia_smi, run)
    amd = amd_gpu_health(root)
    if amd is None:
        return doc
    if doc["status"] == "skip" and not doc.get("gpus"):
        return amd
    if doc["status"] == "ok" and amd["status"] == "ok":
        return dict(doc, gpus=doc["gpus"] + amd["gpus"])
    return doc


# ------------------------------------------------------------------------------------------ DCGM

def _dcgm_root(doc):
    for key in ("DCGM GPU Diagnostic", "DCGM Diagnostic"):
        if isinstance(doc.get(key), dict):
            return doc[key]
    return doc


def _texts(items):
    out = []
    for item in items or []:
        if isinstance(item, dict):
            item = item.get("warning") or item.get("message") or item.get("info")
        if item:
            out.append(str(item).strip())
    return out


def parse_dcgm_diag(text):
    """``dcgmi diag -r N -j`` (DCGM 3.x and 4.x shapes) -> {version, tests: [{name, category, status, messages}],
    runtime_error}. Status is the worst of the test's per-entity results: Fail > Warn > Pass > Skip."""
    start = (text or "").find("{")
    if start < 0:
        raise ParseError("dcgmi diag printed no JSON")
    try:
        doc = json.loads(text[start:])
    except ValueError as exc:
        raise ParseError("dcgmi diag printed unreadable JSON (%s)" % exc)
    if not isinstance(doc, dict):
        raise ParseError("dcgmi diag JSON is not an object")
    root = _dcgm_root(doc)
    rank = {"fail": 3, "warn": 2, "pass": 1, "skip": 0}
    tests = []
    cats = root.get("test_categories") or ([{"category": None, "tests": root.get("tests")}] if root.get("tests") else [])
    for cat in cats:
        for test in (cat or {}).get("tests") or []:
            if not isinstance(test, dict):
                continue
            statuses, messages = [], []
            for res in test.get("results") or []:
                if isinstance(res, dict):
                    statuses.append(str(res.get("status") or "").lower())
                    messages += _texts(res.get("warnings")) + ([res["warning"]] if isinstance(res.get("warning"), str) else [])
            summary = test.get("test_summary") or {}
            if summary.get("status"):
                statuses.append(str(summary["status"]).lower())
            messages += _texts(summary.get("info") if isinstance(summary.get("info"), list) else [summary.get("info")])
            known = [s for s in statuses if s in rank]
            status = max(known, key=rank.get) if known else "skip"
            tests.append({"name": test.get("name"), "category": (cat or {}).get("category"), "status": status,
                          "messages": sorted(set(m for m in messages if m))})
    meta = doc.get("metadata") or {}
    return {"version": meta.get("version") or root.get("version"), "tests": tests,
            "runtime_error": root.get("runtime_error") or doc.get("runtime_error")}


def dcgm_diag(dcgmi, run, level=1):
    """{status: ok|skip|error, reason, version, tests}."""
    if not dcgmi:
        return {"status": "skip", "reason": "dcgmi is not installed (DCGM diagnostics not run)", "tests": []}
    rc, out, err = run([dcgmi, "diag", "-r", str(level), "-j"], 900)
    try:
        doc = parse_dcgm_diag(out)
    except ParseError as exc:
        msg = (err or out or str(exc)).strip()[-300:]
        if "connection" in msg.lower() or "host engine" in msg.lower():
            return {"status": "error", "reason": "dcgmi cannot reach the DCGM host engine (start it: systemctl enable "
                                                 "--now nvidia-dcgm): %s" % msg, "tests": []}
        return {"status": "error", "reason": "dcgmi diag -r %d exited %d: %s" % (level, rc, msg), "tests": []}
    if doc["runtime_error"]:
        return dict(doc, status="error", reason="dcgmi diag: %s" % doc["runtime_error"])
    return dict(doc, status="ok", reason=None, level=level)
