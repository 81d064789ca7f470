# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rule engine: validate one ``dlrack_hw`` document against the dlrack rules (docs/dlrack_hw.md).

Pure Python. ``evaluate_host(name, hw, ...)`` returns
``{"status": "pass|warn|fail", "findings": [...], "rules": {rule_id: outcome}, "hw": {...}}``
where every finding is ``{rule, severity, observed, required, message, remedy}``. A rule that
holds yields one ``info`` finding saying why (so the report can show it), never an error or a
warning. ``evaluate_fleet`` runs it for many hosts and builds the summary; it is what the
preflight action plugin, the ``hw_validate`` filter and the benchmarks call.

Each rule is declared once, with ``@rule(id, title, default severity)`` on its check function;
the registry's order is the order of evaluation and of the report.

Whatever the input, every host gets a verdict: a malformed declaration or a bad per-host setting
(``dlrack_profile``, ``dlrack_thresholds``, ``dlrack_severity``, ``dlrack_workload``,
``dlrack_external_archive``) becomes ``inventory.schema`` errors on that host, naming the field
and what is expected; the bad value is ignored (the default or "unknown" is used) so the other
rules still judge the host. Every number in a result is finite.

Severity overrides (``dlrack_severity: {rule: level}``): ``error`` and ``warning`` set what a
failing rule reports (a rule's "cannot verify" and "below the recommendation" findings are
warnings at most); ``info`` keeps the rule's findings in the report as information only, never
failing or warning the host; ``off`` does not run or report the rule at all.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import marshal

from ansible_collections.dlrack.node.plugins.plugin_utils import catalogue, fastpath, gpu_packages
from ansible_collections.dlrack.node.plugins.plugin_utils import platform
from ansible_collections.dlrack.node.plugins.module_utils.hw import gpu as gpu_seam
from ansible_collections.dlrack.node.plugins.module_utils.storage import blockdev
from ansible_collections.dlrack.node.plugins.module_utils.ecc.policy import assess_ecc
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import (
    MAX_GPUS, MAX_STR, Problem, check_hw, check_workload, to_int, to_number)

SEVERITIES = ("error", "warning", "info", "off")
_REGISTRY = []


class Rule(object):
    """One rule: stable id, one-line title (the reports), severity when it fails (training
    profile), the text of its row in the documentation's rules table, and its check."""

    __slots__ = ("id", "title", "severity", "doc", "check", "shadow")

    def __init__(self, rule_id, title, severity, doc, check, shadow=False):
        self.id, self.title, self.severity, self.doc, self.check = rule_id, title, severity, doc, check
        self.shadow = shadow

    def run(self, ctx):
        """Judge ``ctx``: the check reports through ``ctx.report``/``ctx.skip`` under this rule's id."""
        ctx.rule = self.id
        self.check(ctx)


def rule(rule_id, title, severity, doc, shadow=False):
    """Register the decorated ``check(ctx)`` as the rule ``rule_id``. ``doc`` is its row in the
    rules table of README.md and docs/dlrack_hw.md (``scripts/gen_docs.py`` writes them);
    ``{threshold}`` in it stands for that threshold's default.

    ``shadow=True``: a rule new since collection 0.1.0 starts in shadow mode - where it fails, its
    finding is a warning marked ``"shadow": "error"`` (what it would be) and its message starts with
    ``[shadow]``, so the gate does not fail on it, until the operator enforces it for a host with
    ``dlrack_severity: {<rule id>: error}``. The scheduler act decides the same rule's drains by
    its own mode (``dlrack_rule_modes``, module_utils/scheduler/modes.py), shadow by default too."""
    if severity not in SEVERITIES[:3] or any(r.id == rule_id for r in _REGISTRY):
        raise ValueError("rule %r: a new id and a severity of error, warning or info" % (rule_id,))

    def register(check):
        _REGISTRY.append(Rule(rule_id, title, severity, doc, check, shadow=bool(shadow)))
        return check
    return register


# --------------------------------------------------------------------------------------------
# Settings: thresholds, profiles, severities
# --------------------------------------------------------------------------------------------

# name: (default, lowest, highest, integer)
THRESHOLDS = {
    "min_gpus": (1, 0, MAX_GPUS, True),
    "recommended_cores_per_gpu": (8, 0, 1024, False),
    "pcie_lanes_per_gpu": (16, 0, 64, True),
    "ram_to_vram_min": (1.0, 0, 100, False),
    "ram_to_vram_recommended": (2.0, 0, 100, False),
    "large_model_params_b": (7, 0, 1e6, False),
    "large_model_min_vram_gb": (80, 0, 1e6, False),
    # Activations, KV cache, CUDA context and fragmentation on top of the states below.
    "workload_overhead": (1.2, 1, 100, False),
    "ram_match_tolerance_pct": (5.0, 0, 100, False),
    "ecc_corrected_budget_24h": (9, 0, 1e9, False),
    # The smallest NUMA node with CPUs against the largest, in %: a balanced 2S EPYC 9374F holds
    # 193129 and 193477 MB (99.8 %, tests/data/real/numactl-hardware); one DIMM of 12 missing is 91.7 %.
    "numa_memory_balance_pct": (95.0, 0, 100, False),
    # Disks smaller than this are not data disks (a 300 MB squashfs with the driver, a seed image).
    "data_disk_min_gb": (8, 0, 1e6, False),
    # Downstream lanes per uplink lane of a PCIe switch on a GPU/NIC/NVMe path (issue 32). 2:1 is the
    # common PCIe-switch 8-GPU layout (two x16 GPUs per x16 uplink; their P2P stays in the switch);
    # beyond it host-to-device copies of the devices below get less than half an x16 each.
    "pcie_switch_oversubscription_max": (2.0, 1, 64, False),
}
# Bytes per parameter for the memory estimate. Full fine-tuning / pre-training with Adam in
# mixed precision: fp16/bf16 weights (2) + gradients (2) + fp32 master weights (4) + Adam m
# and v (4 + 4) = 16 bytes/parameter (ZeRO paper, Rajbhandari et al. 2020, section 3.1).
# LoRA: frozen bf16 weights (2) plus small adapters; inference: bf16 weights (2).
BYTES_PER_PARAM = {"full_finetune": 16, "pretrain": 16, "lora": 2, "inference": 2}
DEFAULT_THRESHOLDS = dict({k: v[0] for k, v in THRESHOLDS.items()}, workload_bytes_per_param=BYTES_PER_PARAM)

# Per profile: severities that differ from the rules' defaults, and thresholds that differ.
PROFILES = {
    "training": {"severity": {}, "thresholds": {}},
    "inference": {
        "severity": {"gpu.interconnect": "info", "storage.hdd_cold_archive": "info",
                     "memory.exceeds_vram": "warning", "cpu.pcie_lanes": "warning"},
        "thresholds": {"recommended_cores_per_gpu": 4, "ram_to_vram_recommended": 1.0},
    },
    "workstation": {
        "severity": {"memory.ecc": "warning", "cpu.pcie_lanes": "warning", "gpu.interconnect": "info",
                     "storage.hdd_cold_archive": "info", "memory.edac_active": "info", "gpu.ecc_mode": "info"},
        "thresholds": {"recommended_cores_per_gpu": 4},
    },
}


def _bad_setting(problems, variable, value, expected):
    problems.append(Problem(variable, value, expected))


def _check_threshold(key, value, problems):
    default, lo, hi, integer = THRESHOLDS[key]
    num = to_int(value) if integer else to_number(value)
    if num is None or not lo <= num <= hi:
        _bad_setting(problems, "dlrack_thresholds." + key, value,
                     "%s from %g to %g" % ("an integer" if integer else "a number", lo, hi))
        return None
    return num


def _check_bytes_per_param(value, problems):
    if not isinstance(value, dict):
        _bad_setting(problems, "dlrack_thresholds.workload_bytes_per_param", value,
                     "a mapping of workload kind (%s) to bytes per parameter" % ", ".join(sorted(BYTES_PER_PARAM)))
        return {}
    out = {}
    for kind, num in value.items():
        clean = to_number(num)
        if kind not in BYTES_PER_PARAM or clean is None or not 0 < clean <= 1024:
            _bad_setting(problems, "dlrack_thresholds.workload_bytes_per_param.%s" % kind, num,
                         "a number from 0 to 1024 for one of %s" % ", ".join(sorted(BYTES_PER_PARAM)))
            continue
        out[kind] = clean
    return out


def _resolve_thresholds(profile, thresholds, problems):
    th = dict(DEFAULT_THRESHOLDS, **PROFILES[profile]["thresholds"])
    th["workload_bytes_per_param"] = dict(BYTES_PER_PARAM)
    if thresholds is None:
        return th
    if not isinstance(thresholds, dict):
        _bad_setting(problems, "dlrack_thresholds", thresholds, "a mapping of threshold name to number")
        return th
    for key, value in thresholds.items():
        if key == "workload_bytes_per_param":
            th[key].update(_check_bytes_per_param(value, problems))
        elif key not in THRESHOLDS:
            _bad_setting(problems, "dlrack_thresholds.%s" % key, value,
                         "a known threshold (%s)" % ", ".join(sorted(DEFAULT_THRESHOLDS)))
        else:
            num = _check_threshold(key, value, problems)
            th[key] = th[key] if num is None else num
    return th


