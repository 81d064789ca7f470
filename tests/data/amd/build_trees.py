"""Build sysfs trees of AMD GPU nodes for the gather() tests (see README.md in this folder).

mi100-rocm602 / mi100-rocm571: the two real MI100 machines of ../real/amd-rocm-smi-json (bus ids
and NUMA nodes from the captures; the rest of the node is left out, so rocm-smi must fill it).
mi300x-8gpu, mi250x-4oam, mi210-2gpu-pcie: built from the kernel's documented formats only;
mixed-2nvidia-2mi210: two NVIDIA GPUs at the bus ids of a real capture and two MI210;
mi300x-cpx, mi300x-cpx-no-isolation, mi300x-dpx: MI300X nodes in compute partition modes (formats of
amdgpu_gfx.c's current_compute_partition and enforce_isolation).
"""
import importlib.util
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(os.path.dirname(HERE), "real", "amd-rocm-smi-json")
GIB = 1 << 30


# the file writers of ../sysfs/build_trees.py (one implementation for both tree builders); this
# file is loaded by path, so that one is too
_SPEC = importlib.util.spec_from_file_location(
    "dlrack_sysfs_trees", os.path.join(os.path.dirname(HERE), "sysfs", "build_trees.py"))
_SYSFS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_SYSFS)
w, ln = _SYSFS.w, _SYSFS.ln


def fresh(out, name):
    root = os.path.join(out, name)
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root)
    return root


def gpu(root, bdf, device, cls, link, numa, local, vendor="0x1002", vram=None, product=None, serial=None,
        unique_id=None, ras=None, bad_pages=None, hive=None, card=None, driver="amdgpu", partition=None,
        isolation=None):
    d = "/sys/devices/pci0000:00/%s" % bdf
    w(root, d + "/vendor", vendor)
    if device is not None:            # a real capture that does not print the device id: left out
        w(root, d + "/device", device)
    w(root, d + "/class", cls)
    cs, cw, ms, mw = link
    for name, value in (("current_link_speed", cs), ("current_link_width", cw), ("max_link_speed", ms),
                        ("max_link_width", mw)):
        w(root, d + "/" + name, value)
    w(root, d + "/numa_node", str(numa))
    w(root, d + "/local_cpulist", local)
    w(root, "/sys/bus/pci/drivers/%s/.keep" % driver, "")
    ln(root, d + "/driver", "../../../bus/pci/drivers/%s" % driver)
    ln(root, "/sys/bus/pci/devices/%s" % bdf, "../../../devices/pci0000:00/%s" % bdf)
    if vram is not None:
        w(root, d + "/mem_info_vram_total", str(vram))
    for name, value in (("product_name", product), ("serial_number", serial), ("unique_id", unique_id)):
        if value is not None:
            w(root, d + "/" + name, value)
    if ras is not None:
        mask, blocks = ras
        w(root, d + "/ras/features", "feature mask: 0x%x" % mask)
        for block, counts in blocks.items():
            w(root, d + "/ras/%s_err_count" % block, "".join("%s: %d\n" % kv for kv in counts))
    if bad_pages is not None:
        w(root, d + "/ras/gpu_vram_bad_pages", "".join("0x%08x : 0x00001000 : %s\n" % p for p in bad_pages))
    if hive is not None:
        w(root, d + "/xgmi_hive_info/xgmi_hive_id", str(hive))
    if partition is not None:       # amdgpu_gfx.c: "%s\n" of SPX|DPX|TPX|QPX|CPX
        w(root, d + "/current_compute_partition", partition)
    if isolation is not None:       # amdgpu_gfx.c: one %u per partition, space separated
        w(root, d + "/enforce_isolation", " ".join("0" for dummy in range(isolation)))
    if card is not None:
        w(root, d + "/drm/card%d/dev" % card, "226:%d" % card)
        w(root, d + "/drm/renderD%d/dev" % (128 + card), "226:%d" % (128 + card))
    return d


