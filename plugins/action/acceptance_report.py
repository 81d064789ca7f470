# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side acceptance verdicts for every host of the play, written as the fleet reports."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.dlrack.node.plugins.modules.acceptance_report import DOCUMENTATION
from ansible_collections.dlrack.node.plugins.plugin_utils import reports
from ansible_collections.dlrack.node.plugins.plugin_utils.acceptance import (
    ReportWriteError, evaluate, summary_lines, write_reports)
from ansible_collections.dlrack.node.plugins.plugin_utils.argspec import argument_spec, validate
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_workload
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import _plain
from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import console_line

# The options, their types, choices and defaults: the module's DOCUMENTATION (one place).
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)


def _workload(hv):
    """(the host's validated workload or None, a sentence naming the bad field or None):
    dlrack_hw.workload, else dlrack_workload, checked as the pre-flight checks them."""
    hw = _plain(hv.get("dlrack_hw")) if isinstance(hv.get("dlrack_hw"), dict) else {}
    raw, where = hw.get("workload"), "dlrack_hw.workload"
    if raw is None:
        raw, where = _plain(hv.get("dlrack_workload")), "dlrack_workload"
    if raw is None:
        return None, None
    clean, problems = check_workload(raw, where)
    if problems:
        return None, "; ".join(p.message() for p in problems)
    return clean, None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args, errors = validate(ARGUMENT_SPEC, self._task.args)
        if errors:
            raise AnsibleActionFail("acceptance_report: %s" % "; ".join(errors))
        hostvars = task_vars.get("hostvars", {})
        inputs = {}
        for host in args["hosts"]:
            item = (hostvars.get(host) or {}).get(args["results_var"])
            inputs[host] = _plain(item) if isinstance(item, dict) else {}
            if inputs[host]:
                inputs[host]["workload"], problem = _workload(hostvars.get(host) or {})
                if problem:
                    inputs[host]["thresholds_error"] = problem
        doc = evaluate(inputs, args["fail_on"], skipped=dict.fromkeys(set(args["skip_hosts"]) & set(inputs), args["skip_reason"]))
        lines = [console_line(line) for line in summary_lines(doc)]   # host names, node strings: escaped
        if args.get("report_dir"):
            try:
                result["report_paths"] = write_reports(args["report_dir"], doc, args["report_prefix"])
            except ReportWriteError as exc:
                raise AnsibleActionFail("acceptance_report: %s\n%s" % (exc, "\n".join(lines)))
            lines.append(reports.paths_line(result["report_paths"]))
        result.update(changed=False, summary=doc["summary"], failed_hosts=doc["summary"]["failed_hosts"],
                      host_status={h: r["status"] for h, r in doc["hosts"].items()}, lines=lines, text="\n".join(lines))
        return result
