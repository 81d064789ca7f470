#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done on the controller by plugins/action/preflight_report.py.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: preflight_report
short_description: Validate the fleet's hardware against the dlrack rules and write the reports
version_added: 0.1.0
description:
  - Runs once on the controller (use it with C(run_once=true)) over all hosts of the play. For each host it
    takes the gathered facts C(dlrack_hw_gathered) (from M(dlrack.node.hw_facts) or a fact cache)
    or else the inventory declaration C(dlrack_hw), applies the rules of docs/dlrack_hw.md with the host's
    C(dlrack_profile), C(dlrack_thresholds), C(dlrack_severity), C(dlrack_workload) and
    C(dlrack_external_archive), and compares gathered facts with a declaration when both exist.
  - Writes C(report.json), C(report.xml) (JUnit) and C(report.html) into O(report_dir).
  - Never connects to a host and never reports a change.
options:
  hosts:
    description: Inventory names to validate (normally C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
  report_dir:
    description: Directory on the controller for the reports; omit to write none.
    type: path
  fail_on:
    description: C(error) lists hosts with errors in RV(failed_hosts); C(warning) also hosts with
      warnings; C(never) lists none.
    type: str
    choices: [error, warning, never]
    default: error
  drift:
    description: Optional per-host drift records to add to the reports.
    type: dict
  drift_file:
    description:
      - JSON file written by the C(dlrack.node.drift) callback during the run. Its records become the
        drift section of the reports and RV(drift_hosts). Fails when the file is missing, because
        then the callback was not enabled and a drift report would lie.
    type: path
  select_only:
    description:
      - Validate nothing; return RV(gather_hosts), the hosts that must be gathered with
        M(dlrack.node.hw_facts) (nothing declared, C(dlrack_gather) set, and no usable fact cache).
    type: bool
    default: false
  select_first:
    description:
      - Read every host's variables once, find the hosts to gather (as O(select_only) does) and, when there
        are none, validate and write the reports in the same pass (RV(validated) true); otherwise return
        RV(gather_hosts) only, and validate again after gathering. Halves the controller work of a
        declared fleet.
    type: bool
    default: false
  gather:
    description: With O(select_only) or O(select_first), gather declared hosts too (as C(dlrack_gather=true) on every host).
    type: bool
    default: false
  use_fact_cache:
    description: With O(select_only) or O(select_first), skip hosts whose C(dlrack_hw_gathered) is already in the fact cache.
    type: bool
    default: false
  report_prefix:
    description: File name stem of the reports (C(report) gives report.json, report.xml, report.html).
    type: str
    default: report
  junit_warnings:
    description:
      - How report.xml (JUnit) shows warnings - C(skipped) (a skipped testcase whose message starts with
        "warning:"), C(failed) (a failure of type warning) or C(passed). Every error finding is a failing
        testcase of its own either way.
    type: str
    choices: [skipped, failed, passed]
    default: skipped
  print_summary:
    description:
      - Print the per-host summary (one line per host with findings, the fleet counts, the report paths)
        on the controller's console. The role sets it from C(preflight_print_summary).
    type: bool
    default: false
  site_states:
    description:
      - site.yml's fleet report - give each host its final state of the run as a finding of rule C(site.provisioned)
        (plugins/plugin_utils/site_state.py) - provisioned; not provisioned because it failed the pre-flight; failed in
        a role at a task, or unreachable, which is an error finding, so such a host is never C(pass). Read from
        C(hostvars['localhost'].preflight_failed_hosts) and each host's C(__dlrack_site_error), which site.yml sets.
    type: bool
    default: false
  publish_stats:
    description:
      - When a host fails, publish the failing hosts as the run's custom stat C(dlrack_preflight_failed_hosts)
        (what C(ansible.builtin.set_stats) does - ansible-runner's C(playbook_on_stats) event C(artifact_data),
        AWX job artifacts), without a task of its own. The role's select and main entry points set it.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads variables and writes reports on the controller; never changes a host.
  action:
    support: full
    description: Runs on the controller as an action plugin (plugins/action/preflight_report.py).
  connection:
    support: none
    description: Never connects to the hosts it validates.
notes:
  - When C(ansible-playbook) (or another Ansible command line) first loads this action, it calls
    Python's C(gc.freeze()) in the controller's process - the pattern Python documents for a process
    that forks without exec - so that the garbage collector stops walking the whole inventory again
    and again, in the controller and in every worker forked after (0.17-0.29 s per full collection
    for 2,000 hosts, benchmarks/RESULTS.md). Reference cycles that are already garbage then are
    freed when the run ends. Set the environment variable C(DLRACK_GC_FREEZE=false) to turn it off
    (the worker forked for this task still freezes what it inherited; it ends with the task).
  - The freezes, reading the hosts' variables raw (templated only where a value holds a template),
    the C(clean_facts) shortcut and the sharing of evaluations and report fragments between hosts
    with identical inputs are the fleet fast path (plugins/plugin_utils/fastpath.py, private to the
    collection; docs/DEVELOPING.md). Set the environment variable C(DLRACK_FAST_PATH=false) (or
    C(0), C(no), C(off)) to use the plain reference path instead - every variable templated by
    Ansible, nothing frozen, every host evaluated and reported on its own - with the same verdicts
    and reports, slower on big fleets (benchmarks/RESULTS.md).
author: dlrack.node contributors (@dlrack)
"""

RETURN = r"""
summary:
  description: Fleet counts by status and per rule.
  type: dict
  returned: always
host_status:
  description: C(pass), C(warn) or C(fail) per host.
  type: dict
  returned: always
failed_hosts:
  description: Hosts that must fail according to O(fail_on).
  type: list
  returned: always
lines:
  description: A readable summary, one line per host and finding.
  type: list
  returned: always
verdict_host:
  description:
    - C([host]), the first host of RV(failed_hosts) that is still in the play (not unreachable), or C([]).
      The role keeps it as C(preflight_verdict_host); the verdict play runs there and fails once.
  type: list
  returned: unless select_only, or select_first found hosts to gather
verdict_msg:
  description:
    - The one message of the fleet's verdict, naming the hosts of RV(failed_hosts), O(fail_on) and the
      HTML report (or O(report_dir)); empty when no host fails. The role keeps it as C(preflight_verdict_msg)
      and the verdict play fails with it.
    - The host names take about 1,000 characters at most - every name while that fits, else all of them in
      Slurm's hostlist form (C(gpu-[0001-6000])), else the hostlist of the first hosts and C(and N more host(s));
      RV(failed_hosts) and the reports name every host.
  type: str
  returned: unless select_only, or select_first found hosts to gather
gather_hosts:
  description: With O(select_only) or O(select_first), the hosts to gather.
  type: list
  returned: when select_only or select_first
validated:
  description: With O(select_first), whether the fleet was validated in this pass (no host to gather).
  type: bool
  returned: when select_first
error_hosts:
  description: Hosts that could not be checked (unreachable, or a check task failed), with O(drift_file) or O(drift).
  type: list
  returned: always
drift_hosts:
  description: Hosts with at least one task that would change (only with O(drift_file) or O(drift)).
  type: list
  returned: always
report_paths:
  description: Paths of the files written.
  type: dict
  returned: when report_dir is set
"""

EXAMPLES = r"""
- name: Validate every host once and write the reports
  dlrack.node.preflight_report:
    hosts: "{{ ansible_play_hosts_all }}"
    report_dir: /srv/reports/rack-07
    fail_on: error
  run_once: true
  delegate_to: localhost
  register: preflight
"""