def _resolve_severity(profile, severity, problems):
    sev = dict(_DEFAULT_SEVERITY, **PROFILES[profile]["severity"])
    for key in _SHADOW_RULES:
        if sev.get(key) == "error":
            sev[key] = "shadow"     # a new rule's error is reported as what it would be (rule())
    if severity is None:
        return sev
    if not isinstance(severity, dict):
        _bad_setting(problems, "dlrack_severity", severity, "a mapping of rule id to error, warning, info or off")
        return sev
    for key, value in severity.items():
        level = value.strip().lower() if isinstance(value, str) else None
        if key not in sev:
            _bad_setting(problems, "dlrack_severity.%s" % key, value, "a rule id (%s)" % ", ".join(RULE_IDS))
        elif key == "inventory.schema" and level not in ("error", "warning"):
            _bad_setting(problems, "dlrack_severity.%s" % key, value, "error or warning (a malformed inventory "
                         "cannot be switched off)")
        elif level not in SEVERITIES:
            _bad_setting(problems, "dlrack_severity.%s" % key, value, "one of %s" % ", ".join(SEVERITIES))
        else:
            sev[key] = level
    return sev


_SETTINGS_CACHE = {}


def resolve_settings(profile="training", thresholds=None, severity=None):
    """Profile defaults merged with per-host overrides -> ``(thresholds, severity, problems)``.

    Never raises: each bad value is a Problem naming the variable, and its default is used."""
    problems = []
    if not isinstance(profile, str) or profile.strip().lower() not in PROFILES:
        _bad_setting(problems, "dlrack_profile", profile, "one of %s" % ", ".join(sorted(PROFILES)))
        profile = "training"
    profile = profile.strip().lower()
    plain = thresholds is None and severity is None
    if plain and profile in _SETTINGS_CACHE:
        return _SETTINGS_CACHE[profile] + (problems,)
    th = _resolve_thresholds(profile, thresholds, problems)
    sev = _resolve_severity(profile, severity, problems)
    if plain:
        _SETTINGS_CACHE[profile] = (th, sev)
    return th, sev, problems


def _check_archive(value, problems):
    if value is None or (isinstance(value, str) and value.strip() and len(value) <= MAX_STR
                         and "{{" not in value):
        return value.strip() if value is not None else None
    _bad_setting(problems, "dlrack_external_archive", value, "the archive's URL or path (a non-empty string)")
    return None


def _workload(clean, workload, problems):
    """The workload to judge: dlrack_hw.workload, else dlrack_workload (validated like the document)."""
    if clean.get("workload") is not None or workload is None:
        return clean.get("workload")
    wl, wl_problems = check_workload(workload, "dlrack_workload")
    for p in wl_problems:
        _bad_setting(problems, p.path, p.found, p.expected)
    return wl


# --------------------------------------------------------------------------------------------
# Per-host context
# --------------------------------------------------------------------------------------------

_CAP = {"error": {"fail": "error", "warn": "warning"},
        "shadow": {"fail": "warning", "warn": "warning"},
        "warning": {"fail": "warning", "warn": "warning"},
        "info": {"fail": "info", "warn": "info"}}


class _Ctx(object):
    """One host's evaluation: its document, settings, and the findings collected so far."""

    def __init__(self, name, severity):
        self.name = name
        self.sev = severity
        self.findings = []
        self.hw = self.th = self.declared = self.workload = self.archive = None
        self.rule = None            # the id of the rule being run (Rule.run sets it)
        self.notes = {}
        self.problems = []          # (Problem, remedy) for inventory.schema
        self._disks = None

    def report(self, level, observed, required, message, remedy=None):
        """A finding of the rule being run (``self.rule``). ``level``: pass (info), fail (the
        rule's severity) or warn (cannot verify / below the recommendation: a warning at most).
        A rule switched off reports nothing."""
        rule_id = self.rule
        configured = self.sev[rule_id]
        if configured == "off":
            return
        finding = {
            "rule": rule_id, "severity": "info" if level == "pass" else _CAP[configured][level],
            "observed": observed, "required": required, "message": message,
            "remedy": None if level == "pass" else remedy}
        if configured == "shadow" and level == "fail":
            # shadow mode (rule(shadow=True)): what it would be, and the reports say so
            finding["shadow"] = "error"
            finding["message"] = "[shadow] " + message
        self.findings.append(finding)

    def disks(self):
        """The host's disks by classify_disks, computed once for both storage rules."""
        if self._disks is None:
            self._disks = classify_disks(self.hw, self.th["data_disk_min_gb"])
        return self._disks

    def skip(self, message):
        """The rule being run could not be checked: an info finding saying why."""
        if self.sev[self.rule] != "off":
            self.findings.append({"rule": self.rule, "severity": "info", "observed": None, "required": None,
                                  "message": "not checked: " + message, "remedy": None, "skipped": True})


# --------------------------------------------------------------------------------------------
# Catalogue
# --------------------------------------------------------------------------------------------

_LOOKUP_CACHE = {}


def _lookup(kind, name):
    """Catalogue lookups memoised per model string: a fleet repeats a handful of models.
    The returned specs are shared and must be treated as read-only."""
    key = (kind, name)
    if key not in _LOOKUP_CACHE:
        if len(_LOOKUP_CACHE) > 4096:
            _LOOKUP_CACHE.clear()
        _LOOKUP_CACHE[key] = catalogue.lookup_cpu(name) if kind == "cpu" else catalogue.lookup_gpu(name)
    return _LOOKUP_CACHE[key]


def _model_from_pci_name(pci_name, vendor=None):
    """pci.ids names a device "GH100[H100 SXM5 80GB]" or "AD102GL [L6000 / RTX 6000 Ada Generation]":
    the marketing name(s) in brackets, tried against the catalogue in order. AMD names one device
    id for two products ("Aldebaran/MI200 [Instinct MI250X/MI250]"): a model only when every name
    in the brackets is the same catalogue entry."""
    if not isinstance(pci_name, str) or "[" not in pci_name:
        return None
    inner = pci_name[pci_name.index("[") + 1:].rstrip("]")
    if vendor in ("amd", "hygon"):
        specs = [_lookup("gpu", "AMD " + a.strip()) for a in inner.split("/") if a.strip()]
        models = set((sp or {}).get("model") for sp in specs)
        return specs[0] if specs and len(models) == 1 and None not in models else None
    for alt in [a.strip() for a in inner.split("/")]:
        spec = _lookup("gpu", "NVIDIA " + alt) if alt else None
        if spec and not spec.get("ambiguous"):
            return spec
    return None


def _gpu_vendor(gpu):
    """'nvidia' (also a schema-1 entry without vendor or vendor_id), 'amd' or 'hygon': the entry's
    vendor, else its PCI vendor id, else the vendor of its catalogue model (a declared model)."""
    return gpu_seam.vendor_name(gpu) or str((gpu.get("_spec") or {}).get("vendor") or "nvidia")


def _links_active(gpu):
    """Active GPU-GPU links: the vendor-neutral ``interconnect.links_active`` when present, else
    schema 1's ``nvlink_active``."""
    ic = gpu.get("interconnect")
    if isinstance(ic, dict) and ic.get("links_active") is not None:
        return ic["links_active"]
    return gpu.get("nvlink_active")


def _link_capable(spec):
    return bool(spec.get("nvlink") or spec.get("xgmi_links"))


def _packages(gpus):
    """PCIe packages behind the logical devices: MI250/MI250X list two GCDs per OAM package
    (catalogue gcds_per_package); every other GPU is its own package."""
    total = 0.0
    for g in gpus:
        total += 1.0 / max(1, int((g.get("_spec") or {}).get("gcds_per_package") or 1))
    return int(math.ceil(total - 1e-9))


def _enrich_cpu(cpu, notes):
    spec = _lookup("cpu", cpu["model"]) if cpu.get("model") else None
    if not spec:
        return spec
    sockets = cpu.get("sockets") or 1
    if cpu.get("sockets") is None:
        notes["cpu.sockets"] = "assumed 1 socket (not declared)"
    for key in ("cores", "threads"):
        if cpu.get(key) is None and spec.get(key):
            cpu[key] = spec[key] * sockets
            notes["cpu." + key] = "catalogue: %s x %d" % (spec.get("model"), sockets)
    if cpu.get("pcie_lanes") is None:
        lanes, note = catalogue.cpu_lanes(spec, sockets)
        if lanes:
            cpu["pcie_lanes"] = lanes
            notes["cpu.pcie_lanes"] = "catalogue: " + (note or spec.get("model", ""))
    if cpu.get("vendor") is None and spec.get("vendor"):
        cpu["vendor"] = spec["vendor"]
    return spec


def _enrich(hw):
    """Fill unknown figures from the catalogue; return notes on where figures came from."""
    notes = {}
    hw["_cpu_spec"] = _enrich_cpu(hw["cpu"], notes)
    for gpu in hw["gpus"] or []:
        if not gpu.get("model") and gpu.get("pci_name"):
            vendor = _gpu_vendor(gpu)
            gspec = _model_from_pci_name(gpu["pci_name"], vendor)
            if gspec:
                gpu["model"] = gspec["model"]
                notes["gpus.model"] = "pci.ids: %s -> %s (%s)" % (
                    gpu["pci_name"], gspec["model"], gpu_seam.BY_NAME.get(vendor, gpu_seam.nvidia).WORDING["model_source"])
        gspec = _lookup("gpu", gpu["model"]) if gpu.get("model") else None
        gpu["_spec"] = gspec
        if gspec and gpu.get("memory_mb") is None and gspec.get("memory_mb"):
            gpu["memory_mb"] = gspec["memory_mb"]
            notes["gpus.memory_mb"] = "catalogue: %s" % gspec.get("model")
    return notes


