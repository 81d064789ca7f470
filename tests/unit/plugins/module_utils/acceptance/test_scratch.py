"""module_utils/acceptance/scratch.py: the owner marker's liveness rules, the private directory
named through its descriptor, and a cleanup that never follows or removes a link (issue 30.11).
The end-to-end cases (a planted link in a 0777 tier, two runs on one tier) are in
test_smallfiles.py and test_fio.py."""
import json
import os
import subprocess
import sys
import tempfile
import time

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.acceptance import scratch


def test_identity_names_this_process():
    me = scratch.identity()
    assert me["pid"] == os.getpid() and me["start"] == scratch.process_start(os.getpid()) and me["start"] > 0
    assert me["host"] and me["boot_id"] and len(me["boot_id"]) == 36


def test_liveness_rules():
    me = scratch.identity()
    now = time.time()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert scratch.is_live(me, me, now)                                             # this very run
    assert not scratch.is_live(dict(me, pid=dead.pid), me, now)                     # ended
    assert not scratch.is_live(dict(me, start=me["start"] + 1), me, now)            # pid reused
    assert not scratch.is_live(dict(me, boot_id="other"), me, now)                  # an earlier boot
    other = dict(me, host="another-node")
    assert scratch.is_live(other, me, now)                                          # another node: by age only
    assert not scratch.is_live(dict(other, created=now - scratch.STALE_S - 1), me, now)
    assert not scratch.is_live(dict(me, pid="1"), me, now) and not scratch.is_live(dict(me, pid=True), me, now)
    assert not scratch.is_live(["not", "a", "marker"], me, now)


def test_the_directory_is_private_marked_and_removed_through_its_descriptor(tmp_path):
    d = scratch.ScratchDir(str(tmp_path), ".x-").create()
    st = os.lstat(d.path)
    assert oct(st.st_mode & 0o777) == "0o700" and d.root == "/proc/%d/fd/%d" % (os.getpid(), d.fd)
    with open(os.path.join(d.path, scratch.MARKER)) as fh:
        assert json.load(fh)["pid"] == os.getpid()
    os.mkdir(os.path.join(d.root, "sub"))
    (tmp_path / "keep").write_text("keep")
    os.symlink(str(tmp_path / "keep"), os.path.join(d.root, "sub", "link"))      # a link inside: unlinked, not followed
    d.remove()
    d.remove()                                                                      # idempotent
    assert sorted(os.listdir(str(tmp_path))) == ["keep"] and (tmp_path / "keep").read_text() == "keep"


def test_remove_stale_leaves_links_files_and_live_sets(tmp_path):
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "precious").write_text("x")
    os.symlink(str(tmp_path / "target"), str(tmp_path / ".x-link"))
    (tmp_path / ".x-file").write_text("a file under a set's name")
    live = scratch.ScratchDir(str(tmp_path), ".x-").create()
    try:
        removed, kept = scratch.remove_stale(str(tmp_path), (".x-",))
        assert removed == [] and sorted(os.path.basename(p) for p in kept) == sorted([".x-link", os.path.basename(live.path)])
        assert (tmp_path / "target" / "precious").exists() and (tmp_path / ".x-file").exists()
    finally:
        live.remove()


def _mkdtemp_then(change):
    """tempfile.mkdtemp that does ``change(path)`` to the directory it made (what another user or
    the file system does between mkdtemp and the run's open)."""
    real = tempfile.mkdtemp

    def mkdtemp(*args, **kwargs):
        path = real(*args, **kwargs)
        change(path)
        return path
    return mkdtemp


