"""The PCIe tree readers (module_utils/hw/pcie_tree.py, hw/parsers/lspci.py) on real whole-system captures
(tests/data/real/SOURCES.md, "pcie/"): the ASUS ESC8000A-E12's lspci -tv and lspci -vvv, hwloc's
DGX-2 export and its real sysfs capture of a 2-socket Xeon with an mlx4 HCA, and the real H200 VM's
sysfs attributes and config space."""
import os
import re
import tarfile

import pytest
from testpaths import DATA

from ansible_collections.dlrack.node.plugins.module_utils.hw import pcie_tree
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import lspci
from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_hw

PCIE = os.path.join(DATA, "real", "pcie")


def real(*parts):
    with open(os.path.join(DATA, "real", *parts)) as handle:
        return handle.read()


def esc8000a():
    return lspci.parse_lspci(real("pcie", "stelline-esc8000a-e12-lspci-vvv-8-devices.txt"),
                             real("pcie", "stelline-esc8000a-e12-lspci-tv.txt"))


def by_bdf(tree):
    return dict((d["bdf"], d) for d in tree["devices"])


def test_lspci_tv_parents_by_column():
    tv = lspci.parse_lspci_tv(real("pcie", "stelline-esc8000a-e12-lspci-tv.txt"))
    assert tv["0000:01:00.0"][:2] == ("0000:00:01.1", "0000:00")
    assert tv["0000:21:00.1"][:2] == ("0000:20:03.1", "0000:20")
    # two levels of switches down to an NVMe drive (bus 65), and the next port at the same column
    assert tv["0000:65:00.0"][0] == "0000:64:10.0"
    assert tv["0000:64:10.0"][0] == "0000:63:00.0"
    assert tv["0000:63:00.0"][0] == "0000:62:00.0"
    assert tv["0000:62:00.0"][0] == "0000:61:00.0"
    assert tv["0000:61:00.0"][0] == "0000:60:01.1"
    assert tv["0000:66:00.0"][0] == "0000:64:14.0"
    assert tv["0000:69:00.0"][0] == "0000:62:04.0"
    assert tv["0000:e2:00.0"][0] == "0000:e0:05.2"
    assert tv["0000:e1:00.0"][2] == "NVIDIA Corporation AD102GL [RTX 6000 Ada Generation]"
    assert len(tv) > 150


def test_lspci_whole_system_keeps_device_paths():
    tree = esc8000a()
    devs = by_bdf(tree)
    gpus = sorted(b for b, d in devs.items() if d["kind"] == "gpu")
    assert gpus == ["0000:01:00.0", "0000:41:00.0", "0000:c1:00.0", "0000:e1:00.0"]
    assert [devs[g]["numa_node"] for g in gpus] == [0, 0, 1, 1]
    gpu = devs["0000:01:00.0"]
    assert gpu["link"] == {"width": 16, "width_max": 16, "gen": 1, "gen_max": 4}   # idle 2.5 GT/s of 16
    assert gpu["parent"] == "0000:00:01.1" and gpu["port"] == "endpoint" and gpu["driver"] == "nvidia"
    assert [b["size"] for b in gpu["bars"]] == [16 << 20, 64 << 30, 32 << 20]
    assert gpu["rebar"][1] == {"index": 1, "size": 64 << 30, "max": 64 << 30}
    # the second ConnectX-7 function has no -vvv block: kind and RDMA from its sibling of the same name
    assert devs["0000:21:00.1"]["kind"] == "nic" and devs["0000:21:00.1"]["rdma"] is None
    # the Intel X710 is a NIC without RDMA; audio functions, AMD's own devices are dropped
    assert devs["0000:82:00.0"]["kind"] == "nic" and devs["0000:82:00.0"]["rdma"] == []
    assert "0000:01:00.1" not in devs and "0000:00:00.0" not in devs
    # the NVMe switch chain: ports inferred by position (no -vvv block for the bridges)
    assert [devs[b]["port"] for b in ("0000:60:01.1", "0000:61:00.0", "0000:62:00.0", "0000:63:00.0", "0000:64:10.0")] == \
        ["root", "upstream", "downstream", "upstream", "downstream"]
    assert devs["0000:65:00.0"]["kind"] == "nvme"
    assert devs["0000:71:00.0"]["link"] == {"width": 1, "width_max": 2, "gen": 2, "gen_max": 2}
    clean, problems = check_hw({"schema": 1, "source": "gathered", "pcie": tree})
    assert problems == [] and len(clean["pcie"]["devices"]) == len(tree["devices"])