def _gib(mb):
    return "%.0f GiB" % (mb / 1024.0) if mb is not None else "unknown"


def _g(num):
    return "%g" % num


# --------------------------------------------------------------------------------------------
# The rules, in report order
# --------------------------------------------------------------------------------------------

@rule("inventory.schema", "the dlrack_hw document and the host's dlrack_* settings are well formed", "error",
      doc="the `dlrack_hw` document and the host's `dlrack_*` settings are well formed (types, enums, known "
          "keys; the host, field, value and what is expected are named, and a bad value is treated as unknown / "
          "the default, so the other rules still judge the host)")
def _check_schema(ctx):
    for problem, remedy in ctx.problems:
        ctx.report("fail", problem.observed(), problem.expected,
                   "host %s: %s" % (ctx.name, problem.message()), remedy)
    if ctx.hw is None:
        return
    for key, what in (("cpu", "cpu.model"), ("gpus", "gpus.model")):
        specs = [ctx.hw.get("_cpu_spec")] if key == "cpu" else [g.get("_spec") for g in ctx.hw["gpus"] or []]
        amb = next((sp for sp in specs if sp and sp.get("ambiguous")), None)
        if amb:
            model = ctx.hw["cpu"]["model"] if key == "cpu" else ctx.hw["gpus"][0].get("model")
            candidates = amb.get("candidates") or ["?"]
            ctx.report("warn", model, "one of: %s" % ", ".join(candidates),
                       "host %s: %s is ambiguous in the catalogue (%s); figures that differ between them are "
                       "unknown" % (ctx.name, what, ", ".join(candidates)),
                       "declare the exact model, e.g. %r" % candidates[0])
    if not ctx.problems:
        ctx.report("pass", "schema %d" % (ctx.hw.get("schema") or 1), "schema 1",
                   "%s hardware description is well formed" % ctx.hw["source"])


@rule("gpu.present", "the node has at least the expected number of GPUs", "error",
      doc="the node has at least `min_gpus` ({min_gpus}) NVIDIA or AMD GPUs, found from PCI sysfs even without "
          "a driver")
def _check_gpu_present(ctx):
    need = ctx.th["min_gpus"]
    if ctx.hw["gpus"] is None:
        ctx.report("warn", None, ">= %d" % need, "the GPUs are not declared (unknown)",
                   "declare dlrack_hw.gpus (model and count, or [] for none) or gather the host")
        return
    n = len(ctx.hw["gpus"])
    ctx.report("pass" if n >= need else "fail", n, ">= %d" % need,
               "%d GPU(s) found" % n if n else gpu_seam.no_gpu_message(),
               "install the GPUs, check they are seated and visible in lspci, or set "
               "dlrack_thresholds.min_gpus: 0 for a node that is meant to have none")


@rule("cpu.cores_exceed_gpus", "physical CPU cores > GPUs; >= recommended cores per GPU", "error",
      doc="physical CPU cores (all sockets) > number of GPUs; below `recommended_cores_per_gpu` "
          "({recommended_cores_per_gpu}) per GPU is a warning")
def _check_cores(ctx):
    # logical devices: an MI300X in CPX mode is 8 (plugin_utils/gpu_packages.py)
    n, partitions, unknown = gpu_packages.logical_gpus(ctx.hw["gpus"] or [])
    cores = ctx.hw["cpu"].get("cores")
    rec = ctx.th["recommended_cores_per_gpu"]
    before = len(ctx.findings)
    if unknown:
        ctx.report("warn", cores, "> GPUs", "cannot verify: GPU %s is in a compute partition mode whose number of "
                   "logical devices is unknown" % ", ".join(str(i) for i in unknown),
                   "make amdgpu's enforce_isolation readable (one value per partition) or declare the node")
    elif cores is None:
        ctx.report("warn", None, "> %d" % n, "physical core count is unknown",
                   "declare cpu.model (in the catalogue) or cpu.cores")
    elif n == 0:
        ctx.report("pass", cores, "> 0", "%d cores, no GPU to feed" % cores)
    elif cores <= n:
        ctx.report("fail", cores, "> %d" % n,
                   "%d physical cores for %d GPUs: fewer cores than GPUs starves every dataloader" % (cores, n),
                   "use a CPU with at least %s cores (%s per GPU recommended) or fewer GPUs per node"
                   % (_g(n * rec), _g(rec)))
    elif cores < n * rec:
        ctx.report("warn", cores, ">= %s (%s per GPU)" % (_g(n * rec), _g(rec)),
                   "%d physical cores for %d GPUs is %.1f per GPU, below the recommended %s"
                   % (cores, n, cores / float(n), _g(rec)),
                   "choose a CPU with >= %s cores in total, or lower dlrack_thresholds."
                   "recommended_cores_per_gpu if the dataloaders are light" % _g(n * rec))
    else:
        ctx.report("pass", cores, ">= %s" % _g(n * rec),
                   "%d physical cores for %d GPUs (%.1f per GPU)" % (cores, n, cores / float(n)))
    if partitions and len(ctx.findings) > before:
        ctx.findings[-1]["message"] += " (%s)" % partitions


@rule("cpu.pcie_lanes", "CPU PCIe lanes >= 16 x GPUs", "error",
      doc="CPU-provided PCIe lanes (all sockets) >= {pcie_lanes_per_gpu} x GPUs (`pcie_lanes_per_gpu`); unknown "
          "CPU model = warning \"cannot verify\", never a silent pass")
def _check_lanes(ctx):
    n = len(ctx.hw["gpus"] or [])
    per = ctx.th["pcie_lanes_per_gpu"]
    packages = _packages(ctx.hw["gpus"] or [])   # MI250/MI250X: one x16 host link per 2 GCDs
    need = packages * per
    lanes = ctx.hw["cpu"].get("pcie_lanes")
    model = ctx.hw["cpu"].get("model")
    if n == 0:
        ctx.skip("no GPUs")
    elif lanes is None:
        ctx.report("warn", None, ">= %d" % need,
                   "cannot verify: CPU model %r is not in the catalogue and cpu.pcie_lanes is not declared"
                   % (model,) if model else "cannot verify: the CPU model is unknown",
                   "declare dlrack_hw.cpu.pcie_lanes for this platform, or add the model to the catalogue")
    else:
        src = ctx.notes.get("cpu.pcie_lanes")
        ctx.report("pass" if lanes >= need else "fail",
                   "%d%s" % (lanes, " (%s)" % src if src else ""), ">= %d (x%d per GPU)" % (need, per),
                   "%d CPU PCIe lanes for %d GPUs (%d needed for x%d each)" % (lanes, n, need, per) if packages == n else
                   "%d CPU PCIe lanes for %d GPUs in %d packages (%d needed for x%d per package)"
                   % (lanes, n, packages, need, per),
                   "use a platform with more CPU lanes (a second socket, EPYC/Xeon instead of a desktop CPU) "
                   "or fewer GPUs per node")


@rule("gpu.pcie_link", "every GPU's link width equals its maximum", "error",
      doc="every GPU's negotiated link **width** equals its maximum (x16); the link **speed** at idle is not a "
          "fault (GPUs downshift to 2.5 GT/s when idle)")
def _check_pcie_link(ctx):
    gpus = ctx.hw["gpus"] or []
    if not gpus:
        ctx.skip("no GPUs")
        return
    if ctx.hw["source"] == "declared":
        ctx.skip("negotiated link width is only known once the host is gathered")
        return
    bad, unknown, ok = [], [], []
    for g in gpus:
        w, wm = g["pcie"].get("width"), g["pcie"].get("width_max")
        label = ("GPU%s %s" % (g.get("index"), g.get("pci_bus_id") or "")).strip()
        if w is None or wm is None:
            unknown.append(label)
        elif w < wm:
            bad.append("%s x%d of x%d" % (label, w, wm))
        else:
            ok.append(w)
    if bad:
        ctx.report("fail", "; ".join(bad), "width = width_max (x16)",
                   "%d GPU(s) negotiated a narrower link than they support: %s" % (len(bad), "; ".join(bad)),
                   "reseat the card, move it to an x16 slot, check riser/bifurcation settings in the BIOS "
                   "(the idle link SPEED downshift to 2.5 GT/s is normal; the WIDTH must not drop)")
    if unknown:
        ctx.report("warn", "unknown for " + ", ".join(unknown), "width = width_max",
                   "cannot verify the link width of %s (no sysfs link files: VM pass-through or vGPU?)"
                   % ", ".join(unknown), "check the link on the hypervisor host")
    if not bad and not unknown:
        ctx.report("pass", "x%s" % "/x".join(str(w) for w in sorted(set(ok))), "width = width_max",
                   "all %d GPU links at their full width" % len(ok))


def _unknown_memory(ram, gpus):
    if ram is None:
        return "system RAM"
    if any(not g.get("model") for g in gpus):
        return gpu_seam.wording(gpus, "memory_unknown")
    return "GPU memory (model %r not in the catalogue)" % next(g.get("model") for g in gpus if g.get("memory_mb") is None)


@rule("memory.exceeds_vram", "system RAM > total GPU memory; >= 2x recommended", "error",
      doc="system RAM > {ram_to_vram_min} x total GPU memory (`ram_to_vram_min`); below "
          "{ram_to_vram_recommended} x total GPU memory (`ram_to_vram_recommended`) is a warning")
