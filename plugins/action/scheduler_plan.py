# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side: which scheduler nodes this run takes out and puts back (plugin_utils/scheduler.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.dlrack.node.plugins.modules.scheduler_plan import DOCUMENTATION
from ansible_collections.dlrack.node.plugins.plugin_utils.argspec import argument_spec, task_args
from ansible_collections.dlrack.node.plugins.plugin_utils.scheduler import PlanError, plan

# The options, their types, choices and defaults: the module's DOCUMENTATION (one place).
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        a = task_args("scheduler_plan", ARGUMENT_SPEC, self._task.args)
        try:
            out = plan(a["reports"], hosts=a.get("hosts"), backend=a["backend"], node_names=a["node_names"],
                       short_names=a["short_names"], max_nodes=a["max_nodes"], max_percent=a["max_percent"],
                       run_id=a.get("run_id"), k8s_nodes=a["k8s_nodes"], modes=a["rule_modes"],
                       group_modes=a["rule_modes_groups"], host_groups=a["host_groups"], untrusted=a["untrusted"],
                       not_before=a.get("not_before"))
        except PlanError as exc:
            raise AnsibleActionFail("scheduler_plan: %s" % exc)
        result.update(out)
        result["changed"] = False
        return result
