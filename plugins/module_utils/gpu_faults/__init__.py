# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU fault events from the kernel log (NVIDIA Xid, NVSwitch SXid, amdgpu RAS/reset), judged per GPU
over time, and the GPU counters beside them. Standard library only, Python 3.6+.

- ``catalog``: the sourced catalog (its data in catalog_embedded.py) and operator overrides;
- ``parse``: kernel log lines -> events;
- ``readers``: the journal (saved cursor), /dev/kmsg (saved sequence number and boot id), a saved file;
- ``judge``: burst dedup, workload vs hardware, counts per GPU and code, escalation across reboots;
- ``counters``: remapped rows, retired pages, PCIe replay and NVLink error rates, clock-event reasons,
  GPUs on the bus whose driver no longer answers;
- ``cli``: ``dlrack-gpu-faults --kernel-log FILE --dry-run --json`` (replay of a saved log).
"""
