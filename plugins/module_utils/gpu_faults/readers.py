# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readers of the kernel log that never re-read what was judged, bounded in time and bytes.

- ``read_journal``: ``journalctl -k -o json --after-cursor CURSOR`` (``--file`` for a journal file a
  test owns); the last entry's ``__CURSOR`` is the next start. Each entry brings its boot id
  (``_BOOT_ID``), wall clock (``__REALTIME_TIMESTAMP``) and monotonic time.
- ``read_kmsg``: ``/dev/kmsg`` records (``prio,seq,usec,flags;text``), non-blocking, from the saved
  sequence number when the boot id is the same; a regular file in the same format stands in for it in
  tests (there, and for replays, the byte offset is kept as well, so a long file is not re-read).
- ``read_file``: a saved log (dmesg, journalctl, syslog or kmsg form) for replays.

Each returns ``(events, position, notes)``: ``position`` is what the caller saves for the next read,
``notes`` say in one sentence what could not be read (no root, no journalctl) and what bounded the
read. Nothing is ever written to the kernel log.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import time

from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.parse import MAX_LINE, Parser, escape
from ansible_collections.dlrack.node.plugins.module_utils.system.command import run

MAX_BYTES = 32 * 1024 * 1024
TIMEOUT_S = 10.0
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


def boot_id(path=BOOT_ID_PATH):
    try:
        with open(path) as handle:
            return handle.read(64).strip().replace("-", "") or None    # the journal's _BOOT_ID form
    except (OSError, IOError):
        return None


def boot_time(root="/"):
    """The current boot's wall-clock start (btime of /proc/stat), or None."""
    try:
        with open(os.path.join(root, "proc/stat")) as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, IOError, ValueError, IndexError):
        return None
    return None


def _lines_from_chunks(chunks, max_line=MAX_LINE):
    """Split a stream of byte chunks into lines; a line longer than max_line is cut (the rest of
    it skipped) so a 1 MB line costs no more than a short one."""
    buf = b""
    skipping = False
    for chunk in chunks:
        buf += chunk
        while True:
            cut = buf.find(b"\n")
            if cut < 0:
                if len(buf) > max_line:
                    if not skipping:
                        yield buf[:max_line], True
                    skipping = True
                    buf = b""
                break
            line, buf = buf[:cut], buf[cut + 1:]
            if skipping:
                skipping = False
                continue
            yield line[:max_line], len(line) > max_line
    if buf and not skipping:
        yield buf[:max_line], len(buf) > max_line


def read_file(path, offset=0, max_bytes=MAX_BYTES, timeout_s=TIMEOUT_S, meta=None, parser=None):
    """A saved kernel log from byte ``offset``; returns (events, {"offset": n, "inode": i}, notes)."""
    parser = parser or Parser()
    notes = []
    events = []
    try:
        handle = open(path, "rb")
    except (OSError, IOError) as exc:
        return [], {"offset": offset}, ["kernel log %s cannot be read (%s)" % (escape(path, 200), exc.strerror or exc)]
    deadline = time.time() + timeout_s
    read = [0]
    with handle:
        st = os.fstat(handle.fileno())
        if offset > st.st_size:
            offset = 0            # the file was truncated or replaced: start again
        handle.seek(offset)

        def chunks():
            while read[0] < max_bytes:
                if time.time() > deadline:
                    notes.append("kernel log %s: stopped after %.0f s (limit)" % (escape(path, 200), timeout_s))
                    return
                data = handle.read(min(1 << 20, max_bytes - read[0]))
                if not data:
                    return
                read[0] += len(data)
                yield data
            notes.append("kernel log %s: stopped after %d bytes (limit); the rest is read next time" % (escape(path, 200), max_bytes))

        for raw, was_cut in _lines_from_chunks(chunks()):
            parser.cut += 1 if was_cut else 0
            events.extend(parser.feed(raw, meta))
        position = {"offset": min(offset + read[0], st.st_size), "inode": st.st_ino}
    if parser.cut:
        notes.append("%d line(s) longer than %d bytes were cut" % (parser.cut, MAX_LINE))
    return events, position, notes


