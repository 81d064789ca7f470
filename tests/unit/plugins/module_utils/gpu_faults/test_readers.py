# -*- coding: utf-8 -*-
"""The kernel log readers on logs the test owns: a journal file written by systemd-journal-remote (read
with journalctl --file; skipped where the package is missing), a stand-in file for /dev/kmsg holding the
H200's real records, and saved logs. Never this machine's own journal or kernel log."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults import readers
from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.cli import check
import journalfile
from testpaths import DATA

XID = os.path.join(DATA, "real", "xid")
BOOT_A = "0123456789abcdef0123456789abcdef"


def h200_records():
    with open(os.path.join(XID, "h200-vm-dev-kmsg-records.txt"), "rb") as handle:
        return handle.read()


def h200_messages():
    return [line.split(b";", 1)[1].decode() for line in h200_records().splitlines()]


def test_kmsg_stand_in_reads_only_what_is_new(tmp_path):
    path = str(tmp_path / "kmsg")
    with open(path, "wb") as handle:
        handle.write(h200_records())
    events, pos, notes = readers.read_kmsg(path, current_boot="boot-a", btime=1796403109.3)
    assert [(e["code"], e["seq"], e["bus_id"]) for e in events] == [(31, 359, "0000:00:06.0")]
    assert events[0]["uuid"] == "GPU-475a4ad9-0cda-5c6c-598f-d3078a8fb53d"
    assert abs(events[0]["ts"] - (1796403109.3 + 28.800917)) < 1e-6
    assert pos["seq"] == 359 and pos["boot_id"] == "boot-a" and notes == []
    # nothing new: nothing read
    again, pos2, dummy = readers.read_kmsg(path, last_seq=pos["seq"], last_boot="boot-a", current_boot="boot-a", offset=pos["offset"])
    assert again == [] and pos2["seq"] == 359
    # one more record (the same real line, next sequence number, 5 s later): only it is read
    with open(path, "ab") as handle:
        handle.write(h200_records().splitlines()[-1].replace(b"4,359,28800917", b"4,360,33800917") + b"\n")
    new, pos3, dummy = readers.read_kmsg(path, last_seq=pos2["seq"], last_boot="boot-a", current_boot="boot-a", offset=pos2["offset"])
    assert [(e["code"], e["seq"]) for e in new] == [(31, 360)] and pos3["seq"] == 360
    # another boot: the saved sequence number means nothing there, read from the start
    other, dummy, dummy = readers.read_kmsg(path, last_seq=360, last_boot="boot-a", current_boot="boot-b")
    assert [e["seq"] for e in other] == [359, 360]


def test_kmsg_without_permission_says_so(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = str(tmp_path / "kmsg")
    with open(path, "w") as handle:
        handle.write("")
    os.chmod(path, 0)
    events, pos, notes = readers.read_kmsg(path)
    assert events == [] and "needs root" in notes[0]


def test_kmsg_record_continuation_and_hostile_records(tmp_path):
    path = str(tmp_path / "kmsg")
    body = (h200_records()
            + b" SUBSYSTEM=pci\n DEVICE=+pci:0000:00:06.0\n"
            + b"4,361,40000000,-;NVRM: Xid (PCI:0000:00:06): 48, " + b"\xff" * 2000000 + b"\n"
            + b"garbage without a header\n"
            + b"4,362,41000000,-;NVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off the bus.\n")
    with open(path, "wb") as handle:
        handle.write(body)
    events, pos, notes = readers.read_kmsg(path, current_boot="b")
    assert [(e["code"], e["seq"]) for e in events] == [(31, 359), (48, 361), (79, 362)]
    assert any("cut" in n for n in notes)
    assert all(len(e["text"]) < 300 for e in events)


def test_read_file_offset_and_limits(tmp_path):
    path = str(tmp_path / "dmesg.txt")
    with open(os.path.join(XID, "gpud-testdata-dmesg-with-xid-119.log"), "rb") as src, open(path, "wb") as dst:
        dst.write(src.read())
    events, pos, notes = readers.read_file(path)
    assert len(events) == 5 and pos["offset"] == os.path.getsize(path)
    events2, pos2, dummy = readers.read_file(path, offset=pos["offset"])
    assert events2 == [] and pos2["offset"] == pos["offset"]
    small, pos3, notes3 = readers.read_file(path, max_bytes=1000)
    assert pos3["offset"] == 1000 and any("limit" in n for n in notes3)
    missing, dummy, notes4 = readers.read_file(str(tmp_path / "nope"))
    assert missing == [] and "cannot be read" in notes4[0]


@pytest.mark.skipif(not journalfile.available(), reason="systemd-journal-remote (package systemd-journal-remote) is not installed")
def test_journal_file_with_saved_cursor(tmp_path):
    path = journalfile.write_journal(str(tmp_path / "kernel.journal"), h200_messages(), boot_id=BOOT_A)
    events, pos, notes = readers.read_journal(journal_file=path)
    assert notes == [] and [(e["code"], e["bus_id"], e["boot_id"]) for e in events] == [(31, "0000:00:06.0", BOOT_A)]
    assert events[0]["uuid"] == "GPU-475a4ad9-0cda-5c6c-598f-d3078a8fb53d"
    assert abs(events[0]["ts"] - 1796403138.000005) < 1e-6
    assert pos["cursor"] and "i=6" in pos["cursor"]
    again, pos2, dummy = readers.read_journal(cursor=pos["cursor"], journal_file=path)
    assert again == [] and pos2["cursor"] == pos["cursor"]
    # bytes bound: the read stops, the cursor says where, the next read goes on from there
    first, posb, notesb = readers.read_journal(journal_file=path, max_bytes=900)
    assert first == [] and any("limit" in n for n in notesb)
    rest, dummy, dummy = readers.read_journal(cursor=posb["cursor"], journal_file=path)
    assert [e["code"] for e in rest] == [31]


def test_journal_missing_binary_says_so():
    events, pos, notes = readers.read_journal(journalctl="/nonexistent/journalctl")
    assert events == [] and "cannot be run" in notes[0]


def fake_journalctl(tmp_path, script):
    """A stand-in journalctl the test owns: it prints the H200's real Xid 31 message as one journal JSON
    entry (journalctl -o json's fields) around ``script`` (shell)."""
    import json
    entry = {"__CURSOR": "s=0;i=6", "__REALTIME_TIMESTAMP": "1796403138000005", "__MONOTONIC_TIMESTAMP": "28800917",
             "_BOOT_ID": BOOT_A, "_TRANSPORT": "kernel", "MESSAGE": h200_messages()[-1]}
    with open(str(tmp_path / "entry.json"), "w") as handle:
        handle.write(json.dumps(entry) + "\n")
    path = str(tmp_path / "journalctl")
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + script.replace("ENTRY", str(tmp_path / "entry.json")) + "\n")
    os.chmod(path, 0o755)
    return path


