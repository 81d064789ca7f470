# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The data loader's view of a storage tier: many small files read by worker processes pinned per GPU.

A synthetic dataset of ``files`` files of ``file_kb`` KiB each is written into this run's private
scratch directory ``<tier>/.dlrack-acceptance-smallfiles-<random>/`` (scratch.ScratchDir: made with
mkdtemp, named through its descriptor, files created O_EXCL|O_NOFOLLOW, an owner marker; 1,000
files per sub-directory; the writing stops
after ``WRITE_LIMIT_S`` and the set is then the files written so far), flushed to the
disks (``syncfs`` of that filesystem, else ``fsync`` per file), and dropped from the page cache file
by file (``posix_fadvise(POSIX_FADV_DONTNEED)``; never a system-wide drop unless ``drop_caches``
is asked). Then ``workers`` processes per group - a group is a GPU (its local CPUs from sysfs, as
the affinity plan binds a GPU's data loader; see programs/gpu_bind.py) or, without GPUs, a NUMA
node - each pinned to the group's CPUs, read their share of the files (interleaved, as a
shuffled sampler spreads them) once from the disks ("cold"), then once more from the page cache
("warm"), each phase bounded by ``phase_s`` seconds. Files/s and MB/s per group and in total.

The scratch directory is always removed: in ``finally``, also when a worker fails, and on SIGTERM,
SIGINT and SIGHUP (the controller's ssh session with a tty ending): handlers turn them into an
exception while it runs, then the previous handlers are put back and the signal is re-raised. Scratch
sets left by a killed run (SIGKILL) are removed by the next run, and only those: a set of another
run still going (this node's, or another node's on a shared tier) is left alone
(scratch.remove_stale). Stdlib only (Python 3.6+).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import errno
import os
import signal
import time

from ansible_collections.dlrack.node.plugins.module_utils.acceptance import scratch
from ansible_collections.dlrack.node.plugins.module_utils.hw.cpulist import CpuListError, format_cpulist, parse_cpulist
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError, normalize_pci_bus_id

SCRATCH_PREFIX = ".dlrack-acceptance-smallfiles-"
PER_DIR = 1000
# The signals that end a measurement with the set removed first (then re-raised).
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Writing the set stops after this many seconds (then the set is the files written so far, and the
# result has ``files`` written of ``files_requested``): large declared samples on an HDD archive
# (16 MiB x 10,000 = 160 GB) would otherwise outlast the task timeout.
WRITE_LIMIT_S = 120
_CHUNK = 1 << 20


class Interrupted(Exception):
    def __init__(self, signum):
        Exception.__init__(self, "interrupted by signal %d" % signum)
        self.signum = signum


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def remove_scratch(tier, uid=None):
    """Remove the small-file scratch sets in ``tier`` that a dead run left (scratch.remove_stale:
    never a live run's, on this node or another); returns their paths."""
    return scratch.remove_stale(tier, (SCRATCH_PREFIX,), uid=uid)[0]


def file_path(root, i):
    return os.path.join(root, "d%04d" % (i // PER_DIR), "f%07d.bin" % i)


def _syncfs(fd):
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syncfs(fd) == 0
    except (OSError, AttributeError):
        return False


def write_set(root, files, file_kb, limit_s=None):
    """Write the dataset, stopping after the first file written past ``limit_s`` seconds; returns
    (seconds taken, files written). Content differs per file (no dedup, no zero pages)."""
    start = time.time()
    block = os.urandom(min(file_kb * 1024, _CHUNK))
    size = file_kb * 1024
    synced = False
    written = 0
    for i in range(files):
        if written and limit_s is not None and time.time() - start > limit_s:
            break
        path = file_path(root, i)
        if i % PER_DIR == 0:
            os.mkdir(os.path.dirname(path), 0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
        try:
            left = size
            head = ("%d\n" % i).encode()
            os.write(fd, head)
            left -= len(head)
            while left > 0:
                left -= os.write(fd, block[:min(left, len(block))])
        finally:
            os.close(fd)
        written += 1
    dfd = os.open(root, os.O_RDONLY)         # this run's directory (ScratchDir.root: its descriptor)
    try:
        synced = _syncfs(dfd)
    finally:
        os.close(dfd)
    if not synced:
        for i in range(written):
            fd = os.open(file_path(root, i), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    return time.time() - start, written


def drop_cached(root, files, drop_caches=False):
    """Drop the dataset's pages from the page cache file by file; ``drop_caches`` also writes 1 to
    /proc/sys/vm/drop_caches (system-wide: only when asked)."""
    advise = getattr(os, "posix_fadvise", None)
    dropped = 0
    for i in range(files):
        if advise is None:
            break
        fd = os.open(file_path(root, i), os.O_RDONLY)
        try:
            advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            dropped += 1
        finally:
            os.close(fd)
    if drop_caches:
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("1\n")
    return {"per_file": advise is not None, "files": dropped, "system_wide": bool(drop_caches)}


def _read_share(root, indices, deadline):
    """Read whole files until done or past ``deadline``; (files, bytes, seconds)."""
    start = time.time()
    nfiles = nbytes = 0
    for i in indices:
        if time.time() > deadline:
            break
        fd = os.open(file_path(root, i), os.O_RDONLY)
        try:
            while True:
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    break
                nbytes += len(chunk)
        finally:
            os.close(fd)
        nfiles += 1
    return nfiles, nbytes, time.time() - start


def _worker(root, indices, cpus, deadline, wfd):
    code = 0
    try:
        for sig in SIGNALS:              # the parent's handlers raise; an ignored signal stays ignored
            if signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, signal.SIG_DFL)
        if cpus and hasattr(os, "sched_setaffinity"):
            try:
                os.sched_setaffinity(0, cpus)
            except OSError:
                pass
        n, b, s = _read_share(root, indices, deadline)
        os.write(wfd, ("%d %d %.6f\n" % (n, b, s)).encode())
    except BaseException as exc:  # the child must never return into the module
        try:
            os.write(wfd, ("error %s\n" % exc).encode()[:400])
        except OSError:
            pass
        code = 1
    finally:
        os._exit(code)


def read_phase(root, files, groups, workers_per_group, phase_s):
    """Fork ``workers_per_group`` readers per group, each pinned to the group's CPUs; the files are
    dealt out round-robin over all workers. Returns {groups: [...], files, bytes, seconds}."""
    total_workers = max(1, len(groups) * workers_per_group)
    deadline = time.time() + phase_s
    children = []
    k = 0
    try:
        for g in groups:
            for dummy in range(workers_per_group):
                indices = range(k, files, total_workers)
                rfd, wfd = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(rfd)
                    _worker(root, indices, g.get("cpus"), deadline, wfd)
                os.close(wfd)
                children.append((pid, rfd, g["name"]))
                k += 1
        results = {}
        errors = []
        for pid, rfd, name in children:
            text = b""
            while True:
                chunk = os.read(rfd, 4096)
                if not chunk:
                    break
                text += chunk
            os.close(rfd)
            os.waitpid(pid, 0)
            line = text.decode("utf-8", "replace").strip()
            parts = line.split()
            if len(parts) == 3 and not line.startswith("error"):
                r = results.setdefault(name, [0, 0, 0.0])
                r[0] += int(parts[0])
                r[1] += int(parts[1])
                r[2] = max(r[2], float(parts[2]))
            else:
                errors.append("%s: %s" % (name, line[:200] or "worker gave no result"))
        children = []
    finally:
        for pid, rfd, dummy in children:       # interrupted: stop and reap every reader
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
            try:
                os.close(rfd)
            except OSError:
                pass
    if errors:
        raise OSError(errno.EIO, "small-file reader failed: " + "; ".join(errors))
    out, tf, tb, ts = [], 0, 0, 0.0
    for g in groups:
        n, b, s = results.get(g["name"], (0, 0, 0.0))
        out.append({"name": g["name"], "cpus": _cpulist(g.get("cpus")), "workers": workers_per_group, "files": n,
                    "bytes": b, "seconds": round(s, 3), "files_per_s": _rate(n, s), "mb_per_s": _rate(b / 1e6, s)})
        tf, tb, ts = tf + n, tb + b, max(ts, s)
    return {"groups": out, "files": tf, "bytes": tb, "seconds": round(ts, 3), "files_per_s": _rate(tf, ts),
            "mb_per_s": _rate(tb / 1e6, ts), "complete": tf >= files}


def _rate(x, s):
    return round(x / s, 1) if s > 0 else None


def _cpulist(cpus):
    return format_cpulist(cpus) if cpus else None


class _Signals(object):
    """SIGNALS -> Interrupted while the measurement runs; the previous handlers afterwards. A
    signal the process ignores (SIGHUP under nohup, SIGINT in a background job) stays ignored."""

    def __enter__(self):
        self.saved = {}
        for sig in SIGNALS:
            previous = signal.getsignal(sig)
            if previous is not signal.SIG_IGN:
                self.saved[sig] = previous
                signal.signal(sig, self._raise)
        return self

    @staticmethod
    def _raise(signum, frame):
        raise Interrupted(signum)

    def __exit__(self, *exc):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        return False


def check_target(tier, files, file_kb):
    """Why the small-file set cannot be written in ``tier`` (a sentence), or None."""
    st = os.statvfs(tier)
    need_mb = files * (file_kb + 4) / 1024.0
    free_mb = st.f_bavail * st.f_frsize / float(1 << 20)
    if free_mb < need_mb * 1.1 + 64:
        return "%s has %d MiB free; the small-file set needs %d MiB (lower acceptance_smallfile_count)" % (tier, free_mb, need_mb)
    if st.f_favail and st.f_favail < files + files // PER_DIR + 100:
        return "%s has %d free inodes; the small-file set needs %d" % (tier, st.f_favail, files)
    return None


def measure(tier, groups, files=10000, file_kb=64, workers_per_group=4, phase_s=20, drop_caches=False):
    """The small-file read figures of the tier directory ``tier`` (already checked to be measurable).
    ``groups``: [{"name": "GPU0", "cpus": {0, 1, ...}}, ...]. Returns {status, reason, files,
    file_kb, write_s, cache_drop, cold, warm}; removes the set whatever happens (SIGTERM/SIGINT/SIGHUP
    included; the signal is re-raised once the set is gone)."""
    out = {"status": "ok", "reason": None, "files": files, "file_kb": file_kb, "workers_per_group": workers_per_group,
           "phase_s": phase_s, "cold": None, "warm": None}
    why = check_target(tier, files, file_kb)
    if why:
        return dict(out, status="skip", reason=why)
    remove_scratch(tier)                     # sets a killed run left behind (never a live run's)
    own = scratch.ScratchDir(tier, SCRATCH_PREFIX)
    interrupted = None
    try:
        with _Signals():
            try:
                root = own.create().root
                if own.owner != os.geteuid():   # NFS root_squash: the sets of this node's runs belong to the mapped user
                    remove_scratch(tier, own.owner)
                write_s, written = write_set(root, files, file_kb, WRITE_LIMIT_S)
                out["write_s"] = round(write_s, 3)
                if written < files:         # the write stopped at its time limit: read what is there
                    out.update(files=written, files_requested=files)
                    files = written
                out["cache_drop"] = drop_cached(root, files, drop_caches)
                out["cold"] = read_phase(root, files, groups, workers_per_group, phase_s)
                out["warm"] = read_phase(root, files, groups, workers_per_group, phase_s)
            except Interrupted as exc:
                interrupted = exc.signum
                out.update(status="error", reason="interrupted by signal %d: the small-file set was removed" % exc.signum)
            except OSError as exc:
                out.update(status="error", reason="small files on %s: %s" % (tier, exc))
            finally:
                own.remove()
    finally:
        own.remove()
    if interrupted is not None:
        os.kill(os.getpid(), interrupted)    # the previous handler (or the default action) now runs
    return out


def _read_cpulist(path):
    try:
        with open(path) as fh:
            return set(parse_cpulist(fh.read(4096).strip())) or None
    except (IOError, OSError, CpuListError):
        return None


def _bus_id(value):
    """The sysfs name of a PCI address as nvidia-smi prints it (normalize_pci_bus_id), None for
    anything that is not one."""
    try:
        return normalize_pci_bus_id(value) if isinstance(value, str) else None
    except ParseError:
        return None


def reader_groups(gpu_doc, health_doc, sysfs="/sys", count=0):
    """One group per GPU (its local CPUs: the GPU measurement's ``local_cpus``, else sysfs
    ``local_cpulist`` of the GPUs nvidia-smi lists), else one per NUMA node with CPUs, else one
    unpinned group; ``count`` > 0 gives that many unpinned groups instead (a stated reader count)."""
    if count > 0:
        return [{"name": "readers%d" % i, "cpus": None, "kind": "count"} for i in range(count)]
    groups = []
    for dev in (gpu_doc or {}).get("devices") or []:
        cpus = None
        if dev.get("local_cpus"):
            try:
                cpus = set(parse_cpulist(dev["local_cpus"])) or None
            except CpuListError:
                cpus = None
        groups.append({"name": "GPU%s" % dev.get("ordinal"), "cpus": cpus, "kind": "gpu"})
    if not groups:
        for g in (health_doc or {}).get("gpus") or []:
            bus = _bus_id(g.get("pci_bus_id"))     # nvidia-smi: 00000000:17:00.0; never a path
            groups.append({"name": "GPU%s" % g.get("index"), "kind": "gpu",
                           "cpus": _read_cpulist(os.path.join(sysfs, "bus", "pci", "devices", bus, "local_cpulist"))
                           if bus else None})
    if not groups:
        base = os.path.join(sysfs, "devices", "system", "node")
        try:
            names = sorted((n for n in os.listdir(base) if n.startswith("node") and n[4:].isdigit()), key=lambda n: int(n[4:]))
        except OSError:
            names = []
        for n in names:
            cpus = _read_cpulist(os.path.join(base, n, "cpulist"))
            if cpus:
                groups.append({"name": n, "cpus": cpus, "kind": "numa"})
    return groups or [{"name": "readers", "cpus": None, "kind": "count"}]
