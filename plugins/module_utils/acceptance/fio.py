# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sequential read/write throughput of a mounted storage tier with fio, on a scratch file.

Never a raw device: fio only ever gets ``--filename=`` a file ``scratch.fio`` in this run's private
directory ``<dir>/.dlrack-acceptance-fio-<random>/`` (scratch.ScratchDir: made with mkdtemp, named
through its descriptor, so a link planted in a tier others can write never takes fio outside it;
the file is created O_EXCL|O_NOFOLLOW; sets of other live runs are left alone), sized ``size_mb`` in all (split over ``jobs`` regions of the one file), each
phase capped at ``runtime_s`` (time-based) and the fio process at runtime + a layout allowance. The
file is written (write phase, ``end_fsync``), then read back (read phase), then removed, also when
fio fails or times out. After the sequential read, a 4 KiB random read phase (``randread``) on the
same file gives the small-read IOPS and the completion latency percentiles (p50, p99) a data loader
of many small files meets; its queue depth and job count are sized to saturate the tier's devices
(``rand_jobs`` jobs x ``rand_iodepth`` each; the role makes the jobs 4 per device). Direct I/O (O_DIRECT) is used when the filesystem accepts it (probed with an
open of the scratch file); otherwise (tmpfs, some FUSE and network filesystems) the phases run
buffered and the result says so, because buffered reads measure the page cache, not the disks.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os

from ansible_collections.dlrack.node.plugins.module_utils.acceptance import scratch as scratch_space
from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import read_int
from ansible_collections.dlrack.node.plugins.module_utils.storage.blockdev import media_kind, transport_of

SCRATCH_PREFIX = ".dlrack-acceptance-"
# This version's private directories; an older version's scratch files were <SCRATCH_PREFIX><pid>.fio
SCRATCH_DIR_PREFIX = SCRATCH_PREFIX + "fio-"
SCRATCH_FILE = "scratch.fio"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
LAYOUT_ALLOWANCE_S = 300
# Random reads: jobs per device of the tier x queue depth 32 = 128 requests in flight per device,
# beyond the queue depth at which NVMe datasheets quote 4 KiB random read IOPS (QD32 x 4 or x 8
# workers); an HDD saturates far below that. Capped for very wide tiers.
RAND_JOBS_PER_DEVICE = 4
MAX_RAND_JOBS = 64


def _mount_of(path):
    path = os.path.realpath(path)
    while not os.path.ismount(path):
        path = os.path.dirname(path)
    return path


def check_target(path, size_mb, require_mount=True):
    """Why ``path`` cannot be measured (a sentence), or None when it can."""
    if not path:
        return "no path set for this tier"
    if not os.path.isabs(path):
        return "%s is not an absolute path" % path
    if not os.path.isdir(path):
        return "%s does not exist or is not a directory (is the tier built and mounted?)" % path
    if require_mount and not os.path.ismount(path):
        return ("%s is not a mount point (it is on %s): the tier is not mounted; measuring it would measure "
                "another disk" % (path, _mount_of(path)))
    st = os.statvfs(path)
    free_mb = st.f_bavail * st.f_frsize // (1 << 20)
    if free_mb < size_mb * 1.1 + 64:
        return "%s has %d MiB free; the scratch file needs %d MiB (lower acceptance_fio_size_mb)" % (path, free_mb, size_mb)
    if not os.access(path, os.W_OK):
        return "%s is not writable by this user (run with become)" % path
    return None


def direct_io_supported(scratch):
    """Create the scratch file (O_EXCL, O_NOFOLLOW: never an existing file or a link), then open it
    with O_DIRECT: True when the filesystem accepts it."""
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    os.close(fd)
    if not getattr(os, "O_DIRECT", 0):
        return False
    try:
        fd = os.open(scratch, os.O_WRONLY | _NOFOLLOW | os.O_DIRECT)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
            return False
        raise
    os.close(fd)
    return True


