# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dmidecode text output (full, or ``-t memory`` / ``-t system`` / ``-t processor``).

``parse_dmidecode(text)`` returns::

    {records: [{handle, type, title, props: {key: value | [list items]}}],
     system: {manufacturer, product_name, version, serial} or None,
     processors: [{socket, version, manufacturer, core_count, thread_count, populated}],
     memory_arrays: [{handle, use, ecc_raw, ecc, max_capacity, devices}],
     dimms: [{handle, array_handle, locator, bank_locator, size_mb, type, speed, manufacturer,
              part_number, total_width, data_width, ecc_width, system_memory}],
     ecc: 'multi-bit' | 'single-bit' | 'none' | 'unknown'}

ECC comes from the Physical Memory Arrays (type 16) whose Use is System Memory: "Multi-bit ECC"
and "Single-bit ECC" both mean ECC, "None" means none; several arrays give the weakest. Type 7
(cache) "Parity" entries do not count. A DIMM whose Total Width exceeds its Data Width carries
ECC bits (``ecc_width``), which is reported per DIMM but does not override type 16.
Installed RAM (``installed_dimms``) is the populated type 17 devices of those same System Memory
arrays (``system_memory``): a BIOS flash chip in a "Flash Memory" array is a type 17 device too.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError, na, to_int

__all__ = ["ParseError", "parse_dmidecode", "normalize_ecc", "parse_size_mb"]

_HANDLE = re.compile(r"^Handle (0x[0-9A-Fa-f]+), DMI type (\d+), (\d+) bytes")

_ECC = {
    "multi-bit ecc": "multi-bit",
    "single-bit ecc": "single-bit",
    "none": "none",
}
_RANK = {"none": 0, "unknown": 1, "single-bit": 2, "multi-bit": 3}


def normalize_ecc(value):
    """dmidecode 'Error Correction Type' -> multi-bit | single-bit | none | unknown."""
    if value is None:
        return "unknown"
    return _ECC.get(value.strip().lower(), "unknown")


def parse_size_mb(value):
    """'64 GB' / '16384 MB' / '512 kB' / 'No Module Installed' -> MiB (int) or None."""
    value = na(value)
    if value is None:
        return None
    m = re.match(r"^(\d+(?:\.\d+)?)\s*(bytes|kB|KB|MB|GB|TB)$", value)
    if not m:
        return None
    factor = {"bytes": 1.0 / (1024 * 1024), "kB": 1.0 / 1024, "KB": 1.0 / 1024, "MB": 1, "GB": 1024,
              "TB": 1024 * 1024}[m.group(2)]
    return int(round(float(m.group(1)) * factor))


_PLACEHOLDERS = frozenset(["to be filled by o.e.m.", "default string", "not specified", "none",
                           "system product name", "system manufacturer", "o.e.m.", "--"])


def _real(value):
    """None for the placeholder strings firmware leaves in DMI fields."""
    if value is None or value.strip().lower() in _PLACEHOLDERS:
        return None
    return value


def _records(text):
    records, cur, listkey = [], None, None
    for raw in text.replace("\r\n", "\n").split("\n"):
        m = _HANDLE.match(raw)
        if m:
            cur = {"handle": m.group(1), "type": int(m.group(2)), "title": None, "props": {}}
            records.append(cur)
            listkey = None
            continue
        if cur is None or not raw.strip():
            if cur is not None and not raw.strip():
                listkey = None
            continue
        if not raw[:1].isspace():
            if cur["title"] is None:
                cur["title"] = raw.strip()
            continue
        depth = len(raw) - len(raw.lstrip("\t"))
        line = raw.strip()
        if depth >= 2 and listkey is not None:
            cur["props"][listkey].append(line)
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue  # free text (OEM strings, 'Header and Data' dumps...)
        key, value = key.strip(), value.strip()
        if value == "":
            cur["props"][key] = []
            listkey = key
        else:
            cur["props"].setdefault(key, value)
            listkey = None
    return records


def parse_dmidecode(text):
    if not isinstance(text, str) or not text.strip():
        raise ParseError("dmidecode: empty output")
    records = _records(text)
    if not records:
        if "No SMBIOS nor DMI entry point found" in text:
            raise ParseError("dmidecode: no SMBIOS/DMI table on this machine")
        raise ParseError("dmidecode: no 'Handle 0x..., DMI type N, M bytes' record found")
    system, processors, arrays, dimms = None, [], [], []
    for r in records:
        p = r["props"]

        def g(k, p=p):
            v = p.get(k)
            return na(v) if isinstance(v, str) else None
        if r["type"] == 1 and system is None:
            system = {"manufacturer": _real(g("Manufacturer")),
                      "product_name": _real(g("Product Name")),
                      "version": _real(g("Version")), "serial": _real(g("Serial Number"))}
        elif r["type"] == 4:
            status = g("Status") or ""
            processors.append({
                "socket": g("Socket Designation"),
                "version": re.sub(r"\s+", " ", g("Version")) if g("Version") else None,
                "manufacturer": g("Manufacturer"),
                "core_count": to_int(g("Core Count")),
                "thread_count": to_int(g("Thread Count")),
                "populated": status.lower().startswith("populated") if status else None,
            })
        elif r["type"] == 16:
            arrays.append({"handle": r["handle"], "use": g("Use"),
                           "ecc_raw": g("Error Correction Type"),
                           "ecc": normalize_ecc(g("Error Correction Type")),
                           "max_capacity": g("Maximum Capacity"),
                           "devices": to_int(g("Number Of Devices"))})
        elif r["type"] == 17:
            tw, dw = to_int(g("Total Width")), to_int(g("Data Width"))
            size = parse_size_mb(g("Size"))
            dimms.append({
                "handle": r["handle"], "array_handle": g("Array Handle"),
                "locator": g("Locator"), "bank_locator": g("Bank Locator"),
                "size_mb": size, "type": g("Type"), "speed": g("Speed"),
                "manufacturer": g("Manufacturer"), "part_number": g("Part Number"),
                "total_width": tw, "data_width": dw,
                "ecc_width": (tw > dw) if (size and tw and dw) else None,
            })
    sysarrays = [a for a in arrays if (a["use"] or "").lower() == "system memory"] or arrays
    if sysarrays:
        ecc = min((a["ecc"] for a in sysarrays), key=lambda e: _RANK[e])
    else:
        ecc = "unknown"
    # A device of a Flash, Video or Cache Memory array (a BIOS flash chip) is not RAM: only the
    # arrays the ECC judgement uses count. A device naming no array of this output still counts.
    known = set(a["handle"].lower() for a in arrays)
    counted = set(a["handle"].lower() for a in sysarrays)
    for d in dimms:
        handle = (d["array_handle"] or "").lower()
        d["system_memory"] = handle in counted or handle not in known
    return {"records": records, "system": system, "processors": processors,
            "memory_arrays": arrays, "dimms": dimms, "ecc": ecc}


def installed_dimms(parsed):
    """The populated memory devices of the System Memory arrays (what counts as installed RAM)."""
    return [d for d in parsed.get("dimms", []) if d.get("size_mb") and d.get("system_memory", True)]
