# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sequential read/write throughput of a mounted storage tier with fio, on a scratch file.

Never a raw device: fio only ever gets ``--filename=<dir>/.dlrack-acceptance-<pid>.fio`` inside the
directory it is given, sized ``size_mb`` in all (split over ``jobs`` regions of the one file), each
phase capped at ``runtime_s`` (time-based) and the fio process at runtime + a layout allowance. The
file is written (write phase, ``end_fsync``), then read back (read phase), then removed, also when
fio fails or times out. Direct I/O (O_DIRECT) is used when the filesystem accepts it (probed with an
open of the scratch file); otherwise (tmpfs, some FUSE and network filesystems) the phases run
buffered and the result says so, because buffered reads measure the page cache, not the disks.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import glob
import json
import os

SCRATCH_PREFIX = ".dlrack-acceptance-"
LAYOUT_ALLOWANCE_S = 300


def scratch_name(directory, pid=None):
    return os.path.join(directory, "%s%d.fio" % (SCRATCH_PREFIX, os.getpid() if pid is None else pid))


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
    """Open the scratch file with O_DIRECT: True when the filesystem accepts it. Creates the file."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_DIRECT", 0)
    if not getattr(os, "O_DIRECT", 0):
        return False
    try:
        fd = os.open(scratch, flags, 0o600)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
            return False
        raise
    os.close(fd)
    return True


def fio_argv(fio, scratch, rw, size_mb, runtime_s, block_kb, iodepth, jobs, direct, ioengine="libaio"):
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
    return {"bytes_per_s": int(bw), "io_bytes": part.get("io_bytes"), "runtime_ms": part.get("runtime"),
            "iops": round(part.get("iops") or 0.0, 1), "fio_version": doc.get("fio version")}


def remove_scratch(directory):
    """Remove this collection's scratch files in ``directory`` (ours, and ones left by a killed run)."""
    removed = []
    for path in glob.glob(os.path.join(glob.escape(directory), SCRATCH_PREFIX + "*.fio")):
        try:
            os.unlink(path)
            removed.append(path)
        except OSError:
            pass
    return removed


def measure_path(path, fio, run, size_mb=1024, runtime_s=10, block_kb=1024, iodepth=32, jobs=4, require_mount=True):
    """Write then read throughput of the tier at ``path``. ``run(argv, timeout)`` -> (rc, out, err).
    Returns {path, status: ok|skip|error, reason, direct, read, write}."""
    out = {"path": path, "status": "ok", "reason": None, "direct": None, "read": None, "write": None,
           "size_mb": size_mb, "runtime_s": runtime_s}
    why = check_target(path, size_mb, require_mount)
    if why:
        return dict(out, status="skip", reason=why)
    if not fio:
        return dict(out, status="skip", reason="fio is not installed on this node (install the fio package to measure storage)")
    scratch = scratch_name(path)
    try:
        out["direct"] = direct_io_supported(scratch)
        engine = "libaio"
        for rw in ("write", "read"):
            argv = fio_argv(fio, scratch, rw, size_mb, runtime_s, block_kb, iodepth, jobs, out["direct"], engine)
            rc, stdout, stderr = run(argv, runtime_s + LAYOUT_ALLOWANCE_S)
            if rc != 0 and engine == "libaio" and "libaio" in (stdout + stderr):
                engine = "psync"  # fio built without libaio: synchronous I/O, one request per job
                argv = fio_argv(fio, scratch, rw, size_mb, runtime_s, block_kb, 1, jobs, out["direct"], engine)
                rc, stdout, stderr = run(argv, runtime_s + LAYOUT_ALLOWANCE_S)
            if rc != 0:
                raise FioError("fio %s on %s exited %s: %s" % (rw, path, rc, (stderr or stdout).strip()[-400:]))
            out[rw] = parse_fio_json(stdout, rw)
            out[rw].update(ioengine=engine, jobs=jobs)
    except (FioError, OSError) as exc:
        out.update(status="error", reason=str(exc))
    finally:
        remove_scratch(path)
    return out