def test_lspci_acs_lines_of_a_real_switch_port():
    """The PLX PEX8796 downstream port of an ESC8000 G4 (lspci -vvnn): ACS capable, all controls off."""
    tree = lspci.parse_lspci(real("lspci-vv", "linuxhw-esc8000g4-plx-pex8796-downstream-1b_14.0-lspci-vvnn.txt") + "\n" +
                             real("lspci-vv", "linuxhw-esc8000g4-rtx2080ti-1d_00.0-lspci-vvnn-behind-plx-idle-2.5GTs.txt"))
    devs = dict((d["bdf"], d) for d in tree["devices"])
    gpu = devs["0000:1d:00.0"]
    assert gpu["kind"] == "gpu" and gpu["vendor"] == "0x10de" and gpu["class"] == "0x0300"
    assert [b["size"] for b in gpu["bars"]] == [16 << 20, 256 << 20, 32 << 20]
    port_block = real("lspci-vv", "linuxhw-esc8000g4-plx-pex8796-downstream-1b_14.0-lspci-vvnn.txt")
    blocks = lspci._lspci_block(port_block.splitlines(), "0000")
    assert blocks["port"] == "downstream" and blocks["acs_readable"]
    assert blocks["acs"] == {"cap": list(pcie_tree.ACS_BITS), "ctl": []}
    assert blocks["link"] == {"width": 16, "width_max": 16, "gen": 1, "gen_max": 3}


def test_hwloc_dgx2_export():
    tree = lspci.parse_hwloc_xml(real("pcie", "hwloc-nvidiaDGX2.xml"))
    devs = by_bdf(tree)
    gpus = [d for d in tree["devices"] if d["kind"] == "gpu"]
    assert len(gpus) == 16
    assert [devs[b]["port"] for b in ("0000:2b:00.0", "0000:2c:00.0", "0000:2d:04.0", "0000:32:00.0", "0000:33:00.0")] == \
        ["root", "upstream", "downstream", "upstream", "downstream"]
    assert devs["0000:34:00.0"]["parent"] == "0000:33:00.0" and devs["0000:34:00.0"]["host_bridge"] == "0000:2b"
    assert sorted(set(g["numa_node"] for g in gpus)) == [0, 1]
    assert devs["0000:34:00.0"]["link_gbs"] == pytest.approx(15.753846)
    assert not any(d["kind"] == "nic" for d in tree["devices"])     # the export holds no NIC
    broken = lspci.parse_hwloc_xml("<topology><object")
    assert broken == {"source": "lspci", "devices": [], "iommu": None, "truncated": False}


def test_hwloc_xml_that_is_no_export_gives_the_empty_tree():
    """An export is read with the stdlib parser: entity declarations (memory blow-up on expat < 2.4),
    nesting deeper than any hwloc tree, a NUMA node whose os_index is no number and a file over the
    size bound give the empty tree or are passed over (before: RecursionError / ValueError / TypeError
    out of parse_hwloc_xml, and the entities expanded wherever expat does not refuse them)."""
    empty = {"source": "lspci", "devices": [], "iommu": None, "truncated": False}
    dgx2 = real("pcie", "hwloc-nvidiaDGX2.xml")
    entities = dgx2.replace('<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
                            '<!DOCTYPE topology [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]>', 1)
    assert entities != dgx2 and lspci.parse_hwloc_xml(entities) == empty
    deep = '<topology>' + '<object type="Group">' * 3000 + '</object>' * 3000 + '</topology>'
    assert lspci.parse_hwloc_xml(deep) == empty
    assert lspci.parse_hwloc_xml(dgx2 + " " * lspci.HWLOC_LIMIT) == empty
    # the DGX-2 export with the first NUMA node's os_index garbled, then removed: its GPUs lose their node only
    for attr in ('os_index="x"', ''):
        odd = re.sub(r'(<object type="NUMANode") os_index="0"', r'\1 ' + attr, dgx2, count=1)
        assert odd != dgx2
        gpus = [d for d in lspci.parse_hwloc_xml(odd)["devices"] if d["kind"] == "gpu"]
        assert len(gpus) == 16 and sorted(set(g["numa_node"] for g in gpus), key=str) == [1, None]


