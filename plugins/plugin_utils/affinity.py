# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU affinity planner: NUMA-local, disjoint, whole-core CPU sets for every GPU.

Pure Python; input is a ``dlrack_hw`` document (see docs/gpu_affinity.md and docs/dlrack_hw.md).

``plan_gpu_affinity_report(hw, ...)`` returns::

    {"schema": 1, "policy": ..., "options": {...},
     "gpus": [{index, uuid, pci_bus_id, numa_node, cpus, cores, mems, slurm_cores, fallback}],
     "reserved_cpus": "0,48", "warnings": [...]}

``plan_gpu_affinity(hw, ...)`` returns only the ``gpus`` list.

Guarantees (tests/unit/plugins/plugin_utils/test_affinity.py; option and input validation:
tests/unit/plugins/filter/test_gpu_affinity.py):

- a GPU gets CPUs of its own NUMA node; when the node is unknown (``numa_node`` -1 or null on a
  multi-node host) or has no CPUs (POWER9 GPU-memory nodes), it is placed on the node, among
  those its ``local_cpus`` touch (all nodes when those are missing or cover every CPU), with
  the most usable cores per GPU; ``fallback`` says which (``local_cpus``, ``socket`` when the
  local CPUs are exactly one socket, ``all``), ``warnings`` why;
- sets are disjoint between GPUs and hold whole physical cores (SMT siblings together);
- GPUs that share a pool get core counts that differ by at most one (contiguous blocks in
  CPU-id order, lower GPU index first);
- the lowest ``reserved_cores_per_socket`` cores of every socket are left to the OS (per NUMA
  node when socket membership is unknown);
- more GPUs than usable cores in a pool raises AffinityCapacityError naming pool and counts;
- same input, same output (no dict/set iteration order leaks into the result).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible.module_utils.parsing.convert_bool import BOOLEANS_FALSE, BOOLEANS_TRUE

from ansible_collections.dlrack.node.plugins.module_utils.hw import gpu as gpu_seam
from ansible_collections.dlrack.node.plugins.module_utils.hw.cpulist import (
    MAX_CPUS,
    CpuListError,
    format_cpulist,
    parse_cpulist,
)

POLICIES = ("numa_local", "socket")

SCHEMA = 1


class AffinityError(ValueError):
    """The dlrack_hw document or the options cannot be planned (message names the field)."""


class AffinityCapacityError(AffinityError):
    """More GPUs share a CPU pool than it has usable physical cores."""

    def __init__(self, pool, gpus, cores, reserved):
        self.pool = pool
        self.gpus = gpus
        self.cores = cores
        self.reserved = reserved
        AffinityError.__init__(
            self,
            "%s has %d usable physical core(s) (%d reserved for the OS) for %d GPU(s) %s: "
            "every GPU needs at least one core of its own; lower "
            "reserved_cores_per_socket, or move GPUs to other slots"
            % (pool, cores, reserved, len(gpus), ",".join(str(g) for g in gpus)))


MAX_CPU_ID = MAX_CPUS - 1   # cpulist's one bound (above any kernel's NR_CPUS)
_INTEGER = re.compile(r"^-?[0-9]{1,18}$")
_CPULIST_NUMBER = re.compile(r"[0-9]+")


