# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU vendor seam: one module per vendor, chosen by PCI vendor id.

Each vendor module (nvidia.py, amd.py with Hygon, ascend.py) offers the same interface:

- identity: ``NAME``, ``LABEL``/``PCI_LABEL`` (wording), ``PCI_VENDORS`` (ids it owns),
  ``VENDOR_NAMES`` (PCI id -> the ``vendor`` its entries carry), ``GPU_CLASSES`` (and
  ``DISPLAY_CLASSES``) and ``not_an_accelerator(rd, devdir)`` (an APU's iGPU, a Huawei NIC);
- tools: ``TOOLS``, ``TOOL_OPTION`` (the gather option that chooses them) and ``tools(option,
  find)`` -> {tool: path}; every call goes through system/command.py's bounded runner (its time and
  output limits are the gatherer's);
- enumeration: ``sysfs_gpu(rd, devdir, bus, vendor_id)`` (model, memory, link, NUMA, partitions,
  RAS/ECC state and counters where sysfs has them), ``blank_gpu(bus, vendor_id)`` and
  ``gather(rd, gpus, run, tools, errors)`` (completed from its tools, in its runtime's order);
- jobs: ``VISIBLE_DEVICES`` and ``visible_selection(plan_gpus, env)``, ``device_files(gpu)``,
  ``GRES_FILE``/``gres_file(gpu)`` (gres.conf File=), ``COPY_RUNTIME`` (acceptance's copy
  bandwidth: cuda, hip, torch_npu);
- judgement: ``links_active(gpu)`` and ``INTERCONNECT``, ``WORDING`` (the rules' verdict and
  remedy sentences for a node of that vendor).

Adding a vendor is one such module, its tool's parser (hw/parsers/), its catalogue entries and its
tests (docs/DEVELOPING.md, "Adding a GPU vendor", counts the files). Nothing outside this folder
names a vendor's PCI id, tool or visible-devices variable (tests/.../gpu/test_vendor_seam.py).

``gather_gpus`` walks the PCI bus once, hands each vendor its GPUs and concatenates the answers
(NVIDIA first, then AMD, then Ascend), numbering them in that order. A node with NVIDIA GPUs only
gets exactly the entries it got before the seam existed.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import amd, ascend, nvidia
from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu.pci import VisibleDevicesError  # noqa: F401 (re-exported)
from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu.pci import clean_text
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError, normalize_pci_bus_id

VENDORS = (nvidia, amd, ascend)
BY_NAME = {"nvidia": nvidia, "amd": amd, "hygon": amd, "ascend": ascend}
BY_PCI_ID = dict((pid, mod) for mod in VENDORS for pid in mod.PCI_VENDORS)
TOOLS = tuple(t for mod in VENDORS for t in mod.TOOLS)
NAME_BY_PCI_ID = dict((pid, name) for mod in VENDORS for pid, name in mod.VENDOR_NAMES.items())


def vendor_name(gpu):
    """'nvidia', 'amd' or 'hygon' for one ``dlrack_hw`` GPU entry: its ``vendor`` key, else its
    PCI ``vendor_id``; None when neither says (a schema-1 entry, a declared model)."""
    name = str(gpu.get("vendor") or "").lower()
    if name in BY_NAME:
        return name
    return NAME_BY_PCI_ID.get(str(gpu.get("vendor_id") or "").lower())


def vendor_of(gpu):
    """The vendor module of one ``dlrack_hw`` GPU entry: its ``vendor`` key, else its PCI
    ``vendor_id``, else NVIDIA (a schema-1 entry without either is NVIDIA)."""
    mod = BY_NAME.get(str(gpu.get("vendor") or "").lower())
    if mod is None:
        mod = BY_PCI_ID.get(str(gpu.get("vendor_id") or "").lower(), nvidia)
    return mod


def visible_devices_env(gpu):
    return vendor_of(gpu).VISIBLE_DEVICES


def device_files(gpu):
    return vendor_of(gpu).device_files(gpu)


def find_tools(options, find):
    """{tool name: path or None} of every vendor's tools. ``options``: {vendor TOOL_OPTION: the
    gather option for its tool} ('auto' when absent); ``find(option, name)`` applies one."""
    out = {}
    for mod in VENDORS:
        out.update(mod.tools(options.get(mod.TOOL_OPTION, "auto"), find))
    return out


def pci_classes():
    """{PCI vendor id: PCI class prefixes that are its GPUs} (display-only classes included):
    what a node program that reads the PCI bus alone (the health check) counts as a GPU."""
    out = {}
    for mod in VENDORS:
        for pid in mod.PCI_VENDORS:
            out[pid] = tuple(mod.GPU_CLASSES) + tuple(getattr(mod, "DISPLAY_CLASSES", ()))
    return out


def node_vendor(gpus):
    """The one vendor module of a node's GPU entries (a declared entry: its catalogue spec's
    vendor), or None when the node has none or mixes vendors."""
    mods = set()
    for g in gpus or []:
        mod = BY_NAME.get(vendor_name(g) or str((g.get("_spec") or {}).get("vendor") or "nvidia"))
        mods.add(mod or nvidia)
    return mods.pop() if len(mods) == 1 else None


def wording(gpus, key):
    """A verdict or remedy sentence (the vendor's ``WORDING[key]``) for a node's GPUs: the
    vendor's own when all GPUs are of one vendor, NVIDIA's otherwise (schema 1's wording)."""
    return (node_vendor(gpus) or nvidia).WORDING[key]


def no_gpu_message():
    """What the rules say when a node has no GPU of any vendor."""
    labels = [mod.PCI_LABEL for mod in VENDORS]
    return "no %s or %s on this node" % (", ".join(labels[:-1]), labels[-1])


def visible_selection(gpus, env):
    """(variable, value, entries) of the visible-devices variable that selects devices of the
    plan's GPUs for a job (the vendor of the plan's entries; NVIDIA's for a schema-1 plan), or
    None when it is unset. Raises ``VisibleDevicesError`` for entries that select nothing."""
    mod = node_vendor(gpus) or nvidia
    return mod.visible_selection(gpus, env)


def visible_variables():
    """Every vendor's visible-devices variables (a job's environment to keep or to clear)."""
    return tuple(v for mod in VENDORS for v in mod.VISIBLE_DEVICES)


def gres_file(gpu, template):
    """gres.conf File= of one plan entry: ``template`` filled with the entry for NVIDIA (and for any
    entry when the operator set a template of their own), the vendor's device file otherwise;
    None when the vendor knows no device file for it (an AMD entry without render node)."""
    mod = BY_NAME.get(vendor_name(gpu) or "nvidia", nvidia)
    if mod is nvidia or template != nvidia.GRES_FILE:
        return template.format(**gpu)
    return mod.gres_file(gpu)


def _classify(rd, name, d):
    """(vendor module, display-only?) of a PCI device, or (None, False)."""
    before = len(rd.errors)
    vendor = (clean_text(rd, os.path.join(d, "vendor")) or "").lower()
    cls = (clean_text(rd, os.path.join(d, "class")) or "").lower()
    if len(rd.errors) > before:
        rd.errors.append("PCI device %s: vendor/class unreadable, so a GPU there cannot be "
                         "recognised; run hw_facts with become: true" % name)
        return None, False
    mod = BY_PCI_ID.get(vendor)
    if mod is None or mod.not_an_accelerator(rd, d):
        return None, False
    if cls.startswith(mod.GPU_CLASSES):
        return mod, False
    if cls.startswith(getattr(mod, "DISPLAY_CLASSES", ())):
        return mod, True
    return None, False


def gather_gpus(rd, run, tools, errors, vendors=None):
    """All GPUs of the node. ``tools``: {tool name: path or None} (see ``TOOLS``). A device
    whose vendor or class cannot be read is named in ``errors`` (it may be a GPU); one odd
    device never drops the others. ``vendors``: names of the vendor modules to ask (default
    all; the ECC collector asks "amd" alone, from sysfs: ``run`` is then never called when
    ``tools`` is empty); the vendors left out still count in the numbering, so an entry's
    ``index`` is the same whichever vendors are asked)."""
    found = dict((mod.NAME, []) for mod in VENDORS)
    display = []
    base = rd.path("/sys/bus/pci/devices")
    for name in rd.listdir(base):
        d = os.path.join(base, name)
        mod, display_only = _classify(rd, name, d)
        if mod is None:
            continue
        try:
            bus = normalize_pci_bus_id(name)
        except ParseError:
            continue
        vendor_id = (clean_text(rd, os.path.join(d, "vendor")) or "").lower()
        try:
            g = mod.sysfs_gpu(rd, d, bus, vendor_id)
        except Exception as exc:  # one odd GPU directory keeps its place, with nulls
            rd.errors.append("GPU %s: unexpected %s reading sysfs: %s" % (bus, type(exc).__name__, exc))
            g = mod.blank_gpu(bus, vendor_id)
        (display if display_only else found[mod.NAME]).append((mod, g))
    if display and not any(found.values()):
        # VGA-class AMD devices are GPUs only on a node with no other GPU: next to accelerators
        # they are the integrated graphics of a Ryzen or a display card
        for mod, g in display:
            found[mod.NAME].append((mod, g))
    found = dict((name, [g for dummy, g in pairs]) for name, pairs in found.items())
    out = []
    for mod in VENDORS:
        if vendors is not None and mod.NAME not in vendors:
            # a vendor left out still holds its places: the entries asked for keep the index
            # hw_facts gives them (on a mixed node the ECC collector's AMD series start after
            # the NVIDIA GPUs sysfs shows, whether nvidia-smi answers or not)
            out.extend([None] * len(found[mod.NAME]))
            continue
        gpus = sorted(found[mod.NAME], key=lambda g: g["pci_bus_id"])
        if gpus or getattr(mod, "GATHER_WITHOUT_SYSFS", False):
            out.extend(mod.gather(rd, gpus, run, tools, errors))
    for i, g in enumerate(out):
        if g is not None:
            g["index"] = i
    return [g for g in out if g is not None]
