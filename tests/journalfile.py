# -*- coding: utf-8 -*-
"""Journal files a test owns: entries in the journal export format, turned into a journal file by
systemd-journal-remote (package systemd-journal-remote), read back with ``journalctl --file``.
Nothing is written to this machine's own journal or kernel log."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import struct
import subprocess

CANDIDATES = ("/lib/systemd/systemd-journal-remote", "/usr/lib/systemd/systemd-journal-remote")


def journal_remote():
    for path in CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    return None


def available():
    return journal_remote() is not None and shutil.which("journalctl") is not None


def _field(key, value):
    data = value if isinstance(value, bytes) else value.encode("utf-8")
    if b"\n" in data or any(b < 32 and b != 9 for b in data):
        return key.encode() + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"
    return key.encode() + b"=" + data + b"\n"


def export_entries(messages, boot_id="0123456789abcdef0123456789abcdef", start_realtime_us=1796403138000000,
                   start_monotonic_us=28800905):
    out = []
    for i, message in enumerate(messages):
        out.append(b"".join((
            _field("__REALTIME_TIMESTAMP", str(start_realtime_us + i)),
            _field("__MONOTONIC_TIMESTAMP", str(start_monotonic_us + i)),
            _field("_BOOT_ID", boot_id), _field("_TRANSPORT", "kernel"), _field("PRIORITY", "4"),
            _field("MESSAGE", message))) + b"\n")
    return b"".join(out)


def write_journal(path, messages, **kwargs):
    """Write ``messages`` as kernel entries into the journal file ``path`` (must end in .journal)."""
    export = path + ".export"
    with open(export, "wb") as handle:
        handle.write(export_entries(messages, **kwargs))
    subprocess.run([journal_remote(), "-o", path, export], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    os.unlink(export)
    return path
