# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Acceptance verdicts (controller side): the raw figures of acceptance_measure judged against each
host's thresholds, and the reports DIR/acceptance.json, acceptance.xml (JUnit), acceptance.html.

Every measurement is {name, target, value, unit, expected, verdict, reason, details}; ``expected``
is the minimum the value must reach (same unit), or null when there is nothing to compare with.
Verdicts: ``pass`` (the figure reached its expectation); ``measured`` (a figure with no
expectation to judge it by - one NUMA node and no floor, a tier whose devices are unknown - shown
with the reason it was not judged, never ``pass``); ``warning`` (within ``tolerance`` below
expected, or measured under conditions that make the figure doubtful); ``error`` (further below,
or the measurement failed); ``skip`` (not measured by choice, with the reason: a measurement
disabled, a tier path left empty, a node declared without GPUs, check mode); ``incomplete`` (a
tier or GPU figure that should have been measured was not: fio missing, the tier not mounted, no
GPU driver where GPUs are expected), with the reason and the fix. A host's status is its worst
verdict in the order skip < measured < pass < warning < incomplete < error, where a host whose
figures are all ``measured`` or ``skip`` is ``skip`` (nothing on it was judged: the scheduler
neither drains nor resumes it, and the report never calls it passed): a gate never passes
hardware it did not measure, so ``incomplete`` fails the run under fail_on ``error`` and
``warning`` (``never`` fails nothing).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.dlrack.node.plugins.plugin_utils import verdict
from ansible_collections.dlrack.node.plugins.plugin_utils import reports
from ansible_collections.dlrack.node.plugins.plugin_utils.reports.common import (
    junit_case, junit_classname, junit_xml, now_iso, render)
from ansible_collections.dlrack.node.plugins.plugin_utils.reports.files import ReportWriteError

VERDICTS = ("pass", "measured", "warning", "error", "skip", "incomplete")
_RANK = {"skip": 0, "measured": 1, "pass": 2, "warning": 3, "incomplete": 4, "error": 5}
# A host's status: its worst measurement's verdict, except that a host with nothing judged (all
# its figures measured or skipped) is skip: ``measured`` is a figure's verdict, never a host's.
HOST_STATUSES = ("pass", "warning", "error", "skip", "incomplete")

# PCIe per-lane transfer rate (GT/s) and line-code efficiency by generation: 8b/10b up to Gen2,
# 128b/130b for Gen3-5, FLIT mode (242/256 payload) for Gen6.
PCIE_GT = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
PCIE_EFFICIENCY = {1: 0.8, 2: 0.8, 3: 128.0 / 130, 4: 128.0 / 130, 5: 128.0 / 130, 6: 242.0 / 256}

DEFAULT_THRESHOLDS = {
    "link_fraction": 0.8,            # host<->GPU copies must reach 80% of the link's theoretical rate
    "tolerance": 0.1,                # up to 10% below expected is a warning, further below an error
    "p2p_pair_ratio": 0.8,           # every GPU pair within 80% of the median pair
    "p2p_min_gbps": 0.0,             # optional absolute floor per pair (0 = none)
    "hot_read_gbps_per_gpu": 1.0,
    "hot_write_gbps_per_gpu": 0.5,
    "cold_read_gbps_per_gpu": 0.1,
    "cold_write_gbps_per_gpu": 0.1,
    "gpu_count": 0,                  # GPUs the storage must feed; 0 = the GPUs found (at least 1)
    "memory_node_ratio": 0.8,        # every NUMA node within 80% of the best node
    "memory_min_gbps": 0.0,          # optional absolute floor per node (0 = none)
    "require_persistence": True,
    "expect_gpus": True,             # False: the node is declared without GPUs (dlrack_hw.gpus: [])
    # 4 KiB random read IOPS expected per device of a tier, by kind (docs: roles/acceptance/README.md
    # "Expected random reads"): planning figures well below datasheets (a data-centre NVMe drive
    # is specified at 0.55-1.1 M, a SATA SSD ~90 k, a 7200 rpm HDD 100-200 at QD16), since the tier is read
    # through a filesystem by one fio run; override per kind or per tier (absolute, > 0).
    "rand_iops_per_nvme": 200000.0,
    "rand_iops_per_ssd": 40000.0,
    "rand_iops_per_hdd": 100.0,
    "hot_rand_iops": 0.0,            # > 0: the hot tier's expected IOPS, instead of the device-derived figure
    "cold_rand_iops": 0.0,
    # The small-file read of the hot tier must exceed what the workload needs by this fraction to
    # pass; between need and need x (1 + margin) it is a warning ("barely"), below need an error.
    "smallfile_margin": 0.25,
    # Host memory kept by GPU-pinned buffers (data loader pinned batches, offloaded optimizer
    # states), per GPU: not available to the page cache. A planning figure; set it for the job.
    "pinned_gb_per_gpu": 8.0,
}
_BOOL_THRESHOLDS = ("require_persistence", "expect_gpus")


class AcceptanceError(ValueError):
    pass


