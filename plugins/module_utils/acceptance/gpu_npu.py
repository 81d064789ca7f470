# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host-to-NPU copy bandwidth on Huawei Ascend nodes through ``torch_npu`` (issue 31.3): the copy
runtime of hw/gpu/ascend.py (``COPY_RUNTIME``), in gpu.measure()'s document (``runtime: torch_npu``).

CANN's runtime has no stable C entry point that ctypes could call as gpu.py calls libcuda, so this
uses PyTorch's Ascend adapter where the node has it: per NPU, a pinned host tensor and a device
tensor of ``bytes``, one warm-up copy, then ``iterations`` host-to-device and device-to-host
copies, each timed up to ``torch.npu.synchronize()``; decimal GB/s, the median (gpu.bandwidth).
Without torch_npu the measurement is skipped with the reason (never an error: the NPUs are judged by
the rest of acceptance). Runs as a plain file beside gpu.py like gpu_hip.py.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib
import os
import time

try:
    from ansible_collections.dlrack.node.plugins.module_utils.acceptance import gpu as _gpu
except ImportError:  # run as a plain file next to gpu.py
    import importlib.util as _ilu
    _spec = _ilu.spec_from_file_location("dlrack_acceptance_gpu", os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu.py"))
    _gpu = _ilu.module_from_spec(_spec)
    _spec.loader.exec_module(_gpu)

NO_TORCH_NPU = ("torch_npu is not installed (PyTorch's Ascend adapter matching the node's CANN release): "
                "the host-to-NPU copy bandwidth is not measured")


def load_torch():
    """(torch, None) with torch_npu imported (it registers torch.npu), or (None, reason)."""
    try:
        torch = importlib.import_module("torch")
        importlib.import_module("torch_npu")
    except ImportError as exc:
        return None, "%s (%s)" % (NO_TORCH_NPU, str(exc)[:120])
    except Exception as exc:   # a broken CANN install raises from torch_npu's import: say so, never crash
        return None, "torch_npu failed to load: %s: %s" % (type(exc).__name__, str(exc)[:200])
    return torch, None


def _timed(torch, copy, nbytes, iterations, clock):
    copy()
    torch.npu.synchronize()
    times = []
    for dummy in range(iterations):
        t0 = clock()
        copy()
        torch.npu.synchronize()
        times.append(clock() - t0)
    return _gpu.bandwidth(nbytes, times)


def measure_device(torch, ordinal, nbytes, iterations, clock=time.perf_counter):
    out = {"ordinal": ordinal, "name": None, "pci_bus_id": None, "numa_node": None, "local_cpus": None}
    try:
        torch.npu.set_device(ordinal)
        out["name"] = str(torch.npu.get_device_name(ordinal))[:128]
        host = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
        dev = torch.empty(nbytes, dtype=torch.uint8, device="npu:%d" % ordinal)
        out["h2d_pinned"] = _timed(torch, lambda: dev.copy_(host, non_blocking=True), nbytes, iterations, clock)
        out["d2h_pinned"] = _timed(torch, lambda: host.copy_(dev, non_blocking=True), nbytes, iterations, clock)
    except Exception as exc:   # the runtime's own errors (out of memory, device lost): in the result
        out["error"] = "%s: %s" % (type(exc).__name__, str(exc)[:300])
    return out


def measure(nbytes=1 << 30, iterations=10, pageable=True, p2p=True, p2p_bytes=1 << 28, p2p_iterations=5,
            torch=None, clock=time.perf_counter, sysfs="/sys"):
    """The NPU measurement: {status, reason, driver_version, devices, p2p, runtime: torch_npu}."""
    doc = _gpu.document(nbytes, iterations, runtime="torch_npu")
    if torch is None:
        torch, reason = load_torch()
        if torch is None:
            return dict(doc, status="skip", reason=reason)
    try:
        count = int(torch.npu.device_count())
    except Exception as exc:
        return dict(doc, status="error", reason="torch.npu.device_count: %s: %s" % (type(exc).__name__, str(exc)[:200]))
    if count == 0:
        return dict(doc, status="skip", reason="torch_npu sees no NPU (all hidden by the visible-devices "
                                               "variable, or no access to /dev/davinci*)")
    for i in range(count):
        doc["devices"].append(measure_device(torch, i, nbytes, iterations, clock))
    return doc
