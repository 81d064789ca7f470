# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Storage-tier planning: which disks become the hot (NVMe) and cold (HDD) tiers, and how.

Pure functions over ``dlrack_hw.disks``-shaped dicts; nothing here touches a device. The module
``dlrack.node.storage_plan`` probes the target and calls :func:`plan_storage`; the role then acts
on the returned plan with ``dlrack.node.md_array``, ``community.general.filesystem`` and
``ansible.posix.mount``.

A disk dict is a ``dlrack_hw.disks`` entry (``name``, ``by_id``, ``kind``, ``serial``, ``in_use``
...) plus optional keys filled by the probe:

``path``        the device node (``/dev/nvme0n1``)
``exists``      False for a requested device that is not there
``by_id_all``   every ``/dev/disk/by-id`` link of the device
``wwn``         the WWN (``0x5000c500a1b2c3d4``) when known
``probe``       low-level signature of the whole device: ``{type, label, uuid, pttype}``
                (``blkid -p``); for an md member ``label`` is the array name (``host:name``)
                and ``uuid`` the array UUID.

Safety rules (``storage_tiers_safe_mode``): a device is *free* when it has no mounts, holders,
partitions or signatures and is not the system disk. A device carrying exactly what this
collection wrote for the same tier (an md member of ``dlrack-<tier>``, or an XFS labelled
``dlrack-<tier>``) is *ours*: re-runs and interrupted runs continue with it. Anything else is
*in use* and refused, per device, with the stable id and the fix. The system disk and mounted
devices are refused even with safe mode off.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

TIERS = ("hot", "cold")
HOT_LAYOUTS = ("raid0", "raid10", "jbod")
COLD_LEVELS = ("raid6", "raid10", "raid5", "raid1", "single")
# Fewest members each layout accepts. raid10 is held to 4 (two mirrored stripes): mdadm would
# build a 2- or 3-device "raid10" but that is a mirror, not what the name promises.
MIN_DEVICES = {"raid0": 2, "raid1": 2, "raid5": 3, "raid6": 4, "raid10": 4, "single": 1, "jbod": 1}
MD_LEVELS = {"raid0": 0, "raid1": 1, "raid5": 5, "raid6": 6, "raid10": 10}
SYSTEM_MOUNTS = ("/", "/boot", "/boot/efi", "/usr", "/var", "[SWAP]")
XFS_LABEL_MAX = 12
_BY_ID = "/dev/disk/by-id/"
_KERNEL_NAME = re.compile(r"^/dev/(sd[a-z]+|hd[a-z]+|vd[a-z]+|xvd[a-z]+|nvme\d+n\d+|nvme\d+c\d+n\d+|md\d+|dm-\d+|mmcblk\d+)$")


class StoragePlanError(ValueError):
    """One or more problems with the requested storage layout; ``messages`` lists them all."""

    def __init__(self, messages):
        self.messages = list(messages)
        ValueError.__init__(self, "\n".join(self.messages))


def array_name(tier):
    return "dlrack-%s" % tier


def fs_label(tier, index=None):
    label = "dlrack-%s" % tier if index is None else "dlrack-%s%d" % (tier, index)
    if len(label) > XFS_LABEL_MAX:
        raise StoragePlanError(["XFS label %r is longer than %d characters" % (label, XFS_LABEL_MAX)])
    return label


def md_name_matches(label, name):
    """md stores the array name as ``homehost:name`` (or bare ``name``); compare the name part."""
    if not label:
        return False
    return label == name or label.rsplit(":", 1)[-1] == name


def data_disks(level, count):
    """Number of data-bearing members of an md array (the XFS stripe width in chunks)."""
    if level == "raid0":
        return count
    if level == "raid10":
        return count // 2
    if level == "raid5":
        return count - 1
    if level == "raid6":
        return count - 2
    return 1


def xfs_alignment(level, count, chunk_kb):
    """``{'su_kb': chunk, 'sw': data disks}`` for a striped md array, None when not striped."""
    if level not in ("raid0", "raid10", "raid5", "raid6") or count < 2:
        return None
    return {"su_kb": int(chunk_kb), "sw": data_disks(level, count)}


def mkfs_options(label, alignment):
    """The ``opts`` string for community.general.filesystem (mkfs.xfs)."""
    opts = ["-L", label]
    if alignment:
        opts += ["-d", "su=%dk,sw=%d" % (alignment["su_kb"], alignment["sw"])]
    return " ".join(opts)


