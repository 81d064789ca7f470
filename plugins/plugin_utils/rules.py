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
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.dlrack.node.plugins.plugin_utils import catalogue
from ansible_collections.dlrack.node.plugins.module_utils.ecc_metrics import assess_ecc
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_hw

RULES = (
    ("inventory.schema", "the dlrack_hw document is well formed"),
    ("gpu.present", "the node has at least the expected number of GPUs"),
    ("cpu.cores_exceed_gpus", "physical CPU cores > GPUs; >= recommended cores per GPU"),
    ("cpu.pcie_lanes", "CPU PCIe lanes >= 16 x GPUs"),
    ("gpu.pcie_link", "every GPU's link width equals its maximum"),
    ("memory.exceeds_vram", "system RAM > total GPU memory; >= 2x recommended"),
    ("memory.ecc", "ECC memory"),
    ("memory.edac_active", "an EDAC driver reports memory errors"),
    ("memory.ecc_errors", "no uncorrected memory errors; corrected errors within budget"),
    ("storage.nvme_hot_cache", "NVMe for the hot training-data cache"),
    ("storage.hdd_cold_archive", "an HDD array or external archive for cold data"),
    ("gpu.vram_for_workload", "GPU memory fits the declared workload"),
    ("gpu.interconnect", "NVLink/NVSwitch between GPUs of a multi-GPU node"),
    ("gpu.ecc_mode", "GPU ECC enabled where supported"),
    ("inventory.matches_declared", "gathered hardware equals the declaration"),
)
RULE_IDS = tuple(r[0] for r in RULES)
SEVERITIES = ("error", "warning", "info", "off")

DEFAULT_THRESHOLDS = {
    "min_gpus": 1,
    "recommended_cores_per_gpu": 8,
    "pcie_lanes_per_gpu": 16,
    "ram_to_vram_min": 1.0,
    "ram_to_vram_recommended": 2.0,
    "large_model_params_b": 7,
    "large_model_min_vram_gb": 80,
    # Bytes per parameter for the memory estimate. Full fine-tuning / pre-training with Adam in
    # mixed precision: fp16/bf16 weights (2) + gradients (2) + fp32 master weights (4) + Adam m
    # and v (4 + 4) = 16 bytes/parameter (ZeRO paper, Rajbhandari et al. 2020, section 3.1).
    # LoRA: frozen bf16 weights (2) plus small adapters; inference: bf16 weights (2).
    "workload_bytes_per_param": {"full_finetune": 16, "pretrain": 16, "lora": 2, "inference": 2},
    # Activations, KV cache, CUDA context and fragmentation on top of the states above.
    "workload_overhead": 1.2,
    "ram_match_tolerance_pct": 5.0,
    "ecc_corrected_budget_24h": 9,
}

# Severity of each rule when it does not hold, per profile.
_TRAINING = {
    "inventory.schema": "error",
    "gpu.present": "error",
    "cpu.cores_exceed_gpus": "error",
    "cpu.pcie_lanes": "error",
    "gpu.pcie_link": "error",
    "memory.exceeds_vram": "error",
    "memory.ecc": "error",
    "memory.edac_active": "warning",
    "memory.ecc_errors": "error",
    "storage.nvme_hot_cache": "error",
    "storage.hdd_cold_archive": "warning",
    "gpu.vram_for_workload": "error",
    "gpu.interconnect": "warning",
    "gpu.ecc_mode": "warning",
    "inventory.matches_declared": "error",
}
PROFILES = {
    "training": {"severity": _TRAINING, "thresholds": {}},
    "inference": {
        "severity": dict(_TRAINING, **{"gpu.interconnect": "info", "storage.hdd_cold_archive": "info",
                                       "memory.exceeds_vram": "warning", "cpu.pcie_lanes": "warning"}),
        "thresholds": {"recommended_cores_per_gpu": 4, "ram_to_vram_recommended": 1.0},
    },
    "workstation": {
        "severity": dict(_TRAINING, **{"memory.ecc": "warning", "cpu.pcie_lanes": "warning",
                                       "gpu.interconnect": "info", "storage.hdd_cold_archive": "info",
                                       "memory.edac_active": "info", "gpu.ecc_mode": "info"}),
        "thresholds": {"recommended_cores_per_gpu": 4},
    },
}


class ConfigError(ValueError):
    """Bad profile/threshold/severity settings (names the host and the setting)."""


_SETTINGS_CACHE = {}


def resolve_settings(host, profile="training", thresholds=None, severity=None):
    """Merge profile defaults with per-host overrides; raise ConfigError naming the bad key."""
    if not thresholds and not severity and profile in _SETTINGS_CACHE:
        return _SETTINGS_CACHE[profile]
    result = _resolve_settings(host, profile, thresholds, severity)
    if not thresholds and not severity:
        _SETTINGS_CACHE[profile] = result
    return result


