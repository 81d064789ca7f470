# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One acceptance pass on a node: GPU health and link capability (nvidia-smi), GPU copy bandwidth
(libcuda), storage tier throughput (fio), memory bandwidth per NUMA node, DCGM diagnostics.

Returns raw figures only; the verdicts are made on the controller (plugin_utils/acceptance.py)
against the thresholds of each host. ``plan()`` is the check-mode answer: what would be measured
and what would be skipped (and why), found without measuring or writing anything.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes.util
import os
import shutil

from ansible_collections.dlrack.node.plugins.module_utils.acceptance import fio as acceptance_fio
from ansible_collections.dlrack.node.plugins.module_utils.acceptance import gpu as acceptance_gpu
from ansible_collections.dlrack.node.plugins.module_utils.acceptance import health as acceptance_health
from ansible_collections.dlrack.node.plugins.module_utils.acceptance import memory as acceptance_memory
from ansible_collections.dlrack.node.plugins.module_utils.acceptance import smallfiles as acceptance_smallfiles
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers.sysfs_pci import read_link
from ansible_collections.dlrack.node.plugins.module_utils.system import command

TOOL_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
TIERS = ("hot", "cold")


def find_tool(name):
    path = os.environ.get("PATH", "") + os.pathsep + os.pathsep.join(TOOL_DIRS)
    return shutil.which(name, path=path)


def run_command(argv, timeout, output_limit=command.DEFAULT_OUTPUT_LIMIT):
    """(rc, stdout, stderr) as text with LC_ALL=C through the bounded runner (system/command.py):
    killed with its process group after ``timeout`` s (rc 124), stopped past ``output_limit`` bytes
    per stream (rc 125); then stderr is the runner's sentence naming the command and the limit. A
    missing program is rc 127."""
    res = command.run(argv, timeout=timeout, output_limit=output_limit)
    why = res.problem
    if why:
        return command.Result(res.rc, res.stdout if not res.truncated else "", why, argv=res.argv,
                              timed_out=res.timed_out, truncated=res.truncated, timeout=res.timeout,
                              output_limit=res.output_limit, duration_s=res.duration_s,
                              stream=res.stream, error=res.error)
    return res


