# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a declared GPU entry counts, for models with several logical devices per package
(issue 21: MI250/MI250X list two GCDs per OAM package, each its own PCI device with half the
package's memory).

``dlrack_hw`` entries count **logical devices** (docs/dlrack_hw.md). A declaration written from a
data sheet easily counts packages instead: ``{model: MI250X, count: 4}`` for a 4-OAM node that the
kernel shows as 8 GCDs, or 8 entries each with the package's 128 GB. Both give wrong verdicts
(half the cores-per-GPU and PCIe-lane demand, or twice the node's GPU memory) without any error.

``declared_count_problems(hw)`` looks at the entries of such a model in a declared document whose
entries do not name their PCI device (an entry with a ``pci_bus_id`` is one device the kernel
listed, as declare.yml writes them), using the catalogue's ``gcds_per_package`` and per-GCD
``memory_mb``:

- an entry's ``memory_mb`` above one GCD's (by more than 5 %) is a whole package's: a schema
  problem; the field then counts as unknown (the catalogue's per-GCD figure is used);
- ``packages: P`` on the entries says how many packages the entries are: the entries must be
  ``P x gcds_per_package``, else a schema problem;
- without ``packages``: a count that is not a whole number of packages is a schema problem; a
  whole number is a warning that says what the count is read as and how to confirm it.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import amd
from ansible_collections.dlrack.node.plugins.plugin_utils import catalogue
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import Problem

# A declared memory_mb this much above one GCD's is not a GCD's (ECC and rounding stay well below).
MEMORY_SLACK = 1.05


def _multi_gcd_spec(model, cache):
    if not isinstance(model, str) or not model:
        return None
    if model not in cache:
        spec = catalogue.lookup_gpu(model)
        ok = spec and not spec.get("ambiguous") and int(spec.get("gcds_per_package") or 1) > 1
        cache[model] = spec if ok else None
    return cache[model]


def _groups(gpus):
    """{catalogue model: [(position, entry), ...]} of the multi-GCD entries that name no PCI device."""
    cache, groups = {}, {}
    for i, gpu in enumerate(gpus):
        if not isinstance(gpu, dict) or gpu.get("pci_bus_id"):
            continue
        spec = _multi_gcd_spec(gpu.get("model"), cache)
        if spec:
            groups.setdefault(spec["model"], (spec, []))[1].append((i, gpu))
    return groups


def _memory_problem(spec, entries):
    per_gcd = spec.get("memory_mb")
    if not per_gcd:
        return None
    big = [(i, g) for i, g in entries
           if isinstance(g.get("memory_mb"), int) and g["memory_mb"] > per_gcd * MEMORY_SLACK]
    if not big:
        return None
    gcds = int(spec["gcds_per_package"])
    first, gpu = big[0]
    found = gpu["memory_mb"]
    model = gpu.get("model") or spec["model"]
    for dummy, g in big:
        g["memory_mb"] = None               # unknown: the catalogue's per-GCD figure is used
    problem = Problem("gpus[%d].memory_mb" % first, found,
                      "the memory of one logical device: %d MiB (an %s package of %s GB is %d GCDs of %d MiB, and "
                      "each entry is one GCD)" % (per_gcd, model, spec.get("memory_gb"), gcds, per_gcd))
    remedy = ("declare memory_mb: %d on the %s entries or leave it out (the catalogue gives it); if the %d entries "
              "are packages, declare count: %d" % (per_gcd, model, len(entries), len(entries) * gcds))
    return problem, remedy


def _count_findings(name, spec, entries):
    """(problems, warnings) about what the number of entries counts."""
    gcds = int(spec["gcds_per_package"])
    n = len(entries)
    model = entries[0][1].get("model") or spec["model"]
    first = entries[0][0]
    declared = sorted(set(g.get("packages") for dummy, g in entries if g.get("packages") is not None))
    if len(declared) > 1:
        return [(Problem("gpus[%d].packages" % first, declared, "one package count for the %s entries" % model),
                 "declare packages once, on the %s entry (gpus: {model: %s, count: N, packages: P})"
                 % (model, model))], []
    if declared:
        packages = declared[0]
        if packages * gcds == n:
            return [], []
        return [(Problem("gpus[%d].packages" % first, packages,
                         "the packages of the %d %s entr%s (%d logical device%s = %g package%s of %d GCDs)"
                         % (n, model, "y" if n == 1 else "ies", n, "" if n == 1 else "s", n / float(gcds),
                            "" if n == gcds else "s", gcds)),
                 "entries count logical devices: declare count: %d with packages: %d" % (packages * gcds, packages))], []
    if n % gcds:
        return [(Problem("gpus[%d].count" % first, n,
                         "a whole number of %s packages: %d GCDs each, one entry per GCD" % (model, gcds)),
                 "entries count logical devices (GCDs): declare count: %d for %d packages, and packages: %d to say so"
                 % (n * gcds, n, n))], []
    packages = n // gcds
    warning = (n, "count and packages of the %s entries" % model,
               "host %s: %d %s entries are read as %d logical devices (GCDs) = %d package%s (%d GCDs per package); "
               "a declaration that counted packages is %d GCDs" % (name, n, model, n, packages,
                                                                   "" if packages == 1 else "s", gcds, n * gcds),
               "declare packages: %d next to count: %d to confirm, or count: %d with packages: %d if the node has %d "
               "packages" % (packages, n, n * gcds, n, n))
    return [], [warning]


def warning_findings(warnings):
    """The warnings as ``inventory.schema`` findings (that rule is error or warning, never off,
    and a "cannot tell" finding is a warning at most)."""
    return [{"rule": "inventory.schema", "severity": "warning", "observed": observed, "required": required,
             "message": message, "remedy": remedy} for observed, required, message, remedy in warnings]


def declared_count_problems(hw, name):
    """(problems, warnings) of a cleaned declared document (see the module docstring).
    ``problems``: (Problem, remedy) pairs for inventory.schema errors; ``warnings``:
    (observed, required, message, remedy) for inventory.schema warnings (``warning_findings``).
    Clears each declared memory_mb that is a whole package's (it counts as unknown)."""
    if not isinstance(hw, dict) or hw.get("source") != "declared" or not hw.get("gpus"):
        return [], []
    problems, warnings = [], []
    for dummy, (spec, entries) in sorted(_groups(hw["gpus"]).items()):
        mem = _memory_problem(spec, entries)
        if mem:
            problems.append(mem)
        p, w = _count_findings(name, spec, entries)
        problems.extend(p)
        warnings.extend(w)
    return problems, warnings


def logical_gpus(gpus):
    """``(count, note, unknown)`` of the logical devices the entries show as to the runtime: an
    MI300-class package in a compute partition mode (DPX/QPX/CPX, ``compute_partition``) is
    ``partitions`` devices, every other entry one. ``note`` says so when a partition mode
    changed the count (None otherwise: an unpartitioned node's messages stay as they were);
    ``unknown``: the indexes of partitioned entries whose count is unknown."""
    count, unknown, modes = 0, [], {}
    for gpu in gpus:
        if not isinstance(gpu, dict) or str(gpu.get("compute_partition") or "spx").lower() == "spx":
            count += 1
            continue
        n = amd.logical_devices(gpu)
        if n is None:
            unknown.append(gpu.get("index"))
            n = 1
        count += n
        mode = str(gpu["compute_partition"]).upper()
        modes[mode] = modes.get(mode, 0) + 1
    note = None
    if count != len(gpus):
        note = "%d logical devices: %s" % (count, ", ".join(
            "%d package%s in compute partition mode %s" % (k, "" if k == 1 else "s", mode)
            for mode, k in sorted(modes.items())))
    return count, note, unknown


def package_count_hint(declared_gpus, gathered_gpus):
    """The remedy for a GPU count mismatch where the declaration counted packages: the gathered
    entries (one per GCD, as the kernel lists them) of one multi-GCD model are exactly the
    declared count x gcds_per_package. None when that is not the case."""
    gathered = [g for g in gathered_gpus or [] if isinstance(g, dict)]
    if not gathered or not declared_gpus:
        return None
    specs = set()
    cache = {}
    for g in gathered:
        spec = _multi_gcd_spec(g.get("model"), cache)
        if spec is None:
            return None
        specs.add(spec["model"])
    if len(specs) != 1:
        return None
    spec = cache[gathered[0].get("model")]
    gcds = int(spec["gcds_per_package"])
    if len(gathered) != len(declared_gpus) * gcds:
        return None
    return ("the declaration counts packages: the node lists %d %s GCDs (%d per package) = the declared %d packages; "
            "entries count logical devices: declare count: %d with packages: %d"
            % (len(gathered), gathered[0].get("model"), gcds, len(declared_gpus), len(gathered), len(declared_gpus)))
