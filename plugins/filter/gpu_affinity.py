# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters gpu_affinity_plan, gpu_affinity_gres_conf, gpu_affinity_service_pins.

Thin wrappers around plugin_utils/affinity.py; errors become AnsibleFilterError.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The documentation is one page per filter, as ansible-doc reads it: plugins/filter/<filter name>.yml.

from ansible.errors import AnsibleFilterError

from ansible_collections.dlrack.node.plugins.plugin_utils.affinity import (
    AffinityError,
    bool_option,
    gres_conf_lines,
    plan_gpu_affinity_report,
    service_pins,
)


def _where(name, host):
    return "%s (host %s)" % (name, host) if host else name


def gpu_affinity_plan(hw, reserved_cores_per_socket=1, include_smt=True, policy="numa_local",
                      max_cores_per_gpu=0, report=False, host=None):
    try:
        result = plan_gpu_affinity_report(
            hw, reserved_cores_per_socket=reserved_cores_per_socket, include_smt=include_smt,
            policy=policy, max_cores_per_gpu=max_cores_per_gpu)
        whole = bool_option("report", report)
    except AffinityError as exc:
        raise AnsibleFilterError("%s: %s" % (_where("gpu_affinity_plan", host), exc))
    return result if whole else result["gpus"]


def gpu_affinity_gres_conf(report, name="gpu", file_template="/dev/nvidia{index}", gpu_type=None,
                           host=None):
    try:
        return gres_conf_lines(report, name=name, file_template=file_template, gpu_type=gpu_type)
    except AffinityError as exc:
        raise AnsibleFilterError("%s: %s" % (_where("gpu_affinity_gres_conf", host), exc))


def gpu_affinity_service_pins(report, services, host=None):
    try:
        return service_pins(report, services)
    except AffinityError as exc:
        raise AnsibleFilterError("%s: %s" % (_where("gpu_affinity_service_pins", host), exc))


class FilterModule(object):
    def filters(self):
        return {
            "gpu_affinity_plan": gpu_affinity_plan,
            "gpu_affinity_gres_conf": gpu_affinity_gres_conf,
            "gpu_affinity_service_pins": gpu_affinity_service_pins,
        }
