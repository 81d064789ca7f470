# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one block-device reader: what a disk is, whether it is in use, and what to call it.

Used by hw_facts (``gather``), ``storage_tiers_plan`` and ``md_array``. Everything is read under
``root`` (``/`` on a live node, a captured tree in tests): ``<root>/sys/block``,
``<root>/sys/class/block``, ``<root>/proc/self/mountinfo`` (else ``mounts``), ``<root>/proc/swaps``,
``<root>/dev/disk/by-id`` and the udev database ``<root>/run/udev/data``. The only command is
``blkid -p`` (low-level probe, no cache), run through an injected ``run(argv) -> (rc, out, err)``
(the callers pass the bounded runner of system/command.py: a probe stopped at its limit is an error)
and only when the caller passes its path (it needs root).

The rules, written once:

system disk
    the disk holds ``/``, ``/boot``, ``/boot/efi``, ``/usr``, ``/var`` or active swap, directly, on a
    partition, or through holders (LVM, dm-crypt, md) at any depth.
in use
    mounted (directly or through partitions/holders), has holders (md, LVM, dm-multipath, bcache),
    has partitions, or carries any signature (blkid -p or udev: filesystem, partition table, md
    member, ``zfs_member``, ``mpath_member``...). A disk whose signatures were never probed is not
    known to be free. See :func:`in_use_reasons`.
stable id
    one link per disk from ``/dev/disk/by-id``, chosen by :func:`by_id_rank`: the model_serial form
    people read off the drive and type (``nvme-<model>_<serial>``, ``ata-<model>_<serial>``,
    ``scsi-S<vendor>_<model>_<serial>``...) before ``wwn-``, before identifier forms
    (``nvme-eui.``, ``scsi-3...``). Every link, the WWN and the serial are accepted as input.
media kind
    ``nvme`` for NVMe namespaces, else ``hdd``/``ssd`` from ``queue/rotational``; ``None`` when that
    is unreadable and for virtio disks (virtio reports rotational=1 whatever backs it).
role
    ``system``, ``read_only`` (``ro`` = 1: a squashfs image disk, a write-protected card),
    ``small`` (under 1 GiB), ``removable``, else ``data``. Only ``data`` disks count as data disks
    (:func:`is_data_disk`) or are ever auto-selected. loop, ram, zram, sr, fd, nbd, md and dm
    devices are not disks and are not listed (they can still be named explicitly by path).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import (  # noqa: F401 - re-exported
    listdir, natural_key, read_int, read_text, readlink_base, under)
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import parse_export
from ansible_collections.dlrack.node.plugins.module_utils.system.command import problem

SYSTEM_MOUNTS = ("/", "/boot", "/boot/efi", "/usr", "/var", "[SWAP]")
NOT_DISKS = ("loop", "ram", "zram", "sr", "dm-", "md", "fd", "nbd")
MIN_DATA_BYTES = 1 << 30
BY_ID = "/dev/disk/by-id/"
_NVME_PATH = re.compile(r"^nvme\d+c\d+n\d+$")   # a multipath controller path, not a namespace
_UDEV_TYPES = (("ID_FS_TYPE", "{}"), ("ID_PART_TABLE_TYPE", "{}"), ("DM_MULTIPATH_DEVICE_PATH", "mpath_member"))


# the collection's one set of safe readers (never raise) lives in hostfs
natural = natural_key


# --------------------------------------------------------------------------------------------
# the rules

def by_id_rank(link):
    """Sort key of a by-id link: the model_serial form people type first (see module docstring)."""
    name = os.path.basename(link)
    if name.startswith(("nvme-eui.", "nvme-nvme.", "nvme-uuid.")):
        rank = 4
    elif name.startswith("nvme-"):
        rank = 1 if re.search(r"_\d+$", name) else 0   # nvme-<model>_<serial>_<nsid> duplicates
    elif name.startswith(("ata-", "scsi-S", "usb-", "virtio-", "mmc-", "ccw-", "xen-")):
        rank = 0
    elif name.startswith("wwn-"):
        rank = 2
    elif name.startswith("scsi-"):
        rank = 3
    else:
        rank = 5
    return (rank, name)


def media_kind(name, transport, rotational):
    if transport == "nvme" or name.startswith("nvme"):
        return "nvme"
    if transport == "virtio" or rotational is None:
        return None
    return "hdd" if rotational else "ssd"


def transport_of(name, devpath, devdir):
    if name.startswith("nvme"):
        return "nvme"
    p = devpath or ""
    if "/usb" in p:
        return "usb"
    if name.startswith("vd") or ("/virtio" in p and "/host" not in p):
        return "virtio"
    if re.search(r"/ata\d+/", p):
        return "sata"
    if "/end_device-" in p or "/port-" in p or os.path.exists(os.path.join(devdir, "device", "sas_address")):
        return "sas"
    if "/host" in p or "/target" in p:
        return "scsi"
    return "unknown"


