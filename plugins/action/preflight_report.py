# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side pre-flight: validate every host of the play once, write the fleet reports."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.validation import check_type_path
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.dlrack.node.plugins.plugin_utils import fastpath

# Before the imports below: loading them allocates enough to start a full garbage collection of
# everything ansible-playbook holds (0.18 s for 2,000 hosts), which the fast path's freeze spares it.
CONTROLLER_HEAP_FROZEN = fastpath.controller_loaded()

from ansible_collections.dlrack.node.plugins.modules.preflight_report import DOCUMENTATION  # noqa: E402
from ansible_collections.dlrack.node.plugins.plugin_utils.argspec import argument_spec, validate  # noqa: E402
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import (  # noqa: E402
    FAIL_ON_VARS, HOST_VARS, RUN_WIDE_VARS, SETTING_VARS, DriftFileError, SettingsError, drift_verdict, host_fail_on,
    host_notes, hosts_to_gather, load_drift, own_values, read_host, run_preflight, run_wide_conflict, untrusted_facts,
    verdict_host, verdict_message)
from ansible_collections.dlrack.node.plugins.plugin_utils.report_merge import slice_artifact  # noqa: E402
from ansible_collections.dlrack.node.plugins.plugin_utils.run_settings import fact_names  # noqa: E402
from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import console, setting_error  # noqa: E402
from ansible_collections.dlrack.node.plugins.plugin_utils.site_state import site_notes  # noqa: E402

# The options, their types, choices and defaults: the module's DOCUMENTATION (one place).
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)

display = Display()


# The role fills these options from run-wide variables: an error names both.
_VARIABLES = {"report_dir": "dlrack_report_dir", "fail_on": "dlrack_fail_on", "gather": "dlrack_gather",
              "use_fact_cache": "dlrack_use_fact_cache", "drift_file": "dlrack_drift_file",
              "report_prefix": "dlrack_report_prefix", "junit_warnings": "dlrack_junit_warnings",
              "print_summary": "preflight_print_summary"}


def _settings_error(messages):
    """One clear error for bad run-wide settings, naming the variables behind the options."""
    text = "; ".join(messages)
    named = ["%s (variable %s)" % (opt, var) for opt, var in sorted(_VARIABLES.items()) if opt in text]
    return AnsibleActionFail("preflight_report: bad run-wide setting, nothing was validated: %s%s"
                             % (text, ". Check " + ", ".join(named) if named else ""))


# fail_on as Ansible templated it may be the first host's own (bad) value, which is that host's
# finding: the run's value is checked once it is settled (ActionModule._settings).
_SPEC_ANY_FAIL_ON = dict(ARGUMENT_SPEC, fail_on=dict((k, v) for k, v in ARGUMENT_SPEC["fail_on"].items() if k != "choices"))


def _validated_args(task_args, any_fail_on=False):
    args, errors = validate(_SPEC_ANY_FAIL_ON if any_fail_on else ARGUMENT_SPEC, task_args)
    if errors:
        raise _settings_error(errors)
    if not args["select_only"] and args["report_dir"] is not None and not args["report_dir"].strip():
        raise _settings_error(["dlrack_report_dir is empty: set it to the directory where the reports go "
                               "(e.g. -e dlrack_report_dir=reports)"])
    return args


_HOST_VARS = tuple(HOST_VARS) + tuple(v for v in SETTING_VARS if v not in HOST_VARS)
# Read raw (not templated) per host: compared between hosts, never used as they are.
_RAW_VARS = frozenset(v for names in RUN_WIDE_VARS.values() for v in names)


def read_variables(hostvars, hosts):
    """{host: its dlrack_* variables as plain data} (fastpath.read_hosts): a variable that Ansible
    cannot template (an undefined variable inside it) becomes an Unresolved marker, which the rule
    engine reports on that host alone instead of failing the whole run. The run-wide settings'
    variables (_RAW_VARS) are compared between hosts, never used as they are."""
    return fastpath.read_hosts(hostvars, hosts, _HOST_VARS, _RAW_VARS)


def host_variables(hostvars, host):
    """One host's variables (read_variables)."""
    return read_variables(hostvars, [host])[host]