def test_a_squashed_owner_is_this_runs_own_directory(tmp_path, monkeypatch):
    """NFS with root_squash (the export default): root's new directory and files belong to nobody.
    The directory is this run's all the same (its new files have the same owner); before, it was
    refused as 'replaced while it was being made' on every such tier."""
    monkeypatch.setattr(scratch.os, "geteuid", lambda: os.getuid() + 4242)    # the owner the server gives is not euid
    d = scratch.ScratchDir(str(tmp_path), ".x-").create()
    try:
        assert d.fd is not None and os.path.isfile(os.path.join(d.path, scratch.MARKER))
    finally:
        d.remove()
    assert os.listdir(str(tmp_path)) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_another_users_directory_in_its_place_is_refused_and_left_as_it_is(tmp_path, monkeypatch):
    """Another user swaps the new directory for one of their own (same name) before the run opens
    it: refused, and nothing of theirs is removed (only the marker the run put there)."""
    def swap(path):
        os.rename(path, path + ".mine")
        os.mkdir(path, 0o700)
        with open(os.path.join(path, "theirs"), "w") as fh:
            fh.write("theirs")
        os.chown(path, 4242, 4242)
    monkeypatch.setattr(scratch.tempfile, "mkdtemp", _mkdtemp_then(swap))
    d = scratch.ScratchDir(str(tmp_path), ".x-")
    with pytest.raises(scratch.ScratchError, match="was replaced while it was being made"):
        d.create()
    assert d.fd is None and os.listdir(d.path) == ["theirs"]
    d.remove()
    assert os.listdir(d.path) == ["theirs"]


def test_a_file_system_that_forces_open_modes_is_named_not_called_a_swap(tmp_path, monkeypatch):
    """A tier whose file system gives every directory 0777 (CIFS dir_mode=0777, a default ACL):
    the run's directory is its own, but others could write into it; the message says so and the
    directory is removed (before: 'replaced while it was being made', and the directory stayed)."""
    monkeypatch.setattr(scratch.tempfile, "mkdtemp", _mkdtemp_then(lambda path: os.chmod(path, 0o777)))
    with pytest.raises(scratch.ScratchError) as err:
        scratch.ScratchDir(str(tmp_path), ".x-").create()
    assert "makes a new directory writable by others" in str(err.value) and "mode 0777" in str(err.value)
    assert os.listdir(str(tmp_path)) == []


def test_another_container_of_this_node_is_judged_by_age_not_by_a_pid_of_ours():
    """Two pods with hostNetwork on one node share its host name and boot id but not their pids:
    a pid in the other pod's marker says nothing about a process here (it was taken for ended, and
    the live run's set removed)."""
    me = scratch.identity()
    assert me["pid_ns"] and me["pid_ns"].startswith("pid:[")
    now = time.time()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    other_pod = dict(me, pid=dead.pid, pid_ns="pid:[4026532999]")
    assert scratch.is_live(other_pod, me, now)
    assert not scratch.is_live(dict(other_pod, created=now - scratch.STALE_S - 1), me, now)
    assert not scratch.is_live(dict(me, pid=dead.pid), me, now)                      # this namespace: ended
    legacy = dict(me, pid=dead.pid)
    legacy.pop("pid_ns")                                                            # a marker without it: as before
    assert not scratch.is_live(legacy, me, now)


def test_a_squashed_nodes_own_left_behind_sets_are_removed(tmp_path, monkeypatch):
    """On NFS with root_squash the sets this node's killed runs left belong to the mapped user, not
    to the effective uid: the cleanup looks at the owner of the run's own new files too, so they do
    not pile up on the tier (a live run's set is still kept)."""
    from ansible_collections.dlrack.node.plugins.module_utils.acceptance import smallfiles as sf
    me = scratch.identity()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for name, marker in (("killed", dict(me, pid=dead.pid)), ("live", me)):
        d = tmp_path / (sf.SCRATCH_PREFIX + name)
        (d / "d0000").mkdir(parents=True)
        (d / "d0000" / "f0000000.bin").write_bytes(b"x")
        (d / scratch.MARKER).write_text(json.dumps(marker))
    monkeypatch.setattr(scratch.os, "geteuid", lambda: os.getuid() + 4242)    # the owner the server gives is not euid
    doc = sf.measure(str(tmp_path), [{"name": "node0", "cpus": None}], files=10, file_kb=4, workers_per_group=1, phase_s=5)
    assert doc["status"] == "ok", doc
    assert sorted(os.listdir(str(tmp_path))) == [sf.SCRATCH_PREFIX + "live"]
