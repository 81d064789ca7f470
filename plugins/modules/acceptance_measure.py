#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: acceptance_measure
short_description: Measure a GPU node for acceptance (GPU copy bandwidth, storage, memory, GPU health)
version_added: "0.1.0"
description:
  - Measures, on the node, the figures that a spec check cannot prove, and returns them raw; the
    verdicts are made on the controller by M(dlrack.node.acceptance_report).
  - GPU host<->device bandwidth per GPU (pinned and pageable) and GPU<->GPU bandwidth per ordered
    pair, through the CUDA driver API (C(libcuda.so.1)) with ctypes, the process pinned to each GPU's
    local CPUs. No libcuda or no GPU gives C(status=skip) with the reason, never a failure.
  - Sequential write then read throughput of the hot and cold tiers with fio on a scratch file inside
    the tier's directory (never a raw device), bounded in size and time, direct I/O where the
    filesystem allows it, and removed afterwards.
  - Memory copy bandwidth per NUMA node (parallel memmove, one thread per core of the node).
  - GPU health from C(nvidia-smi -q -x) and C(dcgmi diag) when DCGM is installed.
  - Writes nothing but the scratch files, which it removes. Never reports a change.
  - Scratch files live in a private directory of the run (mkdtemp, mode 0700, files created with O_EXCL and O_NOFOLLOW,
    named through the directory's descriptor), so a link planted in a tier other users can write never takes a write
    outside it. Of the sets left in a tier only those of a run that provably ended are removed (owner marker with host,
    pid, process start time and boot id); another live run's, also another node's on a shared tier, is left alone.
author:
  - dlrack.node contributors (@dlrack)
options:
  gpu:
    description: Measure GPU copy bandwidth.
    type: bool
    default: true
  gpu_bytes:
    description: Bytes per host<->device copy.
    type: int
    default: 1073741824
  gpu_iterations:
    description: Timed copies per direction (after one warm-up copy); the median is reported.
    type: int
    default: 10
  p2p:
    description: Measure GPU<->GPU bandwidth for every ordered pair when there are 2 or more GPUs.
    type: bool
    default: true
  p2p_bytes:
    description: Bytes per peer copy.
    type: int
    default: 268435456
  p2p_iterations:
    description: Timed peer copies per pair.
    type: int
    default: 5
  health:
    description: Read GPU health with C(nvidia-smi -q -x) and, for AMD GPUs, from amdgpu's RAS sysfs.
    type: bool
    default: true
  dcgm:
    description: Run C(dcgmi diag -r) O(dcgm_level) when dcgmi is installed.
    type: bool
    default: true
  dcgm_level:
    description: DCGM diagnostic level (1 is about a minute; 2 and up run for many minutes).
    type: int
    default: 1
    choices: [1, 2, 3, 4]
  hot_path:
    description: Directory of the hot tier to measure; empty skips it.
    type: str
    default: ""
  cold_path:
    description: Directory of the cold tier to measure; empty skips it.
    type: str
    default: ""
  require_mount:
    description: Measure a tier only when its path is a mount point, so an unmounted tier never measures the root disk.
    type: bool
    default: true
  fio_size_mb:
    description: Size of the scratch file per tier, MiB.
    type: int
    default: 1024
  fio_runtime_s:
    description: Time limit of each fio phase (write, then read), seconds.
    type: int
    default: 10
  fio_block_kb:
    description: fio block size, KiB.
    type: int
    default: 1024
  fio_iodepth:
    description: fio queue depth per job.
    type: int
    default: 32
  fio_jobs:
    description: fio jobs, each on its own region of the scratch file.
    type: int
    default: 4
  fio_rand_runtime_s:
    description: Time of the 4 KiB random read phase (O_DIRECT where the filesystem allows it) after the
      sequential read, seconds; 0 leaves it out.
    type: int
    default: 10
  fio_rand_iodepth:
    description: Queue depth per job of the random read phase.
    type: int
    default: 32
  fio_rand_jobs:
    description: Jobs of the random read phase; 0 = 4 per device of the tier (found from the mount in sysfs), at most 64.
    type: int
    default: 0
  smallfile_count:
    description: Files of the synthetic small-file dataset written per tier and read cold by the readers
      (the data loader's view); 0 leaves it out.
    type: int
    default: 10000
  smallfile_kb:
    description: Size of each small file, KiB.
    type: int
    default: 64
  smallfile_workers:
    description: Reader processes per GPU (per NUMA node without GPUs), each pinned to the GPU's local CPUs.
    type: int
    default: 4
  smallfile_groups:
    description: Unpinned reader groups instead of one per GPU or NUMA node; 0 = per GPU, else per NUMA node.
    type: int
    default: 0
  smallfile_phase_s:
    description: Time limit of each small-file read phase (cold, then warm), seconds.
    type: int
    default: 20
  smallfile_drop_caches:
    description: Also drop the whole page cache (C(/proc/sys/vm/drop_caches)) before the cold read; by default
      only the dataset's own pages are dropped (C(posix_fadvise) DONTNEED per file).
    type: bool
    default: false
  memory:
    description: Measure memory copy bandwidth per NUMA node.
    type: bool
    default: true
  memory_bytes:
    description: Bytes of buffers per NUMA node (split over its cores).
    type: int
    default: 2147483648
  memory_iterations:
    description: Copies of each buffer.
    type: int
    default: 10
attributes:
  check_mode:
    support: full
    description: Measures nothing and writes nothing; every part is C(skip) with what would be measured or why it would be skipped.
  diff_mode:
    support: none
    description: Measures only; there is nothing to diff.
notes:
  - Needs root for O_DIRECT on most tiers, for C(dcgmi) and to write into root-owned tier directories.
  - The GPU measurement also runs without Ansible, for example
    C(python3 plugins/module_utils/acceptance/gpu.py --bytes 1073741824).
"""

EXAMPLES = r"""
- name: Measure GPUs, the hot tier and memory
  dlrack.node.acceptance_measure:
    hot_path: /mnt/hot
    cold_path: ""
  become: true
  register: measured
"""

RETURN = r"""
acceptance:
  description: Raw figures (no verdicts) per part.
  returned: always
  type: dict
  contains:
    check_mode:
      description: True when nothing was measured (check mode).
      type: bool
    gpu:
      description: C(status) (ok, skip, error), C(reason), C(devices) (per GPU C(h2d_pinned), C(d2h_pinned),
        C(h2d_pageable), C(d2h_pageable) with C(gbps) median, C(best), C(worst), and C(link)), C(p2p) (per pair).
      type: dict
    health:
      description: C(status), C(reason), C(gpus) (per GPU persistence mode, remapped rows, retired pages,
        volatile uncorrected ECC, active clock-event reasons and counters, PCIe link).
      type: dict
    dcgm:
      description: C(status), C(reason), C(tests) (name, category, status, messages).
      type: dict
    storage:
      description: Per tier (C(hot), C(cold)) C(path), C(status), C(reason), C(direct), C(read) and C(write)
        with C(bytes_per_s), C(randread) (4 KiB random reads) with C(iops), C(lat_p50_us), C(lat_p99_us),
        C(jobs), C(iodepth), and C(devices) (the disks under the tier's filesystem, C(name) and C(kind)).
      type: dict
    smallfiles:
      description: Per tier C(path), C(status), C(reason), C(files) (written; C(files_requested) when the writing
        stopped at its 120 s limit first), C(file_kb), C(write_s), C(cache_drop), and
        C(cold) and C(warm) read phases with C(files_per_s), C(mb_per_s) in total and per reader group (GPU or NUMA
        node, its C(cpus)).
      type: dict
    mem_total_bytes:
      description: MemTotal of the node (/proc/meminfo), for the page cache note.
      type: int
    memory:
      description: C(status), C(reason), C(nodes) (per NUMA node C(gbps), C(threads)).
      type: dict
    gpu_count:
      description: GPUs found (CUDA, else nvidia-smi); absent in check mode.
      type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dlrack.node.plugins.module_utils.acceptance.node import measure, plan

_ARGS = dict(
    gpu=dict(type="bool", default=True),
    gpu_bytes=dict(type="int", default=1 << 30),
    gpu_iterations=dict(type="int", default=10),
    p2p=dict(type="bool", default=True),
    p2p_bytes=dict(type="int", default=1 << 28),
    p2p_iterations=dict(type="int", default=5),
    health=dict(type="bool", default=True),
    dcgm=dict(type="bool", default=True),
    dcgm_level=dict(type="int", default=1, choices=[1, 2, 3, 4]),
    hot_path=dict(type="str", default=""),
    cold_path=dict(type="str", default=""),
    require_mount=dict(type="bool", default=True),
    fio_size_mb=dict(type="int", default=1024),
    fio_runtime_s=dict(type="int", default=10),
    fio_block_kb=dict(type="int", default=1024),
    fio_iodepth=dict(type="int", default=32),
    fio_jobs=dict(type="int", default=4),
    fio_rand_runtime_s=dict(type="int", default=10),
    fio_rand_iodepth=dict(type="int", default=32),
    fio_rand_jobs=dict(type="int", default=0),
    smallfile_count=dict(type="int", default=10000),
    smallfile_kb=dict(type="int", default=64),
    smallfile_workers=dict(type="int", default=4),
    smallfile_groups=dict(type="int", default=0),
    smallfile_phase_s=dict(type="int", default=20),
    smallfile_drop_caches=dict(type="bool", default=False),
    memory=dict(type="bool", default=True),
    memory_bytes=dict(type="int", default=2 << 30),
    memory_iterations=dict(type="int", default=10),
)

_POSITIVE = ("gpu_bytes", "gpu_iterations", "p2p_bytes", "p2p_iterations", "fio_size_mb", "fio_runtime_s",
             "fio_block_kb", "fio_iodepth", "fio_jobs", "memory_bytes", "memory_iterations", "smallfile_kb",
             "smallfile_workers", "smallfile_phase_s")


def main():
    module = AnsibleModule(argument_spec=_ARGS, supports_check_mode=True)
    opts = module.params
    bad = ["%s=%s" % (k, opts[k]) for k in _POSITIVE if opts[k] < 1]
    if bad:
        module.fail_json(msg="acceptance_measure: these must be positive: %s" % ", ".join(bad))
    bad = ["%s=%s" % (k, opts[k]) for k in ("fio_rand_runtime_s", "fio_rand_iodepth", "fio_rand_jobs", "smallfile_count",
                                            "smallfile_groups")
           if opts[k] < (1 if k == "fio_rand_iodepth" else 0)]
    if bad:
        module.fail_json(msg="acceptance_measure: fio_rand_iodepth must be positive, the others 0 or more: %s" % ", ".join(bad))
    if opts["fio_size_mb"] < opts["fio_jobs"]:
        module.fail_json(msg="acceptance_measure: fio_size_mb (%d) must be at least fio_jobs (%d)"
                         % (opts["fio_size_mb"], opts["fio_jobs"]))
    doc = plan(opts) if module.check_mode else measure(opts)
    module.exit_json(changed=False, acceptance=doc)


if __name__ == "__main__":
    main()
