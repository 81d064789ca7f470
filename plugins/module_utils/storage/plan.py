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

Options are defined once, in :data:`OPTIONS`: the module's argument_spec is generated from it and
a unit test holds the role's defaults, meta/argument_specs.yml, task and the module DOCUMENTATION to
it. Messages name an option as ``<var_prefix><option>``: the role passes its variable prefix, so
no role variable is spelled here.

Safety rules (option ``safe_mode``): a device is *free* when it has no mounts, holders,
partitions or signatures (:func:`blockdev.in_use_reasons`) and is not the system disk. A device carrying exactly what this
collection wrote for the same tier (an md member of ``dlrack-<tier>``, or an XFS labelled
``dlrack-<tier>``) is *ours*: re-runs and interrupted runs continue with it. Anything else is
*in use* and refused, per device, with the stable id and the fix. The system disk and mounted
devices are refused even with safe mode off.

Where a tier mounts (:func:`mount_point_problem`, :func:`check_mount_points`): an absolute path in
normal form, of the POSIX portable filename characters, never a system directory (:data:`SYSTEM_DIRS`,
nothing below :data:`SYSTEM_TREES`), not where a symbolic link resolves to one, not where something
else is mounted now or below it (the node's mountinfo, :func:`parse_mountinfo`), and the two tiers
apart (neither the same point nor one inside the other). Mount options and the device timeout go
into an fstab line: they are refused when they hold anything but option characters (a line break
would add a line of its own; ansible.posix.mount escapes only space, ``&`` and backslash).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import posixpath
import re

from ansible_collections.dlrack.node.plugins.module_utils.storage.blockdev import (
    disk_role, in_use_reasons, is_data_disk)

TIERS = ("hot", "cold")
HOT_LAYOUTS = ("raid0", "raid10", "jbod")
COLD_LEVELS = ("raid6", "raid10", "raid5", "raid1", "single")
# Fewest members each layout accepts. raid10 is held to 4 (two mirrored stripes): mdadm would
# build a 2- or 3-device "raid10" but that is a mirror, not what the name promises.
MIN_DEVICES = {"raid0": 2, "raid1": 2, "raid5": 3, "raid6": 4, "raid10": 4, "single": 1, "jbod": 1}
MD_LEVELS = {"raid0": 0, "raid1": 1, "raid5": 5, "raid6": 6, "raid10": 10}
XFS_LABEL_MAX = 12
_BY_ID = "/dev/disk/by-id/"
_KERNEL_NAME = re.compile(r"^/dev/(sd[a-z]+|hd[a-z]+|vd[a-z]+|xvd[a-z]+|nvme\d+n\d+|nvme\d+c\d+n\d+|md\d+|dm-\d+|mmcblk\d+)$")


# Never a tier's mount point: the directories the Filesystem Hierarchy Standard 3.0 requires in /
# (ch. 3, https://refspecs.linuxbase.org/FHS_3.0/fhs/ch03s02.html: bin boot dev etc lib media mnt
# opt run sbin srv tmp usr var, and home, root, lib<qual>), the kernel's own trees, and the /usr
# and /var directories that hold the system's programs, packages and logs.
SYSTEM_DIRS = frozenset([
    "/", "/bin", "/boot", "/boot/efi", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media",
    "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/local", "/var",
    "/var/cache", "/var/lib", "/var/log", "/var/mail", "/var/opt", "/var/spool", "/var/tmp"])
# ...and nothing below these: system files a mount would shadow, kernel and runtime trees (gone at
# the next boot) and temporary trees that systemd-tmpfiles cleans.
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
                "/sys", "/tmp", "/usr", "/var/tmp")
