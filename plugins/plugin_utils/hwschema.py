# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validation and normalisation of a ``dlrack_hw`` document (docs/dlrack_hw.md, the one contract).

``check_hw(doc)`` never raises on bad input: it returns a cleaned copy in which every field that
failed validation is ``None`` (unknown), plus a list of problems, each naming the field path,
what was found and what was expected. The rule engine turns the problems into findings of the
rule ``inventory.schema``, so one malformed host never stops the validation of a fleet.

Whatever the input, the cleaned copy holds plain, bounded data: integers within the sane range
of their field (``LIMITS``), finite numbers, strings without unresolved Jinja, and no more GPUs,
disks, NUMA nodes or CPU ids than a real machine has; so no per-host cost grows with a declared
number. Every key that ``hw_facts`` emits is valid in a declaration as well.

Declared documents may use two shorthands that are expanded here (and only here):
``count: N`` on a GPU or disk entry (N identical entries), and ``gpus: {model: X, count: N}``.
``gpus: null`` (or no ``gpus`` key) means "unknown", ``gpus: []`` means "no GPU"; disks alike.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.dlrack.node.plugins.module_utils.hw.cpulist import MAX_CPUS, CpuListError, parse_cpulist

SCHEMA_VERSION = 1

# Sane upper bounds of declared counts and sizes: beyond them a value is a typo, not a machine.
MAX_GPUS = 128          # GPUs under one OS instance (HGX: 8; the largest PCIe chassis: ~20)
MAX_DISKS = 1024        # block devices (4 x 102-bay JBODs)
MAX_NUMA = 1024         # Linux MAX_NUMNODES (NODES_SHIFT 10)
MAX_MEM_MB = 1 << 28    # 256 TiB of RAM (the largest single-image servers hold 48 TB)
MAX_STR = 1024          # characters in a model name, serial, path...
MAX_ITEMS = 4096        # entries of a free-form list or mapping (flags, mounts, errors)
MAX_DEPTH = 8           # nesting of free-form data
LIMITS = {
    "sockets": (1, 64), "cores": (1, MAX_CPUS), "threads": (1, MAX_CPUS),
    "cores_per_socket": (1, MAX_CPUS), "threads_per_core": (1, 16), "pcie_lanes": (0, 4096),
    "numa_id": (0, MAX_NUMA - 1), "node_memory_mb": (0, MAX_MEM_MB), "total_mb": (1, MAX_MEM_MB),
    "dimm_count": (0, 4096), "mc_count": (0, 65536), "err_count": (0, (1 << 63) - 1),
    "gpu_index": (0, 4095), "gpu_memory_mb": (1, 1 << 20), "gpu_numa_node": (-1, MAX_NUMA - 1),
    "nvlink": (0, 64), "width": (1, 32), "gen": (1, 16), "gpu_count": (1, MAX_GPUS),
    "size_bytes": (1, 1 << 60), "disk_count": (1, MAX_DISKS), "schema": (1, 1 << 31),
    "family": (0, 1 << 16), "model_id": (0, 1 << 16), "stepping": (0, 1 << 16),
}
NUM_LIMITS = {"model_params_b": (0, 1e6), "dataset_gb": (0, 1e9), "uptime_s": (0, 1e11),
              "samples_per_s_per_gpu": (0, 1e8), "sample_kb": (0, 1e8),
              "rate_gbps": (0, 1e5), "watts": (0, 1e6)}


def _int(name):
    return ("int",) + LIMITS[name]


def _num(name):
    return ("num",) + NUM_LIMITS[name]