def location(bdf):
    dom, bus, devfn = bdf.split(":")
    dev, fn = devfn.split(".")
    return int(dom, 16), (int(bus, 16) << 8) | (int(dev, 16) << 3) | int(fn)


def kfd(root, cpu_nodes, gpus, xgmi):
    """KFD topology: CPU nodes 0..cpu_nodes-1, then one node per GPU bdf; xgmi: {gpu i: [gpu j]}."""
    base = "/sys/class/kfd/kfd/topology/nodes/"
    for n in range(cpu_nodes):
        w(root, base + "%d/properties" % n, "cpu_cores_count 48\nsimd_count 0\nlocation_id 0\ndomain 0")
    for i, bdf in enumerate(gpus):
        n = cpu_nodes + i
        dom, loc = location(bdf)
        w(root, base + "%d/properties" % n,
          "cpu_cores_count 0\nsimd_count 1216\nlocation_id %d\ndomain %d\ndrm_render_minor %d" % (loc, dom, 128 + i))
        links = [(2, 0)] + [(11, cpu_nodes + j) for j in xgmi.get(i, [])]
        for k, (typ, to) in enumerate(links):
            w(root, base + "%d/io_links/%d/properties" % (n, k),
              "type %d\nversion_major 0\nnode_from %d\nnode_to %d\nweight 15" % (typ, n, to))


GEN5, GEN4, GEN3 = "32.0 GT/s PCIe", "16.0 GT/s PCIe", "8.0 GT/s PCIe"
ALL = "0x%x" % ((1 << 14) - 1)      # umc .. fuse


def mi300x(out):
    """8x MI300X (OAM, 192 GB HBM3, PCIe Gen5 x16, 7 XGMI links each), 2 sockets; GPU6 at x8."""
    root = fresh(out, "mi300x-8gpu")
    buses = ["0000:%02x:00.0" % b for b in (0x05, 0x15, 0x65, 0x75, 0x85, 0x95, 0xe5, 0xf5)]
    for i, bdf in enumerate(buses):
        umc = [("ue", 0), ("ce", 5 if i == 3 else 0), ("de", 0)]
        gpu(root, bdf, "0x74a1", "0x120000", (GEN5, "8" if i == 6 else "16", GEN5, "16"), i // 4,
            "0-47,96-143" if i < 4 else "48-95,144-191", vram=192 * GIB, product="AMD Instinct MI300X",
            serial="PCB%07d" % i, unique_id="%016x" % (0x6f1f0a2b3c4d5e00 + i),
            ras=((1 << 14) - 1, {"umc": umc, "gfx": [("ue", 0), ("ce", 1 if i == 3 else 0)],
                                 "sdma": [("ue", 0), ("ce", 0)]}),
            bad_pages=[(0xc8d, "R")] if i == 3 else [], hive=5179891386347357601, card=i)
    kfd(root, 2, buses, dict((i, [j for j in range(8) if j != i]) for i in range(8)))
    return root


def mi300x_partitioned(out, name, mode, isolation):
    """8x MI300X in a compute partition mode (CPX: each package 8 logical devices, one per XCD);
    ``isolation``: values in enforce_isolation (None: the attribute is absent, an older kernel)."""
    root = fresh(out, name)
    buses = ["0000:%02x:00.0" % b for b in (0x05, 0x15, 0x65, 0x75, 0x85, 0x95, 0xe5, 0xf5)]
    for i, bdf in enumerate(buses):
        gpu(root, bdf, "0x74a1", "0x120000", (GEN5, "16", GEN5, "16"), i // 4,
            "0-47,96-143" if i < 4 else "48-95,144-191", vram=192 * GIB, product="AMD Instinct MI300X",
            unique_id="%016x" % (0x6f1f0a2b3c4d5f00 + i), ras=((1 << 14) - 1, {"umc": [("ue", 0), ("ce", 0)]}),
            card=i, partition=mode, isolation=isolation)
    return root


