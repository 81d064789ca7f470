# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scratch space in a storage tier that other users (or other nodes) may write to.

A tier directory can be mode 0777 without the sticky bit, or a shared NFS archive that several
nodes measure at once. Scratch files are therefore never created by a fixed name in the tier:

* each run makes its own private directory with ``tempfile.mkdtemp`` (``mkdir`` of a random name,
  mode 0700: it fails on any existing name, a planted symbolic link included), opens it once
  (``O_DIRECTORY | O_NOFOLLOW``, checked to be the directory it made) and from then on names
  its files through that descriptor (``/proc/<pid>/fd/<n>/...``): a directory renamed away and
  replaced by a link in a non-sticky tier still takes the writes into the run's own directory,
  never outside the tier. Files inside are created with ``O_CREAT | O_EXCL | O_NOFOLLOW``.
* the directory holds a marker, ``owner.json``: host name, pid, the process's start time (clock
  ticks since boot, /proc/<pid>/stat field 22), the boot id (/proc/sys/kernel/random/boot_id) and
  the PID namespace (/proc/self/ns/pid: two containers of one node can share its host name - a
  Kubernetes pod with hostNetwork - but not their pids).
* a run removes its own directory through its descriptor, and of the sets it finds left behind
  only the provably dead ones: this host's with another boot id, or with a pid that no longer runs
  that process; another host's (a shared tier) only when its marker is older than ``STALE_S``,
  as are sets without a readable marker (left by an older version). A set of another live run,
  on this node or another, is left alone. Symbolic links and entries of another owner are never
  touched.

Stdlib only (Python 3.6+), Linux.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import socket
import stat
import tempfile
import time

MARKER = "owner.json"
MARKER_MAX_BYTES = 4096
# A set of another host (or one without a marker) is removed once it is this old: no measurement
# lasts that long (the small-file write stops after 120 s, each read phase after phase_s, fio
# after its runtime plus a layout allowance).
STALE_S = 24 * 3600
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class ScratchError(OSError):
    pass


def boot_id(path="/proc/sys/kernel/random/boot_id"):
    try:
        with open(path) as fh:
            return fh.read(64).strip() or None
    except (IOError, OSError):
        return None


def process_start(pid, proc="/proc"):
    """The start time of process ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22), or
    None when no such process runs."""
    try:
        with open(os.path.join(proc, str(int(pid)), "stat")) as fh:
            text = fh.read(4096)
    except (IOError, OSError, ValueError, TypeError):
        return None
    fields = text.rpartition(")")[2].split()
    # field 3 (state) is fields[0]; field 22 (starttime) is fields[19]
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def pid_namespace(path="/proc/self/ns/pid"):
    """This process's PID namespace ("pid:[4026531836]"), or None where /proc does not say."""
    try:
        return os.readlink(path)[:64] or None
    except (OSError, ValueError):
        return None


def identity():
    """This run's owner marker."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start": process_start(pid), "boot_id": boot_id(), "pid_ns": pid_namespace(),
            "created": round(time.time(), 3)}


def is_live(marker, me=None, now=None, proc="/proc"):
    """Whether the set whose owner marker is ``marker`` may belong to a run still going; ``me``:
    this run's identity. Unknown is live until the set is STALE_S old."""
    me = me or identity()
    now = time.time() if now is None else now
    if not isinstance(marker, dict):
        return False
    created = marker.get("created")
    old = not isinstance(created, (int, float)) or now - created > STALE_S
    if marker.get("host") != me.get("host") or not me.get("boot_id") or not marker.get("boot_id"):
        return not old                       # another node's run (a shared tier): its age only
    if marker.get("boot_id") != me.get("boot_id"):
        return False                         # this node rebooted since: that run is gone
    if marker.get("pid_ns") and me.get("pid_ns") and marker.get("pid_ns") != me.get("pid_ns"):
        return not old                       # another container of this node: its pid means nothing here
    pid = marker.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    start = process_start(pid, proc)
    return start is not None and start == marker.get("start")


def _same(a, b):
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _open_dir(path, dir_fd=None):
    return os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)


def clear_fd(dfd):
    """Remove everything inside the open directory ``dfd`` without following a link."""
    for name in os.listdir(dfd):
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            try:
                sub = _open_dir(name, dfd)
            except OSError:
                continue
            try:
                if _same(os.fstat(sub), st):
                    clear_fd(sub)
            finally:
                os.close(sub)
            try:
                os.rmdir(name, dir_fd=dfd)
            except OSError:
                pass
        else:
            try:
                os.unlink(name, dir_fd=dfd)
            except OSError:
                pass


