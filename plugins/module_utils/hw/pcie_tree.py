# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The PCIe tree around the GPUs: every GPU, NIC and NVMe device with its chain of bridges up to
its root port and host bridge, the link at each hop, ACS, BARs and the IOMMU (node side, stdlib).

- ``read_sysfs(root, errors)``: one read-only pass over ``/sys/bus/pci/devices`` (class and vendor
  of every function; the rest only for the devices kept: GPUs, NICs, NVMe/storage controllers and
  the bridges on their paths), plus ``/sys/kernel/iommu_groups``, ``/sys/class/iommu`` and
  ``/proc/cmdline``. At most ``MAX_FUNCTIONS`` functions are looked at and ``MAX_KEPT`` kept.
  Config space is read where the kernel lets us (64 bytes unprivileged, 4096 as root): the PCIe
  port type, the link capability, ACS capability/control and Resizable BAR come from it; where it
  is short they stay null (unknown), never guessed.
- The same tree from ``lspci -vvv``/``-tv`` text or an hwloc XML export: hw/parsers/lspci.py
  (``parse_lspci``, ``parse_lspci_tv``, ``parse_hwloc_xml``; not imported by the gatherer).

The tree (``dlrack_hw.pcie``, docs/dlrack_hw.md)::

    {"source": "sysfs" | "lspci" | "declared",
     "devices": [{"bdf": "0000:01:00.0", "parent": "0000:00:01.1" | None, "host_bridge": "0000:00",
                  "kind": "gpu" | "nic" | "nvme" | "storage" | "bridge", "port": "root" | "upstream" |
                  "downstream" | "endpoint" | "pci_bridge" | None, "class": "0x030000", "vendor": "0x10de",
                  "device": "0x2684", "name": str | None, "numa_node": int | None,
                  "link": {"width", "width_max", "gen", "gen_max"}, "acs": {"cap": [...], "ctl": [...]} | None,
                  "bars": [{"index": 0, "size": bytes}] | None, "rebar": [{"index", "size", "max"}] | None,
                  "iommu_group": str | None, "driver": str | None, "rdma": [ib device names] | None,
                  "config_bytes": int | None}],
     "iommu": {"mode": "off" | "passthrough" | "translated" | "unknown", "groups": int | None,
               "units": [...], "cmdline": [...], "group_types": [...]},
     "truncated": bool}
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import listdir, read_text, readlink_base, under
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import pcie_gen_from_speed
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers.sysfs_pci import link_from_values
from ansible_collections.dlrack.node.plugins.module_utils.hw import gpu as gpu_seam

MAX_FUNCTIONS = 8192     # PCI functions looked at (a large 8-GPU server has 300-600)
MAX_KEPT = 1024          # devices kept in the tree
CONFIG_LIMIT = 4096      # PCIe extended config space

ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
# ACS controls that send peer-to-peer requests up to the root complex (PCIe 5.0 base spec 7.7.8.3):
# request/completion redirect and egress control; with them on, P2P between GPUs (and GPUDirect
# RDMA to a NIC) goes through the root complex or fails (NCCL: "P2P/IPC disabled" or hangs).
ACS_P2P_BLOCKING = ("ReqRedir", "CmpltRedir", "EgressCtrl")
PORT_TYPES = {0: "endpoint", 1: "endpoint", 4: "root", 5: "upstream", 6: "downstream", 7: "pci_bridge",
              8: "pci_bridge", 9: "endpoint"}
