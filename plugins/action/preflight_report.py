# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side pre-flight: validate every host of the play once, write the fleet reports."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import (
    DriftFileError, host_view, hosts_to_gather, load_drift, read_host, run_preflight)

_SPEC = {
    "hosts": {"type": "list", "elements": "str", "required": True},
    "report_dir": {"type": "str"},
    "fail_on": {"type": "str", "choices": ["error", "warning", "never"], "default": "error"},
    "drift": {"type": "dict"},
    "drift_file": {"type": "path"},
    "report_prefix": {"type": "str", "default": "report"},
    "select_only": {"type": "bool", "default": False},
    "select_first": {"type": "bool", "default": False},
    "gather": {"type": "bool", "default": False},
    "use_fact_cache": {"type": "bool", "default": False},
    "junit_warnings": {"type": "str", "choices": ["skipped", "failed", "passed"], "default": "skipped"},
}

display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        validation = ArgumentSpecValidator(_SPEC).validate(self._task.args)
        if validation.error_messages:
            raise AnsibleActionFail("preflight_report: %s" % "; ".join(validation.error_messages))
        args = validation.validated_parameters
        hostvars = task_vars.get("hostvars", {})
        if args["select_only"]:
            result["gather_hosts"] = hosts_to_gather(
                ((h, host_view(hostvars, h)) for h in args["hosts"]), args["gather"], args["use_fact_cache"])
            result["changed"] = False
            return result
        report_dir = args.get("report_dir")
        if report_dir is not None:
            # An empty directory setting means a mistake, never "no report": fail before validating.
            if not report_dir.strip():
                raise AnsibleActionFail("dlrack_report_dir is empty: set it to the directory where the reports go "
                                        "(e.g. -e dlrack_report_dir=reports)")
            report_dir = os.path.expanduser(os.path.expandvars(report_dir))
        inputs = {}
        gather_hosts = []
        for host in args["hosts"]:
            inputs[host], gather = read_host(host, host_view(hostvars, host), args["gather"], args["use_fact_cache"])
            if gather:
                gather_hosts.append(host)
        if args["select_first"]:
            # One read of every host's variables serves both steps: validate now unless some
            # host must be gathered first (then the caller gathers and validates again).
            result["gather_hosts"] = gather_hosts
            result["validated"] = not gather_hosts
            if gather_hosts:
                result["changed"] = False
                return result
        drift = args.get("drift")
        if args.get("drift_file"):
            try:
                drift = load_drift(args["drift_file"], args["hosts"])
            except DriftFileError as exc:
                raise AnsibleActionFail(str(exc))
        out = run_preflight(inputs, report_dir=report_dir, fail_on=args["fail_on"], drift=drift,
                            prefix=args["report_prefix"], junit_warnings=args["junit_warnings"])
        result["changed"] = False
        if out.get("report_error"):
            # The verdicts exist even though the files do not: print them, then fail naming the path
            # (without dumping the whole fleet's result a second time).
            display.display(out["text"])
            result.update(failed=True, msg=out["report_error"], failed_hosts=out["failed_hosts"])
            return result
        result.update(out)
        return result