def mount_options(base, device_timeout):
    """Mount options with ``noatime``, ``nofail`` and ``x-systemd.device-timeout`` always present.

    ``discard`` is dropped: TRIM runs from ``fstrim.timer`` instead of on every delete.
    """
    if isinstance(base, str):
        base = [o for o in base.split(",") if o]
    opts = [o for o in (base or []) if o != "discard" and not o.startswith("x-systemd.device-timeout=")
            and o not in ("defaults",)]
    for required in ("noatime", "nofail"):
        if required not in opts:
            opts.insert(0 if required == "noatime" else len(opts), required)
    if "atime" in opts or "relatime" in opts or "strictatime" in opts:
        opts = [o for o in opts if o not in ("atime", "relatime", "strictatime")]
    timeout = str(device_timeout)
    if not re.match(r"^\d+(ms|s|min)?$", timeout):
        raise StoragePlanError(["device timeout %r is not a systemd time span such as 30s" % timeout])
    opts.append("x-systemd.device-timeout=%s" % timeout)
    return ",".join(opts)


def stable_id(disk):
    """The name a person should use for this disk: its by-id link, else WWN, else serial."""
    if disk.get("by_id"):
        return disk["by_id"]
    for link in disk.get("by_id_all") or []:
        return link
    if disk.get("wwn"):
        return disk["wwn"]
    return disk.get("path") or "/dev/%s" % disk.get("name")


def _has_stable_id(disk):
    return bool(disk.get("by_id") or disk.get("by_id_all") or disk.get("wwn"))


def _aliases(disk):
    names = set()
    for key in ("by_id", "path", "wwn", "serial"):
        if disk.get(key):
            names.add(disk[key])
    if disk.get("name"):
        names.add("/dev/" + disk["name"])
    for link in [disk.get("by_id")] + list(disk.get("by_id_all") or []):
        if link:
            names.add(link)
            if link.startswith(_BY_ID):
                names.add(link[len(_BY_ID):])
    if disk.get("wwn"):
        names.add("wwn-" + disk["wwn"])
    return names


def find_disk(request, disks):
    """The disk a request string names (by-id link, bare by-id name, WWN, serial or path)."""
    hits = [d for d in disks if request in _aliases(d)]
    uniq = []
    for d in hits:
        if all(d is not u for u in uniq):
            uniq.append(d)
    return uniq


def is_kernel_name(request):
    """``/dev/sdb``, ``/dev/nvme0n1``: names that move between boots."""
    return bool(_KERNEL_NAME.match(request or ""))


def classify(disk, tier, mountpoint):
    """``(state, reasons)`` where state is ``free``, ``ours``, ``in_use`` or ``untouchable``.

    ``untouchable`` (system disk, mounted somewhere else) is refused even with safe mode off.
    """
    use = disk.get("in_use") or {}
    probe = disk.get("probe") or {}
    mounted = list(use.get("mounted") or [])
    holders = list(use.get("holders") or [])
    parts = list(use.get("partitions") or [])
    sigs = [s for s in (use.get("signatures") or []) if s]
    ptype, plabel = probe.get("type"), probe.get("label")
    if disk.get("kind") == "partition":
        return "untouchable", ["is a partition; storage tiers use whole disks"]
    if use.get("system") or any(m in SYSTEM_MOUNTS for m in mounted):
        return "untouchable", ["it is the system disk (%s)" % ", ".join(mounted or ["holds the root filesystem"])]
    other_tier = [t for t in TIERS if t != tier]
    # Ours: an md member of this tier's array (holders = the array itself), or this tier's XFS.
    if ptype == "linux_raid_member" and md_name_matches(plabel, array_name(tier)) and not parts \
            and not mounted:
        return "ours", ["member of this tier's md array %s" % plabel]
    if ptype == "xfs" and plabel and (plabel == fs_label(tier) or re.match(r"^dlrack-%s\d+$" % tier, plabel)) \
            and not parts and not holders:
        if mounted and mountpoint and not any(m == mountpoint or m.startswith(mountpoint.rstrip("/") + "/")
                                              for m in mounted):
            return "untouchable", ["it carries this tier's filesystem but is mounted at %s" % ", ".join(mounted)]
        return "ours", ["carries this tier's filesystem %s" % plabel]
    reasons = []
    if mounted:
        reasons.append("mounted at %s" % ", ".join(mounted))
    if holders:
        reasons.append("held by %s" % ", ".join(holders))
    if parts:
        reasons.append("has partitions %s" % ", ".join(parts))
    if probe.get("pttype"):
        reasons.append("has a %s partition table" % probe["pttype"])
    if ptype == "linux_raid_member":
        reasons.append("is a member of md array %s (UUID %s)" % (plabel or "?", probe.get("uuid") or "?"))
    elif ptype:
        what = "a %s filesystem" % ptype
        if plabel:
            what += " labelled %s" % plabel
        if plabel and any(plabel == fs_label(t) or plabel.startswith(fs_label(t)) for t in other_tier):
            what += " (the %s tier's)" % other_tier[0]
        reasons.append("carries %s" % what)
    elif ptype is None and sigs and not probe.get("pttype"):
        reasons.append("carries signatures %s" % ", ".join(sigs))
    if mounted:
        return "untouchable", reasons
    if reasons:
        return "in_use", reasons
    return "free", []


