"""module_utils/acceptance/scratch.py: the owner marker's liveness rules, the private directory
named through its descriptor, and a cleanup that never follows or removes a link (issue 30.11).
The end-to-end cases (a planted link in a 0777 tier, two runs on one tier) are in
test_smallfiles.py and test_fio.py."""
import json
import os
import subprocess
import sys
import time

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
