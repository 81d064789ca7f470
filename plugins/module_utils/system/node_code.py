# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node-side Python of the collection, installed in one module call (docs/node_code.md).

The roles that run collection code on nodes (ecc_monitor, gpu_affinity, scheduler) ship files of
``plugins/module_utils`` under ``<lib_dir>/ansible_collections/dlrack/node/plugins/module_utils``.
One ``copy`` per file was two module runs per file and run (stat + copy), 14 files for the ECC
collector alone; this decides for every file at once (``plan``) and writes only what differs
(``apply``), each file atomically, so a node never imports a half-written module.

Standard library only, Python 3.6+: it runs inside the module on the node.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import re
import stat
import tempfile

PKG = ("ansible_collections", "dlrack", "node", "plugins", "module_utils")
FILE_MODE = 0o644
DIR_MODE = 0o755
MAX_FILES = 200
MAX_BYTES = 8 * 1024 * 1024          # all files together
# a module_utils path as the roles list it: room/name.py, lower-case Python names only
_REL = re.compile(r"^(?:[a-z_][a-z0-9_]*/)*[a-z_][a-z0-9_]*\.py$")


class NodeCodeError(ValueError):
    """A request that cannot be installed: one sentence naming the file and the fix."""


def check_path(rel):
    """``rel`` if it is a module_utils path (``hw/cpulist.py``), else NodeCodeError."""
    if not isinstance(rel, str) or not _REL.match(rel) or len(rel) > 255:
        raise NodeCodeError("node_code: %r is not a module_utils file path (room/name.py, relative, "
                            "lower-case Python names): list the file as plugins/module_utils names it" % (rel,))
    return rel


def target_dir(lib_dir):
    return os.path.join(lib_dir, *PKG)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(65536), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _needs_attrs(path, mode):
    """Whether path's mode or owner (root) differ from what is wanted."""
    st = os.lstat(path)
    return stat.S_IMODE(st.st_mode) != mode or st.st_uid != 0 or st.st_gid != 0


def plan(lib_dir, contents):
    """What to do to make ``lib_dir`` hold ``contents`` ({rel path: text}), read-only:
    {"dirs": [paths to create or fix], "files": [(rel, target, data, reason)], "ok": [rel]}."""
    if not isinstance(lib_dir, str) or not os.path.isabs(lib_dir) or os.path.normpath(lib_dir) != lib_dir:
        raise NodeCodeError("node_code: lib_dir %r is not an absolute, normalised path: set the role's lib_dir "
                            "variable to one (default /usr/local/lib/dlrack/python)" % (lib_dir,))
    if len(contents) > MAX_FILES:
        raise NodeCodeError("node_code: %d files asked, at most %d" % (len(contents), MAX_FILES))
    total = 0
    base = target_dir(lib_dir)
    dirs, files, ok = [], [], []
    wanted_dirs = set([lib_dir])
    parent = os.path.dirname(lib_dir)
    while parent != os.path.dirname(parent) and not os.path.lexists(parent):   # missing ancestors only
        wanted_dirs.add(parent)
        parent = os.path.dirname(parent)
    for rel in sorted(contents):
        check_path(rel)
        parts = rel.split("/")
        for depth in range(len(PKG) + len(parts)):
            wanted_dirs.add(os.path.join(lib_dir, *(PKG + tuple(parts))[:depth]))
        data = contents[rel].encode("utf-8") if not isinstance(contents[rel], bytes) else contents[rel]
        total += len(data)
        if total > MAX_BYTES:
            raise NodeCodeError("node_code: the files come to more than %d bytes" % MAX_BYTES)
        target = os.path.join(base, *parts)
        if os.path.islink(target) or (os.path.exists(target) and not os.path.isfile(target)):
            raise NodeCodeError("node_code: %s is not a regular file (a link or a directory): remove it, "
                                "then run again" % target)
        if not os.path.exists(target):
            files.append((rel, target, data, "new"))
        elif _sha256(target) != hashlib.sha256(data).hexdigest():
            files.append((rel, target, data, "content"))
        elif _needs_attrs(target, FILE_MODE):
            files.append((rel, target, data, "mode"))
        else:
            ok.append(rel)
    for path in sorted(wanted_dirs):
        if os.path.islink(path) or (os.path.exists(path) and not os.path.isdir(path)):
            raise NodeCodeError("node_code: %s is not a directory (a link or a file): remove it, then run again" % path)
        if not os.path.exists(path) or _needs_attrs(path, DIR_MODE):
            dirs.append(path)
    return {"dirs": dirs, "files": files, "ok": ok}


def apply(decided):
    """Make the directories and write the files of a plan (as root: owner root:root)."""
    for path in decided["dirs"]:
        if not os.path.isdir(path):
            os.mkdir(path, DIR_MODE)
        os.chown(path, 0, 0)
        os.chmod(path, DIR_MODE)
    for dummy_rel, target, data, reason in decided["files"]:
        if reason == "mode":
            os.chown(target, 0, 0)
            os.chmod(target, FILE_MODE)
            continue
        fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(target), dir=os.path.dirname(target))
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chown(tmp, 0, 0)
            os.chmod(tmp, FILE_MODE)
            os.rename(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def diff(decided):
    """Ansible's diff of a plan: one line per directory and file that changes."""
    before, after = [], []
    for path in decided["dirs"]:
        before.append("%s/%s\n" % (path, "" if os.path.exists(path) else " (absent)"))
        after.append("%s/ (root:root 0755)\n" % path)
    for rel, target, data, reason in decided["files"]:
        have = _sha256(target)[:12] if os.path.isfile(target) else "absent"
        before.append("%s sha256:%s\n" % (rel, have))
        after.append("%s sha256:%s (root:root 0644%s)\n" % (rel, hashlib.sha256(data).hexdigest()[:12],
                                                            "" if reason != "mode" else ", mode only"))
    return {"before": "".join(before), "after": "".join(after), "before_header": "node code", "after_header": "node code"}
