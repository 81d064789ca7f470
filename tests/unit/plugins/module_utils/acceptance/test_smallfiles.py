"""The data loader's view (issue 24.2): a real small-file set written, dropped from the page cache
per file, read by forked readers pinned per group, and always removed - after success, after a
reader failure, and after a real SIGTERM/SIGINT sent to the measuring process."""
import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.acceptance import node
from ansible_collections.dlrack.node.plugins.module_utils.acceptance import smallfiles as sf
from ansible_collections.dlrack.node.plugins.module_utils.hw.cpulist import format_cpulist
from testpaths import ROOT  # noqa: E402  (tests/ is on sys.path: conftest)


def _left(path):
    return sorted(n for n in os.listdir(str(path)) if n.startswith(sf.SCRATCH_PREFIX))


def test_real_small_files_cold_then_warm(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    groups = [{"name": "GPU0", "cpus": {cpus[0]}}, {"name": "GPU1", "cpus": {cpus[-1]}}]
    doc = sf.measure(str(tmp_path), groups, files=600, file_kb=16, workers_per_group=2, phase_s=20)
    assert doc["status"] == "ok", doc
    assert doc["cache_drop"] == {"per_file": True, "files": 600, "system_wide": False}
    for phase in ("cold", "warm"):
        ph = doc[phase]
        assert ph["files"] == 600 and ph["complete"] and ph["bytes"] == 600 * 16 * 1024
        assert ph["files_per_s"] > 0 and ph["mb_per_s"] > 0
        assert [g["name"] for g in ph["groups"]] == ["GPU0", "GPU1"]
        assert sum(g["files"] for g in ph["groups"]) == 600 and all(g["files"] == 300 for g in ph["groups"])
        assert ph["groups"][0]["cpus"] == str(cpus[0]) and ph["groups"][0]["workers"] == 2
    assert _left(tmp_path) == []


def test_leftovers_of_a_killed_run_are_removed_and_a_full_tier_is_skipped(tmp_path):
    old = tmp_path / (sf.SCRATCH_PREFIX + "999999") / "d0000"
    old.mkdir(parents=True)
    (old / "f0000000.bin").write_bytes(b"x")
    doc = sf.measure(str(tmp_path), [{"name": "node0", "cpus": None}], files=10, file_kb=4, workers_per_group=1, phase_s=5)
    assert doc["status"] == "ok" and _left(tmp_path) == []
    doc = sf.measure(str(tmp_path), [{"name": "node0", "cpus": None}], files=1 << 40, file_kb=4)
    assert doc["status"] == "skip" and "lower acceptance_smallfile_count" in doc["reason"]


def test_a_reader_failure_is_an_error_and_leaves_nothing(tmp_path, monkeypatch):
    real = sf._read_share

    def broken(root, indices, deadline):
        os.unlink(sf.file_path(root, 0))      # a file vanishes under the reader
        return real(root, indices, deadline)
    monkeypatch.setattr(sf, "_read_share", broken)
    doc = sf.measure(str(tmp_path), [{"name": "GPU0", "cpus": None}], files=20, file_kb=4, workers_per_group=1, phase_s=5)
    assert doc["status"] == "error" and "small-file reader failed: GPU0" in doc["reason"]
    assert _left(tmp_path) == []


_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[2])
from ansible_collections.dlrack.node.plugins.module_utils.acceptance import smallfiles as sf
print("start", flush=True)
sf.measure(sys.argv[1], [{"name": "node0", "cpus": None}], files=int(sys.argv[3]), file_kb=4,
           workers_per_group=2, phase_s=600)
print("returned", flush=True)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_real_signal_removes_the_set_then_ends_the_process(tmp_path, signum):
    """A real signal while the set is being written or read: the set is removed, then the process
    ends as the signal's default action says (SIGTERM, SIGHUP: killed by it; SIGINT:
    KeyboardInterrupt). SIGHUP is what a module gets when the controller's ssh session with a
    tty (``-tt``, Ansible's default without pipelining) goes away: Ctrl-C, a killed job."""
    tier = tmp_path / "tier"
    tier.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(tier), os.path.join(ROOT, ".collections"), "200000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:             # wait until files are on the tier
            sets = _left(tier)
            if sets and os.path.isdir(str(tier / sets[0] / "d0001")):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the set never appeared")
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _left(tier) == [], os.listdir(str(tier))
    assert "returned" not in out
    if signum in (signal.SIGTERM, signal.SIGHUP):
        assert proc.returncode == -signum, err
    else:
        assert proc.returncode != 0 and "KeyboardInterrupt" in err