def _resolve_settings(host, profile, thresholds, severity):
    if profile not in PROFILES:
        raise ConfigError("host %s: dlrack_profile %r is not a profile (use one of %s)"
                          % (host, profile, ", ".join(sorted(PROFILES))))
    th = copy.deepcopy(DEFAULT_THRESHOLDS)
    th.update(PROFILES[profile]["thresholds"])
    for key, value in (thresholds or {}).items():
        if key not in DEFAULT_THRESHOLDS:
            raise ConfigError("host %s: dlrack_thresholds.%s is not a threshold (known: %s)"
                              % (host, key, ", ".join(sorted(DEFAULT_THRESHOLDS))))
        if isinstance(DEFAULT_THRESHOLDS[key], dict):
            if not isinstance(value, dict):
                raise ConfigError("host %s: dlrack_thresholds.%s must be a mapping" % (host, key))
            th[key] = dict(th[key], **value)
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ConfigError("host %s: dlrack_thresholds.%s must be a number >= 0, got %r"
                              % (host, key, value))
        else:
            th[key] = value
    sev = dict(PROFILES[profile]["severity"])
    for key, value in (severity or {}).items():
        if key not in RULE_IDS:
            raise ConfigError("host %s: dlrack_severity.%s is not a rule id (known: %s)"
                              % (host, key, ", ".join(RULE_IDS)))
        if value not in SEVERITIES:
            raise ConfigError("host %s: dlrack_severity.%s must be one of %s, got %r"
                              % (host, key, ", ".join(SEVERITIES), value))
        sev[key] = value
    return th, sev


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


def _model_from_pci_name(pci_name):
    """pci.ids names a device "GH100[H100 SXM5 80GB]" or "AD102GL [L6000 / RTX 6000 Ada Generation]":
    the marketing name(s) in brackets, tried against the catalogue in order."""
    if "[" not in pci_name:
        return None
    inner = pci_name[pci_name.index("[") + 1:].rstrip("]")
    for alt in [a.strip() for a in inner.split("/")]:
        spec = _lookup("gpu", "NVIDIA " + alt) if alt else None
        if spec and not spec.get("ambiguous"):
            return spec
    return None


def _gib(mb):
    return "%.0f GiB" % (mb / 1024.0) if mb is not None else "unknown"


class _Ctx(object):
    """Collects findings for one host."""

    def __init__(self, severity):
        self.sev = severity
        self.findings = []

    def add(self, rule, ok, observed, required, message, remedy=None, unknown=False):
        """ok=True -> info; ok=False -> the rule's severity; unknown -> warning 'cannot verify'."""
        configured = self.sev.get(rule, "error")
        if configured == "off":
            return
        if ok:
            severity = "info"
        elif unknown:
            severity = "warning" if configured in ("error", "warning") else configured
        else:
            severity = configured
        self.findings.append({
            "rule": rule, "severity": severity, "observed": observed, "required": required,
            "message": message, "remedy": remedy if not ok else None,
        })

    def skip(self, rule, message):
        if self.sev.get(rule) != "off":
            self.findings.append({"rule": rule, "severity": "info", "observed": None, "required": None,
                                  "message": "not checked: " + message, "remedy": None, "skipped": True})


def _enrich(hw):
    """Fill unknown figures from the catalogue; return notes on where figures came from."""
    notes = {}
    cpu = hw["cpu"]
    spec = _lookup("cpu", cpu["model"]) if cpu.get("model") else None
    hw["_cpu_spec"] = spec
    if spec:
        sockets = cpu.get("sockets") or 1
        if cpu.get("sockets") is None:
            notes["cpu.sockets"] = "assumed 1 socket (not declared)"
        if cpu.get("cores") is None and spec.get("cores"):
            cpu["cores"] = spec["cores"] * sockets
            notes["cpu.cores"] = "catalogue: %s x %d" % (spec.get("model"), sockets)
        if cpu.get("threads") is None and spec.get("threads"):
            cpu["threads"] = spec["threads"] * sockets
            notes["cpu.threads"] = "catalogue: %s x %d" % (spec.get("model"), sockets)
        if cpu.get("pcie_lanes") is None:
            lanes, note = catalogue.cpu_lanes(spec, sockets)
            if lanes:
                cpu["pcie_lanes"] = lanes
                notes["cpu.pcie_lanes"] = "catalogue: " + (note or spec.get("model", ""))
        if cpu.get("vendor") is None and spec.get("vendor"):
            cpu["vendor"] = spec["vendor"]
    for gpu in hw["gpus"] or []:
        if not gpu.get("model") and gpu.get("pci_name"):
            gspec = _model_from_pci_name(gpu["pci_name"])
            if gspec:
                gpu["model"] = gspec["model"]
                notes["gpus.model"] = "pci.ids: %s -> %s (no nvidia-smi)" % (gpu["pci_name"], gspec["model"])
        gspec = _lookup("gpu", gpu["model"]) if gpu.get("model") else None
        gpu["_spec"] = gspec
        if gspec and gpu.get("memory_mb") is None and gspec.get("memory_mb"):
            gpu["memory_mb"] = gspec["memory_mb"]
            notes["gpus.memory_mb"] = "catalogue: %s" % gspec.get("model")
    return notes


