# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node health check's GPU-fault judgement (programs/health_check.py calls ``judge_health`` once).

Reads the kernel log after its saved position (config key ``gpu_faults``: the settings of cli.py,
``{"source": "off"}`` turns it off), judges with the saved state, and adds ``gpu.xid``,
``gpu.nvlink_errors`` and ``gpu.lost`` to the check's failing rules (``gpu.pcie_replays`` needs counter
reads: the ECC collector's job). An event older than the accepted state (``accepted_at`` of
``--accept``) never keeps the node drained. These rules are new since 0.1.0: the check's rule modes
keep them in shadow (reported as 'would drain') until the operator enforces them. A captured tree
(``root`` other than /) has no kernel log: nothing is read there.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

FAULT_RULES = ("gpu.xid", "gpu.nvlink_errors", "gpu.lost")


def judge_health(conf, accepted, now, rules, notes, unknown):
    """Adds to the check's ``rules`` / ``notes`` / ``unknown`` in place; returns the verdict (or None)."""
    raw = conf.get("gpu_faults")
    raw = dict(raw) if isinstance(raw, dict) else raw
    if conf.get("root", "/") not in ("/", "") and not (isinstance(raw, dict) and raw.get("kernel_log")):
        return None
    try:
        from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.cli import ConfigError, check
    except ImportError:
        unknown.update(FAULT_RULES)
        notes.append("GPU faults: not judged (module_utils/gpu_faults is not installed on this node; re-run roles/scheduler)")
        return None
    accepted = accepted if isinstance(accepted, dict) else {}
    accepted_at = accepted.get("accepted_at") if isinstance(accepted.get("accepted_at"), (int, float)) else None
    gpus = [g for g in accepted.get("gpus") or [] if isinstance(g, dict)]
    try:
        verdict = check(raw, accepted_at=accepted_at, gpus=gpus, now=now)
    except ConfigError as exc:
        unknown.update(FAULT_RULES)
        notes.append("GPU faults: not judged: %s (fix gpu_faults in the health check's configuration)" % exc)
        return None
    if verdict.get("source") == "off" or "source" not in verdict:
        notes.extend(verdict.get("notes", []))
        return verdict
    failing = set(r for r in verdict.get("rules", []) if r in FAULT_RULES)
    rules.update(failing)
    notes.extend(verdict.get("notes", []))
    for bus, gpu in sorted((verdict.get("gpus") or {}).items()):
        codes = ", ".join("%s x%s" % (c["code"], c["count"]) for c in gpu.get("codes", [])[:6])
        notes.append("GPU faults: %s: %s (%s)" % (bus, gpu.get("action"), codes))
    if verdict.get("source") == "kmsg" and not verdict.get("events") and any(
            "cannot be" in n or "needs root" in n for n in verdict.get("notes", [])):
        unknown.update(set(FAULT_RULES) - failing)      # neither the journal nor /dev/kmsg could be read
    return verdict


def replay(args, default_config, load_config, config_error):
    """``dlrack-health-check --kernel-log FILE [--config FILE] [--dry-run] [--json]``: the check's own
    gpu_faults settings (overrides, thresholds) applied to a saved log by cli.main, which prints every
    parsed event (vendor, kind, bus id, code, class, action) and the verdict; nothing is written."""
    import json
    import sys
    from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults import cli
    args = list(args)
    config = default_config
    if "--config" in args:
        at = args.index("--config")
        if at + 1 >= len(args):
            sys.stderr.write("dlrack-health-check: --config needs a file\n")
            return 2
        config = args[at + 1]
        del args[at:at + 2]
    try:
        conf = load_config(config)
    except config_error as exc:
        sys.stderr.write("dlrack-health-check: %s\n" % exc)
        return 2
    settings = dict(conf.get("gpu_faults") or {})
    for key in ("state_file", "kernel_log", "source"):
        settings.pop(key, None)
    return cli.main(args + ["--config", json.dumps(settings)])
