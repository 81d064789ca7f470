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
  - Reads the block devices of the target with the collection's one block-device reader
    (C(module_utils/storage/blockdev.py)) - sysfs, C(/proc/self/mountinfo), C(/proc/swaps), C(/dev/disk/by-id),
    the udev database and C(blkid -p), a low-level probe without cache) at the moment of planning,
    then calls the planner in C(module_utils/storage/plan.py). Never writes anything; runs the same in
    check mode.
  - The disk list is re-read here rather than taken from cached C(dlrack_hw) facts because a plan
    that may erase disks must not act on names from an earlier boot.
  - Fails, listing every problem, when a requested device is missing, in use (with the stable id
    and the exact fix), in both tiers, or too few for the RAID level.
  - Also fails, naming the option, when a mount point is not an absolute path in normal form of the
    POSIX portable filename characters, is a system directory (C(/), C(/boot), C(/etc), C(/usr),
    C(/var), C(/home) ... or anything below C(/etc), C(/usr), C(/boot), C(/proc), C(/sys), C(/dev),
    C(/run), C(/tmp)), resolves through a symbolic link to one, is where something else is mounted now
    or holds other mounts (read from C(/proc/self/mountinfo)), or when both tiers share a mount point
    or one lies inside the other; and when a mount option or the device timeout holds a character
    that could change the fstab line (a line break, whitespace, C(#), quotes).
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
    default:
      - {path: datasets, owner: root, group: root, mode: "0755"}
      - {path: checkpoints, owner: root, group: root, mode: "0755"}
      - {path: scratch, owner: root, group: root, mode: "1777"}
  cold_dirs:
    description: Directories on the cold tier.
    type: list
    elements: dict
    default:
      - {path: datasets, owner: root, group: root, mode: "0755"}
      - {path: weights, owner: root, group: root, mode: "0755"}
      - {path: logs, owner: root, group: root, mode: "0755"}
      - {path: results, owner: root, group: root, mode: "0755"}
  var_prefix:
    description:
      - Prefix of option names in messages; the role passes C(storage_tiers_) so that refusals name
        its variables (C(storage_tiers_hot_devices)).
    type: str
    default: ""
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
  description: The plan (see module_utils/storage/plan.py); C(hot)/C(cold) with devices, md, filesystems.
  type: dict
  returned: success
disks:
  description: What was probed, per device (name, by_id, kind, transport, in_use, probe).
  type: list
  returned: always
"""

import os
import posixpath
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dlrack.node.plugins.module_utils.storage.blockdev import BlockDevices
from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import container_marker, under
from ansible_collections.dlrack.node.plugins.module_utils.storage.plan import (
    StoragePlanError, argument_spec, parse_mountinfo, plan_storage)
from ansible_collections.dlrack.node.plugins.module_utils.system.command import Runner

ROOT = "/"                  # the node's root (a captured tree in tests)
MOUNTINFO_LIMIT = 8 << 20   # bytes; a node with 10,000 mounts writes ~2 MiB
LINK_HOPS = 40              # as the kernel's MAXSYMLINKS
# blkid -p of each disk through the bounded runner (system/command.py): a disk whose probe hangs
# (a dying drive, a wedged controller) costs BLKID_TIMEOUT_S and is then "signatures unknown",
# which the planner never takes for blank.
BLKID_TIMEOUT_S = 30
BLKID_OUTPUT_LIMIT = 1 << 20


def bounded_run(argv):
    """The reader's ``run``: (rc, out, err) of ``argv`` within BLKID_TIMEOUT_S and BLKID_OUTPUT_LIMIT."""
    return Runner(timeout=BLKID_TIMEOUT_S, output_limit=BLKID_OUTPUT_LIMIT)(argv)


def in_container(root="/"):
    """True inside a container (hostfs.container_marker: the one container check)."""
    return container_marker(root) is not None


def probe_disks(reader, requests):
    """Every listed disk, plus each requested device the listing leaves out (a loop device, a
    partition...); a request naming a /dev path that is not there becomes ``exists: False``."""
    disks = reader.disks()
    by_name = dict((d["name"], d) for d in disks)
    for req in requests:
        name = reader.resolve(req)
        if name is None:
            if req.startswith("/dev/"):
                disks.append({"name": None, "path": req, "exists": False})
            continue
        if name not in by_name:
            by_name[name] = reader.device(name)
            disks.append(by_name[name])
        if req.startswith("/dev/") and req not in (by_name[name]["path"],):
            by_name[name].setdefault("aliases", []).append(req)   # e.g. a /dev/disk/by-path link
    return disks


def read_mounts(root="/"):
    """``(mounts, None)`` from ``<root>/proc/self/mountinfo``, or ``(None, why)`` when it cannot be read
    whole (a truncated table could hide the mount a tier would cover)."""
    path = under(root, "/proc/self/mountinfo")
    try:
        with open(path, "rb") as fh:
            data = fh.read(MOUNTINFO_LIMIT + 1)
    except (IOError, OSError) as e:
        return None, "cannot read /proc/self/mountinfo: %s" % (e.strerror or e)
    if len(data) > MOUNTINFO_LIMIT:
        return None, "/proc/self/mountinfo is over %d MiB" % (MOUNTINFO_LIMIT >> 20)
    return parse_mountinfo(data.decode("utf-8", "replace")), None


def resolve_under(root, path):
    """Where the absolute ``path`` leads under ``root``, following symbolic links as the kernel does
    (an absolute link target starts again at ``root``); None after too many links."""
    todo, done, hops = [p for p in path.split("/") if p], "/", LINK_HOPS
    while todo:
        part = todo.pop(0)
        if part == ".":
            continue
        if part == "..":
            done = posixpath.dirname(done)
            continue
        cand = posixpath.join(done, part)
        full = under(root, cand)
        if os.path.islink(full):
            hops -= 1
            if hops < 0:
                return None
            target = os.readlink(full)
            if target.startswith("/"):
                done = "/"
            todo = [p for p in target.split("/") if p] + todo
        else:
            done = cand
    return done


def node_view(root, p):
    """What the planner checks the mount points against: the mount table and where each one leads."""
    mounts, error = read_mounts(root)
    paths = [p[k] for k in ("hot_mount", "cold_mount") if isinstance(p.get(k), str) and p[k].startswith("/")]
    return {"mounts": mounts, "mounts_error": error, "realpath": dict((path, resolve_under(root, path)) for path in paths)}


def main():
    spec = argument_spec()
    spec["var_prefix"] = dict(type="str", default="")
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params
    var = p["var_prefix"]
    for key in ("hot_devices", "cold_devices"):
        if p[key] != "auto" and not isinstance(p[key], list):
            module.fail_json(msg="%s%s must be 'auto' or a list of stable ids, got %r" % (var, key, p[key]))
    auto = (p["hot_enabled"] and p["hot_devices"] == "auto") or (p["cold_enabled"] and p["cold_devices"] == "auto")
    container = in_container(ROOT)
    if auto and container:
        module.fail_json(msg="storage_tiers: auto-selection is disabled inside a container, which sees the host's "
                             "own disks; list {v}hot_devices and {v}cold_devices explicitly (or disable a tier with "
                             "{v}hot_enabled/{v}cold_enabled: false)".format(v=var))
    blkid = module.get_bin_path("blkid")
    if blkid is None:
        module.fail_json(msg="blkid is not installed on %s; it is needed to see what each disk carries (install "
                             "util-linux / blkid)" % socket.gethostname())
    errors = []
    reader = BlockDevices(ROOT, run=bounded_run, blkid=blkid, errors=errors)
    requests = [str(r) for key in ("hot_devices", "cold_devices") if isinstance(p[key], list) for r in p[key]]
    disks = probe_disks(reader, requests + list(p["wipe_allowed"]))
    config = dict(p, host=socket.gethostname())
    try:
        plan = plan_storage(disks, config, node_view(ROOT, p))
    except StoragePlanError as e:
        module.fail_json(msg="storage_tiers: refusing to touch any device: " + " | ".join(e.messages),
                         errors=e.messages, disks=disks, probe_errors=errors)
    for w in plan["warnings"] + errors:
        module.warn(w)
    module.exit_json(changed=False, plan=plan, disks=disks, in_container=container)


if __name__ == "__main__":
    main()
