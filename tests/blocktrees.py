"""Block-device trees (sysfs, procfs, /dev/disk/by-id, udev database) built in a temp dir from real
``lsblk`` captures, for the one block-device reader (plugins/module_utils/blockdev.py) and the
storage planner.

``lsblk_tree(root, text, facts)`` parses an lsblk capture (tests/data/real/lsblk/, provenance in
its SOURCES.md): names, MAJ:MIN, RM, SIZE, RO, TYPE and mount points become ``/sys/block/<disk>``
(``size``, ``ro``, ``removable``, ``dev``, partitions, ``holders``), virtual md/dm devices and
``/proc/self/mounts``. What lsblk does not print (rotational, bus path, model, serial, by-id
links, udev properties) comes from ``facts`` and is documented next to each tree in the tests.
"""
import os
import re

_UNITS = {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


def write(root, path, text):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as fh:
        fh.write(text)


def link(root, path, target):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    if not os.path.lexists(full):
        os.symlink(target, full)


def sectors(size):
    m = re.match(r"^([\d.]+)([BKMGTP])$", size)
    return int(float(m.group(1)) * _UNITS[m.group(2)]) // 512 if m else 0


def parse_lsblk(text):
    """[{name, depth, majmin, rm, size, ro, type, mounts, parent}] from lsblk's tree output
    (ASCII or Unicode tree, with or without KNAME/RO/MOUNTPOINTS columns)."""
    lines = text.splitlines()
    header = lines[0].split()
    rows, stack = [], []
    for line in lines[1:]:
        if not line.strip():
            continue
        m = re.match(r"^([\s|`\-\u2502\u251c\u2514\u2500]*)(\S+)\s+(.*)$", line)
        prefix, name, rest = m.group(1), m.group(2), m.group(3).split()
        depth = len(prefix) // 2
        cols = dict(zip(header[1:], rest))
        mounts = rest[len(header) - 2:] if len(rest) > len(header) - 2 else []
        row = {"name": name, "depth": depth, "majmin": cols.get("MAJ:MIN"), "rm": cols.get("RM", "0"),
               "size": cols.get("SIZE", "0B"), "ro": cols.get("RO", "0"), "type": cols.get("TYPE"),
               "mounts": mounts, "parent": None}
        stack = stack[:depth]
        if stack:
            row["parent"] = stack[-1]["name"]
        stack.append(row)
        rows.append(row)
    return rows


def lsblk_tree(root, text, facts=None, swaps=(), udev=None):
    """Build the tree; ``facts[name]`` = {rotational, devpath, model, serial, links: [by-id names]}.
    ``udev[name]`` = {"ID_FS_TYPE": ...} written to /run/udev/data/b<maj:min>."""
    facts = facts or {}
    rows = parse_lsblk(text)
    by_name = {}
    for row in rows:
        by_name.setdefault(row["name"], row)   # an md array appears once per member
    kernel = {}
    dm = 0
    for name, row in by_name.items():
        if row["type"] == "lvm" or row["type"] == "crypt" or row["type"] == "mpath":
            kernel[name] = "dm-%d" % dm
            dm += 1
        else:
            kernel[name] = name
    sysdir = {}
    for name, row in by_name.items():
        k = kernel[name]
        f = facts.get(k, {})
        if row["type"] == "part":
            parent = sysdir[row["parent"]]
            d = parent + "/" + k
            write(root, d + "/partition", "%d\n" % int(re.sub(r"\D", "", k[len(row["parent"]):]) or 1))
        elif row["type"] in ("disk", "rom"):
            d = "/sys/devices/%s/block/%s" % (f.get("devpath", "virtual"), k)
            link(root, "/sys/block/" + k, os.path.relpath(os.path.join(root, d.lstrip("/")),
                                                           os.path.join(root, "sys/block")))
            write(root, d + "/queue/rotational", "%d\n" % f.get("rotational", 0))
            write(root, d + "/removable", "%s\n" % row["rm"])
            for key in ("model", "serial"):
                if f.get(key):
                    write(root, d + "/device/" + key, f[key] + "\n")
        else:   # md raid, lvm, crypt: a virtual block device held by its parent
            d = "/sys/devices/virtual/block/" + k
            link(root, "/sys/block/" + k, "../devices/virtual/block/" + k)
            if k.startswith("dm-"):
                write(root, d + "/dm/name", name + "\n")
        sysdir[name] = d
        write(root, d + "/size", "%d\n" % sectors(row["size"]))
        write(root, d + "/ro", "%s\n" % row["ro"])
        if row["majmin"]:
            write(root, d + "/dev", row["majmin"] + "\n")
        os.makedirs(os.path.join(root, d.lstrip("/"), "holders"), exist_ok=True)
        for lnk in f.get("links", []):
            link(root, "/dev/disk/by-id/" + lnk, "../../" + k)
        for key, val in ((udev or {}).get(k) or {}).items():
            write(root, "/run/udev/data/b" + row["majmin"], "E:%s=%s\n" % (key, val))
    for row in rows:   # holders: every appearance of an md array under a member
        if row["parent"] and by_name[row["name"]]["type"] != "part":
            link(root, sysdir[row["parent"]] + "/holders/" + kernel[row["name"]],
                 os.path.relpath(os.path.join(root, sysdir[row["name"]].lstrip("/")),
                                 os.path.join(root, sysdir[row["parent"]].lstrip("/"), "holders")))
    mounts = ["proc /proc proc rw 0 0", "sysfs /sys sysfs rw 0 0"]
    for name, row in by_name.items():
        dev = "/dev/mapper/" + name if kernel[name].startswith("dm-") else "/dev/" + name
        for mp in row["mounts"]:
            if mp.startswith("/"):
                mounts.append("%s %s xfs rw 0 0" % (dev, mp))
    write(root, "/proc/self/mounts", "\n".join(mounts) + "\n")
    swap_lines = ["Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority"]
    swap_lines += ["%s\tpartition\t8388604\t\t0\t\t-2" % s for s in swaps]
    write(root, "/proc/swaps", "\n".join(swap_lines) + "\n")
    return root


def fake_blkid(results):
    """run_command stand-in for ``blkid -p -o export /dev/X``: ``results[X]`` is the export text;
    absent = rc 2 (nothing found)."""
    calls = []

    def run(argv):
        calls.append(list(argv))
        name = argv[-1].rsplit("/", 1)[-1]
        if name in results:
            return 0, results[name], ""
        return 2, "", ""
    run.calls = calls
    return run
