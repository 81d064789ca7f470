# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side: the scheduler act's settings from the inventory and extra vars only
(plugins/modules/scheduler_settings.py; plugin_utils/act_settings.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.dlrack.node.plugins.modules.scheduler_settings import DOCUMENTATION
from ansible_collections.dlrack.node.plugins.plugin_utils.act_settings import ActSettingsError, decide
from ansible_collections.dlrack.node.plugins.plugin_utils.argspec import argument_spec

ARGUMENT_SPEC = argument_spec(DOCUMENTATION)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        # the check mode this task inherits (the run's --check, or check_mode on the play or the include):
        # the act's default when scheduler_check is unset
        run_check = bool(self._play_context.check_mode)
        try:
            out = decide(self._task, self._loader, task_vars or {}, ARGUMENT_SPEC, run_check)
        except ActSettingsError as exc:
            # the task is no_log (the result holds the Kubernetes token): the sentence is shown by the
            # role's next task, which fails with it
            result.update(changed=False, error="scheduler_settings: %s" % exc, settings={"backend": "none"})
            return result
        result.update(out)
        result["changed"] = False
        return result