def _check_ram(ctx):
    gpus = ctx.hw["gpus"] or []
    ram = ctx.hw["memory"].get("total_mb")
    if not gpus:
        ctx.skip("no GPUs")
        return
    if all((g.get("_spec") or {}).get("unified_memory") for g in gpus):
        ctx.skip("the GPUs are APUs (%s): CPU and GPU share the same HBM, so system RAM "
                 "is not separate from GPU memory" % gpus[0].get("model"))
        return
    mems = [g.get("memory_mb") for g in gpus]
    vram = None if None in mems else sum(mems)
    if ram is None or vram is None:
        ctx.report("warn", _gib(ram), "> %s" % _gib(vram),
                   "cannot verify: %s unknown" % _unknown_memory(ram, gpus),
                   "declare memory.total_mb and the GPU model or memory_mb")
        return
    lo, rec = ctx.th["ram_to_vram_min"], ctx.th["ram_to_vram_recommended"]
    if ram <= vram * lo:
        ctx.report("fail", _gib(ram), "> %s" % _gib(vram * lo),
                   "system RAM %s is not more than the GPUs' %s: pinned buffers, dataset caching and "
                   "checkpoint staging will swap" % (_gib(ram), _gib(vram)),
                   "install at least %s of RAM (%s recommended)" % (_gib(vram * lo), _gib(vram * rec)))
    elif ram < vram * rec:
        ctx.report("warn", _gib(ram), ">= %s (%gx GPU memory)" % (_gib(vram * rec), rec),
                   "system RAM %s is %.2fx the GPUs' %s, below the recommended %gx"
                   % (_gib(ram), ram / float(vram), _gib(vram), rec),
                   "add RAM to reach %s" % _gib(vram * rec))
    else:
        ctx.report("pass", _gib(ram), ">= %s" % _gib(vram * rec),
                   "system RAM %s is %.1fx GPU memory %s" % (_gib(ram), ram / float(vram), _gib(vram)))


@rule("memory.ecc", "ECC memory", "error",
      doc="ECC memory (dmidecode \"Multi-bit ECC\" or \"Single-bit ECC\"; \"None\" fails); unknown = warning")
def _check_ecc(ctx):
    ecc = ctx.hw["memory"].get("ecc")
    if ecc in ("multi-bit", "single-bit"):
        ctx.report("pass", ecc, "multi-bit or single-bit ECC", "memory reports %s ECC" % ecc)
    elif ecc == "none":
        ctx.report("fail", "none", "ECC", "the memory has no ECC: bit flips silently corrupt "
                   "week-long runs and checkpoints", "use registered ECC DIMMs on a platform that supports them")
    else:
        ctx.report("warn", ecc or "unknown", "ECC",
                   "cannot verify ECC: dmidecode type 16 not available (not root, a VM, or not declared)",
                   "run the preflight with become: true on the real host, or declare memory.ecc")


@rule("memory.edac_active", "an EDAC driver reports memory errors", "warning",
      doc="an EDAC memory-controller driver is loaded where ECC DIMMs exist (otherwise errors go unseen)")
def _check_edac(ctx):
    ecc = ctx.hw["memory"].get("ecc")
    edac = ctx.hw["memory"].get("edac")
    if ctx.hw["source"] == "declared":
        ctx.skip("EDAC drivers are only known once the host is gathered")
    elif ecc not in ("multi-bit", "single-bit") and edac:
        ctx.report("pass", edac.get("driver"), "an EDAC driver",
                   "EDAC driver %s active" % edac.get("driver"))
    elif ecc not in ("multi-bit", "single-bit"):
        ctx.report("warn", "no EDAC", "an EDAC driver where ECC DIMMs exist",
                   "memory error reporting state is unknown (no ECC reported and no EDAC memory controller)",
                   "apply the ecc_monitor role; on bare metal with ECC DIMMs load the platform EDAC driver")
    elif edac and (edac.get("controllers") or 0) > 0:
        ctx.report("pass", edac.get("driver"), "an EDAC driver",
                   "EDAC driver %s reports %s memory controller(s)" % (edac.get("driver"), edac.get("controllers")))
    else:
        ctx.report("fail", "none loaded", "an EDAC memory-controller driver",
                   "ECC DIMMs are installed but no EDAC driver is loaded: corrected errors go unseen until "
                   "they become uncorrected", "apply the dlrack.node.ecc_monitor role (loads i10nm_edac/skx_edac/"
                   "amd64_edac and rasdaemon)")


_ECC_LEVEL = {"error": "fail", "warning": "warn", "info": "pass"}


@rule("memory.ecc_errors", "no uncorrected memory errors; corrected errors within budget", "error",
      doc="no uncorrected memory errors; corrected errors within `ecc_corrected_budget_24h` "
          "({ecc_corrected_budget_24h} per 24 h)")
def _check_ecc_errors(ctx):
    """Memory error counts, judged by the ECC policy the node collector uses (ecc_policy)."""
    edac = ctx.hw["memory"].get("edac")
    if ctx.hw["source"] == "declared":
        ctx.skip("error counters are only known once the host is gathered")
        return
    if not edac:
        ctx.skip("no EDAC counters (see memory.edac_active)")
        return
    for f in assess_ecc(edac, uptime_s=ctx.hw.get("uptime_s"), budget_24h=ctx.th["ecc_corrected_budget_24h"]):
        ctx.report(_ECC_LEVEL[f["severity"]], f["observed"], f["required"], f["message"],
                   f["remedy"])


def _numa_label(node):
    return "node %s (CPUs %s)" % (node.get("id"), node.get("cpus"))


@rule("memory.numa_balanced", "every NUMA node with CPUs has its share of the memory", "error",
      doc="every NUMA node with CPUs has memory (a CPU node without any, e.g. a socket without DIMMs, fails); "
          "the smallest has >= `numa_memory_balance_pct` ({numa_memory_balance_pct} %) of the largest, else a "
          "warning (DIMMs missing or disabled); CPU-less nodes (GPU or CXL memory) are not judged")
def _check_numa_memory(ctx):
    """Each NUMA node with CPUs should hold its share of the memory: a CPU node without memory makes
    every allocation of its threads (the dataloaders and pinned buffers of the GPUs attached to it)
    remote (Linux Documentation/mm/numa.rst, "memoryless nodes"); an uneven split means DIMMs
    missing or disabled on one socket or channel group, which caps that node's memory bandwidth."""
    nodes = ctx.hw["cpu"].get("numa_nodes")
    if not nodes:
        ctx.skip("the NUMA layout is only known once the host is gathered (or declared in cpu.numa_nodes)"
                 if ctx.hw["source"] == "declared" else "no NUMA layout gathered (no /sys/devices/system/node)")
        return
    cpu_nodes = [n for n in nodes if n.get("cpus")]
    unknown = [_numa_label(n) for n in cpu_nodes if n.get("memory_mb") is None]
    pct = ctx.th["numa_memory_balance_pct"]
    if not cpu_nodes or unknown:
        ctx.report("warn", "unknown", "memory on every NUMA node with CPUs",
                   "cannot verify the NUMA memory: %s" % ("memory unknown on " + ", ".join(unknown[:8]) if unknown
                                                          else "no NUMA node lists its CPUs"),
                   "gather the host again (the node's meminfo under /sys/devices/system/node was not readable), "
                   "or declare cpu.numa_nodes with cpus and memory_mb")
        return
    empty = [n for n in cpu_nodes if not n["memory_mb"]]
    sizes = [n["memory_mb"] for n in cpu_nodes]
    if empty:
        ctx.report("fail", "no memory on " + ", ".join(_numa_label(n) for n in empty[:8]),
                   "memory on every NUMA node with CPUs",
                   "%d of %d NUMA nodes with CPUs %s no memory (%s): every allocation of their threads, and of "
                   "the GPUs attached to them, goes across the socket interconnect"
                   % (len(empty), len(cpu_nodes), "has" if len(empty) == 1 else "have",
                      ", ".join(_numa_label(n) for n in empty[:8])),
                   "populate the memory channels of that socket (dmidecode -t 17 lists the empty slots; a DIMM the "
                   "BIOS disabled after errors shows in the BMC event log)")
        return
    low, high = min(sizes), max(sizes)
    share = 100.0 * low / high
    observed = "%s to %s per node (smallest %.1f %% of largest)" % (_gib(low), _gib(high), share)
    if len(cpu_nodes) == 1:
        ctx.report("pass", _gib(low), "memory on every NUMA node with CPUs",
                   "one NUMA node with CPUs (%s): nothing to balance" % _gib(low))
    elif share < pct:
        small = ", ".join(_numa_label(n) for n in cpu_nodes if n["memory_mb"] < high * pct / 100.0)
        ctx.report("warn", observed, ">= %g %% of the largest node" % pct,
                   "NUMA memory is unbalanced: %s %s less than %g %% of the largest node's %s; threads there run "
                   "out of local memory first and the node has less memory bandwidth"
                   % (small, "has" if "," not in small else "have", pct, _gib(high)),
                   "populate every socket's memory channels alike (same DIMM count and size; dmidecode -t 17 lists "
                   "empty slots, the BMC event log DIMMs disabled after errors), or lower dlrack_thresholds."
                   "numa_memory_balance_pct for a build that is uneven on purpose")
    else:
        ctx.report("pass", observed, ">= %g %% of the largest node" % pct,
                   "%d NUMA nodes with CPUs hold %s to %s of memory each" % (len(cpu_nodes), _gib(low), _gib(high)))


_IMAGE_FS = ("squashfs", "iso9660", "erofs", "udf", "cramfs")


_ROLES = {"system": "system disk", "read_only": "read-only", "small": "small", "removable": "removable"}


