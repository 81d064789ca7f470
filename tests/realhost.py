"""The h200-vm host (tests/data/hosts/h200-vm, see its SOURCES.md), unpacked for a test.

``h200_vm(base)`` unpacks the captured sysfs/procfs tree under ``base`` and installs a stand-in
``nvidia-smi`` (a shell script answering with the host's captured outputs) both in ``base/bin``
(for PATH) and at ``tree/usr/bin/nvidia-smi`` (where hw_facts looks for tools under its root).
"""
import os
import stat
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H200 = os.path.join(ROOT, "tests", "data", "hosts", "h200-vm")
H200_XML = os.path.join(H200, "nvidia-smi-q-x.xml")

STAND_IN = """#!/bin/sh
# stand-in nvidia-smi for the captured h200-vm host: prints what the real one printed there
case "$*" in
  "-q -x") exec cat '%s' ;;
  "nvlink -s") exit 0 ;;   # the real answer on that VM: nothing
  *) echo "stand-in nvidia-smi: no capture for: $*" >&2; exit 2 ;;
esac
"""


def _install(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def h200_vm(base):
    """Returns (root, bin_dir): the unpacked tree and the directory holding the stand-in."""
    base = str(base)
    with tarfile.open(os.path.join(H200, "tree.tar.gz")) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(base, filter="data")
        else:  # pragma: no cover - Python < 3.11.4; the archive is the project's own
            tar.extractall(base)
    root = os.path.join(base, "tree")
    script = STAND_IN % H200_XML
    _install(os.path.join(root, "usr", "bin", "nvidia-smi"), script)
    _install(os.path.join(base, "bin", "nvidia-smi"), script)
    return root, os.path.join(base, "bin")