def hwloc_sysfs(tmp_path):
    with tarfile.open(os.path.join(PCIE, "hwloc-32em64t-2n8c-dax-nvme-mic-dimms.tar.bz2")) as tf:
        tf.extractall(str(tmp_path))
    return os.path.join(str(tmp_path), "32em64t-2n8c+1mic")


def test_read_sysfs_real_capture(tmp_path):
    errors = []
    tree = pcie_tree.read_sysfs(hwloc_sysfs(tmp_path), errors)
    devs = by_bdf(tree)
    hca = devs["0000:82:00.0"]
    assert hca["kind"] == "nic" and hca["rdma"] == ["mlx4_0"] and hca["driver"] == "mlx4_core"
    assert hca["parent"] == "0000:80:02.2" and hca["host_bridge"] == "0000:80" and hca["numa_node"] == 1
    assert hca["bars"] == [{"index": 0, "size": 1 << 20}, {"index": 2, "size": 8 << 20}]
    # 64 bytes of config space (an unprivileged read): ACS unknown, never "off"
    assert hca["config_bytes"] == 64 and hca["acs_readable"] is False
    assert devs["0000:80:02.2"]["port"] == "root" and devs["0000:80:02.2"]["port_inferred"]
    assert devs["0000:02:00.0"]["rdma"] == []            # an igb port: no RDMA
    assert devs["0000:00:02.0"]["kind"] == "nvme"
    assert not any(b.startswith("0000:7f:") or b.startswith("0000:ff:") for b in devs)   # uncore devices dropped
    assert tree["iommu"]["mode"] == "off" and errors == []


def h200_tree(tmp_path):
    """The real H200 VM tree with the GPU's and host bridge's captured config space and resource
    files written back as the kernel shows them (tests/data/real/SOURCES.md, pcie/h200-vm-*)."""
    with tarfile.open(os.path.join(DATA, "real", "h200-vm", "tree.tar.gz")) as tf:
        tf.extractall(str(tmp_path))
    root = os.path.join(str(tmp_path), "tree")
    for bdf in ("0000:00:06.0", "0000:00:00.0"):
        text = real("pcie", "h200-vm-2026-12-04-%s-sysfs-config.txt" % bdf.replace(":", "_"))
        config = bytearray()
        for line in text.split("config (hex):", 1)[1].splitlines():
            parts = line.split()
            if len(parts) > 1 and re.match(r"^[0-9a-f]{6}$", parts[0]):
                config += bytearray(int(x, 16) for x in parts[1:])
        resource = text.split("resource:", 1)[1].split("config (hex):", 1)[0].strip()
        devdir = os.path.join(root, "sys", "devices", "pci0000:00", bdf)
        if not os.path.isdir(devdir):
            continue
        with open(os.path.join(devdir, "config"), "wb") as handle:
            handle.write(bytes(config))
        with open(os.path.join(devdir, "resource"), "w") as handle:
            handle.write(resource + "\n")
    return root


def test_read_sysfs_h200_vm_flat(tmp_path):
    errors = []
    tree = pcie_tree.read_sysfs(h200_tree(tmp_path), errors)
    devs = by_bdf(tree)
    gpu = devs["0000:00:06.0"]
    assert gpu["kind"] == "gpu" and gpu["parent"] is None and gpu["host_bridge"] == "0000:00"
    assert gpu["link"] == {"width": 16, "width_max": 16, "gen": 5, "gen_max": 5}
    assert gpu["config_bytes"] == 4096 and gpu["port"] == "endpoint"
    assert gpu["acs_readable"] and gpu["acs"] == {"cap": [], "ctl": []}      # an endpoint has no ACS
    assert max(b["size"] for b in gpu["bars"]) == 256 << 30                    # BAR1 256 GiB (NVML says the same)
    assert gpu["rebar"] is None
    assert not [d for d in tree["devices"] if d["kind"] == "bridge"]          # a flat VM bus
    assert tree["iommu"]["mode"] == "off" and tree["iommu"]["groups"] == 0


def test_gather_puts_the_tree_into_dlrack_hw(tmp_path):
    doc = gather(h200_tree(tmp_path), subset=["gpus"], nvidia_smi="never", run_command=lambda argv: (1, "", ""))
    assert doc["pcie"]["source"] == "sysfs"
    assert [d["bdf"] for d in doc["pcie"]["devices"] if d["kind"] == "gpu"] == ["0000:00:06.0"]
    clean, problems = check_hw(doc)
    assert problems == [] and clean["pcie"]["iommu"]["mode"] == "off"


