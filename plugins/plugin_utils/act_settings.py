# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduler act's settings, from the inventory and extra vars only (issue 28.1; docs/trust.md).

The act (drain, resume, taint) runs once for the fleet, in a run_once task that Ansible templates
with the variables of the play's first host - whose facts (what a module on its node returned,
also from the jsonfile fact cache of an earlier run) sit above the inventory and the role
defaults. decide() templates the act's options again with the variables of the *admin host*
(``admin_host``: where scontrol or the Kubernetes client runs; ``localhost`` unless
``dlrack_scheduler_host`` says otherwise): its inventory and group variables, the play's and
role's variables and extra vars. ``admin_host`` itself is templated without any host's
variables (extra vars, the play, role defaults). A judged host's variables never reach it.

A host of the play whose facts set a variable with one of PROTECTED_PREFIXES is named (one
sentence: the host, the variables, what to do) and its verdict is not acted on; when the admin
host's own facts set one, the act is refused. Every value is then checked (types, ranges, the
rule modes), one sentence naming the variable when it is wrong.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.dlrack.node.plugins.module_utils.scheduler import modes as rule_modes
from ansible_collections.dlrack.node.plugins.plugin_utils.argspec import validate
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import _plain
from ansible_collections.dlrack.node.plugins.plugin_utils.run_settings import fact_names
from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import console

PROTECTED_PREFIXES = ("dlrack_", "scheduler_", "__dlrack_", "__scheduler_")
# The one fact of ours a node returns (dlrack.node.hw_facts keeps nothing else): data, not a setting.
NODE_FACTS = frozenset(("dlrack_hw_gathered",))
BACKENDS = ("none", "slurm", "kubernetes")
K8S_KEYS = ("kubeconfig", "context", "host", "api_key", "validate_certs", "timeout")
# Where this run's start cannot be read (no /proc: not Linux), a report older than this is refused.
FALLBACK_MAX_AGE_S = 6 * 3600
# The variable behind each option, for the sentences.
VARIABLE = {
    "admin_host": "dlrack_scheduler_host", "backend": "dlrack_scheduler", "become": "dlrack_scheduler_become",
    "check": "dlrack_scheduler_check", "reports": "scheduler_reports", "hosts": "scheduler_hosts",
    "node_names": "scheduler_node_names", "short_names": "scheduler_short_names",
    "max_nodes": "scheduler_max_drain_nodes", "max_percent": "scheduler_max_drain_percent",
    "run_id": "scheduler_run_id", "rule_modes": "scheduler_rule_modes", "rule_modes_groups": "scheduler_rule_modes_groups",
    "scontrol": "scheduler_scontrol", "scontrol_timeout": "scheduler_scontrol_timeout",
    "audit_log": "scheduler_audit_log", "k8s": "scheduler_k8s_*", "deferred": "__dlrack_scheduler_deferred",
}


class ActSettingsError(Exception):
    """One sentence: which setting, what is wrong, what to do."""


def protected(name):
    return isinstance(name, str) and name.startswith(PROTECTED_PREFIXES) and name not in NODE_FACTS


def untrusted_hosts(hostvars, hosts):
    """{host: sentence} for the hosts whose facts (the fact cache: this run's module results and an
    earlier run's cache) set a protected variable."""
    out = {}
    for host, names in sorted(fact_names(hostvars, hosts).items()):
        bad = sorted(console(n) for n in names if protected(n))
        if bad:
            out[host] = ("host %s: its facts set %s - values a module on the node returned; a node cannot set the act's "
                         "settings, so its verdict is not acted on (neither drained nor resumed); clear its cached facts "
                         "(ansible-playbook --flush-cache) and look at the node" % (console(host), ", ".join(bad[:8])))
    return out


def run_started(pid=None, proc="/proc"):
    """When this ansible-playbook started (epoch seconds): the start time of the controller's main
    process (the parent of the worker that runs an action), from /proc; None where unreadable."""
    pid = os.getppid() if pid is None else pid
    try:
        with open(os.path.join(proc, str(pid), "stat")) as f:
            stat = f.read(4096)
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])      # field 22: starttime
        with open(os.path.join(proc, "stat")) as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return btime + ticks / float(os.sysconf("SC_CLK_TCK"))
    except (OSError, IOError, ValueError, IndexError, StopIteration):
        return None