SUGGESTED_MOUNT = {"hot": "/data/hot", "cold": "/data/archive"}
# POSIX portable filename characters (letters, digits, '.', '_', '-') and '/'.
_MOUNT_POINT_CHARS = re.compile(r"[A-Za-z0-9._/-]+\Z")
# One mount option: name[=value] with the characters real options use (x-systemd.requires=/dev/..., uid=0,
# logbsize=256k, context=system_u:object_r:...); never whitespace, a line break, '#', quotes or '\\'.
_MOUNT_OPTION_CHARS = re.compile(r"[A-Za-z0-9._:=@/+-]+\Z")
_TIME_SPAN = re.compile(r"\d+(ms|s|min)?\Z")

_DIRS_HOT = [{"path": "datasets", "owner": "root", "group": "root", "mode": "0755"},
             {"path": "checkpoints", "owner": "root", "group": "root", "mode": "0755"},
             {"path": "scratch", "owner": "root", "group": "root", "mode": "1777"}]
_DIRS_COLD = [{"path": p, "owner": "root", "group": "root", "mode": "0755"}
              for p in ("datasets", "weights", "logs", "results")]

# The planner's options, defined once. The module's argument_spec is built from this
# (argument_spec()); tests hold the role's defaults and meta/argument_specs.yml (prefix + name),
# its task and the module DOCUMENTATION to it.
OPTIONS = {
    "hot_devices": {"type": "raw", "default": "auto"},
    "cold_devices": {"type": "raw", "default": "auto"},
    "hot_enabled": {"type": "bool", "default": True},
    "cold_enabled": {"type": "bool", "default": True},
    "hot_layout": {"type": "str", "default": "raid0", "choices": list(HOT_LAYOUTS)},
    "hot_chunk_kb": {"type": "int", "default": 512},
    "hot_mount": {"type": "path", "default": "/mnt/hot"},
    "cold_level": {"type": "str", "default": "raid6", "choices": list(COLD_LEVELS)},
    "cold_chunk_kb": {"type": "int", "default": 512},
    "cold_mount": {"type": "path", "default": "/mnt/archive"},
    "safe_mode": {"type": "bool", "default": True},
    "wipe_allowed": {"type": "list", "elements": "str", "default": []},
    "mount_options": {"type": "list", "elements": "str", "default": ["noatime"]},
    "device_timeout": {"type": "str", "default": "30s"},
    "hot_dirs": {"type": "list", "elements": "dict", "default": _DIRS_HOT},
    "cold_dirs": {"type": "list", "elements": "dict", "default": _DIRS_COLD},
}


def argument_spec():
    """AnsibleModule argument_spec of the planner options (fresh copies of mutable defaults)."""
    spec = {}
    for name, opt in OPTIONS.items():
        spec[name] = dict((k, copy.deepcopy(v)) for k, v in opt.items())
    return spec


def with_defaults(config):
    """``config`` with every missing option set to its default."""
    out = dict((name, copy.deepcopy(opt["default"])) for name, opt in OPTIONS.items())
    out.update(dict((k, v) for k, v in (config or {}).items() if v is not None or k not in OPTIONS))
    return out


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
        base = base.split(",")
    bad = mount_options_problem(base) or device_timeout_problem(device_timeout)
    if bad:
        raise StoragePlanError([bad])
    base = [p for o in (base or []) for p in str(o).split(",") if p]
    opts = [o for o in base if o != "discard" and not o.startswith("x-systemd.device-timeout=")
            and o not in ("defaults",)]
    for required in ("noatime", "nofail"):
        if required not in opts:
            opts.insert(0 if required == "noatime" else len(opts), required)
    if "atime" in opts or "relatime" in opts or "strictatime" in opts:
        opts = [o for o in opts if o not in ("atime", "relatime", "strictatime")]
    opts.append("x-systemd.device-timeout=%s" % device_timeout)
    return ",".join(opts)


def quoted(value):
    """``value`` in double quotes with every control and non-ASCII character escaped (JSON)."""
    return json.dumps(value if isinstance(value, str) else str(value))


def _bad_char(value, allowed):
    """What the first character of ``value`` outside ``allowed`` is, in words."""
    for ch in value:
        if allowed.match(ch):
            continue
        if ch in "\r\n\x0b\x0c\x85\u2028\u2029":
            return "a line break"
        if ch.isspace():
            return "whitespace"
        if ord(ch) < 32 or 127 <= ord(ch) < 160:
            return "a control character %s" % quoted(ch)
        return "the character %s" % quoted(ch)
    return None


