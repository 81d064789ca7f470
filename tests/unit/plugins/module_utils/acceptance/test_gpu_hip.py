"""GPU copy bandwidth through the HIP runtime (issue 21.8), without an AMD GPU: a stand-in for
libamdhip64.so whose entry points take hip_runtime_api.h's arguments (out-parameters written
through byref) and a clock that advances by bytes / rate on every copy. The stand-in is built from
the documented API only; no ROCm exists here."""
import ctypes

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.acceptance import gpu as ag
from ansible_collections.dlrack.node.plugins.module_utils.acceptance import gpu_hip as ah


def _v(arg):
    return arg.value if isinstance(arg, ctypes.c_void_p) else arg


class Clock:
    def __init__(self):
        self.t = 50.0

    def __call__(self):
        return self.t


class FakeLibhip:
    ERRORS = {2: (b"hipErrorOutOfMemory", b"out of memory"), 100: (b"hipErrorNoDevice", b"no ROCm-capable device")}

    def __init__(self, clock, ngpus=2, h2d=55.0e9, d2h=52.0e9, pageable=20.0e9, peer=64.0e9, fail=None, peer_ok=True):
        self.clock, self.ngpus, self.fail, self.peer_ok = clock, ngpus, dict(fail or {}), peer_ok
        self.rates = {"h2d": h2d, "d2h": d2h, "pageable": pageable, "peer": peer}
        self.host, self.device, self.enabled, self.current, self._next = {}, {}, set(), 0, 0x100000

    def _rc(self, name, *key):
        return self.fail.get((name,) + key, self.fail.get(name, 0))

    def hipInit(self, flags):
        return self._rc("hipInit")

    def hipDriverGetVersion(self, ref):
        ref._obj.value = 60342134
        return 0

    def hipGetDeviceCount(self, ref):
        ref._obj.value = self.ngpus
        return 0

    def hipSetDevice(self, dev):
        self.current = dev
        return self._rc("hipSetDevice")

    def hipDeviceGetName(self, buf, length, dev):
        buf.value = b"AMD Instinct MI300X"
        return 0

    def hipDeviceGetPCIBusId(self, buf, length, dev):
        buf.value = b"0000:%02X:00.0" % (0x05 + 0x10 * dev)
        return 0

    def hipDeviceSynchronize(self):
        return 0

    def hipMalloc(self, ref, n):
        rc = self._rc("hipMalloc", self.current)
        if rc == 0:
            self._next += 0x1000
            self.device[self._next] = (self.current, n)
            ref._obj.value = self._next
        return rc

    def hipFree(self, ptr):
        del self.device[_v(ptr)]
        return 0

    def hipHostMalloc(self, ref, n, flags):
        assert flags == 0
        buf = ctypes.create_string_buffer(n)
        self.host[ctypes.addressof(buf)] = buf
        ref._obj.value = ctypes.addressof(buf)
        return 0

    def hipHostFree(self, ptr):
        del self.host[_v(ptr)]
        return 0

    def hipMemcpy(self, dst, src, n, kind):
        dev, host = (dst, src) if kind == 1 else (src, dst)
        assert kind in (1, 2) and dev in self.device and self.device[dev][0] == self.current
        rate = self.rates["h2d" if kind == 1 else "d2h"] if host in self.host else self.rates["pageable"]
        self.clock.t += n / rate
        return self._rc("hipMemcpy")

    def hipMemcpyPeer(self, dst, dst_dev, src, src_dev, n):
        assert self.device[dst][0] == dst_dev and self.device[src][0] == src_dev
        self.clock.t += n / (self.rates["peer"] if (src_dev, dst_dev) in self.enabled else self.rates["pageable"])
        return 0

    def hipDeviceCanAccessPeer(self, ref, dev, peer):
        ref._obj.value = 1 if self.peer_ok else 0
        return 0

    def hipDeviceEnablePeerAccess(self, peer, flags):
        if (self.current, peer) in self.enabled:
            return 704
        self.enabled.add((self.current, peer))
        return 0

    def hipGetErrorName(self, code):
        return self.ERRORS.get(code, (b"hipErrorUnknown", b""))[0]

    def hipGetErrorString(self, code):
        return self.ERRORS.get(code, (b"", b"unknown"))[1]


