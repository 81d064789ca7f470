# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host<->GPU and GPU<->GPU copy bandwidth of AMD GPUs through the HIP runtime (libamdhip64.so)
with ctypes: the AMD counterpart of gpu.py's CUDA driver path, with the same result document.

Every ROCm install has libamdhip64.so, so this needs no compiler and no PyTorch. Per GPU, with
the process pinned to the GPU's local CPUs: ``bytes`` of pinned host memory (hipHostMalloc) and
device memory (hipMalloc), one warm-up copy, then ``iterations`` hipMemcpy host-to-device and
device-to-host, each timed up to hipDeviceSynchronize; then the same from pageable memory. With
2+ GPUs, every ordered pair is copied with hipMemcpyPeer (peer access enabled where
hipDeviceCanAccessPeer allows: over XGMI on Instinct platforms). Bandwidth is decimal GB/s, the
median of the iterations. The signatures are those of ROCm's hip_runtime_api.h (hipError_t is an
int, 0 = hipSuccess; hipDevice_t is an int). Without ROCm the measurement is a skip with the reason.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import os
import time

LIBHIP = ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5",
          "/opt/rocm/lib/libamdhip64.so")
HIP_SUCCESS = 0
HIP_ERROR_NO_DEVICE = 100
HIP_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
H2D, D2H = 1, 2          # hipMemcpyHostToDevice, hipMemcpyDeviceToHost