def mi250x(out):
    """4x MI250X OAM = 8 GCDs (each its own PCI device with 64 GB), 1 socket (Trento-like)."""
    root = fresh(out, "mi250x-4oam")
    buses = ["0000:%02x:00.0" % b for b in (0xc1, 0xc6, 0xc9, 0xce, 0xd1, 0xd6, 0xd9, 0xde)]
    for i, bdf in enumerate(buses):
        gpu(root, bdf, "0x7408", "0x038000", (GEN4, "16", GEN4, "16"), i // 2, "%d-%d" % (i * 8, i * 8 + 7),
            vram=64 * GIB, product="AMD Instinct MI250X", unique_id="%016x" % (0x10 + i),
            ras=((1 << 14) - 1, {"umc": [("ue", 0), ("ce", 0)]}), hive=777, card=i)
    # in-package GCD pair plus ring neighbours: every GCD has XGMI peers
    xgmi = dict((i, sorted(set([i ^ 1, (i + 2) % 8, (i - 2) % 8]))) for i in range(8))
    kfd(root, 4, buses, xgmi)
    return root


def mi210(out):
    """2x MI210 PCIe (64 GB), no Infinity Fabric bridge, RAS not exposed (ECC mode unknown)."""
    root = fresh(out, "mi210-2gpu-pcie")
    buses = ["0000:41:00.0", "0000:c1:00.0"]
    for i, bdf in enumerate(buses):
        gpu(root, bdf, "0x740f", "0x038000", (GEN4, "16", GEN4, "16"), i, "0-31" if i == 0 else "32-63",
            vram=64 * GIB, product="Instinct MI210", card=i)
    kfd(root, 2, buses, {})
    return root


def mixed(out):
    """A mixed node: the two NVIDIA RTX A5000 of the real capture telegraf-dual_a5000-v13.xml (their
    bus ids 81:00.0 and c1:00.0; NVIDIA sorts first) and two MI210 (documented formats only)."""
    root = fresh(out, "mixed-2nvidia-2mi210")
    for i, bdf in enumerate(["0000:81:00.0", "0000:c1:00.0"]):
        gpu(root, bdf, "0x2231", "0x030000", (GEN4, "16", GEN4, "16"), i, "0-31" if i == 0 else "32-63",
            vendor="0x10de", driver="nvidia")
    for i, bdf in enumerate(["0000:05:00.0", "0000:85:00.0"]):
        gpu(root, bdf, "0x740f", "0x038000", (GEN4, "16", GEN4, "16"), i, "0-31" if i == 0 else "32-63",
            vram=64 * GIB, product="AMD Instinct MI210", unique_id="%016x" % (0x2100 + i),
            ras=((1 << 14) - 1, {"umc": [("ue", 0), ("ce", 2 * i), ("de", 0)]}), card=i)
    return root


def mi100(out, name, capture):
    """The machine of a real rocm-smi capture: its GPUs' bus ids and NUMA nodes, gen4 x16 links;
    no FRU, VRAM or RAS files, so the model and memory must come from rocm-smi."""
    root = fresh(out, name)
    with open(os.path.join(REAL, capture)) as fh:
        cards = json.load(fh)
    for key in sorted(k for k in cards if k.startswith("card")):
        c = cards[key]
        numa = int(c["(Topology) Numa Node"])
        gpu(root, c["PCI Bus"].lower(), "0x738c", "0x038000", (GEN4, "16", GEN4, "16"), numa, "0-63")
    return root


def build_all(out):
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    return [mi300x(out), mi300x_partitioned(out, "mi300x-cpx", "CPX", 8),
            mi300x_partitioned(out, "mi300x-cpx-no-isolation", "CPX", None),
            mi300x_partitioned(out, "mi300x-dpx", "DPX", None), mi250x(out), mi210(out), mixed(out), mi100(out, "mi100-rocm602", "telegraf-mi100_rocm602.json"),
            mi100(out, "mi100-rocm571", "telegraf-mi100_rocm571.json")]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_trees.py OUTDIR")
    for path in build_all(sys.argv[1]):
        print(path)