def _rule_gpu_present(ctx, hw, th):
    n = len(hw["gpus"] or [])
    need = th["min_gpus"]
    if hw["gpus"] is None:
        ctx.add("gpu.present", False, None, ">= %d" % need, "the GPUs are not declared",
                "declare dlrack_hw.gpus (model and count) or gather the host", unknown=True)
        return
    ctx.add("gpu.present", n >= need, n, ">= %d" % need,
            "%d GPU(s) found" % n if n else "no NVIDIA GPU found (PCI vendor 0x10de) on this node",
            "install the GPUs, check they are seated and visible in lspci, or set "
            "dlrack_thresholds.min_gpus: 0 for a node that is meant to have none")


def _rule_cores(ctx, hw, th):
    n = len(hw["gpus"] or [])
    cores = hw["cpu"].get("cores")
    rec = th["recommended_cores_per_gpu"]
    if cores is None:
        ctx.add("cpu.cores_exceed_gpus", False, None, "> %d" % n, "physical core count is unknown",
                "declare cpu.model (in the catalogue) or cpu.cores", unknown=True)
        return
    if n == 0:
        ctx.add("cpu.cores_exceed_gpus", True, cores, "> 0", "%d cores, no GPU to feed" % cores)
        return
    per = cores / float(n)
    if cores <= n:
        ctx.add("cpu.cores_exceed_gpus", False, cores, "> %d" % n,
                "%d physical cores for %d GPUs: fewer cores than GPUs starves every dataloader" % (cores, n),
                "use a CPU with at least %d cores (%d per GPU recommended) or fewer GPUs per node"
                % (n * rec, rec))
    elif per < rec:
        ctx.findings.append({
            "rule": "cpu.cores_exceed_gpus", "severity": "warning" if ctx.sev.get("cpu.cores_exceed_gpus") != "off" else "info",
            "observed": cores, "required": ">= %d (%d per GPU)" % (n * rec, rec),
            "message": "%d physical cores for %d GPUs is %.1f per GPU, below the recommended %d"
                       % (cores, n, per, rec),
            "remedy": "choose a CPU with >= %d cores in total, or lower dlrack_thresholds."
                      "recommended_cores_per_gpu if the dataloaders are light" % (n * rec)})
    else:
        ctx.add("cpu.cores_exceed_gpus", True, cores, ">= %d" % (n * rec),
                "%d physical cores for %d GPUs (%.1f per GPU)" % (cores, n, per))


def _rule_lanes(ctx, hw, th, notes):
    n = len(hw["gpus"] or [])
    need = n * th["pcie_lanes_per_gpu"]
    lanes = hw["cpu"].get("pcie_lanes")
    model = hw["cpu"].get("model")
    if n == 0:
        ctx.skip("cpu.pcie_lanes", "no GPUs")
        return
    if lanes is None:
        ctx.add("cpu.pcie_lanes", False, None, ">= %d" % need,
                "cannot verify: CPU model %r is not in the catalogue and cpu.pcie_lanes is not declared"
                % (model,) if model else "cannot verify: the CPU model is unknown",
                "declare dlrack_hw.cpu.pcie_lanes for this platform, or add the model to the catalogue",
                unknown=True)
        return
    src = notes.get("cpu.pcie_lanes")
    observed = "%d%s" % (lanes, " (%s)" % src if src else "")
    ctx.add("cpu.pcie_lanes", lanes >= need, observed, ">= %d (x%d per GPU)" % (need, th["pcie_lanes_per_gpu"]),
            "%d CPU PCIe lanes for %d GPUs (%d needed for x%d each)" % (lanes, n, need, th["pcie_lanes_per_gpu"]),
            "use a platform with more CPU lanes (a second socket, EPYC/Xeon instead of a desktop CPU) "
            "or fewer GPUs per node")


