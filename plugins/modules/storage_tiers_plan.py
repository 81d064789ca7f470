#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: storage_tiers_plan
short_description: Plan the hot (NVMe) and cold (HDD) storage tiers of a node; read-only
version_added: "0.1.0"
description:
  - Reads the block devices of the target from sysfs, C(/proc/self/mountinfo), C(/proc/swaps) and
    C(blkid -p) (low-level probe, no cache) at the moment of planning, then calls the planner in
    C(module_utils/storage_plan.py). Never writes anything; runs the same in check mode.
  - The disk list is re-read here rather than taken from cached C(dlrack_hw) facts because a plan
    that may erase disks must not act on names from an earlier boot.
  - Fails, listing every problem, when a requested device is missing, in use (with the stable id
    and the exact fix), in both tiers, or too few for the RAID level.
options:
  hot_devices:
    description: C(auto) or a list of stable ids (by-id link, bare by-id name, WWN or serial).
    type: raw
    default: auto
  cold_devices:
    description: C(auto) or a list of stable ids.
    type: raw
    default: auto
  hot_layout:
    description: Hot tier layout with several devices.
    type: str
    default: raid0
    choices: [raid0, raid10, jbod]
  cold_level:
    description: Cold tier layout.
    type: str
    default: raid6
    choices: [raid6, raid10, raid5, raid1, single]
  hot_chunk_kb:
    description: md chunk of the hot array in KiB.
    type: int
    default: 512
  cold_chunk_kb:
    description: md chunk of the cold array in KiB.
    type: int
    default: 512
  hot_mount:
    description: Hot tier mount point.
    type: path
    default: /mnt/hot
  cold_mount:
    description: Cold tier mount point.
    type: path
    default: /mnt/archive
  hot_enabled:
    description: Build the hot tier.
    type: bool
    default: true
  cold_enabled:
    description: Build the cold tier.
    type: bool
    default: true
  wipe_allowed:
    description: Stable ids of in-use devices that may be erased (only with I(safe_mode=false)).
    type: list
    elements: str
    default: []
  safe_mode:
    description: Refuse every device that carries anything.
    type: bool
    default: true
  mount_options:
    description: Extra mount options (C(noatime) and C(nofail) are always added, C(discard) dropped).
    type: list
    elements: str
    default: [noatime]
  device_timeout:
    description: C(x-systemd.device-timeout=) value.
    type: str
    default: 30s
  hot_dirs:
    description: Directories on the hot tier, C({path, owner, group, mode}), path relative to the mount.
    type: list
    elements: dict
    default: []
  cold_dirs:
    description: Directories on the cold tier.
    type: list
    elements: dict
    default: []
attributes:
  check_mode:
    support: full
    description: Read-only; plans the same in check mode.
  diff_mode:
    support: none
    description: Never changes anything.
  platform:
    support: full
    platforms: posix
    description: Linux hosts (reads sysfs and procfs).
author: dlrack.node contributors (@dlrack)
"""

EXAMPLES = r"""
- name: Plan the tiers
  dlrack.node.storage_tiers_plan:
    hot_devices: auto
    cold_devices: [wwn-0x5000c500dead0001, wwn-0x5000c500dead0002, wwn-0x5000c500dead0003, wwn-0x5000c500dead0004]
  register: plan
"""

RETURN = r"""
plan:
  description: The plan (see module_utils/storage_plan.py); C(hot)/C(cold) with devices, md, filesystems.
  type: dict
  returned: success
disks:
  description: What was probed, per device (name, by_id, kind, transport, in_use, probe).
  type: list
  returned: always