def _not_data_disk(disk, min_bytes):
    """Why a disk is not a local data disk, or None when it is one. The node's one rule
    (``blockdev.disk_role``: system, read-only, small, removable) decides, taken from hw_facts'
    ``role`` when gathered and applied to declared entries the same way; on top of it the
    controller excludes read-only images by signature, disks below the ``min_data_disk_gb``
    threshold and disks of unknown kind."""
    in_use = disk.get("in_use") or {}
    image = [s.split(":")[-1] for s in in_use.get("signatures") or [] if s.split(":")[-1] in _IMAGE_FS]
    role = disk.get("role") or blockdev.disk_role(disk)
    if role == "system":
        return "system disk"
    if role == "read_only" or image:
        return "read-only%s" % (" " + image[0] if image else "")
    size = disk.get("size_bytes")
    if size is not None and size < min_bytes:
        return "%.1f GB, below %g GB" % (size / 1e9, min_bytes / 1e9)
    if role == "removable" or disk.get("role") in _ROLES:
        # a declared entry's size is judged by the threshold above only (declarations may
        # describe small disks on purpose); hw_facts' own "small" verdict stands
        return _ROLES[disk.get("role") or role]
    if disk.get("kind") is None and disk.get("transport") != "virtio":
        return "kind unknown"
    return None


def classify_disks(hw, min_gb):
    """THE classification of local data disks, used by both storage rules and the declaration check.

    Returns ``{"nvme": [...], "ssd": [...], "hdd": [...], "virtual": [...], "excluded": [(disk, why)]}``:
    the system disk, read-only devices and images (a squashfs holding the driver), removable
    media, devices below ``min_gb`` and disks of unknown kind are excluded; virtio disks are
    "virtual" (the medium behind the hypervisor is unknown: rotational=1 there means nothing)."""
    out = {"nvme": [], "ssd": [], "hdd": [], "virtual": [], "excluded": []}
    verdicts = {}       # identical declared disks share one entry: judge it once
    for disk in hw["disks"] or []:
        verdict = verdicts.get(id(disk))
        if verdict is None:
            why = _not_data_disk(disk, min_gb * 1e9)
            if why:
                verdict = verdicts[id(disk)] = ("excluded", why)
            elif disk.get("transport") == "virtio" and disk.get("kind") != "nvme":
                verdict = verdicts[id(disk)] = ("virtual", None)
            else:
                verdict = verdicts[id(disk)] = (disk["kind"], None)
        out[verdict[0]].append((disk, verdict[1]) if verdict[1] else disk)
    return out


def _excluded_text(excluded):
    return "; ".join("%s: %s" % (d.get("name") or d.get("kind") or "disk", why) for d, why in excluded[:8])


@rule("storage.nvme_hot_cache", "NVMe for the hot training-data cache", "error",
      doc="at least one data NVMe (not the system disk) for the hot training-data cache; SATA/HDD as hot tier "
          "is a warning")
def _check_hot_cache(ctx):
    if ctx.hw["disks"] is None:
        ctx.report("warn", None, ">= 1 NVMe", "disks are not declared",
                   "declare dlrack_hw.disks")
        return
    disks = ctx.disks()
    others = [(len(disks[k]), label) for k, label in
              (("ssd", "SATA/SAS SSD"), ("hdd", "HDD"), ("virtual", "virtual disk(s)")) if disks[k]]
    system_nvme = [d for d, why in disks["excluded"] if d.get("kind") == "nvme" and why == "system disk"]
    if disks["nvme"]:
        ctx.report("pass", "%d NVMe" % len(disks["nvme"]), ">= 1 NVMe (not the system disk)",
                   "%d NVMe device(s) for the hot cache" % len(disks["nvme"]))
    elif others or system_nvme:
        what = ", ".join("%d %s" % o for o in others) + ", no data NVMe" if others else "only the system NVMe"
        ctx.report("warn", what, ">= 1 NVMe (not the system disk)",
                   "no data NVMe: the hot training-data cache would sit on %s; the GPUs will wait for data"
                   % ("SATA/HDD or virtual disks" if others else "the system disk"), "add NVMe drives for the hot tier")
    else:
        ctx.report("fail", "no data disk" + (
                   " (%s)" % _excluded_text(disks["excluded"]) if disks["excluded"] else ""), ">= 1 NVMe",
                   "no local data disk at all", "add NVMe drives for the hot training-data cache")


@rule("storage.hdd_cold_archive", "an HDD array or external archive for cold data", "warning",
      doc="an HDD array (or a declared external archive, `dlrack_external_archive`) for cold data")
def _check_cold_archive(ctx):
    if ctx.hw["disks"] is None and not ctx.archive:
        ctx.report("warn", None, "an HDD array", "disks are not declared",
                   "declare dlrack_hw.disks or dlrack_external_archive")
        return
    hdds = ctx.disks()["hdd"]
    if hdds:
        ctx.report("pass", "%d HDD" % len(hdds), "an HDD array",
                   "%d HDD(s) for the cold archive" % len(hdds))
    elif ctx.archive:
        ctx.report("pass", "external: %s" % ctx.archive, "an HDD array or archive",
                   "cold data goes to the external archive %s" % ctx.archive)
    else:
        ctx.report("fail", "no HDD", "an HDD array or dlrack_external_archive",
                   "no HDD array and no external archive declared for raw datasets, weights and logs",
                   "add an HDD array (RAID6) or set dlrack_external_archive to the NFS/S3 target")


def _workload_estimate(th, kind, params_b, n_gpus):
    """(GB for the whole job, GB per GPU, sharded?) for ``kind`` of ``params_b`` billion parameters."""
    bpp = th["workload_bytes_per_param"].get(kind, 16)
    need_gb = params_b * bpp * th["workload_overhead"]  # 1e9 params * bytes = GB
    sharded = kind in ("full_finetune", "pretrain", "inference")
    return bpp, need_gb, (need_gb / n_gpus if sharded else need_gb), sharded


def _workload_problems(th, kind, params_b, gpus, min_gb):
    bpp, need_gb, per_gpu_need, sharded = _workload_estimate(th, kind, params_b, len(gpus))
    problems = []
    if kind in ("full_finetune", "pretrain") and params_b >= th["large_model_params_b"] \
            and min_gb < th["large_model_min_vram_gb"] - 0.5:
        problems.append("full-parameter training of a %gB model needs GPUs with >= %g GB each (smallest has %.0f GB)"
                        % (params_b, th["large_model_min_vram_gb"], min_gb))
    if per_gpu_need > min_gb:
        problems.append("the estimate for %s of %gB parameters is %.0f GB (%g bytes/param x %g)%s = %.0f GB per "
                        "GPU, more than the %.0f GB each GPU has"
                        % (kind, params_b, need_gb, bpp, th["workload_overhead"],
                           " sharded over %d GPUs" % len(gpus) if sharded else "", per_gpu_need, min_gb))
    return per_gpu_need, problems


@rule("gpu.vram_for_workload", "GPU memory fits the declared workload", "error",
      doc="full-parameter training of models >= {large_model_params_b}B (`large_model_params_b`) needs >= "
          "{large_model_min_vram_gb} GB per GPU (`large_model_min_vram_gb`); the memory estimate for the "
          "declared workload must fit")
def _check_workload(ctx):
    gpus = ctx.hw["gpus"] or []
    workload = ctx.workload
    if not workload or not workload.get("model_params_b"):
        ctx.skip("no workload declared (dlrack_hw.workload or dlrack_workload)")
        return
    if not gpus:
        ctx.report("fail", "no GPU", "GPUs", "a workload is declared but there is no GPU",
                   "declare or install GPUs")
        return
    if any(g.get("memory_mb") is None for g in gpus):
        ctx.report("warn", None, None, "cannot verify: GPU memory unknown",
                   "declare the GPU model or memory_mb")
        return
    kind = workload.get("kind") or "full_finetune"
    params_b = float(workload["model_params_b"])
    min_gb = min(g["memory_mb"] for g in gpus) / 1024.0
    per_gpu_need, problems = _workload_problems(ctx.th, kind, params_b, gpus, min_gb)
    observed = "%d x %.0f GB" % (len(gpus), min_gb)
    required = "%.0f GB per GPU for %s %gB" % (per_gpu_need, kind, params_b)
    if problems:
        ctx.report("fail", observed, required, "; ".join(problems),
                   "use 80 GB-class GPUs (A100/H100 80GB, H200), more GPUs to shard over, or LoRA instead of "
                   "full fine-tuning")
    else:
        ctx.report("pass", observed, required,
                   "%s of %gB fits: %.0f GB per GPU needed, %.0f GB available" % (kind, params_b, per_gpu_need, min_gb))


@rule("gpu.interconnect", "NVLink/NVSwitch between GPUs of a multi-GPU node", "warning",
      doc="multi-GPU training nodes should have NVLink/NVSwitch (AMD: Infinity Fabric/XGMI)")