def _rule_pcie_link(ctx, hw):
    gpus = hw["gpus"] or []
    if not gpus:
        ctx.skip("gpu.pcie_link", "no GPUs")
        return
    if hw["source"] == "declared":
        ctx.skip("gpu.pcie_link", "negotiated link width is only known once the host is gathered")
        return
    bad, unknown, ok = [], [], []
    for g in gpus:
        p = g.get("pcie") or {}
        w, wm = p.get("width"), p.get("width_max")
        label = "GPU%s %s" % (g.get("index"), g.get("pci_bus_id") or "")
        if w is None or wm is None:
            unknown.append(label.strip())
        elif w < wm:
            bad.append("%s x%d of x%d" % (label.strip(), w, wm))
        else:
            ok.append(w)
    if bad:
        ctx.add("gpu.pcie_link", False, "; ".join(bad), "width = width_max (x16)",
                "%d GPU(s) negotiated a narrower link than they support: %s" % (len(bad), "; ".join(bad)),
                "reseat the card, move it to an x16 slot, check riser/bifurcation settings in the BIOS "
                "(the idle link SPEED downshift to 2.5 GT/s is normal; the WIDTH must not drop)")
    if unknown:
        ctx.add("gpu.pcie_link", False, "unknown for " + ", ".join(unknown), "width = width_max",
                "cannot verify the link width of %s (no sysfs link files: VM pass-through or vGPU?)"
                % ", ".join(unknown), "check the link on the hypervisor host", unknown=True)
    if not bad and not unknown:
        ctx.add("gpu.pcie_link", True, "x%s" % "/x".join(str(w) for w in sorted(set(ok))), "width = width_max",
                "all %d GPU links at their full width" % len(ok))


def _gpu_mem_total(gpus):
    mems = [g.get("memory_mb") for g in gpus]
    if any(m is None for m in mems):
        return None
    return sum(mems)


def _rule_ram(ctx, hw, th):
    gpus = hw["gpus"] or []
    ram = hw["memory"].get("total_mb")
    if not gpus:
        ctx.skip("memory.exceeds_vram", "no GPUs")
        return
    vram = _gpu_mem_total(gpus)
    if ram is None or vram is None:
        if ram is None:
            what = "system RAM"
        elif any(not g.get("model") for g in gpus):
            what = "GPU memory (GPU model unknown: no nvidia-smi, is the driver installed?)"
        else:
            what = "GPU memory (model %r not in the catalogue)" % next(
                g.get("model") for g in gpus if g.get("memory_mb") is None)
        ctx.add("memory.exceeds_vram", False, _gib(ram), "> %s" % _gib(vram), "cannot verify: %s unknown" % what,
                "declare memory.total_mb and the GPU model or memory_mb", unknown=True)
        return
    lo, rec = th["ram_to_vram_min"], th["ram_to_vram_recommended"]
    if ram <= vram * lo:
        ctx.add("memory.exceeds_vram", False, _gib(ram), "> %s" % _gib(vram * lo),
                "system RAM %s is not more than the GPUs' %s: pinned buffers, dataset caching and "
                "checkpoint staging will swap" % (_gib(ram), _gib(vram)),
                "install at least %s of RAM (%s recommended)" % (_gib(vram * lo), _gib(vram * rec)))
    elif ram < vram * rec:
        ctx.findings.append({
            "rule": "memory.exceeds_vram", "severity": "warning", "observed": _gib(ram),
            "required": ">= %s (%.0fx GPU memory)" % (_gib(vram * rec), rec),
            "message": "system RAM %s is %.2fx the GPUs' %s, below the recommended %.0fx"
                       % (_gib(ram), ram / float(vram), _gib(vram), rec),
            "remedy": "add RAM to reach %s" % _gib(vram * rec)})
    else:
        ctx.add("memory.exceeds_vram", True, _gib(ram), ">= %s" % _gib(vram * rec),
                "system RAM %s is %.1fx GPU memory %s" % (_gib(ram), ram / float(vram), _gib(vram)))


def _rule_ecc(ctx, hw):
    ecc = hw["memory"].get("ecc")
    if ecc in ("multi-bit", "single-bit"):
        ctx.add("memory.ecc", True, ecc, "multi-bit or single-bit ECC", "memory reports %s ECC" % ecc)
    elif ecc == "none":
        ctx.add("memory.ecc", False, "none", "ECC", "the memory has no ECC: bit flips silently corrupt "
                "week-long runs and checkpoints", "use registered ECC DIMMs on a platform that supports them")
    else:
        ctx.add("memory.ecc", False, ecc or "unknown", "ECC",
                "cannot verify ECC: dmidecode type 16 not available (not root, a VM, or not declared)",
                "run the preflight with become: true on the real host, or declare memory.ecc", unknown=True)


