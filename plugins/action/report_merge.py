# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side merge of the slices' report.json files into one fleet report (docs/awx.md)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.dlrack.node.plugins.modules.report_merge import DOCUMENTATION
from ansible_collections.dlrack.node.plugins.plugin_utils.argspec import argument_spec, task_args
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import verdict_message
from ansible_collections.dlrack.node.plugins.plugin_utils.report import ReportWriteError
from ansible_collections.dlrack.node.plugins.plugin_utils.report_merge import MergeError, merge_report_files

# The options, their types, choices and defaults: the module's DOCUMENTATION (one place).
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
_VARIABLES = {"inputs": "dlrack_report_merge_inputs", "report_dir": "dlrack_report_dir",
              "report_prefix": "dlrack_report_prefix", "junit_warnings": "dlrack_junit_warnings"}

display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = task_args("report_merge", ARGUMENT_SPEC, self._task.args, _VARIABLES)
        try:
            out = merge_report_files([os.path.expanduser(p) for p in args["inputs"]], args["report_dir"],
                                     prefix=args["report_prefix"], junit_warnings=args["junit_warnings"])
        except (MergeError, ReportWriteError) as exc:
            raise AnsibleActionFail(str(exc))
        if args["print_summary"]:
            display.display("\n".join(out["lines"]))
        result["changed"] = False
        result["verdict_msg"] = verdict_message(out["failed_hosts"], out["fail_on"], out["report_paths"]["html"],
                                                out["fail_on_hosts"])
        if out["failed_hosts"] and args["fail"]:
            # the exit code of the unsliced run: non-zero, one failure naming every failing host. A
            # failed result is printed whole: only the message and the paths, not the fleet again.
            result.update(failed=True, msg=result.pop("verdict_msg"), report_paths=out["report_paths"])
            return result
        out.pop("lines")
        result.update(out)
        return result