def link_rate_gbps(gen, width):
    """Theoretical one-direction data rate of a PCIe link in decimal GB/s (Gen5 x16 = 63.0)."""
    if gen not in PCIE_GT or not width:
        return None
    return PCIE_GT[gen] * width * PCIE_EFFICIENCY[gen] / 8.0


def verdict_for(value, expected, tolerance):
    """pass, warning or error against ``expected``; ``measured`` when there is nothing to judge by."""
    if expected is None:
        return "measured"
    if value >= expected:
        return "pass"
    if value >= expected * (1.0 - tolerance):
        return "warning"
    return "error"


def _m(name, verdict, reason, target=None, value=None, unit=None, expected=None, details=None):
    if verdict not in VERDICTS:
        raise AcceptanceError("unknown verdict %r" % verdict)
    out = {"name": name, "target": target, "value": value, "unit": unit, "expected": expected,
           "verdict": verdict, "reason": reason}
    if details:
        out["details"] = details
    return out


def _r(x):
    return None if x is None else round(float(x), 2)


def thresholds_for(raw_thresholds):
    """Validated thresholds (defaults filled in); AcceptanceError names the bad field."""
    out = dict(DEFAULT_THRESHOLDS)
    for key, value in (raw_thresholds or {}).items():
        if key not in DEFAULT_THRESHOLDS:
            raise AcceptanceError("unknown acceptance threshold %r (known: %s)" % (key, ", ".join(sorted(DEFAULT_THRESHOLDS))))
        if key in _BOOL_THRESHOLDS:
            out[key] = value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes", "on")
            continue
        try:
            num = float(value)
        except (TypeError, ValueError):
            raise AcceptanceError("acceptance threshold %s=%r is not a number" % (key, value))
        if num < 0 or math.isnan(num) or (key in ("link_fraction", "tolerance", "p2p_pair_ratio", "memory_node_ratio") and num > 1):
            raise AcceptanceError("acceptance threshold %s=%r is out of range" % (key, value))
        out[key] = num
    return out


# ------------------------------------------------------------------------------------------ GPU

def _gpu_target(dev):
    return "GPU%s %s" % (dev.get("ordinal"), dev.get("pci_bus_id") or "")


def _judge_copy(name, dev, key, th):
    target = _gpu_target(dev).strip()
    if dev.get("error"):
        return _m(name, "error", dev["error"], target)
    fig = dev.get(key + "_pinned")
    if not fig:
        return _m(name, "error", "no %s figure was measured" % key, target)
    link = dev.get("link") or {}
    gen, width_max, width = link.get("gen_max"), link.get("width_max") or link.get("width"), link.get("width")
    rate = link_rate_gbps(gen, width_max)
    page = dev.get(key + "_pageable") or {}
    details = {"pinned": fig, "pageable": page or None, "link": link or None}
    value = fig["gbps"]
    extra = "; pageable %s GB/s" % page["gbps"] if page.get("gbps") is not None else ""
    if rate is None:
        return _m(name, "warning", "%s GB/s measured; the GPU's PCIe link capability is unknown, so it cannot be judged%s"
                  % (value, extra), target, value, "GB/s", None, details)
    expected = _r(rate * th["link_fraction"])
    verdict = verdict_for(value, expected, th["tolerance"])
    reason = "%s GB/s = %d%% of PCIe Gen%d x%d (%.1f GB/s); expected >= %d%% (%s GB/s)%s" % (
        value, round(100.0 * value / rate), gen, width_max, rate, round(100 * th["link_fraction"]), expected, extra)
    if width and width_max and width < width_max:
        reason += "; the link is negotiated at x%d of x%d: reseat the GPU or check the slot/riser wiring" % (width, width_max)
    return _m(name, verdict, reason, target, value, "GB/s", expected, details)


def _median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2.0


GPU_UNMEASURED_FIX = ("the GPU figures were not measured: install the GPU driver (libcuda.so.1 / libamdhip64), "
                      "or set acceptance_gpu: false (or declare dlrack_hw.gpus: []) for a node without GPUs")


