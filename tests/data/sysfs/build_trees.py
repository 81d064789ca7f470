"""Build the sysfs/procfs trees the gather() tests use from the real captures in tests/data/real/.

The trees are not committed: their paths hold ':' (PCI addresses) and symlinks (some dangling, as
in a real /sys), which `ansible-galaxy collection build` and `ansible-test sanity` refuse. The tests
build them at test time into a temporary folder (tests/testpaths.py: sysfs_tree()); to look at
them: python3 tests/data/sysfs/build_trees.py /tmp/trees. See README.md for what each tree
was built from. Values are taken from the captures; what a capture does not show is left out
(the gatherer must then report null), except where README.md says otherwise.
"""
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(os.path.dirname(HERE), "real")
OUT = None  # where the trees go: build_all(out) sets it


def w(root, path, text):
    p = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as fh:
        fh.write(text if text.endswith("\n") or text == "" else text + "\n")


def ln(root, path, target):
    p = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    if os.path.lexists(p):
        os.remove(p)
    os.symlink(target, p)


def fmt(gts):
    """A link speed as sysfs prints it: '16.0 GT/s PCIe'."""
    return "%.1f GT/s PCIe" % float(gts)


def fresh(name):
    root = os.path.join(OUT, name)
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root)
    return root


def cpu(root, n, pkg, core, siblings):
    base = "/sys/devices/system/cpu/cpu%d/topology/" % n
    w(root, base + "physical_package_id", str(pkg))
    w(root, base + "core_id", str(core))
    w(root, base + "thread_siblings_list", siblings)


def node(root, n, cpulist, memtotal_kb=None):
    w(root, "/sys/devices/system/node/node%d/cpulist" % n, cpulist)
    if memtotal_kb is not None:
        w(root, "/sys/devices/system/node/node%d/meminfo" % n,
          "Node %d MemTotal:       %d kB\nNode %d MemFree:        0 kB" % (n, memtotal_kb, n))


def pci(root, bdf, vendor, device, cls, link, numa=None, local=None, driver=None):
    d = "/sys/devices/pci0000:00/%s" % bdf
    w(root, d + "/vendor", vendor)
    w(root, d + "/device", device)
    w(root, d + "/class", cls)
    cs, cw, ms, mw = link
    w(root, d + "/current_link_speed", cs)
    w(root, d + "/current_link_width", cw)
    w(root, d + "/max_link_speed", ms)
    w(root, d + "/max_link_width", mw)
    if numa is not None:
        w(root, d + "/numa_node", str(numa))
    if local is not None:
        w(root, d + "/local_cpulist", local)
    if driver:
        w(root, "/sys/bus/pci/drivers/%s/.keep" % driver, "")
        ln(root, d + "/driver", "../../../bus/pci/drivers/%s" % driver)
    ln(root, "/sys/bus/pci/devices/%s" % bdf, "../../../devices/pci0000:00/%s" % bdf)


def disk(root, name, sectors, rotational, devpath, partitions=(), holders=(), removable=0):
    real = "/sys/devices/%s/block/%s" % (devpath, name)
    w(root, real + "/size", str(sectors))
    w(root, real + "/queue/rotational", str(rotational))
    w(root, real + "/removable", str(removable))
    for pname, psectors in partitions:
        w(root, real + "/%s/partition" % pname, pname[-1])
        w(root, real + "/%s/size" % pname, str(psectors))
        os.makedirs(os.path.join(root, (real + "/%s/holders" % pname).lstrip("/")), exist_ok=True)
    os.makedirs(os.path.join(root, (real + "/holders").lstrip("/")), exist_ok=True)
    for h in holders:
        ln(root, real + "/holders/" + h, "../../../../virtual/block/" + h)
    depth = real.count("/") - 1
    ln(root, "/sys/block/" + name,
       os.path.relpath(os.path.join(root, real.lstrip("/")), os.path.join(root, "sys/block")))


def virtual_block(root, name, sectors):
    real = "/sys/devices/virtual/block/%s" % name
    w(root, real + "/size", str(sectors))
    w(root, real + "/queue/rotational", "0")
    os.makedirs(os.path.join(root, (real + "/holders").lstrip("/")), exist_ok=True)
    ln(root, "/sys/block/" + name, os.path.relpath(os.path.join(root, real.lstrip("/")),
                                                   os.path.join(root, "sys/block")))


