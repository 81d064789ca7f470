# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stateful judgement of GPU fault events, per GPU and code.

- a burst (the same code on the same GPU within ``burst_s``) is one event with a ``repeats`` count;
- the same code on more than ``workload_fraction`` of the node's GPUs within ``workload_window_s`` is
  the workload: reported, never drained. Only a code the catalog calls the workload's (action
  check_workload or none, class not memory, NVLink, bus or thermal/power) can be: a double-bit error,
  a GPU fallen off the bus, an NVLink or thermal fault on most GPUs at once is the node's hardware
  (power, cooling, fabric), and a driver's reset code is the driver's;
- per GPU and code the state keeps counts since boot, the recent event times and the boots it was
  seen in (boot id); a code reaching its count within its window calls for its action; an
  application code repeating on one GPU is read as hardware (its action becomes ``reset_gpu``);
- a hardware code seen again after ``escalate_after_reboots`` reboots escalates the GPU to
  ``service`` (service required);
- an event older than the node's last accepted state (``accepted_at``) or outside its window never
  keeps the node drained.

State file (JSON, written atomically by the caller): ``{"schema": 1, "boot_id": ..., "position": {...},
"gpus": {bus: {code_key: {"since_boot": {boot: n}, "times": [...], "boots": [...], "last": t}}}}``.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.catalog import ACTIONS, FAMILIES, Catalog, action_rank

DEFAULTS = {
    "burst_s": 10,
    "workload_window_s": 60,
    "workload_fraction": 0.5,
    "escalate_after_reboots": 1,
    "max_events_kept": 64,
    "max_boots_kept": 16,
    "max_gpus_kept": 64,
}
HARDWARE_CLASSES = ("memory", "nvlink", "bus", "thermal_power")
# the only actions a code read as the workload can have: a code that calls for a reset, reboot or
# service is never the workload's, however many GPUs show it at once
WORKLOAD_ACTIONS = ("none", "check_workload")
DRAIN_ACTIONS = ("reset_gpu", "reboot", "service")
MAX_EVENTS_REPORTED = 200


def family_of(event):
    if event["vendor"] == "amd":
        return "amd"
    if event["kind"] == "sxid":
        return "sxid"
    if event["kind"] == "fallen_off_bus":
        return "xid"
    return "xid"


def code_key(event):
    return "%s:%s" % (family_of(event), event["code"])


def _time(event):
    return event["ts"] if event.get("ts") is not None else event.get("mono")


def classify(events, catalog):
    """Adds class, action, mnemonic, catalog count/window to each event (in place) and returns them."""
    for event in events:
        entry = catalog.lookup(family_of(event), event["code"])
        event["class"] = entry["class"]
        event["action"] = entry["action"]
        event["mnemonic"] = entry["mnemonic"]
        event["known"] = entry["known"]
        if event.get("recovery"):
            low = event["recovery"].lower()
            if "reboot" in low:
                event["action"] = "reboot"
            elif "reset" in low or "drain" in low:
                event["action"] = "reset_gpu"
    return events


def dedup(events, burst_s):
    """One event per burst: same vendor, GPU and code within burst_s seconds (or both without time)."""
    out = []
    last = {}
    for event in events:
        key = (event["vendor"], event.get("bus_id"), code_key(event), event.get("boot_id"))
        t = _time(event)
        prev = last.get(key)
        if prev is not None:
            pt = prev.get("_last_t")
            if (t is None and pt is None) or (t is not None and pt is not None and 0 <= t - pt <= burst_s):
                prev["repeats"] += 1
                prev["_last_t"] = t
                continue
        event = dict(event)
        event["repeats"] = 1
        event["_last_t"] = t
        last[key] = event
        out.append(event)
    for event in out:
        event["_end"] = event.pop("_last_t", None)      # the burst's last time (judge: a burst that goes on in the next read)
    return out