"""

import glob
import os
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dlrack.node.plugins.module_utils.parsers import parse_export
from ansible_collections.dlrack.node.plugins.module_utils.storage_plan import (
    StoragePlanError, plan_storage)

SKIP_PREFIXES = ("loop", "ram", "zram", "sr", "md", "dm-", "fd", "nbd")
BY_ID = "/dev/disk/by-id"


def _read(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except (IOError, OSError):
        return default


def mounts_by_devno(mountinfo_text, swaps_text, stat_rdev):
    """{"maj:min": [mountpoints]} from mountinfo, plus "[SWAP]" for active swap devices."""
    out = {}
    for line in (mountinfo_text or "").splitlines():
        f = line.split()
        if len(f) > 4:
            out.setdefault(f[2], []).append(f[4].replace("\\040", " "))
    for line in (swaps_text or "").splitlines()[1:]:
        f = line.split()
        if f and f[0].startswith("/dev/"):
            devno = stat_rdev(f[0])
            if devno:
                out.setdefault(devno, []).append("[SWAP]")
    return out


def _rdev(path):
    try:
        st = os.stat(path)
        return "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
    except OSError:
        return None


def by_id_links():
    """{real device path: [by-id links]} (whole-disk links only)."""
    out = {}
    for link in sorted(glob.glob(BY_ID + "/*")):
        if "-part" in os.path.basename(link):
            continue
        out.setdefault(os.path.realpath(link), []).append(link)
    return out


def _preferred(links):
    def rank(link):
        b = os.path.basename(link)
        if b.startswith("wwn-"):
            return (0, b)
        if b.startswith("nvme-") and not b.startswith(("nvme-eui.", "nvme-nvme.", "nvme-uuid.")) and not b.endswith("_1"):
            return (0, b)
        if b.startswith(("ata-", "scsi-SATA", "scsi-3", "scsi-")):
            return (1, b)
        return (2, b)
    return sorted(links, key=rank)


def transport_of(sysdir):
    real = os.path.realpath(sysdir)
    if "/usb" in real:
        return "usb"
    if "/nvme" in real:
        return "nvme"
    if "/ata" in real:
        return "sata"
    if "virtio" in real and "/host" not in real:
        return "virtio"
    if "/host" in real or "/target" in real:
        return "sas"
    return "unknown"


class Prober:
    def __init__(self, module):
        self.module = module
        self.links = by_id_links()
        self.mounts = mounts_by_devno(_read("/proc/self/mountinfo", ""), _read("/proc/swaps", ""), _rdev)

    def blkid(self, dev):
        rc, out, _err = self.module.run_command(["blkid", "-p", "-o", "export", dev])
        return parse_export(out) if rc == 0 else {}

    def _mounts_of(self, name):
        return list(self.mounts.get(_read("/sys/class/block/%s/dev" % name, "-"), []))

    def _holder_mounts(self, name, depth=0):
        found = []
        hdir = "/sys/class/block/%s/holders" % name
        if depth > 4 or not os.path.isdir(hdir):
            return found
        for h in os.listdir(hdir):
            found += self._mounts_of(h) + self._holder_mounts(h, depth + 1)
        return found

    def probe(self, path):
        real = os.path.realpath(path)
        name = os.path.basename(real)
        sysdir = "/sys/class/block/%s" % name
        if not (os.path.exists(real) and os.path.isdir(sysdir)):
            return {"name": None, "path": path, "exists": False}
        if os.path.exists(os.path.join(sysdir, "partition")):
            return {"name": name, "path": real, "exists": True, "kind": "partition",
                    "by_id_all": self.links.get(real, []), "in_use": {"mounted": self._mounts_of(name),
                                                                      "holders": [], "partitions": [],
                                                                      "signatures": [], "system": False},
                    "probe": {"type": "partition"}}
        parts = sorted(p for p in os.listdir(sysdir)
                       if p.startswith(name) and os.path.exists(os.path.join(sysdir, p, "partition")))
        holders = sorted(os.listdir(os.path.join(sysdir, "holders"))) if os.path.isdir(
            os.path.join(sysdir, "holders")) else []
        mounted = self._mounts_of(name)
        for p in parts:
            mounted += self._mounts_of(p)
        indirect = self._holder_mounts(name)
        for p in parts:
            indirect += self._holder_mounts(p)
        blk = self.blkid(real)
        sigs = [s for s in (blk.get("TYPE"), blk.get("PTTYPE")) if s]
        links = _preferred(self.links.get(real, []))
        rot = _read(os.path.join(sysdir, "queue", "rotational"), "0") == "1"
        transport = transport_of(sysdir)
        kind = "nvme" if name.startswith("nvme") else ("hdd" if rot else "ssd")
        wwn = None
        for link in links:
            b = os.path.basename(link)
            if b.startswith("wwn-"):
                wwn = b[len("wwn-"):]
                break
        system_mounts = ("/", "/boot", "/boot/efi", "/usr", "/var", "[SWAP]")
        return {
            "name": name, "path": real, "exists": True, "kind": kind, "transport": transport,
            "by_id": links[0] if links else None, "by_id_all": links, "wwn": wwn,
            "serial": _read(os.path.join(sysdir, "device", "serial")) or None,
            "size_bytes": int(_read(os.path.join(sysdir, "size"), "0") or 0) * 512,
            "in_use": {"mounted": sorted(set(mounted)), "holders": holders, "partitions": parts,
                       "signatures": sigs,
                       "system": any(m in system_mounts for m in mounted + indirect)},
            "probe": {"type": blk.get("TYPE"), "label": blk.get("LABEL"), "uuid": blk.get("UUID"),
                      "pttype": blk.get("PTTYPE")},
        }

    def all_disks(self):
        out = []
        for name in sorted(os.listdir("/sys/block")):
            if name.startswith(SKIP_PREFIXES):
                continue
            if name.startswith("nvme") and "c" in name[4:].split("n")[0]:
                continue   # nvme0c0n1: multipath controller path, not a namespace
            out.append(self.probe("/dev/" + name))
        return out


def in_container():
    if os.path.exists("/run/.containerenv") or os.path.exists("/.dockerenv"):
        return True
    return _read("/run/systemd/container") not in (None, "")


def request_paths(req):
    """Where a request string may live under /dev (for devices outside the auto candidate list)."""
    if req.startswith("/dev/"):
        return [req]
    cands = [os.path.join(BY_ID, req)]
    if req.startswith("0x"):
        cands.append(os.path.join(BY_ID, "wwn-" + req))
    cands += sorted(glob.glob(os.path.join(BY_ID, "*_" + req)))
    return cands


def main():
    module = AnsibleModule(
        argument_spec=dict(
            hot_devices=dict(type="raw", default="auto"),
            cold_devices=dict(type="raw", default="auto"),
            hot_layout=dict(type="str", default="raid0", choices=["raid0", "raid10", "jbod"]),
            cold_level=dict(type="str", default="raid6", choices=["raid6", "raid10", "raid5", "raid1", "single"]),
            hot_chunk_kb=dict(type="int", default=512),
            cold_chunk_kb=dict(type="int", default=512),
            hot_mount=dict(type="path", default="/mnt/hot"),
            cold_mount=dict(type="path", default="/mnt/archive"),
            hot_enabled=dict(type="bool", default=True),
            cold_enabled=dict(type="bool", default=True),
            wipe_allowed=dict(type="list", elements="str", default=[]),
            safe_mode=dict(type="bool", default=True),
            mount_options=dict(type="list", elements="str", default=["noatime"]),
            device_timeout=dict(type="str", default="30s"),
            hot_dirs=dict(type="list", elements="dict", default=[]),
            cold_dirs=dict(type="list", elements="dict", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    for key in ("hot_devices", "cold_devices"):
        if p[key] != "auto" and not isinstance(p[key], list):
            module.fail_json(msg="storage_tiers_%s must be 'auto' or a list of stable ids, got %r" % (key, p[key]))
    auto = (p["hot_enabled"] and p["hot_devices"] == "auto") or (p["cold_enabled"] and p["cold_devices"] == "auto")
    if auto and in_container():
        module.fail_json(msg="storage_tiers: auto-selection is disabled inside a container, which sees the host's "
                             "own disks; list storage_tiers_hot_devices and storage_tiers_cold_devices explicitly "
                             "(or disable a tier with storage_tiers_hot_enabled/storage_tiers_cold_enabled: false)")
    prober = Prober(module)
    disks = prober.all_disks()
    known = set(d["path"] for d in disks if d.get("exists"))
    requests = []
    for key in ("hot_devices", "cold_devices"):
        if isinstance(p[key], list):
            requests += [str(r) for r in p[key]]
    requests += list(p["wipe_allowed"])
    for req in requests:
        for cand in request_paths(req):
            if os.path.exists(cand):
                real = os.path.realpath(cand)
                entry = prober.probe(cand)
                if real not in known:
                    disks.append(entry)
                    known.add(real)
                if cand.startswith("/dev/") and not cand.startswith(BY_ID) and cand != real:
                    # a symlink given as path (e.g. /dev/disk/by-path/...): remember the alias
                    for d in disks:
                        if d.get("path") == real:
                            d.setdefault("by_id_all", [])
                break
        else:
            if req.startswith("/dev/"):
                disks.append({"name": None, "path": req, "exists": False})
    config = dict(p)
    config["host"] = socket.gethostname()
    try:
        plan = plan_storage(disks, config)
    except StoragePlanError as e:
        module.fail_json(msg="storage_tiers: refusing to touch any device: " + " | ".join(e.messages),
                         errors=e.messages, disks=disks)
    for w in plan["warnings"]:
        module.warn(w)
    module.exit_json(changed=False, plan=plan, disks=disks, in_container=in_container())


if __name__ == "__main__":
    main()
