"""GPU copy bandwidth through libcuda, without a GPU: a stand-in for the driver library whose entry
points take the real API's arguments (ctypes out-parameters written through byref) and a clock that
advances by bytes / rate on every copy, so the arithmetic is checked exactly."""
import ctypes
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.acceptance import gpu as ag

from testpaths import COLLECTIONS, ROOT  # noqa: E402  (tests/ is on sys.path: conftest)

ERRORS = {2: ("CUDA_ERROR_OUT_OF_MEMORY", "out of memory"), 100: ("CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"),
          802: ("CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized")}


def _v(arg):
    """What the C function receives for a pointer-typed argument given as a ctypes object."""
    return arg.value if isinstance(arg, ctypes.c_void_p) else arg


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


class FakeLibcuda:
    """The entry points acceptance_gpu uses, as Python callables with the C argument order."""

    def __init__(self, clock, ngpus=2, h2d=55.0e9, d2h=53.0e9, pageable=17.5e9, peer=400.0e9, fail=None):
        self.clock, self.ngpus, self.fail = clock, ngpus, dict(fail or {})
        self.rates = {"h2d": h2d, "d2h": d2h, "pageable": pageable, "peer": peer}
        self.host = {}       # address -> ctypes buffer (real memory: the code memsets it)
        self.device = {}     # fake device pointer -> bytes
        self.retained = {}
        self.peer_enabled = set()
        self.calls = []
        self._next = 0x10000

    def _rc(self, name, *key):
        self.calls.append(name)
        return self.fail.get((name,) + key, self.fail.get(name, 0))

    def cuInit(self, flags):
        return self._rc("cuInit")

    def cuDriverGetVersion(self, ref):
        ref._obj.value = 13000
        return self._rc("cuDriverGetVersion")

    def cuDeviceGetCount(self, ref):
        ref._obj.value = self.ngpus
        return self._rc("cuDeviceGetCount")

    def cuDeviceGet(self, ref, ordinal):
        ref._obj.value = ordinal
        return self._rc("cuDeviceGet")

    def cuDeviceGetName(self, buf, length, dev):
        buf.value = b"NVIDIA H200"
        return self._rc("cuDeviceGetName")

    def cuDeviceGetPCIBusId(self, buf, length, dev):
        buf.value = b"0000:%02X:00.0" % (0x18 + dev)
        return self._rc("cuDeviceGetPCIBusId")

    def cuDevicePrimaryCtxRetain(self, ref, dev):
        rc = self._rc("cuDevicePrimaryCtxRetain", dev)
        if rc == 0:
            ref._obj.value = 0x7000 + dev
            self.retained[dev] = self.retained.get(dev, 0) + 1
        return rc

    def cuDevicePrimaryCtxRelease_v2(self, dev):
        self.retained[dev] -= 1
        return self._rc("cuDevicePrimaryCtxRelease_v2")

    def cuCtxSetCurrent(self, ctx):
        self.current = _v(ctx)
        return self._rc("cuCtxSetCurrent")

    def cuCtxSynchronize(self):
        return self._rc("cuCtxSynchronize")

    def cuMemAllocHost_v2(self, ref, n):
        rc = self._rc("cuMemAllocHost_v2")
        if rc == 0:
            buf = ctypes.create_string_buffer(n)
            self.host[ctypes.addressof(buf)] = buf
            ref._obj.value = ctypes.addressof(buf)
        return rc

    def cuMemFreeHost(self, ptr):
        del self.host[_v(ptr)]
        return 0

    def cuMemAlloc_v2(self, ref, n):
        rc = self._rc("cuMemAlloc_v2", self.current - 0x7000)
        if rc == 0:
            self._next += 0x1000
            self.device[self._next] = n
            ref._obj.value = self._next
        return rc

    def cuMemFree_v2(self, dptr):
        del self.device[dptr]
        return 0

    def _copy(self, name, n, pinned):
        rate = self.rates[name] if pinned else self.rates["pageable"]
        self.clock.t += n / rate
        return self._rc("cuMemcpy")

    def cuMemcpyHtoD_v2(self, dptr, host, n):
        assert dptr in self.device and self.device[dptr] >= n
        return self._copy("h2d", n, host in self.host)

    def cuMemcpyDtoH_v2(self, host, dptr, n):
        assert dptr in self.device
        return self._copy("d2h", n, host in self.host)

    def cuMemcpyPeer(self, dst, dctx, src, sctx, n):
        dctx, sctx = _v(dctx), _v(sctx)
        assert dst in self.device and src in self.device and dctx != sctx
        self.clock.t += n / (self.rates["peer"] if (sctx, dctx) in self.peer_enabled else self.rates["pageable"])
        return self._rc("cuMemcpyPeer")

    def cuDeviceCanAccessPeer(self, ref, dev, peer):
        ref._obj.value = 1
        return self._rc("cuDeviceCanAccessPeer")

    def cuCtxEnablePeerAccess(self, peer_ctx, flags):
        peer_ctx = _v(peer_ctx)
        if (self.current, peer_ctx) in self.peer_enabled:
            return 704
        self.peer_enabled.add((self.current, peer_ctx))
        return self._rc("cuCtxEnablePeerAccess")

    def cuGetErrorName(self, code, ref):
        if code not in ERRORS:
            return 1
        ref._obj.value = ERRORS[code][0].encode()
        return 0

    def cuGetErrorString(self, code, ref):
        if code not in ERRORS:
            return 1
        ref._obj.value = ERRORS[code][1].encode()
        return 0


