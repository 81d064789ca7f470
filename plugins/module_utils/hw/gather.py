# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Gather a ``dlrack_hw`` document (docs/dlrack_hw.md, the one contract) from a live host.

One pass over sysfs/procfs under ``root`` plus at most one call each of ``nvidia-smi -q -x``
(when it exists), ``nvidia-smi nvlink -s`` (only when the XML lists two or more GPUs, not all in
MIG mode: ``wants_nvlink_status``), for AMD/Hygon GPUs ``amd-smi static|metric --json`` or
``rocm-smi`` / ``hy-smi --json`` (GPUs are read through the vendor seam, hw/gpu/),
``dmidecode -t memory`` (as root, when it exists) and ``blkid -p`` per disk and partition (as root). Commands go through an injected
``run_command(argv) -> (rc, out, err)`` so tests can pass real captured outputs; the default (and
the module's) is system/command.py's bounded runner: each command is killed after
``DEFAULT_COMMAND_TIMEOUT_S`` and stopped past ``DEFAULT_OUTPUT_LIMIT`` bytes per stream. A command
that broke a limit is a line in ``errors`` naming it and the limit, and is listed in the returned
``command_failures`` list the caller passes (the module fails the host for those: a wedged driver
is not "no GPU").

Nothing here fails for a missing GPU, driver, dmidecode or EDAC, for running unprivileged or for
garbage in the tree: the field is ``None`` (or the list empty) and, when something was tried and
failed, a line is added to ``errors``: a tool's exit status, a file that exists but cannot be
read (permission denied), a garbled cpulist or /proc/cpuinfo number, a cpulist naming CPU ids
above ``MAX_CPU_ID`` (refused before it is expanded). One odd GPU never drops the others.
Unknown values are ``None``, never guessed.

Keys beyond the contract (all optional for consumers): ``cpu.{cores_per_socket,
threads_per_core, vendor_id, family, model_id, stepping}``, ``memory.{installed_mb, dimm_count,
dimms}``, ``gpus[].{driver, vendor_id, device_id, serial, mig_mode, virtualization_mode,
ecc_errors, retired_pages, remapped_rows}`` (AMD GPUs also ``vendor, interconnect, ras,
render_node, kfd_node, package``: hw/gpu/amd.py), ``gpus[].pcie.{gen_host_max, speed, speed_max}``,
``disks[].{path, rotational, removable, read_only, role, wwid, wwn, by_id_all, probe}`` (see
blockdev.py), ``host``, ``uptime_s``, ``errors``; with the host subset ``versions`` (the software and firmware
stack: hw/versions.py; the GPU part shares the one ``nvidia-smi -q -x``: a command asked twice in one gather
runs once).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shutil

from ansible_collections.dlrack.node.plugins.module_utils.storage import blockdev
from ansible_collections.dlrack.node.plugins.module_utils.hw.cpulist import (
    MAX_CPUS,
    format_cpulist, parse_cpulist)
from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import (
    READ_LIMIT, container_marker, listdir, natural_key, parse_cpuinfo, read_int, read_text,
    read_uptime, readlink_base, under)
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import (
    ParseError)
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import dmidecode as dmi_parser
from ansible_collections.dlrack.node.plugins.module_utils.hw import gpu as gpu_seam
from ansible_collections.dlrack.node.plugins.module_utils.hw import versions as hw_versions
from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import pci as gpu_pci
from ansible_collections.dlrack.node.plugins.module_utils.hw import pcie_tree
from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults import gather as gpu_faults_gather
from ansible_collections.dlrack.node.plugins.module_utils.hw import power as hw_power
from ansible_collections.dlrack.node.plugins.module_utils.hw import fabric as hw_fabric
from ansible_collections.dlrack.node.plugins.module_utils.system import command

try:
    from ansible_collections.dlrack.node.plugins.module_utils.ecc.edac import read_edac_sysfs
except ImportError:  # pragma: no cover - edac.py ships with the collection
    read_edac_sysfs = None

SCHEMA_VERSION = 1
SUBSETS = ("cpu", "memory", "gpus", "disks", "edac", "host")
TOOL_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


# --------------------------------------------------------------------------------------------
# small safe readers (never raise): the collection's one copy lives in hostfs

_p = under
_listdir = listdir
_natural = natural_key
_readlink_base = readlink_base


def _read(path, limit=READ_LIMIT, errors=None):
    return read_text(path, limit=limit, errors=errors)


def _read_int(path, errors=None):
    return read_int(path, errors=errors)


# Kernels are built with at most 8192 CPUs (x86_64 MAXSMP, ppc64); a cpulist naming an id
# above this bound is garbage (seen: local_cpulist "0-4294967295"), and expanding it would
# take gigabytes. It is refused before parsing.
MAX_CPU_ID = MAX_CPUS - 1   # the one bound, in cpulist
_NUMBER = re.compile(r"[0-9]+")
_NOT_CPULIST = re.compile(r"[^0-9,:\s-]")


def _cpulist(text, what=None, errors=None):
    """Normalised cpulist string, or None when unreadable, garbled or out of bounds (then a
    line naming ``what`` goes to ``errors``)."""
    if text is None:
        return None
    bad = None
    odd = _NOT_CPULIST.search(text)
    if odd:
        bad = "character %r is not part of a cpulist" % odd.group(0)
    for num in ([] if bad else _NUMBER.findall(text)):
        if len(num) > 5 or int(num) > MAX_CPU_ID:
            shown = num[:12] + ("..." if len(num) > 12 else "")
            bad = "names CPU id %s, above the bound %d" % (shown, MAX_CPU_ID)
            break
    if bad is None:
        try:
            return format_cpulist(parse_cpulist(text))
        except ValueError as exc:  # CpuListError, or int() of a non-ASCII digit
            bad = str(exc)
    if errors is not None and what:
        errors.append("%s: %r is not a usable cpulist (%s)" % (what, text[:60], bad))
    return None


DEFAULT_COMMAND_TIMEOUT_S = command.DEFAULT_TIMEOUT_S
DEFAULT_OUTPUT_LIMIT = command.DEFAULT_OUTPUT_LIMIT


def default_run_command(argv):
    """The bounded runner (system/command.py) with the default limits: a Result, which is
    (rc, stdout, stderr) as text with LC_ALL=C; never raises."""
    return command.run(argv, timeout=DEFAULT_COMMAND_TIMEOUT_S, output_limit=DEFAULT_OUTPUT_LIMIT)


def find_tool(name, root="/"):
    """Path of ``name``: PATH plus the sbin dirs on a live root; under a test root, the tool
    exists when ``<root>/usr/bin/<name>`` (or another usual dir) exists."""
    if root in ("/", "", None):
        path = os.environ.get("PATH", "") + os.pathsep + os.pathsep.join(TOOL_DIRS)
        return shutil.which(name, path=path)
    for d in TOOL_DIRS:
        cand = _p(root, os.path.join(d, name))
        if os.path.isfile(cand):
            return cand
    return None


# --------------------------------------------------------------------------------------------
# cpu

_VENDORS = {"authenticamd": "amd", "hygongenuine": "amd", "genuineintel": "intel"}


def _vendor(info):
    v = (info.get("vendor_id") or "").lower()
    if v in _VENDORS:
        return _VENDORS[v]
    if info.get("implementer") or "arm" in v:
        return "arm"
    if info.get("model") or v:
        return "other"
    return None


class _Reader(gpu_pci.SysReader):
    """Reads under ``root``; unreadable (not missing) files become lines in ``errors``. The vendor
    seam's reader, with cpulists validated (and normalized) as the gatherer wants them."""

    def __init__(self, root, errors):
        super(_Reader, self).__init__(root, errors)
        self.root = root

    def cpulist(self, path, what):
        return _cpulist(self.text(path, limit=65536), what, self.errors)


def _gather_cpu(rd, cpuinfo):
    cpu = {"model": cpuinfo["model"], "vendor": _vendor(cpuinfo), "sockets": None, "cores": None,
           "threads": None, "pcie_lanes": None, "numa_nodes": None, "core_cpus": None,
           "cores_per_socket": None, "threads_per_core": None, "vendor_id": cpuinfo["vendor_id"],
           "family": cpuinfo["family"], "model_id": cpuinfo["model_id"],
           "stepping": cpuinfo["stepping"]}
    base = rd.path("/sys/devices/system/cpu")
    packages, siblings, threads = set(), {}, 0
    for name in rd.listdir(base):
        if not re.match(r"^cpu\d+$", name):
            continue
        topo = os.path.join(base, name, "topology")
        if not os.path.isdir(topo):
            continue  # offline CPU
        threads += 1
        pkg = rd.int(os.path.join(topo, "physical_package_id"))
        if pkg is not None:
            packages.add(pkg)
        sib_path = os.path.join(topo, "thread_siblings_list")
        if not os.path.exists(sib_path):
            sib_path = os.path.join(topo, "core_cpus_list")
        sib = rd.cpulist(sib_path, "%s thread_siblings_list" % name)
        if not sib:
            sib = name[3:]  # no sibling info: count the thread as its own core
        siblings.setdefault(sib, True)
    if threads:
        cpu["threads"] = threads
        cpu["sockets"] = len(packages) or None
        cores = sorted(siblings, key=lambda s: parse_cpulist(s)[0])
        cpu["cores"] = len(cores)
        cpu["core_cpus"] = cores
        if cpu["sockets"] and cpu["cores"] % cpu["sockets"] == 0:
            cpu["cores_per_socket"] = cpu["cores"] // cpu["sockets"]
        if threads % cpu["cores"] == 0:
            cpu["threads_per_core"] = threads // cpu["cores"]
    nbase = rd.path("/sys/devices/system/node")
    if os.path.isdir(nbase):
        nodes = []
        for name in sorted(rd.listdir(nbase), key=natural_key):
            m = re.match(r"^node(\d+)$", name)
            if not m:
                continue
            cpus = rd.cpulist(os.path.join(nbase, name, "cpulist"), "NUMA %s cpulist" % name)
            # '' = CPU-less node; None = unreadable or garbled (listed in errors)
            mem = None
            meminfo = rd.text(os.path.join(nbase, name, "meminfo"))
            mm = re.search(r"MemTotal:\s+(\d{1,18})\s*kB", meminfo or "")
            if mm:
                mem = int(mm.group(1)) // 1024
            nodes.append({"id": int(m.group(1)), "cpus": cpus, "memory_mb": mem})
        cpu["numa_nodes"] = nodes
    return cpu


# --------------------------------------------------------------------------------------------
# memory

def _gather_memory(root, want_memory, want_edac, run, dmidecode_path, errors):
    mem = {"total_mb": None, "ecc": "unknown" if want_memory else None, "edac": None}
    if want_memory:
        meminfo = read_text(under(root, "/proc/meminfo"), errors=errors, root=root)
        mm = re.search(r"^MemTotal:\s+([0-9]{1,18})\s*kB", meminfo or "", re.M)
        if mm:
            mem["total_mb"] = int(mm.group(1)) // 1024
        if dmidecode_path:
            res = run([dmidecode_path, "-t", "memory"])
            out = res[1]
            failed = command.failure(res, "dmidecode -t memory")
            if failed:
                errors.append(failed)
            else:
                try:
                    parsed = dmi_parser.parse_dmidecode(out)
                except ParseError as exc:
                    errors.append(str(exc))
                else:
                    mem["ecc"] = parsed["ecc"]
                    dimms = dmi_parser.installed_dimms(parsed)
                    mem["dimm_count"] = len(dimms)
                    mem["installed_mb"] = sum(d["size_mb"] for d in dimms) or None
                    mem["dimms"] = [dict((k, d.get(k)) for k in (
                        "locator", "size_mb", "type", "speed", "manufacturer", "part_number",
                        "total_width", "data_width", "ecc_width")) for d in dimms]
    if want_edac and read_edac_sysfs is not None:
        try:
            full = read_edac_sysfs(root)
        except Exception as exc:  # the EDAC reader promises not to raise; be safe anyway
            errors.append("EDAC sysfs: %s" % exc)
            full = None
        if full:
            mem["edac"] = dict((k, full.get(k)) for k in ("driver", "controllers", "corrected",
                                                          "uncorrected"))
    return mem


# --------------------------------------------------------------------------------------------
# gpus: the vendor seam (hw/gpu/) walks the PCI bus and asks each vendor's module; the names
# below stay importable from here

NVIDIA_VENDOR = gpu_seam.nvidia.VENDOR_ID
GPU_CLASSES = gpu_seam.nvidia.GPU_CLASSES
wants_nvlink_status = gpu_seam.nvidia.wants_nvlink_status


def pci_ids_names(root, device_ids, vendor=NVIDIA_VENDOR):
    """Names of ``device_ids`` from the node's pci.ids (see hw/gpu/pci.py)."""
    return gpu_pci.pci_ids_names(root, device_ids, vendor)


def _gather_gpus(rd, run, tools, errors):
    return gpu_seam.gather_gpus(rd, run, tools, errors)


# --------------------------------------------------------------------------------------------
# host

_DMI_PLACEHOLDERS = ("to be filled by o.e.m.", "default string", "system product name",
                     "not specified", "none", "")


def _dmi(root, name):
    v = _read(_p(root, "/sys/class/dmi/id/" + name))
    if v is None or v.strip().lower() in _DMI_PLACEHOLDERS:
        return None
    return v.strip()


# The ACPI tables a hypervisor writes name it where there is no DMI: Firecracker has no SMBIOS
# (systemd/systemd#40326) and writes OEM ID "FIRECK" in every table and "FIRECKVM" as the FADT's
# hypervisor vendor identity (firecracker-microvm/firecracker src/vmm/src/acpi/mod.rs at
# 09d1a715cfe6a0323d26104cfa02e75d994baf8d: OEM_ID, HYPERVISOR_VENDOR_ID).
_ACPI_OEM_VMS = {b"FIRECK": "firecracker"}
_FADT_HYPERVISOR_AT = 268       # FADT (ACPI 6.0+): 8-byte Hypervisor Vendor Identity


def _acpi_vm(root):
    """The VM named by the firmware's FADT (/sys/firmware/acpi/tables/FACP, root only), or None."""
    try:
        with open(_p(root, "/sys/firmware/acpi/tables/FACP"), "rb") as fh:
            head = fh.read(_FADT_HYPERVISOR_AT + 8)
    except (IOError, OSError):
        return None
    if head[:4] != b"FACP" or len(head) < 36:
        return None
    vm = _ACPI_OEM_VMS.get(head[10:16])
    if vm is None and head[_FADT_HYPERVISOR_AT:_FADT_HYPERVISOR_AT + 8] == b"FIRECKVM":
        vm = "firecracker"
    return vm


def _virtualization(root, cpuinfo):
    """systemd-detect-virt style answer from DMI, the firmware's ACPI tables, the cpuinfo
    hypervisor flag and container markers: none | kvm | qemu | vmware | microsoft | xen | oracle |
    amazon | google | firecracker | docker | podman | container-other | vm-other.

    A Firecracker microVM's root filesystem is often a Docker image with its /.dockerenv left in
    it, so that marker alone would call the VM ``docker``: the VM's own ACPI tables, which a
    container engine hides (Docker's default spec masks /sys/firmware: moby/moby oci/defaults.go at
    0a8650917ad0a9002ccb8e0a4724fe0dd7cdb8fc, MaskedPaths), come first."""
    vm = _acpi_vm(root)
    if vm:
        return vm
    container = container_marker(root)
    if container:
        return container
    dmi = " ".join(filter(None, [_dmi(root, "sys_vendor"), _dmi(root, "product_name"),
                                 _dmi(root, "bios_vendor"), _dmi(root, "board_vendor")])).lower()
    for needle, answer in (("kvm", "kvm"), ("qemu", "qemu"), ("vmware", "vmware"),
                           ("virtualbox", "oracle"), ("innotek", "oracle"), ("xen", "xen"),
                           ("amazon ec2", "amazon"), ("google compute", "google"),
                           ("microsoft corporation", "microsoft"), ("bochs", "bochs"),
                           ("parallels", "parallels")):
        if needle in dmi:
            if answer == "microsoft" and "virtual" not in dmi:
                continue
            return answer
    if os.path.isdir(_p(root, "/proc/xen")) and not cpuinfo.get("hypervisor"):
        caps = _read(_p(root, "/proc/xen/capabilities")) or ""
        if "control_d" not in caps:
            return "xen"
    if cpuinfo.get("hypervisor"):
        return "vm-other"
    return "none"


def _gather_host(root, cpuinfo):
    uptime = read_uptime(root)
    return {
        "hostname": _read(_p(root, "/proc/sys/kernel/hostname")),
        "kernel": _read(_p(root, "/proc/sys/kernel/osrelease")),
        "virtualization": _virtualization(root, cpuinfo),
        "product": _dmi(root, "product_name"),
        "manufacturer": _dmi(root, "sys_vendor"),
    }, uptime


# --------------------------------------------------------------------------------------------

def _tool(option, name, root, allowed):
    """option: None/'auto' -> find it when allowed; False/'never' -> None; a path -> the path
    (under root when root is not /); 'always' -> find it even when not allowed."""
    if option in (False, "never"):
        return None
    if option in (None, "auto", True):
        return find_tool(name, root) if allowed else None
    if option == "always":
        return find_tool(name, root) or name
    return option


def gather(root="/", run_command=None, subset=None, is_root=None, nvidia_smi="auto",
           dmidecode="auto", blkid="auto", command_failures=None, amd_smi="auto"):
    """Gather ``dlrack_hw`` (``source: gathered``) from ``root``.

    ``subset``: iterable of cpu, memory, gpus, disks, edac, host (default: all). Sections not
    gathered are None. ``run_command(argv) -> (rc, out, err)`` runs the few commands (default:
    subprocess). ``is_root`` defaults to ``os.geteuid() == 0``; dmidecode and blkid run only as
    root. ``nvidia_smi`` / ``dmidecode`` / ``blkid``: 'auto' (look in PATH / under root),
    'never' (or False), 'always', or an explicit path; ``amd_smi`` alike for amd-smi, and
    'never' also leaves out rocm-smi and hy-smi (hw/gpu/amd.py). ``command_failures``: a list that gets one
    sentence per command that broke its time or output limit (system/command.py's ``problem``).
    """
    root = root or "/"
    want = set(SUBSETS if subset is None else subset)
    unknown = want - set(SUBSETS) - set(["all"])
    if "all" in want:
        want = set(SUBSETS)
    base_run = run_command or default_run_command

    ran = {}   # a command run twice (nvidia-smi -q -x: the GPUs and their versions) runs once

    def run(argv):
        key = tuple(argv)
        if key in ran:
            return ran[key]
        res = ran[key] = base_run(argv)
        if command_failures is not None and (getattr(res, "timed_out", False) or getattr(res, "truncated", False)):
            command_failures.append(command.problem(res))
        return res
    if is_root is None:
        is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    errors = ["unknown gather_subset entry %r (known: %s)" % (u, ", ".join(SUBSETS))
              for u in sorted(unknown)]
    doc = {"schema": SCHEMA_VERSION, "source": "gathered", "cpu": None, "memory": None,
           "gpus": None, "disks": None}
    rd = _Reader(root, errors)

    def section(name, fn):
        try:
            return fn()
        except Exception as exc:  # a bug or a truly odd tree must not kill the whole gather
            errors.append("%s: unexpected %s: %s" % (name, type(exc).__name__, exc))
            return None

    cpuinfo = None
    if want & set(["cpu", "host"]):
        cpuinfo = section("/proc/cpuinfo", lambda: parse_cpuinfo(rd.text(rd.path("/proc/cpuinfo"))))
    cpuinfo = cpuinfo or parse_cpuinfo(None)
    for item in cpuinfo["garbled"]:
        errors.append("/proc/cpuinfo: %s is not a number; left null" % item)
    if "cpu" in want:
        doc["cpu"] = section("cpu", lambda: _gather_cpu(rd, cpuinfo))
    if "memory" in want or "edac" in want:
        dmi_path = _tool(dmidecode, "dmidecode", root, is_root) if "memory" in want else None
        doc["memory"] = section("memory", lambda: _gather_memory(
            root, "memory" in want, "edac" in want, run, dmi_path, errors))
    if "gpus" in want:
        tools = gpu_seam.find_tools({"nvidia": nvidia_smi, "amd": amd_smi},
                                    lambda option, name: _tool(option, name, root, True))
        doc["gpus"] = section("gpus", lambda: _gather_gpus(rd, run, tools, errors))
        # issue 32: the PCIe tree around the GPUs (hw/pcie_tree.py), one read-only sysfs pass
        doc["pcie"] = section("pcie", lambda: pcie_tree.read_sysfs(root, errors))
        # issue 32: RDMA ports (hw/fabric.py); their error counters are read again at the end
        ib_sampler = section("fabric", lambda: hw_fabric.Sampler(root, errors))
        # issue 32: PSUs (SMBIOS type 39, root only, no command) and the GPUs' power limits (hw/power.py)
        doc["power"] = section("power", lambda: hw_power.gather_power(
            run, tools.get(gpu_seam.nvidia.TOOLS[0]), errors, root, _listdir, lambda path: pcie_tree._read_bytes(path, 65536)))
        # issue 29: GPU fault events of this boot and the counters beside them (live node with GPUs only)
        if doc["gpus"] and root in ("/", ""):
            doc["gpu_faults"] = section("gpu_faults", lambda: gpu_faults_gather.gather_faults(
                root, run, tools.get(gpu_seam.nvidia.TOOLS[0]), errors, gpus=doc["gpus"]))
    if "disks" in want:
        blkid_path = _tool(blkid, "blkid", root, is_root)
        doc["disks"] = section("disks", lambda: blockdev.gather_disks(root, run, blkid_path, errors))
    if "host" in want:
        res = section("host", lambda: _gather_host(root, cpuinfo))
        if res:
            doc["host"], doc["uptime_s"] = res
        # the software and firmware stack (issue 33: hw/versions.py), read with the host
        ver_tools = gpu_seam.find_tools({"nvidia": nvidia_smi, "amd": amd_smi},
                                        lambda option, name: _tool(option, name, root, True))
        doc["versions"] = section("versions", lambda: hw_versions.gather_versions(
            rd, run, ver_tools, lambda name: find_tool(name, root), doc["gpus"], is_root, errors))
    if "gpus" in want and ib_sampler is not None:
        doc["fabric"] = section("fabric", ib_sampler.finish)
    doc["errors"] = _bounded(errors)
    return doc


MAX_ERRORS = 50


def _bounded(errors):
    """Each line once, in order, at most MAX_ERRORS of them (a tree unreadable as a whole
    would otherwise give one line per file)."""
    seen, out = set(), []
    for line in errors:
        if line not in seen:
            seen.add(line)
            out.append(line)
    if len(out) > MAX_ERRORS:
        out = out[:MAX_ERRORS] + ["... and %d more" % (len(out) - MAX_ERRORS)]
    return out
