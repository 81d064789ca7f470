# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Huawei Ascend NPUs behind the GPU vendor seam (see __init__.py for the interface): the third
vendor, the proof that a vendor is one module.

sysfs: PCI vendor 0x19e5 (Huawei makes NICs, RAID and NVMe controllers too, so only the NPU
device ids count): ``DEVICES`` is the table of Huawei's own driver package,
``scripts/package/custom/driver/common/scripts/ascend_bug_report.sh`` (github.com/verylucky01/driver
@29b54652a55dc20eea95f69b526b95f1784620c9, a copy of the Ascend driver's open source release, CANN Open
Software License 2.0): ``PCIE_BDF_310="19e5:d100"``, ``PCIE_BDF_310P="19e5:d500"``,
``PCIE_BDF_910="19e5:d801"``, ``PCIE_BDF_910B="19e5:d802"``, ``PCIE_BDF_910_93="19e5:d803"`` (the
Atlas A3's chip). The link, NUMA node and local CPUs are read as for every vendor (pci.py).

``npu-smi info`` (parsers/npu_smi.py, real captures of npu-smi 24.1 to 26.0 in tests/data/real/ascend)
gives each chip's name, health, HBM (310P: its DDR "Memory-Usage") and, on the A3 and the 310P Duo,
the chip's physical id: an entry here is one chip (a logical device: what ASCEND_RT_VISIBLE_DEVICES and
/dev/davinciN count), ``npu_id`` its card and ``chips_per_npu`` how many chips the card carries (A3,
Atlas 300I Duo: 2).