def judge_gpu(gpu, th, check_mode=False):
    names = ("gpu.h2d_bandwidth", "gpu.d2h_bandwidth")
    status = (gpu or {}).get("status", "skip")
    if status != "ok":
        verdict = "error" if status == "error" else "skip"
        reason = (gpu or {}).get("reason") or "not measured"
        if verdict == "skip" and not check_mode and not (gpu or {}).get("opted_out"):
            if th["expect_gpus"]:
                verdict, reason = "incomplete", "%s; %s" % (reason, GPU_UNMEASURED_FIX)
            else:
                reason = "%s; the node is declared without GPUs (dlrack_hw.gpus: [])" % reason
        return [_m(n, verdict, reason) for n in names + ("gpu.p2p_bandwidth",)]
    out = []
    for dev in gpu.get("devices") or []:
        out.append(_judge_copy(names[0], dev, "h2d", th))
        out.append(_judge_copy(names[1], dev, "d2h", th))
    pairs = gpu.get("p2p")
    if len(gpu.get("devices") or []) < 2:
        out.append(_m("gpu.p2p_bandwidth", "skip", "one GPU: no GPU pair to measure"))
    elif pairs is None:
        out.append(_m("gpu.p2p_bandwidth", "skip", "disabled (acceptance_p2p: false)"))
    else:
        good = [p["gbps"] for p in pairs if p.get("gbps") is not None]
        ref = _median(good) if good else None
        for p in pairs:
            target = "GPU%s->GPU%s" % (p.get("src"), p.get("dst")) if "src" in p else None
            if p.get("error") or p.get("gbps") is None:
                out.append(_m("gpu.p2p_bandwidth", "error", p.get("error") or "no figure", target))
                continue
            expected = _r(max(th["p2p_min_gbps"], th["p2p_pair_ratio"] * ref))
            how = "direct peer access" if p.get("peer_access") else "no peer access: copies go through host memory"
            reason = "%s GB/s (%s); expected >= %d%% of the median pair (%s GB/s)%s" % (
                p["gbps"], how, round(100 * th["p2p_pair_ratio"]), _r(ref),
                " and >= %s GB/s" % th["p2p_min_gbps"] if th["p2p_min_gbps"] else "")
            out.append(_m("gpu.p2p_bandwidth", verdict_for(p["gbps"], expected, th["tolerance"]), reason, target,
                          p["gbps"], "GB/s", expected, {k: p.get(k) for k in ("best", "worst", "n", "bytes", "peer_access")}))
    return out


HEALTH_EXPECTED = "no failed/pending row remaps, no volatile uncorrectable ECC, no thermal or power-brake slowdown, persistence on"


def judge_health(health, th):
    status = (health or {}).get("status", "skip")
    if status != "ok":
        return [_m("gpu.health", "error" if status == "error" else "skip", (health or {}).get("reason") or "not measured")]
    out = []
    for g in health.get("gpus") or []:
        errors, warnings, notes = [], [], []
        rr = g.get("remapped_rows") or {}
        if rr.get("failure"):
            errors.append("row remapping failed (the GPU is out of spare rows): replace the GPU")
        if rr.get("pending"):
            warnings.append("a row remap is pending: reset the GPU (or reboot) to apply it")
        if rr.get("uncorrectable"):
            notes.append("%d rows remapped for uncorrectable errors" % rr["uncorrectable"])
        rp = g.get("retired_pages") or {}
        if rp.get("pending"):
            warnings.append("a page retirement is pending: reset the GPU (or reboot)")
        if rp.get("failed"):      # AMD gpu_vram_bad_pages "F": a bad page the driver could not reserve
            errors.append("%d bad page(s) could not be retired (no reserve left): replace the GPU" % rp["failed"])
        for what in g.get("not_checked") or []:
            notes.append("not checked: %s" % what)
        if g.get("ecc_volatile_uncorrected"):
            errors.append("%d volatile uncorrectable ECC errors since the driver loaded" % g["ecc_volatile_uncorrected"])
        hw_faults = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
        faults = [r for r in g.get("throttle_active") or [] if r in hw_faults]
        if faults:
            errors.append("clocks held down now by %s: check cooling, power and the PSU/brake signal" % ", ".join(faults))
        hist = {k: v for k, v in (g.get("throttle_counters") or {}).items()
                if k in ("hw_therm_slowdown", "hw_power_brake", "sw_therm_slowdown") and v}
        if hist:
            warnings.append("has throttled since the driver loaded (%s)" % ", ".join(
                "%s %.1f s" % (k, v / 1e6) for k, v in sorted(hist.items())))
        if g.get("persistence_mode") is False and th["require_persistence"]:
            warnings.append("persistence mode is off: enable nvidia-persistenced")
        if g.get("ecc_mode") is False:
            warnings.append("ECC is disabled")
        verdict = "error" if errors else "warning" if warnings else "pass"
        if "checked" in g and not g["checked"] and not errors + warnings:
            verdict = "skip"      # an AMD GPU whose driver exposes no RAS: nothing was read, never a pass
        problems = errors + warnings
        reason = "; ".join(problems + notes) or "healthy"
        out.append(_m("gpu.health", verdict, reason, "GPU%s %s" % (g.get("index"), g.get("pci_bus_id")),
                      "ok" if not problems else "%d problem(s)" % len(problems), None, HEALTH_EXPECTED,
                      {k: g.get(k) for k in ("product_name", "persistence_mode", "remapped_rows", "retired_pages",
                                             "ecc_volatile_uncorrected", "throttle_active", "throttle_counters")
                       + (("vendor", "not_checked") if g.get("vendor") else ())}))
    return out or [_m("gpu.health", "skip", "nvidia-smi lists no GPU")]


