# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Linux EDAC: read the memory-controller counters from sysfs and pick the platform's driver.

Pure Python, standard library only, no Ansible imports: the hardware gatherer imports it as a
module_util, and roles/ecc_monitor ships this very file to the node next to the collector
(``/usr/local/lib/dlrack/ecc/``), where ``python3 edac.py detect`` prints the driver detection
as JSON.

Nothing here raises on a missing, unreadable or garbled file: an unreadable counter is ``None``
for that field, and totals skip it. Counts are taken from sysfs, which is the source of truth;
``edac-util`` has been seen to report 0 where sysfs holds a corrected error
(grondo/edac-utils#15).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import sys

EDAC_MC = "sys/devices/system/edac/mc"
SYS_MODULE = "sys/module"

# Modules that drive a memory controller (as opposed to edac_core, the PCI/L2 helpers...).
KNOWN_MC_DRIVERS = (
    "i10nm_edac", "skx_edac", "sb_edac", "amd64_edac", "ghes_edac", "igen6_edac",
    "ie31200_edac", "pnd2_edac", "i7core_edac", "i5000_edac", "i5400_edac", "i7300_edac",
    "x38_edac", "i3200_edac", "i3000_edac", "e752x_edac", "thunderx_edac", "xgene_edac",
    "altera_edac", "octeon_edac", "synopsys_edac", "bluefield_edac", "dmc520_edac",
)

# mc_name as the drivers print it (drivers/edac/*.c) -> module name. Checked in order.
_MC_NAME_DRIVERS = (
    (re.compile(r"^Intel_10nm|^I10NM|10nm", re.I), "i10nm_edac"),
    (re.compile(r"^Skylake", re.I), "skx_edac"),
    (re.compile(r"^(Sandy Bridge|Ivy Bridge|Haswell|Broadwell|Knights Landing|KnightsLanding)",
                re.I), "sb_edac"),
    (re.compile(r"^(F1[0-9A-F]h|F[0-9A-F]{2}h|K8)(_|$)", re.I), "amd64_edac"),
    (re.compile(r"^ghes", re.I), "ghes_edac"),
    (re.compile(r"^igen6|Intel client SoC", re.I), "igen6_edac"),
    (re.compile(r"^IE31200", re.I), "ie31200_edac"),
    (re.compile(r"^pnd2", re.I), "pnd2_edac"),
    (re.compile(r"^i7 core|^i7core", re.I), "i7core_edac"),
)


# --------------------------------------------------------------------------------------------
# small safe readers
# --------------------------------------------------------------------------------------------

def _read(path):
    """File content stripped, or None when missing/unreadable/not text."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(65536)
    except (IOError, OSError):
        return None
    try:
        return data.decode("utf-8", "replace").strip()
    except Exception:  # pragma: no cover - decode with "replace" does not raise
        return None


def _read_int(path):
    """A non-negative integer counter, or None when missing or garbled."""
    text = _read(path)
    if text is None:
        return None
    text = text.strip()
    if not re.match(r"^[0-9]{1,20}$", text):
        return None
    return int(text)


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except (IOError, OSError):
        return []


def _natural_key(name):
    return [int(part) if part.isdecimal() else part for part in re.split(r"(\d+)", name)]


def _sum(values):
    """Sum of the known values; None when none is known."""
    known = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    if not known:
        return None
    return sum(known)


# --------------------------------------------------------------------------------------------
# sysfs reader
# --------------------------------------------------------------------------------------------

def driver_from_mc_name(mc_name):
    """Map an EDAC ``mc_name`` ("Skylake Socket#0 IMC#0", "F17h", "ghes_edac") to a module."""
    if not mc_name:
        return None
    for pattern, driver in _MC_NAME_DRIVERS:
        if pattern.search(mc_name.strip()):
            return driver
    return None


def _loaded_edac_modules(root):
    base = os.path.join(root, SYS_MODULE)
    return [name for name in _listdir(base) if name.endswith("_edac") and name != "edac_core"]


def _read_dimm(path, name):
    return {
        "name": name,
        "label": _read(os.path.join(path, "dimm_label")),
        "location": _read(os.path.join(path, "dimm_location")),
        "size_mb": _read_int(os.path.join(path, "size")),
        "mem_type": _read(os.path.join(path, "dimm_mem_type")),
        "edac_mode": _read(os.path.join(path, "dimm_edac_mode")),
        "ce_count": _read_int(os.path.join(path, "dimm_ce_count")),
        "ue_count": _read_int(os.path.join(path, "dimm_ue_count")),
    }


def _read_csrow(path, name):
    channels = []
    entries = _listdir(path)
    indexes = set()
    for entry in entries:
        match = re.match(r"^ch(\d+)_(ce_count|dimm_label)$", entry)
        if match:
            indexes.add(int(match.group(1)))
    for index in sorted(indexes):
        channels.append({
            "name": "ch%d" % index,
            "label": _read(os.path.join(path, "ch%d_dimm_label" % index)),
            "ce_count": _read_int(os.path.join(path, "ch%d_ce_count" % index)),
        })
    ce_count = _read_int(os.path.join(path, "ce_count"))
    if ce_count is None:
        # a csrow's ce_count is the sum of its channels' (drivers/edac/edac_mc_sysfs.c)
        ce_count = _sum([ch["ce_count"] for ch in channels])
    return {
        "name": name,
        "size_mb": _read_int(os.path.join(path, "size_mb")),
        "mem_type": _read(os.path.join(path, "mem_type")),
        "edac_mode": _read(os.path.join(path, "edac_mode")),
        "ce_count": ce_count,
        "ue_count": _read_int(os.path.join(path, "ue_count")),
        "channels": channels,
    }


def _read_mc(path, name):
    entries = _listdir(path)
    dimms = []
    csrows = []
    for entry in sorted(entries, key=_natural_key):
        full = os.path.join(path, entry)
        if not os.path.isdir(full):
            continue
        if re.match(r"^(dimm|rank)\d+$", entry):
            dimms.append(_read_dimm(full, entry))
        elif re.match(r"^csrow\d+$", entry):
            csrows.append(_read_csrow(full, entry))
    mc = {
        "name": name,
        "mc_name": _read(os.path.join(path, "mc_name")),
        "size_mb": _read_int(os.path.join(path, "size_mb")),
        "seconds_since_reset": _read_int(os.path.join(path, "seconds_since_reset")),
        "ce_count": _read_int(os.path.join(path, "ce_count")),
        "ue_count": _read_int(os.path.join(path, "ue_count")),
        "ce_noinfo_count": _read_int(os.path.join(path, "ce_noinfo_count")),
        "ue_noinfo_count": _read_int(os.path.join(path, "ue_noinfo_count")),
        "dimms": dimms,
        "csrows": csrows,
    }
    # An mc whose own counter is unreadable: fall back to the per-DIMM (or per-csrow) sum plus
    # noinfo, the same arithmetic the kernel does for ce_count.
    for key, sub in (("ce_count", "ce_count"), ("ue_count", "ue_count")):
        if mc[key] is None:
            parts = dimms or csrows
            part_sum = _sum([p.get(sub) for p in parts])
            if part_sum is not None:
                noinfo = mc[key.replace("_count", "_noinfo_count")] or 0
                mc[key] = part_sum + noinfo
    return mc


def read_edac_sysfs(root="/"):
    """Read ``<root>/sys/devices/system/edac/mc``.

    Returns None when there is no ``mc*`` (no EDAC memory controller registered), else::

        {driver, controllers, corrected, uncorrected,
         mcs: [{name, mc_name, size_mb, seconds_since_reset, ce_count, ue_count,
                ce_noinfo_count, ue_noinfo_count,
                dimms: [{name, label, location, size_mb, mem_type, edac_mode,
                         ce_count, ue_count}],
                csrows: [{name, size_mb, mem_type, edac_mode, ce_count, ue_count,
                          channels: [{name, label, ce_count}]}]}]}

    ``driver`` comes from a loaded ``<root>/sys/module/*_edac`` module (a memory-controller
    one), else from the mc_name; None when neither tells. ``corrected``/``uncorrected`` are
    the sums of the per-mc counts (None when no mc had a readable count).
    """
    root = root or "/"
    base = os.path.join(root, EDAC_MC)
    names = [n for n in _listdir(base) if re.match(r"^mc\d+$", n)
             and os.path.isdir(os.path.join(base, n))]
    if not names:
        return None
    mcs = [_read_mc(os.path.join(base, n), n) for n in sorted(names, key=_natural_key)]

    driver = None
    modules = _loaded_edac_modules(root)
    by_name = [driver_from_mc_name(mc["mc_name"]) for mc in mcs]
    by_name = [d for d in by_name if d]
    if by_name and by_name[0] in modules:
        driver = by_name[0]
    else:
        mc_modules = [m for m in modules if m in KNOWN_MC_DRIVERS]
        if len(mc_modules) == 1:
            driver = mc_modules[0]
        elif by_name:
            driver = by_name[0]
        elif mc_modules:
            driver = mc_modules[0]
    return {
        "driver": driver,
        "controllers": len(mcs),
        "corrected": _sum([mc["ce_count"] for mc in mcs]),
        "uncorrected": _sum([mc["ue_count"] for mc in mcs]),
        "mcs": mcs,
    }


def edac_summary(full):
    """The ``dlrack_hw.memory.edac`` short form of a read_edac_sysfs() result (None stays None)."""
    if not full:
        return None
    return {key: full.get(key) for key in ("driver", "controllers", "corrected", "uncorrected")}


# --------------------------------------------------------------------------------------------
# platform driver detection
# --------------------------------------------------------------------------------------------

# Intel family 6 models (arch/x86/include/asm/intel-family.h) per EDAC driver.
_INTEL_I10NM = {
    0x6A: "Ice Lake-SP", 0x6C: "Ice Lake-D", 0x86: "Snow Ridge/Jacobsville",
    0x8F: "Sapphire Rapids", 0xCF: "Emerald Rapids", 0xAD: "Granite Rapids",
    0xAE: "Granite Rapids-D", 0xAF: "Sierra Forest", 0xB6: "Grand Ridge", 0xDD: "Clearwater Forest",
}
_INTEL_SKX = {0x55: "Skylake-SP/Cascade Lake/Cooper Lake"}
_INTEL_SB = {
    0x2D: "Sandy Bridge-EP", 0x3E: "Ivy Bridge-EP", 0x3F: "Haswell-EP",
    0x4F: "Broadwell-EP", 0x56: "Broadwell-DE", 0x57: "Knights Landing", 0x85: "Knights Mill",
}
# AMD families amd64_edac drives (K8 = 0x0f ... Zen 5 = 0x1a).
_AMD_FAMILIES = (0x0F, 0x10, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1A)

_VIRT_NONE = ("", "none", "host", "bare-metal", "baremetal", "physical", "nonvirtualized",
              "not-virtualized", None)


def _parse_cpuinfo(text):
    vendor = family = model = None
    hypervisor = False
    for line in (text or "").splitlines():
        if ":" not in line:
            continue
        key, _sep, value = line.partition(":")
        key = key.strip().lower()
        value = value.strip()
        if key == "vendor_id" and vendor is None:
            vendor = value
        elif key == "cpu family" and family is None:
            family = _to_int(value)
        elif key == "model" and model is None:
            model = _to_int(value)
        elif key == "flags" and " hypervisor" in " " + value + " ":
            hypervisor = True
    return vendor, family, model, hypervisor


def _to_int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        text = str(value).strip()
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except (TypeError, ValueError):
        return None


def _vendor(value):
    text = (value or "").strip().lower()
    if text in ("genuineintel", "intel") or text.startswith("intel"):
        return "intel"
    if text in ("authenticamd", "amd", "hygongenuine", "hygon") or text.startswith("amd"):
        return "amd"
    if text in ("arm", "aarch64") or text.startswith("arm"):
        return "arm"
    return text or None


def _modules_list(loaded_modules):
    """Accept a list of names, or /proc/modules text, or None."""
    if loaded_modules is None:
        return []
    if isinstance(loaded_modules, str):
        return [line.split()[0] for line in loaded_modules.splitlines() if line.strip()]
    try:
        return [str(m).strip() for m in loaded_modules if str(m).strip()]
    except TypeError:
        return []


def detect_edac_driver(cpu_vendor=None, cpu_family=None, cpu_model=None, cpuinfo=None,
                       loaded_modules=None, virtualization=None, ghes=False):
    """Choose the EDAC memory-controller driver for a platform.

    Arguments (all optional; what is missing is read from ``cpuinfo`` text when given):
    ``cpu_vendor`` ("GenuineIntel"/"intel"/"AuthenticAMD"/"amd"), ``cpu_family``/``cpu_model``
    (ints or "0x8f"), ``cpuinfo`` (/proc/cpuinfo text), ``loaded_modules`` (names or
    /proc/modules text), ``virtualization`` (systemd-detect-virt output or Ansible's
    virtualization_type when the role is guest; "none" on bare metal), ``ghes`` (the firmware
    exposes GHES, i.e. /sys/firmware/acpi/tables/HEST exists: firmware-first error reporting).

    Returns ``(driver, reason)``: driver is a module name or None; reason says why in words.
    None means "unknown" (VM, container, unsupported CPU), never "healthy".
    """
    info_vendor = info_family = info_model = None
    hypervisor_flag = False
    if cpuinfo:
        info_vendor, info_family, info_model, hypervisor_flag = _parse_cpuinfo(cpuinfo)
    vendor = _vendor(cpu_vendor) or _vendor(info_vendor)
    family = _to_int(cpu_family) if cpu_family is not None else info_family
    model = _to_int(cpu_model) if cpu_model is not None else info_model
    modules = _modules_list(loaded_modules)

    virt = (virtualization or "").strip().lower() if isinstance(virtualization, str) else None
    if virt not in _VIRT_NONE:
        return None, ("virtualized (%s): the memory controllers belong to the hypervisor or "
                      "the host kernel, no EDAC driver applies; ECC state is unknown here" % virt)
    if virt is None and hypervisor_flag:
        return None, ("virtualized (cpuinfo has the hypervisor flag): no EDAC driver applies; "
                      "ECC state is unknown here")

    loaded = [m for m in modules if m in KNOWN_MC_DRIVERS]
    if loaded:
        return loaded[0], "already loaded: %s" % loaded[0]

    if vendor == "intel":
        if family == 6 and model is not None:
            for table, driver in ((_INTEL_I10NM, "i10nm_edac"), (_INTEL_SKX, "skx_edac"),
                                  (_INTEL_SB, "sb_edac")):
                if model in table:
                    return driver, "Intel %s (family 6 model 0x%02x)" % (table[model], model)
        if ghes:
            return "ghes_edac", ("Intel CPU without a native EDAC driver here; firmware-first "
                                 "(GHES) reporting")
        return None, ("Intel family %s model %s: no server EDAC driver known for this CPU" %
                      (family, "0x%02x" % model if model is not None else None))
    if vendor == "amd":
        if family in _AMD_FAMILIES:
            return "amd64_edac", "AMD family 0x%02x" % family
        if ghes:
            return "ghes_edac", "AMD CPU, firmware-first (GHES) reporting"
        return None, "AMD family %s: not handled by amd64_edac" % (family,)
    if ghes:
        return "ghes_edac", "firmware-first (GHES) reporting on a %s CPU" % (vendor or "unknown")
    return None, "CPU vendor %s: no EDAC driver known" % (vendor or "unknown")


def detect_host(root="/", virtualization=None):
    """Run detect_edac_driver against a (live or captured) root; returns a JSON-able dict.

    ``virtualization`` overrides what the container markers say (the role passes Ansible's
    virtualization facts, which also see VMs: "kvm", "vmware"... or "none").
    """
    root = root or "/"
    cpuinfo = _read(os.path.join(root, "proc/cpuinfo"))
    modules_text = _read(os.path.join(root, "proc/modules"))
    modules = _modules_list(modules_text) + _loaded_edac_modules(root)
    virt = None
    for marker, name in (("run/systemd/container", None), ("run/.containerenv", "podman"),
                         (".dockerenv", "docker")):
        content = _read(os.path.join(root, marker))
        if content is not None:
            virt = (content.splitlines() or [""])[0].strip() or name or "container"
            break
    if virt is None and virtualization is not None:
        virt = virtualization
    ghes = os.path.exists(os.path.join(root, "sys/firmware/acpi/tables/HEST"))
    driver, reason = detect_edac_driver(cpuinfo=cpuinfo, loaded_modules=modules,
                                        virtualization=virt, ghes=ghes)
    return {
        "driver": driver,
        "reason": reason,
        "loaded": bool(driver) and driver in modules,
        "virtualization": virt,
        "sysfs_present": read_edac_sysfs(root) is not None,
    }


def main(argv=None):
    """``python3 edac.py detect [--root /] [--virt X]`` or ``python3 edac.py read [--root /]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv.pop(0) if argv else "read"
    root = "/"
    virt = None
    while argv:
        arg = argv.pop(0)
        if arg == "--root" and argv:
            root = argv.pop(0)
        elif arg == "--virt" and argv:
            virt = argv.pop(0)
    if command == "detect":
        result = detect_host(root, virtualization=virt)
    else:
        result = read_edac_sysfs(root)
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())  # a command-line entry point, not a module: no exit_json here