def section(md, header_re, nth=0):
    """The nth fenced code block after a heading matching header_re in a stelline report."""
    text = open(md).read()
    m = re.search(header_re, text, re.M)
    blocks = re.findall(r"```\n(.*?)```", text[m.end():], re.S)
    return blocks[nth]


# ------------------------------------------------------------------------------------------
def esc8000a_e12():
    """ASUS ESC8000A-E12: 2x EPYC 9374F (SMT off), 2 NUMA nodes, 4x RTX 6000 Ada, 17 NVMe."""
    root = fresh("esc8000a-e12")
    md = os.path.join(REAL, "hardware-report-bundle", "stelline-asus-esc8000a-e12.md")
    lscpu = open(os.path.join(REAL, "lscpu", "stelline-esc8000a-e12-2s-epyc9374f.txt")).read()
    model = re.search(r"Model name:\s+(.*)", lscpu).group(1).strip()
    w(root, "/proc/cpuinfo", "".join(
        "processor\t: %d\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
        "model name\t: %s\nstepping\t: 1\nflags\t\t: fpu vme de pse\n\n" % (i, model)
        for i in range(64)))
    rows = open(os.path.join(REAL, "lscpu", "stelline-esc8000a-e12-2s-epyc9374f-lscpu-e.txt")).read().splitlines()[1:]
    for r in rows:
        c = r.split()
        n, nd, sock, core = int(c[0]), int(c[1]), int(c[2]), int(c[3])
        cpu(root, n, sock, core, str(n))  # SMT off: each thread is its own core
    numa = open(os.path.join(REAL, "numactl-hardware", "stelline-esc8000a-e12-2s-epyc9374f.txt")).read()
    sizes = dict((int(a), int(b)) for a, b in re.findall(r"node (\d+) size: (\d+) MB", numa))
    node(root, 0, "0-31", sizes[0] * 1024)
    node(root, 1, "32-63", sizes[1] * 1024)
    w(root, "/proc/meminfo", "MemTotal:       %d kB\nMemFree:        0 kB" % ((sizes[0] + sizes[1]) * 1024))
    # GPUs: lspci -vvv per device (NUMA node, LnkCap/LnkSta, Kernel driver in use: nvidia)
    text = open(md).read()
    for bdf in ("01:00.0", "41:00.0", "c1:00.0", "e1:00.0"):
        blk = text[text.index("\n%s VGA" % bdf):]
        blk = blk[:blk.index("```")]
        numa_node = int(re.search(r"NUMA node: (\d+)", blk).group(1))
        cap = re.search(r"LnkCap:.*Speed ([\d.]+)GT/s, Width x(\d+)", blk)
        sta = re.search(r"LnkSta:\s*Speed ([\d.]+)GT/s.*?Width x(\d+)", blk)
        pci(root, "0000:" + bdf, "0x10de", "0x26b1", "0x030000",
            (fmt(sta.group(1)), sta.group(2), fmt(cap.group(1)), cap.group(2)),
            numa=numa_node, local="0-31" if numa_node == 0 else "32-63", driver="nvidia")
    # a ConnectX-7 (not a GPU) on the same bus
    pci(root, "0000:21:00.0", "0x15b3", "0x1021", "0x020000",
        ("32.0 GT/s PCIe", "16", "32.0 GT/s PCIe", "16"), numa=0, local="0-31", driver="mlx5_core")
    # disks: lsblk capture (16 NVMe in md0/md1 RAID0, nvme16n1 OS disk, sda 0B removable, sr0)
    lsblk = open(os.path.join(REAL, "..", "real", "hardware-report-bundle",
                              "stelline-asus-esc8000a-e12.md")).read()
    members = re.findall(r"^(nvme\d+n1)\s+\S+\s+0\s+931\.5G.*\n└─(md\d)", lsblk, re.M)
    for i, (name, mdname) in enumerate(members):
        disk(root, name, 1953525168, 0, "pci0000:00/0000:00:%02x.0/nvme/%s" % (i + 2, name.replace("n1", "")),
             holders=(mdname,))
    disk(root, "nvme16n1", 1000215216, 0, "pci0000:00/0000:00:01.2/nvme/nvme16",
         partitions=(("nvme16n1p1", 2097152), ("nvme16n1p2", 998115328)))
    disk(root, "sda", 0, 1, "pci0000:00/0000:00:08.1/usb1/1-1/1-1:1.0/host0/target0:0:0/0:0:0:0",
         removable=1)
    disk(root, "sr0", 2097151, 1, "pci0000:00/0000:00:08.1/usb1/1-2/1-2:1.0/host1/target1:0:0/1:0:0:0",
         removable=1)
    for mdname in ("md0", "md1"):
        virtual_block(root, mdname, 15628201984)
    w(root, "/proc/self/mounts", "\n".join([
        "/dev/nvme16n1p2 / ext4 rw,relatime 0 0",
        "/dev/nvme16n1p1 /boot/efi vfat rw,relatime 0 0",
        "/dev/md0 /mnt/nvme-raid-0 xfs rw,relatime 0 0",
        "/dev/md1 /mnt/nvme-raid-1 xfs rw,relatime 0 0",
        "proc /proc proc rw 0 0",
    ]))
    w(root, "/proc/sys/kernel/hostname", "coyote2")  # the prompt in the report: sonata@coyote2
    w(root, "/sys/class/dmi/id/sys_vendor", "ASUSTeK COMPUTER INC.")
    w(root, "/sys/class/dmi/id/product_name", "ESC8000A-E12")
    pci_ids(root)
    return root