def judge_dcgm(dcgm):
    status = (dcgm or {}).get("status", "skip")
    if status == "skip":
        return [_m("gpu.dcgm_diag", "skip", (dcgm or {}).get("reason") or "not run")]
    if status == "error":
        return [_m("gpu.dcgm_diag", "error", dcgm.get("reason") or "dcgmi diag failed")]
    tests = dcgm.get("tests") or []
    by = {s: [t for t in tests if t["status"] == s] for s in ("fail", "warn", "pass", "skip")}
    verdict = "error" if by["fail"] else "warning" if by["warn"] else "pass" if by["pass"] else "skip"
    bad = ["%s %s%s" % (t["name"], t["status"], (": " + "; ".join(t["messages"])) if t["messages"] else "")
           for t in by["fail"] + by["warn"]]
    reason = "; ".join(bad) or "%d test(s) passed, %d skipped" % (len(by["pass"]), len(by["skip"]))
    return [_m("gpu.dcgm_diag", verdict, "dcgmi diag -r %s: %s" % (dcgm.get("level", 1), reason), None,
               "%d pass, %d warn, %d fail" % (len(by["pass"]), len(by["warn"]), len(by["fail"])), None,
               "every test Pass", {"version": dcgm.get("version"), "tests": tests})]


# ------------------------------------------------------------------------------------ storage

def judge_storage(storage, gpus, th, check_mode=False):
    out = []
    n = int(th["gpu_count"]) or max(1, gpus or 0)
    for tier in ("hot", "cold"):
        t = (storage or {}).get(tier) or {"status": "skip", "reason": "not measured"}
        for rw in ("read", "write"):
            name = "storage.%s_%s_throughput" % (tier, rw)
            target = t.get("path") or None
            if t.get("status") != "ok":
                reason = t.get("reason") or "not measured"
                verdict = "error" if t.get("status") == "error" else "skip"
                if not t.get("path") and t.get("status") == "skip":
                    reason = "acceptance_%s_path is empty: the %s tier is not measured" % (tier, tier)
                elif verdict == "skip" and not check_mode:
                    verdict = "incomplete"
                    reason = "%s; the %s tier was not measured: fix that, or set acceptance_%s_path: '' for a node without a %s tier" % (
                        reason, tier, tier, tier)
                out.append(_m(name, verdict, reason, target))
                continue
            fig = t.get(rw) or {}
            value = _r(fig["bytes_per_s"] / 1e9)
            per = th["%s_%s_gbps_per_gpu" % (tier, rw)]
            expected = _r(per * n)
            verdict = verdict_for(value, expected, th["tolerance"])
            reason = "%s GB/s sequential %s (fio, %s, %s jobs); expected >= %s GB/s x %d GPU(s) = %s GB/s" % (
                value, rw, fig.get("ioengine"), fig.get("jobs"), per, n, expected)
            if not t.get("direct"):
                reason += "; buffered I/O (the filesystem refused O_DIRECT): the figure includes the page cache"
                if verdict == "pass":
                    verdict = "warning"
            out.append(_m(name, verdict, reason, target, value, "GB/s", expected,
                          dict(fig, direct=t.get("direct"), size_mb=t.get("size_mb"), runtime_s=t.get("runtime_s"))))
        out.extend(judge_randread(tier, t, th, check_mode))
    return out


def rand_expected(tier, devices, th):
    """(expected IOPS or None, basis sentence) for a tier's 4 KiB random reads."""
    if th["%s_rand_iops" % tier]:
        return th["%s_rand_iops" % tier], "acceptance_%s_rand_iops" % tier
    kinds = {}
    for d in devices or []:
        kinds[d.get("kind")] = kinds.get(d.get("kind"), 0) + 1
    if not kinds:
        return None, "the tier's devices are not known (tmpfs, a network filesystem): set acceptance_%s_rand_iops" % tier
    unknown = sorted(str(k) for k in kinds if k not in ("nvme", "ssd", "hdd"))
    if unknown:
        return None, ("the tier is on %s (no device-derived figure): set acceptance_%s_rand_iops"
                      % (" and ".join("a loop device" if k == "loop" else "a device of unknown kind" for k in unknown), tier))
    total = sum(th["rand_iops_per_%s" % k] * n for k, n in kinds.items())
    basis = " + ".join("%d %s x %s" % (n, k.upper() if k != "hdd" else "HDD", _iops(th["rand_iops_per_%s" % k]))
                       for k, n in sorted(kinds.items()))
    return total, basis


def _iops(x):
    return "{:,.0f}".format(x)


