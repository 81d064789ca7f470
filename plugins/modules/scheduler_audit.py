#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done on the controller by plugins/action/scheduler_audit.py.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: scheduler_audit
short_description: Append the scheduler act's decisions to its audit log and counters
version_added: 0.1.0
description:
  - Runs on the controller. One JSON line per decision of dlrack.node.scheduler_plan (drain, resume, would-drain in
    shadow mode, refused for the cap, for ownership or for trust, skipped, failed), with what the scheduler did
    (the results of dlrack.node.slurm_node), the node, the inventory host, the rules, the reason, the run id, the
    time and the check mode; the counters C(dlrack_act_decisions_total{action,outcome}) in a Prometheus textfile
    beside the log (C(<log>.prom)).
options:
  log:
    description: The log file (relative - against the directory ansible-playbook runs in).
    type: path
    required: true
  plan:
    description: The result of dlrack.node.scheduler_plan.
    type: dict
    required: true
  backend:
    description: The scheduler (when the plan does not say).
    type: str
  results:
    description: The results of the dlrack.node.slurm_node tasks.
    type: list
    elements: dict
    default: []
  check:
    description: Whether the act ran in check mode.
    type: bool
    default: false
attributes:
  check_mode:
    support: none
    description: The trail records check-mode runs as such; run it with check_mode false.
  action:
    support: full
    description: Runs on the controller as an action plugin (plugins/action/scheduler_audit.py).
  connection:
    support: none
    description: Uses no connection.
author: dlrack.node contributors (@dlrack)
"""

EXAMPLES = r"""
- name: Record what the act did
  dlrack.node.scheduler_audit:
    log: reports/dlrack-act.jsonl
    plan: "{{ plan }}"
    results: "{{ drained.results }}"
  check_mode: false
"""

RETURN = r"""
lines:
  description: How many lines were appended.
  type: int
  returned: success
log:
  description: The log file.
  type: str
  returned: success
textfile:
  description: The Prometheus textfile with the counters.
  type: str
  returned: success
"""
