# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Memory copy bandwidth per NUMA node, with the C library's memmove through ctypes (stdlib only).

Method (bounded, no compiler, no tool to install): for each NUMA node with CPUs, one thread per
physical core of the node (one hardware thread per core, at most ``max_threads``), each pinned to
its core, allocates two anonymous buffers of ``bytes / (2 * threads)`` and touches them (first-touch
places them on the node), then all threads copy src -> dst ``iterations`` times between two
barriers. ctypes releases the GIL during memmove, so the copies run in parallel. Bandwidth counts
bytes read plus bytes written (STREAM's "Copy" convention), in decimal GB/s.

What it is and is not: glibc's memmove for large buffers uses non-temporal stores, so the figure is
close to STREAM Copy on the same node; it is a local-node figure (threads and memory on the same
node), not a remote-node or all-socket figure. It is not a substitute for STREAM in a tender; it
finds a node with a missing DIMM or a channel down, which shows as one node well below the others.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import mmap
import os
import re
import threading
import time

from ansible_collections.dlrack.node.plugins.module_utils.hw.cpulist import CpuListError, parse_cpulist

NODE_DIR = "sys/devices/system/node"


def _read(path):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except (IOError, OSError):
        return None


def node_cores(root="/"):
    """{node id: [one CPU per physical core]} for the NUMA nodes that have CPUs (cpulist order)."""
    base = os.path.join(root, NODE_DIR)
    try:
        names = os.listdir(base)
    except OSError:
        return {}
    out = {}
    for name in names:
        m = re.match(r"^node(\d+)$", name)
        if not m:
            continue
        try:
            cpus = parse_cpulist(_read(os.path.join(base, name, "cpulist")) or "")
        except CpuListError:
            continue
        seen, firsts = set(), []
        for cpu in cpus:
            if cpu in seen:
                continue
            sib = _read(os.path.join(root, "sys/devices/system/cpu/cpu%d/topology/thread_siblings_list" % cpu))
            try:
                siblings = set(parse_cpulist(sib)) if sib else {cpu}
            except CpuListError:
                siblings = {cpu}
            seen.update(siblings | {cpu})
            firsts.append(cpu)
        out[int(m.group(1))] = firsts
    return out


def copy_bandwidth(cpus, nbytes, iterations, clock=time.perf_counter):
    """Parallel memmove over ``cpus`` (one thread each); {gbps, threads, bytes_per_thread, seconds}."""
    threads = len(cpus)
    per = max(1 << 20, (nbytes // (2 * threads)) // 4096 * 4096)
    start, done = threading.Barrier(threads + 1), threading.Barrier(threads + 1)
    errors = []

    def worker(cpu):
        maps, views = [], []
        try:
            try:
                os.sched_setaffinity(0, {cpu})
            except (OSError, AttributeError) as exc:
                errors.append("cannot pin to CPU %d: %s" % (cpu, exc))
            for dummy in range(2):
                maps.append(mmap.mmap(-1, per))
                views.append((ctypes.c_char * per).from_buffer(maps[-1]))
                ctypes.memset(ctypes.addressof(views[-1]), 1, per)
            src, dst = ctypes.addressof(views[0]), ctypes.addressof(views[1])
            start.wait()
            for dummy in range(iterations):
                ctypes.memmove(dst, src, per)
            done.wait()
        except (threading.BrokenBarrierError, OSError, ValueError, MemoryError) as exc:
            errors.append("CPU %d: %s" % (cpu, exc))
            start.abort()
            done.abort()
        finally:
            del views[:]  # the ctypes views pin the mappings; drop them before closing
            for mm in maps:
                mm.close()

    pool = [threading.Thread(target=worker, args=(c,)) for c in cpus]
    for t in pool:
        t.start()
    try:
        start.wait()
        t0 = clock()
        done.wait()
        seconds = clock() - t0
    except threading.BrokenBarrierError:
        seconds = None
    for t in pool:
        t.join()
    hard = [e for e in errors if not e.startswith("cannot pin")]
    if hard or not seconds:
        raise RuntimeError("; ".join(hard or errors) or "no timing")
    moved = 2 * per * iterations * threads
    return {"gbps": round(moved / seconds / 1e9, 2), "threads": threads, "bytes_per_thread": per,
            "iterations": iterations, "seconds": round(seconds, 4), "pin_errors": errors or None}


def measure(nbytes=2 << 30, iterations=10, max_threads=128, root="/"):
    """{status, reason, nodes: [{node, cpus, gbps...} or {node, status: skip, reason}]}."""
    nodes = node_cores(root)
    if not nodes:
        return {"status": "skip", "reason": "no NUMA node information in /sys/devices/system/node", "nodes": []}
    try:
        allowed = os.sched_getaffinity(0)
    except (OSError, AttributeError):
        allowed = None
    out = []
    for node in sorted(nodes):
        entry = {"node": node}
        cpus = [c for c in nodes[node] if allowed is None or c in allowed][:max_threads]
        if not nodes[node]:
            entry.update(status="skip", reason="node %d has no CPUs (memory-only node)" % node)
        elif not cpus:
            entry.update(status="skip", reason="no CPU of node %d is available to this process (cpuset)" % node)
        else:
            try:
                entry.update(copy_bandwidth(cpus, nbytes, iterations), status="ok", cores=len(nodes[node]))
            except (RuntimeError, OSError, MemoryError) as exc:
                entry.update(status="error", reason="memory copy on node %d failed: %s" % (node, exc))
        out.append(entry)
    return {"status": "ok", "reason": None, "nodes": out, "bytes": nbytes}