def mount_options_problem(options):
    """Why ``options`` (a list, or one comma-separated string) cannot go into an fstab line; None when fine."""
    for opt in ([options] if isinstance(options, str) else options or []):
        text = str(opt)
        for piece in text.split(","):
            what = _bad_char(piece, _MOUNT_OPTION_CHARS)
            if what:
                return ("%s contains %s; a mount option may contain only letters, digits and . _ : = @ / + - "
                        "(one option per list item)" % (quoted(text), what))
    return None


def device_timeout_problem(timeout):
    if not _TIME_SPAN.match(str(timeout)):
        return "%s is not a systemd time span such as 30s" % quoted(str(timeout))
    return None


def system_dir(path):
    """The system directory ``path`` is or lies in (``/etc`` for ``/etc/x``), None when it is neither."""
    if path in SYSTEM_DIRS:
        return path
    for top in SYSTEM_TREES:
        if path.startswith(top + "/"):
            return top
    return None


def _system_words(path):
    top = system_dir(path)
    if top is None:
        return None
    return "a system directory" if top == path else "inside the system directory %s" % top


def mount_point_problem(path, tier):
    """Why ``path`` cannot be ``tier``'s mount point by its spelling alone; None when it can."""
    suggestion = "choose a dedicated path such as %s" % SUGGESTED_MOUNT[tier]
    if not isinstance(path, str) or not path:
        return "%s is not a path; %s" % (quoted(path if path is not None else ""), suggestion)
    what = _bad_char(path, _MOUNT_POINT_CHARS)
    if what:
        return ("%s contains %s; a mount point may contain only letters, digits, '.', '_', '-' and '/' (the POSIX "
                "portable filename characters); %s" % (quoted(path), what, suggestion))
    if not path.startswith("/"):
        return "%s is a relative path; a mount point is absolute, e.g. %s" % (quoted(path), SUGGESTED_MOUNT[tier])
    if ".." in path.split("/"):
        return "%s contains '..'; write the directory itself, e.g. %s" % (quoted(path), SUGGESTED_MOUNT[tier])
    normal = "/" + posixpath.normpath(path).lstrip("/")
    if normal != path:
        return "%s is not in normal form; write it as %s" % (quoted(path), normal)
    words = _system_words(path)
    if words:
        return "%s is %s; %s" % (quoted(path), words, suggestion)
    return None


def parse_mountinfo(text):
    """``[{target, source, fstype}]`` of ``/proc/self/mountinfo`` (proc_pid_mountinfo(5): field 5 is
    the mount point, after the ``-`` separator come the filesystem type and the source; space, tab,
    line feed and backslash are written as octal escapes ``\\040`` ...)."""
    out = []
    for line in (text or "").splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(" "), tail.split(" ")
        if not sep or len(fields) < 5 or not fields[4].startswith("/"):
            continue
        out.append({"target": _unescape(fields[4]), "fstype": _unescape(rest[0]),
                    "source": _unescape(rest[1]) if len(rest) > 1 else ""})
    return out


def _unescape(field):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _below(path, top):
    return path.startswith(top.rstrip("/") + "/") and path != top


def stable_id(disk):
    """The name a person should use for this disk: its by-id link, else WWN, else its path."""
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
    names = set(disk.get("aliases") or [])
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
    """The disks a request string names (by-id link, bare by-id name, WWN, serial or path)."""
    uniq = []
    for d in disks:
        if request in _aliases(d) and all(d is not u for u in uniq):
            uniq.append(d)
    return uniq


def is_kernel_name(request):
    """``/dev/sdb``, ``/dev/nvme0n1``: names that move between boots."""
    return bool(_KERNEL_NAME.match(request or ""))


