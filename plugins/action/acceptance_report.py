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
from ansible_collections.dlrack.node.plugins.plugin_utils.argspec import argument_spec, task_args
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_workload
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import PROTECTED_FACTS, _plain
from ansible_collections.dlrack.node.plugins.plugin_utils.run_settings import SettingsError, settle
from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import console_line
from ansible_collections.dlrack.node.plugins.plugin_utils.verdict import verdict_host, verdict_message

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


# The variables behind the role's fail_on and report_dir options, the most specific first: a
# host's own value is read from these (run_settings.settle), never from a fact its node returned.
FAIL_ON_VARS = ("acceptance_fail_on", "dlrack_fail_on")
REPORT_DIR_VARS = ("acceptance_report_dir", "dlrack_report_dir")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        # Ansible templated fail_on and report_dir with the first host's variables (run_once): work
        # them out for the run; a host's own fail_on is its verdict's only (issue 18.2, docs/trust.md)
        try:
            settled = settle(self._task, self._loader, task_vars, self._task.args, FAIL_ON_VARS, REPORT_DIR_VARS,
                             protected=PROTECTED_FACTS, prefix="acceptance_")
        except SettingsError as exc:
            raise AnsibleActionFail("acceptance_report: bad run-wide setting, nothing was judged: %s" % exc)
        args = task_args("acceptance_report", ARGUMENT_SPEC, self._task.args)
        hostvars = task_vars.get("hostvars", {})
        inputs = {}
        for host in args["hosts"]:
            item = (hostvars.get(host) or {}).get(args["results_var"])
            inputs[host] = _plain(item) if isinstance(item, dict) else {}
            if inputs[host]:
                inputs[host]["workload"], problem = _workload(hostvars.get(host) or {})
                if problem:
                    inputs[host]["thresholds_error"] = problem
            if host in settled.host_errors:
                inputs[host]["settings_errors"] = settled.host_errors[host]
        doc = evaluate(inputs, args["fail_on"], skipped=dict.fromkeys(set(args["skip_hosts"]) & set(inputs), args["skip_reason"]),
                       host_fail_on=settled.host_fail_on)
        lines = [console_line(line) for line in summary_lines(doc)]   # host names, node strings: escaped
        if args.get("report_dir"):
            try:
                result["report_paths"] = write_reports(args["report_dir"], doc, args["report_prefix"])
            except ReportWriteError as exc:
                raise AnsibleActionFail("acceptance_report: %s\n%s" % (exc, "\n".join(lines)))
            lines.append(reports.paths_line(result["report_paths"]))
        result.update(changed=False, summary=doc["summary"], failed_hosts=doc["summary"]["failed_hosts"],
                      host_status={h: r["status"] for h, r in doc["hosts"].items()}, lines=lines, text="\n".join(lines))
        # The fail-once verdict (plugin_utils/verdict.py): the host the verdict play runs on (not one
        # whose facts tried to set a setting) and the one message naming every failing host.
        failed = doc["summary"]["failed_hosts"]
        result["verdict_host"] = verdict_host(failed, task_vars.get("ansible_play_hosts"), avoid=settled.host_errors)
        own = "; %d host(s) with their own" % len(settled.host_fail_on) if settled.host_fail_on else ""
        result["verdict_msg"] = verdict_message(
            "acceptance", [(s, [h for h in failed if doc["hosts"][h]["status"] == s]) for s in ("error", "incomplete", "warning")],
            "acceptance_fail_on=%s%s" % (args["fail_on"], own), (result.get("report_paths") or {}).get("html") or "the summary above")
        return result