def judge_randread(tier, t, th, check_mode=False):
    name = "storage.%s_randread_iops" % tier
    target = t.get("path") or None
    if t.get("status") != "ok":
        verdict = "error" if t.get("status") == "error" else "skip"
        reason = t.get("reason") or "not measured"
        if not t.get("path") and t.get("status") == "skip":
            reason = "acceptance_%s_path is empty: the %s tier is not measured" % (tier, tier)
        elif verdict == "skip" and not check_mode:
            verdict = "incomplete"
            reason = "%s; the %s tier was not measured" % (reason, tier)
        return [_m(name, verdict, reason, target)]
    fig = t.get("randread")
    if not fig:
        return [_m(name, "skip", "random reads not measured (acceptance_fio_rand_runtime_s: 0)", target)]
    value = round(float(fig.get("iops") or 0.0))
    expected, basis = rand_expected(tier, t.get("devices"), th)
    verdict = verdict_for(value, expected, th["tolerance"])
    lat = "p50 %s us, p99 %s us" % (fig.get("lat_p50_us"), fig.get("lat_p99_us"))
    reason = "%s IOPS 4 KiB random read (%s; fio %s, %s jobs x QD%s)" % (
        _iops(value), lat, fig.get("ioengine"), fig.get("jobs"), fig.get("iodepth"))
    reason += "; expected >= %s IOPS (%s)" % (_iops(expected), basis) if expected is not None else "; not judged: %s" % basis
    if not t.get("direct"):
        reason += "; buffered I/O (the filesystem refused O_DIRECT): the figure includes the page cache"
        if verdict == "pass":
            verdict = "warning"
    details = {k: fig.get(k) for k in ("iops", "bytes_per_s", "lat_p50_us", "lat_p99_us", "lat_mean_us", "jobs",
                                       "iodepth", "block_kb", "ioengine", "runtime_ms")}
    details.update(direct=t.get("direct"), devices=t.get("devices"))
    return [_m(name, verdict, reason, target, value, "IOPS", None if expected is None else round(expected), details)]


# ------------------------------------------------------------------------------- small files

SMALLFILE_REMEDY = ("more NVMe devices in the hot tier (a wider RAID0), a larger page cache (more RAM, so the "
                    "dataset stays cached after the first epoch), or fewer, larger files (pack samples into shards)")


def ios_per_file(file_kb):
    """Random I/Os one small-file read costs: a metadata lookup plus the data in requests of up to
    128 KiB (the block layer's default max_sectors_kb). The basis of the device-derived files/s."""
    return 1 + int(math.ceil(max(float(file_kb), 1.0) / 128.0))


def _workload_need(workload, n):
    wl = workload or {}
    per = wl.get("samples_per_s_per_gpu")
    if not per:
        return None
    return float(per) * n


def judge_smallfiles(tier, sfd, fio_t, gpus, th, workload=None, check_mode=False):
    name = "storage.%s_smallfile_read" % tier
    sfd = sfd or {"status": "skip", "reason": "not measured"}
    target = sfd.get("path") or (fio_t or {}).get("path") or None
    if sfd.get("status") != "ok":
        verdict = "error" if sfd.get("status") == "error" else "skip"
        reason = sfd.get("reason") or "not measured"
        if not target and verdict == "skip":
            reason = "acceptance_%s_path is empty: the %s tier is not measured" % (tier, tier)
        elif verdict == "skip" and not check_mode and not sfd.get("opted_out"):
            verdict = "incomplete"
            reason = "%s; the %s tier's small-file read was not measured" % (reason, tier)
        return [_m(name, verdict, reason, target)]
    cold, warm = sfd.get("cold") or {}, sfd.get("warm") or {}
    value = _r(cold.get("files_per_s") or 0.0)
    n = int(th["gpu_count"]) or max(1, gpus or 0)
    kb = sfd.get("file_kb")
    per_group = "; ".join("%s %s files/s %s MB/s" % (g["name"], g.get("files_per_s"), g.get("mb_per_s"))
                          for g in cold.get("groups") or [])
    dropped = ("on tmpfs the files are the page cache: nothing to drop, cold = warm" if (fio_t or {}).get("fstype") == "tmpfs"
               else "page cache dropped per file" + (" and system-wide" if (sfd.get("cache_drop") or {}).get("system_wide") else ""))
    fig = "%s files/s, %s MB/s cold (%d files of %s KiB, %s; %s); warm %s files/s" % (
        value, cold.get("mb_per_s"), sfd.get("files") or 0, kb, dropped, per_group or "-", warm.get("files_per_s"))
    if sfd.get("files_requested"):
        fig += "; the write stopped at its time limit (%s of %s files written in %s s)" % (
            sfd.get("files"), sfd["files_requested"], sfd.get("write_s"))
    if not cold.get("complete"):
        fig += "; the cold read stopped at its time limit (%s of %s files)" % (cold.get("files"), sfd.get("files"))
    need = _workload_need(workload, n) if tier == "hot" else None
    details = {"files": sfd.get("files"), "file_kb": kb, "write_s": sfd.get("write_s"), "cache_drop": sfd.get("cache_drop"),
               "cold": cold, "warm": warm, "group_kind": sfd.get("group_kind")}
    if sfd.get("files_requested"):
        details["files_requested"] = sfd["files_requested"]
    if need is not None:
        margin = th["smallfile_margin"]
        want = need * (1.0 + margin)
        if value >= want:
            verdict, how = "pass", "feeds the GPUs with margin"
        elif value >= need:
            verdict, how = "warning", "feeds the GPUs barely (less than %d%% headroom): %s" % (round(100 * margin), SMALLFILE_REMEDY)
        else:
            verdict, how = "error", "the GPUs would wait for data (%d%% of what they need): %s" % (
                round(100.0 * value / need) if need else 0, SMALLFILE_REMEDY)
        reason = "%s; the workload needs %s samples/s/GPU x %d GPU(s) = %s files/s (+%d%% margin = %s): %s" % (
            fig, _r((workload or {}).get("samples_per_s_per_gpu")), n, _r(need), round(100 * margin), _r(want), how)
        if (workload or {}).get("sample_kb") and kb and abs(float(workload["sample_kb"]) - float(kb)) > 0.5:
            reason += "; measured with %s KiB files, the workload's samples are %s KiB (set acceptance_smallfile_kb)" % (
                kb, workload["sample_kb"])
        details.update(need_files_per_s=_r(need), margin=margin)
        return [_m(name, verdict, reason, target, value, "files/s", _r(need), details)]
    iops, basis = rand_expected(tier, (fio_t or {}).get("devices"), th)
    if iops is None:
        hint = "" if tier != "hot" else " (or declare dlrack_hw.workload.samples_per_s_per_gpu)"
        reason = "%s; not judged: %s%s" % (fig, basis, hint)
        return [_m(name, "measured", reason, target, value, "files/s", None, details)]
    expected = _r(iops / ios_per_file(kb))
    verdict = verdict_for(value, expected, th["tolerance"])
    reason = "%s; expected >= %s files/s = %s IOPS (%s) / %d I/Os per %s KiB file (no workload declared)" % (
        fig, expected, _iops(iops), basis, ios_per_file(kb), kb)
    return [_m(name, verdict, reason, target, value, "files/s", expected, details)]


