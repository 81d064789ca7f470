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
- ``parse_lspci(vvv_text, tv_text=None)``: the same tree from ``lspci -vvv`` (or ``-vvnn``),
  parents from ``lspci -tv`` when given, else from each bridge's ``Bus: secondary=``.

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
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import parse_speed_gts, pcie_gen_from_speed
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers.sysfs_pci import link_from_values
from ansible_collections.dlrack.node.plugins.module_utils.hw import gpu as gpu_seam

MAX_FUNCTIONS = 8192     # PCI functions looked at (a large 8-GPU server has 300-600)
MAX_KEPT = 1024          # devices kept in the tree
CONFIG_LIMIT = 4096      # PCIe extended config space
LSPCI_LIMIT = 4 << 20    # characters of lspci output parsed

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


# --------------------------------------------------------------------------------------------
# lspci

_LSPCI_HEAD = re.compile(r"^(?:(?P<dom>[0-9a-f]{4,8}):)?(?P<bus>[0-9a-f]{2}):(?P<dev>[0-9a-f]{2})\.(?P<fn>[0-7]) "
                         r"(?P<cls>[^:\[]+?)(?: \[(?P<clsid>[0-9a-f]{4})\])?: (?P<name>.*)$")
_CLASS_NAMES = {
    "vga compatible controller": "0x0300", "3d controller": "0x0302", "display controller": "0x0380",
    "ethernet controller": "0x0200", "network controller": "0x0280", "infiniband controller": "0x0207",
    "non-volatile memory controller": "0x0108", "raid bus controller": "0x0104",
    "sata controller": "0x0106", "serial attached scsi controller": "0x0107", "pci bridge": "0x0604",
    "processing accelerators": "0x1200", "host bridge": "0x0600",
}
_IDS = re.compile(r"\[([0-9a-f]{4}):([0-9a-f]{4})\](?: \(rev [0-9a-f]+\))?(?: \(prog-if [^)]*\))?\s*$")
_SIZE = re.compile(r"^(\d+)([KMGT]?)$")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(text):
    m = _SIZE.match(text.strip().upper().replace("B", ""))
    return int(m.group(1)) * _UNITS[m.group(2)] if m else None


def _vendor_from_name(name):
    """PCI vendor id of a vendor name as lspci prints it (without -n): the GPU vendors the seam
    knows, by their names in pci.ids; None otherwise."""
    low = name.lower()
    for pid, vname in gpu_seam.NAME_BY_PCI_ID.items():
        if low.startswith(vname) or ("[%s" % vname) in low.split(" device ")[0]:
            return pid
    return None


def _plain_name(name):
    """The device name as ``lspci -tv`` prints it: without ids, revision and prog-if."""
    name = re.sub(r"\s*\[[0-9a-f]{4}:[0-9a-f]{4}\].*$", "", name)
    return re.sub(r"\s*\(rev [0-9a-f]+\).*$", "", name).strip()[:120] or None


def _lspci_link(line):
    speed = re.search(r"Speed ([0-9.]+GT/s)", line)
    width = re.search(r"Width x(\d+)", line)
    return (parse_speed_gts(speed.group(1)) if speed else None), (int(width.group(1)) if width else None)