def _rule_edac(ctx, hw):
    ecc = hw["memory"].get("ecc")
    edac = hw["memory"].get("edac")
    if hw["source"] == "declared":
        ctx.skip("memory.edac_active", "EDAC drivers are only known once the host is gathered")
        return
    if ecc not in ("multi-bit", "single-bit"):
        if edac:
            ctx.add("memory.edac_active", True, edac.get("driver"), "an EDAC driver",
                    "EDAC driver %s active" % edac.get("driver"))
        else:
            ctx.add("memory.edac_active", False, "no EDAC", "an EDAC driver where ECC DIMMs exist",
                    "memory error reporting state is unknown (no ECC reported and no EDAC memory controller)",
                    "apply the ecc_monitor role; on bare metal with ECC DIMMs load the platform EDAC driver",
                    unknown=True)
        return
    if edac and (edac.get("controllers") or 0) > 0:
        ctx.add("memory.edac_active", True, edac.get("driver"), "an EDAC driver",
                "EDAC driver %s reports %s memory controller(s)" % (edac.get("driver"), edac.get("controllers")))
    else:
        ctx.add("memory.edac_active", False, "none loaded", "an EDAC memory-controller driver",
                "ECC DIMMs are installed but no EDAC driver is loaded: corrected errors go unseen until "
                "they become uncorrected", "apply the dlrack.node.ecc_monitor role (loads i10nm_edac/skx_edac/"
                "amd64_edac and rasdaemon)")


def _rule_ecc_errors(ctx, hw, th):
    """Memory error counts, judged by the ECC collector's own assess_ecc (one implementation)."""
    edac = hw["memory"].get("edac")
    if hw["source"] == "declared" or not edac:
        ctx.skip("memory.ecc_errors", "no EDAC counters (see memory.edac_active)"
                 if hw["source"] != "declared" else "error counters are only known once the host is gathered")
        return
    configured = ctx.sev.get("memory.ecc_errors", "error")
    if configured == "off":
        return
    for f in assess_ecc(edac, uptime_s=hw.get("uptime_s"), budget_24h=th["ecc_corrected_budget_24h"]):
        f = dict(f, rule="memory.ecc_errors")
        if f["severity"] == "error":
            f["severity"] = configured if configured != "info" else "info"
        ctx.findings.append(f)


def _disks_by_kind(hw):
    out = {"nvme": [], "ssd": [], "hdd": []}
    for d in hw["disks"] or []:
        if d.get("kind") in out:
            out[d["kind"]].append(d)
    return out


def _rule_storage(ctx, hw, external_archive):
    if hw["disks"] is None:
        ctx.add("storage.nvme_hot_cache", False, None, ">= 1 NVMe", "disks are not declared",
                "declare dlrack_hw.disks", unknown=True)
        ctx.add("storage.hdd_cold_archive", False, None, "an HDD array", "disks are not declared",
                "declare dlrack_hw.disks or dlrack_external_archive", unknown=True)
        return
    kinds = _disks_by_kind(hw)
    data_nvme = [d for d in kinds["nvme"] if not (d.get("in_use") or {}).get("system")]
    if data_nvme:
        ctx.add("storage.nvme_hot_cache", True, "%d NVMe" % len(data_nvme), ">= 1 NVMe (not the system disk)",
                "%d NVMe device(s) for the hot cache" % len(data_nvme))
    elif kinds["nvme"] or kinds["ssd"] or kinds["hdd"]:
        what = ("only the system NVMe" if kinds["nvme"] else
                "%d SATA/SAS SSD, %d HDD, no NVMe" % (len(kinds["ssd"]), len(kinds["hdd"])))
        ctx.findings.append({
            "rule": "storage.nvme_hot_cache", "severity": "warning", "observed": what,
            "required": ">= 1 NVMe (not the system disk)",
            "message": "no data NVMe: the hot training-data cache would sit on %s; the GPUs will wait "
                       "for data" % ("the system disk" if kinds["nvme"] else "SATA/HDD"),
            "remedy": "add NVMe drives for the hot tier"})
    else:
        ctx.add("storage.nvme_hot_cache", False, "no disks", ">= 1 NVMe", "no local data disk at all",
                "add NVMe drives for the hot training-data cache")
    hdds = [d for d in kinds["hdd"] if d.get("transport") != "virtio" and not (d.get("in_use") or {}).get("system")]
    if hdds:
        ctx.add("storage.hdd_cold_archive", True, "%d HDD" % len(hdds), "an HDD array",
                "%d HDD(s) for the cold archive" % len(hdds))
    elif external_archive:
        ctx.add("storage.hdd_cold_archive", True, "external: %s" % external_archive, "an HDD array or archive",
                "cold data goes to the external archive %s" % external_archive)
    else:
        ctx.add("storage.hdd_cold_archive", False, "no HDD", "an HDD array or dlrack_external_archive",
                "no HDD array and no external archive declared for raw datasets, weights and logs",
                "add an HDD array (RAID6) or set dlrack_external_archive to the NFS/S3 target")


