# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The PCIe tree of hw/pcie_tree.py from tool outputs, where a node has them or an operator pastes
them (the gatherer reads sysfs and does not import this module):

- ``parse_lspci(vvv_text, tv_text=None)``: ``lspci -vvv`` (or ``-vvnn``) blocks; parents from
  ``lspci -tv`` when given, else from each bridge's ``Bus: secondary=``;
- ``parse_lspci_tv(text)``: the parent of every function of ``lspci -tv``;
- ``parse_hwloc_xml(text)``: an hwloc topology export (``lstopo --of xml``).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import parse_speed_gts, pcie_gen_from_speed
from ansible_collections.dlrack.node.plugins.module_utils.hw import gpu as gpu_seam
from ansible_collections.dlrack.node.plugins.module_utils.hw.pcie_tree import (
    ACS_BITS, MAX_FUNCTIONS, MAX_KEPT, _ports_by_position, classify)

LSPCI_LIMIT = 4 << 20    # characters of lspci output parsed
HWLOC_LIMIT = 16 << 20   # characters of an hwloc XML export parsed (a 2-socket 8-GPU export is ~200 KB)
HWLOC_DEPTH = 64         # object nesting followed (hwloc trees are ~10-20 deep)


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
            dev["numa_node"] = int(num) if re.match(r"^[0-9]{1,4}$", num) else None
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
                kinds = {"root port": "root", "upstream port": "upstream", "downstream port": "downstream",
                         "endpoint": "endpoint", "legacy endpoint": "endpoint", "pci-express to pci/pci-x bridge": "pci_bridge"}
                dev["port"] = kinds.get(port.group(1).strip().lower(), dev["port"])
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
    (``pci_link_speed``), not width and generation: that goes to ``link_gbs``, the widths stay null.

    Input that is not such an export gives the empty tree: not well-formed XML, more than
    ``HWLOC_LIMIT`` characters, or a DTD that declares entities (an export names hwloc's DTD by
    ``SYSTEM`` only; internal entities are how an XML file blows up in memory, and expat before
    2.4 does not stop that). Objects nested deeper than ``HWLOC_DEPTH`` are not followed."""
    from xml.etree import ElementTree
    empty = {"source": "lspci", "devices": [], "iommu": None, "truncated": False}
    text = text or ""
    if len(text) > HWLOC_LIMIT or "<!ENTITY" in text:
        return empty
    try:
        root = ElementTree.fromstring(text)
    except (ElementTree.ParseError, ValueError, RecursionError):
        return empty
    devs = {}

    def walk(node, numa, host, parent, depth=0):
        if depth > HWLOC_DEPTH:
            return
        for child in node.findall("object"):
            ctype = child.get("type")
            cnuma = numa
            if ctype in ("Package", "Group"):
                nodes = set(n.get("os_index") for n in child.iter("object") if n.get("type") == "NUMANode")
                if len(nodes) == 1 and re.match(r"^[0-9]{1,4}$", list(nodes)[0] or ""):
                    cnuma = int(list(nodes)[0])
            if ctype == "Bridge" and child.get("depth") == "0":
                rng = re.match(r"^([0-9a-f]{4}):\[([0-9a-f]{2})", child.get("bridge_pci") or "")
                walk(child, cnuma, "%s:%s" % rng.groups() if rng else host, None, depth + 1)
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
                walk(child, cnuma, host, busid, depth + 1)
            else:
                walk(child, cnuma, host, parent, depth + 1)
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
