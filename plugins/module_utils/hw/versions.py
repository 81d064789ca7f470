# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The software and firmware versions of a node (issue 33): ``dlrack_hw.versions``.

Read-only and bounded. Files: the kernel release (/proc/sys/kernel/osrelease), BIOS vendor, version
and date (/sys/class/dmi/id), every RDMA device's firmware (/sys/class/infiniband/*/fw_ver, with
hca_type, board_id and its driver), every physical network interface's driver (the basename of
/sys/class/net/*/device/driver) and that module's version (/sys/module/<driver>/version, where
the module has one). Commands, each only where the tool is installed and each bounded by the
gatherer's runner: ``ethtool -i`` for the firmware of at most ``MAX_ETHTOOL`` interfaces, ``ofed_info
-s``, and ``ipmitool mc info`` (the BMC's firmware; as root, where an IPMI device exists). The GPU
stack (driver, CUDA/ROCm, NCCL/RCCL, VBIOS and InfoROM per GPU, Fabric Manager, DCGM) is the vendor
seam's (hw/gpu/stack.py).

Shape (every value a string or None; docs/dlrack_hw.md)::

    {kernel, gpu_driver, cuda_driver, cuda_runtime, rocm, nccl, rccl, fabric_manager, dcgm, ofed,
     bmc, bios: {vendor, version, date},
     gpus: [{pci_bus_id, vbios, inforom: {image, oem, ecc, power} or None, driver}],
     nics: [{name, kind (infiniband | ethernet), driver, driver_version, firmware, model, bus}]}
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import time

from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import stack
from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import natural_key, readlink_base
from ansible_collections.dlrack.node.plugins.module_utils.system.command import failure as command_failure

MAX_NICS = 64        # RDMA devices and network interfaces listed (an 8-GPU node has 8-10 NICs)
MAX_ETHTOOL = 16     # ethtool -i calls per gather
KEYS = ("kernel", "gpu_driver", "cuda_driver", "cuda_runtime", "rocm", "nccl", "rccl", "fabric_manager", "dcgm",
        "ofed", "bmc")
IPMI_DEVICES = ("/dev/ipmi0", "/dev/ipmi/0", "/dev/ipmidev/0")
# The commands of this section (ethtool, ofed_info, ipmitool, nv-fabricmanager; each bounded by the
# gatherer's runner) share this budget: once it is spent the rest are not started, one line says so.
BUDGET_S = 30


class _Budget(object):
    """``run`` that stops starting commands once ``budget_s`` seconds have gone by."""

    def __init__(self, run, errors, budget_s=BUDGET_S, clock=time.monotonic):
        self._run, self._errors, self._clock = run, errors, clock
        self._end = clock() + budget_s
        self.budget_s = budget_s
        self.skipped = []

    def __call__(self, argv):
        if self._clock() > self._end:
            self.skipped.append(os.path.basename(str(argv[0])))
            return (None, "", "")
        return self._run(argv)

    def report(self):
        if self.skipped:
            self._errors.append("versions: %s not run: the %d s budget of the version commands was spent"
                                % (", ".join(sorted(set(self.skipped))), self.budget_s))


clean = stack.clean


def parse_ethtool_i(text):
    """``ethtool -i IFACE`` -> {driver, version, firmware, bus} (None where not printed or empty)."""
    fields = {}
    for line in (text or "").splitlines()[:64]:
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip().lower()] = value.strip()
    return {"driver": clean(fields.get("driver")), "version": clean(fields.get("version")),
            "firmware": clean(fields.get("firmware-version")), "bus": clean(fields.get("bus-info"))}


def parse_ofed_info(text):
    """``ofed_info -s`` -> 'MLNX_OFED_LINUX-5.8-1.0.1.1' (the trailing colon dropped), or None."""
    for line in (text or "").splitlines():
        line = line.strip().rstrip(":").strip()
        if line:
            return clean(line)
    return None


_FW_REV = re.compile(r"^\s*Firmware Revision\s*:\s*(\S+)", re.M)


def parse_ipmi_mc_info(text):
    """``ipmitool mc info`` -> the BMC's 'Firmware Revision', or None."""
    m = _FW_REV.search(text or "")
    return clean(m.group(1)) if m else None


def _nics(rd, run, find, errors):
    out = []
    ib = rd.path("/sys/class/infiniband")
    for name in sorted(rd.listdir(ib), key=natural_key)[:MAX_NICS]:
        d = os.path.join(ib, name)
        out.append({"name": clean(name), "kind": "infiniband", "firmware": clean(rd.text(os.path.join(d, "fw_ver"))),
                    "model": clean(rd.text(os.path.join(d, "hca_type"))) or clean(rd.text(os.path.join(d, "board_id"))),
                    "driver": clean(readlink_base(os.path.join(d, "device", "driver"))), "driver_version": None,
                    "bus": clean(readlink_base(os.path.join(d, "device")))})
    net = rd.path("/sys/class/net")
    ethtool = find("ethtool")
    calls = 0
    for name in sorted(rd.listdir(net), key=natural_key):
        if len(out) >= MAX_NICS:
            break
        d = os.path.join(net, name)
        if not os.path.exists(os.path.join(d, "device")):
            continue   # virtual (lo, bridges, bonds, veth): no firmware of its own
        driver = clean(readlink_base(os.path.join(d, "device", "driver")))
        nic = {"name": clean(name), "kind": "ethernet", "driver": driver, "firmware": None, "model": None,
               "driver_version": clean(rd.text(rd.path("/sys/module/%s/version" % driver))) if driver else None,
               "bus": clean(readlink_base(os.path.join(d, "device")))}
        if ethtool and calls < MAX_ETHTOOL:
            calls += 1
            info = _command(run, [ethtool, "-i", name], "ethtool -i %s" % name, parse_ethtool_i, errors)
            if info:
                nic["firmware"] = info["firmware"]
                nic["driver"] = nic["driver"] or info["driver"]
                nic["driver_version"] = nic["driver_version"] or info["version"]
        out.append(nic)
    return out


def _command(run, argv, what, parse, errors):
    res = run(argv)
    if res[0] is None:     # not started: the budget is spent (_Budget)
        return None
    failed = command_failure(res, what)
    if failed:
        errors.append(failed)
        return None
    return parse(res[1])


def gather_versions(rd, run, tools, find, gpus, is_root, errors):
    """``dlrack_hw.versions`` of the node under ``rd`` (a gpu.pci.SysReader). ``tools``: the GPU
    vendor seam's {tool: path}; ``find(name)``: a tool's path or None; ``gpus``: the node's GPU
    entries (None when not gathered); ``is_root``: whether the BMC may be asked."""
    out = dict.fromkeys(KEYS)
    run = _Budget(run, errors)
    out["kernel"] = clean(rd.text(rd.path("/proc/sys/kernel/osrelease")))
    dmi = "/sys/class/dmi/id/"
    out["bios"] = {"vendor": clean(rd.text(rd.path(dmi + "bios_vendor"))),
                   "version": clean(rd.text(rd.path(dmi + "bios_version"))),
                   "date": clean(rd.text(rd.path(dmi + "bios_date")))}
    gpu = stack.gpu_stack(rd, run, tools, find, gpus, errors)
    out["gpus"] = gpu.pop("gpus", [])
    for key, value in gpu.items():
        if key in out:
            out[key] = value
    out["nics"] = _nics(rd, run, find, errors)
    ofed = find("ofed_info")
    if ofed:
        out["ofed"] = _command(run, [ofed, "-s"], "ofed_info -s", parse_ofed_info, errors)
    ipmitool = find("ipmitool")
    if ipmitool and is_root and any(os.path.exists(rd.path(p)) for p in IPMI_DEVICES):
        out["bmc"] = _command(run, [ipmitool, "mc", "info"], "ipmitool mc info", parse_ipmi_mc_info, errors)
    run.report()
    return out
