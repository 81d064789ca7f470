# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Power supplies and GPU power limits (node side, stdlib only; issue 32).

- ``parse_psus(text)``: SMBIOS type 39 records (``dmidecode -t 39``, or a whole ``dmidecode``
  output) -> [{name, location, capacity_w, capacity_text, status, present}]. Boards that leave the
  table unfilled print ``Max Power Capacity: Unknown`` or ``0 W``: ``capacity_w`` is then None and
  ``capacity_text`` says what was printed, so the rule can say "cannot verify".
- ``gpu_limits_from_xml(text)``: each GPU's enforced, default and max power limit from
  ``nvidia-smi -q -x`` (driver >= 525 ``gpu_power_readings``, older ``power_readings``).
- ``parse_smbios_39(raw)``: the same from one raw SMBIOS structure (``/sys/firmware/dmi/entries/39-*/raw``).
- ``gather_power(run, nvidia_smi_path, errors, ...)``: both; the PSUs from the kernel's SMBIOS entries
  (root only, no extra command), the GPUs through the gatherer's bounded runner (the gatherer runs
  ``nvidia-smi -q -x`` once and hands its answer out again).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu.stack import smi_xml_root
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError, normalize_pci_bus_id
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import dmidecode as dmi_parser

MAX_PSUS = 64
XML_LIMIT = 8 << 20


def _watts(text):
    m = re.match(r"^\s*([0-9]{1,7}(?:\.[0-9]+)?)\s*W\s*$", text or "")
    if not m:
        return None
    value = float(m.group(1))
    return value if value > 0 else None


def parse_psus(text):
    """The System Power Supply records (SMBIOS type 39) of a dmidecode output, read by the collection's
    dmidecode parser (hw/parsers/dmidecode.py; see the module docstring). [] for text without them."""
    try:
        records = dmi_parser.parse_dmidecode(text)["records"] if isinstance(text, str) else []
    except ParseError:
        return []
    out = []
    for rec in records:
        if rec["type"] != 39 or len(out) >= MAX_PSUS:
            continue
        props = dict((k, v) for k, v in rec["props"].items() if isinstance(v, str))
        capacity = props.get("Max Power Capacity")
        status = props.get("Status")
        out.append({"name": props.get("Name", "")[:120] or None, "location": props.get("Location", "")[:120] or None,
                    "capacity_w": _watts(capacity) if capacity is not None else None,
                    "capacity_text": capacity[:40] if capacity is not None else None,
                    "status": status[:60] if status is not None else None,
                    "present": status.lower().startswith("present") if status is not None else None})
    return out


def _tag(block, name):
    node = block.find(name) if block is not None else None
    return _watts(node.text[:40]) if node is not None and node.text else None


def gpu_limits_from_xml(text):
    """[{pci_bus_id, limit_w, default_w, max_w}] from ``nvidia-smi -q -x`` (parsed as hw/gpu/stack.py
    parses it for the versions); N/A -> None, output that is not the tool's XML -> []."""
    try:
        root = smi_xml_root((text or "")[:XML_LIMIT])
    except ParseError:
        return []
    out = []
    for gpu in root.findall("gpu"):
        try:
            bus = normalize_pci_bus_id(gpu.get("id"))
        except ParseError:
            continue
        block = gpu.find("gpu_power_readings")
        block = block if block is not None else gpu.find("power_readings")
        limit = _tag(block, "current_power_limit") or _tag(block, "enforced_power_limit") or _tag(block, "power_limit")
        out.append({"pci_bus_id": bus, "limit_w": limit, "default_w": _tag(block, "default_power_limit"),
                    "max_w": _tag(block, "max_power_limit")})
    return out


_STATUS = {1: "Other", 2: "Unknown", 3: "OK", 4: "Non-critical", 5: "Critical"}


def parse_smbios_39(raw):
    """One SMBIOS type 39 structure as the kernel exposes it (``/sys/firmware/dmi/entries/39-N/raw``,
    SMBIOS 3.x section 7.40): the same fields as ``parse_psus``; None for anything else.
    Max Power Capacity 0x8000 means unknown."""
    raw = bytearray(raw or b"")
    if len(raw) < 0x10 or raw[0] != 39 or raw[1] < 0x10 or raw[1] > len(raw):
        return None
    strings = bytes(raw[raw[1]:]).split(b"\0")

    def string(index):
        idx = raw[index]
        if not idx or idx > len(strings):
            return None
        return strings[idx - 1].decode("ascii", "replace").strip()[:120] or None
    capacity = raw[0x0C] | (raw[0x0D] << 8)
    chars = raw[0x0E] | (raw[0x0F] << 8)
    text = "Unknown" if capacity == 0x8000 else "%d W" % capacity
    status = _STATUS.get((chars >> 7) & 0x7)
    present = bool(chars & 0x2)
    return {"name": string(0x06), "location": string(0x05), "capacity_w": _watts(text), "capacity_text": text,
            "status": ("Present, %s" % status if present else "Not Present") if status else None, "present": present}


def read_smbios_psus(root, listdir, read_bytes):
    """The type 39 entries under ``/sys/firmware/dmi/entries`` (readable by root only), or None when
    there is none to read (no such table, not root, a VM without it)."""
    base = root.rstrip("/") + "/sys/firmware/dmi/entries"
    out, seen = [], False
    for name in listdir(base):
        if not re.match(r"^39-[0-9]{1,4}$", name) or len(out) >= MAX_PSUS:
            continue
        seen = True
        psu = parse_smbios_39(read_bytes(base + "/" + name + "/raw"))
        if psu:
            out.append(psu)
    return out if seen and out else None


def gather_power(run, nvidia_smi_path, errors, root="/", listdir=None, read_bytes=None, dmidecode_text=None):
    """{source, psus (None when no SMBIOS type 39 table could be read: not root, VM, absent), gpus}.
    The PSUs come from the kernel's SMBIOS entries (no dmidecode run), or ``dmidecode_text`` when
    the caller has it; the GPUs' limits from ``nvidia-smi -q -x`` (the gatherer's one call)."""
    doc = {"source": None, "psus": None, "gpus": []}
    if dmidecode_text is not None:
        doc["psus"], doc["source"] = parse_psus(dmidecode_text) or None, "dmidecode"
    elif listdir is not None and read_bytes is not None:
        doc["psus"] = read_smbios_psus(root, listdir, read_bytes)
        doc["source"] = "smbios" if doc["psus"] is not None else None
    if nvidia_smi_path:
        res = run([nvidia_smi_path, "-q", "-x"])
        if res[0] == 0:
            doc["gpus"] = gpu_limits_from_xml(res[1])
    return doc