def fio_argv(fio, scratch, rw, size_mb, runtime_s, block_kb, iodepth, jobs, direct, ioengine="libaio"):
    """Sequential phases: ``jobs`` regions of the file, one per job. ``randread``: every job reads
    random 4 KiB (``block_kb``) blocks anywhere in the whole file, without fio's random map (the
    blocks the write phase laid out are re-read at random, as a data loader's shuffled epoch does)."""
    if rw == "randread":
        argv = [fio, "--name=dlrack-acceptance", "--filename=%s" % scratch, "--rw=randread",
                "--bs=%dk" % block_kb, "--ioengine=%s" % ioengine, "--iodepth=%d" % iodepth,
                "--numjobs=%d" % jobs, "--size=%dM" % max(1, size_mb), "--norandommap", "--randrepeat=0",
                "--runtime=%d" % runtime_s, "--time_based", "--group_reporting", "--direct=%d" % (1 if direct else 0),
                "--output-format=json"]
        return argv
    per_job = max(1, size_mb // jobs)
    argv = [fio, "--name=dlrack-acceptance", "--filename=%s" % scratch, "--rw=%s" % rw,
            "--bs=%dk" % block_kb, "--ioengine=%s" % ioengine, "--iodepth=%d" % iodepth,
            "--numjobs=%d" % jobs, "--size=%dM" % per_job, "--offset_increment=%dM" % per_job,
            "--runtime=%d" % runtime_s, "--time_based", "--group_reporting", "--direct=%d" % (1 if direct else 0),
            "--output-format=json"]
    if rw == "write":
        argv.append("--end_fsync=1")
    return argv


class FioError(Exception):
    pass


def parse_fio_json(text, rw):
    """fio --output-format=json -> {bytes_per_s, io_bytes, runtime_ms, iops}. fio may print warnings
    before the JSON document; they are skipped."""
    start = (text or "").find("{")
    if start < 0:
        raise FioError("fio printed no JSON: %s" % (text or "").strip()[:300])
    try:
        doc = json.loads(text[start:])
    except ValueError as exc:
        raise FioError("fio printed unreadable JSON (%s)" % exc)
    jobs = doc.get("jobs") or []
    if not jobs:
        raise FioError("fio JSON has no jobs")
    job = jobs[0]
    if job.get("error"):
        raise FioError("fio job error %s (%s)" % (job.get("error"), os.strerror(job["error"]) if isinstance(job["error"], int) else ""))
    part = job.get(rw) or {}
    bw = part.get("bw_bytes")
    if bw is None and part.get("bw") is not None:
        bw = part["bw"] * 1024  # KiB/s in fio < 3.0
    if bw is None:
        raise FioError("fio JSON has no %s bandwidth" % rw)
    out = {"bytes_per_s": int(bw), "io_bytes": part.get("io_bytes"), "runtime_ms": part.get("runtime"),
           "iops": round(part.get("iops") or 0.0, 1), "fio_version": doc.get("fio version")}
    out.update(latency_us(part))
    return out


def latency_us(part):
    """Completion latency p50/p99/mean in microseconds from fio's ``clat_ns`` (fio >= 3.0; ``clat``
    in microseconds before), or {} when fio printed none."""
    clat, scale = part.get("clat_ns"), 1000.0
    if not isinstance(clat, dict):
        clat, scale = part.get("clat"), 1.0
    if not isinstance(clat, dict):
        return {}
    pct = clat.get("percentile") or {}
    out = {}
    for key, name in (("50.000000", "lat_p50_us"), ("99.000000", "lat_p99_us")):
        if isinstance(pct.get(key), (int, float)):
            out[name] = round(pct[key] / scale, 1)
    if isinstance(clat.get("mean"), (int, float)):
        out["lat_mean_us"] = round(clat["mean"] / scale, 1)
    return out


def remove_scratch(directory, uid=None):
    """Remove the fio scratch sets in ``directory`` that a dead run left (scratch.remove_stale:
    never a live run's, on this node or another; an older version's files by their age)."""
    return scratch_space.remove_stale(directory, (SCRATCH_DIR_PREFIX,), legacy_files=(SCRATCH_PREFIX, ".fio"), uid=uid)[0]


def measure_path(path, fio, run, size_mb=1024, runtime_s=10, block_kb=1024, iodepth=32, jobs=4, require_mount=True,
                 rand_runtime_s=0, rand_iodepth=32, rand_jobs=4, rand_block_kb=4):
    """Write then read throughput of the tier at ``path``, then (``rand_runtime_s`` > 0) 4 KiB random
    read IOPS and latency. ``run(argv, timeout)`` -> (rc, out, err).
    Returns {path, status: ok|skip|error, reason, direct, read, write, randread}."""
    out = {"path": path, "status": "ok", "reason": None, "direct": None, "read": None, "write": None,
           "randread": None, "size_mb": size_mb, "runtime_s": runtime_s}
    why = check_target(path, size_mb, require_mount)
    if why:
        return dict(out, status="skip", reason=why)
    if not fio:
        return dict(out, status="skip", reason="fio is not installed on this node (install the fio package to measure storage)")
    found = tier_devices(path)
    out["devices"], out["fstype"] = found["devices"], found["fstype"]
    if rand_jobs <= 0:                      # auto: 4 jobs per device of the tier (QD32 each saturates NVMe)
        rand_jobs = min(MAX_RAND_JOBS, RAND_JOBS_PER_DEVICE * max(1, len(out["devices"])))
    remove_scratch(path)
    own = scratch_space.ScratchDir(path, SCRATCH_DIR_PREFIX)
    try:
        scratch = os.path.join(own.create().root, SCRATCH_FILE)
        if own.owner != os.geteuid():        # NFS root_squash: the sets of this node's runs belong to the mapped user
            remove_scratch(path, own.owner)
        out["direct"] = direct_io_supported(scratch)
        engine = "libaio"
        phases = [("write", runtime_s, block_kb, iodepth, jobs), ("read", runtime_s, block_kb, iodepth, jobs)]
        if rand_runtime_s > 0:
            phases.append(("randread", rand_runtime_s, rand_block_kb, rand_iodepth, rand_jobs))
        for rw, secs, bs, qd, nj in phases:
            argv = fio_argv(fio, scratch, rw, size_mb, secs, bs, qd if engine == "libaio" else 1, nj, out["direct"], engine)
            rc, stdout, stderr = run(argv, secs + LAYOUT_ALLOWANCE_S)
            if rc != 0 and engine == "libaio" and "libaio" in (stdout + stderr):
                engine = "psync"  # fio built without libaio: synchronous I/O, one request per job
                argv = fio_argv(fio, scratch, rw, size_mb, secs, bs, 1, nj, out["direct"], engine)
                rc, stdout, stderr = run(argv, secs + LAYOUT_ALLOWANCE_S)
            if rc != 0:
                raise FioError("fio %s on %s exited %s: %s" % (rw, path, rc, (stderr or stdout).strip()[-400:]))
            out[rw] = parse_fio_json(stdout, "read" if rw == "randread" else rw)
            out[rw].update(ioengine=engine, jobs=nj, iodepth=qd if engine == "libaio" else 1, block_kb=bs)
    except (FioError, OSError) as exc:
        out.update(status="error", reason=str(exc))
    finally:
        own.remove()
    return out


# ------------------------------------------------------------------------- the tier's devices

def _mount_devno(path, mountinfo="/proc/self/mountinfo"):
    """(major, minor, fstype) of the filesystem mounted at the mount point holding ``path``."""
    mnt = _mount_of(path)
    found = None
    try:
        with open(mountinfo) as fh:
            for line in fh.read(1 << 20).splitlines():
                parts = line.split()
                if len(parts) < 7 or "-" not in parts:
                    continue
                point = parts[4].replace("\\040", " ")
                if point == mnt:
                    sep = parts.index("-")
                    major, dummy, minor = parts[2].partition(":")
                    if major.isdigit() and minor.isdigit():
                        found = (int(major), int(minor), parts[sep + 1] if len(parts) > sep + 1 else None)
    except (IOError, OSError):
        return None
    return found                            # the last line for a mount point is the visible mount


def _leaf_disks(name, sysfs, depth=0):
    """The whole disks under block device ``name``: md/dm members (slaves/) recursively, a
    partition's parent disk, else the device itself."""
    base = os.path.join(sysfs, "class", "block", name)
    slaves = os.path.join(base, "slaves")
    if depth < 4 and os.path.isdir(slaves) and os.listdir(slaves):
        out = []
        for s in sorted(os.listdir(slaves)):
            out.extend(_leaf_disks(s, sysfs, depth + 1))
        return out
    if os.path.exists(os.path.join(base, "partition")):
        parent = os.path.basename(os.path.dirname(os.path.realpath(base)))
        return [parent] if parent != name else [name]
    return [name]


def disk_kind(name, sysfs="/sys"):
    """nvme, ssd or hdd by the block-device reader's rule (storage/blockdev.media_kind: sysfs
    queue/rotational; None when unreadable and for virtio disks, which report rotational=1 whatever
    backs them), loop for a loop device (a file somewhere else: no device-derived expectation)."""
    if name.startswith("loop"):
        return "loop"
    devdir = os.path.join(sysfs, "class", "block", name)
    return media_kind(name, transport_of(name, os.path.realpath(devdir), devdir),
                      read_int(os.path.join(devdir, "queue", "rotational")))


def tier_devices(path, sysfs="/sys", mountinfo="/proc/self/mountinfo"):
    """The disks the filesystem at ``path`` lives on, from mountinfo and sysfs (read only):
    {"devices": [{"name", "kind"}], "fstype"}; devices [] when they cannot be found (tmpfs, a
    network filesystem, a container without /sys/dev/block)."""
    found = _mount_devno(path, mountinfo)
    if not found:
        return {"devices": [], "fstype": None}
    major, minor, fstype = found
    link = os.path.join(sysfs, "dev", "block", "%d:%d" % (major, minor))
    if major == 0 or not os.path.exists(link):
        return {"devices": [], "fstype": fstype}
    name = os.path.basename(os.path.realpath(link))
    disks = sorted(set(_leaf_disks(name, sysfs)))
    return {"devices": [{"name": d, "kind": disk_kind(d, sysfs)} for d in disks], "fstype": fstype}
