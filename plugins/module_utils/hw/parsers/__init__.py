# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for the hardware command outputs the collection reads (nvidia-smi, dmidecode, sysfs).

Every parser is pure Python (3.9+, standard library only) and raises ``ParseError`` (a
``ValueError``) with a message naming the problem when its input is not what the tool prints.
Unknown values come back as ``None``, never guessed.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


class ParseError(ValueError):
    """Input that the tool in question would not have printed."""


def parse_export(text):
    """``KEY=value`` lines (``blkid -o export``, ``mdadm --detail --export``) to a dict."""
    out = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


NA_VALUES = frozenset(["", "n/a", "[n/a]", "na", "not supported", "[not supported]", "unknown",
                       "unknown error", "[unknown error]", "redacted", "not available",
                       "[insufficient permissions]", "insufficient permissions", "-"])


def na(value):
    """Return None for the many ways tools print 'not available', else the stripped string."""
    if value is None:
        return None
    value = str(value).strip()
    if value.lower() in NA_VALUES:
        return None
    return value


def to_int(value):
    """'16x' / '81920 MiB' / '4' / 'N/A' -> int or None (never raises)."""
    value = na(value)
    if value is None:
        return None
    m = re.match(r"^(-?\d+)(?:\s*[A-Za-z%()/]+.*)?$", value)
    if not m:
        return None
    return int(m.group(1))


def to_bool(value, true=("enabled", "yes", "on", "active", "true"),
            false=("disabled", "no", "off", "not active", "false")):
    value = na(value)
    if value is None:
        return None
    low = value.lower()
    if low in true:
        return True
    if low in false:
        return False
    return None


_BUS_ID = re.compile(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")


def normalize_pci_bus_id(value):
    """'00000000:00:1E.0' / '01:00.0' / '0000:18:00.0' -> '0000:00:1e.0' (None for N/A).

    Raises ParseError for a string that is not a PCI address.
    """
    value = na(value)
    if value is None:
        return None
    m = _BUS_ID.match(value.strip())
    if not m:
        raise ParseError("not a PCI bus id: %r" % value)
    domain = int(m.group(1) or "0", 16)
    return "%04x:%02x:%02x.%s" % (domain, int(m.group(2), 16), int(m.group(3), 16), m.group(4))


# PCIe transfer rate per lane (GT/s) -> generation
_GEN_BY_SPEED = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def pcie_gen_from_speed(speed_gts):
    if speed_gts is None:
        return None
    return _GEN_BY_SPEED.get(round(float(speed_gts), 1))


def parse_speed_gts(value):
    """'16.0 GT/s PCIe' / '2.5GT/s (downgraded)' / '8 GT/s' -> float GT/s, None if unknown."""
    value = na(value)
    if value is None:
        return None
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*GT/s", value)
    if not m:
        return None
    return float(m.group(1))
