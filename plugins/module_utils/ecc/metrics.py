# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ECC collector: host EDAC + GPU ECC -> Prometheus textfile metrics, and the ECC assessment.

Pure Python, standard library only. The same file runs in two places:

- on the controller as a module_util (``render_metrics`` is what the unit tests drive against
  captured trees and nvidia-smi output); the ECC policy, ``assess_ecc``, lives in ``ecc_policy``,
  shared with the rule engine;
- on the node, where roles/ecc_monitor copies it with ``ecc_policy.py``, ``edac.py``, ``cpulist.py`` and
  ``parsers/`` under ``/usr/local/lib/dlrack`` (same ``ansible_collections.dlrack.node...``
  import paths, no Ansible needed) and ``dlrack-ecc-collector`` calls :func:`main`.

Unknown is never zero: a counter that cannot be read produces no sample, and
``dlrack_edac_supported 0`` / ``dlrack_edac_status{status="unknown"} 1`` say that nothing is
watching the memory, which is not the same as "no errors".
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys
import time

from ansible_collections.dlrack.node.plugins.module_utils.ecc.policy import (  # noqa: F401  (re-exported)  # pylint: disable=unused-import
    DEFAULT_BUDGET_24H, RULE, assess_ecc, is_count as _is_count, status_from_findings)
from ansible_collections.dlrack.node.plugins.module_utils.ecc.edac import (
    detect_host, read_edac_sysfs)
from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import read_uptime, write_atomic
from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import gather_gpus
from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu.pci import SysReader
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers.nvidia_smi import parse_xml
from ansible_collections.dlrack.node.plugins.module_utils.system.command import run as run_bounded

DEFAULT_TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"
DEFAULT_TEXTFILE_NAME = "dlrack_ecc.prom"
DEFAULT_GPU_FAULTS_STATE = "/var/lib/dlrack/gpu-faults-collector.json"   # the collector's own read position
DEFAULT_GPU_COUNTERS_STATE = "/var/lib/dlrack/gpu-counters.json"         # its last counter read (gpu_faults/gather.py reads it)
STATUSES = ("ok", "warning", "error", "unknown")
NVIDIA_SMI_OUTPUT_LIMIT = 16 * 1024 * 1024   # bytes; nvidia-smi -q -x prints about 30 KiB per GPU


# --------------------------------------------------------------------------------------------
# Prometheus text format
# --------------------------------------------------------------------------------------------

def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


class _Metrics:
    """Collects samples per family, renders HELP/TYPE once per family, keeps order."""

    def __init__(self):
        self.families = []
        self.index = {}

    def declare(self, name, kind, helptext):
        if name not in self.index:
            self.index[name] = (kind, helptext, [])
            self.families.append(name)

    def add(self, name, value, labels=None):
        if value is None or name not in self.index:
            return
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, (int, float)):
            return
        self.index[name][2].append((labels or {}, value))

    def render(self):
        lines = []
        for name in self.families:
            kind, helptext, samples = self.index[name]
            if not samples:
                continue
            lines.append("# HELP %s %s" % (name, helptext.replace("\\", "\\\\").replace("\n", " ")))
            lines.append("# TYPE %s %s" % (name, kind))
            for labels, value in samples:
                if labels:
                    body = ",".join('%s="%s"' % (k, _escape(v if v is not None else ""))
                                    for k, v in labels.items())
                    lines.append("%s{%s} %s" % (name, body, _fmt(value)))
                else:
                    lines.append("%s %s" % (name, _fmt(value)))
        return "\n".join(lines) + "\n"


