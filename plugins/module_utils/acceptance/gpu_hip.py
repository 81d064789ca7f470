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
import functools
import os
import time

try:
    from ansible_collections.dlrack.node.plugins.module_utils.acceptance import gpu as _gpu
except ImportError:  # run as a plain file next to gpu.py (gpu.py loads this one so): load it by path
    import importlib.util as _ilu
    _spec = _ilu.spec_from_file_location("dlrack_acceptance_gpu", os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu.py"))
    _gpu = _ilu.module_from_spec(_spec)
    _spec.loader.exec_module(_gpu)

LIBHIP = ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5",
          "/opt/rocm/lib/libamdhip64.so")
HIP_SUCCESS = 0
HIP_ERROR_NO_DEVICE = 100
HIP_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
H2D, D2H = 1, 2          # hipMemcpyHostToDevice, hipMemcpyDeviceToHost
KINDS = {"h2d": H2D, "d2h": D2H}

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


class HipError(_gpu.GpuError):
    """A HIP runtime call returned an error code."""

    UNKNOWN, ADVICE = "HIP error", _ADVICE


class Hip(_gpu.Runtime):
    """The HIP runtime entry points of ``lib`` (a ctypes.CDLL of libamdhip64.so, or an object
    with callables of the same names taking the same arguments) with error checking."""

    ERROR, ERROR_NAME, ERROR_STRING = HipError, "hipGetErrorName", "hipGetErrorString"
    SUCCESS, NO_DEVICE, PEER_ACCESS_ALREADY_ENABLED = HIP_SUCCESS, HIP_ERROR_NO_DEVICE, HIP_ERROR_PEER_ACCESS_ALREADY_ENABLED
    INIT, VERSION, COUNT, SYNC = "hipInit", "hipDriverGetVersion", "hipGetDeviceCount", "hipDeviceSynchronize"
    CAN_ACCESS_PEER, ENABLE_PEER_ACCESS = "hipDeviceCanAccessPeer", "hipDeviceEnablePeerAccess"

    def __init__(self, lib):
        super(Hip, self).__init__(lib, ((SIGNATURES, ctypes.c_int), (NAMES, ctypes.c_char_p)))
        if self.missing:
            raise HipUnavailable("the HIP runtime lacks %s: ROCm is too old or broken" % ", ".join(sorted(self.missing)))

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


def measure_device(hip, ordinal, nbytes, iterations, pageable=True, clock=time.perf_counter, sysfs="/sys"):
    """H2D/D2H bandwidth of one GPU (gpu.measure_device's document); errors are reported in it, not raised."""
    out = {"ordinal": ordinal}
    try:
        name = ctypes.create_string_buffer(256)
        hip("hipDeviceGetName", name, 256, ordinal)
        bus = ctypes.create_string_buffer(64)
        hip("hipDeviceGetPCIBusId", bus, 64, ordinal)
    except HipError as exc:
        out["error"] = str(exc)
        return out
    _gpu.identify(out, name.value.decode("utf-8", "replace"), bus.value.decode("ascii", "replace").lower(), sysfs)
    host, dptr = ctypes.c_void_p(), ctypes.c_void_p()
    try:
        with _gpu._Pinned(_gpu._cpus(out["local_cpus"])):
            hip("hipSetDevice", ordinal)
            hip("hipMalloc", ctypes.byref(dptr), nbytes)
            hip("hipHostMalloc", ctypes.byref(host), nbytes, 0)
            _gpu.host_copies(out, lambda direction, addr: _copy(hip, KINDS[direction], dptr.value, addr, nbytes, iterations, clock),
                             host.value, nbytes, pageable)
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
        return _gpu.timed_copies(hip, lambda: hip("hipMemcpy", dptr, host, nbytes, H2D), nbytes, iterations, clock)
    return _gpu.timed_copies(hip, lambda: hip("hipMemcpy", host, dptr, nbytes, D2H), nbytes, iterations, clock)


def measure_p2p(hip, count, nbytes, iterations, clock=time.perf_counter):
    """hipMemcpyPeer bandwidth for every ordered pair: [{src, dst, peer_access, gbps...}]."""
    bufs = []
    try:
        for i in range(count):
            hip("hipSetDevice", i)
            buf = ctypes.c_void_p()
            hip("hipMalloc", ctypes.byref(buf), nbytes)
            bufs.append(buf)

        def copy(s, d):
            hip("hipMemcpyPeer", bufs[d].value, d, bufs[s].value, s, nbytes)
        ordinal = int  # HIP takes the ordinal itself where CUDA takes a device or a context
        return _gpu.peer_pairs(hip, count, ordinal, ordinal, functools.partial(hip, "hipSetDevice"), copy, nbytes,
                               iterations, clock)
    finally:
        for i, buf in enumerate(bufs):
            hip.raw("hipSetDevice", i)
            hip.raw("hipFree", buf)


def measure(nbytes=1 << 30, iterations=10, pageable=True, p2p=True, p2p_bytes=1 << 28, p2p_iterations=5,
            hip=None, clock=time.perf_counter, sysfs="/sys"):
    """The GPU measurement through HIP, in gpu.measure's document (``runtime: hip``)."""
    doc = _gpu.document(nbytes, iterations, runtime="hip")
    try:
        hip = hip or Hip.load()
    except HipUnavailable as exc:
        return dict(doc, status="skip", reason=str(exc))
    return _gpu.measure_runtime(hip, doc, "hipInit: no GPU is visible to ROCm (no GPU, all hidden by "
                                          "ROCR_VISIBLE_DEVICES, or no access to /dev/kfd)", "the HIP runtime sees no GPU",
                                str, measure_device, measure_p2p,
                                (nbytes, iterations, pageable, p2p, p2p_bytes, p2p_iterations, clock, sysfs))
