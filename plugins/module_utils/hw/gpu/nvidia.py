# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA behind the GPU vendor seam (see __init__.py for the interface).

sysfs gives the link, NUMA node and local CPUs; ``nvidia-smi -q -x`` (when installed) the model,
memory, UUID, ECC mode and counters; ``nvidia-smi nvlink -s`` (only where it matters:
``wants_nvlink_status``) the active NVLink links. An NVIDIA GPU entry keeps the schema-1 shape
(``nvlink_active``; no ``vendor`` key: a GPU without one is NVIDIA) so that an NVIDIA node's facts
are what they were before the seam.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu.pci import pci_ids_names, read_common, visible_tokens
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import nvidia_smi as nvsmi
from ansible_collections.dlrack.node.plugins.module_utils.system.command import failure as command_failure

NAME = "nvidia"
PCI_VENDORS = ("0x10de",)
VENDOR_ID = "0x10de"
VENDOR_NAMES = {VENDOR_ID: NAME}
GPU_CLASSES = ("0x0300", "0x0302")
TOOLS = ("nvidia-smi",)
VISIBLE_DEVICES = ("CUDA_VISIBLE_DEVICES",)
INTERCONNECT = "nvlink"
LABEL = "NVIDIA GPU"
PCI_LABEL = "NVIDIA GPU (PCI vendor 0x10de)"
# the gather option (hw_facts' nvidia_smi_path) that chooses this vendor's tool
TOOL_OPTION = "nvidia"
# the copy-bandwidth runtime of acceptance (module_utils/acceptance/gpu.py: libcuda through ctypes)
COPY_RUNTIME = "cuda"
# `nvidia-smi -L` (MIG ids to their GPU) from dlrack-gpu-bind: a wedged driver costs the training
# process at most this long, a runaway output at most this many bytes
MIG_LIST_TIMEOUT_S = 30
MIG_LIST_OUTPUT_LIMIT = 1024 * 1024
GRES_FILE = "/dev/nvidia{index}"
# verdict and remedy wording of the rules (plugin_utils/rules.py) for a node of this vendor
WORDING = {
    "model_source": "no nvidia-smi",
    "memory_unknown": "GPU memory (GPU model unknown: no nvidia-smi, is the driver installed?)",
    "link": ("NVLink", "NVLink/NVSwitch"),
    "link_capable": "all GPUs are NVLink/SXM models (%s); link state is confirmed once gathered with nvidia-smi",
    "link_unknown": "cannot verify NVLink: GPU model unknown (no nvidia-smi)",
    "link_unknown_remedy": "install the NVIDIA driver and gather again",
    "link_remedy": "prefer SXM/NVLink GPUs (HGX) or NVLink bridges for multi-GPU training nodes",
    "ecc_remedy": "nvidia-smi -e 1 (then reboot or reset the GPUs)",
    "ecc_unknown": "ECC mode not known (declared, or no nvidia-smi)",
    # a GPU fault whose recovery is a reset (rules' gpu fault findings, issue 29)
    "reset_remedy": "drain the node's jobs from the GPU and reset it (nvidia-smi -r -i <bus id>, or reboot the node); "
                    "if the same code comes back on that GPU after the reset, service it",
}


def tools(option, find):
    """{tool: path or None}: ``find(option, name)`` applies the gather option to one tool."""
    return {"nvidia-smi": find(option, "nvidia-smi")}


def visible_selection(gpus, env):
    """(variable, its value, entries) of the variable that selects this vendor's devices for a
    job, or None when it is unset. Entries are indices, UUIDs or MIG ids (gpu_bind resolves them)."""
    visible = env.get(VISIBLE_DEVICES[0])
    return None if visible is None else (VISIBLE_DEVICES[0], visible, visible_tokens(visible))


def visible_order_warning(env):
    """A warning line when CUDA numbers devices otherwise than nvidia-smi (and the plan) does, or None."""
    order = env.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if order != "PCI_BUS_ID" and re.search(r"(^|,)\s*\d", env.get(VISIBLE_DEVICES[0], "")):
        return ("CUDA_DEVICE_ORDER=%s: CUDA's device numbers may differ from nvidia-smi's; use UUIDs in "
                "CUDA_VISIBLE_DEVICES" % order)
    return None


def parse_gpu_list(text):
    """`nvidia-smi -L` -> {mig_uuid_lower: parent_gpu_uuid}."""
    out = {}
    parent = None
    for line in (text or "").splitlines():
        m = re.search(r"^GPU \d+:.*\(UUID: (GPU-[^)]+)\)", line.strip())
        if m:
            parent = m.group(1)
            continue
        m = re.search(r"\(UUID: (MIG-[^)]+)\)", line)
        if m and parent:
            out[m.group(1).lower()] = parent
    return out


def mig_parents(which, run_bounded, timeout=MIG_LIST_TIMEOUT_S, output_limit=MIG_LIST_OUTPUT_LIMIT):
    """{MIG uuid: parent GPU uuid} from `nvidia-smi -L` (``which(name)`` finds the tool,
    ``run_bounded`` is system/command.py's run); {} without the tool or when it broke a limit."""
    exe = which("nvidia-smi")
    if not exe:
        return {}
    res = run_bounded([exe, "-L"], timeout=timeout, output_limit=output_limit)
    if res.problem:   # killed after the time or output limit, or not started: no map
        return {}
    return parse_gpu_list(res.stdout)


MIG_UNLISTED = "cannot map MIG device %s to its GPU: nvidia-smi -L does not list it (use the MIG-GPU-<uuid>/<gi>/<ci> form or the parent GPU's UUID)"


