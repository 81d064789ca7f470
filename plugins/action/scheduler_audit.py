# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side: the act's audit trail (plugin_utils/act_audit.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.dlrack.node.plugins.modules.scheduler_audit import DOCUMENTATION
from ansible_collections.dlrack.node.plugins.plugin_utils.act_audit import AuditError, records, write
from ansible_collections.dlrack.node.plugins.plugin_utils.argspec import argument_spec, task_args

ARGUMENT_SPEC = argument_spec(DOCUMENTATION)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        a = task_args("scheduler_audit", ARGUMENT_SPEC, self._task.args)
        plan = dict(a["plan"], backend=a["plan"].get("backend") or a.get("backend"))
        recs = records(plan, a["results"], a["check"])
        try:
            count, prom = write(a["log"], recs)
        except AuditError as exc:
            raise AnsibleActionFail("scheduler_audit: %s" % exc)
        result.update(changed=False, lines=count, log=a["log"], textfile=prom)
        return result