class ScratchDir(object):
    """This run's private directory in ``tier`` (see the module's text): ``root`` names it through
    the run's descriptor; ``remove()`` takes it away (idempotent)."""

    def __init__(self, tier, prefix):
        self.tier, self.prefix = tier, prefix
        self.path = self.root = None
        self.fd = None
        self.stat = None
        self.owner = None                    # the owner of this run's files there (see create)

    def create(self):
        self.path = tempfile.mkdtemp(prefix=self.prefix, dir=self.tier)
        fd = _open_dir(self.path)
        st = os.fstat(fd)
        try:
            lst = os.lstat(self.path)
        except OSError:
            lst = None
        if lst is None or not _same(st, lst):
            os.close(fd)
            raise self._replaced()
        try:
            marker = os.open(MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=fd)
        except OSError:
            os.close(fd)                     # (an existing marker: not the empty directory mkdtemp made)
            raise self._replaced()
        try:
            # The directory's owner is whoever a new file of this run belongs to: this user, or the
            # user an NFS server maps it to (root_squash: nobody), never someone else's directory
            # put in its place between mkdtemp and the open.
            owner = os.fstat(marker).st_uid
            if st.st_uid == owner:
                self.fd, self.stat, self.owner = fd, st, owner  # from here on remove() clears it: it is this run's
                os.write(marker, json.dumps(identity(), sort_keys=True).encode("utf-8"))
        except OSError:
            self.remove()                    # (a full tier: nothing of this run stays)
            raise
        finally:
            os.close(marker)
        if st.st_uid != owner:               # someone else's directory: take back the marker only
            try:
                os.unlink(MARKER, dir_fd=fd)
            except OSError:
                pass
            os.close(fd)
            raise self._replaced()
        if stat.S_IMODE(st.st_mode) & 0o022:
            self.remove()                    # this run's own directory: away with it
            raise ScratchError("the file system of the tier %s makes a new directory writable by others (%s has mode %s, asked "
                               "for 0700: a mount option such as dir_mode/file_mode or an ACL forces it), so a scratch file "
                               "there could be swapped for a link; measure a tier whose file system keeps modes"
                               % (self.tier, self.path, oct(stat.S_IMODE(st.st_mode))[2:].zfill(4)))
        via = "/proc/%d/fd/%d" % (os.getpid(), fd)
        try:
            self.root = via if _same(os.stat(via), st) else self.path
        except OSError:
            self.root = self.path            # no /proc: the path (made and checked above)
        return self

    def _replaced(self):
        return ScratchError("%s was replaced while it was being made: the tier %s is written by someone else at the same "
                            "time; measure a tier only this node writes, or try again" % (self.path, self.tier))

    def __enter__(self):
        return self.create()

    def __exit__(self, *exc):
        self.remove()
        return False

    def remove(self):
        if self.fd is None:
            return
        try:
            clear_fd(self.fd)
        finally:
            os.close(self.fd)
            self.fd = None
        try:                                 # its name, only while it is still this directory
            if _same(os.lstat(self.path), self.stat):
                os.rmdir(self.path)
        except OSError:
            pass


def read_marker(dfd):
    try:
        fd = os.open(MARKER, os.O_RDONLY | _NOFOLLOW | _CLOEXEC, dir_fd=dfd)
    except OSError:
        return None
    try:
        raw = os.read(fd, MARKER_MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > MARKER_MAX_BYTES:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def remove_stale(tier, prefixes, legacy_files=None, me=None, now=None, proc="/proc", uid=None):
    """Remove the directories in ``tier`` named with one of ``prefixes`` that no live run owns (see
    the module's text), and the regular files named (prefix, suffix) ``legacy_files`` (an older
    version's scratch files) older than STALE_S; returns (removed, kept) as lists of paths. Only
    entries of ``uid`` are touched (default: the effective uid; ScratchDir.owner where the file
    system maps it to another user: NFS root_squash)."""
    me = me or identity()
    now = time.time() if now is None else now
    removed, kept = [], []
    try:
        names = sorted(os.listdir(tier))
    except OSError:
        return removed, kept
    uid = os.geteuid() if uid is None else uid
    for name in names:
        legacy = bool(legacy_files) and name.startswith(legacy_files[0]) and name.endswith(legacy_files[1])
        if not legacy and not name.startswith(tuple(prefixes)):
            continue
        path = os.path.join(tier, name)
        try:
            lst = os.lstat(path)
        except OSError:
            continue
        if lst.st_uid != uid or stat.S_ISLNK(lst.st_mode):
            kept.append(path)                # a link, or someone else's: never ours to remove
            continue
        if legacy != stat.S_ISREG(lst.st_mode):
            continue                         # a file under a set's name, a directory under a file's: not ours
        if legacy:                           # an older version's scratch file: by its age only
            if now - lst.st_mtime > STALE_S:
                try:
                    os.unlink(path)
                    removed.append(path)
                except OSError:
                    kept.append(path)
            else:
                kept.append(path)
            continue
        if not stat.S_ISDIR(lst.st_mode):
            continue
        try:
            dfd = _open_dir(path)
        except OSError:
            continue
        try:
            if not _same(os.fstat(dfd), lst):
                continue
            marker = read_marker(dfd)
            live = is_live(marker, me, now, proc) if marker is not None else now - lst.st_mtime <= STALE_S
            if live:
                kept.append(path)
                continue
            clear_fd(dfd)
        finally:
            os.close(dfd)
        try:
            if _same(os.lstat(path), lst):
                os.rmdir(path)
                removed.append(path)
        except OSError:
            kept.append(path)
    return removed, kept
