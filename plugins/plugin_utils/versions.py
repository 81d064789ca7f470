# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet version drift (issue 33): one driver, firmware and software stack per hardware class.

A hardware class is the GPU model and the GPU count of a host (``NVIDIA H200 x8``). Within a class
every component of ``dlrack_hw.versions`` (module_utils/hw/versions.py) is judged, in this order:

1. against the host's pin, ``dlrack_versions: {gpu_driver: "550.90.07", ...}`` (the operator's
   inventory, per group: the class's group_vars), or, for a host that was gathered, the ``versions``
   its declared ``dlrack_hw`` holds (declared_pins);
2. else against its list of qualified combinations, ``dlrack_versions: {qualified: [{gpu_driver: ...,
   cuda_runtime: ...}, ...]}``: the host's versions must equal one combination on every component
   the combination names;
3. else against the class majority: the value most hosts of the class have; the hosts that differ are
   the outliers, named. A class split evenly has no majority: every host of the split is named.

Unknown (a component a host does not report) is never drift. The result is a matrix per class
(component -> values with their host counts and outliers) for the reports, and one finding per
outlier host under ``fleet.version_drift``. The rule is new since 0.1.0 and starts in shadow: the
finding is a warning marked ``"shadow": "error"`` (what it would be), as rules.rule(shadow=True)
files it, so the gate does not fail on it and the scheduler act (plugin_utils/scheduler.py) reports
"would take out" for it until its mode is enforce. Linear in hosts: one pass to group, one to judge.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import VERSION_KEYS
from ansible_collections.dlrack.node.plugins.plugin_utils.reports.common import SKIP_WARNING, junit_case
from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import console

RULE = "fleet.version_drift"
# the matrix's rows, the stack first: what a multi-node job depends on most
COMPONENTS = ("gpu_driver", "fabric_manager", "cuda_driver", "cuda_runtime", "rocm", "nccl", "rccl", "dcgm", "vbios",
              "ofed", "nic_firmware", "kernel", "bios", "bmc")
LABELS = {"gpu_driver": "GPU driver", "fabric_manager": "Fabric Manager", "cuda_driver": "CUDA (driver)",
          "cuda_runtime": "CUDA toolkit", "rocm": "ROCm", "nccl": "NCCL", "rccl": "RCCL", "dcgm": "DCGM",
          "vbios": "VBIOS", "ofed": "OFED", "nic_firmware": "NIC firmware", "kernel": "kernel", "bios": "BIOS",
          "bmc": "BMC firmware"}
MAX_ITEMS = 256          # GPUs / NICs of one host looked at
MAX_NAMED = 5            # outlier hosts named per value on the console
MAX_VALUE = 256          # characters of one value as compared and shown


class PinError(ValueError):
    """A dlrack_versions that is not a pin: one sentence naming the field and the fix."""


def _str(value):
    if value is None or isinstance(value, (bool, dict, list)):
        return None
    text = str(value).strip()
    return text[:MAX_VALUE] or None


def _joined(values):
    values = sorted(set(v for v in values if v))
    if not values:
        return None
    return values[0] if len(values) == 1 else "mixed: " + ", ".join(values)


def components(versions):
    """{component: value or None} of one host's ``versions`` (validated dlrack_hw.versions). VBIOS:
    the node's one version, or 'mixed: a, b' (its own finding, versions.one_vbios); NIC firmware:
    'model firmware' of each NIC kind, joined."""
    if not isinstance(versions, dict):
        return None
    out = dict((k, _str(versions.get(k))) for k in VERSION_KEYS)
    bios = versions.get("bios")
    out["bios"] = _str(bios.get("version")) if isinstance(bios, dict) else None
    gpus = versions.get("gpus") if isinstance(versions.get("gpus"), list) else []
    out["vbios"] = _joined(_str(g.get("vbios")) for g in gpus[:MAX_ITEMS] if isinstance(g, dict))
    nics = versions.get("nics") if isinstance(versions.get("nics"), list) else []
    fw = []
    for n in nics[:MAX_ITEMS]:
        if isinstance(n, dict) and _str(n.get("firmware")):
            fw.append("%s %s" % (_str(n.get("model")) or _str(n.get("driver")) or _str(n.get("kind")) or "NIC",
                                 _str(n.get("firmware"))))
    out["nic_firmware"] = ", ".join(sorted(set(fw)))[:MAX_VALUE] or None
    return out