def judge_page_cache(raw, gpus, th, workload=None):
    """A note beside the small-file figures: does the declared dataset fit in RAM minus the
    GPU-pinned buffers (so epochs after the first read from the page cache)?"""
    ds = (workload or {}).get("dataset_gb")
    total = raw.get("mem_total_bytes")
    if not ds:
        return []
    if not total:
        return [_m("storage.page_cache", "skip", "the node's memory is not known (MemTotal)")]
    n = int(th["gpu_count"]) or max(1, gpus or 0)
    pinned = th["pinned_gb_per_gpu"] * n
    avail = total / 1e9 - pinned
    fits = avail >= float(ds)
    reason = ("dataset %s GB %s RAM %s GB minus GPU-pinned buffers %s GB (%s GB x %d GPU(s)) = %s GB" % (
        _r(ds), "fits in" if fits else "does not fit in", _r(total / 1e9), _r(pinned), th["pinned_gb_per_gpu"], n, _r(avail)))
    reason += (": after the first epoch the data loader reads from the page cache" if fits else
               ": every epoch reads from the tier, so the small-file figure above is what the GPUs get "
               "(more RAM, or a hot tier that feeds them cold)")
    return [_m("storage.page_cache", "pass" if fits else "warning", reason, None, _r(avail), "GB", _r(ds),
               {"dataset_gb": ds, "mem_total_gb": _r(total / 1e9), "pinned_gb": _r(pinned)})]


# ------------------------------------------------------------------------------------- memory

def judge_memory(memory, th):
    status = (memory or {}).get("status", "skip")
    if status != "ok":
        return [_m("memory.bandwidth", "error" if status == "error" else "skip", (memory or {}).get("reason") or "not measured")]
    nodes = memory.get("nodes") or []
    good = [n["gbps"] for n in nodes if n.get("status") == "ok"]
    best = max(good) if good else None
    out = []
    for n in nodes:
        target = "node%s" % n.get("node")
        if n.get("status") != "ok":
            out.append(_m("memory.bandwidth", "error" if n.get("status") == "error" else "skip", n.get("reason"), target))
            continue
        floor = th["memory_min_gbps"]
        rel = th["memory_node_ratio"] * best if len(good) > 1 else 0.0
        expected = _r(max(floor, rel)) if (floor or len(good) > 1) else None
        basis = []
        if len(good) > 1:
            basis.append("%d%% of the best node (%s GB/s)" % (round(100 * th["memory_node_ratio"]), best))
        if floor:
            basis.append("acceptance_memory_min_gbps %s" % floor)
        reason = "%s GB/s memmove copy (read+write) with %d threads on %d cores" % (n["gbps"], n["threads"], n.get("cores") or n["threads"])
        reason += "; expected >= %s GB/s (%s)" % (expected, " and ".join(basis)) if expected is not None else \
            "; not judged: one NUMA node and no acceptance_memory_min_gbps"
        out.append(_m("memory.bandwidth", verdict_for(n["gbps"], expected, th["tolerance"]), reason, target, n["gbps"],
                      "GB/s", expected, {k: n.get(k) for k in ("threads", "bytes_per_thread", "iterations", "seconds")}))
    return out or [_m("memory.bandwidth", "skip", "no NUMA node with CPUs")]


# -------------------------------------------------------------------------------------- hosts

FAILURE_LIMIT = 1000     # characters of a host's failure message kept in the report
STDERR_LIMIT = 400       # characters of its module's stderr (the start and the end), on one line