_FAMILIES = (
    ("dlrack_edac_supported", "gauge",
     "1 when an EDAC memory controller is registered (errors are counted), 0 when not: then the "
     "memory error state is unknown, not healthy."),
    ("dlrack_edac_info", "gauge",
     "EDAC driver in use and the driver expected for this platform (empty when none applies)."),
    ("dlrack_edac_status", "gauge",
     "Assessment of the EDAC counters (memory.ecc_errors): 1 for the current status."),
    ("dlrack_edac_corrected_budget_24h", "gauge",
     "Corrected memory errors allowed per 24 h before the status is warning."),
    ("dlrack_edac_memory_controllers", "gauge", "EDAC memory controllers registered."),
    ("dlrack_edac_memory_controller_size_bytes", "gauge", "Memory behind an EDAC memory controller."),
    ("dlrack_edac_corrected_errors_total", "counter",
     "Corrected memory errors per EDAC memory controller (mc ce_count)."),
    ("dlrack_edac_uncorrected_errors_total", "counter",
     "Uncorrected memory errors per EDAC memory controller (mc ue_count)."),
    ("dlrack_edac_noinfo_corrected_errors_total", "counter",
     "Corrected memory errors the controller could not attribute to a DIMM (ce_noinfo_count)."),
    ("dlrack_edac_noinfo_uncorrected_errors_total", "counter",
     "Uncorrected memory errors the controller could not attribute to a DIMM (ue_noinfo_count)."),
    ("dlrack_edac_dimm_corrected_errors_total", "counter",
     "Corrected memory errors per DIMM/rank (dimm_ce_count)."),
    ("dlrack_edac_dimm_uncorrected_errors_total", "counter",
     "Uncorrected memory errors per DIMM/rank (dimm_ue_count)."),
    ("dlrack_edac_dimm_size_bytes", "gauge", "Size of a DIMM/rank as EDAC reports it."),
    ("dlrack_edac_csrow_corrected_errors_total", "counter",
     "Corrected memory errors per chip-select row (csrow ce_count)."),
    ("dlrack_edac_csrow_uncorrected_errors_total", "counter",
     "Uncorrected memory errors per chip-select row (csrow ue_count)."),
    ("dlrack_edac_csrow_channel_corrected_errors_total", "counter",
     "Corrected memory errors per csrow channel (chN_ce_count)."),
    ("dlrack_gpu_ecc_collector_up", "gauge",
     "1 when nvidia-smi ran and its XML parsed, 0 when it failed; absent without nvidia-smi."),
    ("dlrack_gpu_ras_collector_up", "gauge",
     "1 when amdgpu's RAS sysfs was read whole, 0 when a file or the tree could not be read (the "
     "counters are then partly unknown; the collector's stderr names them); absent without AMD GPUs."),
    ("dlrack_gpu_ecc_supported", "gauge",
     "1 when the GPU reports an ECC mode (Enabled or Disabled), 0 when it has none (N/A)."),
    ("dlrack_gpu_ecc_enabled", "gauge", "1 when GPU ECC is currently enabled."),
    ("dlrack_gpu_ecc_pending_enabled", "gauge", "1 when GPU ECC is enabled after the next reset."),
    ("dlrack_gpu_ecc_corrected_errors_total", "counter",
     "Corrected GPU memory errors; scope volatile (since driver load) or aggregate (lifetime)."),
    ("dlrack_gpu_ecc_uncorrected_errors_total", "counter",
     "Uncorrected GPU memory errors; scope volatile (since driver load) or aggregate (lifetime)."),
    ("dlrack_gpu_ecc_deferred_errors_total", "counter",
     "Deferred (poisoned, not yet consumed) GPU memory errors per RAS block (AMD; vendor label)."),
    ("dlrack_gpu_retired_pages", "gauge", "GPU memory pages retired, by cause."),
    ("dlrack_gpu_retired_pages_pending", "gauge",
     "1 when page retirement is pending a GPU reset."),
    ("dlrack_gpu_remapped_rows", "gauge", "GPU memory rows remapped, by cause."),
    ("dlrack_gpu_remapped_rows_pending", "gauge", "1 when row remapping is pending a GPU reset."),
    ("dlrack_gpu_remapped_rows_failed", "gauge",
     "1 when row remapping failed (the GPU needs service)."),
    ("dlrack_gpu_faults_collector_up", "gauge",
     "1 when the kernel log was read for GPU fault events (gpu_faults), 0 when it could not be; absent when off."),
    ("dlrack_gpu_fault_events_total", "counter",
     "GPU fault events (Xid, SXid, amdgpu) this boot per GPU and class (application, driver, memory, nvlink, "
     "thermal_power, bus, unknown); a burst counts its repeats. gpu=\"node\" when the line names no GPU."),
    ("dlrack_gpu_fault_action", "gauge",
     "What the GPU's fault events call for now: 0 none, 1 check the workload, 2 reset the GPU, 3 reboot, 4 service."),
    ("dlrack_gpu_pcie_replays_total", "counter", "PCIe replays of the GPU's link (nvidia-smi replay_counter)."),
    ("dlrack_gpu_pcie_replays_per_hour", "gauge", "PCIe replay rate between this read and the collector's previous one."),
    ("dlrack_gpu_clock_fault_active", "gauge",
     "1 while a clock-event reason that means a fault holds the GPU's clocks down (hw_slowdown, hw_thermal_slowdown, "
     "hw_power_brake_slowdown, sw_thermal_slowdown; not the SW power cap)."),
    ("dlrack_ecc_collector_last_run_timestamp_seconds", "gauge",
     "Unix time the ECC collector last wrote this file."),
    ("dlrack_ecc_collector_duration_seconds", "gauge", "Time the ECC collector took."),
)


