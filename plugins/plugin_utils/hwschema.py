# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validation and normalisation of a ``dlrack_hw`` document (docs/dlrack_hw.md).

``check_hw(doc)`` never raises on bad input: it returns a cleaned copy in which every field that
failed validation is ``None`` (unknown), plus a list of problems, each naming the field path,
what was found and what was expected. The rule engine turns the problems into findings of the
rule ``inventory.schema``, so one malformed host never stops the validation of a fleet.

Declared documents may use two shorthands that are expanded here (and only here):
``count: N`` on a GPU or disk entry (N identical entries), and ``gpus: {model: X, count: N}``.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dlrack.node.plugins.module_utils.cpulist import CpuListError, parse_cpulist

SCHEMA_VERSION = 1

# A field spec: (types, constraint). "int+" = non-negative int, "int>0" = positive int,
# "cpulist" = kernel cpulist string, ("enum", (...)) = one of, "str", "bool", "num+".
_INT_TYPES = (int,)

_CPU_FIELDS = {
    "model": "str",
    "vendor": ("enum", ("amd", "intel", "arm", "other")),
    "sockets": "int>0",
    "cores": "int>0",
    "threads": "int>0",
    "pcie_lanes": "int+",
    "numa_nodes": "numa_nodes",
    "core_cpus": "core_cpus",
    "cores_per_socket": "int>0",
    "threads_per_core": "int>0",
    "flags": "any",
    "family": "any",
    "model_id": "any",
    "stepping": "any",
}
_EDAC_FIELDS = {
    "driver": "str",
    "controllers": "int+",
    "corrected": "int+",
    "uncorrected": "int+",
    "mcs": "any",
}
_MEMORY_FIELDS = {
    "total_mb": "int>0",
    "ecc": ("enum", ("multi-bit", "single-bit", "none", "unknown")),
    "edac": ("dict", _EDAC_FIELDS),
    "dimms": "any",
    "dimm_count": "int+",
}
_PCIE_FIELDS = {"width": "int>0", "width_max": "int>0", "gen": "int>0", "gen_max": "int>0",
                "gen_host_max": "int>0", "speed": "any", "speed_max": "any"}
_GPU_FIELDS = {
    "index": "int+",
    "uuid": "str",
    "model": "str",
    "memory_mb": "int>0",
    "pci_bus_id": "str",
    "numa_node": "int",
    "local_cpus": "cpulist",
    "pcie": ("dict", _PCIE_FIELDS),
    "ecc_enabled": "bool",
    "nvlink_active": "int+",
    "count": "int>0",
    "driver": "any",
    "vendor_id": "any",
    "device_id": "any",
    "mig_mode": "any",
    "virtualization_mode": "any",
    "serial": "any",
    "pci_name": "any",
    "ecc_errors": "any",
    "retired_pages": "any",
    "remapped_rows": "any",
}
_IN_USE_FIELDS = {"mounted": "list", "holders": "list", "partitions": "list", "signatures": "list",
                  "system": "bool"}
