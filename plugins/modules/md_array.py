#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: md_array
short_description: Create or assemble a Linux md RAID array, safely and idempotently
version_added: "0.1.0"
description:
  - Decides first, acts only outside check mode, runs C(mdadm) with argument lists only.
  - If an array with this I(name) is running with the requested members and level, nothing is done.
  - If the members carry the superblock of an array with this I(name) (one UUID) but it is not
    running, it is assembled (an interrupted run is completed, never re-created).
  - Otherwise the array is created with C(--assume-clean) (no initial resync; every member must be
    blank, so parity over zeros is already consistent).
  - A member with any other signature (filesystem, partition table, a foreign md superblock) or
    with holders is refused unless listed in I(allow_signatures). A member on the system disk, or
    mounted other than through this array, is always refused. Holders and mounts are read with the
    collection's block-device reader (C(module_utils/storage/blockdev.py)), the same rules as the planner.
  - In check mode the module reports the action and the exact command it would run.
  - Every command is bounded in time and output (60 s for a read, 300 s for C(wipefs) and
    C(mdadm --create), 1 MiB); a command stopped at its limit fails the module naming it, and a
    read that did not answer is never taken for a blank disk.
options:
  name:
    description: Array name (stored in the superblock as C(homehost:name)); the device is C(/dev/md/<name>).
    type: str
    required: true
  level:
    description: RAID level.
    type: int
    required: true
    choices: [0, 1, 5, 6, 10]
  devices:
    description: Member devices (paths; C(/dev/disk/by-id) links are resolved).
    type: list
    elements: path
    required: true
  chunk_kb:
    description: Chunk size in KiB (ignored for RAID1).
    type: int
    default: 512
  metadata:
    description: Superblock format.
    type: str
    default: "1.2"
  allow_signatures:
    description: Members that may carry other signatures; they are overwritten by the create.
    type: list
    elements: path
    default: []
attributes:
  check_mode:
    support: full
    description: Decides without changing anything and returns the action and the exact mdadm command it would run.
  diff_mode:
    support: none
    description: The result names the action and the command; there is no before/after text to diff.
  platform:
    support: full
    platforms: posix
    description: Linux hosts with mdadm.
author: dlrack.node contributors (@dlrack)
"""

EXAMPLES = r"""
- name: Hot tier RAID0 over two NVMe namespaces
  dlrack.node.md_array:
    name: dlrack-hot
    level: 0
    chunk_kb: 512
    devices:
      - /dev/disk/by-id/nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0R000001
      - /dev/disk/by-id/nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0R000002
"""

RETURN = r"""
action:
  description: What was (or in check mode would be) done.
  type: str
  returned: always
  sample: create
argv:
  description: The mdadm command run (or planned), as a list; empty when nothing is to be done.
  type: list
  returned: always
device:
  description: The array device path C(/dev/md/<name>).
  type: str
  returned: always
md_device:
  description: The kernel device (C(/dev/md127)); null in check mode before the array exists.
  type: str
  returned: always
uuid:
  description: The array UUID (mdadm colon form); null in check mode before creation.
  type: str
  returned: always
conf_line:
  description: The mdadm.conf ARRAY line for this array; null until the UUID is known.
  type: str
  returned: always
members:
  description: Resolved member devices.
  type: list
  returned: always
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dlrack.node.plugins.module_utils.storage.blockdev import BlockDevices, listdir
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import parse_export
from ansible_collections.dlrack.node.plugins.module_utils.system.command import problem, run as run_bounded

ROOT = "/"   # where the block-device reader looks (tests point it at a captured tree)
# Every command through the bounded runner (system/command.py), not module.run_command, which has no
# time limit: a read (mdadm --detail/--examine, blkid -p) of a dying disk or a wedged controller
# costs READ_TIMEOUT_S and then refuses (unknown is not blank); wipefs and mdadm --create get
# ACT_TIMEOUT_S. OUTPUT_LIMIT bytes per stream.
READ_TIMEOUT_S = 60
ACT_TIMEOUT_S = 300
OUTPUT_LIMIT = 1 << 20
LEVEL_NAMES = {0: "raid0", 1: "raid1", 5: "raid5", 6: "raid6", 10: "raid10"}


class MdError(Exception):
    pass


def name_matches(md_name, name):
    return bool(md_name) and (md_name == name or md_name.rsplit(":", 1)[-1] == name)


