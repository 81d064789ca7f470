"""nvidia-smi parsers against every real capture in tests/data/real/nvidia-smi-*."""
import pytest

from ansible_collections.dlrack.node.plugins.module_utils.parsers import ParseError
from ansible_collections.dlrack.node.plugins.module_utils.parsers import nvidia_smi as nv

from realdata import ids, read, real  # tests/realdata.py

XML = real("nvidia-smi-q-xml")
CSV = real("nvidia-smi-query-gpu-csv")
TOPO = real("nvidia-smi-topo")
QTEXT = real("nvidia-smi-q-text")

# file -> [(model, bus id, memory MiB, width, width_max, gen, gen_max, ecc current, mig current)]
XML_EXPECTED = {
    "telegraf-a100-sxm4-v12.xml": [("NVIDIA A100-SXM4-80GB", "0000:01:00.0", 81920, 16, 16, 4, 4, True, True)],
    "telegraf-a10g.xml": [("NVIDIA A10G", "0000:00:1e.0", 23028, 8, 16, 1, 4, True, None)],
    "telegraf-tesla-t4.xml": [("Tesla T4", "0000:00:1e.0", 15360, 8, 16, 3, 3, True, None)],
    "telegraf-tesla_p4.xml": [("GRID P4-1Q", "0000:00:0b.0", 1024, None, None, None, None, None, None)],
    "telegraf-dual_a5000-v13.xml": [("NVIDIA RTX A5000", "0000:81:00.0", 24564, 16, 16, 1, 4, False, None),
                                    ("NVIDIA RTX A5000", "0000:c1:00.0", 24564, 16, 16, 1, 4, False, None)],
    "telegraf-pro-6000-maxq-blackwell-v13.xml": [
        ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "0000:61:00.0", 97887, 16, 16, 1, 4, False, None)],
    "telegraf-rtx-4000-sff-ada-v13.xml": [("NVIDIA RTX 4000 SFF Ada Generation", "0000:06:00.0", 20475, 16, 16, 1, 4, False, None)],
    "telegraf-dual_2070-v13.xml": [("NVIDIA GeForce RTX 2070", "0000:01:00.0", 8192, 8, 16, 1, 3, None, None),
                                   ("NVIDIA GeForce RTX 2070", "0000:02:00.0", 8192, 8, 16, 1, 3, None, None)],
    "telegraf-dual_2080-v13.xml": [("NVIDIA GeForce RTX 2080", "0000:01:00.0", 8192, 8, 16, 1, 3, None, None),
                                   ("NVIDIA GeForce RTX 2080", "0000:02:00.0", 8192, 8, 16, 1, 3, None, None)],
    "telegraf-3090-v13.xml": [("NVIDIA GeForce RTX 3090", "0000:09:00.0", 24576, 16, 16, 1, 4, None, None)],
    "telegraf-rtx-3090-v12.xml": [("NVIDIA GeForce RTX 3090", "0000:00:10.0", 24576, 16, 16, 1, 4, None, None)],
    "telegraf-rtx-3080-v12.xml": [("NVIDIA GeForce RTX 3080", "0000:04:00.0", 10240, 16, 16, 4, 4, None, None)],
    "telegraf-rtx-3080-v13.xml": [("NVIDIA GeForce RTX 3080", "0000:0c:00.0", 10240, 16, 16, 4, 4, None, None)],
    "telegraf-rtx-3060-v12.xml": [("NVIDIA GeForce RTX 3060", "0000:2d:00.0", 12288, 16, 16, 1, 4, None, None)],
    "telegraf-quadro-p2000-v12.xml": [("Quadro P2000", "0000:17:00.0", 5120, 8, 16, 1, 3, None, None)],
    "telegraf-quadro-p400.xml": [("Quadro P400", "0000:43:00.0", 1998, 16, 16, 1, 3, None, None)],
    "telegraf-gtx-1660-ti.xml": [("Graphics Device", "0000:43:00.0", 5912, 16, 16, 1, 3, None, None)],
    "telegraf-gt-1030.xml": [("NVIDIA GeForce GT 1030", "0000:2d:00.0", 1998, 4, 4, 3, 3, None, None)],
}


def test_every_xml_capture_has_expectations():
    assert sorted(XML_EXPECTED) == sorted(ids(XML))


