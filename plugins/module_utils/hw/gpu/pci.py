# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every GPU vendor shares on the PCI bus: the link, NUMA node, local CPUs, driver and
device id of ``/sys/bus/pci/devices/<bdf>``, and the node's pci.ids names.

A vendor module (nvidia.py, amd.py) starts each GPU from its own blank entry and calls
``read_common`` for these fields; nothing here knows a vendor.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import (
    READ_LIMIT, listdir, read_int, read_text, readlink_base, under)
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import sysfs_pci

PCI_IDS_PATHS = ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids", "/usr/share/pci.ids")


class SysReader(object):
    """The reader interface the vendor modules use (gather.py passes its own, which also
    validates cpulists); this one is for node programs that read GPUs without gather.py (the
    ECC collector): unreadable files become lines in ``errors``, cpulists are kept as text."""

    def __init__(self, root="/", errors=None):
        self.root, self.errors = root or "/", [] if errors is None else errors

    def path(self, live_path):
        return under(self.root, live_path)

    def text(self, path, limit=READ_LIMIT):
        return read_text(path, limit=limit, errors=self.errors, root=self.root)

    def int(self, path):
        return read_int(path, errors=self.errors, root=self.root)

    def listdir(self, path):
        return listdir(path, errors=self.errors, root=self.root)

    def cpulist(self, path, what):
        text = self.text(path, limit=65536)
        return text if text and len(text) < 4096 else None


def clean_text(rd, path, limit=READ_LIMIT):
    """A sysfs value with the NUL bytes some drivers pad it with removed (amdgpu's FRU strings are
    fixed-size buffers: "AMD Instinct MI210\\0\\0..."), stripped; None when absent or empty."""
    text = rd.text(path, limit=limit)
    if text is None:
        return None
    return text.replace("\x00", "").strip() or None


def read_common(rd, d, g):
    """Fill ``g`` (a vendor's blank entry) from the PCI device directory ``d``."""
    bus = g["pci_bus_id"]
    link = sysfs_pci.read_link(d, errors=rd.errors, root=rd.root)
    g["pcie"].update({"width": link["width"], "width_max": link["width_max"], "gen": link["gen"],
                      "gen_max": link["gen_max"], "speed": link["speed_gts"],
                      "speed_max": link["speed_max_gts"]})
    g["numa_node"] = rd.int(os.path.join(d, "numa_node"))
    g["local_cpus"] = rd.cpulist(os.path.join(d, "local_cpulist"), "GPU %s local_cpulist" % bus)
    g["driver"] = readlink_base(os.path.join(d, "driver"))
    g["device_id"] = (clean_text(rd, os.path.join(d, "device")) or "").lower() or None
    return g


def pci_ids_names(root, device_ids, vendor):
    """Names of ``device_ids`` ("0x2330") from the node's pci.ids (pciutils' database), reading
    only the vendor's block. Returns {device_id: "GH100[H100 SXM5 80GB]"}; {} without pci.ids."""
    want = set((d or "").lower().replace("0x", "") for d in device_ids if d)
    if not want:
        return {}
    ven = vendor.lower().replace("0x", "")
    for rel in PCI_IDS_PATHS:
        path = under(root, rel)
        try:
            fh = open(path, "rb")
        except (IOError, OSError):
            continue
        names = {}
        with fh:
            inside = False
            for raw in fh:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if not line or line.startswith("#"):
                    continue
                if not line.startswith("\t"):
                    if inside:
                        break
                    inside = line[:4].lower() == ven
                    continue
                if inside and not line.startswith("\t\t"):
                    dev, dummy, name = line[1:].partition(" ")
                    if dev.lower() in want:
                        names["0x" + dev.lower()] = name.strip()
        return names
    return {}


class VisibleDevicesError(ValueError):
    """A visible-devices variable that selects nothing the plan knows (gpu_bind turns it into
    its usage error)."""


def visible_tokens(visible):
    """The entries of a ``*_VISIBLE_DEVICES`` value, stopping at the first invalid one (CUDA, ROCm
    and CANN stop there: "-1" hides everything)."""
    out = []
    for t in [t.strip() for t in str(visible).split(",") if t.strip()]:
        if t.startswith("-"):
            break
        out.append(t)
    return out