_P = ctypes.POINTER
SIGNATURES = {
    "hipInit": (ctypes.c_uint,),
    "hipDriverGetVersion": (_P(ctypes.c_int),),
    "hipGetDeviceCount": (_P(ctypes.c_int),),
    "hipSetDevice": (ctypes.c_int,),
    "hipDeviceGetName": (ctypes.c_char_p, ctypes.c_int, ctypes.c_int),
    "hipDeviceGetPCIBusId": (ctypes.c_char_p, ctypes.c_int, ctypes.c_int),
    "hipDeviceSynchronize": (),
    "hipMalloc": (_P(ctypes.c_void_p), ctypes.c_size_t),
    "hipFree": (ctypes.c_void_p,),
    "hipHostMalloc": (_P(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint),
    "hipHostFree": (ctypes.c_void_p,),
    "hipMemcpy": (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int),
    "hipMemcpyPeer": (ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t),
    "hipDeviceCanAccessPeer": (_P(ctypes.c_int), ctypes.c_int, ctypes.c_int),
    "hipDeviceEnablePeerAccess": (ctypes.c_int, ctypes.c_uint),
}
# these two return const char *, not hipError_t
NAMES = {"hipGetErrorName": (ctypes.c_int,), "hipGetErrorString": (ctypes.c_int,)}

_ADVICE = {
    2: "free GPU memory (other processes hold it) or lower the copy size",      # hipErrorOutOfMemory
    100: "no GPU is visible to ROCm (ROCR_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES, or the user is not in the render group)",
    101: "the device ordinal is not visible (ROCR_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES?)",
}


class HipUnavailable(Exception):
    """No usable HIP runtime on this node: every GPU measurement is skipped with this reason."""


class HipError(Exception):
    def __init__(self, call, code, name=None, text=None):
        self.call, self.code = call, code
        msg = "%s failed: %s (%d)%s" % (call, name or "HIP error", code, ": %s" % text if text else "")
        if code in _ADVICE:
            msg += "; %s" % _ADVICE[code]
        super(HipError, self).__init__(msg)


class Hip:
    """The HIP runtime entry points of ``lib`` (a ctypes.CDLL of libamdhip64.so, or an object
    with callables of the same names taking the same arguments) with error checking."""

    def __init__(self, lib):
        self._fn, missing = {}, []
        for table, restype in ((SIGNATURES, ctypes.c_int), (NAMES, ctypes.c_char_p)):
            for name, argtypes in table.items():
                fn = getattr(lib, name, None)
                if fn is None:
                    missing.append(name)
                    continue
                try:
                    fn.argtypes, fn.restype = argtypes, restype
                except (AttributeError, TypeError):
                    pass
                self._fn[name] = fn
        if missing:
            raise HipUnavailable("the HIP runtime lacks %s: ROCm is too old or broken" % ", ".join(sorted(missing)))

    @classmethod
    def load(cls, paths=None):
        why = []
        for path in paths or LIBHIP:
            try:
                return cls(ctypes.CDLL(path))
            except OSError as exc:
                why.append(str(exc).rsplit(":", 1)[-1].strip() or path)
        raise HipUnavailable("libamdhip64.so cannot be loaded (%s): ROCm is not installed on this node"
                             % (why[0] if why else "not found"))

    def _describe(self, fn, code):
        try:
            out = self._fn[fn](code)
            if isinstance(out, bytes):
                return out.decode("utf-8", "replace")
            return out if isinstance(out, str) else None
        except Exception:  # noqa: BLE001 - describing an error must never raise another one
            return None

    def error(self, call, code):
        return HipError(call, code, self._describe("hipGetErrorName", code), self._describe("hipGetErrorString", code))

    def __call__(self, name, *args):
        rc = self._fn[name](*args)
        if rc != HIP_SUCCESS:
            raise self.error(name, rc)

    def raw(self, name, *args):
        return self._fn[name](*args)


def _timed(hip, copy, nbytes, iterations, clock):
    from_gpu = _gpu_module()
    copy()
    hip("hipDeviceSynchronize")
    times = []
    for dummy in range(iterations):
        t0 = clock()
        copy()
        hip("hipDeviceSynchronize")
        times.append(clock() - t0)
    return from_gpu.bandwidth(nbytes, times)


def _gpu_module():
    """gpu.py (bandwidth, pinning, sysfs helpers): the one copy of what both runtimes share."""
    try:
        from ansible_collections.dlrack.node.plugins.module_utils.acceptance import gpu
        return gpu
    except ImportError:  # run as a plain file next to gpu.py
        import importlib.util as ilu
        spec = ilu.spec_from_file_location("dlrack_acceptance_gpu", os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu.py"))
        mod = ilu.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod


def measure_device(hip, ordinal, nbytes, iterations, pageable=True, clock=time.perf_counter, sysfs="/sys"):
    g = _gpu_module()
    out = {"ordinal": ordinal}
    try:
        name = ctypes.create_string_buffer(256)
        hip("hipDeviceGetName", name, 256, ordinal)
        bus = ctypes.create_string_buffer(64)
        hip("hipDeviceGetPCIBusId", bus, 64, ordinal)
    except HipError as exc:
        out["error"] = str(exc)
        return out
    bus_id = bus.value.decode("ascii", "replace").lower()
    out.update(name=name.value.decode("utf-8", "replace"), pci_bus_id=bus_id, numa_node=None,
               local_cpus=g._sysfs_pci(bus_id, "local_cpulist", sysfs))
    node = g._sysfs_pci(bus_id, "numa_node", sysfs)
    if node is not None and node.lstrip("-").isdigit() and int(node) >= 0:
        out["numa_node"] = int(node)
    host, dptr = ctypes.c_void_p(), ctypes.c_void_p()
    try:
        with g._Pinned(g._cpus(out["local_cpus"])):
            hip("hipSetDevice", ordinal)
            hip("hipMalloc", ctypes.byref(dptr), nbytes)
            hip("hipHostMalloc", ctypes.byref(host), nbytes, 0)
            ctypes.memset(host.value, 1, nbytes)
            out["h2d_pinned"] = _copy(hip, H2D, dptr.value, host.value, nbytes, iterations, clock)
            out["d2h_pinned"] = _copy(hip, D2H, dptr.value, host.value, nbytes, iterations, clock)
            if pageable:
                mm, view, addr = g._pageable(nbytes)
                try:
                    out["h2d_pageable"] = _copy(hip, H2D, dptr.value, addr, nbytes, iterations, clock)
                    out["d2h_pageable"] = _copy(hip, D2H, dptr.value, addr, nbytes, iterations, clock)
                finally:
                    del view
                    mm.close()
    except HipError as exc:
        out["error"] = str(exc)
    finally:
        if host.value is not None:
            hip.raw("hipHostFree", host)
        if dptr.value is not None:
            hip.raw("hipFree", dptr)
    return out


def _copy(hip, kind, dptr, host, nbytes, iterations, clock):
    if kind == H2D:
        return _timed(hip, lambda: hip("hipMemcpy", dptr, host, nbytes, H2D), nbytes, iterations, clock)
    return _timed(hip, lambda: hip("hipMemcpy", host, dptr, nbytes, D2H), nbytes, iterations, clock)


def measure_p2p(hip, count, nbytes, iterations, clock=time.perf_counter):
    """hipMemcpyPeer bandwidth for every ordered pair: [{src, dst, peer_access, gbps...}]."""
    bufs, pairs = [], []
    try:
        for i in range(count):
            hip("hipSetDevice", i)
            buf = ctypes.c_void_p()
            hip("hipMalloc", ctypes.byref(buf), nbytes)
            bufs.append(buf)
        for s in range(count):
            for d in range(count):
                if s == d:
                    continue
                pair = {"src": s, "dst": d}
                try:
                    can = ctypes.c_int()
                    hip("hipDeviceCanAccessPeer", ctypes.byref(can), s, d)
                    pair["peer_access"] = bool(can.value)
                    hip("hipSetDevice", s)
                    if can.value:
                        rc = hip.raw("hipDeviceEnablePeerAccess", d, 0)
                        if rc not in (HIP_SUCCESS, HIP_ERROR_PEER_ACCESS_ALREADY_ENABLED):
                            raise hip.error("hipDeviceEnablePeerAccess", rc)
                    dst, src = bufs[d].value, bufs[s].value
                    pair.update(_timed(hip, lambda: hip("hipMemcpyPeer", dst, d, src, s, nbytes), nbytes, iterations, clock))
                except HipError as exc:
                    pair["error"] = str(exc)
                pairs.append(pair)
    finally:
        for i, buf in enumerate(bufs):
            hip.raw("hipSetDevice", i)
            hip.raw("hipFree", buf)
    return pairs


def measure(nbytes=1 << 30, iterations=10, pageable=True, p2p=True, p2p_bytes=1 << 28, p2p_iterations=5,
            hip=None, clock=time.perf_counter, sysfs="/sys"):
    """The GPU measurement through HIP, in gpu.measure's document (``runtime: hip``)."""
    doc = {"status": "ok", "reason": None, "driver_version": None, "bytes": nbytes, "iterations": iterations,
           "devices": [], "p2p": None, "runtime": "hip"}
    try:
        hip = hip or Hip.load()
    except HipUnavailable as exc:
        return dict(doc, status="skip", reason=str(exc))
    rc = hip.raw("hipInit", 0)
    if rc == HIP_ERROR_NO_DEVICE:
        return dict(doc, status="skip", reason="hipInit: no GPU is visible to ROCm (no GPU, all hidden by "
                                               "ROCR_VISIBLE_DEVICES, or no access to /dev/kfd)")
    if rc != HIP_SUCCESS:
        return dict(doc, status="error", reason=str(hip.error("hipInit", rc)))
    try:
        ver = ctypes.c_int()
        hip("hipDriverGetVersion", ctypes.byref(ver))
        doc["driver_version"] = str(ver.value)
        count = ctypes.c_int()
        hip("hipGetDeviceCount", ctypes.byref(count))
    except HipError as exc:
        return dict(doc, status="error", reason=str(exc))
    if count.value == 0:
        return dict(doc, status="skip", reason="the HIP runtime sees no GPU")
    for i in range(count.value):
        doc["devices"].append(measure_device(hip, i, nbytes, iterations, pageable, clock, sysfs))
    if p2p and count.value > 1:
        try:
            doc["p2p"] = measure_p2p(hip, count.value, p2p_bytes, p2p_iterations, clock)
        except HipError as exc:
            doc["p2p"] = [{"error": str(exc)}]
    return doc
