# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's side of dlrack.node.packages_missing: run the module on the node, and keep nothing of its
answer that Ansible would turn into variables, stats, hosts or groups (plugin_utils/node_result.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dlrack.node.plugins.plugin_utils.node_result import NodeModuleAction


class ActionModule(NodeModuleAction):
    pass