Device files (a job's cgroup, gres.conf): ``/dev/davinci<phy id>`` and the driver's shared
``/dev/davinci_manager``, ``/dev/devmm_svm``, ``/dev/hisi_hdc`` (Ascend/ascend-device-plugin
``pkg/common/constants.go``: HiAIManagerDevice, HiAISVMDevice, HiAIHDCDevice). Visible devices:
``ASCEND_RT_VISIBLE_DEVICES`` (CANN's runtime: logical ids) and ``ASCEND_VISIBLE_DEVICES`` (the Ascend
container runtime; ascend-device-plugin ``ascendVisibleDevicesEnv``).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu.pci import clean_text, read_common, visible_tokens
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import npu_smi
from ansible_collections.dlrack.node.plugins.module_utils.system.command import failure as command_failure

NAME = "ascend"
PCI_VENDORS = ("0x19e5",)
VENDOR_ID = "0x19e5"
VENDOR_NAMES = {VENDOR_ID: NAME}
GPU_CLASSES = ("0x1200",)        # processing accelerator
LABEL = "Huawei Ascend NPU"
PCI_LABEL = "Huawei Ascend NPU (0x19e5)"
TOOLS = ("npu-smi",)
TOOL_OPTION = "ascend"
VISIBLE_DEVICES = ("ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES")
INTERCONNECT = "hccs"
COPY_RUNTIME = "torch_npu"
GRES_FILE = "/dev/davinci{phy_id}"
SHARED_DEVICE_FILES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
# PCI device id -> the chip (ascend_bug_report.sh, see above)
DEVICES = {"0xd100": "Ascend 310", "0xd500": "Ascend 310P", "0xd801": "Ascend 910",
           "0xd802": "Ascend 910B", "0xd803": "Ascend 910 A3"}
WORDING = {
    "model_source": "no npu-smi",
    "memory_unknown": "NPU memory (NPU model unknown: no npu-smi, is the Ascend driver installed?)",
    "link": ("HCCS", "HCCS (Huawei Cache Coherence System)"),
    "link_capable": "all NPUs are HCCS models (%s); link state is not read by the gatherer",
    "link_unknown": "cannot verify HCCS: NPU model unknown (no npu-smi)",
    "link_unknown_remedy": "install the Ascend driver (npu-smi) and gather again",
    "link_remedy": "prefer Atlas 800/900 training servers (HCCS between the NPUs of a node) for multi-NPU training",
    "ecc_remedy": "enable HBM ECC with npu-smi set -t ecc-enable (then reboot the NPUs)",
    "ecc_unknown": "ECC mode not known (declared, or npu-smi does not say)",
}


# npu-smi runs only where sysfs shows an NPU
GATHER_WITHOUT_SYSFS = False


def blank_gpu(bus, vendor_id=VENDOR_ID):
    return {"index": None, "uuid": None, "model": None, "memory_mb": None, "pci_bus_id": bus,
            "numa_node": None, "local_cpus": None,
            "pcie": {"width": None, "width_max": None, "gen": None, "gen_max": None,
                     "gen_host_max": None, "speed": None, "speed_max": None},
            "ecc_enabled": None, "interconnect": None, "driver": None,
            "vendor": NAME, "vendor_id": vendor_id, "device_id": None,
            "npu_id": None, "chip_id": None, "phy_id": None, "chips_per_npu": None, "health": None}


def not_an_accelerator(rd, d):
    """A Huawei PCI device that is not an NPU (a NIC, RAID or NVMe controller): not a GPU."""
    return (clean_text(rd, os.path.join(d, "device")) or "").lower() not in DEVICES


def sysfs_gpu(rd, d, bus, vendor_id=VENDOR_ID):
    g = read_common(rd, d, blank_gpu(bus, vendor_id))
    g["model"] = DEVICES.get(g["device_id"])
    return g


def tools(option, find):
    return {"npu-smi": find(option, "npu-smi")}


def device_files(gpu):
    """The device files a job on this NPU needs: its /dev/davinciN and the driver's shared ones."""
    phy = gpu.get("phy_id")
    own = ["/dev/davinci%d" % phy] if isinstance(phy, int) and not isinstance(phy, bool) and 0 <= phy < 4096 else []
    return own + list(SHARED_DEVICE_FILES)


def gres_file(gpu):
    phy = gpu.get("phy_id")
    return "/dev/davinci%d" % phy if isinstance(phy, int) and not isinstance(phy, bool) and 0 <= phy < 4096 else None


def links_active(gpu):
    return (gpu.get("interconnect") or {}).get("links_active")


def visible_selection(gpus, env):
    """(variable, value, entries) of ASCEND_RT_VISIBLE_DEVICES (logical ids, which are the plan's
    NPU indexes in npu-smi order), else ASCEND_VISIBLE_DEVICES; None when neither is set."""
    for var in VISIBLE_DEVICES:
        value = env.get(var)
        if value is not None:
            return var, value, visible_tokens(value)
    return None


def _model(name, device_model):
    """'910B4' -> 'Ascend 910B4', '310P3' -> 'Ascend 310P3': npu-smi's name where it says more than
    the PCI device id (910B4 of a 910B), else the device id's model; a bare 'Ascend910' without a
    device id is unknown (the 910 and the A3's chip print it alike)."""
    name = re.sub(r"^Ascend\s*", "", name or "").strip()
    if not re.match(r"^[0-9]{3}[A-Za-z0-9-]{0,16}$", name):
        return device_model
    if name == "910" and not device_model:
        return None                # npu-smi names the 910 and the A3's chip alike: the PCI id decides
    from_tool = "Ascend %s" % name
    if device_model and not from_tool.replace(" ", "").startswith(device_model.replace(" ", "")):
        return device_model        # a generic 'Ascend910' on an A3 chip keeps the PCI id's model
    if device_model and len(from_tool) <= len(device_model):
        return device_model
    return from_tool


def _merge(g, c, per_npu):
    g["model"] = _model(c["name"], g.get("model"))
    total = c["hbm_total_mb"] if c["hbm_total_mb"] else c["memory_total_mb"]
    if total:
        g["memory_mb"] = total
    g["npu_id"], g["chip_id"], g["health"] = c["npu"], c["chip"], c["health"]
    g["phy_id"] = c["phy_id"] if c["phy_id"] is not None else c["npu"]
    g["chips_per_npu"] = per_npu.get(c["npu"])


def gather(rd, gpus, run, tools, errors):
    """The NPUs of the node: one entry per chip in npu-smi's order (then chips sysfs shows and
    npu-smi did not, by bus id); from sysfs alone when npu-smi is not installed."""
    path = tools.get("npu-smi")
    if not path:
        return gpus
    res = run([path, "info"])
    failed = command_failure(res, "npu-smi info")
    if failed:
        errors.append(failed)
        return gpus
    try:
        info = npu_smi.parse_info(res[1])
    except ParseError as exc:
        errors.append(str(exc))
        return gpus
    per_npu = {}
    for c in info["chips"]:
        per_npu[c["npu"]] = per_npu.get(c["npu"], 0) + 1
    by_bus = dict((g["pci_bus_id"], g) for g in gpus)
    used, out = set(), []
    for c in info["chips"]:
        if c["bus_id"] is None and gpus:
            # no bus id printed (masked, "NA"): it cannot be told which NPU sysfs shows it is, and a
            # chip of its own beside sysfs's would count that NPU twice; sysfs's entry stays
            errors.append("npu-smi info: NPU %s chip %s has no PCI bus id, so its name, memory and health are "
                          "not used" % (c["npu"], c["chip"]))
            continue
        base = by_bus.get(c["bus_id"])
        if base is None:
            g = blank_gpu(c["bus_id"])
        elif c["bus_id"] in used:         # the second chip of a card on one bus id (310P Duo)
            g = dict(base, pcie=dict(base["pcie"]))
        else:
            g = base
        used.add(c["bus_id"])
        _merge(g, c, per_npu)
        out.append(g)
    out.extend(sorted((g for b, g in by_bus.items() if b not in used), key=lambda g: g["pci_bus_id"]))
    return out