_NUMA_FIELDS = {"id": _int("numa_id"), "cpus": "cpulist", "memory_mb": _int("node_memory_mb")}
_CPU_FIELDS = {
    "model": "str",
    "vendor": ("enum", ("amd", "intel", "arm", "other")),
    "vendor_id": "str",
    "sockets": _int("sockets"),
    "cores": _int("cores"),
    "threads": _int("threads"),
    "pcie_lanes": _int("pcie_lanes"),
    "numa_nodes": ("list", _NUMA_FIELDS, MAX_NUMA),
    "core_cpus": "core_cpus",
    "cores_per_socket": _int("cores_per_socket"),
    "threads_per_core": _int("threads_per_core"),
    "flags": "data",
    "family": _int("family"),
    "model_id": _int("model_id"),
    "stepping": _int("stepping"),
}
_EDAC_FIELDS = {
    "driver": "str",
    "controllers": _int("mc_count"),
    "corrected": _int("err_count"),
    "uncorrected": _int("err_count"),
    "mcs": "data",
}
_MEMORY_FIELDS = {
    "total_mb": _int("total_mb"),
    "ecc": ("enum", ("multi-bit", "single-bit", "none", "unknown")),
    "edac": ("dict", _EDAC_FIELDS),
    "dimms": "data",
    "dimm_count": _int("dimm_count"),
    "installed_mb": _int("total_mb"),
}
_PCIE_FIELDS = {"width": _int("width"), "width_max": _int("width"), "gen": _int("gen"), "gen_max": _int("gen"),
                "gen_host_max": _int("gen"), "speed": "data", "speed_max": "data"}
GPU_VENDORS = ("nvidia", "amd", "hygon", "ascend")
_INTERCONNECT_FIELDS = {"kind": ("enum", ("nvlink", "xgmi", "hccs")), "links_active": _int("nvlink"), "hive_id": "data"}
_GPU_FIELDS = {
    "index": _int("gpu_index"),
    "smi_index": _int("gpu_index"),
    "uuid": "str",
    "model": "str",
    "memory_mb": _int("gpu_memory_mb"),
    "pci_bus_id": "str",
    "numa_node": _int("gpu_numa_node"),
    "local_cpus": "cpulist",
    "pcie": ("dict", _PCIE_FIELDS),
    "ecc_enabled": "bool",
    "nvlink_active": _int("nvlink"),
    # issue 21: the vendor (absent = NVIDIA, schema 1) and the vendor-neutral interconnect;
    # schema-1 documents with nvlink_active alone stay valid
    "vendor": ("enum", GPU_VENDORS),
    "interconnect": ("dict", _INTERCONNECT_FIELDS),
    "count": _int("gpu_count"),
    # issue 21: the packages the entries of a multi-GCD model are (MI250X: count 8, packages 4);
    # checked against the catalogue's gcds_per_package by plugin_utils/gpu_packages.py
    "packages": _int("gpu_count"),
    # issue 21: an MI300-class package's compute partition mode and the logical devices it shows as
    "compute_partition": ("enum", ("spx", "dpx", "tpx", "qpx", "cpx")),
    "partitions": _int("gpu_count"),
    "driver": "data",
    "vendor_id": "data",
    "device_id": "data",
    "mig_mode": "data",
    "virtualization_mode": "data",
    "serial": "data",
    "pci_name": "data",
    "ecc_errors": "data",
    "retired_pages": "data",
    "remapped_rows": "data",
    "ras": "data",
    "render_node": "data",
    "kfd_node": "data",
    "package": "data",
    # issue 31: the board's FRU name (the model comes from the PCI device id), GCDs per package
    # (MI250X: 2), an MI300 package's KFD partitions, the memory of one, its memory partition mode
    "board": "data",
    "gcds_per_package": "data",
    "kfd_partitions": "data",
    "partition_memory_mb": _int("gpu_memory_mb"),
    "memory_partition": "data",
    # issue 31: Huawei Ascend NPUs (hw/gpu/ascend.py): npu-smi's NPU id, chip id and physical
    # (logical device) id, the chips one NPU card carries, npu-smi's health word
    "npu_id": "data",
    "chip_id": "data",
    "phy_id": "data",
    "chips_per_npu": "data",
    "health": "data",
}
_IN_USE_FIELDS = {"mounted": "strlist", "holders": "strlist", "partitions": "strlist", "signatures": "strlist",
                  "system": "bool"}
_DISK_FIELDS = {
    "name": "str",
    "by_id": "str",
    "kind": ("enum", ("nvme", "ssd", "hdd")),
    "transport": ("enum", ("nvme", "sata", "sas", "usb", "virtio", "scsi", "unknown")),
    "size_bytes": _int("size_bytes"),
    "model": "str",
    "serial": "str",
    "wwid": "str",
    "wwn": "str",
    "rotational": "bool",
    "read_only": "bool",
    "role": ("enum", ("system", "read_only", "small", "removable", "data")),
    "in_use": ("dict", _IN_USE_FIELDS),
    "count": _int("disk_count"),
    "removable": "data",
    "path": "data",
    "by_id_all": "data",
    "probe": "data",
}
# issue 33: the node's software and firmware stack (module_utils/hw/versions.py); a declaration may
# carry it too (what the rack is to run), and dlrack_versions pins it (plugin_utils/versions.py)
VERSION_KEYS = ("kernel", "gpu_driver", "cuda_driver", "cuda_runtime", "rocm", "nccl", "rccl", "fabric_manager",
                "dcgm", "ofed", "bmc")