def _check_interconnect(ctx):
    gpus = ctx.hw["gpus"] or []
    if len(gpus) < 2:
        ctx.skip("fewer than 2 GPUs")
        return
    # AMD Instinct: Infinity Fabric (XGMI) links satisfy the rule as NVLink does (issue 21)
    name, want = gpu_seam.wording(gpus, "link")
    active = [_links_active(g) for g in gpus]
    capable = all(_link_capable(g.get("_spec") or {}) for g in gpus)
    if all(active):
        ctx.report("pass", "%s (%d links on GPU0)" % (name, active[0]), want,
                   "all %d GPUs have active %s" % (len(gpus), name))
    elif all(a is None for a in active) and capable:
        ctx.report("pass", "%s-capable model" % name, want,
                   gpu_seam.wording(gpus, "link_capable") % gpus[0].get("model"))
    elif all(a is None for a in active) and not all(g.get("model") for g in gpus):
        ctx.report("warn", "unknown", want,
                   gpu_seam.wording(gpus, "link_unknown"), gpu_seam.wording(gpus, "link_unknown_remedy"))
    else:
        if all(a is None for a in active):
            observed = "no %s (model %s)" % (name, gpus[0].get("model"))
        elif any(active):
            observed = "%s on %d of %d GPUs" % (name, sum(1 for a in active if a), len(gpus))
        else:
            observed = "PCIe only"
        ctx.report("fail", observed, want,
                   "%d GPUs talk over PCIe: gradient all-reduce for multi-GPU training will be bandwidth bound"
                   % len(gpus), gpu_seam.wording(gpus, "link_remedy"))


def _node_versions(ctx):
    """The node's dlrack_hw.versions (issue 33), or None: a document without it (declared hosts,
    older facts) gets no outcome of the version rules at all, as before they existed."""
    versions = ctx.hw.get("versions")
    return versions if isinstance(versions, dict) else None


def _version_set(gpus, key):
    return sorted(set(str(g.get(key)) for g in gpus if isinstance(g, dict) and g.get(key)))


@rule("versions.node_stack", "one GPU driver and one VBIOS per node; Fabric Manager equals the driver", "error",
      doc="every GPU of a node reports the same driver and the same VBIOS version (`dlrack_hw.versions.gpus`: GPUs of "
          "one node on different VBIOS versions are a service case), and where Fabric Manager is installed its version "
          "equals the GPU driver's exactly (otherwise it does not start and NVSwitch GPUs stay unusable)", shadow=True)
def _check_node_stack(ctx):
    versions = _node_versions(ctx)
    if versions is None:
        return
    gpus = versions.get("gpus") if isinstance(versions.get("gpus"), list) else []
    drivers, vbios = _version_set(gpus, "driver"), _version_set(gpus, "vbios")
    fm, driver = versions.get("fabric_manager"), versions.get("gpu_driver")
    held = []
    if len(drivers) > 1 or len(vbios) > 1:
        mixed = ["driver %s" % ", ".join(drivers)] if len(drivers) > 1 else []
        if len(vbios) > 1:
            mixed.append("VBIOS %s (%s)" % (", ".join(vbios), ", ".join(
                "%s %s" % (g.get("pci_bus_id"), g.get("vbios")) for g in gpus if isinstance(g, dict))[:400]))
        ctx.report("fail", "; ".join(mixed), "one driver and one VBIOS on every GPU",
                   "the GPUs of %s run different versions: %s" % (ctx.name, "; ".join(mixed)),
                   "flash every GPU of the node to one VBIOS (the vendor's firmware update package for the "
                   "board, then a cold reboot) and load one driver; open a service case if a GPU will not take it")
    elif vbios:
        held.append("all %d GPUs run one driver and VBIOS %s" % (len(gpus), vbios[0]))
    if fm and not driver:
        ctx.report("warn", fm, "the GPU driver's version", "cannot verify Fabric Manager %s: the GPU driver's "
                   "version was not read" % fm, "load the GPU driver and gather again")
    elif fm and fm != driver:
        ctx.report("fail", "Fabric Manager %s" % fm, "Fabric Manager %s" % driver,
                   "Fabric Manager %s is not the GPU driver's version %s: it refuses to start and the NVSwitch GPUs "
                   "stay unusable" % (fm, driver),
                   "install the Fabric Manager package of exactly driver %s (or the driver of Fabric Manager's "
                   "version), then restart the fabric manager service" % driver)
    elif fm:
        held.append("Fabric Manager %s equals the GPU driver" % fm)
    if any(f["rule"] == ctx.rule for f in ctx.findings):
        return
    if held:
        ctx.report("pass", "; ".join(held), "one driver and one VBIOS; Fabric Manager = driver",
                   "; ".join(held) + ("" if fm else " (no Fabric Manager installed: needed only on NVSwitch systems)"))
    else:
        ctx.skip("the GPUs' driver and VBIOS versions were not read (no GPU tool, or it failed) and no Fabric "
                 "Manager is installed")


@rule("gpu.ecc_mode", "GPU ECC enabled where supported", "warning",
      doc="GPU ECC enabled where the card supports it")
def _check_gpu_ecc(ctx):
    gpus = ctx.hw["gpus"] or []
    off = ["GPU%s" % g.get("index") for g in gpus
           if g.get("ecc_enabled") is False and (g.get("_spec") or {}).get("ecc") is not False]
    if not gpus:
        ctx.skip("no GPUs")
    elif off:
        ctx.report("fail", "disabled on " + ", ".join(off), "enabled",
                   "GPU ECC is disabled on %s although the card supports it" % ", ".join(off),
                   gpu_seam.wording(gpus, "ecc_remedy"))
    elif any(g.get("ecc_enabled") is None for g in gpus):
        ctx.skip(gpu_seam.wording(gpus, "ecc_unknown"))
    else:
        ctx.report("pass", "enabled", "enabled", "ECC enabled on all GPUs that support it")


# GPU faults over time (issue 29): the kernel log's Xid/SXid/amdgpu events judged per GPU by the node
# (module_utils/gpu_faults) and the counters beside them, in dlrack_hw.gpu_faults (gathered only).
_FAULT_REMEDY = {
    "reset_gpu": gpu_seam.nvidia.WORDING["reset_remedy"],
    "reboot": "drain the node and reboot it (a GPU off the bus or a fabric fault does not come back without one); "
              "if it happens again after the reboot, reseat the GPU/riser and check its power, then service it",
    "service": "the same hardware fault survived a reboot: drain the node and open a service case for the GPU "
               "(run the vendor's field diagnostics; RMA criteria: NVIDIA's memory error management guide)",
}
_FAULT_RULE_TEXT = {
    "gpu.xid": ("GPU fault events (Xid, amdgpu RAS)", "no Xid/amdgpu event in this boot calls for a reset, reboot or service"),
    "gpu.nvlink_errors": ("NVLink/NVSwitch faults", "no NVLink Xid or NVSwitch SXid calls for action and the NVLink error counters do not grow"),
    "gpu.pcie_replays": ("PCIe replays", "the PCIe replay counters grow slower than the limit"),
    "gpu.lost": ("GPUs lost", "every GPU on the bus answers its driver; no GPU fell off the bus in this boot"),
}


def _check_gpu_faults(ctx, rule_id):
    faults = ctx.hw.get("gpu_faults")
    if not isinstance(faults, dict):
        return                  # older facts and declared racks: no outcome, as before the rule existed
    what, ok = _FAULT_RULE_TEXT[rule_id]

    def of(value, kind):         # a node's field of another shape (another version, hand-edited facts) is empty here
        return value if isinstance(value, kind) else kind()

    counters = of(faults.get("counters"), dict)
    failing, worst = [], "reset_gpu"
    ranks = ("none", "check_workload", "reset_gpu", "reboot", "service")
    for bus, gpu in sorted(of(faults.get("gpus"), dict).items(), key=lambda item: str(item[0])):
        if not isinstance(gpu, dict) or rule_id not in of(gpu.get("rules"), list):
            continue
        codes = ", ".join("%s x%s" % (c.get("code"), c.get("count")) for c in of(gpu.get("codes"), list)[:6] if isinstance(c, dict))
        failing.append("%s (%s: %s)" % (bus, gpu.get("action"), codes))
        if gpu.get("action") in ranks and ranks.index(gpu["action"]) > ranks.index(worst):
            worst = gpu["action"]
    for bus, rules in sorted(of(counters.get("by_gpu"), dict).items(), key=lambda item: str(item[0])):
        if isinstance(rules, list) and rule_id in rules:
            failing.append("%s (counters)" % bus)
    notes = [str(n) for n in of(counters.get("notes"), list) if isinstance(n, str)][:5]
    if rule_id == "gpu.pcie_replays" and counters.get("interval_s") is None and not failing:
        ctx.skip("the PCIe replay rate needs two reads (the ECC collector keeps the previous one)")
    elif failing:
        ctx.report("fail", "; ".join(failing)[:600], ok,
                   "%s on %s: %s%s" % (what, ctx.name, "; ".join(failing)[:600], (" (" + "; ".join(notes)[:300] + ")") if notes else ""),
                   _FAULT_REMEDY.get(worst, _FAULT_REMEDY["reset_gpu"]) if rule_id != "gpu.pcie_replays" else
                   "reseat the GPU and its riser or cable, check the slot's PCIe generation in the BIOS; service the GPU or "
                   "the board if the replays keep growing")
    else:
        workload = ", ".join(str(w) for w in of(faults.get("workload"), list)[:5])
        ctx.report("pass", "%s event(s)%s" % (faults.get("events_total", 0), "; workload: " + workload if workload else ""), ok,
                   "%s: %s (catalog %s)" % (what, ok, faults.get("catalog_version")))


@rule("gpu.xid", "no GPU fault event (Xid, amdgpu RAS) calls for a reset, reboot or service", "error",
      doc="the kernel log's Xid and amdgpu events, judged per GPU over time (module_utils/gpu_faults: NVIDIA's Xid "
          "catalog, bursts as one event, an application code on most GPUs at once = the workload, a repeat on one GPU = "
          "hardware, the same hardware code after a reboot = service), and remapped rows pending/failed", shadow=True)