def detail_members(detail):
    """Member device paths from ``mdadm --detail --export``."""
    return sorted(v for k, v in detail.items() if k.startswith("MD_DEVICE_") and k.endswith("_DEV"))


def decide(name, level, members, running, examined, signatures, holders, allow, chunk_kb, metadata, usage=None):
    """Pure decision. Returns ``(action, argv, info)``; raises MdError with a message to refuse.

    running:    {md_dev: detail dict} of active arrays (mdadm --detail --export)
    examined:   {member: examine dict} (mdadm --examine --export; {} when no superblock)
    signatures: {member: blkid -p export dict}
    holders:    {member: [holder names]}
    usage:      {member: blockdev ``in_use`` dict} (mounts through partitions/holders, system disk);
                a member on the system disk, or mounted other than through this array, is refused
                whatever ``allow`` says.
    """
    want = sorted(members)
    _refuse_untouchable(name, want, usage or {}, running)
    device = "/dev/md/%s" % name
    decision = _decide_running(name, level, want, running, device)
    if decision is not None:
        return decision
    # Not running: do the members carry this array's superblock?
    ours = {m: e for m, e in examined.items() if e.get("MD_UUID") and name_matches(e.get("MD_NAME"), name)}
    if ours:
        return _decide_assemble(want, ours, holders, device)
    _refuse_foreign(want, examined, signatures, holders, allow, device)
    return "create", _create_argv(name, level, want, chunk_kb, metadata, device), {}


def _decide_running(name, level, want, running, device):
    """Step 1: the first running array with this name decides (nothing to do, or refuse); None when none runs."""
    for md_dev, det in sorted(running.items()):
        if name_matches(det.get("MD_NAME"), name):
            return _check_running(level, want, md_dev, det, device)
    return None


def _check_running(level, want, md_dev, det, device):
    """A running array with this name: ``("none", [], info)`` when it has the level and (maybe degraded)
    members asked for; MdError for any other level or member set (an existing array is never changed)."""
    have = detail_members(det)
    if det.get("MD_LEVEL") != LEVEL_NAMES[level]:
        raise MdError("array %s (%s) is running as %s, wanted %s; not changing an existing array"
                      % (device, md_dev, det.get("MD_LEVEL"), LEVEL_NAMES[level]))
    if sorted(have) != want:
        missing = [m for m in want if m not in have]
        extra = [m for m in have if m not in want]
        if extra or not have or len(missing) == len(want):
            raise MdError("array %s (%s) is running with members %s, wanted %s; not changing an existing "
                          "array (grow or replace members by hand)" % (device, md_dev, ", ".join(have),
                                                                       ", ".join(want)))
        return "none", [], {"md_device": md_dev, "uuid": det.get("MD_UUID"),
                            "warning": "array %s is degraded: %s missing" % (device, ", ".join(missing))}
    return "none", [], {"md_device": md_dev, "uuid": det.get("MD_UUID")}


def _decide_assemble(want, ours, holders, device):
    """Step 2: members carry this array's superblock (``ours``) but it is not running: assemble it when
    every member carries the one UUID and none is held; MdError otherwise (never re-created)."""
    uuids = sorted(set(e["MD_UUID"] for e in ours.values()))
    blank = [m for m in want if m not in ours]
    if len(uuids) > 1:
        raise MdError("members of %s carry different array UUIDs (%s); assemble or clean them by hand"
                      % (device, ", ".join(uuids)))
    if blank:
        raise MdError("only some members carry the superblock of %s (UUID %s); %s do not. Not assembling "
                      "or re-creating; inspect with mdadm --examine" % (device, uuids[0], ", ".join(blank)))
    for m in want:
        if holders.get(m):
            raise MdError("%s is held by %s (an inactive or partly assembled array?); run mdadm --stop on "
                          "it first" % (m, ", ".join(holders[m])))
    return "assemble", ["mdadm", "--assemble", device, "--uuid=%s" % uuids[0]] + want, {"uuid": uuids[0]}


def _member_problem(m, examined, signatures, holders, allow):
    """Why member ``m`` may not be overwritten by a create (holders, a foreign md superblock, a partition
    table, another signature), or None. Holders count even for a member listed in ``allow``."""
    if holders.get(m):
        return "%s is held by %s" % (m, ", ".join(holders[m]))
    if m in allow:
        return None
    e = examined.get(m) or {}
    s = signatures.get(m) or {}
    if e.get("MD_UUID"):
        return "%s is a member of another md array %s (UUID %s)" % (m, e.get("MD_NAME"), e["MD_UUID"])
    if s.get("PTTYPE"):
        return "%s has a %s partition table" % (m, s["PTTYPE"])
    if s.get("TYPE"):
        return "%s carries a %s signature%s" % (m, s["TYPE"], " (label %s)" % s["LABEL"] if s.get("LABEL") else "")
    return None


