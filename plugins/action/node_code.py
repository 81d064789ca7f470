# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's side of dlrack.node.node_code: read the listed files from this collection's
plugins/module_utils (next to this plugin, in a checkout and in an installed collection alike) and
hand their text to the module, which installs them on the node in one run; keep nothing of the
node's answer that Ansible would turn into variables, stats, hosts or groups."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.plugins.action import ActionBase

from ansible_collections.dlrack.node.plugins.module_utils.system.node_code import NodeCodeError, check_path
from ansible_collections.dlrack.node.plugins.plugin_utils.node_result import filter_result

MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")


def read_files(files, root=MODULE_UTILS):
    """{rel: text} of the listed module_utils files, or NodeCodeError naming the first bad one."""
    if not isinstance(files, list) or not files:
        raise NodeCodeError("node_code: files must be a non-empty list of plugins/module_utils paths")
    contents = {}
    for rel in files:
        path = os.path.join(root, *check_path(rel).split("/"))
        if not os.path.isfile(path) or os.path.islink(path):
            raise NodeCodeError("node_code: %s is not a file of this collection's plugins/module_utils: "
                                "fix the role's list of node-side files" % rel)
        with open(path, "rb") as f:
            contents[rel] = f.read().decode("utf-8")
    return contents


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("files", "lib_dir"))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        unknown = sorted(set(args) - self._VALID_ARGS)
        if unknown:
            return dict(result, failed=True, msg="node_code: unsupported option(s) %s (files, lib_dir)" % ", ".join(unknown))
        try:
            args["content"] = read_files(args.get("files"))
        except NodeCodeError as exc:
            return dict(result, failed=True, msg=str(exc))
        # the node's answer without facts, stats, hosts or groups (plugin_utils/node_result.py)
        result.update(filter_result(self._execute_module(module_name="dlrack.node.node_code", module_args=args, task_vars=task_vars),
                                    "node_code"))
        return result
