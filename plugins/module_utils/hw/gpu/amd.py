# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""AMD Instinct (and Hygon DCU, which runs the same amdgpu-derived driver) behind the GPU vendor
seam (see __init__.py for the interface).

From sysfs alone, with no ROCm tool installed (formats: the kernel's Documentation/gpu/amdgpu/):

- ``<bdf>/mem_info_vram_total``: VRAM in bytes (driver-misc.rst, "GPU Memory Usage Information");
- ``<bdf>/product_name``, ``serial_number``, ``unique_id``: the board's FRU data (driver-misc.rst);
- ``<bdf>/ras/features`` and ``ras/<block>_err_count``; ``gpu_vram_bad_pages`` (ras.rst): the
  ECC mode is the UMC (VRAM) bit of the feature mask, the counters are per RAS block;
- ``<bdf>/xgmi_hive_info/xgmi_hive_id`` and ``xgmi_device_id`` (driver-core.rst, "AMDGPU XGMI
  Support"): the XGMI hive the GPU belongs to;
- the KFD topology ``/sys/class/kfd/kfd/topology/nodes/N/{properties,io_links/M/properties}``
  (drivers/gpu/drm/amd/amdkfd/kfd_topology.c; link ``type 11`` is XGMI, as ROCm's
  rocm_smi_io_link.h reads it): the active XGMI links per GPU and the render node;
- ``<bdf>/drm/renderD*``: the render node a job needs (with ``/dev/kfd``);
- ``<bdf>/current_compute_partition`` (MI300-class: "SPX", "DPX", "TPX", "QPX" or "CPX",
  drivers/gpu/drm/amd/amdgpu/amdgpu_gfx.c ``amdgpu_gfx_get_current_compute_partition``, the
  ``xcp_desc`` names) and ``<bdf>/enforce_isolation`` (one 0/1 per partition, space separated:
  the kernel-doc of ``amdgpu_gfx_get_enforce_isolation``): a package in DPX/QPX/CPX mode shows
  as 2/4/8 logical devices (``partitions``); SPX is 1, DPX 2, TPX 3, QPX 4 (the modes' names),
  CPX one per XCC, known from ``enforce_isolation`` only (else unknown). The entry keeps the mode
  in lower case (``compute_partition: cpx``), as dlrack_hw's enums are.

Then ``amd-smi static --json`` / ``amd-smi metric --json`` when amd-smi is installed, else
``rocm-smi --json`` (or Hygon's ``hy-smi --json``), fill what sysfs left unknown. Their parsers
(parsers/amd_smi.py) accept every JSON shape of the releases; "N/A" stays unknown.

MI250/MI250X carry two GCDs per package: the kernel lists each GCD as its own PCI device with
its own VRAM (64 GB), so a GPU entry here is one logical device; the catalogue's
``gcds_per_package`` lets the rules count packages where a rule is about packages (PCIe lanes).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import amd_ids
from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu.pci import (
    VisibleDevicesError, clean_text, pci_ids_names, read_common, visible_tokens)
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError, na
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import amd_smi
from ansible_collections.dlrack.node.plugins.module_utils.system.command import failure as command_failure

NAME = "amd"
PCI_VENDORS = ("0x1002", "0x1d94")
VENDOR_NAMES = {"0x1002": "amd", "0x1d94": "hygon"}
# 0x0380 display controller (MI100/MI200), 0x1200 processing accelerator (MI300), 0x0302 3D.
# 0x0300 (VGA: Radeon cards, also a Ryzen's integrated GPU) counts only on a node without GPUs of
# another vendor (see __init__.py).
GPU_CLASSES = ("0x0380", "0x1200", "0x0302")
DISPLAY_CLASSES = ("0x0300",)
TOOLS = ("amd-smi", "rocm-smi", "hy-smi")
VISIBLE_DEVICES = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
INTERCONNECT = "xgmi"
LABEL = "AMD GPU"
PCI_LABEL = "AMD GPU (0x1002, Hygon 0x1d94)"
# the gather option (hw_facts' amd_smi_path) that chooses amd-smi; 'never' leaves out rocm-smi and
# hy-smi too
TOOL_OPTION = "amd"
# the copy-bandwidth runtime of acceptance (module_utils/acceptance/gpu_hip.py: libamdhip64)
COPY_RUNTIME = "hip"
GRES_FILE = "/dev/dri/{render_node}"
WORDING = {
    "model_source": "no product name or amd-smi",
    "memory_unknown": "GPU memory (GPU model unknown: no VRAM size from amdgpu, is the driver loaded?)",
    "link": ("XGMI", "Infinity Fabric (XGMI)"),
    "link_capable": "all GPUs are Infinity Fabric models (%s); link state is confirmed once gathered (KFD topology)",
    "link_unknown": "cannot verify XGMI: GPU model unknown (no product name, amd-smi or rocm-smi)",
    "link_unknown_remedy": "load the amdgpu driver (ROCm) and gather again",
    "link_remedy": "prefer OAM Instinct platforms (MI300X/MI325X/MI355X baseboards) or Infinity Fabric "
                   "bridges for PCIe cards",
    "ecc_remedy": "enable RAS for the VRAM (UMC block): amdgpu.ras_enable=1 on the kernel command line and "
                  "ECC on in the board's firmware, then reboot",
    "ecc_unknown": "ECC mode not known (declared, or the driver exposes no RAS features)",
}
KFD_TOPOLOGY = "/sys/class/kfd/kfd/topology/nodes"
IOLINK_TYPE_XGMI = 11
MAX_KFD_NODES = 512
RENDER_NODE = re.compile(r"^renderD[0-9]{1,4}$")
# compute partition modes (amdgpu_gfx.c xcp_desc) -> logical devices per package; CPX: one per XCC
PARTITION_MODES = {"spx": 1, "dpx": 2, "tpx": 3, "qpx": 4, "cpx": None}
MAX_PARTITIONS = 8          # MAX_XCP in amdgpu_xcp.h


def tools(option, find):
    """{tool: path or None}: amd-smi by the option; rocm-smi and hy-smi looked up unless 'never'."""
    out = {"amd-smi": find(option, "amd-smi")}
    for name in ("rocm-smi", "hy-smi"):
        out[name] = None if option in (False, "never") else find("auto", name)
    return out


def visible_selection(gpus, env):
    """(variable name, its value, entries naming plan GPUs) for AMD GPUs, or None when no AMD
    variable is set. ROCR_VISIBLE_DEVICES selects GPUs (indices in ROCm's order, which is the
    plan's bus-id order, or GPU-<unique id> UUIDs); HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES,
    which HIP reads the same way) then indexes into what ROCR left."""
    rocr = env.get(VISIBLE_DEVICES[0])
    hip_var = VISIBLE_DEVICES[1] if env.get(VISIBLE_DEVICES[1]) is not None else "CUDA_VISIBLE_DEVICES"
    hip = env.get(hip_var)
    if rocr is None and hip is None:
        return None
    base = visible_tokens(rocr) if rocr is not None else [str(g.get("index")) for g in gpus]
    if hip is None:
        return VISIBLE_DEVICES[0], rocr, base
    out = []
    for t in visible_tokens(hip):
        if not re.match(r"^\d+$", t) or int(t) >= len(base):
            raise VisibleDevicesError("%s=%r: entry %r is not an index below %d (the devices %s)"
                                      % (hip_var, hip, t, len(base), "ROCR_VISIBLE_DEVICES leaves"
                                         if rocr is not None else "of the plan"))
        out.append(base[int(t)])
    return hip_var, hip, out


def gres_file(gpu):
    """The gres.conf File= of one plan entry (its render node), None when it has none."""
    render = render_node(gpu)
    return "/dev/dri/%s" % render if render else None


def blank_gpu(bus, vendor_id="0x1002"):
    return {"index": None, "uuid": None, "model": None, "memory_mb": None, "pci_bus_id": bus,
            "numa_node": None, "local_cpus": None,
            "pcie": {"width": None, "width_max": None, "gen": None, "gen_max": None,
                     "gen_host_max": None, "speed": None, "speed_max": None},
            "ecc_enabled": None, "interconnect": None, "driver": None,
            "vendor": VENDOR_NAMES.get(vendor_id, "amd"), "vendor_id": vendor_id, "device_id": None,
            "serial": None, "render_node": None, "ras": None, "ecc_errors": None, "retired_pages": None,
            "compute_partition": None, "partitions": None}


def not_an_accelerator(rd, d):
    """An AMD APU's integrated GPU (amd_ids.APUS, by PCI device id) is never counted as a GPU,
    with or without other GPUs on the node."""
    return (clean_text(rd, os.path.join(d, "device")) or "").lower() in amd_ids.APUS


# PCIe link speed (GT/s) -> generation (PCI Express Base Specification: 2.5, 5, 8, 16, 32, 64 GT/s)
PCIE_GEN_BY_SPEED = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def pcie_gen(speed_gts):
    """The PCIe generation of a link speed in GT/s (amd-smi prints the speed only), or None."""
    if not isinstance(speed_gts, (int, float)):
        return None
    return PCIE_GEN_BY_SPEED.get(float(speed_gts))


def _partitions(rd, d, g):
    """The compute partition mode and the logical devices this package shows as (see the module
    docstring); a GPU without the attribute (MI100/MI200) keeps both None: one device."""
    mode = (clean_text(rd, os.path.join(d, "current_compute_partition"), limit=64) or "").lower()
    if mode not in PARTITION_MODES:
        return
    g["compute_partition"] = mode
    count = PARTITION_MODES[mode]
    iso = (clean_text(rd, os.path.join(d, "enforce_isolation"), limit=256) or "").split()
    if iso and len(iso) <= MAX_PARTITIONS and all(v in ("0", "1") for v in iso):
        if count is None or count == len(iso):
            count = len(iso)
    g["partitions"] = count


def render_node(gpu):
    """The entry's render node ("renderD128"), or None when it has none or the name is not one:
    it comes from the node and becomes a path under /dev/dri."""
    name = gpu.get("render_node")
    return name if isinstance(name, str) and RENDER_NODE.match(name) else None


def device_files(gpu):
    """The device files a job on this GPU needs: its render node and /dev/kfd (ROCm's compute
    interface, one for all GPUs)."""
    render = render_node(gpu)
    return (["/dev/dri/%s" % render] if render else []) + ["/dev/kfd"]


def links_active(gpu):
    return (gpu.get("interconnect") or {}).get("links_active")


def logical_devices(gpu):
    """The logical devices one entry shows as to ROCm: its compute partitions (CPX on an MI300X:
    8), 1 when not partitioned, None when the mode says more than one but not how many."""
    if str(gpu.get("compute_partition") or "spx").lower() == "spx":
        return 1
    count = gpu.get("partitions")
    return count if isinstance(count, int) and 0 < count <= MAX_PARTITIONS else None


# ---------------------------------------------------------------------------------------------
# sysfs

def _ras(rd, d, g):
    base = os.path.join(d, "ras")
    feats = amd_smi.parse_ras_features(rd.text(os.path.join(base, "features"), limit=256))
    blocks = {}
    for name in rd.listdir(base):
        m = re.match(r"^([a-z0-9_]{1,32})_err_count$", name)
        if m:
            counts = amd_smi.parse_err_count(rd.text(os.path.join(base, name), limit=256))
            if counts:
                blocks[m.group(1)] = counts
    bad = amd_smi.parse_bad_pages(rd.text(os.path.join(d, "ras", "gpu_vram_bad_pages"), limit=1 << 20))
    if feats is None and not blocks:
        return
    g["ras"] = {"features": feats["mask"] if feats else None,
                "enabled_blocks": feats["blocks"] if feats else None, "blocks": blocks or None}
    if feats is not None:
        g["ecc_enabled"] = "umc" in feats["blocks"]
    if blocks:
        def total(key):
            vals = [c.get(key) for c in blocks.values() if c.get(key) is not None]
            return sum(vals) if vals else None
        # amdgpu's counters run since the driver loaded: the "volatile" counters of nvidia-smi
        g["ecc_errors"] = {"volatile_corrected": total("ce"), "volatile_uncorrected": total("ue"),
                           "volatile_deferred": total("de"), "aggregate_corrected": None,
                           "aggregate_uncorrected": None}
    if bad is not None:
        g["retired_pages"] = bad


def _fru(rd, d, name):
    return na(clean_text(rd, os.path.join(d, name), limit=256))


def _name_model(name, vendor):
    """A board's or tool's name as the model, where no device id says it: kept when it names a
    product ('AMD Instinct MI210', 'K100_AI'), not a PCI id ('0x1002') or a bare code name
    ('Aldebaran': no digit in it); prefixed with the vendor."""
    name = na(name)
    if not name or re.match(r"^(0x)?[0-9a-fA-F]{4}$", name) or not re.search(r"[0-9]", name):
        return None
    if re.match(r"^(amd|hygon)\b", name, re.I):
        return name
    return "%s %s" % ("Hygon" if vendor == "hygon" else "AMD", name)


def sysfs_gpu(rd, d, bus, vendor_id="0x1002"):
    g = read_common(rd, d, blank_gpu(bus, vendor_id))
    vram = clean_text(rd, os.path.join(d, "mem_info_vram_total"), limit=64)
    if vram and re.match(r"^[0-9]{1,20}$", vram) and int(vram) > 0:
        g["memory_mb"] = int(vram) // (1 << 20)
    board = _fru(rd, d, "product_name")
    g["board"] = board
    g["model"] = amd_ids.model_of(g["device_id"], board) or (
        None if g["device_id"] in amd_ids.MODELS else _name_model(board, g["vendor"]))
    if g["device_id"] in amd_ids.GCDS:
        g["gcds_per_package"] = amd_ids.GCDS[g["device_id"]]
    g["serial"] = _fru(rd, d, "serial_number")
    uid = _fru(rd, d, "unique_id")                       # "%016llx"
    if uid and re.match(r"^(0x)?[0-9a-fA-F]{1,16}$", uid):
        g["uuid"] = "GPU-%016x" % int(uid, 16)      # the form ROCR_VISIBLE_DEVICES takes (rocminfo's Uuid)
    _ras(rd, d, g)
    hive = _fru(rd, d, "xgmi_hive_info/xgmi_hive_id")    # "%llu" (amdgpu_xgmi.c)
    if hive and re.match(r"^[0-9]{1,20}$", hive) and int(hive) != 0:
        g["interconnect"] = {"kind": INTERCONNECT, "links_active": None, "hive_id": "0x%x" % int(hive)}
    for name in rd.listdir(os.path.join(d, "drm")):
        if RENDER_NODE.match(name):
            g["render_node"] = name
    _partitions(rd, d, g)
    return g


def _props(text):
    out = {}
    for line in (text or "").splitlines()[:256]:
        parts = line.split()
        if len(parts) == 2 and re.match(r"^-?[0-9]{1,20}$", parts[1]):
            out[parts[0]] = int(parts[1])
    return out


def _package_key(domain, location_id):
    """The physical GPU a KFD node belongs to: (domain, bus << 5 | device). KFD writes the PCI
    location of the device (bus << 8 | dev << 3 | fn) and, for each compute partition of an MI300
    package, ORs the partition's number into it (kfd_topology.c ``kfd_topology_add_device``:
    ``location_id |= node_id``; later kernels ``node_id << 28``), so the partitions of one package
    differ in the function bits (or above bit 16) only."""
    if location_id is None:
        return None
    return domain or 0, (location_id & 0xFFFF) >> 3


def _fb_bytes(rd, node_dir):
    """Frame-buffer bytes of one KFD node: its mem_banks of heap_type 1/2 (HSA_MEM_HEAP_TYPE_FB_PUBLIC,
    FB_PRIVATE); None when it lists none."""
    total = None
    banks = os.path.join(node_dir, "mem_banks")
    for bank in rd.listdir(banks)[:64]:
        bp = _props(rd.text(os.path.join(banks, bank, "properties"), limit=65536))
        if bp.get("heap_type") in (1, 2) and bp.get("size_in_bytes", 0) > 0:
            total = (total or 0) + bp["size_in_bytes"]
    return total


def _kfd_links(rd, gpus):
    """XGMI peers per physical GPU from the KFD topology: the other packages its nodes have XGMI
    links to (a package in CPX mode is 8 KFD nodes, each linked to every partition of every other
    package: 56 links, 7 peers). The count is 0 for a GPU KFD lists without XGMI links, unknown
    (None) when KFD has no node for it (no topology, amdgpu not loaded). A package with more
    than one KFD node is partitioned: ``kfd_partitions`` and the memory of its smallest partition
    (``partition_memory_mb``, from the nodes' mem_banks) come from here."""
    base = rd.path(KFD_TOPOLOGY)
    by_pkg = dict((_package_key(*(_location(g["pci_bus_id"]) or (0, None))), g) for g in gpus)
    nodes = {}                                       # KFD node id -> (package key, props, dir)
    for name in rd.listdir(base)[:MAX_KFD_NODES]:
        if not name.isdigit():
            continue
        props = _props(rd.text(os.path.join(base, name, "properties"), limit=65536))
        if not props.get("simd_count"):
            continue                                  # a CPU node
        nodes[int(name)] = (_package_key(props.get("domain", 0), props.get("location_id")),
                            props, os.path.join(base, name))
    members = {}
    for node_id, (pkg, props, node_dir) in sorted(nodes.items()):
        members.setdefault(pkg, []).append((node_id, node_dir))
    for pkg, node_list in members.items():
        g = by_pkg.get(pkg)
        if g is None:
            continue
        peers = set()
        for node_id, node_dir in node_list:
            for sub in ("io_links", "p2p_links"):
                ldir = os.path.join(node_dir, sub)
                for link in rd.listdir(ldir)[:MAX_KFD_NODES]:
                    lp = _props(rd.text(os.path.join(ldir, link, "properties"), limit=65536))
                    if lp.get("type") == IOLINK_TYPE_XGMI and lp.get("node_to") is not None:
                        target = nodes.get(lp["node_to"])
                        peer = target[0] if target else ("node", lp["node_to"])
                        if peer != pkg:
                            peers.add(peer)
        g["kfd_node"] = node_list[0][0]
        if len(node_list) > 1:
            g["kfd_partitions"] = len(node_list)
            sizes = [b for b in (_fb_bytes(rd, nd) for dummy, nd in node_list) if b]
            if sizes:
                g["partition_memory_mb"] = min(sizes) // (1 << 20)
        if peers:
            ic = g["interconnect"] or {"kind": INTERCONNECT, "hive_id": None}
            ic["links_active"] = len(peers)
            g["interconnect"] = ic
        elif g["interconnect"] is None:
            g["interconnect"] = {"kind": None, "links_active": 0, "hive_id": None}
        else:
            g["interconnect"]["links_active"] = 0


def _location(bus):
    """'0000:c1:00.0' -> (domain, location_id) as KFD writes them (bus << 8 | dev << 3 | fn)."""
    m = re.match(r"^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$", bus or "")
    if not m:
        return None
    return int(m.group(1), 16), (int(m.group(2), 16) << 8) | (int(m.group(3), 16) << 3) | int(m.group(4))


# ---------------------------------------------------------------------------------------------
# tools

def _fill(g, key, value):
    if g.get(key) is None and value is not None:
        g[key] = value


def _run_json(run, argv, errors, parse):
    res = run(argv)
    out = res[1]
    failed = command_failure(res, " ".join([os.path.basename(argv[0])] + list(argv[1:3])))
    if failed:
        errors.append(failed)
        return None
    try:
        return parse(out)
    except ParseError as exc:
        errors.append(str(exc))
        return None


def _tool_model(g, name, raw=None):
    """Fill the model from a tool's name (``raw``: as printed, ``name``: cleaned) where the device
    id did not say it (amd_ids)."""
    if g.get("model") is None:
        g["model"] = amd_ids.model_of(g.get("device_id"), name, raw, g.get("board")) or (
            None if g.get("device_id") in amd_ids.MODELS else _name_model(name, g.get("vendor")))


def _uid(text):
    """amdgpu's unique id ("%016llx"; rocm-smi "0x..."; hy-smi without 0x) as a GPU UUID, or None."""
    if text and re.match(r"^(0x)?[0-9a-fA-F]{1,16}$", text):
        return "GPU-%016x" % int(text, 16)
    return None


def _match_static(static, gpus):
    """[(amd-smi entry, GPU entry)]: by bus id; an entry without one (releases whose ``bus``
    section lacks ``bdf``) by its ASIC serial (amd-smi's ``asic_serial`` is amdgpu's unique_id,
    the GPU's UUID here) or board serial, else by position when amd-smi lists as many GPUs as
    sysfs and none with a bus id (amdsmi enumerates in bus-id order, as the entries here are)."""
    by_bus = dict((g["pci_bus_id"], g) for g in gpus)
    by_uid = dict((g["uuid"], g) for g in gpus if g.get("uuid"))
    by_serial = dict((g["serial"], g) for g in gpus if g.get("serial"))
    positional = len(static) == len(gpus) and not any(s["pci_bus_id"] for s in static)
    out = []
    for pos, s in enumerate(static):
        g = by_bus.get(s["pci_bus_id"]) if s["pci_bus_id"] else (
            by_uid.get(_uid(s["serial"])) or by_serial.get(s["serial"]))
        if g is None and positional:
            g = gpus[pos]
        if g is not None:
            out.append((s, g))
    return out


def _apply_amd_smi(gpus, run, path, errors):
    static = _run_json(run, [path, "static", "--json"], errors, amd_smi.parse_amd_smi_static)
    if static is None:
        return False
    by_index = {}
    for s, g in _match_static(static, gpus):
        by_index[s["index"]] = g
        _tool_model(g, s["model"])
        for key, value in (("memory_mb", s["memory_mib"]),
                           ("ecc_enabled", s["ecc_enabled"]), ("serial", s["serial"]),
                           ("numa_node", s["numa_node"])):
            _fill(g, key, value)
        _fill(g["pcie"], "width_max", s["width_max"])
        _fill(g["pcie"], "speed_max", s["speed_max_gts"])
        _fill(g["pcie"], "gen_max", pcie_gen(g["pcie"]["speed_max"]))
        if s["package"] is not None:
            g["package"] = s["package"]
        if s["compute_partition"] in PARTITION_MODES:
            _fill(g, "compute_partition", s["compute_partition"])
        if s["memory_partition"]:
            g["memory_partition"] = s["memory_partition"]
    metric = _run_json(run, [path, "metric", "--json"], errors, amd_smi.parse_amd_smi_metric)
    for m in metric or []:
        g = by_index.get(m["index"])
        if g is None:
            continue
        _fill(g["pcie"], "width", m["width"])
        _fill(g["pcie"], "speed", m["speed_gts"])
        _fill(g["pcie"], "gen", pcie_gen(g["pcie"]["speed"]))
        if g["ecc_errors"] is None and any(v is not None for v in m["ecc"].values()):
            g["ecc_errors"] = {"volatile_corrected": m["ecc"]["ce"], "volatile_uncorrected": m["ecc"]["ue"],
                               "volatile_deferred": m["ecc"]["de"], "aggregate_corrected": None,
                               "aggregate_uncorrected": None}
        if g["ras"] is None and m["ecc_blocks"]:
            g["ras"] = {"features": None, "enabled_blocks": sorted(m["ecc_blocks"]), "blocks": m["ecc_blocks"]}
    return True


def _apply_rocm_smi(gpus, run, path, errors, vendor_prefix):
    argv = [path, "--showproductname", "--showbus", "--showmeminfo", "vram", "--showuniqueid",
            "--showserial", "--showtoponuma", "--json"]
    cards = _run_json(run, argv, errors, lambda out: amd_smi.parse_rocm_smi(
        out, vendor_prefix, os.path.basename(path) + " --json"))
    cards = cards or []
    by_bus = dict((g["pci_bus_id"], g) for g in gpus)
    by_uid = dict((g["uuid"], g) for g in gpus if g.get("uuid"))
    # a card without bus id (hy-smi asked by an older release): the GPU with its unique id; never
    # by card order (DRM card numbers follow the driver's probe order, not the bus)
    for c in cards:
        g = by_bus.get(c["pci_bus_id"]) if c["pci_bus_id"] else by_uid.get(_uid(c["unique_id"]))
        if g is None:
            continue
        _fill(g, "device_id", c["device_id"])
        _tool_model(g, c["model"], c["series"])
        for key, value in (("memory_mb", c["memory_mib"]), ("serial", c["serial"]),
                           ("numa_node", c["numa_node"])):
            _fill(g, key, value)
        _fill(g, "uuid", _uid(c["unique_id"]))


def gather(rd, gpus, run, tools, errors):
    """The AMD/Hygon GPUs of the node in bus-id order (the order ROCm enumerates them), filled
    from sysfs, the KFD topology and amd-smi (else rocm-smi / hy-smi) when installed."""
    try:
        _kfd_links(rd, gpus)
    except (OSError, ValueError) as exc:          # an odd topology never drops the GPUs
        errors.append("KFD topology: %s" % exc)
    missing = [g for g in gpus if not g["model"]]
    for vendor_id in sorted(set(g["vendor_id"] for g in missing)):
        names = pci_ids_names(rd.root, [g["device_id"] for g in missing], vendor_id)
        for g in missing:
            if g["vendor_id"] == vendor_id:
                g["pci_name"] = names.get(g["device_id"])
    amd_gpus = [g for g in gpus if g["vendor"] == "amd"]
    hygon = [g for g in gpus if g["vendor"] == "hygon"]
    if amd_gpus and tools.get("amd-smi"):
        done = _apply_amd_smi(amd_gpus, run, tools["amd-smi"], errors)
    else:
        done = False
    if amd_gpus and not done and tools.get("rocm-smi"):
        _apply_rocm_smi(amd_gpus, run, tools["rocm-smi"], errors, "AMD")
    if hygon and tools.get("hy-smi"):
        _apply_rocm_smi(hygon, run, tools["hy-smi"], errors, "Hygon")
    return gpus
