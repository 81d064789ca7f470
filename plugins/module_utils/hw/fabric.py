# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""InfiniBand / RoCE ports from ``/sys/class/infiniband`` (node side, stdlib only; issue 32).

- ``read_ports(root, errors)``: every port of every RDMA device: state, physical state, rate (Gb/s)
  and width/speed words (``56 Gb/sec (4X FDR)``), link layer (InfiniBand or Ethernet = RoCE), the
  device's firmware, its PCI address, the non-empty P_Keys and the error counters the rules judge.
- ``counter_rates(first, second, seconds)``: per port, how much each error counter grew between two
  reads of one run and the rate per second (a counter that went back, reset or wrapped, is None).
  The gatherer reads the counters when it starts and again when it ends, at least ``MIN_INTERVAL_S``
  apart (it waits the rest only on hosts that have ports).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import listdir, read_int, read_text, under

MAX_DEVICES = 64
MAX_PORTS = 8
MAX_PKEYS = 64
MIN_INTERVAL_S = 0.5
# the IBA PortCounters that mean a sick link (IBA 1.3 vol. 1, 16.1.3.5): symbol errors, link
# downed, excessive buffer overruns; plus receive errors and link error recoveries for context
COUNTERS = ("symbol_error", "link_downed", "excessive_buffer_overrun_errors", "port_rcv_errors",
            "link_error_recovery")


def _state(text):
    """'4: ACTIVE' -> 'ACTIVE'; '5: LinkUp' -> 'LinkUp'."""
    if not text:
        return None
    return text.split(":", 1)[-1].strip()[:32] or None


def parse_rate(text):
    """'56 Gb/sec (4X FDR)' -> (56.0, '4X', 'FDR'); '100 Gb/sec (2X HDR)'; '25 Gb/sec (1X EDR)'."""
    m = re.match(r"^\s*([0-9]{1,5}(?:\.[0-9]+)?)\s*Gb/sec(?:\s*\((\d{1,2}X)\s*([A-Z]{2,4})?\))?", text or "")
    if not m:
        return None, None, None
    return float(m.group(1)), m.group(2), m.group(3)


def _counters(portdir):
    out = {}
    for name in COUNTERS:
        value = read_int(os.path.join(portdir, "counters", name))      # ASCII digits only, else None
        out[name] = value if value is not None and 0 <= value < 1 << 63 else None   # hwschema err_count
    return out


def read_ports(root="/", errors=None, pkeys=True):
    """[{device, port, state, phys_state, rate_gbps, width, speed, link_layer, fw, pci_bus_id,
    pkeys, counters}] for every RDMA port under ``root`` (``pkeys=False``: the P_Key table, up to
    128 files a port, is left unread and [] - the second read of a run wants the counters only)."""
    base = under(root, "/sys/class/infiniband")
    out = []
    for dev in listdir(base, errors=errors, root=root)[:MAX_DEVICES]:
        devdir = os.path.join(base, dev)
        pci = os.path.basename(os.path.realpath(os.path.join(devdir, "device")))
        pci = pci if re.match(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", pci) else None
        fw = read_text(os.path.join(devdir, "fw_ver"), limit=64, errors=errors, root=root)
        for port in listdir(os.path.join(devdir, "ports"))[:MAX_PORTS]:
            if not re.match(r"^[0-9]{1,3}$", port):
                continue
            portdir = os.path.join(devdir, "ports", port)
            rate, width, speed = parse_rate(read_text(os.path.join(portdir, "rate"), limit=128))
            keys = []
            pdir = os.path.join(portdir, "pkeys")
            for idx in sorted(listdir(pdir) if pkeys else [], key=lambda n: int(n) if re.match(r"^[0-9]{1,6}$", n) else 1 << 20)[:256]:
                value = (read_text(os.path.join(pdir, idx), limit=16) or "").lower()
                if re.match(r"^0x[0-9a-f]{4}$", value) and value not in ("0x0000", "0x8000") and len(keys) < MAX_PKEYS:
                    keys.append(value)
            out.append({"device": dev[:64], "port": int(port), "state": _state(read_text(os.path.join(portdir, "state"), limit=64)),
                        "phys_state": _state(read_text(os.path.join(portdir, "phys_state"), limit=64)),
                        "rate_gbps": rate, "width": width, "speed": speed,
                        "link_layer": (read_text(os.path.join(portdir, "link_layer"), limit=32) or None),
                        "fw": fw[:64] if fw else None, "pci_bus_id": pci, "pkeys": keys,
                        "counters": _counters(portdir)})
    return out


def counter_rates(first, second, seconds):
    """{(device, port): {counter: {"delta": n, "per_s": x}}} between two ``read_ports`` answers."""
    before = dict(((p["device"], p["port"]), p["counters"]) for p in first)
    out = {}
    for port in second:
        key = (port["device"], port["port"])
        old = before.get(key) or {}
        rates = {}
        for name, value in (port.get("counters") or {}).items():
            prev = old.get(name)
            if value is None or prev is None or value < prev:
                rates[name] = None
                continue
            rates[name] = {"delta": value - prev, "per_s": round((value - prev) / seconds, 3) if seconds > 0 else None}
        out[key] = rates
    return out


class Sampler(object):
    """The first read at the start of a gather and the second at its end (``finish``), at least
    ``MIN_INTERVAL_S`` apart; ``finish`` returns the ports with ``counter_rates`` and ``interval_s``."""

    def __init__(self, root="/", errors=None, clock=None, sleep=None):
        import time
        self.root, self.errors = root, errors
        self.clock, self.sleep = clock or time.monotonic, sleep or time.sleep
        self.first = read_ports(root, errors)
        self.start = self.clock()

    def finish(self):
        if not self.first:
            return {"ports": []}
        waited = self.clock() - self.start
        if waited < MIN_INTERVAL_S:
            self.sleep(MIN_INTERVAL_S - waited)
        second = read_ports(self.root, self.errors, pkeys=False)
        seconds = max(self.clock() - self.start, 1e-3)
        rates = counter_rates(self.first, second, seconds)
        keys = dict(((p["device"], p["port"]), p["pkeys"]) for p in self.first)
        for port in second:
            port["pkeys"] = keys.get((port["device"], port["port"]), [])
            port["counter_rates"] = rates.get((port["device"], port["port"]))
            port["interval_s"] = round(seconds, 3)
        return {"ports": second}