def _libcuda_present():
    if ctypes.util.find_library("cuda"):
        return True
    return any(os.path.exists(os.path.join(d, "libcuda.so.1"))
               for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu", "/usr/lib"))


def sysfs_link(bus, sysfs="/sys"):
    """The GPU's link from sysfs, its maximum generation capped by the upstream port's maximum."""
    devdir = os.path.join(sysfs, "bus", "pci", "devices", bus)
    link = dict(read_link(devdir), source="sysfs")
    up = read_link(os.path.dirname(os.path.realpath(devdir)))
    if up.get("gen_max") and link.get("gen_max"):
        link["gen_device_max"] = link["gen_max"]
        link["gen_max"] = min(link["gen_max"], up["gen_max"])
    return link


def plan(opts):
    """Check mode: the same document shape as measure(), every part a skip saying what would happen."""
    would = "check mode: would measure"
    doc = {"check_mode": True, "gpu": None, "health": None, "dcgm": None, "storage": {}, "memory": None}
    if not opts["gpu"]:
        doc["gpu"] = {"status": "skip", "reason": "disabled (acceptance_gpu: false)", "devices": [], "opted_out": True}
    elif _libcuda_present():
        doc["gpu"] = {"status": "skip", "reason": "%s copy bandwidth with %d MiB x %d copies per direction"
                      % (would, opts["gpu_bytes"] >> 20, opts["gpu_iterations"]), "devices": []}
    else:
        doc["gpu"] = {"status": "skip", "reason": "libcuda.so.1 not found: no NVIDIA driver on this node", "devices": []}
    smi = find_tool("nvidia-smi") if opts["health"] else None
    amd = acceptance_health.amd_gpu_health() if opts["health"] and not smi else None
    doc["health"] = {"status": "skip", "gpus": [],
                     "reason": ("disabled (acceptance_gpu_health: false)" if not opts["health"] else
                                "%s GPU health with nvidia-smi -q -x" % would if smi else
                                "%s AMD GPU health from amdgpu sysfs (RAS counters, bad pages)" % would if amd else
                                "nvidia-smi is not installed (no NVIDIA driver on this node)")}
    dcgmi = find_tool("dcgmi") if opts["dcgm"] else None
    doc["dcgm"] = {"status": "skip", "tests": [],
                   "reason": ("disabled (acceptance_dcgm: false)" if not opts["dcgm"] else
                              "check mode: would run dcgmi diag -r %d" % opts["dcgm_level"] if dcgmi else
                              "dcgmi is not installed (DCGM diagnostics not run)")}
    fio = find_tool("fio")
    for tier in TIERS:
        path = opts["%s_path" % tier]
        why = acceptance_fio.check_target(path, opts["fio_size_mb"], opts["require_mount"])
        if not why and not fio:
            why = "fio is not installed on this node (install the fio package to measure storage)"
        doc["storage"][tier] = {"path": path, "status": "skip", "reason": why or (
            "%s %s with fio (%d MiB scratch file, %d s per sequential phase, %d s of 4 KiB random reads, removed afterwards)"
            % (would, path, opts["fio_size_mb"], opts["fio_runtime_s"], opts.get("fio_rand_runtime_s", 0)))}
    doc["smallfiles"] = {}
    for tier in TIERS:
        path = opts["%s_path" % tier]
        count = opts.get("smallfile_count", 0)
        why = acceptance_fio.check_target(path, 0, opts["require_mount"]) if count else "disabled (acceptance_smallfile_count: 0)"
        doc["smallfiles"][tier] = {"path": path, "status": "skip", "opted_out": not count or None, "reason": why or (
            "%s %s: %d files of %d KiB written, read cold by %d reader(s) per GPU (or NUMA node), then removed"
            % (would, path, count, opts.get("smallfile_kb", 64), opts.get("smallfile_workers", 4)))}
    if not opts["memory"]:
        doc["memory"] = {"status": "skip", "reason": "disabled (acceptance_memory: false)", "nodes": []}
    else:
        doc["memory"] = {"status": "skip", "nodes": [],
                         "reason": "%s copy bandwidth on NUMA nodes %s" % (would, sorted(acceptance_memory.node_cores()) or "-")}
    return doc


def mem_total_bytes(meminfo="/proc/meminfo"):
    try:
        with open(meminfo) as fh:
            for line in fh.read(65536).splitlines():
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (IOError, OSError, ValueError, IndexError):
        pass
    return None


def measure_smallfiles(opts, tier, fio_doc, groups):
    """The small-file read figures of one tier, after its fio phases (a tier fio could not measure
    is not measurable here either: the same reason)."""
    path = opts["%s_path" % tier]
    count = opts.get("smallfile_count", 0)
    base = {"path": path, "status": "skip", "files": count, "file_kb": opts.get("smallfile_kb", 64)}
    if not count:
        return dict(base, reason="disabled (acceptance_smallfile_count: 0)", opted_out=True)
    why = acceptance_fio.check_target(path, 0, opts["require_mount"])
    if why:
        return dict(base, reason=why)
    res = acceptance_smallfiles.measure(path, groups, count, opts.get("smallfile_kb", 64),
                                        opts.get("smallfile_workers", 4), opts.get("smallfile_phase_s", 20),
                                        opts.get("smallfile_drop_caches", False))
    res.update(path=path, group_kind=groups[0]["kind"] if groups else None)
    return res


def measure(opts, run=run_command):
    """The acceptance pass (see the module documentation for ``opts``)."""
    doc = {"check_mode": False}
    if opts["health"]:
        doc["health"] = acceptance_health.node_gpu_health(find_tool("nvidia-smi"), run)
    else:
        doc["health"] = {"status": "skip", "reason": "disabled (acceptance_gpu_health: false)", "gpus": []}
    if opts["gpu"]:
        doc["gpu"] = acceptance_gpu.measure(opts["gpu_bytes"], opts["gpu_iterations"], True, opts["p2p"],
                                            opts["p2p_bytes"], opts["p2p_iterations"])
    else:
        doc["gpu"] = {"status": "skip", "reason": "disabled (acceptance_gpu: false)", "devices": [], "opted_out": True}
    # PCIe capability per GPU: nvidia-smi's max_link_gen is the lower of the GPU's and the slot's
    # maximum; sysfs (device max only) where nvidia-smi is absent.
    links = {g["pci_bus_id"]: g["pcie"] for g in doc["health"].get("gpus") or [] if not g.get("vendor")}
    for dev in doc["gpu"].get("devices") or []:
        bus = dev.get("pci_bus_id")
        if bus in links:
            dev["link"] = dict(links[bus], source="nvidia-smi")
        elif bus:
            dev["link"] = sysfs_link(bus)
    if opts["dcgm"]:
        doc["dcgm"] = acceptance_health.dcgm_diag(find_tool("dcgmi"), run, opts["dcgm_level"])
    else:
        doc["dcgm"] = {"status": "skip", "reason": "disabled (acceptance_dcgm: false)", "tests": []}
    fio = find_tool("fio")
    doc["storage"] = {}
    for tier in TIERS:
        doc["storage"][tier] = acceptance_fio.measure_path(
            opts["%s_path" % tier], fio, run, opts["fio_size_mb"], opts["fio_runtime_s"], opts["fio_block_kb"],
            opts["fio_iodepth"], opts["fio_jobs"], opts["require_mount"],
            rand_runtime_s=opts.get("fio_rand_runtime_s", 0), rand_iodepth=opts.get("fio_rand_iodepth", 32),
            rand_jobs=opts.get("fio_rand_jobs", 0))
    doc["smallfiles"] = {}
    count = opts.get("smallfile_count", 0)
    groups = acceptance_smallfiles.reader_groups(doc["gpu"], doc["health"], count=opts.get("smallfile_groups", 0)) if count else []
    for tier in TIERS:
        doc["smallfiles"][tier] = measure_smallfiles(opts, tier, doc["storage"][tier], groups)
    doc["mem_total_bytes"] = mem_total_bytes()
    if opts["memory"]:
        doc["memory"] = acceptance_memory.measure(opts["memory_bytes"], opts["memory_iterations"])
    else:
        doc["memory"] = {"status": "skip", "reason": "disabled (acceptance_memory: false)", "nodes": []}
    gpus = len(doc["gpu"].get("devices") or []) or len(doc["health"].get("gpus") or [])
    doc["gpu_count"] = gpus
    return doc
