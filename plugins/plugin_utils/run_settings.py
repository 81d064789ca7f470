# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The settings of a fleet-wide controller task that runs once (run_once), read from where the
operator sets them and not from the first host (issue 18.2; docs/trust.md).

Ansible templates a run_once task's options with the variables of the play's first host, so that
host's own ``dlrack_fail_on`` (its host_vars) or its report directory would decide for the whole
fleet, and a fact its node returned would too. settle() works the task's options out again:

- fail_on: a host's own value (its inventory, extra vars) decides that host's verdict only; every
  other host gets the run's value - the option templated without any host's variables (the play's
  and role's variables, extra vars) when the first host has its own. An own value that is no level
  is that host's error.
- report_dir: run-wide. When the hosts' own variables give it different values (some hosts' group
  or host_vars), the run stops naming the variable and the hosts; one value for every host (extra
  vars, the play, group_vars/all) is one setting.
- a host whose facts (what a module on its node returned) set one of these variables, or any of
  ``protected``, is named: its verdict cannot be trusted, and its facts never decide for the run.

The acceptance report uses it (plugins/action/acceptance_report.py); the pre-flight has the same
rules in plugins/action/preflight_report.py.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleError

from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import HostView, SettingsError, _plain, _short
from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import console, setting_error

LEVELS = ("error", "warning", "never")


class Settled(object):
    """What settle() found: ``fail_on`` (the run's), ``host_fail_on`` ({host: its own level, where
    it differs}), ``host_errors`` ({host: [sentence]}: an own fail_on that is no level, facts that
    set a protected variable) and ``report_dir`` (the run's, None when the task has none)."""

    def __init__(self, fail_on, report_dir):
        self.fail_on = fail_on
        self.report_dir = report_dir
        self.host_fail_on = {}
        self.host_errors = {}


def fact_names(hostvars, hosts):
    """{host: the names of its facts} for the hosts that have any in the fact cache (what modules
    returned: hw_facts, setup...; set_fact's own facts are the playbook's and not listed). Empty
    where the cache cannot be read this way (tests, another ansible-core). The pre-flight's
    action reads them with this too."""
    cache = getattr(getattr(hostvars, "_variable_manager", None), "_fact_cache", None)
    if cache is None:
        return {}
    try:
        cached = set(cache.keys())
    except Exception:  # pylint: disable=broad-except  # a cache plugin that cannot list: read each host
        cached = None
    out = {}
    for host in hosts:
        if cached is not None and host not in cached:
            continue
        try:
            facts = cache.get(host)
        except Exception:  # pylint: disable=broad-except  # no facts (KeyError) or an unreadable entry
            continue
        if isinstance(facts, dict) and facts:
            out[host] = list(facts)
    return out


def template_without_hosts(task, loader, option):
    """The task's option ``option`` templated without any host's variables: the play's and role's
    variables and extra vars (what the operator set for the run). None when the task does not set
    the option; AnsibleError (or anything Ansible raises) when it cannot be templated so."""
    from ansible.parsing.mod_args import ModuleArgsParser
    from ansible.template import Templar

    dummy_action, raw_args, dummy_delegate = ModuleArgsParser(task_ds=task.get_ds()).parse(skip_action_validation=True)
    raw = raw_args.get(option)
    if raw is None:
        return None
    manager = task.get_variable_manager()
    context = manager.get_vars(play=task.get_play(), task=task, include_hostvars=False)
    return _plain(Templar(loader=loader, variables=context).template(raw))


def _view(hostvars, host):
    if hasattr(hostvars, "raw_get"):
        return HostView(hostvars, host)
    return dict(hostvars.get(host) or {})   # plain mappings (unit tests)


def _own(view, names, untrusted, raw=False):
    """(variable, value) of the first of ``names`` that the host's own variables set (not by a
    fact), or (None, None). ``raw``: the untemplated value (compared as text)."""
    for name in names:
        if name in untrusted or name not in view:
            continue
        value = view.raw(name) if raw and isinstance(view, HostView) else view.get(name)
        if value is not None:
            return name, value
    return None, None