def _new_metrics():
    metrics = _Metrics()
    for name, kind, helptext in _FAMILIES:
        metrics.declare(name, kind, helptext)
    return metrics


def _mb_to_bytes(mb):
    return mb * 1024 * 1024 if _is_count(mb) else None


def add_edac_metrics(metrics, edac, detection=None, findings=None, budget_24h=DEFAULT_BUDGET_24H):
    """Host EDAC samples (``edac`` is a read_edac_sysfs() result or None)."""
    metrics.add("dlrack_edac_supported", 1 if edac else 0)
    detection = detection or {}
    metrics.add("dlrack_edac_info", 1, {
        "driver": (edac or {}).get("driver") or "",
        "expected_driver": detection.get("driver") or "",
    })
    status = status_from_findings(findings) if findings is not None else (
        "unknown" if not edac else "ok")
    for name in STATUSES:
        metrics.add("dlrack_edac_status", 1 if name == status else 0, {"status": name})
    try:
        metrics.add("dlrack_edac_corrected_budget_24h", float(budget_24h))
    except (TypeError, ValueError):
        pass
    if not edac:
        return
    metrics.add("dlrack_edac_memory_controllers", edac.get("controllers"))
    for mc in edac.get("mcs") or []:
        ctl = {"controller": mc.get("name")}
        metrics.add("dlrack_edac_memory_controller_size_bytes", _mb_to_bytes(mc.get("size_mb")),
                    dict(ctl, mc_name=mc.get("mc_name") or ""))
        metrics.add("dlrack_edac_corrected_errors_total", mc.get("ce_count"), ctl)
        metrics.add("dlrack_edac_uncorrected_errors_total", mc.get("ue_count"), ctl)
        metrics.add("dlrack_edac_noinfo_corrected_errors_total", mc.get("ce_noinfo_count"), ctl)
        metrics.add("dlrack_edac_noinfo_uncorrected_errors_total", mc.get("ue_noinfo_count"), ctl)
        for dimm in mc.get("dimms") or []:
            labels = {"controller": mc.get("name"), "dimm": dimm.get("name"),
                      "label": dimm.get("label") or "", "location": dimm.get("location") or ""}
            metrics.add("dlrack_edac_dimm_corrected_errors_total", dimm.get("ce_count"), labels)
            metrics.add("dlrack_edac_dimm_uncorrected_errors_total", dimm.get("ue_count"), labels)
            metrics.add("dlrack_edac_dimm_size_bytes", _mb_to_bytes(dimm.get("size_mb")), labels)
        for row in mc.get("csrows") or []:
            labels = {"controller": mc.get("name"), "csrow": row.get("name")}
            metrics.add("dlrack_edac_csrow_corrected_errors_total", row.get("ce_count"), labels)
            metrics.add("dlrack_edac_csrow_uncorrected_errors_total", row.get("ue_count"), labels)
            for ch in row.get("channels") or []:
                metrics.add("dlrack_edac_csrow_channel_corrected_errors_total", ch.get("ce_count"),
                            dict(labels, channel=ch.get("name"), label=ch.get("label") or ""))


