# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""AMD GPU outputs the collection reads: amdgpu sysfs attributes, ``amd-smi static|metric --json``
and ``rocm-smi --json`` (Hygon's ``hy-smi`` prints the rocm-smi form).

Formats and where they are documented:

- ``ras/features``: ``feature mask: 0x%x`` and ``ras/<block>_err_count``: ``ue: N`` / ``ce: N``
  (and ``de: N`` for UMC since Linux 6.9): the kernel's Documentation/gpu/amdgpu/ras.rst, which
  includes the kernel-doc of drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c ("AMDGPU RAS sysfs Error
  Count Interface", ``amdgpu_ras_sysfs_features_read``, ``amdgpu_ras_sysfs_read``). Bit ``n`` of
  the mask is RAS block ``n`` of ``enum amdgpu_ras_block`` (umc=0, sdma, gfx, mmhub, athub,
  pcie_bif, hdp, xgmi_wafl, df, smn, sem, mp0, mp1, fuse, mca, vcn, jpeg, ih, mpio).
- ``gpu_vram_bad_pages``: one ``0x<page> : 0x<size> : <R|P|F>`` line per retired page (R
  reserved, P pending, F failed to reserve): the same ras.rst ("RAS VRAM Bad Pages sysfs
  Interface").
- ``amd-smi`` JSON: the keys of ROCm/amdsmi ``amdsmi_cli/amdsmi_commands.py`` (``static``: asic,
  bus, vram, ras, numa; ``metric``: pcie, ecc, ecc_blocks). Releases differ: the top level is a
  bare list, ``{"gpu_data": [...]}`` or one GPU's object; a value is a plain number, a
  ``{"value": v, "unit": u}`` object or a ``"v unit"`` string; anything unavailable is "N/A".
  Every shape is accepted; "N/A" is unknown (None), never a pass.
- ``rocm-smi --json``: ``{"card0": {"Card series": ..., "PCI Bus": ..., "VRAM Total Memory (B)":
  ...}, "system": {...}}``; tested on real captures of 6x and 4x MI100 (telegraf testdata).

Every parser raises ``ParseError`` for text the tool would not print (not JSON, the wrong top
level); a GPU entry that cannot be read is skipped with a note in the result, never a crash.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import re

from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import (
    ParseError, na, normalize_pci_bus_id)

__all__ = ["ParseError", "RAS_BLOCKS", "parse_ras_features", "parse_err_count", "parse_bad_pages",
           "parse_amd_smi_static", "parse_amd_smi_metric", "parse_rocm_smi", "value_of", "to_mib"]

# enum amdgpu_ras_block (drivers/gpu/drm/amd/amdgpu/amdgpu_ras.h / ras_block_string[])
RAS_BLOCKS = ("umc", "sdma", "gfx", "mmhub", "athub", "pcie_bif", "hdp", "xgmi_wafl", "df", "smn",
              "sem", "mp0", "mp1", "fuse", "mca", "vcn", "jpeg", "ih", "mpio")
MAX_JSON = 8 << 20          # bytes of JSON read at most (8 MB: 64 GPUs of amd-smi metric fit)
MAX_GPUS = 128

_NUM = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([A-Za-z/%]*)\s*$")
_UNITS_MIB = {"b": 1.0 / (1 << 20), "kb": 1.0 / 1024, "kib": 1.0 / 1024, "mb": 1, "mib": 1,
              "gb": 1024, "gib": 1024, "": None}


# ---------------------------------------------------------------------------------------------
# sysfs

def parse_ras_features(text):
    """``feature mask: 0x3fff`` -> {mask: int, blocks: [names of the set bits]}; None when absent
    or not in that form (unknown, never "no RAS")."""
    m = re.match(r"^\s*feature mask:\s*0x([0-9a-fA-F]{1,16})\s*$", text or "")
    if not m:
        return None
    mask = int(m.group(1), 16)
    return {"mask": mask, "blocks": [name for bit, name in enumerate(RAS_BLOCKS) if mask & (1 << bit)]}


def parse_err_count(text):
    """``ue: 0\\nce: 3\\nde: 0`` -> {"ue": 0, "ce": 3, "de": 0}; keys not printed are absent;
    None when no line is in that form."""
    out = {}
    for line in (text or "").splitlines():
        m = re.match(r"^\s*(ue|ce|de)\s*:\s*([0-9]{1,20})\s*$", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out or None


def parse_bad_pages(text):
    """``gpu_vram_bad_pages`` -> {retired, pending, failed}; None when the text is absent."""
    if text is None:
        return None
    out = {"retired": 0, "pending": 0, "failed": 0}
    for line in text.splitlines():
        m = re.match(r"^\s*0x[0-9a-fA-F]+\s*:\s*0x[0-9a-fA-F]+\s*:\s*([RPF])\s*$", line)
        if m:
            out[{"R": "retired", "P": "pending", "F": "failed"}[m.group(1)]] += 1
    return out


# ---------------------------------------------------------------------------------------------
# values in every shape amd-smi / rocm-smi print

def value_of(value):
    """(number or string, unit) of a value in any shape: 12 / 12.5 / "12" / "12 MB" /
    {"value": 12, "unit": "MB"} -> (12, "MB"); "N/A", None, "" and the like -> (None, None)."""
    unit = None
    if isinstance(value, dict):
        unit = value.get("unit") if isinstance(value.get("unit"), str) else None
        value = value.get("value")
    if isinstance(value, bool) or value is None:
        return None, None
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        return None, None       # amd-smi can print Infinity/NaN (json reads them as floats): unknown, never a size
    if isinstance(value, (int, float)):
        return value, unit
    if not isinstance(value, str):
        return None, None
    text = na(value)
    if text is None:
        return None, None
    m = _NUM.match(text)
    if m:
        num = float(m.group(1)) if "." in m.group(1) else int(m.group(1))
        return num, m.group(2) or unit
    return text, unit


def _int(value):
    num, dummy = value_of(value)
    if isinstance(num, float) and num.is_integer():
        num = int(num)
    return num if isinstance(num, int) else None


def _str(value):
    num, dummy = value_of(value)
    if num is None:
        return None
    return str(num)[:256]


def to_mib(value, default_unit="MB"):
    """Memory size in MiB from any shape; amd-smi's "MB" is MiB (vram_size of
    amdsmi_get_gpu_vram_info is bytes / 2**20). None when unknown."""
    num, unit = value_of(value)
    if not isinstance(num, (int, float)) or num < 0:
        return None
    factor = _UNITS_MIB.get((unit or default_unit or "").strip().lower())
    if factor is None:
        return None
    return int(num * factor)


def _speed_gts(value):
    num, unit = value_of(value)
    if not isinstance(num, (int, float)) or num <= 0:
        return None
    unit = (unit or "GT/s").lower()
    if unit in ("mt/s",):
        num = num / 1000.0
    elif unit not in ("gt/s",):
        return None
    return float(num)


def _bus(value):
    try:
        return normalize_pci_bus_id(_str(value))
    except ParseError:
        return None


# hy-smi (Hygon's rocm-smi) prints some fields of a card without the comma between them:
# '"HCU use (%)": "0.0" "vram Total Memory (MiB)": "65520"'; a value (string, number, object end)
# followed by whitespace and the next key's opening quote is given its comma back
_MISSING_COMMA = re.compile(r'("|[0-9]|\}|\]|true|false|null)(\s+"[^"\n]{1,200}"\s*:)')


def _load_json(text, what):
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str) or not text.strip():
        raise ParseError("%s: empty output" % what)
    if len(text) > MAX_JSON:
        raise ParseError("%s: output larger than %d bytes" % (what, MAX_JSON))
    start = min([i for i in (text.find("["), text.find("{")) if i >= 0] or [0])
    try:
        return json.loads(text[start:])     # amd-smi may print a warning line before the JSON
    except ValueError as exc:
        repaired = _MISSING_COMMA.sub(r"\1,\2", text[start:])
        try:
            return json.loads(repaired)
        except ValueError:
            raise ParseError("%s: not JSON (%s)" % (what, str(exc)[:120]))


def _gpu_list(doc, what):
    """The per-GPU objects of any amd-smi release: a bare list, {"gpu_data": [...]}, one GPU."""
    if isinstance(doc, dict) and isinstance(doc.get("gpu_data"), list):
        doc = doc["gpu_data"]
    elif isinstance(doc, dict) and "gpu" in doc:
        doc = [doc]
    if not isinstance(doc, list):
        raise ParseError("%s: expected a list of GPUs or {\"gpu_data\": [...]}, got %s"
                         % (what, type(doc).__name__))
    return [g for g in doc[:MAX_GPUS] if isinstance(g, dict)]


# ---------------------------------------------------------------------------------------------
# amd-smi

def _ecc_state(ras):
    """ECC mode from amd-smi's ras section: True when the UMC (VRAM) block is ENABLED, False
    when DISABLED, None when unknown ("N/A", absent)."""
    if not isinstance(ras, dict):
        return None, None
    states = ras.get("ecc_block_state")
    if isinstance(states, list):   # older releases: [{"block": "UMC", "status": "ENABLED"}, ...]
        states = dict((s.get("block"), s.get("status")) for s in states if isinstance(s, dict))
    if not isinstance(states, dict):
        return None, None
    blocks = dict((str(k).lower(), str(v).upper()) for k, v in states.items() if isinstance(k, str))
    umc = blocks.get("umc")
    ecc = True if umc == "ENABLED" else False if umc == "DISABLED" else None
    return ecc, sorted(k for k, v in blocks.items() if v == "ENABLED")


def _partition_mode(part, keys):
    """A partition mode of amd-smi's partition section in lower case ("cpx", "nps4"), or None."""
    for key in keys:
        mode = _str(part.get(key))
        if mode and re.match(r"^[A-Za-z]{2,4}[0-9]?$", mode):
            return mode.lower()
    return None


def parse_amd_smi_static(text):
    """``amd-smi static --json`` -> [{index, model, pci_bus_id, device_id, serial, package,
    memory_mib, vram_type, width_max, speed_max_gts, numa_node, ecc_enabled, ras_blocks}]."""
    out = []
    for g in _gpu_list(_load_json(text, "amd-smi static --json"), "amd-smi static --json"):
        asic = g.get("asic") if isinstance(g.get("asic"), dict) else {}
        bus = g.get("bus") if isinstance(g.get("bus"), dict) else {}
        vram = g.get("vram") if isinstance(g.get("vram"), dict) else {}
        numa = g.get("numa") if isinstance(g.get("numa"), dict) else {}
        size = next((vram[k] for k in ("size", "vram_size", "vram_size_mb") if k in vram), None)
        ecc, blocks = _ecc_state(g.get("ras"))
        part = g.get("partition") if isinstance(g.get("partition"), dict) else {}
        out.append({
            "index": _int(g.get("gpu")),
            "model": _str(asic.get("market_name")),
            "pci_bus_id": _bus(bus.get("bdf")),
            "device_id": (_str(asic.get("device_id")) or "").lower() or None,
            "serial": _str(asic.get("asic_serial")),
            "package": _int(asic.get("oam_id")),
            "memory_mib": to_mib(size),
            "vram_type": _str(vram.get("type", vram.get("vram_type"))),
            "width_max": _int(bus.get("max_pcie_width")),
            "speed_max_gts": _speed_gts(bus.get("max_pcie_speed")),
            "numa_node": _int(numa.get("node")),
            "ecc_enabled": ecc,
            "ras_blocks": blocks,
            "compute_partition": _partition_mode(part, ("compute_partition", "accelerator_partition", "current_compute_partition")),
            "memory_partition": _partition_mode(part, ("memory_partition", "current_memory_partition")),
        })
    return out


def _counts(d, prefix=""):
    return {"ce": _int(d.get(prefix + "correctable_count")),
            "ue": _int(d.get(prefix + "uncorrectable_count")),
            "de": _int(d.get(prefix + "deferred_count"))}


def parse_amd_smi_metric(text):
    """``amd-smi metric --json`` -> [{index, width, speed_gts, ecc: {ce, ue, de},
    ecc_blocks: {block: {ce, ue, de}}}]; counters that amd-smi prints as "N/A" are None."""
    out = []
    for g in _gpu_list(_load_json(text, "amd-smi metric --json"), "amd-smi metric --json"):
        pcie = g.get("pcie") if isinstance(g.get("pcie"), dict) else {}
        ecc = g.get("ecc") if isinstance(g.get("ecc"), dict) else {}
        total = _counts(ecc, "total_") if "total_correctable_count" in ecc else _counts(ecc)
        blocks = {}
        raw = g.get("ecc_blocks")
        for name, counts in (raw.items() if isinstance(raw, dict) else []):
            if isinstance(counts, dict) and isinstance(name, str):
                blocks[name.lower()[:32]] = _counts(counts)
        out.append({"index": _int(g.get("gpu")), "width": _int(pcie.get("width")),
                    "speed_gts": _speed_gts(pcie.get("speed")), "ecc": total,
                    "ecc_blocks": blocks or None})
    return out


# ---------------------------------------------------------------------------------------------
# rocm-smi / hy-smi

_LINK = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*GT/s\s*x([0-9]{1,2})")


def _series_model(series, vendor_prefix):
    """'Arcturus GL-XL [Instinct MI100]' -> 'AMD Instinct MI100'; a plain name is kept."""
    series = na(series)
    if series is None:
        return None
    m = re.search(r"\[([^\]]+)\]\s*$", series)
    name = m.group(1).strip() if m else series
    if vendor_prefix and not name.lower().startswith(vendor_prefix.lower()):
        name = "%s %s" % (vendor_prefix, name)
    return name[:256]


def _key(card, *names):
    """The first key present, compared case-insensitively (rocm-smi renamed 'Card series' to
    'Card Series' between releases)."""
    low = dict((k.lower(), v) for k, v in card.items() if isinstance(k, str))
    for name in names:
        if name.lower() in low:
            return low[name.lower()]
    return None


def parse_rocm_smi(text, vendor_prefix="AMD", what="rocm-smi --json"):
    """``rocm-smi --json`` (or ``hy-smi --json``) -> [{card, model, pci_bus_id, memory_mib,
    serial, unique_id, numa_node, width, speed_gts}] in card order."""
    doc = _load_json(text, what)
    if not isinstance(doc, dict):
        raise ParseError("%s: expected an object of cards, got %s" % (what, type(doc).__name__))
    cards = []
    for name, card in doc.items():
        m = re.match(r"^card([0-9]{1,4})$", str(name))
        if not m or not isinstance(card, dict):
            continue
        level = _str(_key(card, "pcie clock level")) or ""
        link = _LINK.search(level)
        vram_b = _int(_key(card, "VRAM Total Memory (B)"))
        vram_mib = _int(_key(card, "VRAM Total Memory (MiB)"))       # hy-smi: "vram Total Memory (MiB)"
        device_id = _str(_key(card, "Device ID"))
        if device_id is None and re.match(r"^0x[0-9a-fA-F]{4}$", _str(_key(card, "Card Model", "Card model")) or ""):
            device_id = _str(_key(card, "Card Model", "Card model"))  # rocm-smi 6.x prints the device id there
        cards.append({
            "card": int(m.group(1)),
            "model": _series_model(_key(card, "Card series", "Card Series"), vendor_prefix),
            "pci_bus_id": _bus(_key(card, "PCI Bus")),
            "memory_mib": vram_b // (1 << 20) if vram_b else vram_mib if vram_mib and vram_mib > 0 else None,
            "device_id": device_id.lower() if device_id and re.match(r"^0x[0-9a-fA-F]{1,4}$", device_id) else None,
            "series": na(_str(_key(card, "Card series", "Card Series"))),
            "serial": None if _str(_key(card, "Serial Number")) in (None, "0") else _str(_key(card, "Serial Number")),
            "unique_id": _str(_key(card, "Unique ID")),
            "numa_node": _int(_key(card, "(Topology) Numa Node")),
            "width": int(link.group(2)) if link else None,
            "speed_gts": float(link.group(1)) if link else None,
        })
        if len(cards) >= MAX_GPUS:
            break
    cards.sort(key=lambda c: c["card"])
    return cards