def _lspci_block(lines, domain):
    m = _LSPCI_HEAD.match(lines[0])
    if not m:
        return None
    dom = m.group("dom") or domain
    bdf = "%s:%s:%s.%s" % (dom.zfill(4), m.group("bus"), m.group("dev"), m.group("fn"))
    name = m.group("name")
    ids = _IDS.search(name)
    cls = ("0x" + m.group("clsid")) if m.group("clsid") else _CLASS_NAMES.get(m.group("cls").strip().lower())
    vendor = ("0x" + ids.group(1)) if ids else _vendor_from_name(name)
    dev = {"bdf": bdf, "parent": None, "host_bridge": None, "kind": classify(vendor, cls), "port": None,
           "class": cls, "vendor": vendor, "device": ("0x" + ids.group(2)) if ids else None,
           "name": _plain_name(name), "numa_node": None,
           "link": {"width": None, "width_max": None, "gen": None, "gen_max": None}, "acs": None,
           "acs_readable": False, "bars": None, "rebar": None, "iommu_group": None, "driver": None,
           "rdma": None, "config_bytes": None, "secondary": None}
    bars, rebar, in_rebar = [], [], False
    for raw in lines[1:]:
        line = raw.strip()
        if line.startswith("Capabilities:"):
            in_rebar = "Resizable BAR" in line
            dev["acs_readable"] = dev["acs_readable"] or "<access denied>" not in line
        if line.startswith("NUMA node:"):
            num = line.split(":", 1)[1].strip()
            dev["numa_node"] = int(num) if num.isdigit() else None
        elif line.startswith("Bus: primary="):
            sec = re.search(r"secondary=([0-9a-f]{2})", line)
            dev["secondary"] = sec.group(1) if sec else None
        elif line.startswith("LnkCap:"):
            gts, width = _lspci_link(line)
            dev["link"]["gen_max"], dev["link"]["width_max"] = pcie_gen_from_speed(gts), width
        elif line.startswith("LnkSta:"):
            gts, width = _lspci_link(line)
            dev["link"]["gen"], dev["link"]["width"] = pcie_gen_from_speed(gts), width
        elif line.startswith("ACSCap:") or line.startswith("ACSCtl:"):
            acs = dev["acs"] or {"cap": [], "ctl": []}
            acs["cap" if line.startswith("ACSCap") else "ctl"] = [b for b in ACS_BITS if (b + "+") in line.split()]
            dev["acs"] = acs
        elif line.startswith("Kernel driver in use:"):
            dev["driver"] = line.split(":", 1)[1].strip() or None
        elif line.startswith("IOMMU group:"):
            dev["iommu_group"] = line.split(":", 1)[1].strip() or None
        elif re.match(r"^Region \d+: Memory at", line) and "[size=" in line:
            size = _size(line.split("[size=", 1)[1].split("]")[0])
            if size:
                bars.append({"index": int(line.split()[1].rstrip(":")), "size": size})
        elif in_rebar and re.match(r"^BAR \d+: current size:", line):
            cur = _size(line.split("current size:", 1)[1].split(",")[0])
            sup = [_size(s) for s in line.split("supported:", 1)[-1].split()] if "supported:" in line else []
            sup = [s for s in sup if s]
            rebar.append({"index": int(line.split()[1].rstrip(":")), "size": cur, "max": max(sup) if sup else None})
        else:
            port = re.match(r"^Capabilities: \[[0-9a-f]+\] Express \(v\d\) (.*?)(?:,| \(|$)", line)
            if port:
                dev["port"] = {"root port": "root", "upstream port": "upstream", "downstream port": "downstream",
                               "endpoint": "endpoint", "legacy endpoint": "endpoint",
                               "pci-express to pci/pci-x bridge": "pci_bridge"}.get(port.group(1).strip().lower(),
                                                                                     dev["port"])
    dev["bars"] = bars or None
    dev["rebar"] = rebar or None
    if dev["acs"] is None and dev["acs_readable"]:
        dev["acs"] = {"cap": [], "ctl": []}
    if dev["kind"] == "nic":
        dev["rdma"] = None if _rdma_name(vendor, name) else []
    return dev


def _rdma_name(vendor, name):
    """An RDMA-capable NIC as lspci shows it (its InfiniBand device names are not in lspci):
    NVIDIA/Mellanox networking (vendor 0x15b3) or an InfiniBand controller."""
    return (vendor or "").lower() == "0x15b3" or bool(re.search(r"Mellanox|ConnectX|InfiniBand|Infiniband", name or ""))


_TV_TOKEN = re.compile(r"[ |+\\-]*(?:\[(?P<dom>[0-9a-f]{4,8}):(?P<rbus>[0-9a-f]{2})\]|"
                       r"(?P<dev>[0-9a-f]{2})\.(?P<fn>[0-7])(?:-\[(?P<sec>[0-9a-f]{2})(?:-[0-9a-f]{2})?\])?)")


