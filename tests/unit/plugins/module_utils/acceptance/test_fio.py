"""fio on a scratch file: argv bounds, JSON parsing (a real fio 3.33 document), the skip reasons,
the O_DIRECT fallback, and that nothing is left behind on success, failure or timeout."""
import errno
import os
import shutil

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.acceptance import fio as af
from conftest import DATA

FIO_JSON = os.path.join(DATA, "acceptance", "fio-3.33-read.json")
RAND_DISK = os.path.join(DATA, "acceptance", "fio-3.33-randread-disk-direct.json")
RAND_TMPFS = os.path.join(DATA, "acceptance", "fio-3.33-randread-tmpfs-buffered.json")


def _left(path):
    return sorted(n for n in os.listdir(str(path)) if n.startswith(af.SCRATCH_PREFIX))


def test_argv_is_bounded_and_targets_only_the_scratch_file(tmp_path):
    argv = af.fio_argv("/usr/bin/fio", str(tmp_path / "x.fio"), "write", 1024, 10, 1024, 32, 4, True)
    assert "--filename=%s" % (tmp_path / "x.fio") in argv
    assert {"--size=256M", "--offset_increment=256M", "--numjobs=4", "--runtime=10", "--time_based",
            "--direct=1", "--end_fsync=1", "--output-format=json"} <= set(argv)
    assert not [a for a in argv if a.startswith("--filename=/dev/")]
    assert "--end_fsync=1" not in af.fio_argv("fio", "f", "read", 64, 2, 1024, 1, 2, False)


def test_parse_real_fio_json_with_a_warning_before_it():
    text = "fio: some warning printed first\n" + open(FIO_JSON).read()
    fig = af.parse_fio_json(text, "read")
    assert fig["fio_version"] == "fio-3.33"
    assert fig["bytes_per_s"] > 0 and fig["io_bytes"] > 0 and fig["runtime_ms"] > 0
    with pytest.raises(af.FioError, match="no JSON"):
        af.parse_fio_json("fio: engine libaio not loadable", "read")
    with pytest.raises(af.FioError, match="job error 22"):
        af.parse_fio_json('{"jobs": [{"error": 22, "read": {}}]}', "read")


def test_randread_argv_reads_the_whole_file_at_random(tmp_path):
    argv = af.fio_argv("fio", str(tmp_path / "x.fio"), "randread", 1024, 5, 4, 32, 16, True)
    assert {"--rw=randread", "--bs=4k", "--iodepth=32", "--numjobs=16", "--size=1024M", "--norandommap",
            "--direct=1", "--runtime=5", "--time_based"} <= set(argv)
    assert not [a for a in argv if a.startswith("--offset_increment")]


def test_parse_real_randread_json_iops_and_latency_percentiles():
    """Real fio 3.33 randread documents (4 KiB, libaio QD32 x 4 jobs): O_DIRECT on a disk file and
    buffered on tmpfs (SOURCES.md)."""
    disk = af.parse_fio_json(open(RAND_DISK).read(), "read")
    tmpfs = af.parse_fio_json(open(RAND_TMPFS).read(), "read")
    for fig in (disk, tmpfs):
        assert fig["iops"] > 1000 and fig["bytes_per_s"] > 0
        assert 0 < fig["lat_p50_us"] <= fig["lat_p99_us"] and fig["lat_mean_us"] > 0
    assert (disk["iops"], disk["lat_p50_us"], disk["lat_p99_us"]) == (61047.8, 1105.9, 29753.3)
    assert tmpfs["iops"] > disk["iops"] and tmpfs["lat_p50_us"] < disk["lat_p50_us"]
    # fio < 3.0 printed clat in microseconds
    old = {"clat": {"mean": 80.5, "percentile": {"50.000000": 70, "99.000000": 300}}}
    assert af.latency_us(old) == {"lat_p50_us": 70.0, "lat_p99_us": 300.0, "lat_mean_us": 80.5}
    assert af.latency_us({}) == {}


def test_skip_reasons(tmp_path):
    assert "no path set" in af.check_target("", 64)
    assert "does not exist" in af.check_target(str(tmp_path / "missing"), 64)
    assert "is not a mount point" in af.check_target(str(tmp_path), 64, require_mount=True)
    assert af.check_target(str(tmp_path), 64, require_mount=False) is None
    assert "MiB free" in af.check_target(str(tmp_path), 1 << 40, require_mount=False)
    doc = af.measure_path(str(tmp_path), None, None, 64, 1, require_mount=False)
    assert doc["status"] == "skip" and "fio is not installed" in doc["reason"]


