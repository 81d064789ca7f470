# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the rule engine: hw_validate (one host) and hw_normalize."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The documentation is one page per filter, as ansible-doc reads it: plugins/filter/<filter name>.yml.

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