def hw_class(hw):
    """'<GPU model> x<count>' of a validated document ('no GPU' without GPUs, 'GPUs unknown' when
    the document does not say)."""
    gpus = hw.get("gpus") if isinstance(hw, dict) else None
    if gpus is None:
        return "GPUs unknown"
    if not gpus:
        return "no GPU"
    models = sorted(set(str(g.get("model") or g.get("pci_name") or "unknown model") for g in gpus if isinstance(g, dict)))
    return "%s x%d" % (" + ".join(models)[:MAX_VALUE], len(gpus))


def check_pin(value, host=None):
    """The validated ``dlrack_versions`` of a host: ({component: version}, [combination, ...]).
    Raises PinError naming the field and the fix."""
    where = "dlrack_versions" + (" of host %s" % console(host) if host is not None else "")
    if value is None:
        return {}, []
    if not isinstance(value, dict):
        raise PinError("%s must be a mapping of component to version (components: %s), or {qualified: [...]}; got %s"
                       % (where, ", ".join(COMPONENTS), type(value).__name__))
    pins, qualified = {}, []
    for key, item in value.items():
        if key == "qualified":
            if not isinstance(item, list) or not item or not all(isinstance(c, dict) and c for c in item):
                raise PinError("%s.qualified must be a non-empty list of mappings of component to version" % where)
            for i, combo in enumerate(item):
                qualified.append(_pin_map(combo, "%s.qualified[%d]" % (where, i)))
            continue
        pins.update(_pin_map({key: item}, where))
    return pins, qualified


def _pin_map(mapping, where):
    out = {}
    for key, item in mapping.items():
        if key not in COMPONENTS:
            raise PinError("%s.%s is not a component: use one of %s" % (where, console(str(key))[:60], ", ".join(COMPONENTS)))
        if isinstance(item, (bool, dict, list)) or _str(item) is None:
            raise PinError("%s.%s must be a version string such as \"550.90.07\"" % (where, key))
        out[key] = _str(item)
    return out


def declared_pins(inputs):
    """{host: pin} from the declarations of hosts that were also gathered: a ``versions`` section in
    the declared ``dlrack_hw`` says what the host is to run, so it pins the gathered host (its
    dlrack_versions, where set, decides instead). ``inputs``: {host: evaluate_host kwargs}."""
    out = {}
    for host, kwargs in inputs.items():
        declared = kwargs.get("declared") if isinstance(kwargs, dict) else None
        if isinstance(declared, dict) and isinstance(declared.get("versions"), dict):
            pin = dict((k, v) for k, v in (components(declared["versions"]) or {}).items() if v is not None)
            if pin:
                out[host] = pin
    return out


def _qualified_gap(values, qualified):
    """None when ``values`` match one combination; else the differences from the nearest one
    [(component, observed, expected)]."""
    best = None
    for combo in qualified:
        gap = [(k, values.get(k), v) for k, v in sorted(combo.items(), key=lambda kv: COMPONENTS.index(kv[0]))
               if values.get(k) is not None and values.get(k) != v]
        if not gap:
            return None
        if best is None or len(gap) < len(best):
            best = gap
    return best