def mark_workload(events, n_gpus, window_s, fraction):
    """The same code on most GPUs of the node within window_s: scope 'workload'; else 'gpu'."""
    for event in events:
        event["scope"] = "gpu"
    by_code = {}
    for event in events:
        by_code.setdefault(code_key(event), []).append(event)
    need = max(2, int(math.floor(fraction * n_gpus)) + 1) if n_gpus else 2
    for key, group in by_code.items():
        first = group[0]
        if first["class"] in HARDWARE_CLASSES or first["action"] not in WORKLOAD_ACTIONS or first["kind"] == "sxid" \
                or first.get("recovery"):
            continue
        for event in group:
            t = _time(event)
            near = set()
            for other in group:
                ot = _time(other)
                if other.get("bus_id") and (t is None and ot is None or t is not None and ot is not None and abs(ot - t) <= window_s):
                    near.add(other["bus_id"])
            if len(near) >= need:
                event["scope"] = "workload"
    return events


class Judge:
    def __init__(self, catalog=None, overrides=None, **conf):
        self.catalog = catalog or Catalog(overrides)
        self.conf = dict(DEFAULTS)
        self.conf.update({k: v for k, v in conf.items() if k in DEFAULTS and v is not None})

    def judge(self, events, state=None, now=None, boot=None, accepted_at=None, gpus=None):
        """events: this read's events (never judged before). Returns (verdict, new_state)."""
        state = _clean_state(state)
        boot = boot or state.get("boot_id")
        events = classify(list(events), self.catalog)
        events = dedup(events, self.conf["burst_s"])
        known_gpus = {g.get("pci_bus_id"): g for g in (gpus or []) if isinstance(g, dict) and g.get("pci_bus_id")}
        seen = set(known_gpus) | set(e["bus_id"] for e in events if e.get("bus_id") and e["kind"] != "sxid")
        n_gpus = len(known_gpus) or len(seen)
        mark_workload(events, n_gpus, self.conf["workload_window_s"], self.conf["workload_fraction"])
        now = now if now is not None else max([_time(e) for e in events if _time(e) is not None] or [0])
        # merge into the state: counts since boot, recent times, boots seen
        for event in events:
            bus = event.get("bus_id") or "node"
            gstate = state["gpus"].setdefault(bus, {})
            cstate = gstate.setdefault(code_key(event), {"since_boot": {}, "times": [], "boots": [], "workload": 0, "action": None})
            eboot = event.get("boot_id") or boot or "unknown"
            cstate["since_boot"][eboot] = cstate["since_boot"].get(eboot, 0) + event["repeats"]
            if event["scope"] == "workload":
                cstate["workload"] += 1
                continue
            t = _time(event)
            if action_rank(event["action"]) > action_rank(cstate.get("action")):
                cstate["action"] = event["action"]      # the driver's own recovery action (Xid 154) when it says more
            end = event.get("_end") if event.get("_end") is not None else t
            last, last_boot = cstate.get("last"), (cstate["times"][-1][1] if cstate["times"] else None)
            if t is not None and last is not None and last_boot == eboot and 0 <= t - last <= self.conf["burst_s"]:
                cstate["last"] = end                    # the burst the previous read ended in goes on: still one event
                continue
            cstate["times"] = (cstate["times"] + [[t, eboot]])[-self.conf["max_events_kept"]:]
            if eboot not in cstate["boots"]:
                cstate["boots"] = (cstate["boots"] + [eboot])[-self.conf["max_boots_kept"]:]
            cstate["last"] = end
        if len(state["gpus"]) > self.conf["max_gpus_kept"]:
            for bus in sorted(state["gpus"], key=lambda b: _last_of(state["gpus"][b]))[:len(state["gpus"]) - self.conf["max_gpus_kept"]]:
                del state["gpus"][bus]
        state["boot_id"] = boot
        verdict = self._verdict(state, events, now, boot, accepted_at, known_gpus)
        return verdict, state

    def _verdict(self, state, events, now, boot, accepted_at, known_gpus):
        gpus = {}
        notes = []
        for bus, codes in sorted(state["gpus"].items()):
            for key, cstate in sorted(codes.items()):
                family, code = key.split(":", 1)
                entry = self.catalog.lookup(family, code)
                action, count, window = entry["action"], entry["count"], entry["window_s"]
                if action != "none" and action_rank(cstate.get("action")) > action_rank(action):
                    action = cstate["action"]
                if action == "none" or count <= 0:
                    continue
                current = [t for t, b in cstate["times"]
                           if b == boot and t is not None and (accepted_at is None or t > accepted_at)
                           and (now is None or now - t <= window)]
                untimed = [t for t, b in cstate["times"] if t is None and b == boot]
                hits = len(current) + len(untimed)
                boots_after_accept = [b for b in cstate["boots"]
                                      if any(tb == b and (t is None or accepted_at is None or t > accepted_at) for t, tb in cstate["times"])]
                hardware = entry["class"] in HARDWARE_CLASSES or action_rank(action) >= action_rank("reset_gpu")
                result = None
                if hits >= count:
                    result = action
                    if action == "check_workload":
                        result = "reset_gpu"
                        notes.append("%s %s: %d times on one GPU within %d s: read as hardware, not the workload"
                                     % (bus, key, hits, window))
                if hardware and boot in boots_after_accept and len(boots_after_accept) > self.conf["escalate_after_reboots"] \
                        and action_rank(action) >= action_rank("reset_gpu"):
                    result = "service"
                    notes.append("%s %s: seen again after %d reboot(s): service required"
                                 % (bus, key, len(boots_after_accept) - 1))
                if result is None:
                    continue
                gpu = gpus.setdefault(bus, {"pci_bus_id": bus, "action": "none", "codes": [], "rules": []})
                info = known_gpus.get(bus) or {}
                for field in ("index", "uuid"):
                    if info.get(field) is not None:
                        gpu[field] = info[field]
                gpu["codes"].append({"code": key, "action": result, "class": entry["class"], "count": hits,
                                     "since_boot": cstate["since_boot"].get(boot, 0), "mnemonic": entry["mnemonic"]})
                if action_rank(result) > action_rank(gpu["action"]):
                    gpu["action"] = result
                rule = rule_for(family, entry["class"])
                if result in DRAIN_ACTIONS and rule not in gpu["rules"]:
                    gpu["rules"].append(rule)
        rules = sorted(set(r for g in gpus.values() for r in g["rules"]))
        workload = sorted(set(code_key(e) for e in events if e["scope"] == "workload"))
        for key in workload:
            notes.append("%s on most GPUs at once: the workload (reported, not drained)" % key)
        for e in events:
            if e.get("uuid") and e.get("bus_id") in gpus:
                gpus[e["bus_id"]].setdefault("uuid", e["uuid"])
        return {"rules": rules, "gpus": gpus, "workload": workload, "notes": notes,
                "events": [_public(e) for e in events[:MAX_EVENTS_REPORTED]],
                "events_total": len(events), "catalog_version": self.catalog.version}