# nvidia-smi may list GPUs that sysfs does not show: gather() runs even without a sysfs entry
GATHER_WITHOUT_SYSFS = True


def blank_gpu(bus, vendor_id=VENDOR_ID):
    return {"index": None, "uuid": None, "model": None, "memory_mb": None, "pci_bus_id": bus,
            "numa_node": None, "local_cpus": None,
            "pcie": {"width": None, "width_max": None, "gen": None, "gen_max": None,
                     "gen_host_max": None, "speed": None, "speed_max": None},
            "ecc_enabled": None, "nvlink_active": None, "driver": None,
            "vendor_id": VENDOR_ID, "device_id": None}


def not_an_accelerator(rd, d):
    """Every NVIDIA display/3D controller is a GPU to gather."""
    return False


def sysfs_gpu(rd, d, bus, vendor_id=VENDOR_ID):
    return read_common(rd, d, blank_gpu(bus))


def device_files(gpu):
    """The device files a job on this GPU needs (cgroup device rules, gres.conf File=)."""
    minor = gpu.get("minor_number", gpu.get("index"))
    return ["/dev/nvidia%s" % minor] if minor is not None else []


def links_active(gpu):
    """Active interconnect links of one GPU entry (schema 1: nvlink_active)."""
    return gpu.get("nvlink_active")


def _merge_smi(g, s):
    """Fill a sysfs GPU entry from one parse_xml() GPU."""
    g["uuid"] = s["uuid"]
    g["model"] = s["product_name"]
    g["memory_mb"] = s["memory_total_mib"]
    g["ecc_enabled"] = s["ecc_mode"]["current"]
    g["serial"] = s["serial"]
    g["mig_mode"] = s["mig_mode"]["current"]
    g["virtualization_mode"] = s["virtualization_mode"]
    sp = s["pcie"]
    for key in ("width", "width_max", "gen", "gen_max"):
        if g["pcie"][key] is None:
            g["pcie"][key] = sp[key]
    g["pcie"]["gen_host_max"] = sp["gen_host_max"]
    ee = s.get("ecc_errors")
    g["ecc_errors"] = dict((k, ee.get(k)) for k in (
        "volatile_corrected", "volatile_uncorrected", "aggregate_corrected",
        "aggregate_uncorrected")) if ee else None
    g["retired_pages"] = s.get("retired_pages")
    g["remapped_rows"] = s.get("remapped_rows")


def wants_nvlink_status(smi_gpus):
    """``nvidia-smi nvlink -s`` runs (once, for all GPUs) only where its answer matters: two or
    more GPUs (NVLink joins GPUs; gpu.interconnect does not apply to one) of which at least one
    is not in MIG mode (NVLink queries are refused in MIG mode)."""
    return len(smi_gpus) >= 2 and any(s["mig_mode"]["current"] is not True for s in smi_gpus)


def _apply_nvlink(gpus, run, nvidia_smi_path, errors):
    res = run([nvidia_smi_path, "nvlink", "-s"])
    out = res[1]
    failed = command_failure(res, "nvidia-smi nvlink -s")
    if failed:
        errors.append(failed)
        return
    try:
        status = nvsmi.parse_nvlink_status(out)
    except ParseError as exc:
        errors.append(str(exc))
        return
    uuids = [st["uuid"] for st in status if st["uuid"]]
    by_uuid = dict((st["uuid"], st) for st in status) if len(set(uuids)) == len(status) else {}
    by_index = dict((st["index"], st) for st in status)
    for g in gpus:
        st = by_uuid.get(g.get("uuid")) if by_uuid else by_index.get(g.get("smi_index"))
        if st is not None:
            g["nvlink_active"] = st["active"]


def gather(rd, gpus, run, tools, errors):
    """The NVIDIA GPUs of the node, ordered as nvidia-smi lists them (then the ones it did not
    list, by bus id). ``gpus``: this vendor's sysfs entries sorted by bus id; ``tools``:
    {"nvidia-smi": path or None}."""
    for i, g in enumerate(gpus):
        g["index"] = i
    # A GPU without driver/nvidia-smi still gets a name from the node's pci.ids; the controller
    # maps it to a catalogue model (the model itself stays null: it was not reported by the GPU).
    names = pci_ids_names(rd.root, [g["device_id"] for g in gpus], VENDOR_ID)
    for g in gpus:
        g["pci_name"] = names.get(g["device_id"])
    nvidia_smi_path = tools.get("nvidia-smi")
    if not nvidia_smi_path:
        return gpus
    res = run([nvidia_smi_path, "-q", "-x"])
    out = res[1]
    failed = command_failure(res, "nvidia-smi -q -x")
    if failed:
        errors.append(failed)
        return gpus
    try:
        smi = nvsmi.parse_xml(out)
    except ParseError as exc:
        errors.append(str(exc))
        return gpus
    by_bus = dict((g["pci_bus_id"], g) for g in gpus)
    ordered = []
    for s in smi["gpus"]:
        g = by_bus.pop(s["pci_bus_id"], None) or blank_gpu(s["pci_bus_id"])
        _merge_smi(g, s)
        g["smi_index"] = s["index"]
        ordered.append(g)
    if wants_nvlink_status(smi["gpus"]):
        _apply_nvlink(ordered, run, nvidia_smi_path, errors)
    # GPUs in sysfs that nvidia-smi did not list (no driver bound, fallen off the bus...)
    out_list = ordered + sorted(by_bus.values(), key=lambda g: g["pci_bus_id"])
    for g in out_list:
        g.pop("smi_index", None)
    return out_list