def _check_gpu_xid(ctx):
    _check_gpu_faults(ctx, "gpu.xid")


@rule("gpu.nvlink_errors", "no NVLink fault: Xid/SXid events and NVLink error counters", "error",
      doc="NVLink Xids (74, 144-150, ...), NVSwitch SXids calling for action, and NVLink CRC/replay/recovery "
          "counters growing between two reads", shadow=True)
def _check_gpu_nvlink_errors(ctx):
    _check_gpu_faults(ctx, "gpu.nvlink_errors")


@rule("gpu.pcie_replays", "the PCIe replay counter grows slowly", "warning",
      doc="each GPU's PCIe replay counter grows by at most 100 per hour between two reads", shadow=True)
def _check_gpu_pcie_replays(ctx):
    _check_gpu_faults(ctx, "gpu.pcie_replays")


@rule("gpu.lost", "no GPU fell off the bus or stopped answering its driver", "error",
      doc="no Xid 79 / 'fallen off the bus' in this boot, and every GPU on the PCI bus answers nvidia-smi", shadow=True)
def _check_gpu_lost(ctx):
    _check_gpu_faults(ctx, "gpu.lost")


# The platform around the GPUs, hop by hop (issue 32): the checks live in plugin_utils/platform.py.

@rule("pcie.path_link", "every hop of each GPU/NIC/NVMe path at the lower of its two ends' limits", "error",
      doc="each GPU, NIC and NVMe judged at every hop up to its root port (dlrack_hw.pcie): a link narrower or slower "
          "than the lower of its two ends' capabilities, or an x16 device behind a narrower switch uplink, fails (a Gen4 "
          "NIC in a Gen5 port is not downgraded; an idle GPU's own 2.5 GT/s is not a fault); a VM's flat tree = warning "
          "\"cannot verify\"", shadow=True)
def _check_pcie_path(ctx):
    platform.check_path_link(ctx)


@rule("pcie.acs_p2p", "no ACS redirect on GPU-GPU and GPU-NIC peer paths", "error",
      doc="ACS request/completion redirect or egress control on a switch port of a GPU-GPU or GPU-NIC path (PIX/PXB) "
          "fails, naming the pair and the port; ports elsewhere are not judged; unreadable config space = warning",
      shadow=True)
def _check_pcie_acs(ctx):
    platform.check_acs(ctx)


@rule("pcie.switch_oversubscription", "PCIe switches within the downstream-to-uplink lane ratio", "warning",
      doc="per PCIe switch on a device path: downstream lanes / uplink lanes <= {pcie_switch_oversubscription_max} "
          "(`pcie_switch_oversubscription_max`)", shadow=True)
def _check_pcie_switches(ctx):
    platform.check_switches(ctx)


@rule("pcie.lane_budget", "root-port lanes of GPUs, NICs and NVMe within each socket's CPU lanes", "error",
      doc="the lanes of the root ports that feed GPUs, NICs and NVMe, per socket (NUMA node), within the CPU's lanes "
          "per socket (catalogue or declared `dlrack_hw.cpu.pcie_lanes`); unknown lanes = warning", shadow=True)
def _check_pcie_lanes(ctx):
    platform.check_lane_budget(ctx)


@rule("pcie.bar1", "each GPU's BAR1 covers its memory", "error",
      doc="each GPU's BAR1 (its largest memory BAR, from sysfs `resource` or lspci) >= its memory (Above 4G Decoding "
          "and Resizable BAR); unknown = warning", shadow=True)
def _check_pcie_bar1(ctx):
    platform.check_bar1(ctx)


@rule("pcie.iommu", "IOMMU off or in passthrough for GPUDirect", "warning",
      doc="IOMMU mode from /sys/kernel/iommu_groups, /sys/class/iommu and the kernel command line: off or passthrough "
          "pass, translated fails (GPUDirect RDMA/P2P need ATS or go through the root complex), unknown = warning",
      shadow=True)
def _check_pcie_iommu(ctx):
    platform.check_iommu(ctx)


@rule("fabric.nic_affinity", "each GPU has an RDMA NIC on its own socket", "warning",
      doc="each GPU's nearest RDMA NIC by the `nvidia-smi topo -m` legend (PIX, PXB, PHB, NODE, SYS) computed from "
          "the PCIe tree; SYS (only across the socket interconnect) fails", shadow=True)
def _check_fabric_affinity(ctx):
    platform.check_nic_affinity(ctx)


@rule("fabric.rail_alignment", "one RDMA NIC per GPU at PXB or closer on rail-optimized nodes", "error",
      doc="on a node declared `fabric.rail_optimized: true`: every GPU has its own RDMA NIC at PXB or closer",
      shadow=True)
def _check_fabric_rails(ctx):
    platform.check_rail_alignment(ctx)


@rule("pcie.matches_declared", "the gathered PCIe topology equals the declared one", "error",
      doc="each GPU, NIC and NVMe of a declared `pcie` tree is gathered at its address with its kind, at least its "
          "declared link capabilities, and the same topo legend to every other declared GPU/NIC", shadow=True)
def _check_pcie_declared(ctx):
    platform.check_matches_declared(ctx)


@rule("fabric.ib_ports", "RDMA ports ACTIVE at the declared rate, width, firmware and P_Keys", "error",
      doc="each InfiniBand/RoCE port of /sys/class/infiniband against `fabric.ports` of the declaration (state, "
          "rate_gbps, width, fw, link_layer, pkeys); without a declaration a port that is not ACTIVE is a warning",
      shadow=True)
def _check_fabric_ports(ctx):
    platform.check_ib_ports(ctx)


@rule("fabric.ib_errors", "no RDMA link errors growing during the run", "error",
      doc="symbol errors, link downed and excessive buffer overruns of each RDMA port, read twice in one run (>= 0.5 s "
          "apart): any growth fails; totals from before the run are shown, not judged", shadow=True)
def _check_fabric_errors(ctx):
    platform.check_ib_errors(ctx)


@rule("power.psu_capacity", "the PSUs carry the GPUs' power limits and the CPUs' TDP", "error",
      doc="usable PSU capacity (SMBIOS type 39 or declared `power.psus`; N+1: the largest PSU left out when 2 or more) "
          ">= the GPUs' power limits (NVML) + the CPUs' TDP (catalogue); a PSU reporting 0 W or Unknown, or no table = "
          "warning \"cannot verify\"", shadow=True)
def _check_power_psus(ctx):
    platform.check_psu_capacity(ctx)


@rule("power.gpu_caps", "no GPU power-capped below its default", "warning",
      doc="each GPU's enforced power limit equals its default (a cap below it is reported)", shadow=True)
def _check_power_caps(ctx):
    platform.check_power_caps(ctx)


def _norm_model(name, kind):
    spec = _lookup(kind, name) if name else None
    return (spec or {}).get("model") or (name or "").strip().lower()


def _disk_diffs(declared, gathered, min_gb):
    """Declared disk counts per kind vs the gathered data disks (or all disks of that kind)."""
    dk, gk = classify_disks(declared, 0), classify_disks(gathered, min_gb)
    diffs = []
    for kind in ("nvme", "hdd"):
        gathered_all = len(gk[kind]) + sum(1 for d, dummy in gk["excluded"] if d.get("kind") == kind)
        if len(dk[kind]) not in (len(gk[kind]), gathered_all):
            diffs.append(("disks.%s" % kind, len(dk[kind]), len(gk[kind])))
    return diffs


def compare_declared(declared, gathered, th):
    """Differences between a declaration and gathered facts: list of (field, declared, gathered)."""
    diffs = []
    dg, gg = declared["gpus"] or [], gathered["gpus"] or []
    if declared["gpus"] is not None and len(dg) != len(gg):
        diffs.append(("gpus.count", len(dg), len(gg)))
    dmodels = set(_norm_model(g.get("model"), "gpu") for g in dg if g.get("model"))
    gmodels = set(_norm_model(g.get("model"), "gpu") for g in gg if g.get("model"))
    if dmodels and gmodels and dmodels != gmodels:
        diffs.append(("gpus.model", ", ".join(sorted(dmodels)), ", ".join(sorted(gmodels))))
    dcpu, gcpu = declared["cpu"], gathered["cpu"]
    if dcpu.get("model") and gcpu.get("model") and _norm_model(dcpu["model"], "cpu") != _norm_model(gcpu["model"], "cpu"):
        diffs.append(("cpu.model", dcpu["model"], gcpu["model"]))
    if dcpu.get("sockets") and gcpu.get("sockets") and dcpu["sockets"] != gcpu["sockets"]:
        diffs.append(("cpu.sockets", dcpu["sockets"], gcpu["sockets"]))
    dram, gram = declared["memory"].get("total_mb"), gathered["memory"].get("total_mb")
    if dram and gram and abs(gram - dram) > dram * th["ram_match_tolerance_pct"] / 100.0:
        diffs.append(("memory.total_mb", dram, gram))
    if declared["disks"] is not None:
        diffs.extend(_disk_diffs(declared, gathered, th["data_disk_min_gb"]))
    return diffs


@rule("inventory.matches_declared", "gathered hardware equals the declaration", "error",
      doc="gathered hardware equals what the inventory declares (GPU count/model, CPU, RAM within "
          "`ram_match_tolerance_pct` ({ram_match_tolerance_pct} %), disks)")