def test_journalctl_that_hangs_or_floods_stderr_is_bounded(tmp_path):
    """journalctl runs through system/command.py run(): one that prints an entry and then hangs is killed at
    timeout_s (the entry it printed is judged, its cursor kept); one that writes 256 KiB to stderr before its
    output (more than a pipe holds) does not deadlock the reader."""
    import time
    hangs = fake_journalctl(tmp_path, "cat ENTRY\nexec sleep 30")
    started = time.monotonic()
    events, pos, notes = readers.read_journal(journalctl=hangs, timeout_s=1)
    assert time.monotonic() - started < 8
    assert [(e["code"], e["bus_id"]) for e in events] == [(31, "0000:00:06.0")] and pos["cursor"] == "s=0;i=6"
    assert any("stopped at 1 s (limit)" in n for n in notes)
    floods = fake_journalctl(tmp_path, "head -c 262144 /dev/zero | tr '\\0' x >&2\ncat ENTRY")
    started = time.monotonic()
    events, pos, notes = readers.read_journal(journalctl=floods, timeout_s=5)
    assert time.monotonic() - started < 8
    assert [e["code"] for e in events] == [31] and notes == []


def test_check_uses_file_source_and_state(tmp_path):
    state = str(tmp_path / "state.json")
    conf = {"kernel_log": os.path.join(XID, "gpu-operator-1146-xid48.txt"), "state_file": state}
    first = check(conf, boot="boot-a", btime=0)
    assert first["rules"] == ["gpu.xid"] and first["gpus"]["0000:07:00.0"]["action"] == "reset_gpu"
    second = check(conf, boot="boot-a", btime=0)
    assert second["events"] == [] and second["rules"] == ["gpu.xid"]     # read once, remembered in the state


def test_state_files_are_written_atomically_and_never_through_a_link(tmp_path):
    """The judge's state and the counters' state: a link at the state path (or at the temporary name
    the old writer used, <path>.tmp.<pid>) is replaced or ignored, never written or read through."""
    from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults import gather
    from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.cli import load_state, save_state
    victim = tmp_path / "victim"
    victim.write_text('{"schema": 1, "gpus": {}}')
    state = str(tmp_path / "state.json")
    os.symlink(str(victim), "%s.tmp.%d" % (state, os.getpid()))
    save_state(state, {"schema": 1, "gpus": {}, "position": {"offset": 5}})
    assert victim.read_text() == '{"schema": 1, "gpus": {}}' and not os.path.islink(state)
    assert load_state(state)["position"] == {"offset": 5}
    os.unlink(state)
    os.symlink(str(victim), state)
    assert load_state(state) is None                 # a link is not followed
    save_state(state, {"schema": 1, "gpus": {}})
    assert not os.path.islink(state) and victim.read_text() == '{"schema": 1, "gpus": {}}'
    counters = str(tmp_path / "counters.json")
    os.symlink(str(victim), "%s.tmp.%d" % (counters, os.getpid()))
    gather.write_counter_state(counters, {"0000:00:06.0": {"pcie_replays": 0}}, now=1.0)
    assert victim.read_text() == '{"schema": 1, "gpus": {}}'
    assert gather.read_counter_state(counters)["gpus"] == {"0000:00:06.0": {"pcie_replays": 0}}
    os.mkfifo(str(tmp_path / "fifo"))
    assert load_state(str(tmp_path / "fifo")) is None   # a FIFO does not block the check


def test_kmsg_read_error_is_a_note_not_a_traceback(tmp_path):
    """An error of read() other than 'no more records' / 'overwritten' (here EISDIR: gpu_faults.kmsg set to a
    directory) is one note; the health check and the ECC collector still give their verdicts."""
    events, pos, notes = readers.read_kmsg(str(tmp_path), current_boot="b")
    assert events == [] and "failed (Is a directory)" in notes[0]
