# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host<->GPU and GPU<->GPU copy bandwidth through the CUDA driver API (libcuda.so.1) with ctypes
(AMD nodes, where /sys/class/kfd exists and libcuda does not: the HIP runtime, gpu_hip.py).

Every node with the NVIDIA driver has libcuda.so.1, so this needs no compiler, no CUDA toolkit and
no PyTorch. Per GPU, with the process pinned to the GPU's local CPUs (so host buffers are on the
GPU's NUMA node): ``bytes`` of pinned host memory (cuMemAllocHost_v2) and device memory
(cuMemAlloc_v2), one warm-up copy, then ``iterations`` cuMemcpyHtoD_v2 and cuMemcpyDtoH_v2 each timed
up to cuCtxSynchronize; then the same from pageable memory (an anonymous mmap). With 2+ GPUs, every
ordered pair is copied with cuMemcpyPeer (peer access enabled where cuDeviceCanAccessPeer allows).
Bandwidth is decimal GB/s (1e9 bytes/s), the median of the iterations, as link rates are quoted.

Standalone (stdlib only, no Ansible):  python3 plugins/module_utils/acceptance/gpu.py [--bytes N]
or, with the collection on PYTHONPATH: python3 -m ansible_collections.dlrack.node.plugins.module_utils.acceptance.gpu
Both print the JSON document that measure() returns.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import functools
import importlib
import mmap
import os
import time

try:
    from ansible_collections.dlrack.node.plugins.module_utils.hw.cpulist import CpuListError, parse_cpulist