_BDF = re.compile(r"^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
_HOST = re.compile(r"^pci([0-9a-f]{4,8}):([0-9a-f]{2})$")


def classify(vendor, cls):
    """kind of a PCI function from its vendor and class ids (``0x10de``, ``0x030200``):
    gpu (the vendor seam's GPU classes), nic (network), nvme, storage, bridge, or None."""
    vendor, cls = (vendor or "").lower(), (cls or "").lower()
    for pid, classes in gpu_seam.pci_classes().items():
        if vendor == pid and cls.startswith(tuple(classes)):
            return "gpu"
    if cls.startswith("0x02"):
        return "nic"
    if cls.startswith("0x0108"):
        return "nvme"
    if cls.startswith("0x01"):
        return "storage"
    if cls.startswith(("0x0604", "0x0609")):
        return "bridge"
    return None


# --------------------------------------------------------------------------------------------
# config space

def _u16(data, off):
    return data[off] | (data[off + 1] << 8) if off + 1 < len(data) else None


def _u32(data, off):
    return (_u16(data, off) | (_u16(data, off + 2) << 16)) if off + 3 < len(data) else None


def _bits(value):
    return [name for i, name in enumerate(ACS_BITS) if value & (1 << i)]


def parse_config(data):
    """What the collection reads from a function's config space (bytes): {port, link_cap
    (width_max, gen_max), acs (cap, ctl) or None, rebar or None, config_bytes}. ``acs`` is None
    when the extended space was not readable (unprivileged: 64 bytes) and ``{"cap": [], "ctl": []}``
    is never invented: a readable space without the ACS capability gives ``"absent"``."""
    out = {"port": None, "link_cap": None, "acs": None, "rebar": None, "config_bytes": len(data)}
    if len(data) < 64 or _u16(data, 0) in (None, 0xffff):
        return out
    status = _u16(data, 6) or 0
    ptr = data[0x34] & 0xfc if status & 0x10 else 0
    seen = 0
    while ptr and ptr + 1 < len(data) and seen < 48:
        seen += 1
        if data[ptr] == 0x10 and ptr + 0x13 < len(data):
            caps = _u16(data, ptr + 2)
            out["port"] = PORT_TYPES.get((caps >> 4) & 0xf)
            lnkcap = _u32(data, ptr + 0x0c)
            gts = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}.get(lnkcap & 0xf)
            out["link_cap"] = {"width_max": (lnkcap >> 4) & 0x3f or None, "gen_max": pcie_gen_from_speed(gts)}
        ptr = data[ptr + 1] & 0xfc
    if len(data) <= 0x100:
        return out
    off, seen = 0x100, 0
    out["acs"] = "absent"
    while off and off + 3 < len(data) and seen < 128:
        seen += 1
        header = _u32(data, off)
        if header in (None, 0, 0xffffffff):
            break
        cap_id = header & 0xffff
        if cap_id == 0x000d and off + 7 < len(data):
            out["acs"] = {"cap": _bits(_u16(data, off + 4)), "ctl": _bits(_u16(data, off + 6))}
        elif cap_id == 0x0015 and off + 11 < len(data):
            out["rebar"] = _rebar(data, off)
        nxt = (header >> 20) & 0xffc
        off = nxt if nxt > off else 0
    return out


def _rebar(data, off):
    """Resizable BAR entries: [{index, size, max}] (bytes); PCIe 5.0 base spec 7.8.6."""
    entries = []
    count = None
    for n in range(6):
        cap, ctrl = _u32(data, off + 4 + 8 * n), _u32(data, off + 8 + 8 * n)
        if cap is None or ctrl is None:
            break
        if count is None:
            count = (ctrl >> 5) & 0x7 or 1
        if n >= count:
            break
        supported = [i for i in range(28) if cap & (1 << (i + 4))] + [i + 28 for i in range(16) if ctrl & (1 << (i + 16))]
        entries.append({"index": ctrl & 0x7, "size": 1 << (((ctrl >> 8) & 0x3f) + 20),
                        "max": (1 << (max(supported) + 20)) if supported else None})
    return entries or None


def parse_resource(text):
    """BAR sizes from a sysfs ``resource`` file: [{index, size}] for the non-empty BARs 0-5."""
    if text is None:
        return None
    bars = []
    for index, line in enumerate(text.splitlines()[:6]):
        parts = line.split()
        if len(parts) < 3:
            continue
        try:
            start, end = int(parts[0], 16), int(parts[1], 16)
        except ValueError:
            continue
        if end > start:
            bars.append({"index": index, "size": end - start + 1})
    return bars