def add_gpu_metrics(metrics, gpus, up=None):
    """GPU ECC samples from the per-GPU dicts of parsers.nvidia_smi.parse_xml."""
    if up is not None:
        metrics.add("dlrack_gpu_ecc_collector_up", 1 if up else 0)
    for gpu in gpus or []:
        if not isinstance(gpu, dict):
            continue
        ids = {"gpu": str(gpu.get("index")), "uuid": gpu.get("uuid") or ""}
        mode = gpu.get("ecc_mode") or {}
        current = mode.get("current")
        metrics.add("dlrack_gpu_ecc_supported", 0 if current is None else 1, ids)
        if current is not None:
            metrics.add("dlrack_gpu_ecc_enabled", 1 if current else 0, ids)
        if mode.get("pending") is not None:
            metrics.add("dlrack_gpu_ecc_pending_enabled", 1 if mode.get("pending") else 0, ids)
        errors = gpu.get("ecc_errors") or {}
        for scope in ("volatile", "aggregate"):
            labels = dict(ids, scope=scope)
            corrected = errors.get(scope + "_corrected")
            uncorrected = errors.get(scope + "_uncorrected")
            metrics.add("dlrack_gpu_ecc_corrected_errors_total",
                        corrected if _is_count(corrected) else None, labels)
            metrics.add("dlrack_gpu_ecc_uncorrected_errors_total",
                        uncorrected if _is_count(uncorrected) else None, labels)
        pages = gpu.get("retired_pages") or {}
        for cause in ("single_bit", "double_bit"):
            value = pages.get(cause)
            metrics.add("dlrack_gpu_retired_pages", value if _is_count(value) else None,
                        dict(ids, cause=cause))
        if pages.get("pending") is not None:
            metrics.add("dlrack_gpu_retired_pages_pending", 1 if pages["pending"] else 0, ids)
        rows = gpu.get("remapped_rows") or {}
        for cause in ("correctable", "uncorrectable"):
            value = rows.get(cause)
            metrics.add("dlrack_gpu_remapped_rows", value if _is_count(value) else None,
                        dict(ids, cause=cause))
        if rows.get("pending") is not None:
            metrics.add("dlrack_gpu_remapped_rows_pending", 1 if rows["pending"] else 0, ids)
        if rows.get("failure") is not None:
            metrics.add("dlrack_gpu_remapped_rows_failed", 1 if rows["failure"] else 0, ids)


def add_amd_gpu_metrics(metrics, gpus, up=None):
    """AMD GPU RAS samples under the same families as NVIDIA's, each with ``vendor="amd"``
    (NVIDIA samples keep their labels: a series without ``vendor`` is NVIDIA). ``gpus``: the
    entries of hw/gpu/amd.py (``ras.blocks`` per RAS block, counted since the driver loaded, so
    scope is volatile; ``retired_pages`` from gpu_vram_bad_pages). Counters the driver does not
    expose give no sample: unknown is never zero. ``up``: whether sysfs was read whole (None: no
    sample, a node without AMD GPUs)."""
    if up is not None:
        metrics.add("dlrack_gpu_ras_collector_up", 1 if up else 0, {"vendor": "amd"})
    for gpu in gpus or []:
        if not isinstance(gpu, dict):
            continue
        ids = {"gpu": str(gpu.get("index")), "uuid": gpu.get("uuid") or "", "vendor": gpu.get("vendor") or "amd"}
        ecc = gpu.get("ecc_enabled")
        metrics.add("dlrack_gpu_ecc_supported", 0 if ecc is None else 1, ids)
        if ecc is not None:
            metrics.add("dlrack_gpu_ecc_enabled", 1 if ecc else 0, ids)
        blocks = (gpu.get("ras") or {}).get("blocks") or {}
        for block in sorted(blocks):
            counts = blocks[block] or {}
            labels = dict(ids, scope="volatile", block=block)
            for family, key in (("dlrack_gpu_ecc_corrected_errors_total", "ce"),
                                ("dlrack_gpu_ecc_uncorrected_errors_total", "ue"),
                                ("dlrack_gpu_ecc_deferred_errors_total", "de")):
                value = counts.get(key)
                metrics.add(family, value if _is_count(value) else None, labels)
        pages = gpu.get("retired_pages") or {}
        for cause in ("retired", "failed"):
            value = pages.get(cause)
            metrics.add("dlrack_gpu_retired_pages", value if _is_count(value) else None,
                        dict(ids, cause="bad_page" if cause == "retired" else "reserve_failed"))
        if _is_count(pages.get("pending")):
            metrics.add("dlrack_gpu_retired_pages_pending", 1 if pages["pending"] else 0, ids)


FAULT_CLASSES = ("application", "driver", "memory", "nvlink", "thermal_power", "bus", "unknown")
FAULT_ACTIONS = ("none", "check_workload", "reset_gpu", "reboot", "service")
MAX_FAULT_GPUS = 64
FAULT_CLOCK_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")


