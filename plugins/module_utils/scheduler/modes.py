# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rule modes: which rule may act (drain a Slurm node, taint a Kubernetes Node, fail the gate).

A rule is in one of three modes:

- ``enforce``: its failure acts (the pre-flight gate fails, the scheduler act drains/taints);
- ``shadow``: its failure is reported, counted and logged as "would drain" / "would fail", and
  nothing acts on it - the way a new rule earns the right to drain (NVSentinel's store-only mode,
  Meta GCM's per-check killswitch);
- ``off``: the rule is neither judged for the act nor reported by it.

Defaults: the rules that acted before modes existed (collection 0.1.0, ``ENFORCED_SINCE_0_1``)
are enforced; every other rule id - each rule added since, on the controller or on the node -
starts in shadow until the operator enforces it. The operator sets modes run-wide
(``dlrack_rule_modes: {gpu.xid: enforce}``) and per inventory group
(``dlrack_rule_modes_groups: {rack_b: {gpu.xid: shadow}}``); a key may end in ``.*`` for every
rule of an area (``acceptance.*``). Where a host's groups disagree, the mode that acts least wins
(off, then shadow, then enforce): a group can always hold a rule back, never push it forward past
another group's choice.

Standard library only, Python 3.6+ (shipped to the nodes with the health check).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

MODES = ("enforce", "shadow", "off")
_CAUTION = {"off": 0, "shadow": 1, "enforce": 2}
_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}(\.[a-z0-9_-]{1,63})*(\.\*)?$")
_GROUP_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")

# The rules that drained before rule modes existed: the pre-flight's error rules, the drift and
# acceptance verdicts and the node health check's rules of collection 0.1.0. They keep acting.
ENFORCED_SINCE_0_1 = frozenset((
    "inventory.schema", "gpu.present", "cpu.cores_exceed_gpus", "cpu.pcie_lanes", "gpu.pcie_link",
    "memory.exceeds_vram", "memory.ecc", "memory.edac_active", "memory.ecc_errors", "memory.numa_balanced",
    "storage.nvme_hot_cache", "storage.hdd_cold_archive", "gpu.vram_for_workload", "gpu.interconnect",
    "gpu.ecc_mode", "inventory.matches_declared",
    # the pre-flight's stand-in ids for a failing host without rule ids, drift and acceptance
    "preflight", "drift.drifted", "drift.error", "acceptance", "acceptance.*",
    # the node's own health check (programs/health_check.py) in 0.1.0
    "gpu.ecc_errors", "storage.hot_tier_mounted",
))
# site.provisioned (a host site.yml could not provision) is new since 0.1.0 and starts in shadow like every
# new id: a provisioning step that fails on every host (a bad role default) must not drain the partition.


class ModeError(ValueError):
    """One sentence: which setting, what is wrong, what to write instead."""


def default_mode(rule):
    """The mode of ``rule`` when the operator has not set one."""
    if rule in ENFORCED_SINCE_0_1:
        return "enforce"
    area = rule.split(".", 1)[0] + ".*"
    return "enforce" if area in ENFORCED_SINCE_0_1 else "shadow"


def check_modes(value, variable="dlrack_rule_modes"):
    """``value`` (a mapping rule id or ``area.*`` -> mode) checked; returns a plain dict. None or
    empty: {}. ModeError names the variable, the key and the fix."""
    if value in (None, "", {}):
        return {}
    if not isinstance(value, dict):
        raise ModeError("%s must be a mapping of rule id to enforce, shadow or off (got %s)"
                        % (variable, type(value).__name__))
    out = {}
    for key, mode in value.items():
        if not isinstance(key, str) or not _KEY_RE.match(key):
            raise ModeError("%s: %s is not a rule id (area.what, or area.* for every rule of an area)"
                            % (variable, ascii(key)[:80]))
        if mode not in MODES:
            raise ModeError("%s.%s is %s: use enforce, shadow or off" % (variable, key, ascii(mode)[:80]))
        out[key] = mode
    return out


def check_group_modes(value, variable="dlrack_rule_modes_groups"):
    """``value`` (group name -> mapping as for check_modes) checked; returns a plain dict."""
    if value in (None, "", {}):
        return {}
    if not isinstance(value, dict):
        raise ModeError("%s must be a mapping of inventory group to {rule id: mode} (got %s)"
                        % (variable, type(value).__name__))
    out = {}
    for group, modes in value.items():
        if not isinstance(group, str) or not _GROUP_RE.match(group):
            raise ModeError("%s: %s is not an inventory group name" % (variable, ascii(group)[:80]))
        out[group] = check_modes(modes, "%s.%s" % (variable, group))
    return out


def _lookup(modes, rule):
    if rule in modes:
        return modes[rule]
    area = rule.split(".", 1)[0] + ".*"
    return modes.get(area)


def mode_of(rule, modes=None, group_modes=None, groups=()):
    """The mode of ``rule`` for a host in ``groups``: a group's setting (the least acting of the
    host's groups that set one), else the run-wide ``modes``, else the default."""
    found = [m for m in (_lookup((group_modes or {}).get(g) or {}, rule) for g in groups or ()) if m]
    if found:
        return min(found, key=lambda m: _CAUTION[m])
    return _lookup(modes or {}, rule) or default_mode(rule)


def split(rules, modes=None, group_modes=None, groups=()):
    """``rules`` (failing rule ids of one host) split by mode: (enforced, shadowed); ``off`` rules
    are dropped."""
    enforced, shadowed = [], []
    for r in rules:
        m = mode_of(r, modes, group_modes, groups)
        if m == "enforce":
            enforced.append(r)
        elif m == "shadow":
            shadowed.append(r)
    return enforced, shadowed
