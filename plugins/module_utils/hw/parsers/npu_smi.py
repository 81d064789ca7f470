# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Huawei Ascend ``npu-smi info``: the table the tool prints, in every layout seen on real
machines (tests/data/real/ascend/, one capture per layout and release):

- 910B/910B4 (npu-smi 24.1.1, 25.2.0): header rows ``NPU Name | Health | Power(W) Temp(C)
  Hugepages-Usage(page)`` and ``Chip | Bus-Id | AICore(%) Memory-Usage(MB) HBM-Usage(MB)``;
- Atlas A3 (24.1.rc3.7, 26.0.rc2, a wider table): the second header row is ``Chip Phy-ID``, each
  NPU two chips (two row pairs with the same NPU id; the second chip's power is "-");
- 310P3 / Atlas 300I Duo (25.0.rc1, 25.2.0): ``Chip Device`` and no HBM column (the chip's memory is
  ``Memory-Usage``), both chips of a card on one bus id.

Each chip is two table rows: ``<npu> <name> | <health> | <power> <temp> <hugepages used> / <total>``
then ``<chip> [<phy id>] | <bus id> | <aicore> <mem used> / <total> [<hbm used> / <total>]``. The
process table that follows (``Process id``) is not read. A value the tool prints as "NA" or "-"
is unknown (None); a bus id it masks ("0000:xx:00.0") is None.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError, normalize_pci_bus_id

__all__ = ["ParseError", "parse_info", "MAX_CHIPS"]

MAX_CHIPS = 256
MAX_TEXT = 4 << 20
_PAIR = re.compile(r"([0-9]+)\s*/\s*([0-9]+)")
_VERSION = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)")


def _num(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return int(value) if value.is_integer() else value


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _bus(text):
    try:
        return normalize_pci_bus_id(text)
    except ParseError:
        return None


def parse_info(text):
    """``npu-smi info`` -> {version, chips: [{npu, name, health, power_w, temp_c, chip, phy_id,
    bus_id, aicore_pct, memory_used_mb, memory_total_mb, hbm_used_mb, hbm_total_mb}]} in the
    order printed. ``phy_id`` is the Phy-ID (A3) or Device (310P) column, None where the layout
    has neither (910B: the NPU id is the device). ParseError when no NPU table is found."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str) or not text.strip():
        raise ParseError("npu-smi info: empty output")
    text = text[:MAX_TEXT]
    version = _VERSION.search(text)
    has_hbm = has_phy = None
    chips, head = [], None
    for line in text.splitlines():
        if not line.lstrip().startswith("|"):
            continue
        cells = _cells(line)
        if len(cells) < 3:
            continue
        if "Process id" in line or "Process name" in line:
            break                                   # the process table
        if cells[0].startswith("NPU") and "Health" in cells[1]:
            continue                                # first header row
        if cells[0].startswith("Chip") and "Bus-Id" in cells[1]:
            has_hbm = "HBM-Usage" in cells[2]
            has_phy = len(cells[0].split()) > 1     # "Chip  Phy-ID" / "Chip    Device"
            continue
        m = re.match(r"^([0-9]{1,4})(?:\s+([0-9]{1,4}))?$", cells[0])
        if m and head is not None:                  # second row of a chip: chip [phy id] | bus | usage
            pairs = _PAIR.findall(cells[2])
            first = cells[2].split()[0] if cells[2].split() else None
            chips.append(dict(head, chip=int(m.group(1)),
                              phy_id=int(m.group(2)) if m.group(2) is not None else None,
                              bus_id=_bus(cells[1]), aicore_pct=_num(first),
                              memory_used_mb=int(pairs[0][0]) if pairs else None,
                              memory_total_mb=int(pairs[0][1]) if pairs else None,
                              hbm_used_mb=int(pairs[1][0]) if has_hbm and len(pairs) > 1 else None,
                              hbm_total_mb=int(pairs[1][1]) if has_hbm and len(pairs) > 1 else None))
            head = None
            if len(chips) >= MAX_CHIPS:
                break
            continue
        m = re.match(r"^([0-9]{1,4})\s+(\S.{0,63})$", cells[0])
        if m:                                       # first row of a chip: npu name | health | power temp
            nums = cells[2].split()
            head = {"npu": int(m.group(1)), "name": m.group(2).strip(), "health": cells[1] or None,
                    "power_w": _num(nums[0]) if nums else None, "temp_c": _num(nums[1]) if len(nums) > 1 else None}
    if has_hbm is None and not chips:
        raise ParseError("npu-smi info: no NPU table in the output (%r...)" % text.strip()[:60])
    return {"version": version.group(2) if version else None, "layout_has_phy_id": bool(has_phy),
            "chips": chips}