# --------------------------------------------------------------------------------------------
# sysfs

def _read_bytes(path, limit):
    try:
        with open(path, "rb") as handle:
            return bytearray(handle.read(limit))
    except (IOError, OSError):
        return None


def _chain(real):
    """(host bridge 'DDDD:BB', [bdf, ...] from the root port down to the device) of a resolved
    device path, or (None, []) for a path outside /sys/devices/pci*."""
    host, chain = None, []
    for part in real.split(os.sep):
        m = _HOST.match(part)
        if m:
            host, chain = "%s:%s" % (m.group(1), m.group(2)), []
        elif host and _BDF.match(part):
            chain.append(part)
    return host, chain


def _device(rd, bdf, devdir, host, parent, kind, cls, vendor):
    def text(name, limit=256):
        return read_text(os.path.join(devdir, name), limit=limit, errors=rd["errors"], root=rd["root"])
    link = link_from_values(text("current_link_speed"), text("current_link_width"),
                            text("max_link_speed"), text("max_link_width"))
    numa = text("numa_node")
    config = _read_bytes(os.path.join(devdir, "config"), CONFIG_LIMIT)
    cfg = parse_config(config) if config is not None else {"port": None, "link_cap": None, "acs": None,
                                                           "rebar": None, "config_bytes": None}
    if cfg["link_cap"] and link["width_max"] is None:
        link["width_max"], link["gen_max"] = cfg["link_cap"]["width_max"], cfg["link_cap"]["gen_max"]
    rdma = None
    if kind == "nic":
        rdma = listdir(os.path.join(devdir, "infiniband"))
    return {
        "bdf": bdf, "parent": parent, "host_bridge": host, "kind": kind, "port": cfg["port"],
        "class": cls, "vendor": vendor, "device": text("device"), "name": None,
        "numa_node": int(numa) if numa and re.match(r"^-?[0-9]{1,4}$", numa) and int(numa) >= 0 else None,
        "link": dict((k, link[k]) for k in ("width", "width_max", "gen", "gen_max")),
        "acs": cfg["acs"] if cfg["acs"] != "absent" else {"cap": [], "ctl": []},
        "acs_readable": cfg["acs"] is not None,
        "bars": parse_resource(text("resource", 4096)), "rebar": cfg["rebar"],
        "iommu_group": readlink_base(os.path.join(devdir, "iommu_group")),
        "driver": readlink_base(os.path.join(devdir, "driver")), "rdma": rdma,
        "config_bytes": cfg["config_bytes"],
    }


def read_sysfs(root="/", errors=None):
    """The PCIe tree of the host under ``root`` (see the module's docstring); never raises."""
    errors = [] if errors is None else errors
    rd = {"root": root or "/", "errors": errors}
    base = under(root, "/sys/bus/pci/devices")
    names = [n for n in listdir(base, errors=errors, root=root) if _BDF.match(n)]
    truncated = len(names) > MAX_FUNCTIONS
    found = {}
    for name in names[:MAX_FUNCTIONS]:
        devdir = os.path.realpath(os.path.join(base, name))
        vendor = read_text(os.path.join(devdir, "vendor"), limit=64, errors=errors, root=root)
        cls = read_text(os.path.join(devdir, "class"), limit=64, errors=errors, root=root)
        host, chain = _chain(devdir)
        if not chain or chain[-1] != name:
            host, chain = None, [name]
        found[name] = (devdir, host, chain, (vendor or "").lower(), (cls or "").lower())
    keep = []
    for name, (devdir, host, chain, vendor, cls) in sorted(found.items()):
        kind = classify(vendor, cls)
        if kind in ("gpu", "nic", "nvme", "storage"):
            keep.append(name)
    wanted = []
    for name in keep:
        for bdf in found[name][2]:
            if bdf not in wanted:
                wanted.append(bdf)
    if len(wanted) > MAX_KEPT:
        wanted, truncated = wanted[:MAX_KEPT], True
    devices = []
    for bdf in sorted(wanted):
        if bdf not in found:
            continue
        devdir, host, chain, vendor, cls = found[bdf]
        kind = classify(vendor, cls) or "bridge"
        parent = chain[-2] if len(chain) > 1 else None
        devices.append(_device(rd, bdf, devdir, host, parent, kind, cls, vendor))
    _ports_by_position(devices)
    return {"source": "sysfs", "devices": devices, "iommu": read_iommu(root, errors), "truncated": truncated}


