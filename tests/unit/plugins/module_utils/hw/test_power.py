"""PSUs and GPU power limits (module_utils/hw/power.py) on real dmidecode tables and nvidia-smi XML
(tests/data/real/SOURCES.md: dmidecode/, nvidia-smi-q-xml/, pcie/h200-vm-*)."""
import os
import re
import struct

import pytest
from testpaths import DATA

from ansible_collections.dlrack.node.plugins.module_utils.hw import power


def real(*parts):
    with open(os.path.join(DATA, "real", *parts)) as handle:
        return handle.read()


def test_psus_of_an_8_gpu_server():
    psus = power.parse_psus(real("dmidecode", "linuxhw-supermicro-as4124gs-tnr-8gpu-2s-epyc7763-ddr4-multibit-ecc.txt"))
    assert [(p["location"], p["name"], p["capacity_w"], p["present"]) for p in psus] == \
        [("PSU%d" % i, "PWS-2K08A-1R", 2000.0, True) for i in (1, 2, 3, 4)]


@pytest.mark.parametrize("name, text", [
    ("linuxhw-asus-esc8000g4-8gpu-server-2s-xeon4214-single-bit-ecc.txt", "Unknown"),
    ("linuxhw-gigabyte-g482-z54-8gpu-2s-epyc7302-ddr4-multibit-ecc.txt", "0 W"),
])
def test_boards_that_do_not_fill_the_table(name, text):
    psus = power.parse_psus(real("dmidecode", name))
    assert len(psus) == 1 and psus[0]["capacity_w"] is None and psus[0]["capacity_text"] == text


def test_absent_psu_slots_are_not_present():
    psus = power.parse_psus(real("dmidecode", "netbox-agent-SM_SSG-6028R.txt"))
    assert [p["present"] for p in psus] == [True, True, False, False]


def smbios_39(location, name, watts, status, present=True):
    """A raw SMBIOS type 39 structure with the figures dmidecode decoded from a real table (SMBIOS
    3.x 7.40: capacity at 0x0C, characteristics at 0x0E, strings after the formatted area)."""
    chars = 0x1 | (0x2 if present else 0) | ({"OK": 3, "Unknown": 2, "Critical": 5}[status] << 7)
    body = struct.pack("<BBHBBBBBBBBHH", 39, 0x16, 0x0046, 1, 1, 2, 0, 0, 0, 0, 0,
                       0x8000 if watts is None else watts, chars) + b"\0" * 6
    return body + location.encode() + b"\0" + name.encode() + b"\0\0"


def test_raw_smbios_entries_read_like_dmidecode():
    text = real("dmidecode", "linuxhw-supermicro-as4124gs-tnr-8gpu-2s-epyc7763-ddr4-multibit-ecc.txt")
    want = power.parse_psus(text)[0]
    got = power.parse_smbios_39(smbios_39("PSU1", "PWS-2K08A-1R", 2000, "OK"))
    assert got == dict(want, status="Present, OK")
    unknown = power.parse_smbios_39(smbios_39("To Be Filled By O.E.M.", "To Be Filled By O.E.M.", None, "OK"))
    assert unknown["capacity_w"] is None and unknown["capacity_text"] == "Unknown"
    assert power.parse_smbios_39(b"\x11\x28" + b"\0" * 40) is None          # a type 17 entry
    assert power.parse_smbios_39(b"\x27\xff\0") is None                      # truncated


def test_smbios_entries_from_a_tree(tmp_path):
    for i, raw in enumerate([smbios_39("PSU1", "PWS-2K08A-1R", 2000, "OK"), smbios_39("PSU2", "PWS-2K08A-1R", 2000, "OK")]):
        entry = tmp_path / "sys" / "firmware" / "dmi" / "entries" / ("39-%d" % i)
        entry.mkdir(parents=True)
        (entry / "raw").write_bytes(raw)
    from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import listdir
    from ansible_collections.dlrack.node.plugins.module_utils.hw.pcie_tree import _read_bytes
    doc = power.gather_power(lambda argv: (1, "", ""), None, [], str(tmp_path), listdir, lambda p: _read_bytes(p, 4096))
    assert doc["source"] == "smbios" and [p["capacity_w"] for p in doc["psus"]] == [2000.0, 2000.0]
    empty = power.gather_power(lambda argv: (1, "", ""), None, [], str(tmp_path / "none"), listdir, lambda p: None)
    assert empty["psus"] is None and empty["source"] is None


def test_gpu_power_limits_from_xml():
    assert power.gpu_limits_from_xml(real("pcie", "h200-vm-2026-11-30-nvidia-smi-q-x.xml")) == \
        [{"pci_bus_id": "0000:00:06.0", "limit_w": 700.0, "default_w": 700.0, "max_w": 700.0}]
    two = power.gpu_limits_from_xml(real("nvidia-smi-q-xml", "telegraf-dual_a5000-v13.xml"))
    assert [g["pci_bus_id"] for g in two] == ["0000:81:00.0", "0000:c1:00.0"] and two[0]["limit_w"] == 230.0
    assert power.gpu_limits_from_xml(real("nvidia-smi-q-xml", "telegraf-quadro-p400.xml"))[0]["limit_w"] is None
    assert power.gpu_limits_from_xml("<nvidia_smi_log><gpu id=\"junk\"></gpu></nvidia_smi_log>") == []


def test_power_limits_come_from_the_xml_parser_the_versions_use():
    """One parser for ``nvidia-smi -q -x`` on the node side (hw/gpu/stack.smi_xml_root): output that
    declares entities is refused by both readers (the regular expressions before read the GPUs out of
    it; they also took minutes on 400 KB of unclosed ``<gpu id=...>`` tags, a parse is linear)."""
    from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import stack
    text = real("pcie", "h200-vm-2026-11-30-nvidia-smi-q-x.xml")
    assert [g["pci_bus_id"] for g in power.gpu_limits_from_xml(text)] == \
        [g["pci_bus_id"] for g in stack.parse_smi_versions(text)["gpus"]] == ["0000:00:06.0"]
    entities = re.sub(r"<!DOCTYPE nvidia_smi_log SYSTEM \"[^\"]+\">",
                      '<!DOCTYPE nvidia_smi_log [<!ENTITY w "700.00 W">]>', text, count=1)
    assert entities != text
    assert power.gpu_limits_from_xml(entities) == []
    with pytest.raises(stack.ParseError, match="entities"):
        stack.parse_smi_versions(entities)