def _check_matches_declared(ctx):
    if ctx.declared is None or ctx.hw["source"] != "gathered":
        return
    dclean, dproblems = check_hw(ctx.declared, strict=True)
    if dclean is None or dproblems:
        ctx.report("warn", None, None,
                   "the declaration of %s is malformed: %s" % (ctx.name, "; ".join(p.message() for p in dproblems)),
                   "fix dlrack_hw in the inventory")
        return
    diffs = compare_declared(dclean, ctx.hw, ctx.th)
    for field, want, got in diffs:
        # a declaration that counted MI250X packages where the kernel lists GCDs (plugin_utils/gpu_packages.py)
        hint = gpu_packages.package_count_hint(dclean["gpus"], ctx.hw["gpus"]) if field == "gpus.count" else None
        ctx.report("fail", got, want, "%s: declared %s, gathered %s" % (field, want, got),
                   hint or "fix the hardware (wrong part delivered or failed component) or the declaration")
    if not diffs:
        ctx.report("pass", "matches", "declared", "gathered hardware matches the declaration")


RULES = tuple((r.id, r.title) for r in _REGISTRY)
RULE_IDS = tuple(r.id for r in _REGISTRY)
_DEFAULT_SEVERITY = dict((r.id, r.severity) for r in _REGISTRY)
_SHADOW_RULES = tuple(r.id for r in _REGISTRY if r.shadow)
_RULE_BY_ID = dict((r.id, r) for r in _REGISTRY)


def registry():
    """The rules in evaluation and report order (read-only ``Rule`` objects)."""
    return tuple(_REGISTRY)


# --------------------------------------------------------------------------------------------
# Engine
# --------------------------------------------------------------------------------------------

def _prepare(ctx, hw):
    """Validate the document; record schema problems with their remedies. False: nothing to judge."""
    name = ctx.name
    if hw is None:
        ctx.problems.append((Problem("(document)", None, "a hardware description"),
                             "declare dlrack_hw (source: declared) in the inventory, or let the preflight gather it "
                             "(the host must be reachable)"))
        return False
    clean, problems = check_hw(hw)
    if clean is None:
        ctx.problems.extend((p, "fix dlrack_hw in the inventory of %s" % name) for p in problems)
        return False
    ctx.problems.extend((p, "fix dlrack_hw.%s for %s (the field is treated as unknown until then)" % (p.path, name))
                        for p in problems)
    ctx.hw = clean
    # declared entries of a multi-GCD model (MI250X) that count packages (plugin_utils/gpu_packages.py)
    count_problems, count_warnings = gpu_packages.declared_count_problems(clean, name)
    ctx.problems.extend(count_problems)
    ctx.findings.extend(gpu_packages.warning_findings(count_warnings))
    ctx.notes = _enrich(clean)
    return True


def _settings_problems(ctx, problems):
    for p in problems:
        ctx.problems.append((p, "fix %s for %s (its default is used until then)" % (p.path.split(".")[0], ctx.name)))


def evaluate_host(name, hw, declared=None, profile="training", thresholds=None, severity=None,
                  workload=None, external_archive=None, extra_findings=None):
    """Validate one host. ``hw`` is the document to judge (gathered if available, else declared);
    ``declared`` is the inventory declaration when the host was also gathered. Never raises for
    any input: bad values become ``inventory.schema`` findings of this host."""
    name = name if isinstance(name, str) else repr(name)
    th, sev, problems = resolve_settings("training" if profile is None else profile, thresholds, severity)
    ctx = _Ctx(name, sev)
    ctx.th, ctx.declared = th, declared
    ctx.archive = _check_archive(external_archive, problems)
    _settings_problems(ctx, problems)
    if _prepare(ctx, hw):
        wl_problems = []
        ctx.workload = _workload(ctx.hw, workload, wl_problems)
        _settings_problems(ctx, wl_problems)
        for r in _REGISTRY:
            if sev[r.id] != "off":
                r.run(ctx)
    else:
        _RULE_BY_ID["inventory.schema"].run(ctx)
    for f in extra_findings or []:
        ctx.findings.append(dict(f))
    return _finish(ctx, profile)


_SEV_ORDER = {"error": 0, "warning": 1, "info": 2}
_OUTCOME = {"error": "fail", "warning": "warn", "info": "pass"}
_OUTCOME_RANK = {"fail": 3, "warn": 2, "pass": 1, "skip": 0}


def _finish(ctx, profile):
    status = "pass"
    outcomes = {}
    for f in ctx.findings:
        sev = f["severity"]
        if sev == "error":
            status = "fail"
        elif sev == "warning" and status == "pass":
            status = "warn"
        new = "skip" if f.get("skipped") else _OUTCOME[sev]
        cur = outcomes.get(f["rule"])
        if cur is None or _OUTCOME_RANK[new] > _OUTCOME_RANK[cur]:
            outcomes[f["rule"]] = new
    order = _RULE_ORDER
    ctx.findings.sort(key=lambda f: (_SEV_ORDER[f["severity"]], order.get(f["rule"], 99)))
    clean = ctx.hw
    if clean is not None:
        for g in clean["gpus"] or []:
            g.pop("_spec", None)
        clean.pop("_cpu_spec", None)
    return {"status": status, "profile": profile if isinstance(profile, str) and profile in PROFILES else "training",
            "findings": ctx.findings, "rules": outcomes, "hw": clean, "provenance": ctx.notes}


_RULE_ORDER = dict((r, i) for i, r in enumerate(RULE_IDS))


def summarize(hosts):
    """Fleet summary: counts by status and, per rule, how many hosts fail or warn."""
    summary = {"hosts": len(hosts), "pass": 0, "warn": 0, "fail": 0, "rules": {}}
    for result in hosts.values():
        summary[result["status"]] += 1
        for rule_id, outcome in result["rules"].items():
            r = summary["rules"].setdefault(rule_id, {"fail": 0, "warn": 0, "pass": 0, "skip": 0})
            r[outcome] += 1
    summary["status"] = "fail" if summary["fail"] else "warn" if summary["warn"] else "pass"
    return summary


# Stands for the host's name while one evaluation serves every host with the same inputs: the
# engine writes a name only with "%s" into messages and remedies, so putting the real name in its
# place gives exactly what evaluating that host alone gives. A host whose name or inputs contain
# this text (NUL characters around it) is evaluated on its own.
_THIS_HOST = u"\x00dlrack:this-host\x00"
_THIS_HOST_BYTES = _THIS_HOST.encode("utf-8")


def _inputs_key(kwargs):
    """Exact identity of one host's evaluate_host() inputs: marshal's bytes (equal bytes decode to
    equal values of equal types; True, 1 and 1.0 differ; equal values written differently only cost
    a second evaluation), or None when they cannot share an evaluation (not plain data, e.g. an
    unresolved template, or they contain _THIS_HOST)."""
    try:
        key = marshal.dumps(sorted(kwargs.items()), 2)
    except (ValueError, TypeError):
        return None
    return None if _THIS_HOST_BYTES in key else key


def mentions(value, text):
    """Whether any string in ``value`` (keys too) holds ``text``: marshal writes every string as
    its UTF-8 bytes, in C; the walk is for what marshal cannot write."""
    try:
        return text.encode("utf-8", "surrogatepass") in marshal.dumps(value, 2)
    except (ValueError, TypeError):
        return _walk_mentions(value, text)


def _walk_mentions(value, text):
    if isinstance(value, str):
        return text in value
    if isinstance(value, dict):
        return any(_walk_mentions(k, text) or _walk_mentions(v, text) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_walk_mentions(v, text) for v in value)
    return False


def _named(value, name):
    """``value`` with _THIS_HOST replaced by ``name`` in every string."""
    if isinstance(value, str):
        return value.replace(_THIS_HOST, name)
    if isinstance(value, dict):
        return dict((_named(k, name), _named(v, name)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_named(v, name) for v in value)
    return value


def _for_host(shared, name):
    """One host's result from an evaluation shared by the hosts with the same inputs: its own
    result mapping, findings list and rules (adding a finding to one host changes only that
    host); the finding mappings and the normalised document are shared and read as they are."""
    result, mentions = shared
    out = dict(result)
    if mentions:
        out["findings"] = _named(result["findings"], name)
        out["provenance"] = _named(result["provenance"], name)
    else:
        out["findings"] = list(result["findings"])
    out["rules"] = dict(result["rules"])
    return out


def evaluate_fleet(hosts, finish=None):
    """``hosts``: {name: kwargs for evaluate_host}. Returns ``({name: result}, summary)``; every
    host gets a result whatever its inputs, the same as evaluate_host() gives it alone.

    A fleet declares a few builds for many hosts (group_vars per rack): hosts with identical
    inputs share one evaluation, each with its own result mapping and its own name in its
    messages. ``finish({name: result})``, when given, is applied to each evaluation before it is
    shared (the controller's non-finite guard): once per distinct input, not once per host. The
    sharing is the fleet fast path's (plugin_utils/fastpath.py): DLRACK_FAST_PATH=false evaluates
    every host on its own, with the same results."""
    results = {}
    memo = {}
    share = fastpath.shares_evaluations()   # off (the reference path): every host on its own
    for name in sorted(hosts, key=str):
        kwargs = hosts[name]
        key = _inputs_key(kwargs) if share and isinstance(name, str) and _THIS_HOST not in name else None
        if key is None:
            results[name] = evaluate_host(name, **kwargs)
            if finish is not None:
                finish({name: results[name]})
            continue
        if key not in memo:
            result = evaluate_host(_THIS_HOST, **kwargs)
            if finish is not None:
                finish({_THIS_HOST: result})
            memo[key] = (result, mentions([result["findings"], result["provenance"]], _THIS_HOST))
        results[name] = _for_host(memo[key], name)
    return results, summarize(results)