def disk_role(disk):
    """``system``, ``read_only``, ``small``, ``removable`` or ``data`` (see module docstring)."""
    if (disk.get("in_use") or {}).get("system"):
        return "system"
    if disk.get("read_only"):
        return "read_only"
    size = disk.get("size_bytes")
    if size is not None and size < MIN_DATA_BYTES:
        return "small"
    if disk.get("removable"):
        return "removable"
    return "data"


def is_data_disk(disk):
    """True for a disk that may hold data (gathered or declared entry; missing keys = data)."""
    return (disk.get("role") or disk_role(disk)) == "data"


def in_use_reasons(disk):
    """Why a disk is in use, as short phrases (empty when it is free). The system disk always is."""
    use = disk.get("in_use") or {}
    probe = disk.get("probe")
    reasons = []
    if use.get("system"):
        reasons.append("it is the system disk (%s)" % ", ".join(use.get("mounted") or ["holds the root filesystem"]))
    if use.get("mounted"):
        reasons.append("mounted at %s" % ", ".join(use["mounted"]))
    if use.get("holders"):
        reasons.append("held by %s" % ", ".join(use["holders"]))
    if use.get("partitions"):
        reasons.append("has partitions %s" % ", ".join(use["partitions"]))
    if probe is None:
        reasons.append("its signatures are unknown (not probed with blkid -p)")
        return reasons
    if probe.get("pttype"):
        reasons.append("has a %s partition table" % probe["pttype"])
    ptype, plabel = probe.get("type"), probe.get("label")
    if ptype == "linux_raid_member":
        reasons.append("is a member of md array %s (UUID %s)" % (plabel or "?", probe.get("uuid") or "?"))
    elif ptype:
        reasons.append("carries a %s filesystem%s" % (ptype, " labelled %s" % plabel if plabel else ""))
    elif not probe.get("pttype") and use.get("signatures"):
        reasons.append("carries signatures %s" % ", ".join(use["signatures"]))
    return reasons


# --------------------------------------------------------------------------------------------
# the reader

