"""hostfs: the shared node-side readers, on the captured trees (tests/data/sysfs, hosts/h200-vm)."""
import errno
import os

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.hw import hostfs

from realhost import h200_vm
from testpaths import sysfs_tree


def cpuinfo(tree):
    return hostfs.read_text(os.path.join(sysfs_tree(tree), "proc", "cpuinfo"))


def test_parse_cpuinfo_x86_power_and_the_h200_vm(tmp_path):
    epyc = hostfs.parse_cpuinfo(cpuinfo("esc8000a-e12"))
    assert (epyc["model"], epyc["vendor_id"], epyc["family"], epyc["model_id"], epyc["stepping"]) == (
        "AMD EPYC 9374F 32-Core Processor", "AuthenticAMD", 25, 17, 1)
    assert epyc["hypervisor"] is False and epyc["garbled"] == []
    power9 = hostfs.parse_cpuinfo(cpuinfo("traverse-power9-cpuless-numa"))
    assert power9["model"] == "POWER9, altivec supported" and power9["vendor_id"] is None
    root, _bin = h200_vm(tmp_path)
    vm = hostfs.parse_cpuinfo(hostfs.read_text(os.path.join(root, "proc", "cpuinfo")))
    assert (vm["model"], vm["family"], vm["model_id"], vm["stepping"], vm["hypervisor"]) == (
        "Intel(R) Xeon(R) Processor", 6, 207, 2, True)


@pytest.mark.parametrize("text,garbled", [
    ("vendor_id : GenuineIntel\ncpu family : \u00b2\nmodel : 0x8f\n", ["cpu family '\u00b2'"]),
    ("vendor_id : GenuineIntel\nstepping : 99999999999\n", ["stepping '99999999999'"]),
    ("processor : 0\nmodel : 8335-GTH\n", []),    # POWER: 'model' is the machine type
    (None, []), (b"bytes", []), ("", []), ("no colon at all\n" * 3, []),
])
def test_parse_cpuinfo_garbage_never_raises(text, garbled):
    info = hostfs.parse_cpuinfo(text)
    assert info["garbled"] == garbled
    if isinstance(text, str) and "0x8f" in text:
        assert info["model_id"] == 0x8f and info["family"] is None


def test_readers_note_unreadable_not_missing(tmp_path):
    errors = []
    assert hostfs.read_text(str(tmp_path / "missing"), errors=errors) is None and errors == []
    (tmp_path / "dir").mkdir()
    assert hostfs.read_text(str(tmp_path / "dir"), errors=errors, root=str(tmp_path)) is None
    assert errors == ["cannot read /dir: Is a directory"]
    assert hostfs.listdir(str(tmp_path / "missing"), errors=errors) == [] and len(errors) == 1
    (tmp_path / "n").write_text("-1\n")
    (tmp_path / "g").write_text("\u0663\n")
    assert hostfs.read_int(str(tmp_path / "n")) == -1 and hostfs.read_int(str(tmp_path / "g")) is None


def test_read_text_limit_and_permission(tmp_path, monkeypatch):
    big = tmp_path / "big"
    big.write_bytes(b"x" * (hostfs.READ_LIMIT + 10))
    assert len(hostfs.read_text(str(big))) == hostfs.READ_LIMIT

    def denied(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", path)
    monkeypatch.setattr(hostfs, "open", denied, raising=False)
    errors = []
    assert hostfs.read_text("/sys/x/vendor", errors=errors) is None
    assert errors == ["cannot read /sys/x/vendor: Permission denied"]


@pytest.mark.parametrize("marker,content,expected", [
    ("run/systemd/container", "podman\n", "podman"),
    ("run/systemd/container", "\n", "container-other"),
    ("run/.containerenv", "engine=\"podman-4.9\"\n", "podman"),
    (".dockerenv", "", "docker"),
    ("proc/1/environ", "PATH=/bin\x00container=lxc\x00", "lxc"),
    (None, None, None),
])
def test_container_marker(tmp_path, marker, content, expected):
    if marker:
        path = tmp_path / marker
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    assert hostfs.container_marker(str(tmp_path)) == expected


def test_write_atomic(tmp_path):
    target = tmp_path / "metrics.prom"
    hostfs.write_atomic(str(target), "a 1\n", mode=0o640)
    assert target.read_text() == "a 1\n" and (target.stat().st_mode & 0o777) == 0o640
    assert os.listdir(str(tmp_path)) == ["metrics.prom"]      # no temp file left behind
    with pytest.raises(OSError):
        hostfs.write_atomic(str(tmp_path / "no" / "such" / "dir"), "x")
