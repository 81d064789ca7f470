# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side pre-flight: validate every host of the play once, write the fleet reports."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.dlrack.node.plugins.module_utils.preflight import collect_host_inputs, run_preflight

_SPEC = {
    "hosts": {"type": "list", "elements": "str", "required": True},
    "report_dir": {"type": "path"},
    "fail_on": {"type": "str", "choices": ["error", "warning", "never"], "default": "error"},
    "drift": {"type": "dict"},
}


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
        inputs = {}
        for host in args["hosts"]:
            hv = hostvars.get(host) or {}
            inputs[host] = collect_host_inputs(host, hv)
        out = run_preflight(inputs, report_dir=args["report_dir"], fail_on=args["fail_on"], drift=args.get("drift"))
        result.update(out)
        result["changed"] = False
        return result