_VERSIONS_FIELDS = dict((k, "str") for k in VERSION_KEYS)
_VERSIONS_FIELDS.update({"bios": ("dict", {"vendor": "str", "version": "str", "date": "str"}),
                         "gpus": "data", "nics": "data"})
_WORKLOAD_FIELDS = {
    "kind": ("enum", ("full_finetune", "lora", "inference", "pretrain")),
    "model_params_b": _num("model_params_b"),
    "dataset_gb": _num("dataset_gb"),
    "samples_per_s_per_gpu": _num("samples_per_s_per_gpu"),   # acceptance: files/s the data loader must feed
    "sample_kb": _num("sample_kb"),                           # acceptance: size of one sample file
}
WORKLOAD_SPEC = ("dict", _WORKLOAD_FIELDS)
# issue 32: the platform around the GPUs (module_utils/hw/pcie_tree.py, fabric.py, power.py)
_LINK_FIELDS = {"width": _int("width"), "width_max": _int("width"), "gen": _int("gen"), "gen_max": _int("gen")}
_BAR_SIZE = ("int", 1, 1 << 84)      # a Resizable BAR encodes up to 2^83 bytes (PCIe 5.0 base spec 7.8.6)
_BAR_FIELDS = {"index": ("int", 0, 15), "size": _BAR_SIZE}
_PCIE_DEVICE_FIELDS = {
    "bdf": "str", "parent": "str", "host_bridge": "str",
    "kind": ("enum", ("gpu", "nic", "nvme", "storage", "bridge")),
    "port": ("enum", ("root", "upstream", "downstream", "endpoint", "pci_bridge")),
    "class": "str", "vendor": "str", "device": "str", "name": "str", "numa_node": _int("gpu_numa_node"),
    "link": ("dict", _LINK_FIELDS), "acs": ("dict", {"cap": "strlist", "ctl": "strlist"}), "acs_readable": "bool",
    # the checks compute with these (platform.py): a shape they cannot use is a schema problem of the host, not a traceback
    "bars": ("list", _BAR_FIELDS, 16), "rebar": ("list", dict(_BAR_FIELDS, max=_BAR_SIZE), 16),
    "iommu_group": "str", "driver": "str", "rdma": "strlist", "config_bytes": ("int", 0, 4096), "port_inferred": "bool",
    "link_gbs": ("num", 0, 1e6),
}
_IOMMU_FIELDS = {"mode": ("enum", ("off", "passthrough", "translated", "unknown")), "groups": ("int", 0, 1 << 31),
                 "units": "strlist", "cmdline": "strlist", "group_types": "strlist"}
_PCIE_TREE_FIELDS = {"source": ("enum", ("sysfs", "lspci", "declared")),
                     "devices": ("list", _PCIE_DEVICE_FIELDS, 1024), "iommu": ("dict", _IOMMU_FIELDS),
                     "truncated": "bool"}
# module_utils/hw/fabric.py COUNTERS (the IBA PortCounters a port reports)
_IB_COUNTERS = ("symbol_error", "link_downed", "excessive_buffer_overrun_errors", "port_rcv_errors", "link_error_recovery")
_IB_PORT_FIELDS = {"device": "str", "port": _int("nvlink"), "state": "str", "phys_state": "str", "speed": "str",
                   "rate_gbps": _num("rate_gbps"), "width": "str", "link_layer": "str", "fw": "str", "pkeys": "strlist",
                   "pci_bus_id": "str", "counters": ("dict", dict((c, _int("err_count")) for c in _IB_COUNTERS)),
                   "counter_rates": ("dict", dict((c, ("dict", {"delta": _int("err_count"), "per_s": ("num", 0, 1e30)}))
                                                  for c in _IB_COUNTERS)),
                   "interval_s": ("num", 0, 1e6)}