def parse_lspci_tv(text):
    """``lspci -tv`` -> {bdf: (parent bdf or None, host bridge 'DDDD:BB', name or None)} by the column of each
    entry (an entry belongs to the bus whose bracket closes left of it, nearest first)."""
    out = {}
    ctx = []      # [(column where children start, domain, bus, bridge bdf or None, host bridge)]
    for line in (text or "")[:LSPCI_LIMIT].splitlines():
        pos = 0
        while pos < len(line):
            m = _TV_TOKEN.match(line, pos)
            if not m or m.end() == pos:
                break
            if m.group("dom"):
                col = m.end()
                ctx = [c for c in ctx if c[0] < m.start("dom")]
                host = "%s:%s" % (m.group("dom"), m.group("rbus"))
                ctx.append((col, m.group("dom"), m.group("rbus"), None, host))
                pos = m.end()
                continue
            col = m.start("dev")
            owner = [c for c in ctx if c[0] <= col]
            if not owner:
                break
            dummy, dom, bus, parent, host = owner[-1]
            bdf = "%s:%s:%s.%s" % (dom, bus, m.group("dev"), m.group("fn"))
            pos = m.end()
            out[bdf] = (parent, host, line[pos:].strip()[:120] if line[pos:pos + 2] == "  " else None)
            if m.group("sec"):
                ctx = [c for c in ctx if c[0] < pos]
                ctx.append((pos, dom, m.group("sec"), bdf, host))
            if line[pos:pos + 2] == "  " or not m.group("sec"):
                break
    return out


def _kind_by_name(name):
    """kind of a function ``lspci -tv`` names but ``-vvv`` does not show: NVMe drives and NICs by
    the words of their pci.ids names (GPUs only ever by their class and vendor ids)."""
    if not name or re.search(r"\bRAID\b", name):
        return None
    if re.search(r"\bNVMe\b|Non-Volatile memory", name):
        return "nvme"
    if re.search(r"Ethernet|ConnectX|InfiniBand|Infiniband", name):
        return "nic"
    return None


def parse_lspci(vvv_text, tv_text=None, domain="0000"):
    """The tree from ``lspci -vvv`` text (blocks of every function) and, when given, the parent
    links of ``lspci -tv``; functions not worth keeping (audio, USB, host bridges off the paths)
    are dropped as in ``read_sysfs``."""
    blocks, cur = [], []
    for line in (vvv_text or "")[:LSPCI_LIMIT].splitlines():
        if _LSPCI_HEAD.match(line):
            if cur:
                blocks.append(cur)
            cur = [line]
        elif cur and line.strip():
            cur.append(line)
    if cur:
        blocks.append(cur)
    devs = {}
    for block in blocks[:MAX_FUNCTIONS]:
        dev = _lspci_block(block, domain)
        if dev:
            devs[dev["bdf"]] = dev
    tree = parse_lspci_tv(tv_text) if tv_text else None
    if tree:
        parents = set(v[0] for v in tree.values())
        for bdf, (parent, host, name) in tree.items():
            if bdf not in devs:
                sibling = [d for b, d in devs.items() if b[:-1] == bdf[:-1] and name and d["name"] == name]
                like = sibling[0] if sibling else {}
                devs[bdf] = {"bdf": bdf, "kind": "bridge" if bdf in parents else like.get("kind", _kind_by_name(name)),
                             "parent": None, "host_bridge": None, "port": None, "class": like.get("class"),
                             "vendor": like.get("vendor"), "device": like.get("device"), "name": name,
                             "numa_node": like.get("numa_node"),
                             "link": {"width": None, "width_max": None, "gen": None, "gen_max": None},
                             "acs": None, "acs_readable": False, "bars": None, "rebar": None,
                             "iommu_group": None, "driver": None, "rdma": like.get("rdma"), "config_bytes": None}
                if devs[bdf]["kind"] == "nic" and not like:
                    devs[bdf]["rdma"] = None if _rdma_name(None, name) else []
            devs[bdf]["parent"], devs[bdf]["host_bridge"] = parent, host
    else:
        by_secondary = dict(((b[:4], d["secondary"]), b) for b, d in devs.items() if d.get("secondary"))
        for bdf, dev in devs.items():
            dev["parent"] = by_secondary.get((bdf[:4], bdf[5:7]))
        for bdf, dev in devs.items():
            top, seen = dev, 0
            while top["parent"] in devs and seen < 64:
                top, seen = devs[top["parent"]], seen + 1
            dev["host_bridge"] = top["bdf"][:7]
    for dev in devs.values():
        dev.pop("secondary", None)
    keep = [b for b, d in devs.items() if d["kind"] in ("gpu", "nic", "nvme", "storage")]
    wanted = set()
    for bdf in keep:
        cur, seen = bdf, 0
        while cur in devs and seen < 64:
            wanted.add(cur)
            cur, seen = devs[cur]["parent"], seen + 1
    devices = [devs[b] for b in sorted(wanted)][:MAX_KEPT]
    for dev in devices:
        if dev["kind"] is None:
            dev["kind"] = "bridge"
    _numa_by_host_bridge(devices)
    _ports_by_position(devices)
    return {"source": "lspci", "devices": devices, "iommu": None, "truncated": len(wanted) > MAX_KEPT}


