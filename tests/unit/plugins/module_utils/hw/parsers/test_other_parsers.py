"""dmidecode and sysfs PCIe link readers against every real capture."""
import pytest

from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import dmidecode, sysfs_pci

import os

from realdata import ids, read, real  # tests/realdata.py


DMI = real("dmidecode")
# file -> (ecc, product, installed DIMMs, installed MiB, (total width, data width), populated CPU version)
DMI_EXPECTED = {
    "linuxhw-hpe-cray-xd665-gpu-server-2s-epyc9354-ddr5-multibit-ecc.txt":
        ("multi-bit", "HPE Cray SC XD665", 24, 24 * 65536, (80, 64), "AMD EPYC 9354 32-Core Processor"),
    "linuxhw-supermicro-as4124gs-tnr-8gpu-2s-epyc7763-ddr4-multibit-ecc.txt":
        ("multi-bit", "AS -4124GS-TNR", 16, 16 * 65536, (72, 64), "AMD EPYC 7763 64-Core Processor"),
    "linuxhw-gigabyte-g482-z54-8gpu-2s-epyc7302-ddr4-multibit-ecc.txt":
        ("multi-bit", "G482-Z54-00", 16, 16 * 16384, (72, 64), "AMD EPYC 7302 16-Core Processor"),
    "linuxhw-asus-esc8000g4-8gpu-server-2s-xeon4214-single-bit-ecc.txt":
        ("single-bit", "ESC8000 G4", 8, 8 * 32768, (72, 64), "Intel(R) Xeon(R) Silver 4214 CPU @ 2.20GHz"),
    "linuxhw-supermicro-sys4029gp-trt-8gpu-2s-xeon4210-single-bit-ecc.txt":
        ("single-bit", "SYS-4029GP-TRT", 4, 4 * 32768, (72, 64), "Intel(R) Xeon(R) Silver 4210 CPU @ 2.20GHz"),
    "linuxhw-asus-esc4000a-e10-4gpu-1s-epyc7453-multibit-ecc.txt": ("multi-bit", "ESC4000A-E10", 8, 8 * 65536, (72, 64), "AMD EPYC 7453 28-Core Processor"),
    "linuxhw-gigabyte-g242-z11-4gpu-1s-epyc7742-multibit-ecc.txt": ("multi-bit", "G242-Z11-00", 8, 8 * 65536, (72, 64), "AMD EPYC 7742 64-Core Processor"),
    "linuxhw-asrockrack-b650d4u-1s-epyc4344p-ddr5-ecc-none.txt": ("none", None, 4, 4 * 49152, (64, 64), "AMD EPYC 4344P 8-Core Processor"),
    "netbox-agent-Dell_PowerEdge_M630.txt": ("multi-bit", "PowerEdge M630", 8, 65536, (72, 64), "Intel(R) Xeon(R) CPU E5-2683 v3 @ 2.00GHz"),
    "netbox-agent-Dell_DSS7500.txt": ("multi-bit", "DSS7500", 12, 196608, (72, 64), "Intel(R) Xeon(R) CPU E5-2630 v4 @ 2.20GHz"),
    "netbox-agent-HP_BL460c_Gen10.txt": ("multi-bit", "ProLiant BL460c Gen10", 4, 65536, (72, 64), "Intel(R) Xeon(R) Gold 6126 CPU @ 2.60GHz"),
    "netbox-agent-HP_ProLiant_BL460c_Gen10_Graphics_Exp.txt":
        ("multi-bit", "ProLiant BL460c Gen10 Graphics Exp", 4, 131072, (72, 64), "Intel(R) Xeon(R) Gold 6132 CPU @ 2.60GHz"),
    "netbox-agent-HP_DL380p_Gen8.txt": ("single-bit", "ProLiant DL380p Gen8", 10, 65536, (72, 64), "Intel(R) Xeon(R) CPU E5-2620 0 @ 2.00GHz"),
    "netbox-agent-SM_SYS-6018R.txt": ("multi-bit", "SYS-6018R-TDTPR", 4, 65536, (72, 64), "Intel(R) Xeon(R) CPU E5-2630 v4 @ 2.20GHz"),
    "netbox-agent-SM_SSG-6028R.txt": ("multi-bit", "SSG-6028R-OSD072P", 4, 65536, (72, 72), "Intel(R) Xeon(R) CPU E5-2620 v4 @ 2.10GHz"),
    "netbox-agent-QCT_X10E-9N.txt": ("single-bit", "QuantaMicro X10E-9N", 2, 32768, (72, 64), "Intel(R) Xeon(R) CPU E3-1240 v6 @ 3.70GHz"),
    "netbox-agent-unknown-desktop-nonecc.txt": ("none", "SR", 4, 32768, (None, None), "Intel(R) Atom(TM) CPU C2750 @ 2.40GHz"),
}


def test_every_dmidecode_capture_has_expectations():
    assert sorted(DMI_EXPECTED) == sorted(ids(DMI))


@pytest.mark.parametrize("path", DMI, ids=ids(DMI))
def test_dmidecode_real(path):
    r = dmidecode.parse_dmidecode(read(path))
    ecc, product, n, total, widths, cpu = DMI_EXPECTED[path.rsplit("/", 1)[-1]]
    inst = dmidecode.installed_dimms(r)
    assert r["ecc"] == ecc
    assert (r["system"] or {}).get("product_name") == product
    assert len(inst) == n and sum(d["size_mb"] for d in inst) == total
    assert set((d["total_width"], d["data_width"]) for d in inst) == set([widths])
    assert cpu in [p["version"] for p in r["processors"] if p["populated"]]


