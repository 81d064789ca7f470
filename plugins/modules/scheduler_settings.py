#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done on the controller by plugins/action/scheduler_settings.py.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: scheduler_settings
short_description: Decide the scheduler act's settings from the inventory and extra vars only
version_added: 0.1.0
description:
  - Runs on the controller, once per act (run_once). A run_once task is templated with the first host's
    variables, and a module's C(ansible_facts) become that host's variables above the inventory and role
    defaults - so a node could steer the act (raise the cap, remap a node name, switch to check mode, point
    the Kubernetes backend at its own server). This action templates each of its options again with the
    variables of the admin host (O(admin_host) - C(dlrack_scheduler_host), default C(localhost)) - its
    inventory and group variables, the play's and role's variables, extra vars - never a judged host's.
  - A host of the play whose facts (what a module on its node returned, also from the fact cache of an
    earlier run) set a variable named C(dlrack_*), C(scheduler_*) or C(__dlrack_*)/C(__scheduler_*) is named
    in RV(untrusted) with one sentence; its verdict is not acted on (neither drained nor resumed). When the
    admin host's own facts set one, the act is refused.
  - Returns RV(settings), which the scheduler role's tasks use for every later step (delegate_to, become,
    check mode, the scontrol path, the Kubernetes endpoint) - its C(hosts) are this run's inventory hosts (a host a
    report names outside them is never judged) - the hosts' inventory groups (for rule modes) and RV(not_before),
    this run's start (older reports are refused by the plan).
options:
  admin_host:
    description: Where the act runs (scontrol, the API server); templated without any host's variables.
    type: str
    required: true
  backend:
    description: The scheduler.
    type: str
    choices: [none, slurm, kubernetes]
    required: true
  deferred:
    description: True where a later play of the same run acts (site.yml's acceptance part); the act then does nothing.
    type: bool
    default: false
  become:
    description: Become on the admin host.
    type: raw
    default: false
  check:
    description: Only report what would change (default - the run's own check mode).
    type: raw
  reports:
    description: Paths of this run's JSON reports on the controller.
    type: list
    elements: path
    default: []
  hosts:
    description: Judge only these of the inventory's hosts (empty - all of them).
    type: list
    elements: str
    default: []
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
    default: 10
  run_id:
    description: The run id in the reasons (empty - the report's).
    type: str
    default: ""
  rule_modes:
    description: Rule id (or C(area.*)) -> enforce, shadow or off (module_utils/scheduler/modes.py).
    type: raw
    default: {}
  rule_modes_groups:
    description: Inventory group -> {rule id -> mode}.
    type: raw
    default: {}
  scontrol:
    description: The scontrol program on the admin host.
    type: path
    default: scontrol
  scontrol_timeout:
    description: Seconds each scontrol call may take.
    type: int
    default: 30
  audit_log:
    description: The act's audit log (JSON lines) on the admin host; empty - none.
    type: str
    default: ""
  k8s:
    description: The Kubernetes connection (kubeconfig, context, host, api_key, validate_certs, timeout).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: Reads variables on the controller only.
  action:
    support: full
    description: Runs on the controller as an action plugin (plugins/action/scheduler_settings.py).
  connection:
    support: none
    description: Uses no connection.
author: dlrack.node contributors (@dlrack)
"""

EXAMPLES = r"""
- name: Decide the act's settings
  dlrack.node.scheduler_settings:
    admin_host: "{{ scheduler_admin_host }}"
    backend: "{{ scheduler_backend }}"
    max_nodes: "{{ scheduler_max_drain_nodes }}"
  run_once: true
  no_log: true  # the Kubernetes token is in the result
  register: __scheduler_settings
"""

RETURN = r"""
settings:
  description: The act's settings, checked (admin_host, backend, become, check, reports, hosts, node_names,
    short_names, max_nodes, max_percent, run_id, rule_modes, rule_modes_groups, scontrol, scontrol_timeout,
    audit_log, k8s).
  type: dict
  returned: always
untrusted:
  description: Host -> the sentence naming the setting its facts tried to set.
  type: dict
  returned: always
host_groups:
  description: Inventory host -> its inventory groups.
  type: dict
  returned: always
not_before:
  description: This run's start, epoch seconds (null where it cannot be read).
  type: float
  returned: always
error:
  description: The sentence why the settings were refused (the task itself does not fail - it is no_log; the role's
    next task fails with it).
  type: str
  returned: when a setting is wrong
"""