def _rule_workload(ctx, hw, th, workload):
    gpus = hw["gpus"] or []
    if not workload or not workload.get("model_params_b"):
        ctx.skip("gpu.vram_for_workload", "no workload declared (dlrack_hw.workload or dlrack_workload)")
        return
    if not gpus:
        ctx.add("gpu.vram_for_workload", False, "no GPU", "GPUs", "a workload is declared but there is no GPU",
                "declare or install GPUs")
        return
    kind = workload.get("kind") or "full_finetune"
    params_b = float(workload["model_params_b"])
    per_gpu = [g.get("memory_mb") for g in gpus]
    if any(m is None for m in per_gpu):
        ctx.add("gpu.vram_for_workload", False, None, None, "cannot verify: GPU memory unknown",
                "declare the GPU model or memory_mb", unknown=True)
        return
    min_gb = min(per_gpu) / 1024.0
    bpp = th["workload_bytes_per_param"].get(kind, 16)
    need_gb = params_b * bpp * th["workload_overhead"]  # 1e9 params * bytes = GB
    sharded = kind in ("full_finetune", "pretrain", "inference")
    per_gpu_need = need_gb / len(gpus) if sharded else need_gb
    problems = []
    if kind in ("full_finetune", "pretrain") and params_b >= th["large_model_params_b"] \
            and min_gb < th["large_model_min_vram_gb"] - 0.5 * 1.0:
        problems.append("full-parameter training of a %gB model needs GPUs with >= %d GB each (smallest has %.0f GB)"
                        % (params_b, th["large_model_min_vram_gb"], min_gb))
    if per_gpu_need > min_gb:
        problems.append("the estimate for %s of %gB parameters is %.0f GB (%d bytes/param x %.1f)%s = %.0f GB per "
                        "GPU, more than the %.0f GB each GPU has"
                        % (kind, params_b, need_gb, bpp, th["workload_overhead"],
                           " sharded over %d GPUs" % len(gpus) if sharded else "", per_gpu_need, min_gb))
    observed = "%d x %.0f GB" % (len(gpus), min_gb)
    required = "%.0f GB per GPU for %s %gB" % (per_gpu_need, kind, params_b)
    if problems:
        ctx.add("gpu.vram_for_workload", False, observed, required, "; ".join(problems),
                "use 80 GB-class GPUs (A100/H100 80GB, H200), more GPUs to shard over, or LoRA instead of "
                "full fine-tuning")
    else:
        ctx.add("gpu.vram_for_workload", True, observed, required,
                "%s of %gB fits: %.0f GB per GPU needed, %.0f GB available" % (kind, params_b, per_gpu_need, min_gb))


def _rule_interconnect(ctx, hw):
    gpus = hw["gpus"] or []
    if len(gpus) < 2:
        ctx.skip("gpu.interconnect", "fewer than 2 GPUs")
        return
    active = [g.get("nvlink_active") for g in gpus]
    if all(a for a in active):
        ctx.add("gpu.interconnect", True, "NVLink (%d links on GPU0)" % active[0], "NVLink/NVSwitch",
                "all %d GPUs have active NVLink" % len(gpus))
        return
    capable = [bool((g.get("_spec") or {}).get("nvlink")) for g in gpus]
    if all(a is None for a in active) and all(capable):
        ctx.add("gpu.interconnect", True, "NVLink-capable model", "NVLink/NVSwitch",
                "all GPUs are NVLink/SXM models (%s); link state is confirmed once gathered with nvidia-smi"
                % (gpus[0].get("model")))
        return
    observed = "PCIe only" if not any(active) else "NVLink on %d of %d GPUs" % (sum(1 for a in active if a), len(gpus))
    if all(a is None for a in active) and not all(capable):
        if not all(g.get("model") for g in gpus):
            ctx.add("gpu.interconnect", False, "unknown", "NVLink/NVSwitch",
                    "cannot verify NVLink: GPU model unknown (no nvidia-smi)",
                    "install the NVIDIA driver and gather again", unknown=True)
            return
        observed = "no NVLink (model %s)" % gpus[0].get("model")
    ctx.add("gpu.interconnect", False, observed, "NVLink/NVSwitch",
            "%d GPUs talk over PCIe: gradient all-reduce for multi-GPU training will be bandwidth bound"
            % len(gpus), "prefer SXM/NVLink GPUs (HGX) or NVLink bridges for multi-GPU training nodes")