@pytest.mark.parametrize("path", XML, ids=ids(XML))
def test_xml_real(path):
    out = nv.parse_xml(read(path))
    got = [(g["product_name"], g["pci_bus_id"], g["memory_total_mib"], g["pcie"]["width"],
            g["pcie"]["width_max"], g["pcie"]["gen"], g["pcie"]["gen_max"], g["ecc_mode"]["current"],
            g["mig_mode"]["current"]) for g in out["gpus"]]
    assert got == XML_EXPECTED[path.rsplit("/", 1)[-1]]
    assert [g["index"] for g in out["gpus"]] == list(range(len(got)))


def test_xml_details():
    a100 = nv.parse_xml(read(real("nvidia-smi-q-xml", "telegraf-a100-sxm4-v12.xml")))
    g = a100["gpus"][0]
    assert a100["driver_version"] == "535.54.03"
    assert g["uuid"] == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert g["virtualization_mode"] == "None"
    assert g["ecc_mode"] == {"current": True, "pending": True}
    assert g["ecc_errors"]["volatile_corrected"] == 0 and g["ecc_errors"]["aggregate_uncorrected"] == 0
    assert g["ecc_errors"]["volatile"]["dram_uncorrectable"] == 0
    assert g["remapped_rows"] is None  # <remapped_rows>N/A</remapped_rows>
    a10g = nv.parse_xml(read(real("nvidia-smi-q-xml", "telegraf-a10g.xml")))["gpus"][0]
    assert a10g["virtualization_mode"] == "Pass-Through"
    assert a10g["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    t4 = nv.parse_xml(read(real("nvidia-smi-q-xml", "telegraf-tesla-t4.xml")))["gpus"][0]
    assert t4["retired_pages"] == {"single_bit": 0, "double_bit": 0, "pending": False}
    p4 = nv.parse_xml(read(real("nvidia-smi-q-xml", "telegraf-tesla_p4.xml")))["gpus"][0]
    assert p4["virtualization_mode"] == "VGPU"
    pro = nv.parse_xml(read(real("nvidia-smi-q-xml", "telegraf-pro-6000-maxq-blackwell-v13.xml")))["gpus"][0]
    assert pro["pcie"]["gen_host_max"] == 4 and pro["pcie"]["gen_device_max"] == 5
    old = nv.parse_xml(read(real("nvidia-smi-q-xml", "telegraf-quadro-p400.xml")))["gpus"][0]
    assert "single_bit_total" in old["ecc_errors"]["volatile"]  # old nested schema flattened


@pytest.mark.parametrize("bad", ["", "   ", "<nvidia_smi_log>", "<foo/>", "not xml at all",
                                 "<nvidia_smi_log><gpu><pci><pci_bus_id>zz</pci_bus_id></pci></gpu></nvidia_smi_log>"])
def test_xml_garbage(bad):
    with pytest.raises(ParseError):
        nv.parse_xml(bad)


CSV_EXPECTED = {
    "h100-sxm-80gb": ("NVIDIA H100 80GB HBM3", "0000:00:09.0", 81559, 16, 16, 5, 5, None, True, False),
    "h100-80gb-mig": ("NVIDIA H100 80GB HBM3", "0000:00:09.0", 81559, 16, 16, 5, 5, None, True, True),
    "h200-1gpu": ("NVIDIA H200", "0000:83:00.0", 143771, 16, 16, 5, 5, None, True, False),
    "h200-mig": ("NVIDIA H200", "0000:83:00.0", 143771, 16, 16, 5, 5, None, True, True),
    "l40s": ("NVIDIA L40S", "0000:01:00.0", 46068, 16, 16, 4, 4, None, True, None),
    "rtx2080super": ("NVIDIA GeForce RTX 2080 SUPER", "0000:0c:00.0", 8192, 16, 16, None, 3, 4, None, None),
    "rtx4080super": ("NVIDIA GeForce RTX 4080 SUPER", "0000:01:00.0", 16376, 16, 16, None, 4, 5, None, None),
}


@pytest.mark.parametrize("path", CSV, ids=ids(CSV))
def test_csv_real(path):
    rows = nv.parse_query_gpu_csv(read(path))
    assert len(rows) == 1
    g = nv.gpus_from_csv(rows)[0]
    name = path.rsplit("/", 1)[-1]
    if name.startswith("netdata"):
        assert g["product_name"] == "Tesla P100-PCIE-16GB"
        assert g["uuid"] == "GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6"
        assert rows[0]["fan.speed"] is None and rows[0]["memory.free"] == "16280"
        return
    key = [k for k in CSV_EXPECTED if k in name]
    assert len(key) == 1
    exp = CSV_EXPECTED[key[0]]
    got = (g["product_name"], g["pci_bus_id"], g["memory_total_mib"], g["pcie"]["width"],
           g["pcie"]["width_max"], None, g["pcie"]["gen_max"], g["pcie"]["gen_host_max"],
           g["ecc_mode"]["current"], g["mig_mode"]["current"])
    assert got[:5] == exp[:5] and got[6:] == exp[6:]
    if "rtx2080super" in name:  # idle gen 1 vs load gen 3
        assert g["pcie"]["gen"] == (1 if "idle" in name else 3)
    if "rtx4080super" in name:
        assert g["pcie"]["gen"] == (1 if "idle" in name else 4)


def test_csv_units_and_na():
    text = "index, name, memory.total [MiB], ecc.mode.current\n0, NVIDIA H100, 81559 MiB, [N/A]"
    rows = nv.parse_query_gpu_csv(text)
    assert rows == [{"index": "0", "name": "NVIDIA H100", "memory.total": "81559", "ecc.mode.current": None}]


@pytest.mark.parametrize("bad", ["", "index, name\n0", "foo bar, [x\n1, 2", "a,b\n1,2"])
def test_csv_garbage(bad):
    with pytest.raises(ParseError):
        nv.parse_query_gpu_csv(bad)


TOPO_EXPECTED = {
    "stelline-esc8000a-e12-4x-rtx6000ada-2s-epyc9374f-spaces.txt": (
        4, {"GPU0": ("0-31", 0), "GPU2": ("32-63", 1)}, ("GPU0", "GPU1", "NODE"), ("GPU0", "GPU2", "SYS"), False),
    "stelline-puget-wrx90-2gpu-threadripper-pro.txt": (2, {"GPU1": ("0-23", 0)}, ("GPU0", "GPU1", "PHB"), None, False),
    "dlperf-dgx1-like-8x-v100-sxm2-32gb-2s-xeon6271c-tabs.txt": (
        8, {"GPU0": ("0-23,48-71", 0), "GPU7": ("24-47,72-95", 1)}, ("GPU0", "GPU2", "NV2"), ("GPU4", "GPU5", "NV2"), True),
    "dlperf-8x-v100-sxm2-16gb-2s-xeon5118-no-numa-col-spaces.txt": (
        8, {"GPU0": ("0-11,24-35", None), "GPU4": ("12-23,36-47", None)}, ("GPU0", "GPU3", "NV2"), ("GPU0", "GPU5", "SYS"), True),
    "club3090-issue46-5gpu-2numa-4090-mixed-spaces.txt": (
        5, {"GPU0": ("8-15,24-31", 1), "GPU1": ("0-7,16-23", 0)}, ("GPU1", "GPU2", "PHB"), ("GPU0", "GPU4", "SYS"), False),
    "club3090-issue1229-2x-rtx5090-phb-tabs.txt": (2, {"GPU0": ("0-63", 0)}, ("GPU0", "GPU1", "PHB"), None, False),
    "club3090-issue1125-2gpu-node-indented-wrapped-legend.txt": (2, {"GPU1": ("0-15", 0)}, ("GPU0", "GPU1", "NODE"), None, False),
    "utkuozdemir-h100-80gb-mig-1gpu-vm-drv590.txt": (1, {"GPU0": ("0-19", 0)}, None, None, False),
    "utkuozdemir-h100-sxm-80gb-1gpu-vm-drv590.txt": (1, {"GPU0": ("0-19", 0)}, None, None, False),
    "utkuozdemir-h200-1gpu-vm-drv590.txt": (1, {"GPU0": ("0-23", 0)}, None, None, False),
    "utkuozdemir-h200-mig-1gpu-vm-drv590.txt": (1, {"GPU0": ("0-23", 0)}, None, None, False),
    "utkuozdemir-l40s-1gpu-vm-drv595.txt": (1, {"GPU0": ("0-7", 0)}, None, None, False),
    "utkuozdemir-rtx2080super-desktop-drv595.txt": (1, {"GPU0": ("0-23", 0)}, None, None, False),
    "utkuozdemir-rtx4080super-desktop-drv595.txt": (1, {"GPU0": ("0-15", 0)}, None, None, False),
}


def test_every_topo_capture_has_expectations():
    assert sorted(TOPO_EXPECTED) == sorted(ids(TOPO))


@pytest.mark.parametrize("path", TOPO, ids=ids(TOPO))
def test_topo_real(path):
    out = nv.parse_topo(read(path))
    n, aff, link1, link2, nvlink = TOPO_EXPECTED[path.rsplit("/", 1)[-1]]
    assert len(out["gpus"]) == n
    by = dict((g["name"], g) for g in out["gpus"])
    for name, (cpus, numa) in aff.items():
        assert (by[name]["cpu_affinity"], by[name]["numa_affinity"]) == (cpus, numa)
    for link in (link1, link2):
        if link:
            assert out["gpu_links"][link[0]][link[1]] == link[2]
            assert out["gpu_links"][link[1]][link[0]] == link[2]
    assert out["nvlink"] is nvlink


def test_topo_nic_legend():
    out = nv.parse_topo(read(real("nvidia-smi-topo", "stelline-esc8000a-e12-4x-rtx6000ada-2s-epyc9374f-spaces.txt")))
    assert out["nics"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1", "NIC2": "mlx5_2", "NIC3": "mlx5_3"}
    assert out["gpus"][0]["links"]["NIC0"] == "NODE"


@pytest.mark.parametrize("bad", ["", "Legend:\n X = Self", "\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU7 X",
                                 "\tGPU0\tCPU Affinity\nGPU0\t X \t0-7-3", "\tGPU0\nGPU0\tQQQQQ"])
def test_topo_garbage(bad):
    with pytest.raises(ParseError):
        nv.parse_topo(bad)


Q_EXPECTED = {
    "h100-80gb-mig": ("NVIDIA H100 80GB HBM3", "0000:00:09.0", 81559, 16, 5, True, True, "Pass-Through"),
    "h100-sxm-80gb": ("NVIDIA H100 80GB HBM3", "0000:00:09.0", 81559, 16, 5, True, False, "Pass-Through"),
    "h200-1gpu": ("NVIDIA H200", "0000:83:00.0", 143771, 16, 5, True, False, "Pass-Through"),
    "h200-mig": ("NVIDIA H200", "0000:83:00.0", 143771, 16, 5, True, True, "Pass-Through"),
    "l40s": ("NVIDIA L40S", "0000:01:00.0", 46068, 16, 4, True, None, "Pass-Through"),
    "rtx2080super": ("NVIDIA GeForce RTX 2080 SUPER", "0000:0c:00.0", 8192, 16, 1, None, None, "None"),
    "rtx4080super": ("NVIDIA GeForce RTX 4080 SUPER", "0000:01:00.0", 16376, 16, 1, None, None, "None"),
}


@pytest.mark.parametrize("path", QTEXT, ids=ids(QTEXT))
def test_q_text_real(path):
    out = nv.parse_q_text(read(path))
    assert len(out["gpus"]) == out["attached_gpus"] == 1
    g = out["gpus"][0]
    key = [k for k in Q_EXPECTED if k in path.rsplit("/", 1)[-1]][0]
    assert (g["product_name"], g["pci_bus_id"], g["memory_total_mib"], g["pcie"]["width"], g["pcie"]["gen"],
            g["ecc_mode"]["current"], g["mig_mode"]["current"], g["virtualization_mode"]) == Q_EXPECTED[key]
    if g["ecc_mode"]["current"]:
        assert g["ecc_errors"]["aggregate_uncorrected"] == 0


def test_q_text_equals_csv_for_same_machine():
    q = nv.parse_q_text(read(real("nvidia-smi-q-text", "utkuozdemir-h200-1gpu-vm-drv590-idle.txt")))["gpus"][0]
    c = nv.gpus_from_csv(nv.parse_query_gpu_csv(read(real("nvidia-smi-query-gpu-csv", "utkuozdemir-h200-1gpu-vm-drv590-idle.csv"))))[0]
    for key in ("product_name", "pci_bus_id", "memory_total_mib"):
        assert q[key] == c[key]
    assert q["pcie"]["width"] == c["pcie"]["width"] and q["pcie"]["gen_max"] == c["pcie"]["gen_max"]


@pytest.mark.parametrize("bad", ["", "hello world", "GPU zz:yy\n  Product Name : x"])
def test_q_text_garbage(bad):
    with pytest.raises(ParseError):
        nv.parse_q_text(bad)
