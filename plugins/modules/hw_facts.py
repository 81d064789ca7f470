#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hw_facts
short_description: Gather the normalized hardware description C(dlrack_hw) of a GPU server
version_added: "0.1.0"
description:
  - Reads CPU topology, NUMA nodes, memory, NVIDIA GPUs (from PCI sysfs, even without the driver),
    disks and host details in one pass over sysfs and procfs, and returns them as a C(dlrack_hw)
    document with C(source=gathered) (the contract in the collection's docs/dlrack_hw.md).
  - Runs at most one C(nvidia-smi -q -x) (when nvidia-smi is found) to add GPU UUID, model, memory
    and ECC mode; C(dmidecode -t memory) (as root) for the memory ECC type; and C(blkid -p) per disk
    and partition (as root) for signatures.
  - On nodes where nvidia-smi lists two or more GPUs, not all in MIG mode, one more call,
    C(nvidia-smi nvlink -s) (all GPUs at once), fills C(nvlink_active) with the number of active
    NVLink links per GPU (0 when nvidia-smi says the GPU has none or all are inactive). A single
    GPU has no peer to link to, and NVLink queries are refused in MIG mode, so there the call is
    skipped and C(nvlink_active) stays null.
  - AMD Instinct and Hygon DCU GPUs (PCI vendor 0x1002, 0x1d94) are read through the same vendor seam
    from amdgpu sysfs alone (VRAM, FRU name, RAS ECC state and counters, XGMI links from the KFD
    topology, render node) and completed from C(amd-smi static --json) and C(amd-smi metric --json), else
    C(rocm-smi --json) or C(hy-smi --json), when installed, under the same time and output limits.
    Their entries carry C(vendor) and C(interconnect) (C(kind=xgmi), C(links_active)); see docs/dlrack_hw.md.
  - Never fails for a missing GPU, driver, dmidecode or EDAC, for running unprivileged, or for
    garbage in sysfs or procfs; those fields are null and anything that was tried and failed is
    listed in C(dlrack_hw.errors), including files that exist but cannot be read (permission
    denied), garbled values (a cpulist, a number in C(/proc/cpuinfo)) and cpulists naming CPU ids
    above 16383 (cpulist.MAX_CPUS - 1). One odd GPU never drops the others.
  - Every command it runs is bounded in time (O(command_timeout)) and in output
    (O(command_output_limit) bytes per stream) by the collection's one command runner; a command past a
    limit is killed with its whole process group. A command that broke a limit (a wedged driver, an
    nvidia-smi that never answers, or one that prints without end) fails the host with a message that
    names the command and the limit, in bounded time; the partial description is still returned in
    C(dlrack_hw) (not as a fact).
  - Read-only. Never reports a change.
author:
  - dlrack.node contributors (@dlrack)
options:
  root:
    description:
      - Filesystem prefix under which C(/sys), C(/proc) and C(/dev/disk/by-id) are read.
      - Use it to gather from a captured or mounted tree; tools are then looked up under this prefix.
    type: path
    default: /
  gather_subset:
    description:
      - The sections to gather. Sections not gathered are null.
      - C(edac) fills C(memory.edac); C(host) fills C(host) and C(uptime_s).
    type: list
    elements: str
    choices: [all, cpu, memory, gpus, disks, edac, host]
    default: [all]
  nvidia_smi:
    description:
      - Path to C(nvidia-smi). Default is to look it up in C(PATH).
      - Set to C(never) to skip it (GPUs are then described from sysfs only).
    type: str
  amd_smi:
    description:
      - Path to C(amd-smi) (AMD and Hygon GPUs). Default is to look it up in C(PATH); without it
        C(rocm-smi) and then C(hy-smi) are used when installed.
      - Set to C(never) to skip all three (AMD GPUs are then described from amdgpu sysfs and the
        KFD topology only), for example on a node where a wedged driver makes them hang.
    type: str
  dmidecode:
    description:
      - C(auto) runs C(dmidecode -t memory) when running as root and dmidecode exists.
      - C(always) runs it even when not root (the failure is reported in C(errors)).
      - C(never) does not run it; C(memory.ecc) is then C(unknown).
    type: str
    choices: [auto, always, never]
    default: auto
  command_timeout:
    description:
      - Seconds each command (nvidia-smi, amd-smi, rocm-smi, hy-smi, dmidecode, blkid) may run before
        it is killed with its process group. C(nvidia-smi -q -x) takes a few seconds on an 8-GPU node without persistence
        mode; a wedged driver never answers.
    type: int
    default: 60
  command_output_limit:
    description:
      - Bytes of stdout (and, separately, of stderr) a command may print; past it the command is stopped
        and the host fails. C(nvidia-smi -q -x) prints about 30 KiB per GPU.
    type: int
    default: 16777216
attributes:
  check_mode:
    support: full
    description: The module only reads; it runs the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to diff.
  facts:
    support: full
    description: Returns C(dlrack_hw_gathered) in C(ansible_facts).
  platform:
    support: full
    platforms: posix
    description: Linux hosts (reads sysfs and procfs).
notes:
  - The facts are returned as C(dlrack_hw_gathered), not C(dlrack_hw), so that they never override
    what an inventory declares under C(dlrack_hw).
  - Run with C(become=true) for the memory ECC type and disk signatures.
"""

EXAMPLES = r"""
- name: Gather everything (as root for ECC and disk signatures)
  dlrack.node.hw_facts:
  become: true

- name: Only the disks, for the storage role
  dlrack.node.hw_facts:
    gather_subset: [disks]
  become: true

- name: Gather without touching the GPU driver
  dlrack.node.hw_facts:
    nvidia_smi: never
  register: hw

- name: Show the GPU count
  ansible.builtin.debug:
    msg: "{{ dlrack_hw_gathered.gpus | length }} GPUs"
"""

RETURN = r"""
dlrack_hw:
  description:
    - The gathered hardware description, as in docs/dlrack_hw.md (C(schema=1), C(source=gathered)).
    - Unknown values are null. Keys beyond the contract are listed below.
  returned: always
  type: dict
  contains:
    schema:
      description: Contract version.
      type: int
      sample: 1
    source:
      description: Always C(gathered).
      type: str
      sample: gathered
    cpu:
      description:
        - model, vendor (amd, intel, arm, other), sockets, cores (physical), threads, pcie_lanes (always
          null here, the rules fill it from the catalogue), numa_nodes (id, cpus, memory_mb; CPU-less
          nodes have cpus ""), core_cpus (SMT siblings per physical core).
        - Extra keys cores_per_socket, threads_per_core, vendor_id, family, model_id, stepping.
      type: dict
      returned: when cpu is gathered
    memory:
      description:
        - total_mb (MemTotal), ecc (multi-bit, single-bit, none, unknown), edac (driver, controllers,
          corrected, uncorrected, or null when no EDAC memory controller is registered).
        - With dmidecode, extra keys installed_mb, dimm_count and dimms.
      type: dict
      returned: when memory or edac is gathered
    gpus:
      description:
        - One entry per NVIDIA display/3D controller on the PCI bus, in nvidia-smi order (PCI order
          without nvidia-smi). index, uuid, model, memory_mb, pci_bus_id, numa_node (-1 when the
          platform has none), local_cpus, pcie (width, width_max, gen, gen_max), ecc_enabled,
          nvlink_active (active NVLink links from C(nvidia-smi nvlink -s); null when not asked or unknown).
        - Extra keys driver, vendor_id, device_id, serial, mig_mode, virtualization_mode,
          ecc_errors, retired_pages, remapped_rows, pcie.gen_host_max, pcie.speed, pcie.speed_max.
      type: list
      elements: dict
      returned: when gpus is gathered
    disks:
      description:
        - Whole disks (loop, ram, zram, sr, dm-, md, fd and nbd devices are skipped). name, by_id,
          kind (nvme, ssd, hdd from rotational), transport (nvme, sata, sas, usb, virtio, unknown),
          size_bytes, model, serial, in_use (mounted, holders, partitions, signatures, system).
        - Extra keys path, wwid, wwn, rotational, removable, by_id_all, probe (blkid of the whole disk).
      type: list
      elements: dict
      returned: when disks is gathered
    host:
      description: hostname, kernel, virtualization (systemd-detect-virt style, plus C(firecracker) from the firmware's ACPI
        tables, which come before container markers such as a C(/.dockerenv) left in a microVM's image), product, manufacturer.
      type: dict
      returned: when host is gathered
    uptime_s:
      description: Seconds since boot.
      type: float
      returned: when host is gathered
    errors:
      description:
        - What was tried and failed (a tool's exit status, unreadable output, a file that exists but
          cannot be read, a garbled value). Each line once, at most 50 lines plus a count of the rest.
      type: list
      elements: str
      returned: always
ansible_facts:
  description: The same document as C(dlrack_hw_gathered).
  returned: always
  type: dict
  contains:
    dlrack_hw_gathered:
      description: Same as C(dlrack_hw).
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather, SUBSETS
from ansible_collections.dlrack.node.plugins.module_utils.system.command import Runner


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            gather_subset=dict(type="list", elements="str", default=["all"],
                               choices=["all"] + list(SUBSETS)),
            nvidia_smi=dict(type="str"),
            amd_smi=dict(type="str"),
            dmidecode=dict(type="str", default="auto", choices=["auto", "always", "never"]),
            command_timeout=dict(type="int", default=60),
            command_output_limit=dict(type="int", default=16 * 1024 * 1024),
        ),
        supports_check_mode=True,
    )
    timeout, limit = module.params["command_timeout"], module.params["command_output_limit"]
    if timeout < 1 or limit < 4096:
        module.fail_json(msg="command_timeout must be at least 1 (s) and command_output_limit at least 4096 "
                             "(bytes); got %d and %d" % (timeout, limit))
    # LC_ALL=C is the runner's own; the hints say how to change a limit that was hit
    run = Runner(timeout=timeout, output_limit=limit,
                 timeout_hint="the hw_facts option command_timeout",
                 limit_hint="the hw_facts option command_output_limit")
    subset = module.params["gather_subset"]
    nvidia_smi = module.params["nvidia_smi"] or "auto"
    broke = []
    doc = gather(root=module.params["root"], run_command=run,
                 subset=None if "all" in subset else subset,
                 nvidia_smi=nvidia_smi, amd_smi=module.params["amd_smi"] or "auto",
                 dmidecode=module.params["dmidecode"], command_failures=broke)
    if broke:
        module.fail_json(msg="; ".join(broke), dlrack_hw=doc, command_failures=broke)
    module.exit_json(changed=False, dlrack_hw=doc, ansible_facts={"dlrack_hw_gathered": doc})


if __name__ == "__main__":
    main()
