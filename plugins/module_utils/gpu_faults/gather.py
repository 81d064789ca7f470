# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``dlrack_hw.gpu_faults`` for the gatherer (hw/gather.py): read-only.

The kernel log of the current boot is judged without a saved position and without writing state (a
gather never changes the node): the judgement the node's health check keeps over time is its own.
The counters come from the ``nvidia-smi -q -x`` the gatherer already ran (the same argv: its runner
answers from memory) and ``nvidia-smi nvlink -e``, rated against the ECC collector's previous read when it left one
(``COUNTERS_STATE``). Only for the live system (root ``/``): a captured tree carries no kernel log.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults import counters as fault_counters
from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.cli import check, read_state_text
from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import write_atomic

COUNTERS_STATE = "/var/lib/dlrack/gpu-counters.json"
GATHER_LIMITS = {"max_bytes": 8 * 1024 * 1024, "timeout_s": 5}


def read_counter_state(path=COUNTERS_STATE):
    try:
        doc = json.loads(read_state_text(path, 1024 * 1024) or "null")
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("gpus"), dict) else None


def write_counter_state(path, gpus, now=None):
    directory = os.path.dirname(path)
    if directory and not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    write_atomic(path, json.dumps({"schema": 1, "time": now if now is not None else time.time(), "gpus": gpus}, sort_keys=True))


def counters_section(xml_text, prev_state=None, now=None, nvlink_text=None):
    """{"gpus": {bus: counters}, "rates": judged rates and fault notes} from one nvidia-smi -q -x read and,
    where given, one ``nvidia-smi nvlink -e`` read (NVLink CRC/replay/recovery counters, rated like the rest)."""
    now = now if now is not None else time.time()
    cur = fault_counters.counters_from_xml(xml_text)
    if nvlink_text:
        fault_counters.attach_nvlink(cur, fault_counters.nvlink_errors(nvlink_text))
    prev = (prev_state or {}).get("gpus") or {}
    seconds = now - prev_state["time"] if prev_state and isinstance(prev_state.get("time"), (int, float)) else None
    verdict = fault_counters.judge_counters(prev, cur, seconds)
    return {"gpus": cur, "interval_s": seconds, "rules": verdict["rules"], "notes": verdict["notes"], "by_gpu": verdict["gpus"]}


def gather_faults(root, run, nvidia_smi, errors, gpus=None, conf=None):
    if root not in ("/", "", None):
        return None
    raw = dict(GATHER_LIMITS)
    raw.update(conf or {})
    raw["state_file"] = os.devnull
    verdict = check(raw, gpus=gpus, dry_run=True)
    doc = {"catalog_version": verdict.get("catalog_version"), "source": verdict.get("source"),
           "rules": verdict.get("rules", []), "gpus": verdict.get("gpus", {}), "workload": verdict.get("workload", []),
           "events": verdict.get("events", [])[:50], "events_total": verdict.get("events_total", 0),
           "notes": verdict.get("notes", [])[:20], "counters": None}
    if nvidia_smi:
        res = run([nvidia_smi, "-q", "-x"])
        if res[0] == 0 and res[1]:
            nvlink = run([nvidia_smi, "nvlink", "-e"])
            try:
                doc["counters"] = counters_section(res[1], read_counter_state(), nvlink_text=nvlink[1] if nvlink[0] == 0 else None)
            except Exception as exc:  # a malformed XML is the GPU section's error to report; note it here
                errors.append("gpu_faults: nvidia-smi -q -x counters unreadable (%s)" % type(exc).__name__)
        lost = lost_nvidia_gpus(gpus, doc["counters"], res)
        if lost:
            counters = doc["counters"] or {"gpus": {}, "rules": [], "notes": [], "by_gpu": {}, "interval_s": None}
            extra = fault_counters.judge_counters({}, {}, None, lost=lost)
            counters["rules"] = sorted(set(counters["rules"]) | set(extra["rules"]))
            counters["notes"] = counters["notes"] + extra["notes"]
            counters["by_gpu"].update(extra["gpus"])
            doc["counters"] = counters
    return doc


def lost_nvidia_gpus(gpus, counters, res):
    """NVIDIA GPUs the gatherer found on the PCI bus (vendor 0x10de) that nvidia-smi does not answer for."""
    on_bus = [g.get("pci_bus_id") for g in (gpus or []) if isinstance(g, dict) and str(g.get("vendor_id", "")).lower() == "0x10de"
              and g.get("pci_bus_id")]
    if not on_bus:
        return []
    answered = list(((counters or {}).get("gpus") or {}).keys())
    if res[0] == 0 and not answered:
        return []            # nvidia-smi answered but its XML was not read: nothing to compare
    return fault_counters.lost_gpus(on_bus, answered, "%s\n%s" % (res[1] if res[0] else "", res[2] or ""))
