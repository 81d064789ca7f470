"""nvidia-smi parsers against every real capture in tests/data/real/nvidia-smi-{q-xml,nvlink}."""
import pytest

from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import nvidia_smi as nv

import os

from realdata import ids, read, real  # tests/realdata.py

XML = real("nvidia-smi-q-xml")
NVLINK = real("nvidia-smi-nvlink")

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


# file -> [(index, active links, note)] ; the UUIDs are masked by the capture's collector
NVLINK_EXPECTED = {
    "utkuozdemir-h100-sxm-80gb-1gpu-vm-drv590.txt": [(0, 18, None)],
    "utkuozdemir-h200-1gpu-vm-drv590.txt": [(0, 18, None)],
    "utkuozdemir-h100-80gb-mig-1gpu-vm-drv590.txt": [
        (0, None, "Nvlink queries are not supported for Devices in MIG mode")],
    "utkuozdemir-h200-mig-1gpu-vm-drv590.txt": [
        (0, None, "Nvlink queries are not supported for Devices in MIG mode")],
    "utkuozdemir-l40s-1gpu-vm-drv595.txt": [(0, 0, "Device does not have or support Nvlink")],
    "utkuozdemir-rtx4080super-desktop-drv595.txt": [(0, 0, "Device does not have or support Nvlink")],
    "utkuozdemir-rtx2080super-desktop-drv595.txt": [
        (0, 0, "NVML: Unable to retrieve Nvlink information as all links are inActive")],
    "h200-vm-pcie-drv580-empty.txt": [],
}


def test_every_nvlink_capture_has_expectations():
    assert sorted(NVLINK_EXPECTED) == sorted(ids(NVLINK))


@pytest.mark.parametrize("path", NVLINK, ids=ids(NVLINK))
def test_nvlink_real(path):
    out = nv.parse_nvlink_status(read(path))
    assert [(g["index"], g["active"], g["note"]) for g in out] == NVLINK_EXPECTED[os.path.basename(path)]
    for g in out:
        assert g["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
    if out and out[0]["active"]:
        assert out[0]["name"] in ("NVIDIA H100 80GB HBM3", "NVIDIA H200")
        assert out[0]["links"] == dict((n, 26.562) for n in range(18))


def test_nvlink_inactive_links_and_several_gpus():
    # two real blocks (H200 SXM, RTX 2080 SUPER) as nvidia-smi prints several GPUs: one after
    # the other; one H200 link marked inactive the way nvidia-smi prints it
    h200 = read(real("nvidia-smi-nvlink", "utkuozdemir-h200-1gpu-vm-drv590.txt"))
    h200 = h200.replace("Link 17: 26.562 GB/s", "Link 17: <inactive>")
    rtx = read(real("nvidia-smi-nvlink", "utkuozdemir-rtx2080super-desktop-drv595.txt")).replace("GPU 0:", "GPU 1:")
    out = nv.parse_nvlink_status(h200 + rtx)
    assert [(g["index"], g["active"]) for g in out] == [(0, 17), (1, 0)]
    assert out[0]["links"][17] is None


@pytest.mark.parametrize("bad", ["\t Link 0: 26.562 GB/s", "hello\nGPU 0: X (UUID: GPU-1)",
                                 "GPU 0: X (UUID: GPU-1)\nGPU 0: X (UUID: GPU-1)"])
def test_nvlink_garbage(bad):
    with pytest.raises(ParseError):
        nv.parse_nvlink_status(bad)