def test_reader_groups_per_gpu_else_numa_else_count(tmp_path):
    sysfs = tmp_path / "sys"
    dev = sysfs / "bus" / "pci" / "devices" / "0000:17:00.0"
    dev.mkdir(parents=True)
    (dev / "local_cpulist").write_text("0-3,8\n")
    for n, cl in (("node0", "0-3"), ("node1", "4-7")):
        (sysfs / "devices" / "system" / "node" / n).mkdir(parents=True)
        (sysfs / "devices" / "system" / "node" / n / "cpulist").write_text(cl + "\n")
    gpu = {"devices": [{"ordinal": 0, "local_cpus": "0-1"}, {"ordinal": 1, "local_cpus": None}]}
    assert sf.reader_groups(gpu, None, str(sysfs)) == [
        {"name": "GPU0", "cpus": {0, 1}, "kind": "gpu"}, {"name": "GPU1", "cpus": None, "kind": "gpu"}]
    health = {"gpus": [{"index": 0, "pci_bus_id": "00000000:17:00.0"}]}
    assert sf.reader_groups({"devices": []}, health, str(sysfs)) == [{"name": "GPU0", "cpus": {0, 1, 2, 3, 8}, "kind": "gpu"}]
    assert [g["name"] for g in sf.reader_groups(None, None, str(sysfs))] == ["node0", "node1"]
    assert sf.reader_groups(None, None, str(sysfs))[1]["cpus"] == {4, 5, 6, 7}
    assert [g["kind"] for g in sf.reader_groups(gpu, None, str(sysfs), count=3)] == ["count"] * 3
    assert sf.reader_groups(None, None, str(tmp_path / "none")) == [{"name": "readers", "cpus": None, "kind": "count"}]


def test_check_mode_plan_writes_nothing(tmp_path):
    opts = {"gpu": False, "health": False, "dcgm": False, "memory": False, "gpu_bytes": 1, "gpu_iterations": 1,
            "hot_path": str(tmp_path), "cold_path": "", "require_mount": False, "fio_size_mb": 16, "fio_runtime_s": 1,
            "fio_rand_runtime_s": 1, "smallfile_count": 500, "smallfile_kb": 8, "smallfile_workers": 2}
    doc = node.plan(opts)
    hot = doc["smallfiles"]["hot"]
    assert hot["status"] == "skip" and hot["reason"].startswith("check mode: would measure %s: 500 files of 8 KiB" % tmp_path)
    assert doc["smallfiles"]["cold"]["reason"] == "no path set for this tier"
    assert os.listdir(str(tmp_path)) == []
    assert node.plan(dict(opts, smallfile_count=0))["smallfiles"]["hot"]["opted_out"] is True


def test_reader_groups_bus_id_is_normalized_and_never_a_path(tmp_path):
    """The bus id nvidia-smi printed is the collection's PCI address (normalize_pci_bus_id), never
    a path: a value with '..' reads no file outside /sys/bus/pci/devices."""
    sysfs = tmp_path / "sys"
    dev = sysfs / "bus" / "pci" / "devices" / "0000:c1:00.0"
    dev.mkdir(parents=True)
    (dev / "local_cpulist").write_text("0-3\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "local_cpulist").write_text("0-7\n")
    health = {"gpus": [{"index": 0, "pci_bus_id": "00000000:C1:00.0"}, {"index": 1, "pci_bus_id": "C1:00.0"},
                       {"index": 2, "pci_bus_id": "../../../../outside"}]}
    assert sf.reader_groups({"devices": []}, health, str(sysfs)) == [
        {"name": "GPU0", "cpus": {0, 1, 2, 3}, "kind": "gpu"}, {"name": "GPU1", "cpus": {0, 1, 2, 3}, "kind": "gpu"},
        {"name": "GPU2", "cpus": None, "kind": "gpu"}]


def test_group_cpus_are_written_as_a_kernel_cpulist(tmp_path):
    """A group's CPUs in the result are a cpulist as the kernel writes it (hw/cpulist.format_cpulist),
    the form of every other cpulist in dlrack_hw, not one id per CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    doc = sf.read_phase(str(tmp_path), 0, [{"name": "GPU0", "cpus": set(cpus)}], 1, 1)
    assert doc["groups"][0]["cpus"] == format_cpulist(cpus)
    assert sf._cpulist({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"


def test_the_write_phase_is_bounded_in_time(tmp_path, monkeypatch):
    """Writing the set stops at WRITE_LIMIT_S (a declared sample_kb of 16 MiB x 10,000 files is
    160 GB: on an HDD archive that ran past the task timeout); the set then holds the files written
    so far, the result says how many of how many, the reads use those, and the set is removed."""
    monkeypatch.setattr(sf, "WRITE_LIMIT_S", 0, raising=False)
    doc = sf.measure(str(tmp_path), [{"name": "node0", "cpus": None}], files=50, file_kb=4, workers_per_group=1, phase_s=5)
    assert doc["status"] == "ok", doc
    assert doc["files"] == 1 and doc["files_requested"] == 50
    assert doc["cold"]["files"] == 1 and doc["cold"]["complete"] is True
    assert _left(tmp_path) == []
    monkeypatch.setattr(sf, "WRITE_LIMIT_S", 600)
    doc = sf.measure(str(tmp_path), [{"name": "node0", "cpus": None}], files=50, file_kb=4, workers_per_group=1, phase_s=5)
    assert doc["files"] == 50 and "files_requested" not in doc


def test_an_ignored_signal_stays_ignored(tmp_path):
    """A measurement started under nohup (SIGHUP ignored) is not ended by a SIGHUP: only signals
    that would end the process are turned into a clean stop."""
    tier = tmp_path / "tier"
    tier.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(tier), os.path.join(ROOT, ".collections"), "200000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not _left(tier):
            time.sleep(0.05)
        proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        assert proc.poll() is None and _left(tier), "a SIGHUP that nohup ignores ended the measurement"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGTERM and _left(tier) == [], err