def _within(mounts, mountpoint):
    top = (mountpoint or "").rstrip("/")
    return bool(top) and all(m == top or m.startswith(top + "/") for m in mounts)


def _is_tier_label(label, tier):
    return bool(label) and (label == fs_label(tier) or bool(re.match(r"^dlrack-%s\d+$" % tier, label)))


def _ours(disk, tier, mountpoint):
    """``(state, reasons)`` when the disk carries exactly what this collection wrote for ``tier``."""
    use, probe = disk.get("in_use") or {}, disk.get("probe") or {}
    mounted = list(use.get("mounted") or [])
    ptype, plabel = probe.get("type"), probe.get("label")
    if use.get("partitions") or probe.get("pttype"):
        return None
    if ptype == "linux_raid_member" and md_name_matches(plabel, array_name(tier)):
        if not mounted or _within(mounted, mountpoint):   # mounted through the array, at this tier
            return "ours", ["member of this tier's md array %s" % plabel]
        return None
    if ptype == "xfs" and _is_tier_label(plabel, tier) and not use.get("holders"):
        if mounted and not _within(mounted, mountpoint):
            return "untouchable", ["it carries this tier's filesystem but is mounted at %s" % ", ".join(mounted)]
        return "ours", ["carries this tier's filesystem %s" % plabel]
    return None


def classify(disk, tier, mountpoint):
    """``(state, reasons)`` where state is ``free``, ``ours``, ``in_use`` or ``untouchable``.

    ``untouchable`` (a partition, the system disk, read-only, mounted somewhere else) is refused
    even with safe mode off.
    """
    use = disk.get("in_use") or {}
    if disk.get("kind") == "partition":
        return "untouchable", ["is a partition; storage tiers use whole disks"]
    if use.get("system"):
        return "untouchable", in_use_reasons(disk)[:1]
    if disk.get("read_only"):
        return "untouchable", ["is read-only"]
    ours = _ours(disk, tier, mountpoint)
    if ours:
        return ours
    reasons = in_use_reasons(disk)
    label = (disk.get("probe") or {}).get("label")
    for other in TIERS:
        if other != tier and (disk.get("probe") or {}).get("type") == "xfs" and _is_tier_label(label, other):
            reasons = [r + " (the %s tier's)" % other if r.startswith("carries a xfs") else r for r in reasons]
    if use.get("mounted"):
        return "untouchable", reasons
    if reasons:
        return "in_use", reasons
    return "free", []


class _Run(object):
    """One planning run: the options, what the user named, and every message found so far."""

    def __init__(self, disks, config, node=None):
        self.config = with_defaults(config)
        self.node = node
        self.host = self.config.get("host") or "localhost"
        self.prefix = self.config.get("var_prefix") or ""
        self.safe_mode = bool(self.config["safe_mode"])
        self.disks = [d for d in (disks or []) if isinstance(d, dict)]
        self.errors, self.warnings, self.skipped = [], [], []
        self.wipe_disks = []
        self.chosen = dict((t, []) for t in TIERS)       # [(disk, state)]
        self.requested = dict((t, []) for t in TIERS)    # [(disk, request string)]
        self.refused = dict((t, 0) for t in TIERS)

    def opt(self, name):
        return self.prefix + name

    def err(self, option, text, *args):
        self.errors.append("%s: %s: %s" % (self.host, self.opt(option), text % args))

    def tier(self, tier):
        c = self.config
        return {"devices": c["%s_devices" % tier], "layout": c["hot_layout"] if tier == "hot" else c["cold_level"],
                "layout_option": "hot_layout" if tier == "hot" else "cold_level",
                "chunk_kb": int(c["%s_chunk_kb" % tier]), "mount": c["%s_mount" % tier],
                "enabled": bool(c["%s_enabled" % tier]), "dirs": c["%s_dirs" % tier] or []}

    def wipe_listed(self, disk):
        return any(disk is w for w in self.wipe_disks)