def _rule_gpu_ecc(ctx, hw):
    gpus = hw["gpus"] or []
    if not gpus:
        ctx.skip("gpu.ecc_mode", "no GPUs")
        return
    off = []
    for g in gpus:
        capable = (g.get("_spec") or {}).get("ecc")
        if g.get("ecc_enabled") is False and capable is not False:
            off.append("GPU%s" % g.get("index"))
    if off:
        ctx.add("gpu.ecc_mode", False, "disabled on " + ", ".join(off), "enabled",
                "GPU ECC is disabled on %s although the card supports it" % ", ".join(off),
                "nvidia-smi -e 1 (then reboot or reset the GPUs)")
    elif any(g.get("ecc_enabled") is None for g in gpus):
        ctx.skip("gpu.ecc_mode", "ECC mode not known (declared, or no nvidia-smi)")
    else:
        ctx.add("gpu.ecc_mode", True, "enabled", "enabled", "ECC enabled on all GPUs that support it")


def _norm_model(name, kind):
    spec = _lookup(kind, name) if name else None
    return (spec or {}).get("model") or (name or "").strip().lower()


def compare_declared(declared, gathered, th):
    """Differences between a declaration and gathered facts: list of (field, declared, gathered)."""
    diffs = []
    dg, gg = declared["gpus"] or [], gathered["gpus"] or []
    if declared["gpus"] is not None and len(dg) != len(gg):
        diffs.append(("gpus.count", len(dg), len(gg)))
    dmodels = sorted(_norm_model(g.get("model"), "gpu") for g in dg if g.get("model"))
    gmodels = sorted(_norm_model(g.get("model"), "gpu") for g in gg if g.get("model"))
    if dmodels and gmodels and sorted(set(dmodels)) != sorted(set(gmodels)):
        diffs.append(("gpus.model", ", ".join(sorted(set(dmodels))), ", ".join(sorted(set(gmodels)))))
    dcpu, gcpu = declared["cpu"], gathered["cpu"]
    if dcpu.get("model") and gcpu.get("model") and _norm_model(dcpu["model"], "cpu") != _norm_model(gcpu["model"], "cpu"):
        diffs.append(("cpu.model", dcpu["model"], gcpu["model"]))
    if dcpu.get("sockets") and gcpu.get("sockets") and dcpu["sockets"] != gcpu["sockets"]:
        diffs.append(("cpu.sockets", dcpu["sockets"], gcpu["sockets"]))
    dram, gram = declared["memory"].get("total_mb"), gathered["memory"].get("total_mb")
    if dram and gram:
        tol = th["ram_match_tolerance_pct"] / 100.0
        if abs(gram - dram) > dram * tol:
            diffs.append(("memory.total_mb", dram, gram))
    if declared["disks"] is not None:
        dk, gk = _disks_by_kind(declared), _disks_by_kind(gathered)
        for kind in ("nvme", "hdd"):
            if len(dk[kind]) != len([d for d in gk[kind] if not (d.get("in_use") or {}).get("system")]) \
                    and len(dk[kind]) != len(gk[kind]):
                diffs.append(("disks.%s" % kind, len(dk[kind]), len(gk[kind])))
    return diffs


