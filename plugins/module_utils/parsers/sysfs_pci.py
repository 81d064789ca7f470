# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe link attributes from sysfs: ``/sys/bus/pci/devices/<bdf>/{current,max}_link_{speed,width}``.

- ``link_from_values(cur_speed, cur_width, max_speed, max_width)``: the four file contents ->
  {width, width_max, gen, gen_max, speed_gts, speed_max_gts, width_degraded}.
- ``read_link(devdir)``: the same, read from a device directory (missing files -> None).
- ``parse_tail_v(text)``: a ``tail -v -n +1 .../*_link_*`` capture -> {bdf: link dict}.
- ``parse_pp_dpm_pcie(text)``: amdgpu's ``pp_dpm_pcie`` levels.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.dlrack.node.plugins.module_utils.parsers import (
    ParseError, normalize_pci_bus_id, parse_speed_gts, pcie_gen_from_speed)

__all__ = ["ParseError", "link_from_values", "read_link", "parse_tail_v", "parse_pp_dpm_pcie"]

FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")


def _width(value):
    if value is None:
        return None
    value = value.strip()
    if not value.isdecimal():
        return None
    w = int(value)
    return w if 0 < w <= 32 else None  # 0 / 255 mean unknown


def link_from_values(cur_speed, cur_width, max_speed, max_width):
    speed, speed_max = parse_speed_gts(cur_speed), parse_speed_gts(max_speed)
    width, width_max = _width(cur_width), _width(max_width)
    return {"width": width, "width_max": width_max,
            "gen": pcie_gen_from_speed(speed), "gen_max": pcie_gen_from_speed(speed_max),
            "speed_gts": speed, "speed_max_gts": speed_max,
            "width_degraded": (width < width_max) if (width and width_max) else None}


def _read(path):
    try:
        with open(path, "r") as fh:
            return fh.read().strip()
    except (OSError, IOError, UnicodeDecodeError):
        return None


def read_link(devdir):
    return link_from_values(*[_read(os.path.join(devdir, f)) for f in FILES])


_TAIL = re.compile(r"^==> (.*) <==$")


def parse_tail_v(text):
    if not isinstance(text, str) or not text.strip():
        raise ParseError("tail -v: empty output")
    files, cur = {}, None
    for ln in text.replace("\r\n", "\n").split("\n"):
        m = _TAIL.match(ln.strip())
        if m:
            cur = m.group(1)
            files[cur] = []
            continue
        if cur is None:
            if ln.strip() and not ln.lstrip().startswith((">", "$", "#")):
                raise ParseError("tail -v: text before the first '==> file <==' header: %r" % ln[:80])
            continue
        if ln.strip():
            files[cur].append(ln.strip())
    if not files:
        raise ParseError("tail -v: no '==> file <==' header")
    devs = {}
    for path, lines in files.items():
        parent, name = os.path.split(path)
        bdf = os.path.basename(parent)
        try:
            bdf = normalize_pci_bus_id(bdf)
        except ParseError:
            raise ParseError("tail -v: %r is not under a PCI device directory" % path)
        devs.setdefault(bdf, {})[name] = lines[0] if lines else None
    return dict((bdf, link_from_values(*[v.get(f) for f in FILES])) for bdf, v in devs.items())


_DPM = re.compile(r"^(\d+):\s*([\d.]+)GT/s,\s*x(\d+)\s*(\d+)\s*Mhz\s*(\*)?$", re.I)


def parse_pp_dpm_pcie(text):
    """amdgpu pp_dpm_pcie: '1: 16.0GT/s, x8 1143Mhz *' -> [{level, speed_gts, gen, width, active}]."""
    out = []
    for ln in (text or "").splitlines():
        s = ln.strip()
        if not s or s.startswith(("$", ">", "#")):
            continue
        m = _DPM.match(s)
        if not m:
            raise ParseError("pp_dpm_pcie: cannot read %r" % s[:80])
        speed = float(m.group(2))
        out.append({"level": int(m.group(1)), "speed_gts": speed,
                    "gen": pcie_gen_from_speed(speed), "width": int(m.group(3)),
                    "active": bool(m.group(5))})
    if not out:
        raise ParseError("pp_dpm_pcie: no levels")
    return out