def _shown(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _cpus(value, field):
    """A cpulist field, parsed; ids above MAX_CPU_ID refused (before expanding a range of them)."""
    if isinstance(value, str):
        big = [n for n in _CPULIST_NUMBER.findall(value) if len(n) > 5]
        if big:
            raise AffinityError("%s: cpu id %s is above %d, the most any kernel supports"
                                % (field, big[0][:20], MAX_CPU_ID))
    try:
        cpus = parse_cpulist(value)
    except CpuListError as exc:
        raise AffinityError("%s: %s" % (field, exc))
    if cpus and cpus[-1] > MAX_CPU_ID:
        raise AffinityError("%s: cpu id %d is above %d, the most any kernel supports"
                            % (field, cpus[-1], MAX_CPU_ID))
    return cpus


def _int_or_none(value, field):
    """An integer field of the document: int, integral float or ASCII digits; None/'' = unknown."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER.match(value.strip()):
        return int(value.strip())
    raise AffinityError("%s: expected an integer, got %s" % (field, _shown(value)))


def _list_or_empty(value, field):
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise AffinityError("%s: expected a list, got %s" % (field, type(value).__name__))
    return value


class Topology:
    """CPUs, physical cores, NUMA nodes and sockets of one host, from dlrack_hw.cpu."""

    def __init__(self, hw, socket_cpus=None):
        self.warnings = []
        cpu = (hw or {}).get("cpu") or {}
        if not isinstance(cpu, dict):
            raise AffinityError("cpu: expected a mapping")
        core_lists = _list_or_empty(cpu.get("core_cpus"), "cpu.core_cpus")
        self.nodes = self._read_nodes(cpu)   # node id -> sorted cpu ids (CPU-less nodes: [])
        if not self.nodes:
            # A declared host may give only counts: one node, CPUs 0..threads-1.
            self.nodes = {0: self._cpus_from_counts(cpu, core_lists)}
            self.warnings.append("cpu.numa_nodes absent: all CPUs treated as one NUMA node 0")
        self.node_of = dict((c, nid) for nid, cpus in self.nodes.items() for c in cpus)
        self.all_cpus = sorted(self.node_of)
        self.core_of, self.cores = self._read_cores(core_lists)
        self.node_cores = {}
        for key in sorted(self.cores):
            self.node_cores.setdefault(self.node_of[key], []).append(key)
        self.sockets = self._sockets(cpu, socket_cpus)

    @staticmethod
    def _read_nodes(cpu):
        nodes, seen = {}, {}
        for i, node in enumerate(_list_or_empty(cpu.get("numa_nodes"), "cpu.numa_nodes")):
            if not isinstance(node, dict) or node.get("id") is None:
                raise AffinityError("cpu.numa_nodes[%d]: expected {id, cpus}" % i)
            nid = _int_or_none(node.get("id"), "cpu.numa_nodes[%d].id" % i)
            if nid is None or nid < 0:
                raise AffinityError("cpu.numa_nodes[%d].id: expected a node id >= 0, got %r"
                                    % (i, node.get("id")))
            if nid in nodes:
                raise AffinityError("cpu.numa_nodes[%d].id: node %d listed twice" % (i, nid))
            nodes[nid] = _cpus(node.get("cpus"), "cpu.numa_nodes[%d].cpus" % i)
        for nid in sorted(nodes):
            for c in nodes[nid]:
                if c in seen:
                    raise AffinityError("cpu.numa_nodes: cpu %d is in node %d and node %d"
                                        % (c, seen[c], nid))
                seen[c] = nid
        if nodes and not seen:
            raise AffinityError("cpu.numa_nodes: no node lists any CPU (every cpus is empty); "
                                "give each node's cpulist, e.g. cpus: '0-15'")
        return nodes

    @staticmethod
    def _cpus_from_counts(cpu, core_lists):
        if core_lists:
            allc = sorted(set(c for i, cl in enumerate(core_lists)
                              for c in _cpus(cl, "cpu.core_cpus[%d]" % i)))
            if not allc:
                raise AffinityError("cpu.core_cpus lists no CPU and cpu.numa_nodes is absent: "
                                    "declare the host's CPUs")
            return allc
        threads = _int_or_none(cpu.get("threads"), "cpu.threads")
        if threads is None:
            raise AffinityError("cpu.numa_nodes (or cpu.threads) is needed to plan "
                                "GPU affinity: declare the host's CPUs")
        if not 1 <= threads <= MAX_CPU_ID + 1:
            raise AffinityError("cpu.threads: expected 1 to %d, got %d" % (MAX_CPU_ID + 1, threads))
        return list(range(threads))

    def _read_cores(self, core_lists):
        """Physical cores: {cpu: core key}, {core key: sibling tuple}; key = lowest CPU id."""
        core_of, cores = {}, {}
        for i, cl in enumerate(core_lists):
            sib = tuple(c for c in _cpus(cl, "cpu.core_cpus[%d]" % i) if c in self.node_of)
            if not sib:
                continue
            if len(set(self.node_of[c] for c in sib)) != 1:
                raise AffinityError("cpu.core_cpus[%d]: siblings %s span NUMA nodes" % (i, cl))
            for c in sib:
                if c in core_of and core_of[c] != sib[0]:
                    raise AffinityError("cpu.core_cpus[%d]: cpu %d is in two cores" % (i, c))
                core_of[c] = sib[0]
            cores[sib[0]] = sib
        missing = [c for c in self.all_cpus if c not in core_of]
        if missing and core_lists:
            self.warnings.append("cpu.core_cpus does not list CPUs %s: each treated as "
                                 "its own core" % format_cpulist(missing))
        elif missing:
            self.warnings.append("cpu.core_cpus absent (declared host?): SMT siblings "
                                 "unknown, each CPU treated as its own physical core")
        for c in missing:
            core_of[c] = c
            cores[c] = (c,)
        return core_of, cores

    def _sockets(self, cpu, socket_cpus):
        """List of sorted core-key lists, one per socket, or None when membership is unknown."""
        explicit = _list_or_empty(socket_cpus if socket_cpus is not None else cpu.get("socket_cpus"),
                                  "socket_cpus")
        if explicit:
            groups = [set(_cpus(s, "socket_cpus[%d]" % i)) for i, s in enumerate(explicit)]
            out = []
            for g in groups:
                out.append(sorted(k for k in self.cores if k in g))
            return out
        n_sockets = _int_or_none(cpu.get("sockets"), "cpu.sockets")
        if n_sockets is not None and n_sockets < 1:
            raise AffinityError("cpu.sockets: expected a count >= 1, got %d" % n_sockets)
        cpu_nodes = [n for n in sorted(self.nodes) if self.node_cores.get(n)]
        if n_sockets is not None and n_sockets <= 1:
            return [sorted(self.cores)]
        if n_sockets is None:
            if len(cpu_nodes) == 1:
                return [sorted(self.cores)]
            self.warnings.append("cpu.sockets unknown: reserved cores are taken per NUMA node "
                                 "and there is no socket fallback")
            return None
        if len(cpu_nodes) == n_sockets:
            return [list(self.node_cores[n]) for n in cpu_nodes]
        if len(cpu_nodes) % n_sockets == 0:
            per = len(cpu_nodes) // n_sockets
            self.warnings.append(
                "socket membership inferred: %d NUMA nodes with CPUs on %d sockets, taken as "
                "%d consecutive nodes per socket (give cpu.socket_cpus to state it)"
                % (len(cpu_nodes), n_sockets, per))
            return [sorted(k for n in cpu_nodes[i * per:(i + 1) * per] for k in self.node_cores[n])
                    for i in range(n_sockets)]
        self.warnings.append("%d NUMA nodes with CPUs do not divide into %d sockets: reserved "
                             "cores are taken per NUMA node and there is no socket fallback"
                             % (len(cpu_nodes), n_sockets))
        return None

    def cpus_of(self, core_keys, include_smt=True):
        out = []
        for k in core_keys:
            out.extend(self.cores[k] if include_smt else self.cores[k][:1])
        return sorted(out)

    def slurm_core_index(self):
        """Map core key -> Slurm abstract core index.

        Slurm numbers cores "logically": core 0 is the first core of the first socket, core 1
        the second core of the first socket, ..., the same as hwloc's ``Core L#`` (gres.conf(5),
        https://slurm.schedmd.com/gres.conf.html, note under Cores). hwloc orders siblings by
        their cpuset, so within a socket cores go by their lowest CPU id. Order: (socket, lowest
        CPU id); without socket membership, sockets are assumed to be taken in CPU-id order,
        which is the same ordering when sockets are not interleaved.
        """
        if self.sockets:
            order = [k for s in sorted(self.sockets, key=lambda s: s[0] if s else -1)
                     for k in s]
            placed = set(order)
            order += sorted(k for k in self.cores if k not in placed)
        else:
            order = sorted(self.cores)
        return dict((k, i) for i, k in enumerate(order))


def bool_option(name, value):
    """A real boolean, or what Ansible's boolean() takes: "false", "no", "off", "0", 0, ..."""
    if isinstance(value, bool):
        return value
    key = value.strip().lower() if isinstance(value, str) else value
    if isinstance(key, (str, int, float)):
        if key in BOOLEANS_TRUE:
            return True
        if key in BOOLEANS_FALSE:
            return False
    raise AffinityError("option %s: expected true or false, got %s (%s)"
                        % (name, _shown(value), type(value).__name__))


def _count_option(name, value, meaning):
    """A whole number >= 0: int, integral float, or a string of ASCII digits (-e key=2)."""
    count = value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        count = int(value)
    elif isinstance(value, str) and _INTEGER.match(value.strip()):
        count = int(value.strip())
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_CPU_ID:
        raise AffinityError("option %s: expected a whole number from 0 to %d (%s), got %s (%s)"
                            % (name, MAX_CPU_ID, meaning, _shown(value), type(value).__name__))
    return count


def validate_options(reserved_cores_per_socket, include_smt, policy, max_cores_per_gpu):
    """The planner's options, normalised; AffinityError naming the option and what it takes."""
    if not isinstance(policy, str) or policy not in POLICIES:
        raise AffinityError("option policy: %r is not one of %s" % (policy, ", ".join(POLICIES)))
    return {
        "reserved_cores_per_socket": _count_option(
            "reserved_cores_per_socket", reserved_cores_per_socket,
            "physical cores per socket left to the OS"),
        "include_smt": bool_option("include_smt", include_smt),
        "policy": policy,
        "max_cores_per_gpu": _count_option(
            "max_cores_per_gpu", max_cores_per_gpu, "physical cores per GPU at most, 0 = no limit"),
    }


def _gpu_entries(hw):
    """[(index, position, gpu dict)] in index order; indexes unique."""
    gpus_in = _list_or_empty(hw.get("gpus"), "gpus")
    gpus = []
    for i, g in enumerate(gpus_in):
        if not isinstance(g, dict):
            raise AffinityError("gpus[%d]: expected a mapping" % i)
        idx = _int_or_none(g.get("index"), "gpus[%d].index" % i)
        gpus.append((idx if idx is not None else i, i, g))
    gpus.sort(key=lambda t: t[0])          # stable: equal indexes keep their order
    for (a, dummy, dummy2), (b, i, dummy3) in zip(gpus, gpus[1:]):
        if a == b:
            raise AffinityError("gpus[%d].index: GPU index %d is not unique" % (i, b))
    return gpus


def _reserved_cores(topo, per_socket):
    """The lowest ``per_socket`` cores (by lowest CPU id) of each socket, or of each node."""
    groups = topo.sockets if topo.sockets is not None else [
        topo.node_cores[n] for n in sorted(topo.node_cores)]
    reserved = set()
    for g in groups:
        reserved.update(sorted(g)[:per_socket])
    return reserved


def _units(topo, policy, warnings):
    """What GPUs share: [label, sorted core keys] per NUMA node, or per socket under policy
    "socket". Units are disjoint, so every GPU's set is too."""
    if policy == "socket" and topo.sockets is not None:
        return [["socket %d" % s_i, sorted(s)] for s_i, s in enumerate(topo.sockets) if s]
    if policy == "socket":
        warnings.append("policy socket but socket membership unknown: splitting NUMA "
                        "nodes instead")
    return [["NUMA node %d" % n, list(topo.node_cores[n])] for n in sorted(topo.node_cores)]


def _fallback(topo, local, node):
    """Candidate cores of a GPU without a usable node: (keys, label, fallback, why)."""
    n_nodes = len(topo.node_cores)
    if node is not None and node >= 0:
        why = ("numa_node %d has no CPUs" % node if node in topo.nodes
               else "numa_node %d is not in cpu.numa_nodes" % node)
    else:
        why = "numa_node is %s on a host with %d NUMA nodes" % (
            "null" if node is None else node, n_nodes)
    if local and len(local) < len(topo.all_cpus):
        keys = set(topo.core_of[c] for c in local)
        label, fallback = "local_cpus %s" % format_cpulist(local), "local_cpus"
        for s_i, s in enumerate(topo.sockets or []):
            if keys == set(s):
                label, fallback = "socket %d" % s_i, "socket"
        return keys, label, fallback, why
    why += " and local_cpus %s" % ("cover every CPU" if local else "are unknown")
    return set(topo.cores), "all CPUs", "all", why


def _place(topo, units, gpus, reserved, warnings):
    """{unit index: [(index, position, gpu, numa_node, fallback)]}.

    A GPU goes to the unit of its NUMA node; on a one-node host an unknown node is that node.
    A GPU without a usable node joins, within its candidate CPUs, the unit with the most usable
    cores per GPU (ties: lowest CPU id), after the node-local GPUs are placed.
    """
    unit_of_core = dict((k, u_i) for u_i, (dummy, keys) in enumerate(units) for k in keys)
    members = dict((u_i, []) for u_i in range(len(units)))
    usable = dict((u_i, len([k for k in keys if k not in reserved]))
                  for u_i, (dummy, keys) in enumerate(units))
    deferred = []
    for idx, i, g in gpus:
        node = _int_or_none(g.get("numa_node"), "gpus[%d].numa_node" % i)
        local = [c for c in _cpus(g.get("local_cpus"), "gpus[%d].local_cpus" % i) if c in topo.node_of]
        home = node if node is not None and node >= 0 else None
        if home is None and len(topo.node_cores) == 1:
            home = next(iter(topo.node_cores))
        if home is not None and topo.node_cores.get(home):
            members[unit_of_core[topo.node_cores[home][0]]].append((idx, i, g, node, None))
        else:
            deferred.append((idx, i, g, node) + _fallback(topo, local, node))
    for idx, i, g, node, keys, label, fallback, why in deferred:
        cands = sorted(set(unit_of_core[k] for k in keys))
        best = max(cands, key=lambda u: (usable[u] / (len(members[u]) + 1.0), -units[u][1][0]))
        members[best].append((idx, i, g, node, fallback))
        warnings.append("GPU %d (%s): %s; using its %s: placed on %s" % (
            idx, g.get("pci_bus_id"), why, label, units[best][0]))
    return members


def _split(topo, units, members, reserved, include_smt, max_cores_per_gpu):
    """{GPU index: plan entry}: each unit split among its GPUs in contiguous blocks of whole
    cores in CPU-id order, lower GPU index first, sizes differing by at most one."""
    result = {}
    slurm_index = topo.slurm_core_index()
    for u_i, (label, keys) in enumerate(units):
        mem = sorted(members[u_i], key=lambda t: (t[0], t[1]))
        if not mem:
            continue
        avail = [k for k in keys if k not in reserved]
        if len(avail) < len(mem):
            raise AffinityCapacityError(label, [t[0] for t in mem], len(avail),
                                        len(keys) - len(avail))
        base, extra = divmod(len(avail), len(mem))
        if max_cores_per_gpu and base >= max_cores_per_gpu:
            base, extra = max_cores_per_gpu, 0
        pos = 0
        for j, (idx, i, g, node, fallback) in enumerate(mem):
            take = base + (1 if j < extra else 0)
            mine = avail[pos:pos + take]
            pos += take
            cpus = topo.cpus_of(mine, include_smt)
            result[idx] = {
                "index": idx,
                "uuid": g.get("uuid"),
                "pci_bus_id": g.get("pci_bus_id"),
                "numa_node": node if node is not None else -1,
                "cpus": format_cpulist(cpus),
                "cores": len(mine),
                "mems": format_cpulist(set(topo.node_of[c] for c in cpus)),
                "slurm_cores": format_cpulist(slurm_index[k] for k in mine),
                "fallback": fallback,
            }
            _amd_entry(result[idx], g)
    return result


def _amd_entry(entry, gpu):
    """Plan entries of other vendors than NVIDIA also say their vendor and device files (AMD/Hygon:
    the render node and /dev/kfd; Ascend: /dev/davinciN and the driver's shared files, which a job's
    cgroup must allow); NVIDIA entries keep their schema-1 keys."""
    vendor = gpu_seam.vendor_name(gpu)
    mod = gpu_seam.BY_NAME.get(vendor)
    if mod is None or mod is gpu_seam.nvidia:
        return
    entry["vendor"] = vendor
    if mod is gpu_seam.amd:
        entry["render_node"] = mod.render_node(gpu)
    if "phy_id" in gpu:
        entry["phy_id"] = gpu.get("phy_id")
    entry["device_files"] = mod.device_files(gpu)


def _partition_warnings(gpus):
    """An MI300-class package in a compute partition mode shows as several logical devices
    (hw/gpu/amd.py). Where their number is known the plan has one entry and CPU set per logical
    device (``_split_partitions``); where it is not, the plan keeps one CPU set per package and ROCm's
    device indexes (ROCR_VISIBLE_DEVICES) no longer name plan entries: said here."""
    out = []
    for t in gpus:
        g = t[2] if isinstance(t, tuple) else t
        mode = str(g.get("compute_partition") or "spx").lower() if isinstance(g, dict) else "spx"
        if mode != "spx" and _partition_count(g) is None:
            out.append("GPU %s is in compute partition mode %s (%s logical devices): the plan has one CPU set per "
                       "package and ROCm numbers the logical devices, so dlrack-gpu-bind's device indexes do not "
                       "match the plan; use SPX for pinned jobs"
                       % (g.get("index"), mode.upper(), g.get("partitions") or "several"))
    return out


def _partition_count(gpu):
    """Logical devices of a partitioned package (>1), or None (unpartitioned, or how many unknown)."""
    if str(gpu.get("compute_partition") or "spx").lower() == "spx":
        return None
    mod = gpu_seam.BY_NAME.get(gpu_seam.vendor_name(gpu) or "")
    count = mod.logical_devices(gpu) if mod is gpu_seam.amd else None
    return count if count and count > 1 else None


def _split_partitions(topo, gpus, entries, include_smt, warnings):
    """The plan entries with each partitioned package (CPX, DPX, ...) split into its logical devices,
    in ROCm's order (packages in bus-id order, their partitions in order), renumbered: each partition
    gets a contiguous block of the package's whole cores (sizes differing by at most one), its
    package's memory nodes and, where gathered, the memory of one partition (``memory_mb``). Plans
    without partitioned packages come back unchanged."""
    if not any(_partition_count(t[2]) for t in gpus):
        return entries
    slurm_index = topo.slurm_core_index()
    out = []
    for t, entry in zip(gpus, entries):
        g, n = t[2], _partition_count(t[2])
        cores = []
        for c in (parse_cpulist(entry["cpus"]) if n else []):
            k = topo.core_of.get(c)
            if k is not None and k not in cores:
                cores.append(k)
        if not n or len(cores) < n:
            if n:
                warnings.append("GPU %s (%s, %d logical devices) has %d cores: planned as one package"
                                % (entry["index"], str(g["compute_partition"]).upper(), n, len(cores)))
            out.append(dict(entry, index=len(out)))
            continue
        base, extra = divmod(len(cores), n)
        pos = 0
        for k in range(n):
            take = base + (1 if k < extra else 0)
            mine = cores[pos:pos + take]
            pos += take
            part = dict(entry, index=len(out), package_index=entry["index"], partition=k, cores=len(mine),
                        cpus=format_cpulist(topo.cpus_of(mine, include_smt)),
                        slurm_cores=format_cpulist(slurm_index[c] for c in mine))
            if g.get("partition_memory_mb"):
                part["memory_mb"] = g["partition_memory_mb"]
            if k and "render_node" in part:
                part["render_node"] = None        # a partition's own render node is not gathered
                part["device_files"] = ["/dev/kfd"]
            out.append(part)
    return out


def plan_gpu_affinity_report(hw, reserved_cores_per_socket=1, include_smt=True,
                             policy="numa_local", max_cores_per_gpu=0, socket_cpus=None):
    """Plan per-GPU CPU sets; return the full report (see module docstring)."""
    opts = validate_options(reserved_cores_per_socket, include_smt, policy, max_cores_per_gpu)
    if not isinstance(hw, dict):
        raise AffinityError("dlrack_hw: expected a mapping, got %s" % type(hw).__name__)
    gpus = _gpu_entries(hw)
    report = {
        "schema": SCHEMA,
        "policy": opts["policy"],
        "options": dict((k, opts[k]) for k in
                        ("reserved_cores_per_socket", "include_smt", "max_cores_per_gpu")),
        "gpus": [],
        "reserved_cpus": "",
        "warnings": [],
    }
    if not gpus:
        return report
    topo = Topology(hw, socket_cpus=socket_cpus)
    warnings = report["warnings"]
    warnings.extend(topo.warnings)
    warnings.extend(_partition_warnings(gpus))
    reserved = _reserved_cores(topo, opts["reserved_cores_per_socket"])
    report["reserved_cpus"] = format_cpulist(topo.cpus_of(sorted(reserved)))
    units = _units(topo, opts["policy"], warnings)
    members = _place(topo, units, gpus, reserved, warnings)
    result = _split(topo, units, members, reserved, opts["include_smt"], opts["max_cores_per_gpu"])
    report["gpus"] = _split_partitions(topo, gpus, [result[t[0]] for t in gpus], opts["include_smt"], warnings)
    return report


def plan_gpu_affinity(hw, **options):
    """The plan only: one entry per GPU in index order (see plan_gpu_affinity_report)."""
    return plan_gpu_affinity_report(hw, **options)["gpus"]


def slurm_cores(hw, cpus, socket_cpus=None):
    """Convert OS CPU ids (cpulist) to Slurm abstract core indices (cpulist) for gres.conf.

    A core is counted when any of its CPUs is in ``cpus``.
    """
    topo = Topology(hw, socket_cpus=socket_cpus)
    index = topo.slurm_core_index()
    keys = set(topo.core_of[c] for c in _cpus(cpus, "cpus") if c in topo.core_of)
    return format_cpulist(index[k] for k in keys)


def _plan_gpus(report, what):
    """The plan entries of a report (or of a bare plan list), checked to be mappings."""
    gpus = report.get("gpus") if isinstance(report, dict) else report
    if not isinstance(gpus, list) or not all(isinstance(g, dict) for g in gpus):
        raise AffinityError("%s: expected the gpu_affinity_plan report or its list of GPUs, got %s"
                            % (what, type(report).__name__))
    return gpus


DEFAULT_GRES_FILE = "/dev/nvidia{index}"
AMD_GRES_FILE = "/dev/dri/{render_node}"


AMD_AUTODETECT = "AutoDetect=rsmi"


def _amd_autodetect(gpus, file_template):
    """True for a plan of AMD GPUs none of which has a known render node (a declared host: the
    renderD numbers are the kernel's, known only once the node runs), with the default template.
    Slurm's gres.conf(5) then fills File, Cores and Links itself: ``AutoDetect=rsmi``
    "Automatically detect AMD GPUs. Requires the ROCm System Management Interface (ROCm SMI)
    Library"; given values would only be checked against the detected ones, and a mismatch
    drains the node (doc/man/man5/gres.conf.5, SchedMD/slurm @284c3b95)."""
    return (file_template == DEFAULT_GRES_FILE and bool(gpus)
            and all(g.get("vendor") == "amd" and not g.get("render_node") for g in gpus))


def _why_not_autodetect(gpus):
    if any(g.get("render_node") for g in gpus):
        return "other GPUs of the node have one (a description that mixes gathered and declared GPUs)"
    if any(g.get("vendor") == "hygon" for g in gpus):
        return "Slurm's AutoDetect=rsmi is documented for AMD GPUs, not Hygon DCUs"
    return "the node also has GPUs of another vendor (AutoDetect=rsmi would cover the AMD GPUs only)"


def gres_conf_lines(report, name="gpu", file_template=DEFAULT_GRES_FILE, gpu_type=None):
    """gres.conf lines, one per GPU: ``Name=gpu [Type=..] File=/dev/nvidiaN Cores=<slurm>``.
    An AMD plan entry with the default template gets its render node (``File=/dev/dri/renderD128``,
    as Slurm's gres.conf names AMD GPUs). A plan of AMD GPUs none of which has a known render node
    (a declared host) is the one line ``AutoDetect=rsmi``: slurmd reads the devices, their cores
    and links from ROCm SMI. Some GPUs with and some without a render node, or a Hygon GPU without
    one, is an error naming the GPU and the fix, never a guessed device."""
    gpus = _plan_gpus(report, "gres.conf")
    if _amd_autodetect(gpus, file_template):
        return [AMD_AUTODETECT]
    lines = []
    for gpu in gpus:
        parts = ["Name=%s" % name]
        if gpu_type:
            parts.append("Type=%s" % gpu_type)
        template = file_template
        vendor_mod = gpu_seam.BY_NAME.get(gpu.get("vendor"))
        if vendor_mod not in (None, gpu_seam.nvidia, gpu_seam.amd) and file_template == DEFAULT_GRES_FILE:
            device = gpu_seam.gres_file(gpu, file_template)
            if not device:
                raise AffinityError("gres.conf: %s %s has no known device file (gather the host, or set "
                                    "gpu_affinity_slurm_gres_file_template)" % (vendor_mod.LABEL, gpu.get("index")))
            template = device.replace("{", "{{").replace("}", "}}")
        elif gpu.get("vendor") in ("amd", "hygon") and file_template == DEFAULT_GRES_FILE:
            if not gpu.get("render_node"):
                raise AffinityError(
                    "gres.conf: %s GPU %s has no known render node (dlrack_hw.gpus[].render_node, e.g. renderD128, "
                    "is gathered by hw_facts) while %s: gather the host (dlrack_hw_gathered), or set "
                    "gpu_affinity_slurm_gres_file_template" % (
                        "Hygon" if gpu.get("vendor") == "hygon" else "AMD", gpu.get("index"),
                        _why_not_autodetect(gpus)))
            template = AMD_GRES_FILE
        try:
            parts.append("File=%s" % str(template).format(**gpu))
        except (KeyError, IndexError, ValueError, AttributeError) as exc:
            raise AffinityError("file_template %r: %s: %s (use {index} for the GPU index)"
                                % (file_template, type(exc).__name__, exc))
        if gpu.get("slurm_cores") is None:
            raise AffinityError("gres.conf: plan entry %s has no slurm_cores" % gpu.get("index"))
        parts.append("Cores=%s" % gpu["slurm_cores"])
        lines.append(" ".join(parts))
    return lines


def service_pins(report, services):
    """systemd pins: one {name, gpus, cpus, mems, policy} per service from the plan report.

    ``services``: [{name, gpus: [plan index, ...], numa_policy: bind|preferred|none}];
    cpus/mems are the union over the listed GPUs (CPUAffinity= / NUMAMask= values).
    """
    by_index = dict((g.get("index"), g) for g in _plan_gpus(report, "service pins"))
    out = []
    for i, svc in enumerate(_list_or_empty(services, "gpu_affinity_systemd_services")):
        if not isinstance(svc, dict) or not svc.get("name") or not isinstance(svc["name"], str):
            raise AffinityError("gpu_affinity_systemd_services[%d]: needs a name" % i)
        gpus = svc.get("gpus")
        if not isinstance(gpus, list) or not gpus:
            raise AffinityError("gpu_affinity_systemd_services[%d] (%s): gpus must be a "
                                "non-empty list of GPU indices" % (i, svc["name"]))
        policy = svc.get("numa_policy", "preferred")
        if policy not in ("bind", "preferred", "none"):
            raise AffinityError("gpu_affinity_systemd_services[%d] (%s): numa_policy must be "
                                "bind, preferred or none" % (i, svc["name"]))
        cpus, mems, indexes = set(), set(), []
        for g in gpus:
            idx = _int_or_none(g, "gpu_affinity_systemd_services[%d].gpus" % i)
            if idx not in by_index:
                raise AffinityError("gpu_affinity_systemd_services[%d] (%s): GPU %s is not in "
                                    "the plan (GPUs %s)" % (i, svc["name"], g, ",".join(
                                        str(k) for k in sorted(by_index, key=str)) or "none"))
            indexes.append(idx)
            cpus.update(_cpus(by_index[idx].get("cpus"), "plan GPU %d cpus" % idx))
            mems.update(_cpus(by_index[idx].get("mems") or "", "plan GPU %d mems" % idx))
        if policy == "preferred" and len(mems) > 1:
            policy = "bind"  # systemd's preferred takes one node; several: bind to them
        name = svc["name"] if "." in svc["name"] else svc["name"] + ".service"
        out.append({"name": name, "gpus": indexes, "cpus": format_cpulist(cpus),
                    "mems": format_cpulist(mems), "policy": policy})
    return out