def _check_layouts(run):
    for option, allowed in (("hot_layout", HOT_LAYOUTS), ("cold_level", COLD_LEVELS)):
        if run.config[option] not in allowed:
            run.err(option, "%r is not one of %s", run.config[option], ", ".join(allowed))
    for tier in TIERS:
        devices = run.config["%s_devices" % tier]
        if devices != "auto" and not isinstance(devices, list):
            run.err("%s_devices" % tier, "must be 'auto' or a list of stable ids, got %r", devices)


def _check_fstab_fields(run):
    """Mount points and options that cannot be written into an fstab line, or that point at the system."""
    for tier in TIERS:
        tc = run.tier(tier)
        if tc["enabled"]:
            bad = mount_point_problem(tc["mount"], tier)
            if bad:
                run.err("%s_mount" % tier, "%s", bad)
    bad = mount_options_problem(run.config["mount_options"])
    if bad:
        run.err("mount_options", "%s", bad)
    bad = device_timeout_problem(run.config["device_timeout"])
    if bad:
        run.err("device_timeout", "%s", bad)


def _resolved(run, path):
    """Where ``path`` leads on the node (symbolic links followed; None: a loop of links), when the module looked."""
    real = (run.node or {}).get("realpath") or {}
    return real[path] if path in real else path


def _own_mounts(run, tier):
    """Mount points of this tier's own devices (a re-run finds its filesystem mounted there)."""
    own = set()
    for d in [c for c, _s in run.chosen[tier]] + [r for r, _q in run.requested[tier]]:
        own.update((d.get("in_use") or {}).get("mounted") or [])
    return own


def _check_mount_points(run):
    """What the spelling cannot show: a link to a system directory, something mounted there or
    below it now (the node's mountinfo), and the two tiers on one point or one inside the other."""
    places = {}
    for tier in TIERS:
        tc = run.tier(tier)
        if not tc["enabled"] or mount_point_problem(tc["mount"], tier):
            continue
        option, path = "%s_mount" % tier, tc["mount"]
        real = _resolved(run, path)
        if real is None:
            run.err(option, "%s is a loop of symbolic links; choose a dedicated path such as %s", quoted(path),
                    SUGGESTED_MOUNT[tier])
            continue
        if real != path and _system_words(real):
            run.err(option, "%s resolves to %s (a symbolic link), %s; choose a dedicated path such as %s",
                    quoted(path), quoted(real), _system_words(real), SUGGESTED_MOUNT[tier])
            continue
        places[tier] = real
        if run.node is not None and run.chosen[tier]:
            _check_mounted_there(run, tier, option, path, real)
    if len(places) == 2:
        hot, cold = places["hot"], places["cold"]
        if hot == cold:
            run.err("cold_mount", "%s is also %s; each tier needs a mount point of its own (e.g. %s and %s)",
                    quoted(run.tier("cold")["mount"]), run.opt("hot_mount"), SUGGESTED_MOUNT["hot"], SUGGESTED_MOUNT["cold"])
        for inner, outer in (("cold", "hot"), ("hot", "cold")):
            if _below(places[inner], places[outer]):
                run.err("%s_mount" % inner, "%s is inside %s %s; the tiers' mount points must not contain each other "
                        "(e.g. %s and %s)", quoted(run.tier(inner)["mount"]), run.opt("%s_mount" % outer),
                        quoted(run.tier(outer)["mount"]), SUGGESTED_MOUNT["hot"], SUGGESTED_MOUNT["cold"])