def rule_for(family, cls):
    if cls == "bus":
        return "gpu.lost"
    if cls == "nvlink":
        return "gpu.nvlink_errors"
    return "gpu.xid"


def _public(event):
    keys = ("vendor", "kind", "bus_id", "uuid", "code", "class", "action", "scope", "repeats", "mnemonic",
            "ts", "mono", "boot_id", "pid", "process", "device", "recovery", "text")
    return {k: event[k] for k in keys if event.get(k) is not None}


def _last_of(codes):
    return max([c.get("last") or 0 for c in codes.values()] or [0])


def _clean_state(state):
    if not isinstance(state, dict) or state.get("schema") != 1 or not isinstance(state.get("gpus"), dict):
        return {"schema": 1, "boot_id": None, "position": {}, "gpus": {}}
    out = {"schema": 1, "boot_id": state.get("boot_id") if isinstance(state.get("boot_id"), str) else None,
           "position": state.get("position") if isinstance(state.get("position"), dict) else {}, "gpus": {}}
    for bus, codes in state["gpus"].items():
        if not isinstance(codes, dict):
            continue
        good = {}
        for key, c in codes.items():
            if not isinstance(c, dict) or str(key).partition(":")[0] not in FAMILIES or ":" not in str(key):
                continue                    # not FAMILY:CODE (a hand-edited or foreign state file)
            times = [t for t in c.get("times", []) if isinstance(t, list) and len(t) == 2
                     and (t[0] is None or isinstance(t[0], (int, float))) and isinstance(t[1], str)]
            good[str(key)] = {"since_boot": {str(k): v for k, v in (c.get("since_boot") or {}).items() if isinstance(v, int)},
                              "times": times, "boots": [b for b in c.get("boots", []) if isinstance(b, str)],
                              "workload": c.get("workload") if isinstance(c.get("workload"), int) else 0,
                              "action": c.get("action") if c.get("action") in ACTIONS else None,
                              "last": c.get("last") if isinstance(c.get("last"), (int, float)) else None}
        out["gpus"][str(bus)] = good
    return out
