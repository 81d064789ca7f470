"""Acceptance's copy runtimes per vendor (issue 31): Ascend nodes measure through torch_npu or skip
with the reason; a mixed NVIDIA+AMD node measures its AMD GPUs too (it measured the CUDA ones only).
torch_npu and the runtimes are stand-ins here (no NPU or GPU on this machine): the figures the
stand-in clock gives are checked exactly; the real libraries run only on a node."""
import sys
import types

from ansible_collections.dlrack.node.plugins.module_utils.acceptance import gpu as ag
from ansible_collections.dlrack.node.plugins.module_utils.acceptance import gpu_hip as ah
from ansible_collections.dlrack.node.plugins.module_utils.acceptance import gpu_npu as an


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class FakeTorch:
    """torch with torch.npu: each copy advances the clock by ``seconds[kind]``."""
    uint8 = "uint8"

    def __init__(self, clock, count=2, fail_on=None):
        self.clock, self.count, self.fail_on, self.current = clock, count, fail_on, None
        torch = self

        class Tensor:
            def __init__(self, where):
                self.where = where

            def pin_memory(self):
                return self

            def copy_(self, src, non_blocking=False):
                torch.clock.t += 0.02 if self.where == "host" else 0.025   # d2h 50 GB/s, h2d 40 GB/s of 1 GB
                return self
        self.Tensor = Tensor
        self.npu = types.SimpleNamespace(device_count=lambda: self.count, set_device=self._set,
                                         get_device_name=lambda i: "Ascend910B4", synchronize=lambda: None)

    def _set(self, i):
        if i == self.fail_on:
            raise RuntimeError("EL0004: Failed to allocate memory")
        self.current = i

    def empty(self, n, dtype=None, device=None):
        return self.Tensor("host" if device is None else device)


def test_two_npus_measured_with_torch_npu():
    clock = Clock()
    doc = an.measure(nbytes=10 ** 9, iterations=3, torch=FakeTorch(clock), clock=clock)
    assert (doc["status"], doc["runtime"]) == ("ok", "torch_npu")
    assert [(d["ordinal"], d["name"], d["h2d_pinned"]["gbps"], d["d2h_pinned"]["gbps"]) for d in doc["devices"]] == [
        (0, "Ascend910B4", 40.0, 50.0), (1, "Ascend910B4", 40.0, 50.0)]


def test_an_npu_error_is_in_its_result_not_raised():
    clock = Clock()
    doc = an.measure(nbytes=10 ** 9, iterations=2, torch=FakeTorch(clock, fail_on=1), clock=clock)
    assert doc["status"] == "ok" and doc["devices"][1]["error"].startswith("RuntimeError: EL0004")


def test_no_npu_visible_and_no_torch_npu_are_skips_with_the_reason(monkeypatch):
    assert an.measure(torch=FakeTorch(Clock(), count=0))["status"] == "skip"
    monkeypatch.setitem(sys.modules, "torch_npu", None)        # import torch_npu raises ImportError
    doc = an.measure()
    assert doc["status"] == "skip" and doc["reason"].startswith("torch_npu is not installed")


def _npu_sysfs(tmp_path):
    d = tmp_path / "bus" / "pci" / "devices" / "0000:c1:00.0"
    d.mkdir(parents=True)
    (d / "vendor").write_text("0x19e5\n")
    (d / "class").write_text("0x120000\n")
    nic = tmp_path / "bus" / "pci" / "devices" / "0000:3d:00.0"    # a Huawei NIC alone is no NPU node
    nic.mkdir(parents=True)
    (nic / "vendor").write_text("0x19e5\n")
    (nic / "class").write_text("0x020000\n")
    return str(tmp_path)


def test_cuda_measure_hands_an_ascend_node_to_torch_npu(tmp_path, monkeypatch):
    monkeypatch.setattr(ag, "LIBCUDA", "/nonexistent/libcuda.so.1")
    monkeypatch.setitem(sys.modules, "torch_npu", None)
    doc = ag.measure(sysfs=_npu_sysfs(tmp_path))
    assert (doc["status"], doc["runtime"]) == ("skip", "torch_npu") and "torch_npu is not installed" in doc["reason"]
    # without the NPU only the NIC is left: the CUDA reason, as before
    (tmp_path / "bus" / "pci" / "devices" / "0000:c1:00.0" / "class").write_text("0x020000\n")
    doc = ag.measure(sysfs=str(tmp_path))
    assert "runtime" not in doc and "libcuda.so.1 cannot be loaded" in doc["reason"]


def test_mixed_node_measures_its_amd_gpus_too(tmp_path, monkeypatch):
    (tmp_path / "class" / "kfd" / "kfd").mkdir(parents=True)
    seen = {}

    def fake_hip_measure(*args, **kw):
        seen["called"] = True
        return {"status": "ok", "reason": None, "devices": [{"ordinal": 0, "pci_bus_id": "0000:05:00.0"}]}
    monkeypatch.setattr(ah, "measure", fake_hip_measure)
    cuda_doc = {"status": "ok", "reason": None, "devices": [{"ordinal": 0, "pci_bus_id": "0000:18:00.0"}], "p2p": None}
    monkeypatch.setattr(ag, "measure_runtime", lambda *a, **k: dict(cuda_doc, devices=list(cuda_doc["devices"])))
    doc = ag.measure(cuda=object(), sysfs=str(tmp_path))
    assert seen["called"] and [(d["pci_bus_id"], d["runtime"]) for d in doc["devices"]] == [
        ("0000:18:00.0", "cuda"), ("0000:05:00.0", "hip")]
    assert doc["runtimes"]["hip"]["status"] == "ok"
    # an NVIDIA-only node (no KFD) keeps its document as it was: no runtime keys added
    doc = ag.measure(cuda=object(), sysfs=str(tmp_path / "none"))
    assert doc == cuda_doc
