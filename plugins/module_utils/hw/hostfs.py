# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-side file helpers every collector shares (standard library only).

- ``under(root, path)``: ``path`` of the live system, read under ``root`` (a captured tree).
- ``read_text`` / ``read_int`` / ``listdir``: never raise. A missing file is normal (None / []);
  any other failure (permission denied, I/O error) is appended to ``errors`` when a list is
  given, so that running unprivileged never silently drops hardware.
- ``parse_cpuinfo``: the fields of /proc/cpuinfo that the gatherer and the EDAC detection use.
- ``read_uptime``: /proc/uptime in seconds (the gatherer and the ECC collector).
- ``container_marker``: the container a root runs in (systemd / podman / docker markers).
- ``write_atomic``: temp file in the same directory, fsync, rename.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re
import tempfile

READ_LIMIT = 1 << 20
# A missing file or directory is an answer (feature absent), not an error.
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.ENODEV, errno.ENXIO)


def under(root, path):
    """``/sys/x`` under ``root`` ('/' or a captured tree)."""
    return os.path.join(root or "/", path.lstrip("/"))


def _note(errors, path, exc, root=None):
    if errors is None or getattr(exc, "errno", None) in _ABSENT:
        return
    shown = path
    if root not in (None, "", "/"):
        prefix = os.path.join(root, "")
        if shown.startswith(prefix):
            shown = "/" + shown[len(prefix):]
    reason = getattr(exc, "strerror", None) or str(exc)
    errors.append("cannot read %s: %s" % (shown, reason))


def read_text(path, limit=READ_LIMIT, errors=None, root=None):
    """File content (UTF-8, undecodable bytes replaced) stripped, or None when it cannot be
    read. ``errors``: a list that gets one line per unreadable (not merely missing) file; the
    path is shown relative to ``root``."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit)
    except (IOError, OSError) as exc:
        _note(errors, path, exc, root)
        return None
    return data.decode("utf-8", "replace").strip()


_UINT = re.compile(r"^-?[0-9]{1,20}$")


def read_int(path, errors=None, root=None):
    """An integer file (ASCII digits, optional minus), or None when missing or garbled."""
    text = read_text(path, limit=64, errors=errors, root=root)
    if text is None or not _UINT.match(text):
        return None
    return int(text)


def listdir(path, errors=None, root=None):
    """Sorted entries of a directory; [] when missing or unreadable (unreadable is noted)."""
    try:
        return sorted(os.listdir(path))
    except (IOError, OSError) as exc:
        _note(errors, path, exc, root)
        return []


def readlink_base(path):
    """Last component of a symlink's target, or None."""
    try:
        return os.path.basename(os.readlink(path))
    except (IOError, OSError):
        return None


def natural_key(name):
    """'nvme10n1' sorts after 'nvme2n1'."""
    return [int(part) if part.isdecimal() else part for part in re.split(r"(\d+)", name)]


def _small_int(value):
    """'6' / '0x8f' -> int; anything else (including non-ASCII digits) -> None."""
    value = (value or "").strip()
    if re.match(r"^[0-9]{1,9}$", value):
        return int(value)
    if re.match(r"^0[xX][0-9a-fA-F]{1,8}$", value):
        return int(value, 16)
    return None


_NUMERIC = {"cpu family": "family", "model": "model_id", "stepping": "stepping"}


def parse_cpuinfo(text):
    """The first CPU's identity from /proc/cpuinfo text (x86 and Arm layouts).

    Returns {model, vendor_id, family, model_id, stepping, flags, implementer, hypervisor,
    garbled}. Never raises: a numeric field that is not a number is None and named in
    ``garbled`` (e.g. "cpu family '²'"; x86 layout only).
    """
    info = {"model": None, "vendor_id": None, "family": None, "model_id": None, "stepping": None,
            "flags": None, "implementer": None, "hypervisor": False, "garbled": []}
    if not isinstance(text, str):
        return info
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key in ("model name", "cpu") and info["model"] is None and value:
            info["model"] = re.sub(r"\s+", " ", value)
        elif key == "vendor_id" and info["vendor_id"] is None:
            info["vendor_id"] = value or None
        elif key in _NUMERIC and info[_NUMERIC[key]] is None:
            info[_NUMERIC[key]] = _small_int(value)
            if info[_NUMERIC[key]] is None and value and len(info["garbled"]) < 8:
                info["garbled"].append("%s %r" % (key, value[:40]))
        elif key in ("flags", "features") and info["flags"] is None:
            info["flags"] = value.split()
            info["hypervisor"] = "hypervisor" in info["flags"]
        elif key == "cpu implementer" and info["implementer"] is None:
            info["implementer"] = value or None
    if info["vendor_id"] is None:
        info["garbled"] = []  # not the x86 layout: POWER's "model" is the machine type, not a number
    return info


def read_uptime(root="/"):
    """Seconds since boot from /proc/uptime under ``root``; None when missing or not a finite,
    non-negative number ('nan' and 'inf' parse as floats but are no uptime)."""
    text = read_text(under(root, "/proc/uptime"), limit=256)
    try:
        value = float((text or "").split()[0])
    except (ValueError, IndexError):
        return None
    return value if 0 <= value < float("inf") else None


def container_marker(root="/"):
    """The container engine a root runs under, from the markers engines leave, or None.

    /run/systemd/container (its content: docker, podman, lxc, ...), /run/.containerenv
    (podman), /.dockerenv (docker), then ``container=`` in /proc/1/environ (readable as root).
    An empty marker gives "container-other".
    """
    for marker, name in (("/run/systemd/container", None), ("/run/.containerenv", "podman"),
                         ("/.dockerenv", "docker")):
        content = read_text(under(root, marker), limit=4096)
        if content is not None:
            first = (content.splitlines() or [""])[0].strip()
            # .containerenv holds key=value lines, not an engine name
            return name or first or "container-other"
    env = read_text(under(root, "/proc/1/environ"), limit=65536) or ""
    match = re.search(r"(?:^|\x00)container=([^\x00]*)", env)
    if match:
        return match.group(1).strip() or "container-other"
    return None


def write_atomic(path, text, mode=0o644):
    """Write ``text`` to a temp file in the same directory, fsync, rename over ``path``."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