def _refuse_foreign(want, examined, signatures, holders, allow, device):
    """Step 3, before a create: MdError naming every member that is not blank (or allowed)."""
    problems = [p for p in (_member_problem(m, examined, signatures, holders, allow) for m in want) if p]
    if problems:
        raise MdError("refusing to create %s: %s. Nothing was changed." % (device, "; ".join(problems)))


def _create_argv(name, level, want, chunk_kb, metadata, device):
    """The mdadm --create command over the sorted members (no chunk for RAID1)."""
    argv = ["mdadm", "--create", device, "--run", "--assume-clean", "--metadata=%s" % metadata,
            "--level=%d" % level, "--raid-devices=%d" % len(want), "--name=%s" % name]
    if level != 1:
        argv.append("--chunk=%d" % chunk_kb)
    return argv + want


def _refuse_untouchable(name, want, usage, running):
    ours = set()
    for md_dev, det in running.items():
        if name_matches(det.get("MD_NAME"), name):
            ours.add(md_dev.rsplit("/", 1)[-1])
    problems = []
    for m in want:
        use = usage.get(m) or {}
        if use.get("system"):
            problems.append("%s is the system disk (%s)" % (m, ", ".join(use.get("mounted") or ["/"])))
        elif use.get("mounted") and not (set(use.get("holders") or []) & ours):
            problems.append("%s is mounted at %s" % (m, ", ".join(use["mounted"])))
    if problems:
        raise MdError("refusing to touch /dev/md/%s: %s. Nothing was changed." % (name, "; ".join(problems)))


def bounded_run(module, argv, timeout):
    """(rc, out, err) of ``argv`` (its program found as module.get_bin_path finds it, /sbin too)
    within ``timeout`` seconds and OUTPUT_LIMIT bytes: a Result, whose ``problem`` names the limit."""
    argv = [module.get_bin_path(argv[0]) or argv[0]] + list(argv[1:])
    return run_bounded(argv, timeout=timeout, output_limit=OUTPUT_LIMIT)


class Runner:
    def __init__(self, module):
        self.module = module

    def run(self, argv, check_rc=False, timeout=None):
        """``argv`` bounded (READ_TIMEOUT_S unless ``timeout``); with ``check_rc`` a non-zero exit
        raises MdError. A command stopped at its limit (or not started) always raises MdError."""
        res = bounded_run(self.module, argv, READ_TIMEOUT_S if timeout is None else timeout)
        rc, out, err = res[0], res[1], res[2]
        if problem(res):
            raise MdError("%s; cannot tell what the disks hold, or whether it was done. Look at the members "
                          "(mdadm --examine, dmesg) before running it again" % problem(res))
        if check_rc and rc != 0:
            raise MdError("%s failed (rc=%d): %s" % (" ".join(argv), rc, (err or out).strip()))
        return rc, out, err

    def running_arrays(self, reader):
        arrays = {}
        for dev in listdir(reader.block):
            if not re.match(r"^md\d+$", dev):
                continue
            rc, out, _err = self.run(["mdadm", "--detail", "--export", "/dev/" + dev])
            if rc == 0:
                arrays["/dev/" + dev] = parse_export(out)
        return arrays

    def examine(self, dev):
        rc, out, _err = self.run(["mdadm", "--examine", "--export", dev])
        return parse_export(out) if rc == 0 else {}

    def blkid(self, dev):
        """blkid -p of a member; {} only for "nothing found" (exit 2, silent). Exit 2 with an error
        ("Operation not permitted") or any other failure refuses: unknown is not blank."""
        rc, out, err = self.run(["blkid", "-p", "-o", "export", dev])
        if rc == 0:
            return parse_export(out)
        if rc == 2 and not (err or "").strip():
            return {}
        raise MdError("blkid -p %s failed (rc=%d): %s; cannot tell whether it is blank. Nothing was changed."
                      % (dev, rc, (err or out or "").strip()[:200]))


def conf_line(device, uuid, name, metadata):
    # UUID only: the name in the superblock carries the homehost, which may differ after a rename.
    return "ARRAY %s metadata=%s UUID=%s" % (device, metadata, uuid) if uuid else None