def _refusal(host, tier, sid, reasons, wipe_listed, safe_mode, state):
    head = "%s: storage_tiers_%s_devices: %s %s" % (host, tier, sid, "; ".join(reasons))
    if state == "untouchable":
        if any(r.startswith("it is the system disk") for r in reasons):
            return head + ". The system disk is never used for a storage tier; remove it from the list."
        if any(r.startswith("is a partition") for r in reasons):
            return head + ". Name the whole disk by stable id instead."
        return head + (". Unmount it (and remove it from /etc/fstab) first; then, to re-use it, add %s to "
                       "storage_tiers_wipe_allowed and set storage_tiers_safe_mode: false for that run." % sid)
    fix = []
    if not wipe_listed:
        fix.append("add %s to storage_tiers_wipe_allowed" % sid)
    if safe_mode:
        fix.append("set storage_tiers_safe_mode: false")
    return head + (". Nothing was changed. To erase it and use it anyway: %s for that run "
                   "(everything on it is lost)." % " and ".join(fix))


def _tier_config(config, tier):
    return {
        "devices": config.get("%s_devices" % tier, "auto"),
        "layout": config.get("%s_layout" % tier) if tier == "hot" else config.get("cold_level"),
        "chunk_kb": int(config.get("%s_chunk_kb" % tier, 512)),
        "mount": config.get("%s_mount" % tier),
        "enabled": config.get("%s_enabled" % tier, True),
    }