def traverse_power9():
    """Princeton Traverse: 2S POWER9 SMT4, NUMA nodes 0 and 8 plus CPU-less 252-255 (GPU memory)."""
    root = fresh("traverse-power9-cpuless-numa")
    txt = open(os.path.join(REAL, "lscpu", "jdh4-princeton-traverse-2s-power9-4x-v100-gpu-numa-nodes-252-255.txt")).read()
    model = re.search(r"Model name:\s+(.*)", txt).group(1).strip()
    w(root, "/proc/cpuinfo", "".join("processor\t: %d\ncpu\t\t: %s\n\n" % (i, model) for i in range(128)))
    for n in range(128):
        first = n - n % 4
        cpu(root, n, 0 if n < 64 else 8, n // 4, "%d-%d" % (first, first + 3))
    for nid, cpus in re.findall(r"NUMA node(\d+) CPU\(s\):[ \t]*(\S*)", txt):
        node(root, int(nid), cpus)
    return root


def esc8000g4_nodriver():
    """ASUS ESC8000 G4: RTX 2080 Ti at 1d:00.0 behind a PLX switch, idle 2.5 GT/s of 8 GT/s, x16;
    no driver bound; dmidecode of the same machine (Single-bit ECC)."""
    root = fresh("esc8000g4-gpu-nodriver")
    blk = open(os.path.join(REAL, "lspci-vv",
                            "linuxhw-esc8000g4-rtx2080ti-1d_00.0-lspci-vvnn-behind-plx-idle-2.5GTs.txt")).read()
    numa_node = int(re.search(r"NUMA node: (\d+)", blk).group(1))
    dev = re.search(r"\[10de:([0-9a-f]{4})\]", blk).group(1)
    cap = re.search(r"LnkCap:.*Speed ([\d.]+)GT/s, Width x(\d+)", blk)
    sta = re.search(r"LnkSta:\s*Speed ([\d.]+)GT/s.*?Width x(\d+)", blk)
    pci(root, "0000:1d:00.0", "0x10de", "0x" + dev, "0x030000",
        (fmt(sta.group(1)), sta.group(2), fmt(cap.group(1)), cap.group(2)), numa=numa_node)
    w(root, "/usr/sbin/dmidecode", "#!/bin/sh\n# stub: tests feed the captured output\n")
    pci_ids(root)
    return root


def pci_ids(root):
    """The node's pci.ids: an excerpt of Debian's pci.ids package (see tests/data/real/SOURCES.md)."""
    src = os.path.join(REAL, "pci-ids", "debian-pci.ids-2023.04.10-nvidia-excerpt.ids")
    w(root, "/usr/share/misc/pci.ids", open(src).read())


def dual_2070_x8():
    """2x GeForce RTX 2070 at 01:00.0 / 02:00.0, both x8 of x16, idle gen 1 of 3 (telegraf XML)."""
    root = fresh("dual-2070-x8")
    for bdf in ("0000:01:00.0", "0000:02:00.0"):
        pci(root, bdf, "0x10de", "0x1f07", "0x030000",
            ("2.5 GT/s PCIe", "8", "8.0 GT/s PCIe", "16"), numa=-1, local="", driver="nvidia")
    w(root, "/usr/bin/nvidia-smi", "#!/bin/sh\n# stub: tests feed the captured -q -x output\n")
    return root


def amd_dgpu_x8():
    """AMD dGPU behind a PCIe switch (nokyan/resources#512): 01:00.0 x8 of x16, 16 of 32 GT/s.
    Not an NVIDIA device: since the AMD vendor seam (issue 21) it is listed as an AMD GPU.
    The tree name is kept for the tests that use it."""
    root = fresh("amd-dgpu-x8-not-nvidia")
    for f in ("nokyan-resources-issue512-0000_01_00.0-width8-of-16-16GTs-of-32GTs.txt",
              "nokyan-resources-issue512-0000_03_00.0-width16-32GTs.txt"):
        text = open(os.path.join(REAL, "sysfs-pci-link", f)).read()
        vals = dict((os.path.basename(p), v.strip()) for p, v in
                    re.findall(r"==> (\S+) <==\n(.*)\n", text))
        bdf = re.search(r"devices/(\S+?)/", text.split("==>")[1]).group(1)
        cls = "0x030000" if bdf.endswith("01:00.0") else "0x060400"
        pci(root, bdf, "0x1002", "0x7550" if cls == "0x030000" else "0x1478", cls,
            (vals["current_link_speed"], vals["current_link_width"], vals["max_link_speed"],
             vals["max_link_width"]), numa=-1)
    return root


def garbled():
    """The ESC8000A-E12 tree with files truncated, emptied or filled with junk."""
    src = os.path.join(OUT, "esc8000a-e12")
    root = os.path.join(OUT, "garbled")
    if os.path.exists(root):
        shutil.rmtree(root)
    shutil.copytree(src, root, symlinks=True)
    w(root, "/proc/cpuinfo", "\x00\x01garbage: : :\nmodel name")
    w(root, "/proc/meminfo", "MemTotal: lots kB")
    w(root, "/sys/devices/system/cpu/cpu3/topology/thread_siblings_list", "3-x,")
    w(root, "/sys/devices/system/cpu/cpu4/topology/physical_package_id", "zero")
    os.remove(os.path.join(root, "sys/devices/system/cpu/cpu5/topology/core_id"))
    w(root, "/sys/devices/system/node/node0/cpulist", "0-31-7")
    w(root, "/sys/devices/system/node/node1/meminfo", "Node 1 MemTotal: \xff kB")
    w(root, "/sys/devices/pci0000:00/0000:01:00.0/current_link_width", "abc")
    w(root, "/sys/devices/pci0000:00/0000:01:00.0/max_link_speed", "Unknown")
    w(root, "/sys/devices/pci0000:00/0000:01:00.0/numa_node", "")
    w(root, "/sys/devices/pci0000:00/0000:41:00.0/local_cpulist", "ff,zz")
    w(root, "/sys/devices/pci0000:00/0000:c1:00.0/class", "")
    os.remove(os.path.join(root, "sys/devices/pci0000:00/0000:e1:00.0/vendor"))
    blk = os.path.realpath(os.path.join(root, "sys/block/nvme0n1"))
    w(blk, "size", "NaN")
    w(blk, "queue/rotational", "maybe")
    w(root, "/proc/self/mounts", "/dev/nvme16n1p2")
    w(root, "/proc/uptime", "soon")
    return root


TREES = (esc8000a_e12, traverse_power9, esc8000g4_nodriver, dual_2070_x8, amd_dgpu_x8, garbled)


def build_all(out):
    """Build every tree under out (created if missing); returns their paths."""
    global OUT
    OUT = os.path.abspath(out)
    os.makedirs(OUT, exist_ok=True)
    return [fn() for fn in TREES]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_trees.py OUTDIR")
    for path in build_all(sys.argv[1]):
        print(path)