def _check_mounted_there(run, tier, option, path, real):
    mounts = run.node.get("mounts")
    if mounts is None:
        run.err(option, "the node's mount table (/proc/self/mountinfo) could not be read completely (%s); nothing "
                "is mounted without it", run.node.get("mounts_error") or "unreadable")
        return
    own = _own_mounts(run, tier)
    here = [m for m in mounts if m["target"] == real and m["target"] not in own]
    below = [m for m in mounts if _below(m["target"], real) and m["target"] not in own]
    shown = quoted(path) if real == path else "%s (%s)" % (quoted(path), quoted(real))
    if here:
        run.err(option, "%s is the mount point of %s (%s) now; a tier needs a mount point of its own: choose a "
                "dedicated path such as %s", shown, quoted(here[-1]["source"]), quoted(here[-1]["fstype"]),
                SUGGESTED_MOUNT[tier])
    elif below:
        names = ", ".join(quoted(m["target"]) for m in below[:3]) + (" and %d more" % (len(below) - 3) if len(below) > 3 else "")
        run.err(option, "%s holds the mount point%s %s; a tier mounted there would hide %s: choose a dedicated path "
                "such as %s", shown, "s" if len(below) > 1 else "", names, "them" if len(below) > 1 else "it",
                SUGGESTED_MOUNT[tier])


def _resolve_wipe_allowed(run):
    """Which wipe_allowed entries name which disk (by stable id only)."""
    for req in run.config["wipe_allowed"] or []:
        hits = find_disk(req, run.disks)
        if is_kernel_name(req):
            run.err("wipe_allowed", "%s is a kernel name that can change between boots; name the disk by stable id "
                    "(/dev/disk/by-id/..., WWN or serial)%s", req, _suggest(hits))
            continue
        run.wipe_disks.extend(hits)


def _select_auto(run, tier, tc):
    want_kind = "nvme" if tier == "hot" else "hdd"
    for d in sorted(run.disks, key=stable_id):
        if d.get("kind") != want_kind or d.get("exists") is False:
            continue
        state, reasons = classify(d, tier, tc["mount"])
        if state != "untouchable" and (d.get("transport") in ("usb", "virtio") or not is_data_disk(d)):
            # USB disks come and go; virtio says rotational whatever backs it; read-only, small and
            # removable devices are not data disks (blockdev.disk_role).
            what = d["transport"] if d.get("transport") in ("usb", "virtio") else d.get("role") or disk_role(d)
            run.skipped.append({"device": stable_id(d), "tier": tier,
                                "reasons": ["%s disk, never auto-selected" % what.replace("_", "-")]})
            continue
        if state in ("free", "ours"):
            run.chosen[tier].append((d, state))
        elif state == "in_use" and run.wipe_listed(d) and not run.safe_mode:
            run.chosen[tier].append((d, "wipe"))
        else:
            run.skipped.append({"device": stable_id(d), "tier": tier, "reasons": reasons})


def _lookup(run, tier, req):
    """The one disk ``req`` names, or None after recording why not."""
    option = "%s_devices" % tier
    hits = find_disk(req, run.disks)
    if len(hits) > 1:
        run.err(option, "%s matches %d disks (%s); use the full /dev/disk/by-id link", req, len(hits),
                ", ".join(stable_id(h) for h in hits))
        return None
    if not hits or hits[0].get("exists") is False:
        run.err(option, "%s does not exist on this host; check the id with `ls -l /dev/disk/by-id/`", req)
        return None
    d = hits[0]
    if is_kernel_name(req) and _has_stable_id(d):
        run.err(option, "%s is a kernel name that can change between boots; use %s", req, stable_id(d))
        return None
    if not _has_stable_id(d):
        run.warnings.append("%s: %s: %s has no stable id (no /dev/disk/by-id link, WWN or serial); using the path "
                            "as given" % (run.host, run.opt(option), req))
    if any(d is s for s, _r in run.requested[tier]):
        run.err(option, "%s is listed twice", stable_id(d))
        return None
    return d


def _select_explicit(run, tier, tc):
    for req in tc["devices"]:
        req = str(req)
        d = _lookup(run, tier, req)
        if d is None:
            continue
        run.requested[tier].append((d, req))
        if tier == "cold" and any(d is h for h, _r in run.requested["hot"]):
            run.refused[tier] += 1
            continue   # reported once as "listed in both"; classifying it adds only noise
        state, reasons = classify(d, tier, tc["mount"])
        sid = req if not is_kernel_name(req) else stable_id(d)   # quote the id as the user typed it
        if state in ("free", "ours"):
            run.chosen[tier].append((d, state))
        elif state == "in_use" and run.wipe_listed(d) and not run.safe_mode:
            run.warnings.append("%s: %s will be erased (%s): it is in %s and safe mode is off"
                                % (run.host, sid, "; ".join(reasons), run.opt("wipe_allowed")))
            run.chosen[tier].append((d, "wipe"))
        else:
            run.refused[tier] += 1
            run.errors.append(_refusal(run, tier, sid, reasons, run.wipe_listed(d), state))