def read_kmsg(path="/dev/kmsg", last_seq=None, last_boot=None, current_boot=None, max_bytes=MAX_BYTES,
              timeout_s=TIMEOUT_S, btime=None, offset=None):
    """/dev/kmsg (or a stand-in file) from after ``last_seq`` when the boot is the same.

    Returns (events, {"seq": n, "boot_id": b, "offset": o}, notes). ``btime`` (the boot's wall-clock
    start) turns each record's monotonic microseconds into a wall-clock time."""
    notes = []
    same_boot = last_boot is not None and last_boot == current_boot
    start_seq = last_seq if same_boot and last_seq is not None else -1
    parser = Parser()
    events = []
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            return [], {"seq": last_seq, "boot_id": last_boot}, [
                "kernel log: %s needs root (run the check as root, or give it CAP_SYSLOG); GPU fault events not read" % path]
        return [], {"seq": last_seq, "boot_id": last_boot}, ["kernel log: %s cannot be opened (%s)" % (path, exc.strerror)]
    is_file = os.path.isfile(path)
    deadline = time.time() + timeout_s
    total = [0]
    max_seq = start_seq

    def chunks():
        if is_file and offset and same_boot:
            os.lseek(fd, offset, os.SEEK_SET)
        while total[0] < max_bytes:
            if time.time() > deadline:
                notes.append("kernel log: stopped after %.0f s (limit)" % timeout_s)
                return
            try:
                data = os.read(fd, 65536 if is_file else 8192)
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    return                     # no more records
                if exc.errno == errno.EPIPE:
                    notes.append("kernel log: records were overwritten while reading (the ring buffer wrapped)")
                    continue
                if exc.errno == errno.EINVAL:
                    return
                notes.append("kernel log: reading %s failed (%s); the rest is read next time" % (escape(path, 200), exc.strerror or exc))
                return
            if not data:
                return
            total[0] += len(data)
            yield data
        notes.append("kernel log: stopped after %d bytes (limit); the rest is read next time" % max_bytes)

    start = offset if (is_file and offset and same_boot) else 0
    try:
        for raw, was_cut in _lines_from_chunks(chunks()):
            parser.cut += 1 if was_cut else 0
            if raw[:1] == b" ":
                continue                       # a record's KEY=value continuation line
            head, sep, body = raw.partition(b";")
            fields = head.split(b",")
            if not sep or len(fields) < 3:
                continue
            try:
                seq, usec = int(fields[1]), int(fields[2])
            except ValueError:
                continue
            if seq <= start_seq:
                continue
            max_seq = max(max_seq, seq)
            meta = {"seq": seq, "mono": usec / 1e6, "boot_id": current_boot}
            if btime is not None:
                meta["ts"] = btime + usec / 1e6
            events.extend(parser.feed(body, meta))
    finally:
        os.close(fd)
    position = {"seq": max_seq if max_seq >= 0 else last_seq, "boot_id": current_boot}
    if is_file:
        position["offset"] = start + total[0]
    if parser.cut:
        notes.append("%d record(s) longer than %d bytes were cut" % (parser.cut, MAX_LINE))
    return events, position, notes


def journal_command(cursor=None, journal_file=None, journalctl="journalctl"):
    argv = [journalctl, "-k", "-o", "json", "--no-pager", "-q"]
    if journal_file:
        argv = [journalctl, "--file", journal_file, "-o", "json", "--no-pager", "-q", "_TRANSPORT=kernel"]
    if cursor:
        argv += ["--after-cursor", cursor]
    return argv


def read_journal(cursor=None, journal_file=None, journalctl="journalctl", max_bytes=MAX_BYTES, timeout_s=TIMEOUT_S):
    """Kernel messages from the journal after ``cursor``. Returns (events, {"cursor": c}, notes).

    journalctl runs through system/command.py ``run``: killed (with its process group) after
    ``timeout_s`` or ``max_bytes`` on either stream, so a journalctl that hangs or floods stderr costs
    the check ``timeout_s``, never the check itself. What it printed up to then is judged, and the
    cursor of the last whole entry is where the next read starts."""
    argv = journal_command(cursor, journal_file, journalctl)
    notes = []
    res = run(argv, timeout=timeout_s, output_limit=max_bytes)
    if res.error is not None:
        return [], {"cursor": cursor}, ["kernel log: %s cannot be run (%s)" % (escape(journalctl, 200), escape(res.error, 200))]
    parser = Parser()
    events = []
    last_cursor = cursor
    for raw in res.stdout.split("\n"):        # not splitlines(): U+2028 may stand unescaped in a JSON string
        if not raw:
            continue
        if len(raw) > MAX_LINE * 8:
            raw = raw[:MAX_LINE * 8]
        try:
            entry = json.loads(raw)
        except ValueError:
            continue                           # a cut entry (limit) or a line that is not JSON
        if not isinstance(entry, dict):
            continue
        message = entry.get("MESSAGE")
        if isinstance(message, list):      # journald stores non-UTF-8 messages as a byte array
            message = bytes(b & 0xff for b in message if isinstance(b, int)).decode("utf-8", "replace")
        if not isinstance(message, str):
            message = ""
        meta = {"boot_id": entry.get("_BOOT_ID")}
        try:
            meta["ts"] = int(entry.get("__REALTIME_TIMESTAMP")) / 1e6
            meta["mono"] = int(entry.get("__MONOTONIC_TIMESTAMP")) / 1e6
        except (TypeError, ValueError):
            pass
        events.extend(parser.feed(message, meta))
        if isinstance(entry.get("__CURSOR"), str):
            last_cursor = entry["__CURSOR"]
    if res.timed_out or res.truncated:
        notes.append("kernel log: journal read stopped at %s (limit); the rest is read next time"
                     % ("%.0f s" % timeout_s if res.timed_out else "%d bytes" % max_bytes))
    elif res.rc != 0 and not events:
        err = res.stderr.strip()
        text = escape(err.splitlines()[-1] if err else "", 200)
        if "No journal files were found" in text or "permission" in text.lower() or "insufficient" in text.lower():
            notes.append("kernel log: the journal cannot be read here (%s); run as root or in the systemd-journal group" % text)
        else:
            notes.append("kernel log: journalctl exited %s (%s)" % (res.rc, text))
    if parser.cut:
        notes.append("%d message(s) longer than %d bytes were cut" % (parser.cut, MAX_LINE))
    return events, {"cursor": last_cursor}, notes