def _sysfs(tmp_path, ngpus=2):
    for i in range(ngpus):
        d = tmp_path / "bus" / "pci" / "devices" / ("0000:%02x:00.0" % (0x18 + i))
        d.mkdir(parents=True)
        (d / "numa_node").write_text("%d\n" % i)
        (d / "local_cpulist").write_text("0\n")
    return str(tmp_path)


def _measure(tmp_path, lib, clock, **kw):
    return ag.measure(nbytes=kw.pop("nbytes", 1 << 16), iterations=kw.pop("iterations", 4), p2p_bytes=1 << 16,
                      cuda=ag.Cuda(lib), clock=clock, sysfs=_sysfs(tmp_path, lib.ngpus), **kw)


def test_bandwidth_arithmetic():
    # 1 GiB in 19.5 ms = 55.06 GB/s (decimal GB, as link rates are quoted)
    fig = ag.bandwidth(1 << 30, [0.0195, 0.0196, 0.0194])
    assert fig == {"gbps": 55.06, "best": 55.35, "worst": 54.78, "n": 3, "bytes": 1 << 30}
    assert ag.bandwidth(1000, [1e-6, 2e-6, 4e-6, 8e-6])["gbps"] == round((0.5 + 0.25) / 2, 2)  # even count: mean of the middle two
    with pytest.raises(ValueError):
        ag.bandwidth(1000, [0.0])


def test_two_gpus_measured_exactly(tmp_path):
    clock = Clock()
    lib = FakeLibcuda(clock)
    doc = _measure(tmp_path, lib, clock)
    assert doc["status"] == "ok" and doc["driver_version"] == "13.0"
    assert [d["pci_bus_id"] for d in doc["devices"]] == ["0000:18:00.0", "0000:19:00.0"]
    dev = doc["devices"][0]
    assert dev["numa_node"] == 0 and dev["local_cpus"] == "0" and dev["name"] == "NVIDIA H200"
    assert (dev["h2d_pinned"]["gbps"], dev["d2h_pinned"]["gbps"]) == (55.0, 53.0)
    assert (dev["h2d_pageable"]["gbps"], dev["d2h_pageable"]["gbps"]) == (17.5, 17.5)
    assert dev["h2d_pinned"]["n"] == 4
    pairs = doc["p2p"]
    assert [(p["src"], p["dst"]) for p in pairs] == [(0, 1), (1, 0)]
    assert all(p["peer_access"] and p["gbps"] == 400.0 for p in pairs)
    # everything allocated was freed and every context retained was released
    assert lib.host == {} and lib.device == {} and set(lib.retained.values()) == {0}