def plan_storage(disks, config):
    """Plan both tiers. Returns the plan dict; raises StoragePlanError listing every problem.

    ``config`` keys: ``hot_devices``/``cold_devices`` (``'auto'`` or a list of stable ids),
    ``hot_layout`` (raid0|raid10|jbod), ``cold_level`` (raid6|raid10|raid5|raid1|single),
    ``hot_chunk_kb``/``cold_chunk_kb``, ``hot_mount``/``cold_mount``, ``hot_enabled``/``cold_enabled``,
    ``wipe_allowed`` (stable ids), ``safe_mode`` (bool), ``mount_options`` (list),
    ``device_timeout`` ('30s'), ``host`` (for messages).
    """
    host = config.get("host") or "localhost"
    safe_mode = bool(config.get("safe_mode", True))
    wipe_allowed = list(config.get("wipe_allowed") or [])
    errors, warnings = [], []
    disks = [d for d in (disks or []) if isinstance(d, dict)]
    if config.get("hot_layout", "raid0") not in HOT_LAYOUTS:
        errors.append("%s: storage_tiers_hot_layout %r is not one of %s"
                      % (host, config.get("hot_layout"), ", ".join(HOT_LAYOUTS)))
    if config.get("cold_level", "raid6") not in COLD_LEVELS:
        errors.append("%s: storage_tiers_cold_level %r is not one of %s"
                      % (host, config.get("cold_level"), ", ".join(COLD_LEVELS)))
    if errors:
        raise StoragePlanError(errors)

    # Which wipe_allowed entries name which disk (by stable id only).
    wipe_disks = []
    for req in wipe_allowed:
        hits = find_disk(req, disks)
        if is_kernel_name(req):
            errors.append("%s: storage_tiers_wipe_allowed: %s is a kernel name that can change between "
                          "boots; name the disk by stable id (/dev/disk/by-id/..., WWN or serial)%s"
                          % (host, req, _suggest(hits)))
            continue
        wipe_disks.extend(hits)

    def wipe_listed(disk):
        return any(disk is w for w in wipe_disks)

    chosen = {}
    requested = {"hot": [], "cold": []}   # every resolved explicit device, whatever its state
    refused = {"hot": 0, "cold": 0}
    skipped = []
    for tier in TIERS:
        tc = _tier_config(config, tier)
        chosen[tier] = []
        if not tc["enabled"]:
            continue
        if tc["devices"] == "auto":
            want_kind = "nvme" if tier == "hot" else "hdd"
            for d in sorted(disks, key=stable_id):
                if d.get("kind") != want_kind or d.get("exists") is False:
                    continue
                if d.get("transport") in ("usb", "virtio"):
                    # USB disks are removable; virtio disks report rotational=1 whatever backs them.
                    skipped.append({"device": stable_id(d), "tier": tier,
                                    "reasons": ["%s disk, never auto-selected" % d["transport"]]})
                    continue
                state, reasons = classify(d, tier, tc["mount"])
                if state in ("free", "ours"):
                    chosen[tier].append((d, state))
                elif state == "in_use" and wipe_listed(d) and not safe_mode:
                    chosen[tier].append((d, "wipe"))
                else:
                    skipped.append({"device": stable_id(d), "tier": tier, "reasons": reasons})
            continue
        if isinstance(tc["devices"], str):
            errors.append("%s: storage_tiers_%s_devices must be 'auto' or a list of stable ids, got %r"
                          % (host, tier, tc["devices"]))
            continue
        seen = []
        refused[tier] = 0
        for req in tc["devices"]:
            hits = find_disk(req, disks)
            if len(hits) > 1:
                errors.append("%s: storage_tiers_%s_devices: %s matches %d disks (%s); use the full "
                              "/dev/disk/by-id link" % (host, tier, req, len(hits),
                                                        ", ".join(stable_id(h) for h in hits)))
                continue
            if not hits or hits[0].get("exists") is False:
                errors.append("%s: storage_tiers_%s_devices: %s does not exist on this host; check the id "
                              "with `ls -l /dev/disk/by-id/`" % (host, tier, req))
                continue
            d = hits[0]
            if is_kernel_name(req) and _has_stable_id(d):
                errors.append("%s: storage_tiers_%s_devices: %s is a kernel name that can change between "
                              "boots; use %s" % (host, tier, req, stable_id(d)))
                continue
            if not _has_stable_id(d):
                warnings.append("%s: storage_tiers_%s_devices: %s has no stable id (no /dev/disk/by-id link, "
                                "WWN or serial); using the path as given" % (host, tier, req))
            if any(d is s for s in seen):
                errors.append("%s: storage_tiers_%s_devices: %s is listed twice" % (host, tier, stable_id(d)))
                continue
            seen.append(d)
            requested[tier].append(d)
            if tier == "cold" and any(d is h for h in requested["hot"]):
                refused[tier] += 1
                continue   # reported once below as "listed in both"; classifying it adds only noise
            state, reasons = classify(d, tier, tc["mount"])
            if state in ("free", "ours"):
                chosen[tier].append((d, state))
            elif state == "in_use" and wipe_listed(d) and not safe_mode:
                warnings.append("%s: %s will be erased (%s): it is in storage_tiers_wipe_allowed and safe "
                                "mode is off" % (host, stable_id(d), "; ".join(reasons)))
                chosen[tier].append((d, "wipe"))
            else:
                refused[tier] += 1
                errors.append(_refusal(host, tier, stable_id(d), reasons, wipe_listed(d), safe_mode, state))

    # The same disk in both tiers (listed in both, or taken by auto for one and listed for the other).
    hot_all = requested["hot"] + [d for d, _s in chosen["hot"] if not any(d is r for r in requested["hot"])]
    cold_all = requested["cold"] + [d for d, _s in chosen["cold"] if not any(d is r for r in requested["cold"])]
    for d in hot_all:
        if any(d is c for c in cold_all):
            errors.append("%s: %s is listed in both storage_tiers_hot_devices and storage_tiers_cold_devices; "
                          "a disk belongs to one tier only" % (host, stable_id(d)))
    for tier in TIERS:
        tc = _tier_config(config, tier)
        n = len(chosen[tier])
        if not tc["enabled"] or n == 0 or refused[tier]:
            continue
        layout = tc["layout"]
        if n > 1 and MIN_DEVICES.get(layout, 1) > n:
            errors.append("%s: storage_tiers_%s %s needs at least %d devices, %d given (%s)"
                          % (host, "hot_layout" if tier == "hot" else "cold_level", layout,
                             MIN_DEVICES[layout], n, ", ".join(stable_id(d) for d, _s in chosen[tier])))
        if tier == "cold" and layout == "single" and n > 1:
            errors.append("%s: storage_tiers_cold_level single takes exactly one disk, %d given; choose "
                          "raid6, raid10, raid5 or raid1" % (host, n))
        if tier == "cold" and n == 1 and layout not in ("single",):
            errors.append("%s: storage_tiers_cold_level %s needs at least %d disks, 1 given (%s); use "
                          "storage_tiers_cold_level: single for one disk"
                          % (host, layout, MIN_DEVICES[layout], stable_id(chosen[tier][0][0])))
    if errors:
        raise StoragePlanError(errors)

    plan = {"hot": None, "cold": None, "wipe": [], "warnings": warnings, "skipped": skipped,
            "arrays": [], "filesystems": [], "dirs": []}
    for tier in TIERS:
        tc = _tier_config(config, tier)
        plan[tier] = _plan_tier(tier, tc, chosen[tier], config)
        plan["wipe"].extend(dev["path"] for dev in plan[tier]["devices"] if dev["state"] == "wipe")
        # Flat lists the role loops over (roles hold no logic, Jinja builds no structures).
        if plan[tier]["md"]:
            plan["arrays"].append(dict(plan[tier]["md"], tier=tier, wipe=[
                dev["path"] for dev in plan[tier]["devices"] if dev["state"] == "wipe"]))
        for fs in plan[tier]["filesystems"]:
            plan["filesystems"].append(dict(fs, tier=tier, wipe=fs["device"] in plan["wipe"],
                                            on_md=bool(plan[tier]["md"])))
        if plan[tier]["enabled"] and plan[tier]["layout"] != "jbod":
            for d in config.get("%s_dirs" % tier) or []:
                rel = str(d.get("path", "")).strip("/")
                if not rel or ".." in rel.split("/"):
                    raise StoragePlanError(["%s: storage_tiers_%s_dirs: path %r must be relative to the mount "
                                            "point, without '..'" % (host, tier, d.get("path"))])
                plan["dirs"].append({"path": "%s/%s" % (tc["mount"].rstrip("/"), rel), "tier": tier,
                                     "owner": d.get("owner", "root"), "group": d.get("group", "root"),
                                     "mode": str(d.get("mode", "0755"))})
        if not chosen[tier] and tc["enabled"]:
            warnings.append("%s: no device for the %s tier (%s)" % (
                host, tier, "none free" if tc["devices"] == "auto" else "empty list"))
    return plan