def _sysfs(tmp_path, ngpus=2):
    for i in range(ngpus):
        d = tmp_path / "bus" / "pci" / "devices" / ("0000:%02x:00.0" % (0x05 + 0x10 * i))
        d.mkdir(parents=True)
        (d / "numa_node").write_text("%d\n" % i)
        (d / "local_cpulist").write_text("0\n")
    (tmp_path / "class" / "kfd" / "kfd").mkdir(parents=True)
    return str(tmp_path)


def test_two_mi300x_measured_exactly_with_xgmi_peer_copies(tmp_path):
    clock = Clock()
    lib = FakeLibhip(clock)
    doc = ah.measure(nbytes=1 << 16, iterations=4, p2p_bytes=1 << 16, hip=ah.Hip(lib), clock=clock, sysfs=_sysfs(tmp_path))
    assert (doc["status"], doc["runtime"], doc["driver_version"]) == ("ok", "hip", "60342134")
    dev = doc["devices"][1]
    assert (dev["pci_bus_id"], dev["numa_node"], dev["name"]) == ("0000:15:00.0", 1, "AMD Instinct MI300X")
    assert (dev["h2d_pinned"]["gbps"], dev["d2h_pinned"]["gbps"], dev["h2d_pageable"]["gbps"]) == (55.0, 52.0, 20.0)
    assert [(p["src"], p["dst"], p["peer_access"], p["gbps"]) for p in doc["p2p"]] == [(0, 1, True, 64.0), (1, 0, True, 64.0)]
    assert lib.host == {} and lib.device == {}


def test_out_of_memory_is_reported_named_and_released(tmp_path):
    clock = Clock()
    lib = FakeLibhip(clock, fail={("hipMalloc", 1): 2})
    doc = ah.measure(nbytes=1 << 16, iterations=2, p2p=False, hip=ah.Hip(lib), clock=clock, sysfs=_sysfs(tmp_path))
    assert "h2d_pinned" in doc["devices"][0]
    assert doc["devices"][1]["error"].startswith("hipMalloc failed: hipErrorOutOfMemory (2): out of memory; free GPU memory")
    assert lib.host == {} and lib.device == {}


def test_no_device_and_no_rocm_are_skips_with_the_reason(tmp_path, monkeypatch):
    clock = Clock()
    doc = ah.measure(hip=ah.Hip(FakeLibhip(clock, fail={"hipInit": 100})), clock=clock, sysfs=_sysfs(tmp_path))
    assert doc["status"] == "skip" and doc["reason"].startswith("hipInit: no GPU is visible to ROCm")
    with pytest.raises(ah.HipUnavailable, match="ROCm is not installed"):
        ah.Hip.load(paths=("/nonexistent/libamdhip64.so",))


def test_cuda_measure_hands_an_amd_node_to_hip(tmp_path, monkeypatch):
    monkeypatch.setattr(ag, "LIBCUDA", "/nonexistent/libcuda.so.1")
    monkeypatch.setattr(ah, "LIBHIP", ("/nonexistent/libamdhip64.so",))
    doc = ag.measure(sysfs=_sysfs(tmp_path))
    assert (doc["status"], doc["runtime"]) == ("skip", "hip") and "ROCm is not installed" in doc["reason"]
    # no KFD: an NVIDIA (or GPU-less) node keeps the CUDA reason, as before
    doc = ag.measure(sysfs=str(tmp_path / "none"))
    assert doc["status"] == "skip" and "runtime" not in doc and "libcuda.so.1 cannot be loaded" in doc["reason"]


def test_missing_entry_points_make_hip_unavailable():
    class Lib:
        def __getattr__(self, name):
            if name == "hipMemcpyPeer":
                raise AttributeError(name)
            return lambda *a: 0
    with pytest.raises(ah.HipUnavailable, match="hipMemcpyPeer"):
        ah.Hip(Lib())
