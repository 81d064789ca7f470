# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fail the run, naming the source, when the inventory is missing or Ansible only partly parsed it."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.dlrack.node.plugins.plugin_utils import controller_heap, known_vars
from ansible_collections.dlrack.node.plugins.plugin_utils.inventory_check import inventory_problems, inventory_warnings

# The entry points' first step: freeze the controller's heap here as preflight_report does when it
# loads (plugin_utils/controller_heap.py), so that this step costs no collection over the inventory.
CONTROLLER_HEAP_FROZEN = controller_heap.freeze()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        if self._task.args:
            raise AnsibleActionFail("inventory_check takes no options")
        manager = getattr(getattr(self._task, "_variable_manager", None), "_inventory", None)
        if manager is None:
            raise AnsibleActionFail("inventory_check: the run's inventory cannot be read (not run by ansible-playbook?)")
        found = inventory_problems(manager, getattr(C, "CACHE_PLUGIN", None))
        if found:
            raise AnsibleActionFail("; ".join(found))
        result.update(changed=False, msg="inventory: every source parsed")
        warnings = inventory_warnings(manager)   # host names Ansible's own output would print raw
        # variables with the collection's prefixes that nothing reads: misspellings (plugin_utils/known_vars.py)
        variables = getattr(self._task, "_variable_manager", None)
        names = known_vars.inventory_variable_names(manager, getattr(variables, "extra_vars", None), self._loader)
        warnings = list(warnings or []) + known_vars.warnings_for(known_vars.unknown_variables(names))
        if warnings:
            result["warnings"] = warnings
        return result
