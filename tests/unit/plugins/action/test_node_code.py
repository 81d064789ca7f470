"""module_utils/system/node_code.py and its action: the node-side Python of the roles installed in
one module run - decided first, only what differs written, atomically, check mode writes nothing.
Run on real files in a scratch directory (root: the files are owned by root)."""
import hashlib
import os
import stat

import pytest

from ansible_collections.dlrack.node.plugins.action import node_code as action
from ansible_collections.dlrack.node.plugins.module_utils.system import node_code
from ansible_collections.dlrack.node.plugins.module_utils.system.node_code import NodeCodeError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="node_code writes files owned by root")

FILES = ["hw/cpulist.py", "hw/parsers/__init__.py", "system/command.py"]


def _contents():
    return action.read_files(FILES)


def _lib(tmp_path):
    return os.path.join(str(tmp_path), "usr", "local", "lib", "dlrack", "python")


def _installed(lib, rel):
    return os.path.join(node_code.target_dir(lib), *rel.split("/"))


def test_new_node_gets_every_file_and_directory_then_nothing_changes(tmp_path):
    lib = _lib(tmp_path)
    decided = node_code.plan(lib, _contents())
    assert [f[0] for f in decided["files"]] == sorted(FILES) and all(f[3] == "new" for f in decided["files"])
    # the missing ancestors of lib_dir too (as the file module's state=directory made them)
    assert os.path.join(str(tmp_path), "usr") in decided["dirs"] and lib in decided["dirs"]
    assert not os.path.exists(lib)                           # planning writes nothing
    node_code.apply(decided)
    for rel in FILES:
        path = _installed(lib, rel)
        with open(path, "rb") as f, open(os.path.join(action.MODULE_UTILS, rel), "rb") as src:
            assert f.read() == src.read()
        st = os.stat(path)
        assert stat.S_IMODE(st.st_mode) == 0o644 and (st.st_uid, st.st_gid) == (0, 0)
    assert stat.S_IMODE(os.stat(os.path.join(node_code.target_dir(lib), "hw", "parsers")).st_mode) == 0o755
    again = node_code.plan(lib, _contents())
    assert again["files"] == [] and again["dirs"] == [] and again["ok"] == sorted(FILES)


def test_only_the_file_that_differs_is_rewritten_and_a_mode_only_change_keeps_the_content(tmp_path):
    lib = _lib(tmp_path)
    node_code.apply(node_code.plan(lib, _contents()))
    edited, loose = _installed(lib, "hw/cpulist.py"), _installed(lib, "system/command.py")
    with open(edited, "a") as f:
        f.write("# edited on the node\n")
    os.chmod(loose, 0o666)
    keep = os.stat(_installed(lib, "hw/parsers/__init__.py")).st_ino
    decided = node_code.plan(lib, _contents())
    assert [(f[0], f[3]) for f in decided["files"]] == [("hw/cpulist.py", "content"), ("system/command.py", "mode")]
    text = node_code.diff(decided)
    assert "hw/cpulist.py sha256:" in text["before"] and "mode only" in text["after"]
    node_code.apply(decided)
    with open(edited) as f:
        assert "edited on the node" not in f.read()
    assert stat.S_IMODE(os.stat(loose).st_mode) == 0o644
    assert os.stat(_installed(lib, "hw/parsers/__init__.py")).st_ino == keep   # untouched
    assert not [n for n in os.listdir(os.path.dirname(edited)) if n.startswith(".")]   # no temporary left


@pytest.mark.parametrize("rel", ["../../../etc/passwd", "/etc/passwd", "hw/../../x.py", "hw/cpulist.sh",
                                 "hw//cpulist.py", "Hw/x.py", "hw/cpu list.py", "", None, "hw/\ncpulist.py"])
def test_a_path_that_is_not_a_module_utils_file_is_refused_naming_it(rel, tmp_path):
    with pytest.raises(NodeCodeError, match="not a module_utils file path"):
        node_code.plan(_lib(tmp_path), {rel: "x = 1\n"})
    with pytest.raises(NodeCodeError):
        action.read_files([rel])


def test_lib_dir_must_be_absolute_and_a_link_in_the_way_is_refused(tmp_path):
    with pytest.raises(NodeCodeError, match="lib_dir 'relative/lib'"):
        node_code.plan("relative/lib", _contents())
    lib = _lib(tmp_path)
    node_code.apply(node_code.plan(lib, _contents()))
    target = _installed(lib, "hw/cpulist.py")
    os.unlink(target)
    os.symlink("/etc/hostname", target)
    with pytest.raises(NodeCodeError, match="is not a regular file"):
        node_code.plan(lib, _contents())


def test_the_action_reads_only_files_of_the_collection(tmp_path):
    assert set(_contents()) == set(FILES)
    with pytest.raises(NodeCodeError, match="hw/no_such_file.py is not a file of this collection"):
        action.read_files(["hw/no_such_file.py"])
    with pytest.raises(NodeCodeError, match="non-empty list"):
        action.read_files("hw/cpulist.py")
    digest = hashlib.sha256(_contents()["hw/cpulist.py"].encode("utf-8")).hexdigest()
    with open(os.path.join(action.MODULE_UTILS, "hw", "cpulist.py"), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == digest