_FABRIC_FIELDS = {"rail_optimized": "bool", "ports": ("list", _IB_PORT_FIELDS, 256)}
_PSU_FIELDS = {"name": "str", "location": "str", "capacity_w": _num("watts"), "capacity_text": "str", "status": "str",
               "present": "bool"}
_POWER_GPU_FIELDS = {"pci_bus_id": "str", "limit_w": _num("watts"), "default_w": _num("watts"), "max_w": _num("watts")}
_POWER_FIELDS = {"psus": ("list", _PSU_FIELDS, 64), "redundant": "bool", "source": "str",
                 "gpus": ("list", _POWER_GPU_FIELDS, MAX_GPUS), "cpu_tdp_w": _num("watts")}
TOP_FIELDS = {
    "schema": _int("schema"),
    "source": ("enum", ("gathered", "declared")),
    "cpu": ("dict", _CPU_FIELDS),
    "memory": ("dict", _MEMORY_FIELDS),
    "gpus": ("list", _GPU_FIELDS, MAX_GPUS),
    "disks": ("list", _DISK_FIELDS, MAX_DISKS),
    "workload": WORKLOAD_SPEC,
    "pcie": ("dict", _PCIE_TREE_FIELDS),
    "fabric": ("dict", _FABRIC_FIELDS),
    "power": ("dict", _POWER_FIELDS),
    "host": "data",
    "uptime_s": _num("uptime_s"),
    "errors": "data",
    "notes": "data",
    "versions": ("dict", _VERSIONS_FIELDS),
    # issue 29: GPU fault events and counters judged on the node (module_utils/gpu_faults/gather.py)
    "gpu_faults": ("dict", {"catalog_version": "str", "source": "str", "rules": "data", "gpus": "data", "workload": "data",
                            "events": "data", "events_total": "data", "notes": "data", "counters": "data"}),
}


class Problem(object):
    """One validation problem: where, what was found, what was expected."""

    __slots__ = ("path", "found", "expected", "unknown_key")

    def __init__(self, path, found, expected, unknown_key=False):
        self.path = path
        self.found = found
        self.expected = expected
        self.unknown_key = unknown_key

    def message(self):
        where = self.path if self.path.startswith("dlrack_") else "dlrack_hw." + self.path
        where = "dlrack_hw" if self.path == "(document)" else where
        if self.unknown_key:
            return "%s: unknown key; expected one of %s" % (where, self.expected)
        return "%s: expected %s, got %s" % (where, self.expected, describe(self.found))

    def observed(self):
        """``found`` as a report can hold it: small plain scalars as they are, the rest described."""
        return plain_scalar(self.found)

    def __repr__(self):
        return "Problem(%s)" % self.message()


class Unresolved(object):
    """Stands for an inventory variable that Ansible could not template (an undefined variable in it):
    the controller reads it as this marker instead of failing the whole run."""

    __slots__ = ("error",)

    def __init__(self, error):
        self.error = str(error).strip().splitlines()[0][:200] if str(error).strip() else "undefined"

    def __repr__(self):
        return "Unresolved(%r)" % self.error


def is_undefined(value):
    """An Unresolved marker or a Jinja2/Ansible undefined value (whose comparisons and truth test raise)."""
    return isinstance(value, Unresolved) or any(
        c.__name__.endswith("Undefined") or c.__name__ == "Marker" for c in type(value).__mro__)


def describe(value):
    """Short, safe text for any value, naming the usual causes of bad inventory values."""
    if isinstance(value, Unresolved):
        return "a value Ansible could not template (%s)" % value.error
    if is_undefined(value):
        return "an undefined variable (%s)" % str(getattr(value, "_undefined_name", None) or "?")[:60]
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "%r (a non-finite number)" % value
    if isinstance(value, int) and abs(value) >= 1 << 64:
        return "an integer of about %d digits" % int(value.bit_length() * 0.30103 + 1)
    text = _safe_repr(value)
    if isinstance(value, str) and ("{{" in value or "{%" in value):
        text += " (an unresolved Jinja expression: is the variable it uses defined?)"
    return text