def add_gpu_fault_metrics(metrics, faults):
    """The gpu_faults verdict (gpu_faults.cli.check) as bounded series: GPU x class, GPU x one level."""
    if faults is None:
        return
    metrics.add("dlrack_gpu_faults_collector_up", 0 if faults.get("unreadable") else 1)
    counts = faults.get("since_boot") or {}
    for bus in sorted(counts)[:MAX_FAULT_GPUS]:
        for cls, value in sorted(counts[bus].items()):
            if cls in FAULT_CLASSES and _is_count(value):
                metrics.add("dlrack_gpu_fault_events_total", value, {"gpu": bus, "class": cls})
    gpus = faults.get("gpus") or {}
    for bus in sorted(set(counts) | set(gpus))[:MAX_FAULT_GPUS]:
        action = (gpus.get(bus) or {}).get("action", "none")
        metrics.add("dlrack_gpu_fault_action", FAULT_ACTIONS.index(action) if action in FAULT_ACTIONS else 0, {"gpu": bus})
    counters = faults.get("counters") or {}
    interval = counters.get("interval_s")
    prev = counters.get("previous") or {}
    for bus in sorted(counters.get("gpus") or {})[:MAX_FAULT_GPUS]:
        gpu = counters["gpus"][bus]
        if _is_count(gpu.get("pcie_replays")):
            metrics.add("dlrack_gpu_pcie_replays_total", gpu["pcie_replays"], {"gpu": bus})
            before = (prev.get(bus) or {}).get("pcie_replays")
            if interval and _is_count(before):
                grown = gpu["pcie_replays"] - before if gpu["pcie_replays"] >= before else gpu["pcie_replays"]
                metrics.add("dlrack_gpu_pcie_replays_per_hour", grown * 3600.0 / interval, {"gpu": bus})
        for reason in FAULT_CLOCK_REASONS:
            if isinstance(gpu.get("clock_reasons"), list):
                metrics.add("dlrack_gpu_clock_fault_active", 1 if reason in gpu["clock_reasons"] else 0, {"gpu": bus, "reason": reason})


def gpu_fault_verdict(conf):
    """gpu_faults.cli.check with the collector's own state; None when the package is not installed."""
    try:
        from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.cli import check
    except ImportError:
        return None
    conf = dict(conf)
    conf.pop("counters_state", None)
    verdict = check(conf)
    verdict["unreadable"] = verdict.get("source") is None or any(
        "cannot" in n or "needs root" in n for n in verdict.get("notes", []))
    return verdict


def gpu_fault_counters(xml_text, state_path=None, now=None, nvlink_text=None):
    """The counters beside the log from the collector's nvidia-smi -q -x (and ``nvidia-smi nvlink -e``), rated
    against its previous read (kept in ``state_path``, which the gatherer reads too); None when gpu_faults is
    not installed."""
    try:
        from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults import gather as fault_gather
    except ImportError:
        return None
    prev = fault_gather.read_counter_state(state_path) if state_path else None
    counters = fault_gather.counters_section(xml_text, prev, now=now, nvlink_text=nvlink_text)
    counters["previous"] = (prev or {}).get("gpus") or {}
    if state_path:
        try:
            fault_gather.write_counter_state(state_path, counters["gpus"], now=now)
        except (IOError, OSError) as exc:
            _report_errors(["GPU counters: %s not written (%s): no rates next time" % (state_path, exc)])
    return counters


def render_metrics(edac=None, gpus=None, gpu_up=None, detection=None, uptime_s=None,
                   budget_24h=DEFAULT_BUDGET_24H, now=None, duration_s=None, amd_gpus=None, amd_up=None,
                   gpu_faults=None):
    """The whole textfile as a string (pure: no file or process access)."""
    metrics = _new_metrics()
    findings = assess_ecc(edac, uptime_s=uptime_s, budget_24h=budget_24h)
    add_edac_metrics(metrics, edac, detection=detection, findings=findings, budget_24h=budget_24h)
    add_gpu_metrics(metrics, gpus, up=gpu_up)
    add_amd_gpu_metrics(metrics, amd_gpus, up=amd_up)
    add_gpu_fault_metrics(metrics, gpu_faults)
    metrics.add("dlrack_ecc_collector_last_run_timestamp_seconds",
                float(now if now is not None else time.time()))
    if duration_s is not None:
        metrics.add("dlrack_ecc_collector_duration_seconds", float(duration_s))
    return metrics.render()


