# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters gpu_affinity_plan, gpu_affinity_gres_conf, gpu_affinity_service_pins.

Thin wrappers around plugin_utils/affinity.py; errors become AnsibleFilterError.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: gpu_affinity_plan
author: dlrack.node contributors
version_added: "0.1.0"
short_description: Plan NUMA-local, disjoint, whole-core CPU sets for every GPU of a host
description:
  - Takes a C(dlrack_hw) document (see DESIGN.md) and returns one entry per GPU, in index order,
    with the CPUs that GPU's training process and data-loader workers should run on.
  - Each GPU gets CPUs of its own NUMA node, split with the other GPUs of that node in contiguous
    blocks of whole physical cores (SMT siblings together) whose sizes differ by at most one.
  - When a GPU's node is unknown (C(numa_node) -1 on a multi-node host) or has no CPUs (GPU memory
    nodes on POWER9), its C(local_cpus) are used (C(fallback=local_cpus) or C(socket)), else all
    CPUs (C(fallback=all)); the report's C(warnings) say why.
  - The lowest O(reserved_cores_per_socket) physical cores of each socket are left to the OS
    (per NUMA node when socket membership cannot be known).
  - More GPUs than usable cores in a pool fails with a message naming the pool and the counts.
options:
  _input:
    description: The C(dlrack_hw) document (C(cpu.numa_nodes), C(cpu.core_cpus), C(cpu.sockets), C(gpus)).
    type: dict
    required: true
  reserved_cores_per_socket:
    description:
      - Physical cores per socket kept for the OS, taken from the lowest CPU ids of each socket.
      - A whole number from 0 (an integer, or a string of digits); C(0.9) or C(-1) fail naming the option.
    type: int
    default: 1
  include_smt:
    description:
      - Give each GPU all SMT siblings of its cores; false gives only the first thread of each core.
      - A boolean or one of Ansible's boolean strings (C("false"), C("no"), C("0") are false); anything else fails.
    type: bool
    default: true
  policy:
    description:
      - C(numa_local) splits each NUMA node among the GPUs attached to it.
      - C(socket) splits each socket among the GPUs attached to it (like NVIDIA's
        socket_unique_contiguous, on hosts with several NUMA nodes per socket).
    type: str
    default: numa_local
    choices: [numa_local, socket]
  max_cores_per_gpu:
    description: At most this many physical cores per GPU (0 = no limit); the rest stay with the OS.
    type: int
    default: 0
  host:
    description: Name put in front of error messages (the role passes C(inventory_hostname)).
    type: str
  report:
    description: Return the whole report (C(gpus), C(warnings), C(reserved_cpus), C(options)) instead of the list.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Plan per-GPU CPU sets
  ansible.builtin.debug:
    msg: "{{ dlrack_hw | dlrack.node.gpu_affinity_plan(reserved_cores_per_socket=1) }}"

- name: Whole report with warnings
  ansible.builtin.set_fact:
    plan: "{{ dlrack_hw | dlrack.node.gpu_affinity_plan(report=true) }}"
"""

RETURN = r"""
_value:
  description: One entry per GPU in index order (or the report dict with O(report=true)).
  type: list
  elements: dict
  contains:
    index: {description: nvidia-smi / NVML index, type: int}
    uuid: {description: GPU UUID (null when unknown), type: str}
    pci_bus_id: {description: PCI bus id as gathered, type: str}
    numa_node: {description: the GPU's NUMA node (-1 unknown), type: int}
    cpus: {description: kernel cpulist of the CPUs it owns, type: str, sample: "1-13,113-125"}
    cores: {description: number of physical cores, type: int}
    mems: {description: NUMA nodes holding those CPUs (cpulist), for memory binding, type: str}
    slurm_cores: {description: the same cores as Slurm abstract core indices, for gres.conf Cores=, type: str}
    fallback: {description: "null (NUMA-local), local_cpus, socket or all", type: str}
"""

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