_DISK_FIELDS = {
    "name": "str",
    "by_id": "str",
    "kind": ("enum", ("nvme", "ssd", "hdd")),
    "transport": ("enum", ("nvme", "sata", "sas", "usb", "virtio", "scsi", "unknown")),
    "size_bytes": "int>0",
    "model": "str",
    "serial": "str",
    "wwid": "str",
    "rotational": "bool",
    "in_use": ("dict", _IN_USE_FIELDS),
    "count": "int>0",
    "removable": "any",
    "path": "any",
    "by_id_all": "any",
}
_WORKLOAD_FIELDS = {
    "kind": ("enum", ("full_finetune", "lora", "inference", "pretrain")),
    "model_params_b": "num+",
    "dataset_gb": "num+",
}
TOP_FIELDS = {
    "schema": "int>0",
    "source": ("enum", ("gathered", "declared")),
    "cpu": ("dict", _CPU_FIELDS),
    "memory": ("dict", _MEMORY_FIELDS),
    "gpus": ("list", _GPU_FIELDS),
    "disks": ("list", _DISK_FIELDS),
    "workload": ("dict", _WORKLOAD_FIELDS),
    "host": "any",
    "uptime_s": "num+",
    "errors": "any",
    "notes": "any",
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
        if self.unknown_key:
            return "dlrack_hw.%s: unknown key; expected one of %s" % (self.path, self.expected)
        return "dlrack_hw.%s: expected %s, got %s" % (self.path, self.expected, _short(self.found))

    def __repr__(self):
        return "Problem(%s)" % self.message()


def _short(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value):
    return isinstance(value, _INT_TYPES) and not isinstance(value, bool)


def _coerce_int(value):
    """Accept ints and integral strings ("8") that YAML inventories sometimes produce."""
    if _is_int(value):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdecimal():
        return int(value.strip())
    return None


def _check_scalar(spec, value, path, problems):
    if value is None:
        return None
    if spec == "any":
        return value
    if spec == "str":
        if isinstance(value, (str,)) and value.strip():
            return value.strip()
        problems.append(Problem(path, value, "a non-empty string"))
        return None
    if spec == "bool":
        if isinstance(value, bool):
            return value
        problems.append(Problem(path, value, "true or false"))
        return None
    if spec in ("int", "int+", "int>0"):
        num = _coerce_int(value)
        if num is None:
            problems.append(Problem(path, value, "an integer"))
            return None
        if spec == "int+" and num < 0:
            problems.append(Problem(path, value, "an integer >= 0"))
            return None
        if spec == "int>0" and num <= 0:
            problems.append(Problem(path, value, "an integer > 0"))
            return None
        return num
    if spec == "num+":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                value = float(value)
            except (TypeError, ValueError):
                problems.append(Problem(path, value, "a number >= 0"))
                return None
        if value < 0:
            problems.append(Problem(path, value, "a number >= 0"))
            return None
        return value
    if spec == "list":
        if isinstance(value, list):
            return value
        problems.append(Problem(path, value, "a list"))
        return None
    if spec == "cpulist":
        try:
            parse_cpulist(value if isinstance(value, str) else str(value))
        except CpuListError:
            problems.append(Problem(path, value, "a kernel cpulist such as '0-31,64-95'"))
            return None
        return value if isinstance(value, str) else str(value)
    if spec == "numa_nodes":
        return _check_numa_nodes(value, path, problems)
    if spec == "core_cpus":
        if not isinstance(value, list):
            problems.append(Problem(path, value, "a list of cpulists, one per physical core"))
            return None
        out = []
        for i, item in enumerate(value):
            try:
                parse_cpulist(item)
            except CpuListError:
                problems.append(Problem("%s[%d]" % (path, i), item, "a cpulist such as '0,64'"))
                return None
            out.append(item if isinstance(item, str) else ",".join(str(c) for c in item))
        return out
    if isinstance(spec, tuple) and spec[0] == "enum":
        if isinstance(value, str) and value.lower() in spec[1]:
            return value.lower()
        problems.append(Problem(path, value, "one of %s" % ", ".join(spec[1])))
        return None
    raise AssertionError("unknown spec %r" % (spec,))  # programming error, not input


def _check_numa_nodes(value, path, problems):
    if not isinstance(value, list):
        problems.append(Problem(path, value, "a list of {id, cpus, memory_mb}"))
        return None
    out = []
    for i, node in enumerate(value):
        p = "%s[%d]" % (path, i)
        if not isinstance(node, dict):
            problems.append(Problem(p, node, "a mapping {id, cpus, memory_mb}"))
            continue
        nid = _check_scalar("int+", node.get("id"), p + ".id", problems)
        if nid is None:
            if node.get("id") is None:
                problems.append(Problem(p + ".id", None, "the NUMA node id (integer >= 0)"))
            continue
        cpus = _check_scalar("cpulist", node.get("cpus", ""), p + ".cpus", problems)
        mem = _check_scalar("int+", node.get("memory_mb"), p + ".memory_mb", problems)
        clean = dict(node)
        clean.update({"id": nid, "cpus": cpus if cpus is not None else "", "memory_mb": mem})
        out.append(clean)
    return out


def _check_dict(fields, value, path, problems, strict):
    if value is None:
        return None
    if not isinstance(value, dict):
        problems.append(Problem(path, value, "a mapping with keys %s" % ", ".join(sorted(fields))))
        return None
    out = dict.fromkeys(fields)
    for key, val in value.items():
        spec = fields.get(key)
        if spec is None:
            if strict:
                sub = path + "." + str(key) if path else str(key)
                problems.append(Problem(sub, val, ", ".join(sorted(fields)), unknown_key=True))
            out[key] = val
            continue
        if val is None:
            continue
        out[key] = _check_field(spec, val, path + "." + key if path else key, problems, strict)
    return out


def _check_field(spec, value, path, problems, strict):
    if spec.__class__ is not tuple or spec[0] == "enum":
        return _check_scalar(spec, value, path, problems)
    if spec[0] == "dict":
        return _check_dict(spec[1], value, path, problems, strict)
    if spec[0] == "list":
        if value is None:
            return None
        if isinstance(value, dict) and path == "gpus":
            value = [value]          # shorthand gpus: {model: X, count: N}
        if not isinstance(value, list):
            problems.append(Problem(path, value, "a list"))
            return None
        out = []
        for i, item in enumerate(value):
            item_clean = _check_dict(spec[1], item, "%s[%d]" % (path, i), problems, strict)
            if item_clean is None:
                continue
            count = item_clean.pop("count", None) or 1
            if count > 4096:
                problems.append(Problem("%s[%d].count" % (path, i), count, "a count <= 4096"))
                count = 1
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
        return out
    return _check_scalar(spec, value, path, problems)


def _clone(entry):
    """Copy of a cleaned GPU/disk entry, two levels deep (entry and its pcie/in_use mappings),
    which is all the engine ever writes to; much cheaper than copy.deepcopy for big fleets."""
    out = dict(entry)
    for key in ("pcie", "in_use"):
        if isinstance(out.get(key), dict):
            out[key] = dict(out[key])
    return out


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
    clean = _check_dict(dict(TOP_FIELDS), doc, "", problems, strict)
    if clean.get("schema") not in (None, SCHEMA_VERSION):
        problems.append(Problem("schema", clean.get("schema"), "schema %d" % SCHEMA_VERSION))
    if clean.get("source") is None:
        clean["source"] = "declared"
    for section in ("cpu", "memory"):
        if clean.get(section) is None:
            clean[section] = _check_dict(TOP_FIELDS[section][1], {}, section, [], False)
    for section in ("gpus", "disks"):
        if clean.get(section) is None:
            clean[section] = None if section not in doc else []
    gpus = clean.get("gpus") or []
    for i, gpu in enumerate(gpus):
        if gpu.get("index") is None:
            gpu["index"] = i
        if gpu.get("pcie") is None:
            gpu["pcie"] = dict.fromkeys(_PCIE_FIELDS)
    for disk in clean.get("disks") or []:
        if disk.get("in_use") is None:
            disk["in_use"] = dict.fromkeys(_IN_USE_FIELDS)
    cpu = clean["cpu"]
    if cpu.get("cores") and cpu.get("threads") and cpu["threads"] < cpu["cores"]:
        problems.append(Problem("cpu.threads", cpu["threads"], "threads >= cores (%d)" % cpu["cores"]))
        cpu["threads"] = None
    return clean, problems