def _raw_args(task):
    from ansible.parsing.mod_args import ModuleArgsParser
    dummy_action, raw_args, dummy_delegate = ModuleArgsParser(task_ds=task.get_ds()).parse(skip_action_validation=True)
    return raw_args


def _templar(loader, variables):
    from ansible.template import Templar
    return Templar(loader=loader, variables=variables)


def _render(templar, raw, option):
    try:
        return _plain(templar.template(raw))
    except Exception as exc:  # pylint: disable=broad-except  # Ansible's template errors: one sentence
        raise ActSettingsError("%s (option %s) cannot be templated with the admin host's variables, the play's and extra "
                               "vars (%s): set it there" % (VARIABLE.get(option, option), option, console(str(exc))[:300]))


def _bool(value, option, default=None):
    if value is None or value == "":
        return default
    try:
        return boolean(value, strict=True)
    except TypeError:
        raise ActSettingsError("%s is %s, not true or false" % (VARIABLE[option], console(repr(value))[:80]))


def _int(value, option, low, high):
    try:
        num = float(value)
    except (TypeError, ValueError):
        num = None
    if isinstance(value, bool) or num is None or num != int(num) or not low <= num <= high:
        raise ActSettingsError("%s is %s: a whole number from %d to %d" % (VARIABLE[option], console(repr(value))[:80], low, high))
    return int(num)


def _strings(value, option):
    if value in (None, ""):
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ActSettingsError("%s must be a list of strings" % VARIABLE[option])
    return list(value)


