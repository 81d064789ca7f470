# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side: which scheduler nodes this run takes out and puts back (plugin_utils/scheduler.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import _plain
from ansible_collections.dlrack.node.plugins.plugin_utils.scheduler import PlanError, plan

_SPEC = {
    "reports": {"type": "list", "elements": "path", "required": True},
    "hosts": {"type": "list", "elements": "str"},
    "backend": {"type": "str", "choices": ["slurm", "kubernetes"], "required": True},
    "node_names": {"type": "dict", "default": {}},
    "short_names": {"type": "bool", "default": True},
    "max_nodes": {"type": "int", "default": 5},
    "max_percent": {"type": "float", "default": 10.0},
    "run_id": {"type": "str"},
    "k8s_nodes": {"type": "list", "elements": "dict", "default": []},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        validation = ArgumentSpecValidator(_SPEC).validate(_plain(dict(self._task.args)))
        if validation.error_messages:
            raise AnsibleActionFail("scheduler_plan: %s" % "; ".join(validation.error_messages))
        a = validation.validated_parameters
        try:
            out = plan(a["reports"], hosts=a.get("hosts"), backend=a["backend"], node_names=a["node_names"],
                       short_names=a["short_names"], max_nodes=a["max_nodes"], max_percent=a["max_percent"],
                       run_id=a.get("run_id"), k8s_nodes=a["k8s_nodes"])
        except PlanError as exc:
            raise AnsibleActionFail("scheduler_plan: %s" % exc)
        result.update(out)
        result["changed"] = False
        if out["over_cap"]:
            result["failed"] = True
            result["msg"] = "scheduler_plan: " + out["over_cap"]
        return result