def test_dmidecode_ecc_words():
    assert dmidecode.normalize_ecc("Multi-bit ECC") == "multi-bit"
    assert dmidecode.normalize_ecc("Single-bit ECC") == "single-bit"
    assert dmidecode.normalize_ecc("None") == "none"
    assert dmidecode.normalize_ecc("Parity") == "unknown"
    assert dmidecode.parse_size_mb("16384 MB") == 16384 and dmidecode.parse_size_mb("64 GB") == 65536
    assert dmidecode.parse_size_mb("No Module Installed") is None


def test_dmidecode_a_flash_array_device_is_not_ram():
    """A BIOS flash chip (type 17 in a 'Flash Memory' array) is not installed RAM; ECC stays the
    System Memory array's. Built from a real capture (tests/data/dmidecode/README.md)."""
    from testpaths import DATA
    r = dmidecode.parse_dmidecode(read(os.path.join(DATA, "dmidecode", "supermicro-as4124gs-tnr-with-bios-flash-array.txt")))
    inst = dmidecode.installed_dimms(r)
    assert len(inst) == 16 and sum(d["size_mb"] for d in inst) == 16 * 65536
    assert all(d["system_memory"] for d in inst) and r["ecc"] == "multi-bit"
    flash = [d for d in r["dimms"] if d["array_handle"] == "0x00F0"]
    assert [(d["size_mb"], d["type"], d["system_memory"]) for d in flash] == [(16, "Flash", False)]
    assert [a["use"] for a in r["memory_arrays"]] == ["System Memory", "Flash Memory"]


def test_dmidecode_devices_without_a_known_array_still_count():
    """'dmidecode -t 17' alone (no type 16) or a handle that names no array: the device counts."""
    dev = ("Handle 0x0011, DMI type 17, 40 bytes\nMemory Device\n\tArray Handle: %s\n\tTotal Width: 72 bits\n"
           "\tData Width: 64 bits\n\tSize: 32 GB\n\tLocator: A1\n\tType: DDR4\n\n")
    assert [d["size_mb"] for d in dmidecode.installed_dimms(dmidecode.parse_dmidecode(dev % "0x0010"))] == [32768]
    arr = ("Handle 0x0010, DMI type 16, 23 bytes\nPhysical Memory Array\n\tUse: Flash Memory\n"
           "\tError Correction Type: None\n\tNumber Of Devices: 1\n\n")
    # the only array is a flash array: like the ECC judgement, all arrays then count
    assert len(dmidecode.installed_dimms(dmidecode.parse_dmidecode(arr + dev % "0x0010"))) == 1
    assert len(dmidecode.installed_dimms(dmidecode.parse_dmidecode(arr + dev % "0x0099"))) == 1


@pytest.mark.parametrize("bad", ["", "# dmidecode 3.5\nNo SMBIOS nor DMI entry point found, sorry.", "garbage\n\tKey: value"])
def test_dmidecode_garbage(bad):
    with pytest.raises(ParseError):
        dmidecode.parse_dmidecode(bad)


def _tail_v_tree(tmp_path, capture):
    """Write the files of a real ``tail -v`` capture of one PCI device directory back into a
    directory, the way sysfs holds them; returns that directory."""
    dev, name = None, None
    for line in read(real("sysfs-pci-link", capture)).splitlines():
        if line.startswith("==> ") and line.endswith(" <=="):
            path = line[4:-4]
            dev = tmp_path / os.path.basename(os.path.dirname(path))
            dev.mkdir(exist_ok=True)
            name = os.path.basename(path)
        elif dev is not None and line.strip() and not (dev / name).exists():
            (dev / name).write_text(line + "\n")
    return str(dev)


def test_sysfs_read_link_x8_of_x16(tmp_path):
    dev = _tail_v_tree(tmp_path, "nokyan-resources-issue512-0000_01_00.0-width8-of-16-16GTs-of-32GTs.txt")
    assert sysfs_pci.read_link(dev) == {"width": 8, "width_max": 16, "gen": 4, "gen_max": 5, "speed_gts": 16.0,
                                        "speed_max_gts": 32.0, "width_degraded": True}
    dev = _tail_v_tree(tmp_path, "nokyan-resources-issue512-0000_03_00.0-width16-32GTs.txt")
    r = sysfs_pci.read_link(dev)
    assert r["width_degraded"] is False and r["gen"] == 5


def test_sysfs_link_values_unknown():
    r = sysfs_pci.link_from_values("Unknown", "0", "Unknown speed", "255")
    assert r == {"width": None, "width_max": None, "gen": None, "gen_max": None, "speed_gts": None,
                 "speed_max_gts": None, "width_degraded": None}


def test_sysfs_unreadable_link_file_is_noted(tmp_path):
    dev = _tail_v_tree(tmp_path, "nokyan-resources-issue512-0000_01_00.0-width8-of-16-16GTs-of-32GTs.txt")
    os.remove(os.path.join(dev, "max_link_width"))
    os.mkdir(os.path.join(dev, "max_link_width"))  # a directory: reading it fails with EISDIR
    errors = []
    r = sysfs_pci.read_link(dev, errors=errors, root=str(tmp_path))
    assert r["width"] == 8 and r["width_max"] is None and r["width_degraded"] is None
    assert errors == ["cannot read /0000:01:00.0/max_link_width: Is a directory"]