def compare(results, pins=None):
    """Judge the fleet: ``results`` {host: evaluation result with its validated ``hw``}, ``pins``
    {host: dlrack_versions}. Returns (matrix, outliers, pin_errors): ``matrix`` the version matrix
    per class (a list, classes by name), ``outliers`` {host: (class, [(component, observed,
    expected, basis)])} with basis 'pin', 'qualified', 'majority' or 'split', ``pin_errors``
    {host: sentence}. Hosts without versions are left out."""
    pins = pins or {}
    classes = {}
    seen = {}   # hosts that share an evaluation share its document: read each document once
    for host in sorted(results, key=str):
        res = results[host]
        hw = res.get("hw") if isinstance(res, dict) else None
        if not isinstance(hw, dict):
            continue
        known = seen.get(id(hw))
        if known is None or known[0] is not hw:
            known = seen[id(hw)] = (hw, components(hw.get("versions")), hw_class(hw))
        if known[1] is not None:
            classes.setdefault(known[2], []).append((host, known[1]))
    matrix, outliers, pin_errors = [], {}, {}
    checked = {}   # a pin as written (group_vars give many hosts the same) is checked once
    for label in sorted(classes):
        # hosts with the same values and the same pin are judged once, as one group
        groups = {}
        for host, values in classes[label]:
            raw = pins.get(host)
            key = None if raw is None else _pin_key(raw)
            if key not in checked:
                try:
                    checked[key] = check_pin(raw) + (False,)
                except PinError:
                    checked[key] = ({}, [], True)
            pin, qualified, bad = checked[key]
            if bad:
                try:
                    check_pin(raw, host)
                except PinError as exc:
                    pin_errors[host] = str(exc)
            group = groups.get((id(values), key))
            if group is None:
                group = groups[(id(values), key)] = {"values": values, "pin": pin, "qualified": qualified, "hosts": [],
                                                     "gaps": _fixed_gaps(values, pin, qualified)}
            group["hosts"].append(host)
        groups = list(groups.values())
        rows = []
        for comp in COMPONENTS:
            counts, free = {}, {}
            for g in groups:
                value = g["values"][comp]
                if value is None:
                    continue
                counts[value] = counts.get(value, 0) + len(g["hosts"])
                # the majority counts the hosts this component is not pinned or qualified for
                g["bound"] = comp in g["pin"] or any(comp in c for c in g["qualified"])
                if not g["bound"]:
                    free[value] = free.get(value, 0) + len(g["hosts"])
            if not counts:
                continue
            ranked = sorted(free.items(), key=lambda kv: (-kv[1], kv[0]))
            majority = ranked[0][0] if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]) else None
            named = {}
            for g in groups:
                value = g["values"][comp]
                if value is None:
                    continue
                if not g["bound"] and len(ranked) > 1:
                    if majority is None:
                        g["gaps"].append((comp, value, "one of " + ", ".join(v for v, dummy in ranked), "split"))
                    elif value != majority:
                        g["gaps"].append((comp, value, majority, "majority"))
                if any(gap[0] == comp for gap in g["gaps"]):
                    named.setdefault(value, []).extend(g["hosts"])
            row = {"component": comp, "label": LABELS[comp], "expected": majority, "values": [
                {"value": value, "hosts": n, "outliers": sorted(named.get(value, ()), key=str)[:MAX_NAMED * 4]}
                for value, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))],
                "unknown": sum(len(g["hosts"]) for g in groups) - sum(counts.values())}
            row["drift"] = bool(named)
            rows.append(row)
        size = 0
        count = 0
        for g in groups:
            size += len(g["hosts"])
            if g["gaps"]:
                g["gaps"].sort(key=lambda gap: COMPONENTS.index(gap[0]))
                count += len(g["hosts"])
                for host in g["hosts"]:
                    outliers[host] = (label, g["gaps"])
        matrix.append({"class": label, "hosts": size, "rows": rows, "outliers": count})
    return matrix, outliers, pin_errors