def _safe_repr(value):
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001  (a hostile object's __repr__; describe it by type)
        text = "<%s>" % type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def plain_scalar(value):
    """``value`` if it is a small finite JSON scalar, else its description (never NaN, never a container)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) < 1 << 53:
        return int(value)
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, str) and len(value) <= 60:
        return str(value)
    if isinstance(value, (dict, list, tuple)):
        return type(value).__name__
    return describe(value)


_INT_RE = re.compile(r"\A\s*[+-]?[0-9]{1,24}\s*\Z")
_NUM_RE = re.compile(r"\A\s*[+-]?([0-9]{1,24}(\.[0-9]{0,24})?|\.[0-9]{1,24})([eE][+-]?[0-9]{1,3})?\s*\Z")


def to_int(value):
    """An int from an int, an integral finite float or a string of ASCII digits; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str) and _INT_RE.match(value):
        return int(value)
    return None


def to_number(value):
    """A finite int/float from a number or a decimal string of ASCII characters; else None
    (NaN, Infinity and "1e999" are not numbers here)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str) and _NUM_RE.match(value):
        num = float(value)
        return num if math.isfinite(num) else None
    return None


def _range_text(kind, lo, hi):
    what = "an integer" if kind == "int" else "a number"
    return "%s from %s to %s" % (what, _g(lo), _g(hi))


def _g(num):
    return "%d" % num if float(num).is_integer() and abs(num) < 1e16 else "%g" % num


def _check_number(spec, value, path, problems):
    kind, lo, hi = spec
    num = to_int(value) if kind == "int" else to_number(value)
    if num is None or num < lo or num > hi:
        problems.append(Problem(path, value, _range_text(kind, lo, hi)))
        return None
    return num


def _check_str(spec, value, path, problems):
    if isinstance(value, str) and value.strip() and len(value) <= MAX_STR and "{{" not in value \
            and "{%" not in value:
        return str(value.strip())
    problems.append(Problem(path, value, "a non-empty string of at most %d characters" % MAX_STR))
    return None


def _check_bool(spec, value, path, problems):
    if isinstance(value, bool):
        return value
    problems.append(Problem(path, value, "true or false"))
    return None


def _check_enum(spec, value, path, problems):
    if isinstance(value, str) and value.strip().lower() in spec[1]:
        return value.strip().lower()
    problems.append(Problem(path, value, "one of %s" % ", ".join(spec[1])))
    return None


def _check_cpulist(spec, value, path, problems):
    cpus = None
    if not isinstance(value, str) or len(value) <= 16 * MAX_CPUS:
        try:
            cpus = parse_cpulist(value)
        except CpuListError:
            pass
    if cpus is None:
        problems.append(Problem(path, value, "a kernel cpulist such as '0-31,64-95' with CPU ids below %d"
                                % MAX_CPUS))
        return None
    return value.strip() if isinstance(value, str) else ",".join(str(c) for c in cpus)


def _check_core_cpus(spec, value, path, problems):
    if not isinstance(value, list) or len(value) > MAX_CPUS:
        problems.append(Problem(path, value, "a list of at most %d cpulists, one per physical core" % MAX_CPUS))
        return None
    out = []
    for i, item in enumerate(value):
        clean = _check_cpulist(spec, item, "%s[%d]" % (path, i), problems)
        if clean is None:
            return None
        out.append(clean)
    return out


def _check_strlist(spec, value, path, problems):
    if isinstance(value, list) and len(value) <= MAX_ITEMS and all(
            isinstance(v, str) and len(v) <= MAX_STR for v in value):
        return [str(v) for v in value]
    problems.append(Problem(path, value, "a list of strings"))
    return None


def _check_data(spec, value, path, problems):
    budget = [MAX_ITEMS]
    clean = _plain_data(value, 0, budget)
    if clean is _BAD:
        problems.append(Problem(path, value, "plain data (strings, finite numbers, lists, mappings; "
                                             "at most %d items)" % MAX_ITEMS))
        return None
    return clean


_BAD = object()


def _plain_data(value, depth, budget):
    """A copy of free-form data as plain JSON types, or _BAD (non-finite, undefined, too big, too deep)."""
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        return _BAD
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value) if abs(value) < 1 << 63 else _BAD
    if isinstance(value, float):
        return value if math.isfinite(value) else _BAD
    if isinstance(value, str):
        return str(value) if len(value) <= 16 * MAX_STR else _BAD
    if isinstance(value, (list, tuple)):
        out = [_plain_data(v, depth + 1, budget) for v in value[:MAX_ITEMS + 1]]
        return _BAD if any(v is _BAD for v in out) else out
    if isinstance(value, dict):
        out = {}
        for key, item in list(value.items())[:MAX_ITEMS + 1]:
            clean = _plain_data(item, depth + 1, budget)
            if clean is _BAD or not isinstance(key, (str, int)) or isinstance(key, bool):
                return _BAD
            out[str(key)] = clean
        return out
    return _BAD


_SCALAR_CHECKS = {
    "str": _check_str, "bool": _check_bool, "cpulist": _check_cpulist, "core_cpus": _check_core_cpus,
    "strlist": _check_strlist, "data": _check_data, "int": _check_number, "num": _check_number,
    "enum": _check_enum,
}


def _check_dict(fields, value, path, problems, strict):
    if not isinstance(value, dict):
        problems.append(Problem(path or "(document)", value,
                                "a mapping with keys %s" % ", ".join(sorted(fields))))
        return None
    out = dict.fromkeys(fields)
    for key, val in value.items():
        sub = "%s.%s" % (path, key) if path else str(key)
        spec = fields.get(key) if isinstance(key, str) else None
        if spec is None:
            if strict:
                problems.append(Problem(sub, val, ", ".join(sorted(fields)), unknown_key=True))
            else:
                out[str(key)] = _check_data("data", val, sub, problems)
            continue
        if val is None:
            continue
        out[key] = _check_field(spec, val, sub, problems, strict)
    return out


def _check_field(spec, value, path, problems, strict):
    if spec.__class__ is str:
        return _SCALAR_CHECKS[spec](spec, value, path, problems)
    if spec[0] == "dict":
        return _check_dict(spec[1], value, path, problems, strict)
    if spec[0] == "list":
        return _check_list(spec, value, path, problems, strict)
    return _SCALAR_CHECKS[spec[0]](spec, value, path, problems)


def _check_list(spec, value, path, problems, strict):
    dummy, fields, limit = spec
    if isinstance(value, dict) and path == "gpus":
        value = [value]          # shorthand gpus: {model: X, count: N}
    if not isinstance(value, list) or len(value) > limit:
        problems.append(Problem(path, value, "a list of at most %d mappings" % limit))
        return None
    out = []
    total = 0
    for i, item in enumerate(value):
        item_clean = _check_dict(fields, item, "%s[%d]" % (path, i), problems, strict)
        if item_clean is None:
            continue
        # Only entries whose schema has a count (GPUs, disks) repeat; elsewhere an unknown
        # "count" key is plain data, kept as it was.
        count = (item_clean.pop("count", None) or 1) if "count" in fields else 1
        total += count
        if total > limit:
            problems.append(Problem("%s[%d].count" % (path, i), count, "at most %d entries in %s in all" % (limit, path)))
            return None
        out.append(item_clean)
        if path == "disks":
            # Identical disks may share one (read-only) entry; GPUs get their own copies
            # because the engine numbers them and fills in catalogue figures.
            if item_clean.get("in_use") is None:
                item_clean["in_use"] = dict.fromkeys(_IN_USE_FIELDS)
            out.extend([item_clean] * (count - 1))
        else:
            for dummy in range(count - 1):
                out.append(_clone(item_clean))
                out[-1]["index"] = None     # numbered in order below
    return out


def _clone(entry):
    """Copy of a cleaned GPU/disk entry, two levels deep (entry and its pcie/in_use mappings),
    which is all the engine ever writes to; much cheaper than copy.deepcopy for big fleets."""
    out = dict(entry)
    for key in ("pcie", "in_use"):
        if isinstance(out.get(key), dict):
            out[key] = dict(out[key])
    return out


def check_workload(value, path="workload"):
    """Validate a workload mapping on its own (``dlrack_workload``); returns ``(clean, problems)``."""
    problems = []
    clean = _check_field(WORKLOAD_SPEC, value, path, problems, True)
    return clean, problems


def check_hw(doc, strict=None):
    """Validate ``doc``; return ``(clean, problems)``.

    ``clean`` has every known key (missing ones ``None``), shorthands expanded, GPU indices
    filled in order. ``strict`` (default: true for declared documents) reports unknown keys.
    """
    problems = []
    if not isinstance(doc, dict):
        problems.append(Problem("(document)", doc, "a mapping (dlrack_hw: {schema: 1, source: declared, cpu: ...})"))
        return None, problems
    if strict is None:
        strict = doc.get("source") != "gathered"
    clean = _check_dict(TOP_FIELDS, doc, "", problems, strict)
    if clean.get("schema") not in (None, SCHEMA_VERSION):
        problems.append(Problem("schema", clean.get("schema"), "schema %d" % SCHEMA_VERSION))
    if clean.get("source") is None:
        clean["source"] = "declared"
    for section in ("cpu", "memory"):
        if clean.get(section) is None:
            clean[section] = dict.fromkeys(TOP_FIELDS[section][1])
    _fill_defaults(clean)
    _check_consistency(clean, problems)
    return clean, problems


def _fill_defaults(clean):
    for node in clean["cpu"].get("numa_nodes") or []:
        if node.get("cpus") is None:
            node["cpus"] = ""
    for i, gpu in enumerate(clean.get("gpus") or []):
        if gpu.get("index") is None:
            gpu["index"] = i
        if gpu.get("pcie") is None:
            gpu["pcie"] = dict.fromkeys(_PCIE_FIELDS)
    for disk in clean.get("disks") or []:
        if disk.get("in_use") is None:
            disk["in_use"] = dict.fromkeys(_IN_USE_FIELDS)


def _check_consistency(clean, problems):
    """Cross-field checks: a field that contradicts another becomes unknown."""
    cpu = clean["cpu"]
    if cpu.get("cores") and cpu.get("threads") and cpu["threads"] < cpu["cores"]:
        problems.append(Problem("cpu.threads", cpu["threads"], "threads >= cores (%d)" % cpu["cores"]))
        cpu["threads"] = None
    if cpu.get("sockets") and cpu.get("cores") and cpu["cores"] < cpu["sockets"]:
        problems.append(Problem("cpu.cores", cpu["cores"], "cores >= sockets (%d)" % cpu["sockets"]))
        cpu["cores"] = None
    if cpu.get("numa_nodes"):
        _check_numa_nodes(cpu, problems)
    gpus = clean.get("gpus") or []
    if gpus:
        _check_gpu_ids(gpus, cpu.get("numa_nodes"), problems)


def _check_numa_nodes(cpu, problems):
    """NUMA node ids unique, each CPU in one node at most (bounded: stops at the first repeat)."""
    ids, owner = {}, {}
    for i, node in enumerate(cpu["numa_nodes"]):
        path = "cpu.numa_nodes[%d]" % i
        if node.get("id") is None:
            problems.append(Problem(path + ".id", None, "the NUMA node id (an integer from 0 to %d)" % (MAX_NUMA - 1)))
        elif node["id"] in ids:
            problems.append(Problem(path + ".id", node["id"], "a unique NUMA node id (also cpu.numa_nodes[%d])"
                                    % ids[node["id"]]))
        else:
            ids[node["id"]] = i
            for c in parse_cpulist(node.get("cpus") or ""):
                if c in owner:
                    problems.append(Problem(path + ".cpus", node.get("cpus"), "CPUs of no other NUMA node "
                                            "(CPU %d is also in node %d)" % (c, owner[c])))
                    break
                owner[c] = node["id"]
            else:
                continue
        cpu["numa_nodes"] = None
        return


def _check_gpu_ids(gpus, numa_nodes, problems):
    """GPU indexes unique; a GPU's NUMA node (-1: none) is one of the declared nodes."""
    seen = {}
    node_ids = set(n["id"] for n in numa_nodes) if numa_nodes else None
    for i, gpu in enumerate(gpus):
        if gpu["index"] in seen:
            problems.append(Problem("gpus[%d].index" % i, gpu["index"], "a unique GPU index (also gpus[%d])"
                                    % seen[gpu["index"]]))
            gpu["index"] = None
        else:
            seen[gpu["index"]] = i
        node = gpu.get("numa_node")
        if node_ids is not None and node is not None and node >= 0 and node not in node_ids:
            problems.append(Problem("gpus[%d].numa_node" % i, node, "one of the NUMA nodes in cpu.numa_nodes (%s) "
                                    "or -1" % ", ".join(str(n) for n in sorted(node_ids))))
            gpu["numa_node"] = None
