# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe link attributes from sysfs: ``/sys/bus/pci/devices/<bdf>/{current,max}_link_{speed,width}``.

- ``link_from_values(cur_speed, cur_width, max_speed, max_width)``: the four file contents ->
  {width, width_max, gen, gen_max, speed_gts, speed_max_gts, width_degraded}.
- ``read_link(devdir)``: the same, read from a device directory (missing files -> None,
  unreadable ones also noted in ``errors``).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import read_text
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import (
    parse_speed_gts, pcie_gen_from_speed)

__all__ = ["link_from_values", "read_link"]

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


def read_link(devdir, errors=None, root=None):
    """The link of a PCI device directory; unreadable files are noted in ``errors``."""
    return link_from_values(*[read_text(os.path.join(devdir, f), limit=256, errors=errors, root=root)
                              for f in FILES])