def _refusal(run, tier, sid, reasons, wipe_listed, state):
    head = "%s: %s: %s %s" % (run.host, run.opt("%s_devices" % tier), sid, "; ".join(reasons))
    if state == "untouchable":
        if reasons[0].startswith("it is the system disk"):
            return head + ". The system disk is never used for a storage tier; remove it from the list."
        if reasons[0].startswith("is a partition"):
            return head + ". Name the whole disk by stable id instead."
        if reasons[0] == "is read-only":
            return head + ". A read-only device cannot hold a tier; remove it from the list."
        return head + (". Unmount it (and remove it from /etc/fstab) first; then, to re-use it, add %s to "
                       "%s and set %s: false for that run." % (sid, run.opt("wipe_allowed"), run.opt("safe_mode")))
    fix = []
    if not wipe_listed:
        fix.append("add %s to %s" % (sid, run.opt("wipe_allowed")))
    if run.safe_mode:
        fix.append("set %s: false" % run.opt("safe_mode"))
    return head + (". Nothing was changed. To erase it and use it anyway: %s for that run "
                   "(everything on it is lost)." % " and ".join(fix))


def _check_both_tiers(run):
    """The same disk in both tiers (listed in both, or taken by auto for one and listed for the other)."""
    def members(tier):
        out = list(run.requested[tier])
        out += [(d, stable_id(d)) for d, _s in run.chosen[tier] if not any(d is r for r, _q in out)]
        return out
    cold = members("cold")
    for d, req in members("hot"):
        if any(d is c for c, _q in cold):
            run.errors.append("%s: %s is listed in both %s and %s; a disk belongs to one tier only"
                              % (run.host, req if not is_kernel_name(req) else stable_id(d),
                                 run.opt("hot_devices"), run.opt("cold_devices")))


def _check_counts(run, tier, tc):
    n = len(run.chosen[tier])
    if not tc["enabled"] or n == 0 or run.refused[tier]:
        return
    layout, option = tc["layout"], tc["layout_option"]
    ids = ", ".join(stable_id(d) for d, _s in run.chosen[tier])
    if n > 1 and MIN_DEVICES[layout] > n:
        run.err(option, "%s needs at least %d devices, %d given (%s)", layout, MIN_DEVICES[layout], n, ids)
    if layout == "single" and n > 1:
        run.err(option, "single takes exactly one disk, %d given; choose raid6, raid10, raid5 or raid1", n)
    if tier == "cold" and n == 1 and layout != "single":
        run.err(option, "%s needs at least %d disks, 1 given (%s); use %s: single for one disk",
                layout, MIN_DEVICES[layout], ids, run.opt(option))


def _dirs(run, tier, tc):
    out = []
    for d in tc["dirs"]:
        rel = str(d.get("path", "")).strip("/")
        if not rel or ".." in rel.split("/"):
            raise StoragePlanError(["%s: %s: path %r must be relative to the mount point, without '..'"
                                    % (run.host, run.opt("%s_dirs" % tier), d.get("path"))])
        out.append({"path": "%s/%s" % (tc["mount"].rstrip("/"), rel), "tier": tier,
                    "owner": d.get("owner", "root"), "group": d.get("group", "root"), "mode": str(d.get("mode", "0755"))})
    return out