def test_no_libcuda_is_a_skip_with_the_reason(monkeypatch):
    monkeypatch.setattr(ag, "LIBCUDA", "/nonexistent/libcuda.so.1")
    doc = ag.measure(nbytes=4096)
    assert doc["status"] == "skip"
    assert "/nonexistent/libcuda.so.1 cannot be loaded" in doc["reason"] and "no NVIDIA driver" in doc["reason"]


def test_driver_without_the_v2_entry_points_is_unavailable():
    lib = FakeLibcuda(Clock())

    class Lib:  # a pre-R450 libcuda: the _v2 allocator is not exported
        def __getattr__(self, name):
            if name == "cuMemAlloc_v2":
                raise AttributeError(name)
            return getattr(lib, name)
    with pytest.raises(ag.CudaUnavailable, match="lacks cuMemAlloc_v2"):
        ag.Cuda(Lib())


def test_no_device_is_a_skip_other_init_errors_are_errors_with_the_driver_message(tmp_path):
    clock = Clock()
    doc = _measure(tmp_path / "a", FakeLibcuda(clock, fail={"cuInit": 100}), clock)
    assert doc["status"] == "skip" and "no CUDA device" in doc["reason"]
    doc = _measure(tmp_path / "b", FakeLibcuda(clock, fail={"cuInit": 802}), clock)
    assert doc["status"] == "error"
    assert doc["reason"].startswith("cuInit failed: CUDA_ERROR_SYSTEM_NOT_READY (802): system not yet initialized")
    assert "nvidia-fabricmanager" in doc["reason"]
    doc = _measure(tmp_path / "c", FakeLibcuda(clock, fail={"cuInit": 12345}), clock)
    assert doc["reason"] == "cuInit failed: CUDA error (12345)"  # cuGetErrorName/String do not know it either


def test_out_of_memory_on_one_gpu_is_reported_and_released(tmp_path):
    clock = Clock()
    lib = FakeLibcuda(clock, fail={("cuMemAlloc_v2", 1): 2})
    doc = _measure(tmp_path, lib, clock, p2p=False)
    ok, bad = doc["devices"]
    assert ok["h2d_pinned"]["gbps"] == 55.0
    assert bad["error"].startswith("cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory; free GPU memory")
    assert "h2d_pinned" not in bad
    assert lib.host == {} and lib.device == {} and set(lib.retained.values()) == {0}


def test_p2p_without_peer_access_goes_through_the_host(tmp_path):
    clock = Clock()
    lib = FakeLibcuda(clock)
    lib.cuDeviceCanAccessPeer = lambda ref, dev, peer: (setattr(ref._obj, "value", 0), 0)[1]
    doc = _measure(tmp_path, lib, clock)
    assert [p["peer_access"] for p in doc["p2p"]] == [False, False]
    assert [p["gbps"] for p in doc["p2p"]] == [17.5, 17.5]


def test_runs_standalone_without_ansible():
    """The lead's fallback on a GPU machine: the file alone, and the module path, print JSON."""
    path = os.path.join(ROOT, "plugins", "module_utils", "acceptance", "gpu.py")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-I", path, "--bytes", "4096", "--iterations", "2"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd="/", timeout=60, check=False)
    doc = json.loads(proc.stdout)
    assert proc.returncode == (1 if doc["status"] == "error" else 0), proc.stderr
    assert doc["status"] in ("ok", "skip", "error") and doc["bytes"] == 4096
    env["PYTHONPATH"] = COLLECTIONS
    proc = subprocess.run([sys.executable, "-m", "ansible_collections.dlrack.node.plugins.module_utils.acceptance.gpu",
                           "--bytes", "4096", "--iterations", "2"], stdout=subprocess.PIPE, env=env, timeout=60, check=False)
    assert json.loads(proc.stdout)["bytes"] == 4096