def _pin_key(raw):
    try:
        return json.dumps(raw, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return repr(raw)


def _fixed_gaps(values, pin, qualified):
    """The differences of ``values`` from a pin and from the qualified combinations."""
    gaps = [(comp, values[comp], pin[comp], "pin") for comp in COMPONENTS
            if comp in pin and values[comp] is not None and values[comp] != pin[comp]]
    if qualified:
        gaps.extend((c, o, e, "qualified") for c, o, e in _qualified_gap(values, qualified) or () if c not in pin)
    return gaps


_BASIS = {"pin": "pinned by dlrack_versions", "qualified": "no qualified combination of dlrack_versions",
          "majority": "the class majority", "split": "the class is split, no majority"}


def finding(label, size, gaps):
    """The shadow finding of an outlier host. It does not name the host (the report names it), so
    that every outlier with the same differences shares one finding: the reports then share their
    rendering (report.share_key), as they do for hosts that share an evaluation."""
    parts = ["%s %s (%s: %s)" % (LABELS[c], o, _BASIS[b], e) for c, o, e, b in gaps]
    return {"rule": RULE, "severity": "warning", "shadow": "error",
            "observed": "; ".join("%s %s" % (LABELS[c], o) for c, o, dummy, dummy2 in gaps),
            "required": "; ".join("%s %s" % (LABELS[c], e) for c, dummy, e, dummy2 in gaps),
            "message": "[shadow] this host differs from its hardware class %s (%d hosts): %s" % (label, size, "; ".join(parts)),
            "remedy": "install the class's versions on this host (the same driver, Fabric Manager, firmware and libraries "
                      "as the other %s hosts), or pin the qualified ones with dlrack_versions" % label}


def apply(results, pins=None):
    """Compare the fleet and add the findings to ``results`` in place: each outlier host gets its
    finding (rule outcome ``warn``, status at least ``warn``), every other host with versions the
    outcome ``pass``; a bad pin is a warning finding of that host naming the field. Returns the
    matrix (empty when no host has versions: then nothing changed)."""
    matrix, outliers, pin_errors = compare(results, pins)
    if not matrix:
        return matrix
    sizes = dict((c["class"], c["hosts"]) for c in matrix)
    shared = {}
    for host, res in results.items():
        hw = res.get("hw") if isinstance(res, dict) else None
        if not isinstance(hw, dict) or not isinstance(hw.get("versions"), dict):
            continue
        found = []
        if host in outliers:
            label, gaps = outliers[host]
            key = (label, tuple(gaps))
            if key not in shared:
                shared[key] = finding(label, sizes[label], gaps)
            found.append(shared[key])
        if host in pin_errors:
            found.append({"rule": RULE, "severity": "warning", "observed": None, "required": None,
                          "message": "not judged against its pin: %s" % pin_errors[host],
                          "remedy": "fix dlrack_versions in the inventory (docs/dlrack_hw.md, fleet versions)"})
        rules = dict(res.get("rules") or {})
        rules[RULE] = "warn" if found else "pass"
        res["rules"] = rules
        if found:
            res["findings"] = list(res["findings"]) + found
            if res.get("status") == "pass":
                res["status"] = "warn"
    return matrix


def console_lines(matrix, max_lines=200):
    """The version matrix for the terminal: one line per class, one per component that drifts
    (value (hosts), ... with the outliers named), the agreeing components on one line."""
    out = []
    for c in matrix:
        out.append("versions %s: %d host(s), %d outlier(s)" % (c["class"], c["hosts"], c["outliers"]))
        same = []
        for row in c["rows"]:
            if not row["drift"] and len(row["values"]) == 1:
                same.append("%s %s" % (row["label"], row["values"][0]["value"]))
                continue
            vals = []
            for v in row["values"]:
                named = v["outliers"][:MAX_NAMED]
                more = len(v["outliers"]) - len(named)
                vals.append("%s (%d%s)" % (v["value"], v["hosts"], ": " + ", ".join(named) + (" +%d" % more if more > 0 else "")
                                           if named else ""))
            out.append("  %-15s %s" % (row["label"], " | ".join(vals)))
        if same:
            out.append("  same on all: " + "; ".join(same))
        if len(out) >= max_lines:
            out = out[:max_lines] + ["  ... the version matrix continues in the reports"]
            break
    return out


def junit_suite(matrix):
    """One JUnit suite for the matrix: a case per class and component; where the class drifts the
    case is skipped as a warning (shadow: it would fail once fleet.version_drift is enforced)."""
    cases = []
    for c in matrix:
        for row in c["rows"]:
            name = "%s: %s" % (c["class"], row["label"])
            text = "\n".join("%s: %d host(s)%s" % (v["value"], v["hosts"], (" - outliers: " + ", ".join(v["outliers"]))
                                                   if v["outliers"] else "") for v in row["values"])
            if row["drift"]:
                cases.append(junit_case("fleet.versions", name, "skipped", "warning: [shadow] %s drifts in %s"
                                        % (row["label"], c["class"]), SKIP_WARNING, system_out=text))
            else:
                cases.append(junit_case("fleet.versions", name, "passed", system_out=text))
    return {"name": "dlrack.node fleet versions", "cases": cases}