def judge_host(raw, thresholds=None, workload=None):
    """(status, measurements) for one host's acceptance_measure result; ``workload`` the host's
    validated dlrack_hw.workload (or dlrack_workload), if any."""
    th = thresholds_for(thresholds)
    if not isinstance(raw, dict):
        ms = [_m("host.measured", "error", "no measurements: the host failed or was unreachable before measuring")]
        return "error", ms
    if "failed" in raw:     # the role recorded why the host could not be measured (node text: data)
        why = raw.get("failed")
        why = (why if isinstance(why, str) else repr(why)).strip().rstrip(".")
        err = " ".join(raw["stderr"].split()) if isinstance(raw.get("stderr"), str) else ""
        if err:             # a module that never ran: Ansible's message says only "No start of json char found"
            half = STDERR_LIMIT // 2
            why += "; the node printed: %s" % (err if len(err) <= STDERR_LIMIT else err[:half] + " ... " + err[-half:])
        why = why if len(why) <= FAILURE_LIMIT else why[:FAILURE_LIMIT] + "... (%d characters)" % len(why)
        ms = [_m("host.measured", "error", "not measured: %s; fix the host (or its connection), then re-run" % why)]
        return "error", ms
    check = bool(raw.get("check_mode"))
    ms = judge_gpu(raw.get("gpu"), th, check) + judge_health(raw.get("health"), th) + judge_dcgm(raw.get("dcgm"))
    ms += judge_storage(raw.get("storage"), raw.get("gpu_count"), th, check)
    if "smallfiles" in raw:
        for tier in ("hot", "cold"):
            ms += judge_smallfiles(tier, (raw.get("smallfiles") or {}).get(tier), (raw.get("storage") or {}).get(tier),
                                   raw.get("gpu_count"), th, workload, check)
        ms += judge_page_cache(raw, raw.get("gpu_count"), th, workload)
    ms += judge_memory(raw.get("memory"), th)
    return host_status(ms), ms


def host_status(measurements):
    worst = max((_RANK[m["verdict"]] for m in measurements), default=0)
    status = [k for k, v in _RANK.items() if v == worst][0]
    return "skip" if status == "measured" else status


def failed_hosts(hosts, fail_on, host_fail_on=None):
    """The hosts that fail per ``fail_on``, or per a host's own value in ``host_fail_on``
    (plugin_utils/verdict.py): incomplete fails like an error."""
    return verdict.failed_hosts("acceptance", {h: r["status"] for h, r in hosts.items()}, fail_on, host_fail_on)


def evaluate(inputs, fail_on="error", skipped=None, host_fail_on=None):
    """inputs: {host: {"raw": acceptance_measure result or None, "thresholds": {...}}} -> report document.
    ``skipped``: {host: reason} for hosts deliberately not measured (e.g. they failed this run's
    pre-flight): verdict skip with the reason, never "error: no measurements". ``host_fail_on``:
    {host: its own fail_on} (its inventory's dlrack_fail_on: that host's verdict only, listed in
    summary.fail_on_hosts). An input's ``settings_errors`` (sentences: an own fail_on that is no
    level, facts that set a setting) make that host an error (measurement ``host.settings``)."""
    hosts = {}
    skipped = skipped or {}
    for host in sorted(inputs):
        item = inputs[host] or {}
        if host in skipped:
            hosts[host] = {"status": "skip", "check_mode": False,
                           "measurements": [_m("host.measured", "skip", skipped[host])]}
            continue
        if item.get("thresholds_error"):
            hosts[host] = {"status": "error", "check_mode": bool((item.get("raw") or {}).get("check_mode")), "measurements": [
                _m("host.workload", "error", "%s: %s; fix the declared workload (the small-file verdict needs it)"
                   % (host, item["thresholds_error"]))]}
            continue
        try:
            status, ms = judge_host(item.get("raw"), item.get("thresholds"), item.get("workload"))
        except AcceptanceError as exc:
            status, ms = "error", [_m("host.thresholds", "error", "%s: %s; fix the host's acceptance_* variables" % (host, exc))]
        if item.get("settings_errors"):
            status, ms = "error", [_m("host.settings", "error", why) for why in item["settings_errors"]] + ms
        hosts[host] = {"status": status, "check_mode": bool((item.get("raw") or {}).get("check_mode")), "measurements": ms}
    summary = {"hosts": len(hosts), "fail_on": fail_on, "generated_at": now_iso()}
    own = dict((h, v) for h, v in (host_fail_on or {}).items() if h in hosts)
    if own:
        summary["fail_on_hosts"] = own
    for v in HOST_STATUSES:
        summary[v] = sum(1 for r in hosts.values() if r["status"] == v)
    per = {}
    for r in hosts.values():
        for m in r["measurements"]:
            per.setdefault(m["name"], dict.fromkeys(VERDICTS, 0))[m["verdict"]] += 1
    summary["measurements"] = per
    summary["figures_measured"] = sum(c["measured"] for c in per.values())
    summary["failed_hosts"] = failed_hosts(hosts, fail_on, own)
    return {"hosts": hosts, "summary": summary}