def _resolve_members(module, name, devices, result):
    """Member paths with links resolved; fails when one does not exist or one is listed twice."""
    members, missing = [], []
    for dev in devices:
        real = os.path.realpath(dev)
        if not os.path.exists(real):
            missing.append(dev)
        members.append(real)
    if missing:
        module.fail_json(msg="md_array %s: member devices do not exist: %s" % (name, ", ".join(missing)), **result)
    if len(set(members)) != len(members):
        module.fail_json(msg="md_array %s: a device is listed twice: %s" % (name, ", ".join(devices)), **result)
    return members


def _read_state(runner, members):
    """What decide() needs, read only: running arrays, superblocks, signatures, usage and holders."""
    reader = BlockDevices(ROOT)
    running = runner.running_arrays(reader)
    examined = dict((m, runner.examine(m)) for m in members)
    signatures = dict((m, runner.blkid(m)) for m in members)
    usage = dict((m, reader.usage(os.path.basename(m))) for m in members)
    holders = dict((m, sorted(usage[m]["holders"])) for m in members)
    return running, examined, signatures, holders, usage


def _read_and_decide(module, runner, members, allow, result):
    """Read the state and decide; a refusal (MdError) fails the module with nothing changed."""
    p = module.params
    name = p["name"]
    try:
        running, examined, signatures, holders, usage = _read_state(runner, members)
        action, argv, info = decide(name, p["level"], members, running, examined, signatures, holders, allow,
                                    p["chunk_kb"], p["metadata"], usage=usage)
    except MdError as e:
        module.fail_json(msg="md_array %s: %s" % (name, e), **result)
    return action, argv, info


def _exit_unless_acting(module, action, argv, info, result):
    """Put the decision in the result; exit here when there is nothing to do, or in check mode."""
    name, metadata = module.params["name"], module.params["metadata"]
    result.update(action=action, argv=argv, md_device=info.get("md_device"), uuid=info.get("uuid"))
    if info.get("warning"):
        module.warn(info["warning"])
    if action == "none":
        result["conf_line"] = conf_line(result["device"], result["uuid"], name, metadata)
        module.exit_json(**result)
    result["changed"] = True
    if module.check_mode:
        result["conf_line"] = conf_line(result["device"], result["uuid"] or "<assigned-at-creation>", name,
                                        metadata)
        module.exit_json(**result)


def _act(module, runner, action, argv, members, allow, result):
    """Outside check mode only: wipe the allowed members (create), run argv, settle udev and return the
    array's ``mdadm --detail --export``; a failing command fails the module."""
    try:
        if action == "create":
            for m in members:
                if m in allow:
                    runner.run(["wipefs", "--all", m], check_rc=True, timeout=ACT_TIMEOUT_S)
        runner.run(argv, check_rc=True, timeout=ACT_TIMEOUT_S)
        if module.get_bin_path("udevadm"):
            runner.run(["udevadm", "settle", "--timeout=30"])
        rc, out, err = runner.run(["mdadm", "--detail", "--export", result["device"]], check_rc=True)
    except MdError as e:
        module.fail_json(msg="md_array %s: %s" % (module.params["name"], e), **result)
    return parse_export(out)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            level=dict(type="int", required=True, choices=[0, 1, 5, 6, 10]),
            devices=dict(type="list", elements="path", required=True),
            chunk_kb=dict(type="int", default=512),
            metadata=dict(type="str", default="1.2"),
            allow_signatures=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    name = p["name"]
    result = dict(changed=False, action="none", argv=[], device="/dev/md/%s" % name, md_device=None,
                  uuid=None, conf_line=None, members=[])
    if module.get_bin_path("mdadm") is None:
        module.fail_json(msg="mdadm is not installed on %s; install the mdadm package" % name, **result)
    runner = Runner(module)
    members = _resolve_members(module, name, p["devices"], result)
    result["members"] = members
    allow = set(os.path.realpath(a) for a in p["allow_signatures"])
    # Decide first; act only when there is something to do and not in check mode.
    action, argv, info = _read_and_decide(module, runner, members, allow, result)
    _exit_unless_acting(module, action, argv, info, result)
    det = _act(module, runner, action, argv, members, allow, result)
    result["uuid"] = det.get("MD_UUID")
    result["md_device"] = os.path.realpath(result["device"])
    result["conf_line"] = conf_line(result["device"], result["uuid"], name, p["metadata"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