def settle(task, loader, task_vars, args, fail_on_vars, report_dir_vars, protected=(), prefix=None):
    """Work out ``args["fail_on"]`` and ``args["report_dir"]`` (the task's options as Ansible
    templated them for the first host) for the run, changing ``args`` in place; returns Settled.
    ``fail_on_vars``/``report_dir_vars``: the variables behind each option, the most specific first
    (e.g. acceptance_fail_on, dlrack_fail_on). A fact whose name is in ``protected`` or starts with
    ``prefix`` makes that host's verdict an error. SettingsError: a run-wide value that cannot be
    settled (the message names the variable)."""
    hosts = list(args.get("hosts") or [])
    hostvars = task_vars.get("hostvars", {})
    first = task_vars.get("inventory_hostname")
    guarded = set(protected) | set(fail_on_vars) | set(report_dir_vars)
    untrusted = {}
    for host, names in fact_names(hostvars, hosts).items():
        bad = sorted(n for n in names if n in guarded or (prefix and str(n).startswith(prefix)))
        if bad:
            untrusted[host] = bad
    views = {}
    for host in hosts:
        try:
            views[host] = _view(hostvars, host)
        except AnsibleError:
            views[host] = {}

    def run_value(option, value, names, force=False):
        if force or (first in views and any(n in views[first] for n in names)):
            try:
                found = template_without_hosts(task, loader, option)
            except Exception as exc:  # pylint: disable=broad-except  # say what to do instead
                raise SettingsError("%s for the run cannot be told apart from host %s's own value (%s): set it with "
                                    "extra vars (-e %s=...)" % (names[-1], console(first), console(exc), names[-1]))
            return value if found is None else found
        return value

    fail_on = run_value("fail_on", args.get("fail_on"), fail_on_vars)
    if fail_on is None:
        fail_on = "error"
    if not isinstance(fail_on, str) or fail_on not in LEVELS:
        raise SettingsError("%s is %s, not one of error, warning, never" % (fail_on_vars[-1], _short(fail_on)))
    args["fail_on"] = fail_on
    out = Settled(fail_on, None)
    for host in hosts:
        mine = set(untrusted.get(host, ()))
        if mine:
            out.host_errors.setdefault(host, []).append(
                "host %s: its facts set %s: values a module on the node returned, and a node cannot set the run's "
                "settings or its own; its verdict cannot be trusted (clear its cached facts: ansible-playbook "
                "--flush-cache, and look at the node)" % (host, ", ".join(sorted(mine))))
        try:
            name, value = _own(views[host], fail_on_vars, mine)
        except AnsibleError as exc:
            name, value = fail_on_vars[-1], "(cannot be templated: %s)" % exc
        if name is None:
            continue
        if not isinstance(value, str) or value not in LEVELS:
            out.host_errors.setdefault(host, []).append(
                "host %s: %s is %s, not one of error, warning, never; set it to one of them (it is judged per "
                "the run's %s)" % (host, name, _short(value), fail_on))
        elif value != fail_on:
            out.host_fail_on[host] = value

    if args.get("report_dir") is not None:
        seen, missing = {}, 0
        for host in hosts:
            try:
                name, value = _own(views[host], report_dir_vars, set(untrusted.get(host, ())), raw=True)
            except AnsibleError:
                name, value = None, None
            if name is None:
                missing += 1
            else:
                seen.setdefault(str(value), (name, host))
        if (seen and missing) or set(untrusted.get(first, ())) & set(report_dir_vars):
            # the option as templated for the first host is its own value (which the hosts without
            # one would not get) or its node's fact: the run's value is the play's
            args["report_dir"] = run_value("report_dir", args["report_dir"], report_dir_vars, force=True)
        values = dict(seen)
        if missing:
            values.setdefault(str(args["report_dir"]), (None, "the other %d host(s)" % missing))
        if len(values) > 1:
            shown = "; ".join("%s on %s" % (val, host) if name is None else "%s=%s on %s" % (name, val, host)
                              for val, (name, host) in sorted(values.items())[:3])
            raise SettingsError(console("%s is a run-wide setting, but the hosts' variables give it different values "
                                        "(%s): set it once for the run - extra vars, the play's vars or group_vars/all"
                                        % (report_dir_vars[-1], shown)))
        why = setting_error(report_dir_vars[-1], args["report_dir"])
        if why:
            raise SettingsError(why)
        out.report_dir = args["report_dir"]
    return out


__all__ = ["SettingsError", "Settled", "fact_names", "settle", "template_without_hosts"]
