# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``lspci -vv`` / ``-vvv`` / ``-vvnn`` device blocks: identity and PCIe link capability/status.

``parse_lspci(text)`` -> list of::

    {slot ('0000:01:00.0' or None for a bare LnkCap/LnkSta snippet), description, class_code
     ('0300' with -nn), vendor_id, device_id, is_nvidia_gpu,
     link: {speed_gts, speed_max_gts, gen, gen_max, width, width_max,
            speed_downgraded, width_downgraded, width_degraded} or None}

``width_degraded`` (negotiated width below capability: x8 of x16) is the fault the
``gpu.pcie_link`` rule checks. ``speed_downgraded`` is reported but is not a fault: GPUs drop to
2.5 GT/s when idle.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dlrack.node.plugins.module_utils.parsers import (
    ParseError, normalize_pci_bus_id, parse_speed_gts, pcie_gen_from_speed, strip_ansi)

__all__ = ["ParseError", "parse_lspci", "parse_lnkcap", "parse_lnksta"]

_DEV = re.compile(r"^((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.*)$")
_CAP = re.compile(r"^LnkCap:\s*(?:Port #(\d+),\s*)?Speed ([^,]+),\s*Width x(\d+)")
_STA = re.compile(r"^LnkSta:\s*Speed ([^,]+),\s*Width x(\d+)(?:\s*\((\w+)\))?")


def parse_lnkcap(line):
    m = _CAP.match(line.strip())
    if not m:
        raise ParseError("lspci: cannot read LnkCap line %r" % line.strip()[:100])
    return {"port": int(m.group(1)) if m.group(1) else None,
            "speed_gts": parse_speed_gts(m.group(2)), "width": int(m.group(3))}


def parse_lnksta(line):
    s = line.strip()
    m = _STA.match(s)
    if not m:
        raise ParseError("lspci: cannot read LnkSta line %r" % s[:100])
    speed = m.group(1).strip()
    return {"speed_gts": parse_speed_gts(speed),
            "speed_downgraded": "(downgraded)" in speed,
            "width": int(m.group(2)) if m.group(2) else None,
            "width_note": m.group(3),  # ok | downgraded | strange | None
            "width_downgraded": m.group(3) == "downgraded"}


def _new(slot, desc):
    dev = {"slot": slot, "description": desc, "class_code": None, "vendor_id": None,
           "device_id": None, "is_nvidia_gpu": False, "link": None, "_cap": None, "_sta": None}
    if desc:
        m = re.search(r"\[([0-9a-fA-F]{4})\]:", desc)
        if m:
            dev["class_code"] = m.group(1).lower()
        m = re.search(r"\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]", desc)
        if m:
            dev["vendor_id"], dev["device_id"] = m.group(1).lower(), m.group(2).lower()
        cls = desc.split(":")[0]
        nvidia = dev["vendor_id"] == "10de" or "NVIDIA Corporation" in desc
        gpu_class = (dev["class_code"] or "")[:4] in ("0300", "0302") or \
            cls.startswith(("VGA compatible controller", "3D controller"))
        dev["is_nvidia_gpu"] = bool(nvidia and gpu_class)
    return dev


def _finish(dev):
    cap, sta = dev.pop("_cap"), dev.pop("_sta")
    if cap or sta:
        cap = cap or {}
        sta = sta or {}
        width, wmax = sta.get("width"), cap.get("width")
        dev["link"] = {
            "speed_gts": sta.get("speed_gts"), "speed_max_gts": cap.get("speed_gts"),
            "gen": pcie_gen_from_speed(sta.get("speed_gts")),
            "gen_max": pcie_gen_from_speed(cap.get("speed_gts")),
            "width": width, "width_max": wmax,
            "speed_downgraded": sta.get("speed_downgraded"),
            "width_downgraded": sta.get("width_downgraded"),
            "width_degraded": (width < wmax) if (width and wmax) else None,
        }
    return dev


def parse_lspci(text):
    if not isinstance(text, str):
        raise ParseError("lspci: expected text")
    devices, cur = [], None
    for raw in strip_ansi(text).replace("\r\n", "\n").split("\n"):
        if not raw.strip():
            continue
        if not raw[:1].isspace():
            m = _DEV.match(raw)
            if m:
                if cur:
                    devices.append(_finish(cur))
                cur = _new(normalize_pci_bus_id(m.group(1)), m.group(2).strip())
                continue
            if raw.startswith("[sudo]") or raw.startswith(("$", ">", "#")):
                continue
        s = raw.strip()
        if s.startswith("LnkCap:"):
            if cur is None or (cur["slot"] is None and cur["_cap"] is not None):
                if cur:
                    devices.append(_finish(cur))
                cur = _new(None, None)
            cur["_cap"] = parse_lnkcap(s)
        elif s.startswith("LnkSta:"):
            if cur is None:
                cur = _new(None, None)
            cur["_sta"] = parse_lnksta(s)
        elif cur is None:
            raise ParseError("lspci: text before the first device line: %r" % s[:80])
    if cur:
        devices.append(_finish(cur))
    if text.strip() and not devices:
        raise ParseError("lspci: no device found")
    return devices
