"""sysfs trees of the real AMD/Hygon machines in ../real/amd/ (issue 31.2), for hw_facts' root=
replay; see README.md in this folder for which figure of each tree comes from its capture and
which is built (the captures print no PCI class, and some no bus id or device id).
"""
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(os.path.dirname(HERE), "real", "amd")

_SPEC = importlib.util.spec_from_file_location("dlrack_amd_trees_base", os.path.join(HERE, "build_trees.py"))
_BASE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_BASE)
gpu, fresh, w, location = _BASE.gpu, _BASE.fresh, _BASE.w, _BASE.location
GEN5, GEN4, GEN3 = _BASE.GEN5, _BASE.GEN4, _BASE.GEN3
SPEED = {"8.0GT/s": GEN3, "16.0GT/s": GEN4, "32.0GT/s": GEN5}
VGA, DISPLAY, ACCEL = "0x030000", "0x038000", "0x120000"


def card(capture, key="card0"):
    with open(os.path.join(REAL, capture)) as fh:
        return json.load(fh)[key]


def _link(c):
    """'1 (16.0GT/s x16)' of rocm-smi's pcie clock level -> the sysfs link files."""
    level = c["pcie clock level"]
    speed, width = level[level.index("(") + 1:level.index(")")].split()
    return (SPEED[speed], width[1:], SPEED[speed], width[1:])


def from_rocm_smi(out, name, capture, device=None, cls=DISPLAY):
    """One GPU at the bus id, NUMA node, link and VRAM of a rocm-smi capture; ``device``: its PCI
    device id where the capture prints it (else the file is left out)."""
    root = fresh(out, name)
    c = card(capture)
    gpu(root, c["PCI Bus"].lower(), device, cls, _link(c), int(c["(Topology) Numa Node"]), "0-15",
        vram=int(c["VRAM Total Memory (B)"]), card=0)
    return root


def mi250x_hpe(out):
    """rocm_smi_lib#159: an MI250X GCD whose FRU product name is the HPE board name, device id
    0x7408 ("Card Model"); bus id not in the capture (0000:c1:00.0 here)."""
    root = fresh(out, "mi250x-hpe-c2")
    c = card("rocm_smi_lib-159-mi250x-productname.json")
    gpu(root, "0000:c1:00.0", c["Card Model"], DISPLAY, (GEN4, "16", GEN4, "16"), 0, "0-63",
        vram=64 << 30, product=c["Card Series"] + "\0\0\0\0", card=0)
    return root


def apu_780m(out):
    """systeminformation#960: a Radeon 780M (device 0x1900 HawkPoint1, bus c4:00.0) and nothing else."""
    root = fresh(out, "apu-780m")
    c = card("systeminformation-960-radeon780m.json")
    gpu(root, c["PCI Bus"].lower(), c["Device ID"], VGA, (GEN4, "16", GEN4, "16"), 0, "0-15", vram=512 << 20, card=0)
    return root


def navi21_raphael(out):
    """LocalAI#7761: a Radeon RX 6800-class card (0x73bf, 17163091968 B) next to the Ryzen's
    Raphael iGPU (0x164e, 67108864 B); bus ids not in the capture (03:00.0 and 7c:00.0 here)."""
    root = fresh(out, "navi21-raphael")
    with open(os.path.join(REAL, "localai-7761-navi21-raphael.csv")) as fh:
        rows = [line.strip().split(",") for line in fh if line.startswith("card")]
    for bdf, row in zip(("0000:03:00.0", "0000:7c:00.0"), rows):
        gpu(root, bdf, row[5], VGA, (GEN4, "16", GEN4, "16"), 0, "0-31", vram=int(row[2]), card=int(row[0][4:]))
    return root