def test_failure_and_timeout_leave_no_scratch_file(tmp_path):
    calls = []

    def run(argv, timeout):
        calls.append((argv, timeout))
        scratch = [a.split("=", 1)[1] for a in argv if a.startswith("--filename=")][0]
        open(scratch, "w").close()  # fio lays the file out, then fails
        return 124, "", "fio timed out after %d s" % timeout
    doc = af.measure_path(str(tmp_path), "/usr/bin/fio", run, 64, 2, require_mount=False)
    assert doc["status"] == "error" and "exited 124" in doc["reason"]
    assert calls[0][1] == 2 + af.LAYOUT_ALLOWANCE_S
    assert _left(tmp_path) == []


def test_no_libaio_falls_back_to_psync(tmp_path):
    seen = []

    def run(argv, timeout):
        seen.append([a for a in argv if a.startswith("--ioengine=")][0])
        if "--ioengine=libaio" in argv:
            return 1, "", "fio: engine libaio not loadable"
        rw = [a for a in argv if a.startswith("--rw=")][0][5:]
        return 0, '{"fio version": "fio-3.1", "jobs": [{"error": 0, "%s": {"bw_bytes": 2000000000}}]}' % rw, ""
    doc = af.measure_path(str(tmp_path), "fio", run, 64, 1, require_mount=False)
    assert doc["status"] == "ok" and doc["read"]["ioengine"] == "psync" and doc["write"]["bytes_per_s"] == 2000000000
    assert seen == ["--ioengine=libaio", "--ioengine=psync", "--ioengine=psync"]  # remembered for the read phase
    assert doc["randread"] is None    # no random phase asked for


def test_o_direct_refused_means_buffered(tmp_path, monkeypatch):
    real_open = os.open

    def no_direct(path, flags, mode=0o777):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, mode)
    monkeypatch.setattr(af.os, "open", no_direct)
    assert af.direct_io_supported(str(tmp_path / "probe")) is False


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed here")
def test_real_fio_on_a_directory(tmp_path):
    doc = af.measure_path(str(tmp_path), shutil.which("fio"), _run, size_mb=32, runtime_s=1, jobs=2, require_mount=False,
                          rand_runtime_s=1, rand_iodepth=8, rand_jobs=2)
    assert doc["status"] == "ok", doc
    assert doc["read"]["bytes_per_s"] > 0 and doc["write"]["bytes_per_s"] > 0
    assert doc["write"]["jobs"] == 2 and doc["direct"] in (True, False)
    assert doc["fstype"] and isinstance(doc["devices"], list)
    rand = doc["randread"]
    assert rand["iops"] > 0 and rand["block_kb"] == 4 and (rand["jobs"], rand["iodepth"]) == (2, 8)
    assert 0 < rand["lat_p50_us"] <= rand["lat_p99_us"]
    assert os.listdir(str(tmp_path)) == []


def _run(argv, timeout):
    from ansible_collections.dlrack.node.plugins.module_utils.acceptance.node import run_command
    return run_command(argv, timeout)


def test_tier_devices_from_mountinfo_and_sysfs(tmp_path):
    """The disks under a tier's filesystem: an md RAID0 of two NVMe namespaces (slaves/), a
    partition's parent disk, a loop device; a tree laid out as the kernel's sysfs is
    (Documentation/ABI/stable/sysfs-block: /sys/dev/block/MAJ:MIN -> class/block/NAME, slaves/,
    partition, queue/rotational), since this host has no md and no NVMe."""
    sysfs = tmp_path / "sys"
    blk = sysfs / "class" / "block"
    for name, rot in (("nvme0n1", "0"), ("nvme1n1", "0"), ("sda", "1"), ("loop7", "0")):
        (blk / name / "queue").mkdir(parents=True)
        (blk / name / "queue" / "rotational").write_text(rot + "\n")
    (blk / "md0" / "slaves").mkdir(parents=True)
    for s in ("nvme0n1", "nvme1n1"):
        (blk / "md0" / "slaves" / s).symlink_to(blk / s)
    (blk / "sda" / "sda1").mkdir()
    (blk / "sda" / "sda1" / "partition").write_text("1\n")
    (blk / "sda1").symlink_to(blk / "sda" / "sda1")     # class/block/sda1 -> .../sda/sda1
    (sysfs / "dev" / "block").mkdir(parents=True)
    for devno, target in (("9:0", blk / "md0"), ("8:1", blk / "sda" / "sda1"), ("7:7", blk / "loop7")):
        (sysfs / "dev" / "block" / devno).symlink_to(target)
    mnt = tmp_path / "mnt"
    hot, cold, loop = mnt / "hot", mnt / "cold", mnt / "loop"
    info = tmp_path / "mountinfo"
    info.write_text("".join("%d 1 %s / %s rw - %s /dev/x rw\n" % (30 + i, devno, p, fs) for i, (devno, p, fs) in enumerate(
        (("9:0", hot, "xfs"), ("8:1", cold, "xfs"), ("7:7", loop, "ext4"), ("0:52", mnt / "shm", "tmpfs")))))
    orig = af._mount_of
    try:
        af._mount_of = str
        assert af.tier_devices(str(hot), str(sysfs), str(info)) == {
            "devices": [{"name": "nvme0n1", "kind": "nvme"}, {"name": "nvme1n1", "kind": "nvme"}], "fstype": "xfs"}
        assert af.tier_devices(str(cold), str(sysfs), str(info))["devices"] == [{"name": "sda", "kind": "hdd"}]
        assert af.tier_devices(str(loop), str(sysfs), str(info))["devices"] == [{"name": "loop7", "kind": "loop"}]
        assert af.tier_devices(str(mnt / "shm"), str(sysfs), str(info)) == {"devices": [], "fstype": "tmpfs"}
    finally:
        af._mount_of = orig
    real = af.tier_devices("/")                     # this host's root filesystem, read only
    assert real["fstype"] and all(d["kind"] in ("nvme", "ssd", "hdd", "loop", None) for d in real["devices"])


