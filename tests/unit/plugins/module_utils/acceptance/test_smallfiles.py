"""The data loader's view (issue 24.2): a real small-file set written, dropped from the page cache
per file, read by forked readers pinned per group, and always removed - after success, after a
reader failure, and after a real SIGTERM/SIGINT sent to the measuring process."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.acceptance import node
from ansible_collections.dlrack.node.plugins.module_utils.acceptance import scratch
from ansible_collections.dlrack.node.plugins.module_utils.acceptance import smallfiles as sf
from ansible_collections.dlrack.node.plugins.module_utils.hw.cpulist import format_cpulist
from testpaths import COLLECTIONS  # noqa: E402  (tests/ is on sys.path: conftest)


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


def _dead_pid():
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_leftovers_of_a_killed_run_are_removed_and_a_full_tier_is_skipped(tmp_path):
    # a set this node's killed run left (its marker: this host and boot, a pid that has ended) and
    # one an older version left without a marker two days ago
    me = scratch.identity()
    old = tmp_path / (sf.SCRATCH_PREFIX + "killed") / "d0000"
    old.mkdir(parents=True)
    (old / "f0000000.bin").write_bytes(b"x")
    (old.parent / scratch.MARKER).write_text(json.dumps(dict(me, pid=_dead_pid(), start=1)))
    legacy = tmp_path / (sf.SCRATCH_PREFIX + "999999")
    legacy.mkdir()
    os.utime(str(legacy), (time.time() - 2 * 86400,) * 2)
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


def _default_dispositions():
    """In the child before exec: the signals the measurement handles at their default action,
    whatever the test run inherited (nohup ignores SIGHUP, a background job SIGINT)."""
    for sig in sf.SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


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
    # The child's dispositions are set here, not inherited: under `nohup make test` SIGHUP is
    # ignored and stays ignored in a child (test_an_ignored_signal_stays_ignored tests that case);
    # this test is about a signal that would end the process (issue 30.10).
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(tier), COLLECTIONS, "200000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                            preexec_fn=_default_dispositions)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:             # wait until files are on the tier
            sets = _left(tier)
            if sets and any(os.path.isdir(str(tier / s / "d0001")) for s in sets):
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


def _nohup_dispositions():
    _default_dispositions()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def test_an_ignored_signal_stays_ignored(tmp_path):
    """A measurement started under nohup (SIGHUP ignored) is not ended by a SIGHUP: only signals
    that would end the process are turned into a clean stop."""
    tier = tmp_path / "tier"
    tier.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(tier), COLLECTIONS, "200000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                            preexec_fn=_nohup_dispositions)
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


def _shared_tier(tmp_path):
    """A tier directory anyone may write: mode 0777 without the sticky bit, and a directory outside it."""
    tier = tmp_path / "tier"
    tier.mkdir()
    os.chmod(str(tier), 0o777)
    outside = tmp_path / "outside"
    outside.mkdir()
    return tier, outside


def test_a_planted_link_never_takes_a_write_outside_the_tier(tmp_path, monkeypatch):
    """Issue 30.11: in a 0777 non-sticky tier another user plants links under the names a run
    would use (the old fixed name <prefix><pid>) and, while the run writes, renames its directory
    away and puts a link to a directory outside the tier in its place. Nothing is written outside,
    the planted links are left alone, the run's own files are removed."""
    tier, outside = _shared_tier(tmp_path)
    (tier / (sf.SCRATCH_PREFIX + str(os.getpid()))).symlink_to(str(outside))
    real_write = sf.write_set
    swapped = {}

    def write_after_a_swap(root, files, file_kb, limit_s=None):
        [mine] = [n for n in _left(tier) if not os.path.islink(str(tier / n))]
        os.rename(str(tier / mine), str(tier / "moved-away"))      # the directory is renamed away
        (tier / mine).symlink_to(str(outside))                     # and a link put in its place
        swapped["name"] = mine
        return real_write(root, files, file_kb, limit_s)
    monkeypatch.setattr(sf, "write_set", write_after_a_swap)
    doc = sf.measure(str(tier), [{"name": "node0", "cpus": None}], files=30, file_kb=4, workers_per_group=1, phase_s=5)
    assert doc["status"] == "ok" and doc["cold"]["files"] == 30, doc
    assert os.listdir(str(outside)) == []
    assert os.path.islink(str(tier / swapped["name"])) and os.path.islink(str(tier / (sf.SCRATCH_PREFIX + str(os.getpid()))))
    assert os.listdir(str(tier / "moved-away")) == []              # the run's files went to its own directory, then away


def test_a_live_runs_set_is_left_alone_a_dead_ones_removed(tmp_path):
    """Issue 30.11: two runs measure the same shared tier. Another live run's set (this node: a
    running process with the marker's pid and start time; another node: a fresh marker) is kept;
    a set of a process that ended, whose pid now runs another process (another start time), of
    an earlier boot, or another node's a day old is removed."""
    tier, dummy = _shared_tier(tmp_path)
    me = scratch.identity()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = None
        for dummy_try in range(100):
            start = scratch.process_start(live.pid)
            if start is not None:
                break
            time.sleep(0.01)
        sets = {"live-here": dict(me, pid=live.pid, start=start),
                "live-there": dict(me, host="gpu-b07", pid=4242, boot_id="0f0e0d0c-0000-4000-8000-000000000001"),
                "reused-pid": dict(me, pid=live.pid, start=start + 1),
                "dead-here": dict(me, pid=_dead_pid()),
                "other-boot": dict(me, pid=live.pid, start=start, boot_id="0f0e0d0c-0000-4000-8000-000000000002"),
                "old-there": dict(me, host="gpu-b07", pid=4242, created=time.time() - 2 * 86400)}
        for name, marker in sets.items():
            d = tier / (sf.SCRATCH_PREFIX + name)
            (d / "d0000").mkdir(parents=True)
            (d / "d0000" / "f0000000.bin").write_bytes(b"x")
            (d / scratch.MARKER).write_text(json.dumps(marker))
        doc = sf.measure(str(tier), [{"name": "node0", "cpus": None}], files=10, file_kb=4, workers_per_group=1, phase_s=5)
        assert doc["status"] == "ok"
        assert _left(tier) == [sf.SCRATCH_PREFIX + n for n in ("live-here", "live-there")]
        assert os.listdir(str(tier / (sf.SCRATCH_PREFIX + "live-here") / "d0000")) == ["f0000000.bin"]
    finally:
        live.kill()
        live.wait()
    # the live run has ended: the next run removes its set; another node's fresh one stays
    sf.measure(str(tier), [{"name": "node0", "cpus": None}], files=10, file_kb=4, workers_per_group=1, phase_s=5)
    assert _left(tier) == [sf.SCRATCH_PREFIX + "live-there"]
