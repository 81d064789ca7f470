# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory-error policy (rule ``memory.ecc_errors``): EDAC counters -> findings.

Standard library only. Used by the node-side ECC collector (``ecc_metrics``, which turns the
verdict into ``dlrack_edac_status``) and by the controller's rule engine (``plugin_utils.rules``):
one policy, two callers.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

RULE = "memory.ecc_errors"
DEFAULT_BUDGET_24H = 9          # NHC's mcelog default: 9 corrected errors per 24 h
DAY = 86400.0


def is_count(value):
    """A counter value: a non-negative int (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _finding(severity, observed, required, message, remedy):
    return {"rule": RULE, "severity": severity, "observed": observed, "required": required,
            "message": message, "remedy": remedy}


def _budget(budget_24h):
    try:
        budget = float(budget_24h)
    except (TypeError, ValueError):
        return float(DEFAULT_BUDGET_24H)
    if budget < 0 or math.isnan(budget) or math.isinf(budget):
        return float(DEFAULT_BUDGET_24H)
    return budget


def _window(edac_summary, uptime_s):
    """Seconds over which the counters accumulated: the uptime, else the oldest counter reset."""
    window = None
    if uptime_s is not None:
        try:
            window = float(uptime_s)
        except (TypeError, ValueError):
            window = None
        if window is not None and not 0 <= window < float("inf"):
            window = None
    if window is None:
        resets = [mc.get("seconds_since_reset") for mc in edac_summary.get("mcs") or []
                  if isinstance(mc, dict)]
        resets = [r for r in resets if is_count(r)]
        if resets:
            window = float(max(resets))
    return window


def _no_edac():
    return _finding(
        "warning", "unknown (no EDAC memory controller)", "EDAC counters readable",
        "no EDAC memory controller is registered, so memory errors are not counted: the "
        "ECC state is unknown, not healthy",
        "apply the dlrack.node.ecc_monitor role (loads the platform EDAC driver: i10nm_edac, "
        "skx_edac, sb_edac, amd64_edac or ghes_edac); on a VM or container check the host")


def _uncorrected(ue, where):
    return _finding(
        "error", "%d uncorrected" % ue, "0 uncorrected",
        "%d uncorrected memory error(s) counted by EDAC%s: data was corrupted or a process "
        "was killed" % (ue, where.get("ue", "")),
        "drain the node, find the DIMM (ras-mc-ctl --errors, dlrack_edac_dimm_* metrics) "
        "and replace it; then reset the counters or reboot")


def _corrected(ce, window, budget, where):
    """A warning when the corrected rate is above the budget, else None.

    The rate is ``corrected * 86400 / max(window, 86400)``: within the first day the raw count is
    compared with the budget (no extrapolation of one error in ten minutes to 144 a day); when
    the window is unknown the raw count is used as well."""
    rate = ce * DAY / max(window, DAY) if window else float(ce)
    if rate <= budget:
        return None
    span = ("over %.1f h" % (window / 3600.0)) if window else "since an unknown time"
    return _finding(
        "warning", "%d corrected %s (%.1f per 24 h)" % (ce, span, rate), "<= %g corrected per 24 h" % budget,
        "corrected memory errors above the budget%s: a DIMM is degrading" % where.get("ce", ""),
        "watch dlrack_edac_dimm_corrected_errors_total; schedule the DIMM's replacement "
        "before errors become uncorrected")


def _unreadable(edac_summary):
    return _finding(
        "warning", "unknown (EDAC counters unreadable)", "EDAC counters readable",
        "EDAC has %s memory controller(s) but no readable error counter" % edac_summary.get("controllers"),
        "check /sys/devices/system/edac/mc/mc*/ce_count and the EDAC driver")


def _holds(edac_summary, ce, ue, budget):
    if not is_count(ce):
        observed = "%d uncorrected, corrected unknown" % ue
    else:
        observed = "%d corrected, %s uncorrected" % (ce, ue if is_count(ue) else "unknown")
    return _finding(
        "info", observed, "0 uncorrected, <= %g corrected per 24 h" % budget,
        "memory errors within budget (%s memory controller(s), driver %s)" % (
            edac_summary.get("controllers"), edac_summary.get("driver") or "unknown"),
        None)


def assess_ecc(edac_summary, uptime_s=None, budget_24h=DEFAULT_BUDGET_24H):
    """Judge EDAC counters against the thresholds; returns a non-empty list of findings.

    ``edac_summary``: ``dlrack_hw.memory.edac`` ({driver, controllers, corrected, uncorrected})
    or a full ``edac.read_edac_sysfs`` result, or None (no EDAC). ``uptime_s``: seconds over
    which the counters accumulated (host uptime); when None, the largest per-mc
    ``seconds_since_reset`` of a full result is used. ``budget_24h``: corrected errors allowed
    per 24 h (NHC's mcelog default 9).

    Each finding is ``{rule: "memory.ecc_errors", severity, observed, required, message,
    remedy}`` with severity ``error`` (uncorrected > 0), ``warning`` (corrected rate above the
    budget, or counters unknown: no EDAC is "unknown", never healthy) or ``info`` (the rule holds,
    one finding saying why, as the rule engine reports passes).
    """
    budget = _budget(budget_24h)
    if not isinstance(edac_summary, dict) or not edac_summary.get("controllers"):
        return [_no_edac()]
    ue = edac_summary.get("uncorrected")
    ce = edac_summary.get("corrected")
    where = _worst_places(edac_summary)
    findings = [_uncorrected(ue, where)] if is_count(ue) and ue > 0 else []
    if is_count(ce):
        high = _corrected(ce, _window(edac_summary, uptime_s), budget, where)
        findings.extend([high] if high else [])
    elif not findings and not is_count(ue):
        findings.append(_unreadable(edac_summary))
    return findings or [_holds(edac_summary, ce, ue, budget)]


def _worst_places(full):
    """' (mc0 dimm3 "CPU_SrcID#0_Ha#0_Chan#1_DIMM#0")' for the DIMM with most errors, if known."""
    out = {}
    for key, field in (("ce", "ce_count"), ("ue", "ue_count")):
        best = None
        for mc in full.get("mcs") or []:
            if not isinstance(mc, dict):
                continue
            for dimm in (mc.get("dimms") or []) + (mc.get("csrows") or []):
                if not isinstance(dimm, dict):
                    continue
                count = dimm.get(field)
                if is_count(count) and count > 0 and (best is None or count > best[0]):
                    best = (count, mc.get("name"), dimm.get("name"), dimm.get("label"))
        if best:
            label = ' "%s"' % best[3] if best[3] else ""
            out[key] = " (most on %s %s%s: %d)" % (best[1], best[2], label, best[0])
    return out


def status_from_findings(findings):
    """ok / warning / error / unknown for the dlrack_edac_status gauge."""
    severities = [f.get("severity") for f in findings or []]
    if "error" in severities:
        return "error"
    for f in findings or []:
        if f.get("severity") == "warning" and str(f.get("observed", "")).startswith("unknown"):
            return "unknown"
    if "warning" in severities:
        return "warning"
    return "ok"