def evaluate_host(name, hw, declared=None, profile="training", thresholds=None, severity=None,
                  workload=None, external_archive=None, extra_findings=None):
    """Validate one host. ``hw`` is the document to judge (gathered if available, else declared);
    ``declared`` is the inventory declaration when the host was also gathered."""
    th, sev = resolve_settings(name, profile or "training", thresholds, severity)
    ctx = _Ctx(sev)
    if hw is None:
        ctx.add("inventory.schema", False, None, "dlrack_hw",
                "host %s has no hardware description: not declared and not gathered" % name,
                "declare dlrack_hw (source: declared) in the inventory, or let the preflight gather it "
                "(the host must be reachable)")
        return _finish(ctx, None, {}, profile)
    clean, problems = check_hw(hw)
    if clean is None:
        for p in problems:
            ctx.add("inventory.schema", False, p.found if not isinstance(p.found, (dict, list)) else type(p.found).__name__,
                    p.expected, "host %s: %s" % (name, p.message()), "fix dlrack_hw in the inventory of %s" % name)
        return _finish(ctx, None, {}, profile)
    for p in problems:
        ctx.add("inventory.schema", False, _short_obs(p.found), p.expected, "host %s: %s" % (name, p.message()),
                "fix dlrack_hw.%s for %s (the field is treated as unknown until then)" % (p.path, name))
    if not problems:
        ctx.add("inventory.schema", True, "schema %d" % (clean.get("schema") or 1), "schema 1",
                "%s hardware description is well formed" % clean["source"])
    notes = _enrich(clean)
    for key, what in (("cpu", "cpu.model"), ("gpus", "gpus.model")):
        specs = [clean.get("_cpu_spec")] if key == "cpu" else [g.get("_spec") for g in clean.get("gpus") or []]
        amb = next((sp for sp in specs if sp and sp.get("ambiguous")), None)
        if amb:
            ctx.add("inventory.schema", False, clean["cpu"]["model"] if key == "cpu" else clean["gpus"][0].get("model"),
                    "one of: %s" % ", ".join(amb.get("candidates") or []),
                    "host %s: %s is ambiguous in the catalogue (%s); figures that differ between them are unknown"
                    % (name, what, ", ".join(amb.get("candidates") or [])),
                    "declare the exact model, e.g. %r" % ((amb.get("candidates") or ["?"])[0]), unknown=True)
    wl = clean.get("workload") or workload
    if isinstance(wl, dict) and clean.get("workload") is None:
        wl_clean, wl_problems = check_hw({"source": "declared", "workload": wl})
        for p in wl_problems:
            ctx.add("inventory.schema", False, _short_obs(p.found), p.expected,
                    "host %s: dlrack_workload: %s" % (name, p.message()), "fix dlrack_workload for %s" % name)
        wl = (wl_clean or {}).get("workload")
    _rule_gpu_present(ctx, clean, th)
    _rule_cores(ctx, clean, th)
    _rule_lanes(ctx, clean, th, notes)
    _rule_pcie_link(ctx, clean)
    _rule_ram(ctx, clean, th)
    _rule_ecc(ctx, clean)
    _rule_edac(ctx, clean)
    _rule_ecc_errors(ctx, clean, th)
    _rule_storage(ctx, clean, external_archive)
    _rule_workload(ctx, clean, th, wl)
    _rule_interconnect(ctx, clean)
    _rule_gpu_ecc(ctx, clean)
    if declared is not None and clean["source"] == "gathered":
        dclean, dproblems = check_hw(declared, strict=True)
        if dclean is None or dproblems:
            ctx.add("inventory.matches_declared", False, None, None,
                    "the declaration of %s is malformed: %s" % (name, "; ".join(p.message() for p in dproblems)),
                    "fix dlrack_hw in the inventory", unknown=True)
        else:
            diffs = compare_declared(dclean, clean, th)
            if diffs:
                for field, want, got in diffs:
                    ctx.add("inventory.matches_declared", False, got, want,
                            "%s: declared %s, gathered %s" % (field, want, got),
                            "fix the hardware (wrong part delivered or failed component) or the declaration")
            else:
                ctx.add("inventory.matches_declared", True, "matches", "declared",
                        "gathered hardware matches the declaration")
    for f in extra_findings or []:
        ctx.findings.append(dict(f))
    return _finish(ctx, clean, notes, profile)


def _short_obs(value):
    if isinstance(value, (dict, list)):
        return type(value).__name__
    return value


_SEV_ORDER = {"error": 0, "warning": 1, "info": 2}
_OUTCOME = {"error": "fail", "warning": "warn", "info": "pass"}
_OUTCOME_RANK = {"fail": 3, "warn": 2, "pass": 1, "skip": 0}
_RULE_ORDER = {r: i for i, r in enumerate(RULE_IDS)}


def _finish(ctx, clean, notes, profile):
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
    ctx.findings.sort(key=lambda f: (_SEV_ORDER[f["severity"]], _RULE_ORDER.get(f["rule"], 99)))
    if clean is not None:
        for g in clean.get("gpus") or []:
            g.pop("_spec", None)
        clean.pop("_cpu_spec", None)
    return {"status": status, "profile": profile, "findings": ctx.findings, "rules": outcomes,
            "hw": clean, "provenance": notes}


def summarize(hosts):
    """Fleet summary: counts by status and, per rule, how many hosts fail or warn."""
    summary = {"hosts": len(hosts), "pass": 0, "warn": 0, "fail": 0, "rules": {}}
    for result in hosts.values():
        summary[result["status"]] += 1
        for rule, outcome in result["rules"].items():
            r = summary["rules"].setdefault(rule, {"fail": 0, "warn": 0, "pass": 0, "skip": 0})
            r[outcome] += 1
    summary["status"] = "fail" if summary["fail"] else "warn" if summary["warn"] else "pass"
    return summary


def evaluate_fleet(hosts):
    """``hosts``: {name: kwargs for evaluate_host}. Returns ({name: result}, summary, errors).

    A ConfigError for one host is reported as that host's failure; the others are still judged.
    """
    results = {}
    for name in sorted(hosts):
        try:
            results[name] = evaluate_host(name, **hosts[name])
        except ConfigError as exc:
            results[name] = {"status": "fail", "profile": hosts[name].get("profile"), "rules": {"inventory.schema": "fail"},
                             "hw": None, "provenance": {},
                             "findings": [{"rule": "inventory.schema", "severity": "error", "observed": None,
                                           "required": None, "message": str(exc),
                                           "remedy": "fix the dlrack_* settings of %s" % name}]}
    return results, summarize(results)
