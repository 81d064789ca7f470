# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the rule engine: hw_validate (one host) and hw_normalize."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: hw_validate
short_description: Validate one dlrack_hw document against the dlrack rules
version_added: 0.1.0
description:
  - The same rule engine as the C(preflight_report) action, for one host, inside a template or
    C(set_fact). Returns C({status, findings, rules, hw, provenance}).
  - Bad input never raises; a malformed document or setting becomes C(inventory.schema) error
    findings naming the field and what is expected.
positional: profile
options:
  _input:
    description: A C(dlrack_hw) document (declared or gathered).
    type: dict
    required: true
  profile:
    description: C(training), C(inference) or C(workstation).
    type: str
    default: training
  host:
    description: Name used in messages.
    type: str
    default: host
  declared:
    description: Declaration to compare a gathered document with (rule inventory.matches_declared).
    type: dict
  thresholds:
    description: Threshold overrides (see the rules table).
    type: dict
  severity:
    description:
      - Per-rule severity overrides. C(error) or C(warning) set what a failing rule reports;
        C(info) lists its findings as information only (never failing or warning the host);
        C(off) does not run or report the rule.
    type: dict
  workload:
    description: Workload, when not part of the document.
    type: dict
author: dlrack.node contributors
"""

EXAMPLES = r"""
- name: Judge one host's declared hardware
  ansible.builtin.set_fact:
    verdict: "{{ dlrack_hw | dlrack.node.hw_validate(host=inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: C({status, findings, rules, hw, provenance}); C(hw) is the normalised document.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_hw
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import evaluate_host


def hw_validate(hw, profile="training", host="host", declared=None, thresholds=None, severity=None, workload=None):
    return evaluate_host(host, hw, declared=declared, profile=profile, thresholds=thresholds,
                         severity=severity, workload=workload)


def hw_normalize(hw):
    clean, problems = check_hw(hw)
    if clean is None or problems:
        raise AnsibleFilterError("; ".join(p.message() for p in problems))
    return clean


class FilterModule(object):
    def filters(self):
        return {"hw_validate": hw_validate, "hw_normalize": hw_normalize}