def _run_group(task):
    """The run a slice belongs to: AWX's workflow job id (a sliced job runs as a workflow, each slice
    gets its id as an extra var), from the extra vars only - never a host's variable; None outside AWX."""
    extra = getattr(task.get_variable_manager(), "extra_vars", None) or {}
    for name in ("awx_workflow_job_id", "tower_workflow_job_id"):
        value = extra.get(name)
        if isinstance(value, (int, str)) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()[:64]
    return None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def _settings(self, args, variables, untrusted, task_vars):
        """Settle the run's settings from where the operator sets them, not from the first host
        (issue 18.2): Ansible templates a run_once task's options with the first host's variables,
        so its own dlrack_fail_on, or a fact its node returned, would decide for the whole fleet.
        - fail_on: a host's own preflight_fail_on/dlrack_fail_on (its inventory, extra vars) is
          that host's; the others get the option's value, taken without the first host's own
          (see _host_free) when that host has one. Returns {host: own fail_on}; a host's own value
          that is no level is its error finding (self._bad_fail_on).
        - gather, use_fact_cache: a host's own dlrack_gather/dlrack_use_fact_cache is applied to
          that host (read_host); the run's value is taken without the first host's own.
        - report_dir, junit_warnings: the hosts' own variables must not disagree, else SettingsError;
          when the first host's facts set one, the value is taken without them.
        Changes ``args`` in place."""
        hosts = args["hosts"]
        first = task_vars.get("inventory_hostname")
        first_vars = variables.get(first) or {}
        first_untrusted = set(untrusted.get(first, ()))
        if any(first_vars.get(v) is not None or v in first_untrusted for v in FAIL_ON_VARS):
            args["fail_on"] = self._host_free("fail_on", args["fail_on"], first)
        args["fail_on"] = _validated_args({"hosts": [], "fail_on": args["fail_on"]})["fail_on"]   # the run's: a level
        # dlrack_gather / dlrack_use_fact_cache are per host too (read_host applies a host's own):
        # the first host's own value must not become the run's, which would gather every host
        for option, names in (("gather", ("preflight_gather", "dlrack_gather")),
                              ("use_fact_cache", ("preflight_use_fact_cache", "dlrack_use_fact_cache"))):
            if any(first_vars.get(v) is not None or v in first_untrusted for v in names):
                args[option] = self._host_free(option, args[option], first)
        own, self._bad_fail_on = host_fail_on(variables, untrusted, hosts, args["fail_on"])
        for option in RUN_WIDE_VARS:
            if args.get(option) is None:
                continue
            seen, missing = own_values(variables, untrusted, hosts, option)
            if ARGUMENT_SPEC[option].get("type") == "path":
                # the option is a path (expanded as type path expands it): so are the hosts' own values
                paths = {}
                for value, who in seen.items():
                    paths.setdefault(check_type_path(value), who)
                seen = paths
            if first_untrusted.intersection(RUN_WIDE_VARS[option]) or (seen and missing):
                # the option as templated for the first host is its fact, or its own value that
                # the hosts without one would not get: the run's value is the play's
                args[option] = self._host_free(option, args[option], first)
            conflict = run_wide_conflict(option, seen, missing, args[option])
            if conflict:
                raise SettingsError(conflict)
        for option in ("report_dir", "report_prefix"):
            why = setting_error(_VARIABLES[option], args.get(option))
            if why:
                raise SettingsError(why)
        return own

    def _host_free(self, option, value, first):
        """The task's option ``option`` templated without any host's variables: the play's and
        role's variables and extra vars (what the operator set for the run). ``value`` (the option
        as Ansible templated it for host ``first``) when the option is a plain value in the task;
        SettingsError when it cannot be worked out."""
        try:
            from ansible.parsing.mod_args import ModuleArgsParser
            from ansible.template import Templar

            _action, raw_args, _delegate = ModuleArgsParser(task_ds=self._task.get_ds()).parse(
                skip_action_validation=True)
            raw = raw_args.get(option)
            if raw is None:
                return value
            manager = self._task.get_variable_manager()
            context = manager.get_vars(play=self._task.get_play(), task=self._task, include_hostvars=False)
            found = Templar(loader=self._loader, variables=context).template(raw)
        except Exception as exc:  # pylint: disable=broad-except  # any failure: say what to do instead
            raise SettingsError("%s for the run cannot be told apart from host %s's own value (%s): set it "
                                "with extra vars (-e %s=...)" % (_VARIABLES.get(option, option), console(first),
                                                                 console(exc), _VARIABLES.get(option, option)))
        checked = _validated_args({"hosts": [], option: found})
        return checked[option]

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        fastpath.worker_start()   # this task's forked worker: see plugin_utils/fastpath.py
        args = _validated_args(self._task.args, any_fail_on=True)
        hostvars = task_vars.get("hostvars", {})
        variables = read_variables(hostvars, args["hosts"])
        # What a node's modules returned never sets an input or a setting (issue 18.2): a host whose
        # facts hold such variables gets an error finding, and the run's settings are read without them.
        untrusted = untrusted_facts(fact_names(hostvars, args["hosts"]))
        try:
            own_fail_on = self._settings(args, variables, untrusted, task_vars)
        except SettingsError as exc:
            raise _settings_error([str(exc)])
        if args["select_only"]:
            result["gather_hosts"] = hosts_to_gather(
                ((h, variables[h]) for h in args["hosts"]), args["gather"], args["use_fact_cache"])
            result["changed"] = False
            return result
        report_dir = args.get("report_dir")   # type path: ~ and $VARS expanded; an empty one was refused
        inputs = {}
        notes = {}
        gather_hosts = []
        for host in args["hosts"]:
            inputs[host], gather = read_host(host, variables[host], args["gather"], args["use_fact_cache"], plain=True)
            if gather:
                gather_hosts.append(host)
            found = host_notes(host, variables[host], untrusted.get(host, ()))
            if host in self._bad_fail_on:
                found.append(self._bad_fail_on[host])
            if found:
                notes[host] = found
        if args["select_first"]:
            # One read of every host's variables serves both steps: validate now unless some
            # host must be gathered first (then the caller gathers and validates again).
            result["gather_hosts"] = gather_hosts
            result["validated"] = not gather_hosts
            if gather_hosts:
                result["changed"] = False
                return result
        if args["site_states"]:
            # site.yml's fleet report: each host's final state (provisioned, not provisioned, failed, unreachable)
            site_errors = fastpath.read_hosts(hostvars, args["hosts"], ("__dlrack_site_error",))
            failed_before = (task_vars.get("hostvars", {}).get("localhost") or {}).get("preflight_failed_hosts") or []
            site, dummy = site_notes(args["hosts"], failed_before,
                                     dict((h, v.get("__dlrack_site_error")) for h, v in site_errors.items()))
            for host, found in site.items():
                notes.setdefault(host, []).extend(found)
        drift = args.get("drift")
        if args.get("drift_file"):
            try:
                drift = load_drift(args["drift_file"], args["hosts"])
            except DriftFileError as exc:
                raise AnsibleActionFail(str(exc))
        out = run_preflight(inputs, report_dir=report_dir, fail_on=args["fail_on"], drift=drift,
                            prefix=args["report_prefix"], junit_warnings=args["junit_warnings"],
                            host_fail_on=own_fail_on, notes=notes, run_group=_run_group(self._task),
                            pins=dict((h, variables[h].get("dlrack_versions")) for h in args["hosts"]
                                      if variables[h].get("dlrack_versions") is not None))
        result["changed"] = False
        if out.get("report_error"):
            # The verdicts exist even though the files do not: print them, then fail naming the path
            # (without dumping the whole fleet's result a second time).
            display.display(out["text"])
            result.update(failed=True, msg=out["report_error"], failed_hosts=out["failed_hosts"])
            return result
        if args["print_summary"]:
            # Printed here, not by a debug task: one task less per run over the whole inventory,
            # and the lines read as lines (a debug msg shows them as one escaped string).
            display.display(out["text"])
        result.update(out)
        # The printed text is not returned (the same lines are in `lines`): a fleet's result is
        # registered and copied by Ansible, and every megabyte of it costs time.
        result.pop("text", None)
        # The first failing host that is still in the play (not one that became unreachable while
        # gathering): the verdict play runs there. Computed here, from the play's own host list,
        # instead of templating filters over thousands of names in the role.
        result["verdict_host"] = verdict_host(out["failed_hosts"], task_vars.get("ansible_play_hosts"), avoid=untrusted)
        # The verdict's message and the run's stats are made here, once, from plain lists: a task
        # templating thousands of names (set_stats, a join in the fail message) costs ~0.1 s each.
        where = (out.get("report_paths") or {}).get("html") or args.get("report_dir")
        result["verdict_msg"] = verdict_message(out["failed_hosts"], args["fail_on"], where, own_fail_on)
        if drift is not None:
            # a drift run fails (once, in drift.yml's verdict play) for its drifted and unchecked
            # hosts too, whatever fail_on says (plugin_utils/verdict.py)
            failing, result["verdict_msg"] = drift_verdict(out["failed_hosts"], drift, args["fail_on"], where)
            result["verdict_host"] = verdict_host(failing, task_vars.get("ansible_play_hosts"), avoid=untrusted)
        if args["publish_stats"]:
            # what ansible.builtin.set_stats returns (per_host false, aggregate false). AWX merges
            # the stats of a sliced job's slices by key, the last one winning: each slice's verdict
            # also goes under a key of its own (plugin_utils/report_merge.py, docs/awx.md).
            key, value = slice_artifact(args["hosts"], out["host_status"], out["failed_hosts"], args["fail_on"])
            data = {key: value}
            if out["failed_hosts"]:
                data["dlrack_preflight_failed_hosts"] = list(out["failed_hosts"])
            result["ansible_stats"] = {"data": data, "per_host": False, "aggregate": False}
        return result