# --------------------------------------------------------------------------------------------
# node side: gather, write atomically
# --------------------------------------------------------------------------------------------

def gpus_from_nvidia_smi(command=None, xml_text=None, timeout=60, output_limit=NVIDIA_SMI_OUTPUT_LIMIT):
    """(gpus, up): run ``nvidia-smi -q -x`` (or parse ``xml_text``). (None, None) without it;
    ([], False) when it fails, does not answer within ``timeout`` s or prints more than
    ``output_limit`` bytes."""
    if xml_text is None:
        if not command:
            return None, None
        # the bounded runner: killed with its process group after `timeout` s, stopped past
        # `output_limit` bytes (a wedged driver or endless output is "not up", never a hung timer)
        res = run_bounded([command, "-q", "-x"], timeout=timeout, output_limit=output_limit)
        if res.rc != 0 or res.problem:
            return [], False
        xml_text = res.stdout
    try:
        return parse_xml(xml_text)["gpus"], True
    except (ParseError, ValueError, KeyError, TypeError):
        return [], False


def find_nvidia_smi(path=None):
    if path:
        return path if os.access(path, os.X_OK) else None
    for directory in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) + ["/usr/bin"]:
        candidate = os.path.join(directory, "nvidia-smi")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


MAX_ERROR_LINES = 20


def amd_gpus_from_sysfs(root="/", errors=None):
    """(gpus, up): AMD/Hygon GPUs with their RAS counters from amdgpu sysfs alone (no tool runs).
    ``up`` is None on a node without AMD GPUs, False when the tree or one of the GPUs' files
    could not be read (each named in ``errors``), else True."""
    errors = [] if errors is None else errors
    rd = SysReader(root)
    try:
        gpus = gather_gpus(rd, None, {}, errors, vendors=("amd",))
    except Exception as exc:  # pylint: disable=broad-except  # an odd tree must not stop the host EDAC metrics
        errors.append("amdgpu sysfs under %s: unexpected %s: %s" % (root, type(exc).__name__, exc))
        return None, False
    errors.extend(rd.errors)
    if not gpus:
        return gpus, None
    return gpus, not errors


def _report_errors(errors, stream=None):
    """The AMD read problems on stderr (the journal of the timer's service), bounded and printable."""
    stream = stream or sys.stderr
    for line in errors[:MAX_ERROR_LINES]:
        text = "".join(c if c.isprintable() else "?" for c in str(line))[:300]
        stream.write("dlrack-ecc-collector: %s\n" % text)
    if len(errors) > MAX_ERROR_LINES:
        stream.write("dlrack-ecc-collector: ... and %d more\n" % (len(errors) - MAX_ERROR_LINES))


def collect(root="/", nvidia_smi=None, nvidia_smi_xml=None, budget_24h=DEFAULT_BUDGET_24H,
            virtualization=None, now=None, gpu_faults=None):
    """Gather everything from ``root`` (a live or captured tree) and render the textfile."""
    started = time.time()
    edac = read_edac_sysfs(root)
    detection = detect_host(root, virtualization=virtualization)
    xml_text = None
    if nvidia_smi_xml:
        with open(nvidia_smi_xml) as handle:
            xml_text = handle.read()
    if gpu_faults is not None and nvidia_smi and xml_text is None:
        # one nvidia-smi read for the ECC counters and the fault counters (bounded as gpus_from_nvidia_smi does)
        res = run_bounded([nvidia_smi, "-q", "-x"], timeout=60, output_limit=NVIDIA_SMI_OUTPUT_LIMIT)
        xml_text = res.stdout if res.rc == 0 and not res.problem else ""
    if xml_text == "":
        gpus, up = [], False
    else:
        gpus, up = gpus_from_nvidia_smi(command=nvidia_smi, xml_text=xml_text)
    amd_errors = []
    amd_gpus, amd_up = amd_gpus_from_sysfs(root, amd_errors)
    if amd_up is not None:
        _report_errors(amd_errors)
    faults = gpu_fault_verdict(gpu_faults) if gpu_faults is not None else None
    if faults is not None:
        _report_errors([n for n in faults.get("notes", []) if "cannot" in n or "needs root" in n or "limit" in n])
        if xml_text and up:
            live = nvidia_smi and not nvidia_smi_xml        # the NVLink counters of the GPUs just read, never beside a saved XML
            nvlink = run_bounded([nvidia_smi, "nvlink", "-e"], timeout=60, output_limit=NVIDIA_SMI_OUTPUT_LIMIT) if live else None
            faults["counters"] = gpu_fault_counters(xml_text, gpu_faults.get("counters_state"), now=now,
                                                    nvlink_text=nvlink.stdout if nvlink and nvlink.rc == 0 and not nvlink.problem else None)
    return render_metrics(edac=edac, gpus=gpus, gpu_up=up, detection=detection,
                          uptime_s=read_uptime(root), budget_24h=budget_24h, now=now,
                          duration_s=time.time() - started, amd_gpus=amd_gpus, amd_up=amd_up,
                          gpu_faults=faults)