class BlockDevices(object):
    """Block devices under ``root``; one instance is one consistent look at mounts and links.

    ``blkid``: path of blkid to run (None = do not probe; ``probe`` is then None, meaning
    "not known to be free"). ``errors``: list that failed probes are appended to.
    """

    def __init__(self, root="/", run=None, blkid=None, errors=None):
        self.root = root or "/"
        self.run = run
        self.blkid = blkid
        self.errors = errors if errors is not None else []
        self.block = under(self.root, "/sys/block")
        self.sysdirs = self._sysdirs()
        self.dm_names = self._dm_names()
        self.mounts = self._mount_table()
        self.swaps = self._swaps()
        self.links = self._by_id_links()

    # -- tables read once ----------------------------------------------------------------------
    def _sysdirs(self):
        """{kernel name: sysfs dir} for every disk and partition."""
        out = {}
        for name in listdir(self.block):
            d = os.path.join(self.block, name)
            out[name] = d
            for sub in listdir(d):
                if sub.startswith(name) and os.path.exists(os.path.join(d, sub, "partition")):
                    out[sub] = os.path.join(d, sub)
        return out

    def _dm_names(self):
        out = {}
        for name in self.sysdirs:
            if name.startswith("dm-"):
                n = read_text(os.path.join(self.sysdirs[name], "dm", "name"))
                if n:
                    out[n] = name
        return out

    def _devnos(self):
        out = {}
        for name, d in self.sysdirs.items():
            dev = read_text(os.path.join(d, "dev"))
            if dev:
                out[dev] = name
        return out

    def _dev_name(self, source):
        """'/dev/sda1' -> 'sda1'; '/dev/mapper/vg-lv' -> 'dm-0'; None for non-block sources."""
        if not source.startswith("/dev/"):
            return None
        if source.startswith("/dev/mapper/"):
            return self.dm_names.get(source[len("/dev/mapper/"):])
        path = under(self.root, source)
        if os.path.islink(path):
            return readlink_base(path)
        return os.path.basename(source)

    def _mount_table(self):
        """[(kernel name, mount point)] from mountinfo (by maj:min, then source) or mounts."""
        out = []
        info = read_text(under(self.root, "/proc/self/mountinfo"))
        if info:
            devnos = self._devnos()
            for line in info.splitlines():
                f = line.split()
                if len(f) < 5 or " - " not in line:
                    continue
                source = line.split(" - ", 1)[1].split()[1:2]
                name = devnos.get(f[2]) or (self._dev_name(source[0]) if source else None)
                if name:
                    out.append((name, f[4].replace("\\040", " ")))
            return out
        text = read_text(under(self.root, "/proc/self/mounts")) or read_text(under(self.root, "/proc/mounts"))
        for line in (text or "").splitlines():
            f = line.split()
            name = self._dev_name(f[0]) if len(f) >= 2 else None
            if name:
                out.append((name, f[1].replace("\\040", " ")))
        return out

    def _swaps(self):
        out = set()
        for line in (read_text(under(self.root, "/proc/swaps")) or "").splitlines()[1:]:
            f = line.split()
            name = self._dev_name(f[0]) if f else None
            if name:
                out.add(name)
        return out

    def _by_id_links(self):
        """{kernel name: [by-id links, best first]} for disks and partitions."""
        base = under(self.root, BY_ID)
        links = {}
        for link in listdir(base):
            target = readlink_base(os.path.join(base, link))
            if target:
                links.setdefault(target, []).append(BY_ID + link)
        for name in links:
            links[name].sort(key=by_id_rank)
        return links

    # -- names -----------------------------------------------------------------------------------
    def disk_names(self):
        """Kernel names of the whole disks worth listing (see NOT_DISKS), in natural order."""
        out = []
        for name in sorted(listdir(self.block), key=natural):
            if name.startswith(NOT_DISKS) or _NVME_PATH.match(name):
                continue
            if read_int(os.path.join(self.block, name, "size")) == 0:
                continue   # empty card reader / CD tray
            out.append(name)
        return out

    def resolve(self, request):
        """Kernel name a request names: a /dev path or link, a bare by-id name, a WWN or a serial;
        None when nothing under this root matches."""
        req = str(request or "").strip()
        if not req:
            return None
        if req.startswith("/dev/"):
            return self._resolve_path(req)
        for cand in (BY_ID + req, BY_ID + "wwn-" + req):
            if os.path.lexists(under(self.root, cand)):
                return self._resolve_path(cand)
        hits = set(n for n in self.disk_names() if self._serial(n) == req
                   or any(os.path.basename(x).endswith("_" + req) for x in self.links.get(n, [])))
        return hits.pop() if len(hits) == 1 else None

    def _resolve_path(self, path):
        full = under(self.root, path)
        for _i in range(8):   # follow links inside root (absolute targets are re-rooted)
            if not os.path.islink(full):
                break
            target = os.readlink(full)
            full = under(self.root, target) if target.startswith("/") else \
                os.path.normpath(os.path.join(os.path.dirname(full), target))
        if path.startswith("/dev/mapper/"):
            name = self.dm_names.get(path[len("/dev/mapper/"):])
        else:
            name = os.path.basename(full)
        return name if name and (name in self.sysdirs or self._class_dir(name)) else None

    def _class_dir(self, name):
        d = under(self.root, "/sys/class/block/" + name)
        return d if os.path.isdir(d) else None

    def sysdir(self, name):
        return self.sysdirs.get(name) or self._class_dir(name)

    # -- one device --------------------------------------------------------------------------------
    def _serial(self, name):
        d = self.sysdir(name) or ""
        dev = os.path.join(d, "device")
        return (read_text(os.path.join(dev, "serial")) or read_text(os.path.join(d, "serial"))
                or _vpd_serial(os.path.join(dev, "vpd_pg80")))

    def partitions(self, name):
        d = self.sysdir(name) or ""
        return [p for p in sorted(listdir(d), key=natural)
                if p.startswith(name) and os.path.exists(os.path.join(d, p, "partition"))]

    def holders(self, name, seen=None):
        """Every holder of ``name``, transitively (md127, dm-0 ...), each once."""
        seen = set() if seen is None else seen
        out = []
        for h in listdir(os.path.join(self.sysdir(name) or "", "holders")):
            if h not in seen:
                seen.add(h)
                out.append(h)
                out.extend(self.holders(h, seen))
        return out

    def usage(self, name):
        """The ``in_use`` dict of a disk or partition, without signatures."""
        parts = self.partitions(name)
        seen = set()
        holders = self.holders(name, seen)
        for p in parts:
            holders.extend(self.holders(p, seen))
        related = set([name] + parts + holders)
        mounted = []
        for dev, target in self.mounts:
            if dev in related and target not in mounted:
                mounted.append(target)
        if related & self.swaps:
            mounted.append("[SWAP]")
        return {"mounted": mounted, "holders": holders, "partitions": parts, "signatures": [],
                "system": any(m in SYSTEM_MOUNTS for m in mounted)}

    def _udev_signatures(self, name):
        dev = read_text(os.path.join(self.sysdir(name) or "", "dev"))
        data = read_text(under(self.root, "/run/udev/data/b%s" % dev)) if dev else None
        vals = dict(line[2:].split("=", 1) for line in (data or "").splitlines()
                    if line.startswith("E:") and "=" in line)
        return [fmt.format(vals[key]) for key, fmt in _UDEV_TYPES if vals.get(key) and vals[key] != "0"]

    def signatures(self, name, targets):
        """(["sda:gpt", "sda1:ext4", ...], probe of ``name`` or None when blkid did not run)."""
        sigs, probe = [], None
        for target in targets:
            for s in self._udev_signatures(target):
                sigs.append("%s:%s" % (target, s))
        if not self.blkid or self.run is None:
            return sigs, probe
        for target in targets:
            if self.root == "/" and not os.path.exists("/dev/" + target):
                # blkid -p exits 2, "nothing found", for a missing node too: that is not "blank"
                self.errors.append("blkid -p /dev/%s: no such device node; its signatures are unknown" % target)
                continue
            res = self.run([self.blkid, "-p", "-o", "export", "/dev/" + target])
            rc, out, err = res[0], res[1], res[2]
            if problem(res):   # the bounded runner stopped it (time or output limit) or it did not start
                self.errors.append("%s; the signatures of /dev/%s are unknown" % (problem(res), target))
                continue
            blank = rc == 2 and not (err or "").strip()   # "blkid: error: ...: Operation not permitted" exits 2 too
            if rc == 0:
                vals = parse_export(out)
                sigs.extend("%s:%s" % (target, vals[k]) for k in ("PTTYPE", "TYPE") if vals.get(k))
                if target == name:
                    probe = {"type": vals.get("TYPE"), "label": vals.get("LABEL"), "uuid": vals.get("UUID"),
                             "pttype": vals.get("PTTYPE")}
            elif blank:   # blkid: nothing found
                if target == name:
                    probe = {"type": None, "label": None, "uuid": None, "pttype": None}
            else:
                self.errors.append("blkid -p /dev/%s failed (rc=%s): %s" % (target, rc, (err or "").strip()[:200]))
        seen = []
        return [s for s in sigs if not (s in seen or seen.append(s))], probe

    def identity(self, name):
        """name, path, by-id links, WWN, model, serial, wwid."""
        d = self.sysdir(name) or ""
        links = list(self.links.get(name, []))
        wwn = next((os.path.basename(x)[4:] for x in links if os.path.basename(x).startswith("wwn-")), None)
        dev = os.path.join(d, "device")
        return {"name": name, "path": "/dev/" + name, "by_id": links[0] if links else None, "by_id_all": links,
                "wwn": wwn, "model": read_text(os.path.join(dev, "model")) or read_text(os.path.join(d, "model")) or None,
                "serial": self._serial(name) or None,
                "wwid": read_text(os.path.join(d, "wwid")) or read_text(os.path.join(dev, "wwid")) or None}

    def hardware(self, name):
        """kind, transport, size, rotational, removable, read_only."""
        d = self.sysdir(name) or ""
        try:
            real = os.path.realpath(d)
            devpath = real[len(os.path.realpath(self.root)):] if self.root != "/" else real
        except (OSError, ValueError):   # pragma: no cover - realpath of a readable dir
            devpath = None
        rot = read_int(os.path.join(d, "queue", "rotational"))
        transport = transport_of(name, devpath, d)
        sectors = read_int(os.path.join(d, "size"))
        removable, ro = read_int(os.path.join(d, "removable")), read_int(os.path.join(d, "ro"))
        return {"kind": media_kind(name, transport, rot), "transport": transport,
                "size_bytes": sectors * 512 if sectors and sectors > 0 else None,
                "rotational": None if rot is None else bool(rot),
                "removable": None if removable is None else bool(removable),
                "read_only": None if ro is None else bool(ro)}

    def device(self, name):
        """The full entry of one device (whole disk or partition), in the ``dlrack_hw.disks`` shape."""
        if name is None or not self.sysdir(name):
            return None
        entry = self.identity(name)
        entry.update(self.hardware(name))
        entry["in_use"] = self.usage(name)
        if os.path.exists(os.path.join(self.sysdir(name), "partition")):
            entry["kind"] = "partition"
            targets = [name]
        else:
            targets = [name] + entry["in_use"]["partitions"]
        entry["in_use"]["signatures"], entry["probe"] = self.signatures(name, targets)
        entry["role"] = disk_role(entry)
        return entry

    def disks(self):
        return [self.device(n) for n in self.disk_names()]


def _vpd_serial(path):
    try:
        with open(path, "rb") as fh:
            data = fh.read(512)
    except (IOError, OSError):
        return None
    if len(data) < 5:
        return None
    s = data[4:4 + data[3]].decode("ascii", "replace").strip().strip("\x00").strip()
    return s or None


def gather_disks(root, run, blkid_path, errors):
    """``dlrack_hw.disks`` of the node under ``root`` (hw_facts' disk section)."""
    return BlockDevices(root, run=run, blkid=blkid_path, errors=errors).disks()