def _assemble(run):
    """The plan from the chosen devices, plus the flat lists the role loops over."""
    plan = {"hot": None, "cold": None, "wipe": [], "warnings": run.warnings, "skipped": run.skipped,
            "arrays": [], "filesystems": [], "dirs": []}
    for tier in TIERS:
        tc = run.tier(tier)
        tp = plan[tier] = _plan_tier(tier, tc, run.chosen[tier], run.config)
        wipe = [dev["path"] for dev in tp["devices"] if dev["state"] == "wipe"]
        plan["wipe"].extend(wipe)
        if tp["md"]:
            plan["arrays"].append(dict(tp["md"], tier=tier, wipe=wipe))
        for fs in tp["filesystems"]:
            plan["filesystems"].append(dict(fs, tier=tier, wipe=fs["device"] in wipe, on_md=bool(tp["md"])))
        if tp["enabled"] and tp["layout"] != "jbod":
            plan["dirs"].extend(_dirs(run, tier, tc))
        if tc["enabled"] and not run.chosen[tier]:
            run.warnings.append("%s: no device for the %s tier (%s)" % (
                run.host, tier, "none free" if tc["devices"] == "auto" else "empty list"))
    return plan


def plan_storage(disks, config, node=None):
    """Plan both tiers. Returns the plan dict; raises StoragePlanError listing every problem.

    ``disks``: :class:`blockdev.BlockDevices` entries. ``config``: the :data:`OPTIONS` (missing
    ones take their defaults) plus ``host`` and ``var_prefix`` for messages. ``node``: what the
    module read on the target for the mount points: ``{"mounts": parse_mountinfo(...) or None when
    unreadable, "mounts_error": why, "realpath": {mount option value: where it resolves}}``; None
    (unit tests of other rules) skips the checks that need it.
    """
    run = _Run(disks, config, node)
    _check_layouts(run)
    if run.errors:
        raise StoragePlanError(run.errors)
    _check_fstab_fields(run)
    _resolve_wipe_allowed(run)
    for tier in TIERS:
        tc = run.tier(tier)
        if tc["enabled"]:
            (_select_auto if tc["devices"] == "auto" else _select_explicit)(run, tier, tc)
    _check_both_tiers(run)
    _check_mount_points(run)
    for tier in TIERS:
        _check_counts(run, tier, run.tier(tier))
    if run.errors:
        raise StoragePlanError(run.errors)
    return _assemble(run)


def _suggest(hits):
    return "; it is %s" % stable_id(hits[0]) if hits and _has_stable_id(hits[0]) else ""


def _plan_tier(tier, tc, chosen, config):
    opts = mount_options(config["mount_options"] or ["noatime"], config["device_timeout"])
    devices = [{"id": stable_id(d), "path": d.get("path") or "/dev/%s" % d["name"], "name": d.get("name"),
                "state": state} for d, state in chosen]
    out = {"tier": tier, "enabled": tc["enabled"] and bool(devices), "mount": tc["mount"],
           "devices": devices, "md": None, "filesystems": []}
    layout = tc["layout"]
    out["layout"] = layout if len(devices) > 1 else "single"
    if not devices:
        return out
    if len(devices) == 1:
        out["filesystems"].append(_fs(devices[0]["path"], fs_label(tier), None, tc["mount"], opts))
        return out
    if layout == "jbod":
        for i, dev in enumerate(devices):
            out["filesystems"].append(_fs(dev["path"], fs_label(tier, i), None,
                                          "%s/%d" % (tc["mount"].rstrip("/"), i), opts))
        return out
    name = array_name(tier)
    align = xfs_alignment(layout, len(devices), tc["chunk_kb"])
    out["md"] = {"name": name, "device": "/dev/md/%s" % name, "level": MD_LEVELS[layout],
                 "chunk_kb": tc["chunk_kb"] if layout != "raid1" else None,
                 "devices": [dev["path"] for dev in devices]}
    out["filesystems"].append(_fs(out["md"]["device"], fs_label(tier), align, tc["mount"], opts))
    return out


def _fs(device, label, align, mount, opts):
    return {"device": device, "label": label, "mkfs_opts": mkfs_options(label, align), "mount": mount,
            "mount_opts": opts, "alignment": align}