def rx7900xt(out):
    """marimo#9237: a Radeon RX 7900 XT (0x744c, 21458059264 B); bus id not in the capture."""
    root = fresh(out, "rx7900xt")
    c = card("marimo-9237-rx7900xt.json")
    gpu(root, "0000:03:00.0", c["Card Model"], VGA, (GEN4, "16", GEN4, "16"), 0, "0-23",
        vram=int(c["VRAM Total Memory (B)"]), card=0)
    return root


def hygon_k100(out):
    """gpustack#2032: Hygon K100_AI DCUs (vendor 0x1d94, device 0x6210, unique ids of the capture);
    bus ids not in the capture (the excerpt's first two cards at 0000:41:00.0 and 0000:81:00.0
    here); no VRAM file, so hy-smi's "vram Total Memory (MiB)" must fill it."""
    root = fresh(out, "hygon-k100ai")
    with open(os.path.join(REAL, "gpustack-2032-hy-smi-k100ai.json")) as fh:
        cards = json.load(fh)
    for i, bdf in enumerate(("0000:41:00.0", "0000:81:00.0")):
        c = cards["card%d" % i]
        gpu(root, bdf, c["Device ID"], DISPLAY, (GEN4, "16", GEN4, "16"), i, "0-31" if i == 0 else "32-63",
            vendor="0x1d94", unique_id=c["Unique ID"], card=i)
    return root


def mi300x_cpx(out):
    """ROCm#4750: 8x MI300X in CPX mode, 64 logical devices: rocm-smi's VRAM total of each is the
    package's 206141652992 B (mem_info_vram_total), KFD's mem_banks of a partition 25767706624 B.
    Bus ids are not in the capture; the KFD nodes of a package carry location_id | partition
    (kfd_topology.c) and XGMI io_links to every partition of the other packages (56 each)."""
    root = fresh(out, "mi300x-cpx-real")
    buses = ["0000:%02x:00.0" % b for b in (0x05, 0x15, 0x65, 0x75, 0x85, 0x95, 0xe5, 0xf5)]
    for i, bdf in enumerate(buses):
        gpu(root, bdf, "0x74a1", ACCEL, (GEN5, "16", GEN5, "16"), i // 4, "0-47" if i < 4 else "48-95",
            vram=206141652992, card=i, partition="CPX\0", isolation=8)
    base = "/sys/class/kfd/kfd/topology/nodes/"
    for n in range(2):
        w(root, base + "%d/properties" % n, "cpu_cores_count 48\nsimd_count 0\nlocation_id 0\ndomain 0")

    def node(pkg, part):
        return 2 + pkg * 8 + part
    for pkg, bdf in enumerate(buses):
        dom, loc = location(bdf)
        for part in range(8):
            n = node(pkg, part)
            w(root, base + "%d/properties" % n, "cpu_cores_count 0\nsimd_count 152\nlocation_id %d\ndomain %d"
              % (loc | part, dom))
            w(root, base + "%d/mem_banks/0/properties" % n,
              "heap_type 1\nsize_in_bytes 25767706624\nflags 0\nwidth 8192\nmem_clk_max 1300")
            links = [(2, pkg // 4)] + [(11, node(other, p)) for other in range(8) if other != pkg for p in range(8)]
            for k, (typ, to) in enumerate(links):
                w(root, base + "%d/io_links/%d/properties" % (n, k),
                  "type %d\nversion_major 0\nnode_from %d\nnode_to %d\nweight 15" % (typ, n, to))
    return root


def build_all(out):
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    return [from_rocm_smi(out, "rx6700xt", "telegraf-rx6700xt_rocm612.json", "0x73df", VGA),
            from_rocm_smi(out, "mi50-vega20", "telegraf-vega-20-WKS-GL-XE.json"),
            from_rocm_smi(out, "vega10-xt", "telegraf-vega-10-XT.json", cls=VGA),
            mi250x_hpe(out), apu_780m(out), navi21_raphael(out), rx7900xt(out), hygon_k100(out), mi300x_cpx(out)]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_real_trees.py OUTDIR")
    for path in build_all(sys.argv[1]):
        print(path)