def test_iommu_modes_from_real_cmdlines():
    gb10 = real("iommu", "hwloc-nvidia-dgx-gb10-proc-cmdline.txt").split()
    relevant = [t for t in gb10 if t.split("=", 1)[0] in pcie_tree._CMDLINE_KEYS]
    assert relevant == ["iommu.passthrough=0"]
    assert pcie_tree.iommu_mode(12, ["smmu3.0x0000000016000000"], relevant, []) == "translated"
    assert pcie_tree.iommu_mode(12, ["dmar0"], [], ["DMA-FQ"]) == "translated"
    assert pcie_tree.iommu_mode(12, ["dmar0"], ["iommu=pt"], ["identity"]) == "passthrough"
    assert pcie_tree.iommu_mode(12, ["dmar0"], ["iommu=pt"], []) == "passthrough"
    assert pcie_tree.iommu_mode(0, [], [], []) == "off"
    assert pcie_tree.iommu_mode(12, ["dmar0"], [], []) == "unknown"


def test_config_space_garbage_is_unknown():
    assert pcie_tree.parse_config(bytearray(b"\xff" * 64))["port"] is None
    loop = bytearray(256)
    loop[0:2] = b"\x86\x80"
    loop[6] = 0x10
    loop[0x34] = 0x40
    loop[0x40:0x42] = b"\x01\x40"     # a capability pointing at itself: the walk is bounded
    assert pcie_tree.parse_config(loop)["config_bytes"] == 256
    assert pcie_tree.parse_resource("junk\n0x10 0x0f 0x0\n") == []


def test_hostile_sysfs_tree_never_raises(tmp_path):
    """A tree with a dangling device link, a GPU whose files are junk, an endless resource file and
    a config file of garbage: the GPU is kept with its unknowns None, nothing raises."""
    root = tmp_path
    dev = root / "sys" / "devices" / "pci0000:00" / "0000:00:01.0" / "0000:01:00.0"
    dev.mkdir(parents=True)
    (dev / "vendor").write_text("0x10de\n")
    (dev / "class").write_text("0x030200\n")
    (dev / "numa_node").write_text("\u00b2\n")
    (dev / "current_link_width").write_text("255\n")
    (dev / "resource").write_text("0xffffffffffffffff 0x0 0x0\n" * 5000)
    (dev / "config").write_bytes(b"\xde\x10" + b"\xff" * 300)
    (root / "sys" / "devices" / "pci0000:00" / "0000:00:01.0" / "vendor").write_text("0x8086\n")
    (root / "sys" / "devices" / "pci0000:00" / "0000:00:01.0" / "class").write_text("0x060400\n")
    links = root / "sys" / "bus" / "pci" / "devices"
    links.mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0", str(links / "0000:01:00.0"))
    os.symlink("../../../devices/pci0000:00/0000:00:01.0", str(links / "0000:00:01.0"))
    os.symlink("../../../devices/pci0000:00/nowhere", str(links / "0000:00:02.0"))
    os.symlink("../../../devices/pci0000:00/junk", str(links / "not-a-bdf"))
    errors = []
    tree = pcie_tree.read_sysfs(str(root), errors)
    devs = by_bdf(tree)
    gpu = devs["0000:01:00.0"]
    assert gpu["kind"] == "gpu" and gpu["parent"] == "0000:00:01.0" and gpu["numa_node"] is None
    assert gpu["link"]["width"] is None and gpu["bars"] == [] and gpu["acs"] == {"cap": [], "ctl": []}
    assert "0000:00:02.0" not in devs and devs["0000:00:01.0"]["port"] == "root"


def test_lspci_numa_node_of_non_ascii_digits_is_unknown():
    # changed: the first "NUMA node: 0" of the real ESC8000A-E12 -vvv output written as a superscript two
    vvv = real("pcie", "stelline-esc8000a-e12-lspci-vvv-8-devices.txt")
    odd = re.sub(r"NUMA node: [0-9]+", u"NUMA node: \u00b2", vvv, count=1)
    assert odd != vvv
    assert len(lspci.parse_lspci(odd)["devices"]) == len(lspci.parse_lspci(vvv)["devices"])