USAGE = """usage: dlrack-ecc-collector [--root DIR] [--textfile-dir DIR] [--name FILE]
                            [--budget-24h N] [--nvidia-smi PATH|none] [--nvidia-smi-xml FILE]
                            [--virtualization TYPE] [--stdout] [--assess]
                            [--gpu-faults-state FILE|none] [--kernel-log FILE]
Writes dlrack_* ECC metrics atomically to <textfile-dir>/<name> (default %s/%s).
--assess prints the memory.ecc_errors findings as JSON instead. GPU fault events (gpu_faults) are read
from the kernel log after the position kept in --gpu-faults-state (default %s; none: off);
--kernel-log FILE replays a saved log instead (no state written).""" % (
    DEFAULT_TEXTFILE_DIR, DEFAULT_TEXTFILE_NAME, DEFAULT_GPU_FAULTS_STATE)


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    opts = {"root": "/", "textfile-dir": DEFAULT_TEXTFILE_DIR, "name": DEFAULT_TEXTFILE_NAME,
            "budget-24h": str(DEFAULT_BUDGET_24H), "nvidia-smi": None, "nvidia-smi-xml": None,
            "virtualization": None, "gpu-faults-state": DEFAULT_GPU_FAULTS_STATE, "kernel-log": None}
    flags = set()
    while args:
        arg = args.pop(0)
        if arg in ("-h", "--help"):
            sys.stdout.write(USAGE + "\n")
            return 0
        if arg in ("--stdout", "--assess"):
            flags.add(arg[2:])
            continue
        key = arg[2:] if arg.startswith("--") else None
        if key not in opts or not args:
            sys.stderr.write("dlrack-ecc-collector: bad argument %r\n%s\n" % (arg, USAGE))
            return 2
        opts[key] = args.pop(0)
    try:
        budget = float(opts["budget-24h"])
    except ValueError:
        sys.stderr.write("dlrack-ecc-collector: --budget-24h must be a number, got %r\n"
                         % opts["budget-24h"])
        return 2
    if "assess" in flags:
        findings = assess_ecc(read_edac_sysfs(opts["root"]), uptime_s=read_uptime(opts["root"]),
                              budget_24h=budget)
        sys.stdout.write(json.dumps(findings, indent=2, sort_keys=True) + "\n")
        return 0
    smi = None if opts["nvidia-smi"] == "none" else find_nvidia_smi(opts["nvidia-smi"])
    faults = None
    if opts["kernel-log"]:
        faults = {"kernel_log": opts["kernel-log"], "state_file": os.devnull}
    elif opts["gpu-faults-state"] != "none" and opts["root"] == "/":
        faults = {"state_file": opts["gpu-faults-state"], "counters_state": DEFAULT_GPU_COUNTERS_STATE}
    text = collect(root=opts["root"], nvidia_smi=smi, nvidia_smi_xml=opts["nvidia-smi-xml"],
                   budget_24h=budget, virtualization=opts["virtualization"], gpu_faults=faults)
    if "stdout" in flags:
        sys.stdout.write(text)
        return 0
    directory = opts["textfile-dir"]
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        write_atomic(os.path.join(directory, opts["name"]), text)
    except (IOError, OSError) as exc:
        sys.stderr.write("dlrack-ecc-collector: cannot write %s: %s\n"
                         % (os.path.join(directory, opts["name"]), exc))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())  # a command-line entry point, not a module: no exit_json here