def check(values, check_mode):
    """The options' rendered values checked into the settings (ActSettingsError: one sentence)."""
    out = {}
    admin = values.get("admin_host")
    if not isinstance(admin, str) or not admin.strip():
        raise ActSettingsError("dlrack_scheduler_host is %s: the admin host's inventory name (default localhost)"
                               % console(repr(admin))[:80])
    out["admin_host"] = admin.strip()
    backend = values.get("backend")
    if backend not in BACKENDS:
        raise ActSettingsError("dlrack_scheduler is %s: use none, slurm or kubernetes" % console(repr(backend))[:80])
    out["backend"] = backend
    if _bool(values.get("deferred"), "deferred", False):
        out["backend"] = "none"           # a later play of this run acts (site.yml)
    out["become"] = _bool(values.get("become"), "become", False)
    out["check"] = _bool(values.get("check"), "check", bool(check_mode))
    out["reports"] = _strings(values.get("reports"), "reports")
    out["hosts"] = _strings(values.get("hosts"), "hosts")
    names = values.get("node_names") or {}
    if not isinstance(names, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
        raise ActSettingsError("scheduler_node_names must be a mapping of inventory host to scheduler node name")
    out["node_names"] = dict(names)
    out["short_names"] = _bool(values.get("short_names"), "short_names", True)
    out["max_nodes"] = _int(values.get("max_nodes"), "max_nodes", 1, 1000000)
    try:
        pct = float(values.get("max_percent"))
    except (TypeError, ValueError):
        pct = None
    if isinstance(values.get("max_percent"), bool) or pct is None or not 0 < pct <= 100:
        raise ActSettingsError("scheduler_max_drain_percent is %s: a number above 0, at most 100"
                               % console(repr(values.get("max_percent")))[:80])
    out["max_percent"] = int(pct) if pct == int(pct) else pct
    run_id = values.get("run_id") or ""
    if not isinstance(run_id, str):
        raise ActSettingsError("scheduler_run_id must be a string (leave it empty: the report's run id)")
    out["run_id"] = run_id
    try:
        out["rule_modes"] = rule_modes.check_modes(values.get("rule_modes"), "scheduler_rule_modes")
        out["rule_modes_groups"] = rule_modes.check_group_modes(values.get("rule_modes_groups"), "scheduler_rule_modes_groups")
    except rule_modes.ModeError as exc:
        raise ActSettingsError(str(exc))
    scontrol = values.get("scontrol")
    if not isinstance(scontrol, str) or not scontrol.strip():
        raise ActSettingsError("scheduler_scontrol must be the path of scontrol on the admin host")
    out["scontrol"] = scontrol
    out["scontrol_timeout"] = _int(values.get("scontrol_timeout"), "scontrol_timeout", 1, 3600)
    audit = values.get("audit_log") or ""
    if not isinstance(audit, str):
        raise ActSettingsError("scheduler_audit_log must be a path on the admin host (empty: no log)")
    out["audit_log"] = audit
    k8s = values.get("k8s") or {}
    if not isinstance(k8s, dict) or set(k8s) - set(K8S_KEYS):
        raise ActSettingsError("scheduler_k8s_* settings: unknown key(s) %s" % ", ".join(sorted(set(k8s) - set(K8S_KEYS))))
    out["k8s"] = {"kubeconfig": k8s.get("kubeconfig") or "", "context": k8s.get("context") or "",
                  "host": k8s.get("host") or "", "api_key": k8s.get("api_key") or "",
                  "validate_certs": _bool(k8s.get("validate_certs"), "k8s", True),
                  "timeout": _int(k8s.get("timeout", 60), "k8s", 1, 3600)}
    return out


def decide(task, loader, task_vars, spec, check_mode):
    """{settings, untrusted, host_groups, not_before} for the act (see the module docstring)."""
    raw = _raw_args(task)
    unknown = sorted(set(raw) - set(spec))
    if unknown:
        raise ActSettingsError("unsupported option(s) %s" % ", ".join(unknown))
    manager = task.get_variable_manager()
    inventory = manager._inventory  # pylint: disable=protected-access  # the inventory the run uses
    play = task.get_play()
    # where the act runs: decided without any host's variables
    base = manager.get_vars(play=play, task=task, include_hostvars=False)
    admin = _render(_templar(loader, base), raw.get("admin_host"), "admin_host")
    host = inventory.get_host(admin) if isinstance(admin, str) and admin else None
    if host is None:
        raise ActSettingsError("dlrack_scheduler_host is %s, which is not a host of the inventory: name the scheduler's "
                               "admin host (where scontrol or the Kubernetes client runs), or leave it at localhost"
                               % console(repr(admin))[:120])
    hostvars = task_vars.get("hostvars", {})
    admin_facts = untrusted_hosts(hostvars, [host.name])
    if admin_facts:
        raise ActSettingsError("the admin host's own facts set the act's settings, so nothing is acted on: %s"
                               % admin_facts[host.name])
    context = manager.get_vars(play=play, host=host, task=task, include_hostvars=False)
    templar = _templar(loader, context)
    values = {}
    for option in spec:
        if option not in raw:
            values[option] = spec[option].get("default")
            continue
        if option == "reports":
            # this run's report paths come from the play (site.yml) or a registered result (drift.yml,
            # acceptance): where the admin host cannot template them, the task's own value (a registered
            # variable is above any fact) is taken; the plan still reads only this run's files
            try:
                values[option] = _render(templar, raw[option], option)
            except ActSettingsError:
                values[option] = _plain(task.args.get("reports"))
            continue
        values[option] = _render(templar, raw[option], option)
    if values.get("check") == "":
        values["check"] = None                # unset: the run's own --check
    # the types of the module's DOCUMENTATION (one place), then the ranges and the modes
    checked, errors = validate(spec, values)
    if errors:
        named = sorted(set(VARIABLE[o] for o in VARIABLE if any(("'%s'" % o) in e or ("%s " % o) in e for e in errors)))
        raise ActSettingsError("%s%s" % ("; ".join(console(e) for e in errors)[:600],
                                         (": set " + ", ".join(named)) if named else ""))
    settings = check(checked, check_mode)
    # this run's hosts: the inventory's (the play's under --limit is a subset; a report of this run names
    # no other host), never a report's list
    play_hosts = [h for h in ((task_vars.get("groups") or {}).get("all") or []) if isinstance(h, str)]
    if settings["hosts"]:
        wanted = set(settings["hosts"])
        play_hosts = [h for h in play_hosts if h in wanted]
    settings["hosts"] = play_hosts
    groups = {}
    for name in play_hosts:
        entry = inventory.get_host(name)
        groups[name] = sorted(g.name for g in (entry.get_groups() if entry else ()) if g.name not in ("all", "ungrouped"))
    started = run_started()
    return {"settings": settings, "untrusted": untrusted_hosts(hostvars, play_hosts), "host_groups": groups,
            "not_before": started if started is not None else time.time() - FALLBACK_MAX_AGE_S}