def _numa_by_host_bridge(devices):
    """lspci prints the NUMA node of the functions it lists; a bridge without one takes its host
    bridge's (all functions under one host bridge share the node)."""
    nodes = {}
    for dev in devices:
        if dev["numa_node"] is not None:
            nodes.setdefault(dev["host_bridge"], dev["numa_node"])
    for dev in devices:
        if dev["numa_node"] is None:
            dev["numa_node"] = nodes.get(dev["host_bridge"])


# --------------------------------------------------------------------------------------------
# hwloc XML (lstopo --of xml)

def parse_hwloc_xml(text):
    """The tree from an hwloc topology export (``lstopo --of xml``; hwloc 2.x): bridges and PCI
    devices with their parents, host bridge (the bus range of the depth-0 host bridge object) and
    NUMA node (the Package/NUMANode that holds them). hwloc gives each link as GB/s
    (``pci_link_speed``), not width and generation: that goes to ``link_gbs``, the widths stay null."""
    import xml.etree.ElementTree as ElementTree
    try:
        root = ElementTree.fromstring((text or "")[:LSPCI_LIMIT * 4])
    except ElementTree.ParseError:
        return {"source": "lspci", "devices": [], "iommu": None, "truncated": False}
    devs = {}

    def walk(node, numa, host, parent):
        for child in node.findall("object"):
            ctype = child.get("type")
            cnuma = numa
            if ctype in ("Package", "Group"):
                nodes = [n for n in child.iter("object") if n.get("type") == "NUMANode"]
                if len(set(n.get("os_index") for n in nodes)) == 1:
                    cnuma = int(nodes[0].get("os_index"))
            if ctype == "Bridge" and child.get("depth") == "0":
                rng = re.match(r"^([0-9a-f]{4}):\[([0-9a-f]{2})", child.get("bridge_pci") or "")
                walk(child, cnuma, "%s:%s" % rng.groups() if rng else host, None)
                continue
            busid = child.get("pci_busid")
            if ctype in ("Bridge", "PCIDev") and busid and len(devs) < MAX_FUNCTIONS:
                ids = re.match(r"^([0-9a-f]{4}) \[([0-9a-f]{4}):([0-9a-f]{4})\]", child.get("pci_type") or "")
                cls, vendor, device = (("0x%s" % g) for g in ids.groups()) if ids else (None, None, None)
                try:
                    gbs = float(child.get("pci_link_speed"))
                except (TypeError, ValueError):
                    gbs = None
                kind = "bridge" if ctype == "Bridge" else classify(vendor, cls)
                rdma = [o.get("name") for o in child.findall("object")
                        if o.get("type") == "OSDev" and o.get("osdev_type") == "3"] if kind == "nic" else None
                devs[busid] = {"bdf": busid, "parent": parent, "host_bridge": host, "kind": kind, "port": None,
                               "class": cls, "vendor": vendor, "device": device, "name": None, "numa_node": numa,
                               "link": {"width": None, "width_max": None, "gen": None, "gen_max": None},
                               "link_gbs": gbs if gbs and gbs > 0 else None, "acs": None, "acs_readable": False,
                               "bars": None, "rebar": None, "iommu_group": None, "driver": None, "rdma": rdma,
                               "config_bytes": None}
                walk(child, cnuma, host, busid)
            else:
                walk(child, cnuma, host, parent)
    walk(root, None, None, None)
    wanted = set()
    for bdf, dev in devs.items():
        if dev["kind"] in ("gpu", "nic", "nvme", "storage"):
            cur, seen = bdf, 0
            while cur in devs and seen < 64:
                wanted.add(cur)
                cur, seen = devs[cur]["parent"], seen + 1
    devices = [devs[b] for b in sorted(wanted)][:MAX_KEPT]
    _ports_by_position(devices)
    return {"source": "lspci", "devices": devices, "iommu": None, "truncated": len(wanted) > MAX_KEPT}
