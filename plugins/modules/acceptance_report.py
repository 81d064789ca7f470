#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done on the controller by plugins/action/acceptance_report.py.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: acceptance_report
short_description: Judge the acceptance measurements of the fleet and write the reports
version_added: 0.1.0
description:
  - Runs once on the controller (use it with C(run_once=true)) over all hosts of the play. For each host
    it reads the variable named by O(results_var), C({raw, thresholds}) where C(raw) is the result of
    M(dlrack.node.acceptance_measure) and C(thresholds) the host's acceptance thresholds, and judges
    every measurement C(pass), C(warning), C(error) or C(skip).
  - "Host<->GPU bandwidth is judged against the theoretical rate of the PCIe link the GPU can negotiate
    (generation = the lower of the GPU's and the slot's maximum, width = the GPU's maximum; Gen5 x16 =
    63.0 GB/s) times C(link_fraction); storage against a per-GPU rate times the GPUs; GPU pairs and
    NUMA nodes against the fleet of pairs/nodes on the host."
  - A host without a result (it failed or was unreachable before measuring) is an C(error).
  - Writes C(acceptance.json), C(acceptance.xml) (JUnit) and C(acceptance.html) into O(report_dir).
  - Never connects to a host and never reports a change.
options:
  hosts:
    description: Inventory names to report (normally C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
  report_dir:
    description: Directory on the controller for the reports; omit to write none.
    type: path
  report_prefix:
    description: File name stem of the reports.
    type: str
    default: acceptance
  fail_on:
    description: C(error) lists hosts with errors in RV(failed_hosts); C(warning) also hosts with warnings; C(never) none.
    type: str
    choices: [error, warning, never]
    default: error
  results_var:
    description: Host variable holding C({raw, thresholds}) (set by the acceptance role).
    type: str
    default: __acceptance_measured
  skip_hosts:
    description:
      - Hosts that were deliberately not measured (the role passes the hosts that failed this run's pre-flight,
        C(hostvars['localhost'].preflight_failed_hosts)); each gets the verdict C(skip) with O(skip_reason)
        instead of an error for missing measurements.
    type: list
    elements: str
    default: []
  skip_reason:
    description: The reason written for O(skip_hosts).
    type: str
    default: "failed the pre-flight of this run: not measured (fix it, then re-run)"
attributes:
  check_mode:
    support: full
    description: Reads variables and writes reports on the controller; never changes a host.
  action:
    support: full
    description: Runs on the controller as an action plugin (plugins/action/acceptance_report.py).
  connection:
    support: none
    description: Uses no connection; reads host variables only.
author: dlrack.node contributors (@dlrack)
"""

EXAMPLES = r"""
- name: Judge and write the acceptance reports
  dlrack.node.acceptance_report:
    hosts: "{{ ansible_play_hosts_all }}"
    report_dir: /srv/reports/rack-07
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
summary:
  description: Host counts by status, measurement counts by verdict, C(failed_hosts), C(fail_on), C(generated_at).
  type: dict
  returned: always
host_status:
  description: C(pass), C(warning), C(error), C(incomplete) or C(skip) per host (docs/verdicts.md); a host whose figures
    were all C(measured) (no expectation to judge them by) or skipped is C(skip).
  type: dict
  returned: always
failed_hosts:
  description: Hosts that must fail according to O(fail_on).
  type: list
  returned: always
lines:
  description: A readable summary, one line per host and measurement.
  type: list
  returned: always
text:
  description: RV(lines) joined.
  type: str
  returned: always
report_paths:
  description: Paths of the files written.
  type: dict
  returned: when report_dir is set
verdict_host:
  description:
    - C([host]), the first host of RV(failed_hosts) still in the play whose facts set no setting, C([localhost])
      when no failing host's name is a safe host pattern, or C([]). The role keeps it as C(acceptance_verdict_host);
      the verdict play runs there and fails once.
  type: list
  returned: always
verdict_msg:
  description:
    - The one message of the fleet's verdict, naming every host of RV(failed_hosts) by status, O(fail_on) and the
      HTML report; empty when no host fails. The role keeps it as C(acceptance_verdict_msg).
  type: str
  returned: always
"""