except ImportError:  # run as a plain file (no collection on the path): load the sibling module by path
    import importlib.util as _ilu
    _spec = _ilu.spec_from_file_location("dlrack_cpulist", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hw", "cpulist.py"))
    _cpulist = _ilu.module_from_spec(_spec)
    _spec.loader.exec_module(_cpulist)
    CpuListError, parse_cpulist = _cpulist.CpuListError, _cpulist.parse_cpulist

LIBCUDA = "libcuda.so.1"
CUDA_SUCCESS = 0
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704

_P = ctypes.POINTER
# The driver API entry points used, with their C signatures (all return CUresult = int).
# CUdevice = int, CUcontext = opaque pointer, CUdeviceptr = unsigned long long (64-bit).
SIGNATURES = {
    "cuInit": (ctypes.c_uint,),
    "cuDriverGetVersion": (_P(ctypes.c_int),),
    "cuDeviceGetCount": (_P(ctypes.c_int),),
    "cuDeviceGet": (_P(ctypes.c_int), ctypes.c_int),
    "cuDeviceGetName": (ctypes.c_char_p, ctypes.c_int, ctypes.c_int),
    "cuDeviceGetPCIBusId": (ctypes.c_char_p, ctypes.c_int, ctypes.c_int),
    "cuDevicePrimaryCtxRetain": (_P(ctypes.c_void_p), ctypes.c_int),
    "cuDevicePrimaryCtxRelease_v2": (ctypes.c_int,),
    "cuCtxSetCurrent": (ctypes.c_void_p,),
    "cuCtxSynchronize": (),
    "cuMemAllocHost_v2": (_P(ctypes.c_void_p), ctypes.c_size_t),
    "cuMemFreeHost": (ctypes.c_void_p,),
    "cuMemAlloc_v2": (_P(ctypes.c_uint64), ctypes.c_size_t),
    "cuMemFree_v2": (ctypes.c_uint64,),
    "cuMemcpyHtoD_v2": (ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t),
    "cuMemcpyDtoH_v2": (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t),
    "cuMemcpyPeer": (ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t),
    "cuDeviceCanAccessPeer": (_P(ctypes.c_int), ctypes.c_int, ctypes.c_int),
    "cuCtxEnablePeerAccess": (ctypes.c_void_p, ctypes.c_uint),
    "cuGetErrorName": (ctypes.c_int, _P(ctypes.c_char_p)),
    "cuGetErrorString": (ctypes.c_int, _P(ctypes.c_char_p)),
}

# What to do about the errors an acceptance run meets in practice (cuda.h names).
_ADVICE = {
    35: "the kernel driver is older than libcuda: reboot after a driver upgrade, or reinstall the driver",
    2: "free GPU memory (other processes hold it) or lower the copy size",
    46: "the GPUs are in exclusive-process compute mode and busy: stop the jobs on them",
    101: "the device ordinal is not visible (CUDA_VISIBLE_DEVICES?)",
    802: "on NVSwitch systems start nvidia-fabricmanager (systemctl enable --now nvidia-fabricmanager)",
    999: "check dmesg for Xid errors; reset the GPU or reboot",
}


class CudaUnavailable(Exception):
    """No usable CUDA driver on this node: every GPU measurement is skipped with this reason."""


class GpuError(Exception):
    """A GPU runtime call (CUDA driver API here, HIP runtime in gpu_hip.py) returned an error code;
    a subclass names the runtime (UNKNOWN) and its advice by code (ADVICE)."""

    UNKNOWN, ADVICE = "GPU error", {}

    def __init__(self, call, code, name=None, text=None):
        self.call, self.code, self.name, self.text = call, code, name, text
        msg = "%s failed: %s (%d)%s" % (call, name or self.UNKNOWN, code, ": %s" % text if text else "")
        if code in self.ADVICE:
            msg += "; %s" % self.ADVICE[code]
        super(GpuError, self).__init__(msg)


class CudaError(GpuError):
    """A CUDA driver API call returned an error code."""

    UNKNOWN, ADVICE = "CUDA error", _ADVICE


class Runtime:
    """The entry points of a GPU runtime library with error checking; a subclass names the entry
    points measure_runtime() calls (class attributes) and its error class (ERROR)."""

    ERROR, ERROR_NAME, ERROR_STRING = GpuError, None, None
    SUCCESS, NO_DEVICE, PEER_ACCESS_ALREADY_ENABLED = 0, 100, 704
    INIT = VERSION = COUNT = SYNC = CAN_ACCESS_PEER = ENABLE_PEER_ACCESS = None

    def __init__(self, lib, tables):
        """Bind ``tables`` [(signatures, restype)] from ``lib``; the names lib lacks are in ``missing``."""
        self._fn, self.missing = {}, []
        for table, restype in tables:
            for name, argtypes in table.items():
                try:
                    fn = getattr(lib, name)
                except AttributeError:
                    self.missing.append(name)
                    continue
                try:
                    fn.argtypes, fn.restype = argtypes, restype
                except (AttributeError, TypeError):
                    pass  # a stand-in callable: it takes the same arguments without ctypes conversion
                self._fn[name] = fn

    def _describe(self, fn, code):
        """The runtime's name or text for ``code`` (entry point ``fn``), None where it has none."""
        raise NotImplementedError

    def error(self, call, code):
        return self.ERROR(call, code, self._describe(self.ERROR_NAME, code), self._describe(self.ERROR_STRING, code))

    def __call__(self, name, *args):
        rc = self._fn[name](*args)
        if rc != self.SUCCESS:
            raise self.error(name, rc)

    def raw(self, name, *args):
        """Call without raising; returns the error code."""
        return self._fn[name](*args)


class Cuda(Runtime):
    """The driver API entry points of ``lib`` (a ctypes.CDLL of libcuda.so.1, or any object with
    attributes of the same names that accept the same arguments) with error checking."""

    ERROR, ERROR_NAME, ERROR_STRING = CudaError, "cuGetErrorName", "cuGetErrorString"
    SUCCESS, NO_DEVICE = CUDA_SUCCESS, CUDA_ERROR_NO_DEVICE
    PEER_ACCESS_ALREADY_ENABLED = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
    INIT, VERSION, COUNT, SYNC = "cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuCtxSynchronize"
    CAN_ACCESS_PEER, ENABLE_PEER_ACCESS = "cuDeviceCanAccessPeer", "cuCtxEnablePeerAccess"

    def __init__(self, lib):
        super(Cuda, self).__init__(lib, ((SIGNATURES, ctypes.c_int),))
        if self.missing:
            raise CudaUnavailable("%s lacks %s: the NVIDIA driver is older than CUDA 11 (R450); upgrade it"
                                  % (LIBCUDA, ", ".join(sorted(self.missing))))

    @classmethod
    def load(cls, path=None):
        path = path or LIBCUDA
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            raise CudaUnavailable("%s cannot be loaded (%s): no NVIDIA driver on this node" % (path, exc))
        return cls(lib)

    def _describe(self, fn, code):
        out = ctypes.c_char_p()
        try:
            if self._fn[fn](code, ctypes.byref(out)) == CUDA_SUCCESS and out.value:
                return out.value.decode("utf-8", "replace")
        except Exception:  # noqa: BLE001 - describing an error must never raise another one
            pass
        return None


def bandwidth(nbytes, seconds):
    """Decimal GB/s for ``nbytes`` moved in each of ``seconds`` (a list): {gbps (median), best, worst, n}."""
    rates = sorted(nbytes / s / 1e9 for s in seconds if s > 0)
    if not rates:
        raise ValueError("no positive timing to compute a bandwidth from")
    n = len(rates)
    median = rates[n // 2] if n % 2 else (rates[n // 2 - 1] + rates[n // 2]) / 2.0
    return {"gbps": round(median, 2), "best": round(rates[-1], 2), "worst": round(rates[0], 2),
            "n": n, "bytes": nbytes}


def timed_copies(cuda, copy, nbytes, iterations, clock=time.perf_counter):
    """``copy()`` once to warm up, then ``iterations`` times, each timed up to the runtime's
    synchronize (``cuda.SYNC``: cuCtxSynchronize, hipDeviceSynchronize)."""
    copy()
    cuda(cuda.SYNC)
    times = []
    for dummy in range(iterations):
        t0 = clock()
        copy()
        cuda(cuda.SYNC)
        times.append(clock() - t0)
    return bandwidth(nbytes, times)


def _sysfs_pci(bus_id, name, sysfs="/sys"):
    try:
        with open(os.path.join(sysfs, "bus", "pci", "devices", bus_id, name)) as fh:
            return fh.read().strip()
    except (IOError, OSError):
        return None


def _cpus(cpulist):
    try:
        return set(parse_cpulist(cpulist)) or None
    except CpuListError:
        return None


class _Pinned:
    """Pin the calling thread to the GPU's local CPUs for the with-block (first-touch puts host
    buffers on the GPU's NUMA node); a no-op where the kernel or a cpuset does not allow it."""

    def __init__(self, cpus):
        self.cpus, self.saved = cpus, None

    def __enter__(self):
        if self.cpus and hasattr(os, "sched_setaffinity"):
            try:
                self.saved = os.sched_getaffinity(0)
                allowed = self.cpus & self.saved
                if allowed:
                    os.sched_setaffinity(0, allowed)
                else:
                    self.saved = None
            except OSError:
                self.saved = None
        return self

    def __exit__(self, *exc):
        if self.saved:
            try:
                os.sched_setaffinity(0, self.saved)
            except OSError:
                pass
        return False


def _device_info(cuda, ordinal):
    dev = ctypes.c_int()
    cuda("cuDeviceGet", ctypes.byref(dev), ordinal)
    name = ctypes.create_string_buffer(256)
    cuda("cuDeviceGetName", name, 256, dev.value)
    bus = ctypes.create_string_buffer(64)
    cuda("cuDeviceGetPCIBusId", bus, 64, dev.value)
    return dev.value, name.value.decode("utf-8", "replace"), bus.value.decode("ascii", "replace").lower()


def _pageable(nbytes):
    """An anonymous mapping, touched, as plain (pageable) host memory: (mapping, ctypes view, address)."""
    mm = mmap.mmap(-1, nbytes)
    view = (ctypes.c_char * nbytes).from_buffer(mm)
    addr = ctypes.addressof(view)
    ctypes.memset(addr, 1, nbytes)
    return mm, view, addr


def identify(out, name, bus, sysfs="/sys"):
    """Fill a device's document ``out`` with its name, PCI bus id and, from sysfs, NUMA node and local CPUs."""
    out.update(name=name, pci_bus_id=bus, numa_node=None, local_cpus=_sysfs_pci(bus, "local_cpulist", sysfs))
    node = _sysfs_pci(bus, "numa_node", sysfs)
    if node is not None and node.lstrip("-").isdigit() and int(node) >= 0:
        out["numa_node"] = int(node)
    return out


def host_copies(out, copy, host, nbytes, pageable=True):
    """H2D then D2H from the pinned buffer at ``host``, then (``pageable``) from pageable memory, into
    ``out``; ``copy(direction, host address)`` (direction "h2d" or "d2h") returns timed_copies()."""
    ctypes.memset(host, 1, nbytes)
    out["h2d_pinned"] = copy("h2d", host)
    out["d2h_pinned"] = copy("d2h", host)
    if pageable:
        mm, view, addr = _pageable(nbytes)
        try:
            out["h2d_pageable"] = copy("h2d", addr)
            out["d2h_pageable"] = copy("d2h", addr)
        finally:
            del view
            mm.close()
    return out


def _h2d_d2h(cuda, direction, dptr, host, nbytes, iterations, clock):
    if direction == "h2d":
        return timed_copies(cuda, lambda: cuda("cuMemcpyHtoD_v2", dptr, host, nbytes), nbytes, iterations, clock)
    return timed_copies(cuda, lambda: cuda("cuMemcpyDtoH_v2", host, dptr, nbytes), nbytes, iterations, clock)


def measure_device(cuda, ordinal, nbytes, iterations, pageable=True, clock=time.perf_counter, sysfs="/sys"):
    """H2D/D2H bandwidth of one GPU; errors are reported in the result, not raised."""
    out = {"ordinal": ordinal}
    try:
        dev, name, bus = _device_info(cuda, ordinal)
    except CudaError as exc:
        out["error"] = str(exc)
        return out
    identify(out, name, bus, sysfs)
    ctx = ctypes.c_void_p()
    host = ctypes.c_void_p()
    dptr = ctypes.c_uint64()
    retained = False
    try:
        with _Pinned(_cpus(out["local_cpus"])):
            cuda("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
            retained = True
            cuda("cuCtxSetCurrent", ctx)
            cuda("cuMemAlloc_v2", ctypes.byref(dptr), nbytes)
            cuda("cuMemAllocHost_v2", ctypes.byref(host), nbytes)
            host_copies(out, lambda direction, addr: _h2d_d2h(cuda, direction, dptr.value, addr, nbytes, iterations, clock),
                        host.value, nbytes, pageable)
    except CudaError as exc:
        out["error"] = str(exc)
    finally:
        if host.value is not None:
            cuda.raw("cuMemFreeHost", host)
        if dptr.value:
            cuda.raw("cuMemFree_v2", dptr.value)
        if retained:
            cuda.raw("cuDevicePrimaryCtxRelease_v2", dev)
    return out


def measure_p2p(cuda, count, nbytes, iterations, clock=time.perf_counter):
    """cuMemcpyPeer bandwidth for every ordered pair of GPUs: [{src, dst, peer_access, gbps...}]."""
    devs, ctxs, bufs = [], [], []
    try:
        for i in range(count):
            dev = ctypes.c_int()
            cuda("cuDeviceGet", ctypes.byref(dev), i)
            ctx = ctypes.c_void_p()
            cuda("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev.value)
            devs.append(dev.value)
            ctxs.append(ctx)
            cuda("cuCtxSetCurrent", ctx)
            buf = ctypes.c_uint64()
            cuda("cuMemAlloc_v2", ctypes.byref(buf), nbytes)
            bufs.append(buf)

        def select(s):
            cuda("cuCtxSetCurrent", ctxs[s])

        def copy(s, d):
            cuda("cuMemcpyPeer", bufs[d].value, ctxs[d], bufs[s].value, ctxs[s], nbytes)
        return peer_pairs(cuda, count, devs.__getitem__, ctxs.__getitem__, select, copy, nbytes, iterations, clock)
    finally:
        for i, buf in enumerate(bufs):
            cuda.raw("cuCtxSetCurrent", ctxs[i])
            cuda.raw("cuMemFree_v2", buf.value)
        for dev in devs:
            cuda.raw("cuDevicePrimaryCtxRelease_v2", dev)


def peer_pairs(api, count, device, peer, select, copy, nbytes, iterations, clock=time.perf_counter):
    """Every ordered pair (src, dst) of ``count`` GPUs, peer access enabled where the runtime allows it,
    ``copy(src, dst)`` timed: [{src, dst, peer_access, gbps...} or {src, dst, error}]. ``device(i)``:
    what CAN_ACCESS_PEER takes for GPU i; ``peer(i)``: what ENABLE_PEER_ACCESS takes; ``select(i)``
    makes GPU i current."""
    pairs = []
    for s in range(count):
        for d in range(count):
            if s == d:
                continue
            pair = {"src": s, "dst": d}
            try:
                can = ctypes.c_int()
                api(api.CAN_ACCESS_PEER, ctypes.byref(can), device(s), device(d))
                pair["peer_access"] = bool(can.value)
                select(s)
                if can.value:
                    rc = api.raw(api.ENABLE_PEER_ACCESS, peer(d), 0)
                    if rc not in (api.SUCCESS, api.PEER_ACCESS_ALREADY_ENABLED):
                        raise api.error(api.ENABLE_PEER_ACCESS, rc)
                pair.update(timed_copies(api, functools.partial(copy, s, d), nbytes, iterations, clock))
            except GpuError as exc:
                pair["error"] = str(exc)
            pairs.append(pair)
    return pairs


def document(nbytes, iterations, **extra):
    """measure()'s document before anything is measured."""
    return dict({"status": "ok", "reason": None, "driver_version": None, "bytes": nbytes, "iterations": iterations,
                 "devices": [], "p2p": None}, **extra)


def measure_runtime(api, doc, no_device, no_gpu, version, device, p2p, args):
    """measure() once the runtime ``api`` is loaded: init (``no_device``: the skip reason when it
    sees no device), driver version (``version(int)``: its text), count (``no_gpu``: the skip reason
    for none), ``device(api, ordinal, nbytes, iterations, pageable, clock, sysfs)`` for each GPU and,
    with 2+, ``p2p(api, count, p2p_bytes, p2p_iterations, clock)``. ``args``: (nbytes, iterations,
    pageable, p2p, p2p_bytes, p2p_iterations, clock, sysfs) as measure() takes them."""
    nbytes, iterations, pageable, want_p2p, p2p_bytes, p2p_iterations, clock, sysfs = args
    rc = api.raw(api.INIT, 0)
    if rc == api.NO_DEVICE:
        return dict(doc, status="skip", reason=no_device)
    if rc != api.SUCCESS:
        return dict(doc, status="error", reason=str(api.error(api.INIT, rc)))
    try:
        ver = ctypes.c_int()
        api(api.VERSION, ctypes.byref(ver))
        doc["driver_version"] = version(ver.value)
        count = ctypes.c_int()
        api(api.COUNT, ctypes.byref(count))
    except GpuError as exc:
        return dict(doc, status="error", reason=str(exc))
    if count.value == 0:
        return dict(doc, status="skip", reason=no_gpu)
    for i in range(count.value):
        doc["devices"].append(device(api, i, nbytes, iterations, pageable, clock, sysfs))
    if want_p2p and count.value > 1:
        try:
            doc["p2p"] = p2p(api, count.value, p2p_bytes, p2p_iterations, clock)
        except GpuError as exc:
            doc["p2p"] = [{"error": str(exc)}]
    return doc


def amd_node(sysfs="/sys"):
    """True when amdgpu's compute interface (KFD) is there: the GPUs are AMD's."""
    return os.path.isdir(os.path.join(sysfs, "class", "kfd", "kfd"))


def ascend_node(sysfs="/sys"):
    """True when a Huawei Ascend NPU is on the PCI bus (vendor 0x19e5, class processing
    accelerator; the ids of hw/gpu/ascend.py, which this plain-file runtime cannot import)."""
    base = os.path.join(sysfs, "bus", "pci", "devices")
    try:
        names = os.listdir(base)[:4096]
    except OSError:
        return False
    for name in names:
        vendor, cls = (_read_small(os.path.join(base, name, f)) for f in ("vendor", "class"))
        if vendor == "0x19e5" and cls.startswith("0x1200"):
            return True
    return False


def _read_small(path):
    try:
        with open(path, "rb") as fh:
            return fh.read(64).decode("ascii", "replace").replace("\x00", "").strip().lower()
    except (IOError, OSError):
        return ""


def _runtime(name):
    """The copy runtime module ``name`` (gpu_hip, gpu_npu) of this package, or beside this file."""
    try:
        return importlib.import_module("ansible_collections.dlrack.node.plugins.module_utils.acceptance." + name)
    except ImportError:  # run as a plain file next to it
        import importlib.util as ilu
        spec = ilu.spec_from_file_location("dlrack_acceptance_" + name, os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py"))
        mod = ilu.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod


def _hip():
    return _runtime("gpu_hip")


def _with_hip(doc, args, clock, sysfs):
    """A mixed node (libcuda and an AMD GPU): the HIP runtime's devices after the CUDA ones, each
    saying its runtime; the document's status stays CUDA's unless CUDA saw nothing."""
    nbytes, iterations, pageable, p2p, p2p_bytes, p2p_iterations = args
    hip = _hip().measure(nbytes, iterations, pageable, p2p, p2p_bytes, p2p_iterations, clock=clock, sysfs=sysfs)
    for dev in doc.get("devices") or []:
        dev.setdefault("runtime", "cuda")
    for dev in hip.get("devices") or []:
        doc.setdefault("devices", []).append(dict(dev, runtime="hip"))
    doc["runtimes"] = {"cuda": {"status": doc["status"], "reason": doc["reason"]},
                       "hip": {"status": hip["status"], "reason": hip["reason"]}}
    if doc["status"] == "skip" and hip["status"] == "ok":
        doc["status"], doc["reason"] = "ok", None
    return doc


def measure(nbytes=1 << 30, iterations=10, pageable=True, p2p=True, p2p_bytes=1 << 28, p2p_iterations=5,
            cuda=None, clock=time.perf_counter, sysfs="/sys"):
    """The whole GPU measurement: {status: ok|skip|error, reason, driver_version, devices, p2p}."""
    doc = document(nbytes, iterations)
    # nvidia-smi numbers GPUs in PCI bus order; make CUDA ordinals agree (results carry the bus id anyway).
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    try:
        cuda = cuda or Cuda.load()
    except CudaUnavailable as exc:
        if amd_node(sysfs):   # no libcuda on an AMD node: the HIP runtime measures (gpu_hip.py)
            return _hip().measure(nbytes, iterations, pageable, p2p, p2p_bytes, p2p_iterations, clock=clock,
                                  sysfs=sysfs)
        if ascend_node(sysfs):   # an Ascend node: torch_npu measures, or says why not (gpu_npu.py)
            return _runtime("gpu_npu").measure(nbytes, iterations, pageable, p2p, p2p_bytes, p2p_iterations,
                                               clock=clock, sysfs=sysfs)
        return dict(doc, status="skip", reason=str(exc))
    doc = measure_runtime(cuda, doc, "cuInit: no CUDA device is visible (no GPU, or all hidden by "
                                     "CUDA_VISIBLE_DEVICES or MIG mode)", "the CUDA driver sees no GPU",
                          lambda ver: "%d.%d" % (ver // 1000, (ver % 1000) // 10), measure_device, measure_p2p,
                          (nbytes, iterations, pageable, p2p, p2p_bytes, p2p_iterations, clock, sysfs))
    if amd_node(sysfs):   # a mixed node: its AMD GPUs are measured too (the HIP runtime)
        doc = _with_hip(doc, (nbytes, iterations, pageable, p2p, p2p_bytes, p2p_iterations), clock, sysfs)
    return doc


def main(argv=None):
    import argparse
    import json
    import sys
    parser = argparse.ArgumentParser(description="GPU copy bandwidth through libcuda (prints JSON)")
    parser.add_argument("--bytes", type=int, default=1 << 30, help="bytes per copy (default 1 GiB)")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--no-pageable", action="store_true")
    parser.add_argument("--no-p2p", action="store_true")
    parser.add_argument("--p2p-bytes", type=int, default=1 << 28)
    args = parser.parse_args(argv)
    doc = measure(args.bytes, args.iterations, not args.no_pageable, not args.no_p2p, args.p2p_bytes)
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 1 if doc["status"] == "error" else 0


if __name__ == "__main__":
    raise SystemExit(main())
