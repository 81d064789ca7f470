"""Block-device trees (sysfs, procfs, /dev/disk/by-id, udev database) built in a temp dir from real
``lsblk`` captures, for the one block-device reader (plugins/module_utils/storage/blockdev.py) and the
storage planner.

``lsblk_tree(root, text, facts)`` parses an lsblk capture (tests/data/real/lsblk/, provenance in
its SOURCES.md): names, MAJ:MIN, RM, SIZE, RO, TYPE and mount points become ``/sys/block/<disk>``
(``size``, ``ro``, ``removable``, ``dev``, partitions, ``holders``), virtual md/dm devices and
``/proc/self/mounts``. What lsblk does not print (rotational, bus path, model, serial, by-id
links, udev properties) comes from ``facts`` and is documented here, per tree.

Trees (built in a temp dir, or unpacked from a real capture):

- h200-vm: the real sysfs/procfs capture of an H200 cloud VM (tests/data/real/h200-vm/tree.tar.gz,
  SOURCES.md there): vda = root ext4, vdb = 300 MB read-only squashfs at /usr/local/nvidia, zram0
  and 8 loop devices. Nothing filled in.
- puget-wrx90: stelline's lsblk of a Puget WRX90 (tests/data/real/lsblk/stelline-puget-wrx90-nvme-raid.txt):
  8 NVMe in md127 (RAID0, /mnt/nvme-raid) and nvme6n1 with /boot/efi, /boot and an LVM root on p3.
  Filled in: the NVMe bus paths.
- kingston: util-linux's real sysfs dump rendered by lsblk
  (tests/data/real/lsblk/util-linux-expected-nvme-sata-basic-cols.txt; models from
  ...-vendor-cols.txt): SATA SSD sda (/boot/efi, /boot, /), HDD sdb (sdb1 at /home/archive), NVMe
  nvme0n1 (partitions, /home). Filled in: rotational 1 for the WD800JD HDD, serials, by-id links
  made the way udev makes them from model and serial (spaces -> _).
- toshiba: the NVMe of netbox-agent's `nvme list -o json` (tests/data/real/nvme-list-json/...):
  model "KXG60ZNV1T02 NVMe TOSHIBA 1024GB", serial 19FA109SK07N, 2000409264 sectors, as a blank
  data disk with the links udev makes for it: nvme-<model>_<serial>, the _1 namespace alias and
  nvme-eui.<EUI-64> (the EUI is filled in: the capture does not show it).
"""
import json
import os
import re
import tarfile

from realdata import read, real

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
            target = os.path.relpath(os.path.join(root, d.lstrip("/")), os.path.join(root, "sys/block"))
            link(root, "/sys/block/" + k, target)
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


TOSHIBA_MODEL = "KXG60ZNV1T02 NVMe TOSHIBA 1024GB"
TOSHIBA_ID = "nvme-KXG60ZNV1T02_NVMe_TOSHIBA_1024GB_19FA109SK07N"
TOSHIBA_EUI = "nvme-eui.00080d0400a1b2c3"


def h200_tree(dest):
    """Unpack the real h200-vm capture under ``dest``; returns its root."""
    with tarfile.open(real("h200-vm", "tree.tar.gz")) as tf:
        tf.extractall(str(dest))
    return os.path.join(str(dest), "tree")


def puget(root, udev=None):
    facts = dict(("nvme%dn1" % i, {"devpath": "pci0000:00/0000:00:%02x.0/nvme/nvme%d" % (i + 1, i)}) for i in range(9))
    return lsblk_tree(str(root), read(real("lsblk", "stelline-puget-wrx90-nvme-raid.txt")), facts, udev=udev)


def kingston(root, swaps=()):
    facts = {
        "sda": {"rotational": 0, "devpath": "pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0",
                "model": "KINGSTON SH103S3", "serial": "50026B722A0B1C2D",
                "links": ["ata-KINGSTON_SH103S3240G_50026B722A0B1C2D", "wwn-0x50026b722a0b1c2d"]},
        "sdb": {"rotational": 1, "devpath": "pci0000:00/0000:00:1f.2/ata2/host1/target1:0:0/1:0:0:0",
                "model": "WDC WD800JD-00MS", "serial": "WD-WMAM9ABC1234",
                "links": ["ata-WDC_WD800JD-00MSA1_WD-WMAM9ABC1234"]},
        "nvme0n1": {"devpath": "pci0000:00/0000:00:1d.0/nvme/nvme0", "model": "KINGSTON SKC1000240G",
                    "serial": "50026B7282A1B2C3",
                    "links": ["nvme-KINGSTON_SKC1000240G_50026B7282A1B2C3", "nvme-eui.0026b7282a1b2c35"]},
    }
    return lsblk_tree(str(root), read(real("lsblk", "util-linux-expected-nvme-sata-basic-cols.txt")), facts,
                      swaps=swaps)


def toshiba(root, udev=None):
    dev = json.loads(read(real("nvme-list-json", "netbox-agent-nvme-list-toshiba-kxg60.json")))["Devices"][0]
    assert dev["ModelNumber"] == TOSHIBA_MODEL
    text = "NAME MAJ:MIN RM SIZE RO TYPE MOUNTPOINTS\nnvme0n1 259:0 0 %dB 0 disk\n" % (dev["MaximumLBA"] * 512)
    facts = {"nvme0n1": {"devpath": "pci0000:00/0000:00:03.0/nvme/nvme0", "model": dev["ModelNumber"],
                         "serial": dev["SerialNumber"],
                         "links": [TOSHIBA_EUI, TOSHIBA_ID + "_1", TOSHIBA_ID]}}
    return lsblk_tree(str(root), text, facts, udev=udev)