def summary_lines(doc):
    s = doc["summary"]
    out = ["dlrack.node acceptance: %d host(s): %d pass, %d warning, %d error, %d skip%s%s"
           % (s["hosts"], s["pass"], s["warning"], s["error"], s["skip"],
              ", %d incomplete (not everything was measured)" % s["incomplete"] if s.get("incomplete") else "",
              "; %d figure(s) measured, not judged (no expectation: see their reasons)" % s["figures_measured"]
              if s.get("figures_measured") else "")]
    for host, r in sorted(doc["hosts"].items()):
        out.append("%-7s %s%s" % (r["status"].upper(), host, " (check mode: nothing measured)" if r.get("check_mode") else ""))
        for m in r["measurements"]:
            value = "" if m["value"] is None else " %s%s" % (m["value"], " " + m["unit"] if m["unit"] else "")
            out.append("  %-8s %-32s %-22s%s  %s" % (m["verdict"], m["name"], m["target"] or "", value, m["reason"]))
    return out


# ------------------------------------------------------------------------------------ writers
# The reports package (plugin_utils/reports/) has the writers (JSON, JUnit, HTML: the same as the
# pre-flight's) and the atomic write of the set; only the acceptance-specific layout is here.

def build_junit(doc):
    """acceptance.xml as text: junit_suites() rendered (what reports.junit_writer writes)."""
    suites, name, properties = junit_suites(doc)
    return junit_xml(suites, name=name, properties=properties)


def junit_suites(doc):
    """(suites, name, properties) of acceptance.xml. One testsuite per host, one testcase per measurement: error -> failure, incomplete -> failure
    of type ``incomplete`` (a gate that did not measure must not look green), skip -> skipped,
    measured -> skipped of type ``measured`` (a figure nothing judged is not a passed test), warning -> passed
    with the reason in system-out (JUnit has no warning state)."""
    suites = []
    for host, r in sorted(doc["hosts"].items()):
        cases = []
        for m in r["measurements"]:
            name = m["name"] + (" [%s]" % m["target"] if m["target"] else "")
            result = {"error": "failure", "incomplete": "failure", "skip": "skipped", "measured": "skipped"}.get(m["verdict"], "passed")
            text = "value: %s %s\nexpected: %s" % (m["value"], m["unit"] or "", m["expected"]) if result == "failure" else None
            message = m["reason"] if result != "passed" else None
            if m["verdict"] == "measured":
                message = "measured, not judged: %s" % m["reason"]
            kind = {"incomplete": "incomplete", "measured": "measured"}.get(m["verdict"], "error" if result == "failure" else None)
            cases.append(junit_case(junit_classname(host, "acceptance"), name, result, message=message, kind=kind,
                                    text=text,
                                    system_out="[%s] %s" % (m["verdict"], m["reason"]) if result == "passed" else None))
        suites.append({"name": host, "cases": cases})
    return suites, "dlrack.node acceptance", None


_CLASS = {"pass": "pass", "measured": "meas", "warning": "warn", "error": "fail", "skip": "skip", "incomplete": "inc"}


def _html_rows(measurements):
    """(measurement, value with unit, expected with unit) for the template's rows."""
    rows = []
    for m in measurements:
        value = None if m["value"] is None else "%s %s" % (m["value"], m["unit"] or "")
        exp = m["expected"] if m["expected"] is None or not m["unit"] else ">= %s %s" % (m["expected"], m["unit"])
        rows.append((m, value, exp))
    return rows


def build_html(doc, title="dlrack.node acceptance report"):
    """acceptance.html as text: html_page() rendered (what reports.html_writer writes)."""
    template, context = html_page(doc, title)
    return render(template, **context)


def html_page(doc, title="dlrack.node acceptance report"):
    """(template, context) of the acceptance page (reports/templates/acceptance.html.j2)."""
    hosts = [(host, dict(r, rows=_html_rows(r["measurements"]))) for host, r in sorted(doc["hosts"].items())]
    return "acceptance.html.j2", dict(title=title, summary=doc["summary"], hosts=hosts,
                                      cards=[(v, _CLASS[v]) for v in HOST_STATUSES], classes=_CLASS)


def report_set(doc):
    """The acceptance report set (reports.ReportSet) of an evaluate() document."""
    return reports.ReportSet("acceptance", doc=lambda: doc, junit=lambda: junit_suites(doc), page=lambda: html_page(doc))


def write_reports(report_dir, doc, prefix="acceptance", only=None):
    """Write <prefix>.<format> for every registered format (reports.WRITERS: strict JSON, JUnit,
    HTML; ``only``: some of them) as one set (reports.write_set); return their paths by format.
    ReportWriteError names the directory when it cannot be written."""
    return reports.write_set(report_dir, report_set(doc), prefix, only=only)


__all__ = ["AcceptanceError", "ReportWriteError", "evaluate", "judge_host", "link_rate_gbps", "summary_lines", "write_reports"]