def _suggest(hits):
    return "; it is %s" % stable_id(hits[0]) if hits and _has_stable_id(hits[0]) else ""


def _plan_tier(tier, tc, chosen, config):
    timeout = config.get("device_timeout", "30s")
    opts = mount_options(config.get("mount_options") or ["noatime"], timeout)
    devices = [{"id": stable_id(d), "path": d.get("path") or "/dev/%s" % d["name"], "name": d.get("name"),
                "state": state} for d, state in chosen]
    out = {"tier": tier, "enabled": bool(tc["enabled"]) and bool(devices), "mount": tc["mount"],
           "devices": devices, "md": None, "filesystems": []}
    layout = tc["layout"]
    out["layout"] = layout if len(devices) > 1 else "single"
    if not devices:
        return out
    if len(devices) == 1:
        out["filesystems"].append({"device": devices[0]["path"], "label": fs_label(tier),
                                   "mkfs_opts": mkfs_options(fs_label(tier), None), "mount": tc["mount"],
                                   "mount_opts": opts, "alignment": None})
        return out
    if layout == "jbod":
        for i, dev in enumerate(devices):
            label = fs_label(tier, i)
            out["filesystems"].append({"device": dev["path"], "label": label,
                                       "mkfs_opts": mkfs_options(label, None),
                                       "mount": "%s/%d" % (tc["mount"].rstrip("/"), i),
                                       "mount_opts": opts, "alignment": None})
        return out
    name = array_name(tier)
    align = xfs_alignment(layout, len(devices), tc["chunk_kb"])
    out["md"] = {"name": name, "device": "/dev/md/%s" % name, "level": MD_LEVELS[layout],
                 "chunk_kb": tc["chunk_kb"] if layout != "raid1" else None,
                 "devices": [dev["path"] for dev in devices]}
    out["filesystems"].append({"device": out["md"]["device"], "label": fs_label(tier),
                               "mkfs_opts": mkfs_options(fs_label(tier), align), "mount": tc["mount"],
                               "mount_opts": opts, "alignment": align})
    return out