def test_disk_kind_is_the_block_device_readers_rule_virtio_is_unknown(tmp_path):
    """A tier's device kind follows the one block-device reader (storage/blockdev.media_kind): a
    virtio disk reports rotational=1 whatever backs it (the real h200-vm capture: vda and vdb on an
    NVMe-backed cloud VM both read 1), so its kind is unknown and no HDD figure is expected of it."""
    from blocktrees import h200_tree
    root = h200_tree(tmp_path)
    sysfs = os.path.join(root, "sys")
    blk = os.path.join(sysfs, "class", "block")
    os.makedirs(blk)
    for name in ("vda", "vdb"):           # /sys/class/block/NAME -> ../../devices/..., as /sys/block/NAME
        with open(os.path.join(sysfs, "block", name, "queue", "rotational")) as fh:
            assert fh.read().strip() == "1"
        os.symlink(os.path.join("..", "..", os.readlink(os.path.join(sysfs, "block", name))[3:]), os.path.join(blk, name))
    assert [af.disk_kind(n, sysfs) for n in ("vda", "vdb")] == [None, None]
    assert af.disk_kind("loop3", sysfs) == "loop"


def test_a_planted_link_never_takes_fio_outside_a_shared_tier(tmp_path):
    """Issue 30.11: a tier mode 0777 without the sticky bit. Another user plants a link under the
    old fixed scratch name (<prefix><pid>.fio) to a file outside the tier, and while fio runs renames
    the run's directory away and puts a link in its place. fio (here a stand-in that opens
    --filename as fio does: O_CREAT, following links) writes only into the run's own directory;
    nothing outside is created; the planted links stay; another run's fresh scratch file is kept.
    On the old code the link's target was created and written."""
    tier = tmp_path / "tier"
    tier.mkdir()
    os.chmod(str(tier), 0o777)
    outside = tmp_path / "outside"
    outside.mkdir()
    planted = tier / ("%s%d.fio" % (af.SCRATCH_PREFIX, os.getpid()))
    planted.symlink_to(str(outside / "target"))
    other = tier / (af.SCRATCH_PREFIX + "99999.fio")         # another run's file (an older version), fresh
    other.write_bytes(b"in use")
    written, swapped = [], []

    def run(argv, timeout):
        name = [a.split("=", 1)[1] for a in argv if a.startswith("--filename=")][0]
        mine = [n for n in os.listdir(str(tier)) if n.startswith(getattr(af, "SCRATCH_DIR_PREFIX", "\0"))]
        if not swapped and mine:
            os.rename(str(tier / mine[0]), str(tier / "moved-away"))
            (tier / mine[0]).symlink_to(str(outside))
            swapped.append(mine[0])
        with open(name, "ab") as fh:                        # fio: open(O_CREAT), follows links
            fh.write(b"x" * 4096)
        written.append(os.path.realpath(name))
        rw = [a for a in argv if a.startswith("--rw=")][0][5:]
        return 0, '{"fio version": "fio-3.33", "jobs": [{"error": 0, "%s": {"bw_bytes": 2000000000}}]}' % rw, ""
    doc = af.measure_path(str(tier), "fio", run, 64, 1, require_mount=False)
    assert doc["status"] == "ok", doc
    assert os.listdir(str(outside)) == []
    assert written and all(p == str(tier / "moved-away" / "scratch.fio") for p in written), written
    assert os.listdir(str(tier / "moved-away")) == []         # the run's file removed through its descriptor
    assert planted.is_symlink() and (tier / swapped[0]).is_symlink() and other.read_bytes() == b"in use"


def test_direct_io_probe_never_opens_an_existing_file_or_link(tmp_path):
    (tmp_path / "target").write_bytes(b"keep")
    (tmp_path / "link").symlink_to(str(tmp_path / "target"))
    for name in ("link", "target"):
        with pytest.raises(OSError) as err:
            af.direct_io_supported(str(tmp_path / name))
        assert err.value.errno in (errno.EEXIST, errno.ELOOP)
    assert (tmp_path / "target").read_bytes() == b"keep"
