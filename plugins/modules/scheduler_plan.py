#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done on the controller by plugins/action/scheduler_plan.py.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: scheduler_plan
short_description: Decide from a run's reports which scheduler nodes to take out and put back
version_added: 0.1.0
description:
  - Runs on the controller. Reads the JSON reports of this run (pre-flight C(report.json)/C(site.json),
    C(drift.json), C(acceptance.json)) and judges each host - failing on pre-flight error findings (the
    rule ids, C(memory.ecc_errors) included), drift C(drifted)/C(error) (C(drift.drifted), C(drift.error))
    and acceptance errors (C(acceptance.<measurement>)). Warnings never take a node out.
  - "Maps each host to its scheduler node name (O(node_names), else the inventory name's first label when
    O(short_names)) and groups the failing nodes by their drain reason C(dlrack: <rule ids> <run id>)."
  - The blast-radius cap - when more nodes fail than the smaller of O(max_nodes) and O(max_percent) of the
    judged nodes (never below one node), RV(over_cap) names the counts and the plan drains nothing; passing nodes
    are still put back.
  - Only rules in C(enforce) mode act; a failing C(shadow) rule is a RV(would_drain) group (O(rule_modes)).
  - Never connects to a host and never reports a change.
options:
  reports:
    description: Paths of this run's JSON reports on the controller.
    type: list
    elements: path
    required: true
  hosts:
    description: This run's hosts; a host of the reports outside them is neither judged nor counted
      (default - every host in the reports, for a report read outside a run).
    type: list
    elements: str
  backend:
    description: The scheduler.
    type: str
    choices: [slurm, kubernetes]
    required: true
  node_names:
    description: Inventory host -> scheduler node name.
    type: dict
    default: {}
  short_names:
    description: Without a mapping, use the inventory name up to its first dot.
    type: bool
    default: true
  max_nodes:
    description: At most this many nodes taken out by one run.
    type: int
    default: 5
  max_percent:
    description: At most this share of the judged nodes taken out by one run.
    type: float
    default: 10.0
  run_id:
    description: The run id in the reason (default - the pre-flight report's C(summary.run_id), else a new one).
    type: str
  rule_modes:
    description: Rule id (or C(area.*)) -> enforce, shadow or off; rules not named keep their default
      (the rules of 0.1.0 enforce, newer rules shadow - module_utils/scheduler/modes.py).
    type: dict
    default: {}
  rule_modes_groups:
    description: Inventory group -> {rule id -> mode}; where a host's groups disagree the mode that acts least wins.
    type: dict
    default: {}
  host_groups:
    description: Host -> its inventory groups (dlrack.node.scheduler_settings returns them).
    type: dict
    default: {}
  untrusted:
    description: Host -> the sentence why its verdict is not acted on (its facts set a setting; dlrack.node.scheduler_settings).
    type: dict
    default: {}
  not_before:
    description: This run's start (epoch seconds); a report written before it is refused.
    type: float
  k8s_nodes:
    description:
      - For O(backend=kubernetes), the Node objects as the API returns them (C(resources) of
        M(kubernetes.core.k8s_info)); RV(k8s) is computed from them.
    type: list
    elements: dict
    default: []
attributes:
  check_mode:
    support: full
    description: Reads reports on the controller only.
  action:
    support: full
    description: Runs on the controller as an action plugin (plugins/action/scheduler_plan.py).
  connection:
    support: none
    description: Uses no connection.
author: dlrack.node contributors (@dlrack)
"""

EXAMPLES = r"""
- name: Decide from this run's reports
  dlrack.node.scheduler_plan:
    reports: [reports/site.json]
    backend: slurm
    node_names: {gpu-01.rack7.example.com: n001}
  register: plan
"""

RETURN = r"""
drain:
  description: Groups of nodes to take out, C({rules, reason, nodes}); empty over the cap.
  type: list
  elements: dict
  returned: always
would_drain:
  description: Groups of nodes that a rule in shadow mode would take out, C({rules, nodes}); nothing is done to them.
  type: list
  elements: dict
  returned: always
audit:
  description: One record per decision (drain, would_drain, refused for the cap or trust) with node, host, rules, run id.
  type: list
  elements: dict
  returned: always
resume:
  description: Judged nodes that pass (put back only where the scheduler says we took them out).
  type: list
  elements: str
  returned: always
failing:
  description: Failing node -> its failing rule ids.
  type: dict
  returned: always
judged:
  description: How many nodes the reports judged.
  type: int
  returned: always
limit:
  description: How many nodes this run may take out.
  type: int
  returned: always
over_cap:
  description: The sentence naming the counts when more nodes fail than the cap allows, else null.
  type: str
  returned: always
run_id:
  description: The run id used in the reasons.
  type: str
  returned: always
k8s:
  description:
    - "For O(backend=kubernetes) - C(taint) (C({name, spec}) - Nodes to taint NoSchedule with key C(dlrack.node/unhealthy)
      and the run id as value), C(untaint) (passing Nodes that carry our taint; C(taint_key)), C(patch) and
      C(patch_after) (C({name, definition}) merge patches of the C(dlrack.node/*) labels and annotations, before
      tainting and after untainting), C(left_alone) (Nodes with a person's taint under our key), C(skipped), C(messages)."
  type: dict
  returned: when O(backend=kubernetes)
problems:
  description:
    - One sentence per host left out of the plan for its scheduler node name (not a valid node name, or two hosts
      mapped to one node); the other hosts are planned as usual and roles/scheduler fails after acting on them.
  type: list
  elements: str
  returned: always
lines:
  description: What the plan does, one line each.
  type: list
  elements: str
  returned: always
"""