def _ports_by_position(devices):
    """Where config space did not say (unprivileged), a bridge's port type follows from its place:
    a bridge on a root bus is a root port, then switch upstream and downstream ports alternate."""
    by_bdf = dict((d["bdf"], d) for d in devices)
    for dev in devices:
        if dev["kind"] != "bridge" or dev["port"]:
            continue
        depth, cur = 0, dev
        while cur["parent"] in by_bdf and depth < 64:
            depth += 1
            cur = by_bdf[cur["parent"]]
        dev["port"] = "root" if depth == 0 else ("upstream" if depth % 2 else "downstream")
        dev["port_inferred"] = True


# --------------------------------------------------------------------------------------------
# IOMMU

_CMDLINE_KEYS = ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict")


def iommu_mode(groups, units, cmdline, group_types):
    """off | passthrough | translated | unknown, from what the kernel shows.

    - no IOMMU groups (and no /sys/class/iommu unit): off (or no IOMMU exposed, as in most VMs);
    - every group type ``identity`` (kernel >= 5.11), or ``iommu=pt`` / ``iommu.passthrough=1`` on
      the command line: passthrough (DMA addresses are physical; GPUDirect RDMA works as is);
    - group types DMA / DMA-FQ, or ``iommu.passthrough=0``: translated (GPUDirect RDMA and P2P need
      ATS or the NIC's/GPU's mappings through the IOMMU; NVIDIA recommends passthrough or off).
    """
    opts = dict(item.split("=", 1) for item in cmdline if "=" in item)
    if groups == 0 and not units:
        return "off"
    if opts.get("intel_iommu") == "off" or opts.get("amd_iommu") == "off" or opts.get("iommu") == "off":
        if not groups:
            return "off"
    if group_types:
        if all(t == "identity" for t in group_types):
            return "passthrough"
        if all(t.startswith("DMA") for t in group_types):
            return "translated"
    if opts.get("iommu") == "pt" or opts.get("iommu.passthrough") in ("1", "y", "on"):
        return "passthrough"
    if opts.get("iommu.passthrough") in ("0", "n", "off") and groups:
        return "translated"
    return "unknown"


def read_iommu(root="/", errors=None):
    """{mode, groups, units, cmdline, group_types} from sysfs and /proc/cmdline."""
    gbase = under(root, "/sys/kernel/iommu_groups")
    groups = listdir(gbase, errors=errors, root=root)
    exists = os.path.isdir(gbase)
    types = set()
    for name in groups[:MAX_KEPT]:
        t = read_text(os.path.join(gbase, name, "type"), limit=64)
        if t:
            types.add(t)
    units = listdir(under(root, "/sys/class/iommu"))[:64]
    cmdline = (read_text(under(root, "/proc/cmdline"), limit=8192) or "").split()
    relevant = [item for item in cmdline if item.split("=", 1)[0] in _CMDLINE_KEYS][:16]
    count = len(groups) if exists else (0 if not units else None)
    return {"mode": iommu_mode(count, units, relevant, sorted(types)), "groups": count, "units": units,
            "cmdline": relevant, "group_types": sorted(types)}
