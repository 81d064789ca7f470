#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done on the controller by plugins/action/report_merge.py.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: report_merge
short_description: Merge the report.json files of a sliced pre-flight into one fleet report
version_added: 0.1.0
description:
  - Runs on the controller. Reads the C(report.json) of every slice of one pre-flight run (AWX/AAP job
    slicing, docs/awx.md), and writes into O(report_dir) the C(report.json), C(report.xml) and
    C(report.html) that one unsliced run writes - the same hosts, findings and verdict.
  - Refuses, in one sentence naming the inputs, a host found in two inputs, inputs that disagree on the
    run's settings (C(dlrack_fail_on)), a mix of drift and pre-flight reports, and a cut or edited file.
  - Fails naming every failing host when a host fails (the exit code of the unsliced run), unless O(fail=false).
  - The HTML report draws no topology (a report.json keeps the source of a host's hardware, not the document).
options:
  inputs:
    description: Paths of the slices' C(report.json) files on the controller.
    type: list
    elements: path
    required: true
  report_dir:
    description: Directory on the controller for the merged reports.
    type: path
    required: true
  report_prefix:
    description: File name prefix of the merged reports.
    type: str
    default: report
  junit_warnings:
    description: How warnings appear in the JUnit report (as for M(dlrack.node.preflight_report)).
    type: str
    choices: [skipped, failed, passed]
    default: skipped
  print_summary:
    description: Print the merged counts and the report paths.
    type: bool
    default: true
  fail:
    description: Fail the task (naming every failing host) when a host fails.
    type: bool
    default: true
attributes:
  check_mode:
    support: none
    description: Writes the merged reports also in check mode (they are the run's output, on the controller only).
  action:
    support: full
    description: Runs on the controller as an action plugin (plugins/action/report_merge.py).
  connection:
    support: none
    description: Uses no connection.
author: dlrack.node contributors (@dlrack)
"""

RETURN = r"""
hosts:
  description: Number of hosts in the merged report.
  returned: success
  type: int
failed_hosts:
  description: The failing hosts per the run's C(dlrack_fail_on) (and a host's own); when the task fails
    (O(fail=true)) its message names them instead.
  returned: success
  type: list
  elements: str
summary:
  description: The merged report's summary counts.
  returned: success
  type: dict
report_paths:
  description: Paths of the merged C(json), C(xml) and C(html) files.
  returned: always
  type: dict
"""

EXAMPLES = r"""
- name: One fleet report from the slices' reports
  dlrack.node.report_merge:
    inputs: [/reports/slice1/report.json, /reports/slice2/report.json]
    report_dir: /reports/fleet
  run_once: true
  delegate_to: localhost
"""
