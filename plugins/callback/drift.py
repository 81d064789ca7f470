# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Record every task that would change (check mode) for the drift report."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: drift
type: aggregate
short_description: Record the tasks that would change, for dlrack.node's drift report
version_added: 0.1.0
description:
  - Active only in plays that set the play variable C(dlrack_drift_file) (playbooks/drift.yml does).
    For every task result with C(changed) (in check mode, one that would change) it appends a record
    C({host, role, task, action, diff}) to that JSON file, which is written after each task (before the next one
    starts) and at the end of the run; unreachable hosts (also
    when the play ignores unreachable hosts) and failed tasks (also when a rescue section handles
    them, as drift.yml does per role) are recorded too, with the task and its message. Every play
    of one run that names the same file adds to it. The drift play reads the file to write the drift report and to
    set the exit status, so the report never depends on parsing console output.
  - drift.yml needs no configuration for it - the collection's C(playbooks/callback_plugins/dlrack_node_drift.py) is this
    callback as a playbook-adjacent plugin, which Ansible loads for the playbooks of that folder by itself (also
    C(ansible-playbook dlrack.node.drift) from an installed collection). Another playbook that sets
    C(dlrack_drift_file) enables it with C(callbacks_enabled = dlrack.node.drift) in C(ansible.cfg) or
    C(ANSIBLE_CALLBACKS_ENABLED=dlrack.node.drift); the adjacent copy then steps aside, so records are made once.
requirements:
  - enable in configuration
author: dlrack.node contributors (@dlrack)
"""

import json
import os

from ansible.plugins.callback import CallbackBase
from ansible.template import Templar

from ansible_collections.dlrack.node.plugins.plugin_utils.reports.files import atomic_write


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "dlrack.node.drift"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._path = None
        self._records = {}
        self._started = set()   # files begun in this run: later plays add to them
        self._dirty = False     # records not yet in the file

    def v2_playbook_on_play_start(self, play):
        self._flush_pending()
        self._path = None
        raw = (play.vars or {}).get("dlrack_drift_file")
        if not raw:
            return
        path = raw
        if "{{" in str(raw) or "{%" in str(raw):
            try:
                variables = play._variable_manager.get_vars(play=play)
                path = Templar(loader=play._loader, variables=variables).template(raw)
            except Exception as exc:  # a drift report that silently records nothing would lie
                self._display.warning("dlrack.node.drift: cannot resolve dlrack_drift_file %r: %s" % (raw, exc))
                return
        self._path = os.path.abspath(str(path))
        if self._path not in self._started:   # a new run starts a new file; its later plays add to it
            self._started.add(self._path)
            self._records = {}
        self._flush()

    def _flush(self):
        # the reports' own atomic write: no temporary file is left by an interrupted run, and the
        # directory's lock never follows a symbolic link
        atomic_write(self._path, json.dumps(self._records, indent=1, sort_keys=True, default=str))
        self._dirty = False

    def _flush_pending(self):
        """Write the records once per task, not once per result: every result of a task has
        reached the callback before the next task starts (the drift play's report task reads the
        file then), and rewriting the whole file for each result cost O(results^2) (600 hosts
        with 3 changes each: 45 s)."""
        if self._path and self._dirty:
            self._flush()

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._flush_pending()

    def v2_playbook_on_handler_task_start(self, task):
        self._flush_pending()

    def v2_playbook_on_stats(self, stats):
        self._flush_pending()

    def _host(self, name):
        return self._records.setdefault(name, {"changes": [], "failures": [], "unreachable": False})

    @staticmethod
    def _describe(result):
        task = result._task
        role = task._role.get_name(include_role_fqcn=False) if getattr(task, "_role", None) else None
        return {"role": role, "task": task.get_name().split(" : ", 1)[-1], "action": task.action}

    def v2_runner_on_ok(self, result):
        if not self._path or not result._result.get("changed"):
            return
        rec = self._describe(result)
        diff = result._result.get("diff")
        if isinstance(diff, list):
            diff = [d for d in diff if d]
        rec["diff"] = diff or None
        if result._result.get("msg"):   # e.g. packages_missing's "would install: rasdaemon"
            rec["msg"] = str(result._result["msg"])[:500]
        if result._result.get("results"):
            rec["items"] = [str(r.get("item")) for r in result._result["results"] if r.get("changed")]
        self._host(result._host.get_name())["changes"].append(rec)
        self._dirty = True

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not self._path or ignore_errors:
            return
        rec = self._describe(result)
        rec["msg"] = str(result._result.get("msg", ""))[:500]
        self._host(result._host.get_name())["failures"].append(rec)
        self._dirty = True

    def v2_runner_on_unreachable(self, result):
        if not self._path:
            return
        h = self._host(result._host.get_name())
        h["unreachable"] = True
        h["failures"].append(dict(self._describe(result), msg=str(result._result.get("msg", ""))[:500]))
        self._dirty = True
