"""lscpu, dmidecode, lspci, sysfs PCIe link and numactl parsers against every real capture."""
import pytest

from ansible_collections.dlrack.node.plugins.module_utils.parsers import ParseError
from ansible_collections.dlrack.node.plugins.module_utils.parsers import dmidecode, lscpu, lspci, numactl, sysfs_pci

from realdata import ids, read, real  # tests/realdata.py


LSCPU = [p for p in real("lscpu") if not p.endswith("-lscpu-e.txt")]
# file -> (model, vendor, sockets, cores/socket, threads/core, physical cores, cpus, {node: cpus}, reliable)
LSCPU_EXPECTED = {
    "stelline-esc8000a-e12-2s-epyc9374f.txt": ("AMD EPYC 9374F 32-Core Processor", "amd", 2, 32, 1, 64, 64, {0: "0-31", 1: "32-63"}, True),
    "stelline-puget-wrx90-threadripper-pro-1s.txt": ("AMD Ryzen Threadripper PRO 7965WX 24-Cores", "amd", 1, 24, 1, 24, 24, {0: "0-23"}, True),
    "util-linux-expected-2s-epyc7451-8numa-with-parsable.txt":
        ("AMD EPYC 7451 24-Core Processor", "amd", 2, 24, 2, 48, 96, {0: "0-5,48-53", 7: "42-47,90-95"}, True),
    "util-linux-expected-4s-xeon-x7550-numa-stride-ranges-with-parsable.txt":
        ("Intel(R) Xeon(R) CPU X7550 @ 2.00GHz", "intel", 4, 8, 2, 32, 64,
         {0: ",".join(str(i) for i in range(0, 63, 2)),
          2: ",".join(str(i) for i in range(1, 62, 4)),
          3: ",".join(str(i) for i in range(3, 64, 4))}, True),
    "util-linux-expected-vmware-guest-with-parsable.txt": ("AMD Opteron(tm) Processor 6328", "amd", 2, 4, 2, 8, 16, {0: "0-3", 3: "12-15"}, True),
    "linuxhw-2s-epyc7742-smt-off.txt": ("AMD EPYC 7742 64-Core Processor", "amd", 2, 64, 1, 128, 128, {0: "0-63", 1: "64-127"}, True),
    "linuxhw-1s-xeon-gold6248.txt": ("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", "intel", 1, 20, 2, 20, 40, {0: "0-39"}, True),
    "linuxhw-xen-dom0-xeon-platinum8280-bogus-topology.txt":
        ("Intel(R) Xeon(R) Platinum 8280 CPU @ 2.70GHz", "intel", 1, 1, 112, None, 112, {0: "0-111"}, False),
    "jasongross-azure-vm-epyc7763-4vcpu.txt": ("AMD EPYC 7763 64-Core Processor", "amd", 1, 2, 2, 2, 4, {0: "0-3"}, True),
    "jdh4-princeton-traverse-2s-power9-4x-v100-gpu-numa-nodes-252-255.txt":
        ("POWER9, altivec supported", "other", 2, 16, 4, 32, 128, {0: "0-63", 8: "64-127", 252: "", 255: ""}, True),
}


def test_every_lscpu_capture_has_expectations():
    assert sorted(LSCPU_EXPECTED) == sorted(ids(LSCPU))


@pytest.mark.parametrize("path", LSCPU, ids=ids(LSCPU))
def test_lscpu_real(path):
    r = lscpu.parse_lscpu(read(path))
    model, vendor, sockets, cps, tpc, phys, cpus, nodes, reliable = LSCPU_EXPECTED[path.rsplit("/", 1)[-1]]
    assert (r["model_name"], r["vendor"], r["sockets"], r["cores_per_socket"], r["threads_per_core"],
            r["physical_cores"], r["cpus"], r["topology_reliable"]) == (model, vendor, sockets, cps, tpc, phys, cpus, reliable)
    got = dict((n["id"], n["cpus"]) for n in r["numa_nodes"])
    for nid, cl in nodes.items():
        assert got[nid] == cl


def test_lscpu_wrapped_flags_rejoined():
    r = lscpu.parse_lscpu(read(real("lscpu", "stelline-esc8000a-e12-2s-epyc9374f.txt")))
    for flag in ("amd_lbr_v2", "cmp_legacy", "hw_pstate", "clwb", "xsaveerptr", "rdpru", "debug_swap", "avx512f"):
        assert flag in r["flags"]
    assert "a" not in r["flags"] and "md_lbr_v2" not in r["flags"]


def test_lscpu_parsable_section():
    r = lscpu.parse_lscpu(read(real("lscpu", "util-linux-expected-2s-epyc7451-8numa-with-parsable.txt")))
    assert len(r["parsable"]) == 96
    assert r["parsable"][0] == {"cpu": 0, "core": 0, "socket": 0, "node": 0, "l1d": 0, "l1i": 0, "l2": 0, "l3": 0}
    x = lscpu.parse_lscpu(read(real("lscpu", "util-linux-expected-4s-xeon-x7550-numa-stride-ranges-with-parsable.txt")))
    assert x["numa_nodes"][0]["cpu_ids"] == list(range(0, 63, 2))
    assert [n["id"] for n in x["numa_nodes"]] == [0, 2, 3]  # node1 missing


def test_lscpu_e():
    rows = lscpu.parse_lscpu_e(read(real("lscpu", "stelline-esc8000a-e12-2s-epyc9374f-lscpu-e.txt")))
    assert len(rows) == 64
    assert rows[0]["socket"] == 0 and rows[63]["socket"] == 1 and rows[63]["node"] == 1
    assert len(set(r["core"] for r in rows)) == 64  # SMT off
    assert all(r["online"] for r in rows)


def test_lscpu_json_old_flat():
    r = lscpu.parse_lscpu_json(read(real("lscpu-json", "hardinfo-laptop-i5-m460-lscpu-J-flat-old.json")))
    assert r["model_name"] == "Intel(R) Core(TM) i5 CPU M 460 @ 2.53GHz"
    assert (r["sockets"], r["cores_per_socket"], r["threads_per_core"], r["physical_cores"]) == (1, 2, 2, 2)
    assert r["numa_nodes"][0]["cpus"] == "0-3"


def test_lscpu_json_nested():
    text = '{"lscpu": [{"field": "Architecture:", "data": "x86_64", "children": [{"field": "CPU(s):", "data": "8"}]}, {"field": "Socket(s):", "data": "1"}]}'
    r = lscpu.parse_lscpu_json(text)
    assert r["cpus"] == 8 and r["sockets"] == 1


@pytest.mark.parametrize("bad", ["", "hello", "Flags: fpu\nrandom text line", "# CPU,Core\nx,y"])
def test_lscpu_garbage(bad):
    with pytest.raises(ParseError):
        lscpu.parse_lscpu(bad)


@pytest.mark.parametrize("bad", ["", "[]", '{"lscpu": 3}', '{"lscpu": [{"x": 1}]}', "{"])
def test_lscpu_json_garbage(bad):
    with pytest.raises(ParseError):
        lscpu.parse_lscpu_json(bad)


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


@pytest.mark.parametrize("bad", ["", "# dmidecode 3.5\nNo SMBIOS nor DMI entry point found, sorry.", "garbage\n\tKey: value"])
def test_dmidecode_garbage(bad):
    with pytest.raises(ParseError):
        dmidecode.parse_dmidecode(bad)


LSPCI = real("lspci-vv")
# file -> (slot, nvidia gpu, width, width_max, gen, gen_max, speed downgraded, width degraded)
LSPCI_EXPECTED = {
    "stelline-esc8000a-e12-rtx6000ada-01_00.0-idle-2.5GTs.txt": ("0000:01:00.0", True, 16, 16, 1, 4, True, False),
    "stelline-esc8000a-e12-connectx7-21_00.0-32GTs.txt": ("0000:21:00.0", False, 16, 16, 5, 5, False, False),
    "stelline-esc8000a-e12-highpoint-71_00.0-x1-downgraded.txt": ("0000:71:00.0", False, 1, 2, 2, 2, False, True),
    "stelline-puget-wrx90-gpu-c1_00.0-idle.txt": ("0000:c1:00.0", True, 16, 16, 1, 4, True, False),
    "linuxhw-esc8000g4-rtx2080ti-1d_00.0-lspci-vvnn-behind-plx-idle-2.5GTs.txt": ("0000:1d:00.0", True, 16, 16, 1, 3, True, False),
    "linuxhw-esc8000g4-plx-pex8796-downstream-1b_14.0-lspci-vvnn.txt": ("0000:1b:14.0", False, 16, 16, 1, 3, True, False),
    "janhq-jan-issue183-rtx4090-riser-lnkcap-lnksta-snippet.txt": (None, False, 16, 16, 1, 4, True, False),
}


def test_every_lspci_capture_has_expectations():
    assert sorted(LSPCI_EXPECTED) == sorted(ids(LSPCI))


@pytest.mark.parametrize("path", LSPCI, ids=ids(LSPCI))
def test_lspci_real(path):
    devs = lspci.parse_lspci(read(path))
    assert len(devs) == 1
    d = devs[0]
    link = d["link"]
    assert (d["slot"], d["is_nvidia_gpu"], link["width"], link["width_max"], link["gen"], link["gen_max"],
            link["speed_downgraded"], link["width_degraded"]) == LSPCI_EXPECTED[path.rsplit("/", 1)[-1]]


def test_lspci_vvnn_ids():
    d = lspci.parse_lspci(read(real("lspci-vv", "linuxhw-esc8000g4-rtx2080ti-1d_00.0-lspci-vvnn-behind-plx-idle-2.5GTs.txt")))[0]
    assert (d["class_code"], d["vendor_id"], d["device_id"]) == ("0300", "10de", "1e04")


@pytest.mark.parametrize("bad", ["random words", "01:00.0 VGA: x\n\tLnkSta: Speed ??, Width", "\tLnkCap: nonsense"])
def test_lspci_garbage(bad):
    with pytest.raises(ParseError):
        lspci.parse_lspci(bad)


def test_sysfs_tail_v_x8_of_x16():
    r = sysfs_pci.parse_tail_v(read(real("sysfs-pci-link", "nokyan-resources-issue512-0000_01_00.0-width8-of-16-16GTs-of-32GTs.txt")))
    assert r == {"0000:01:00.0": {"width": 8, "width_max": 16, "gen": 4, "gen_max": 5, "speed_gts": 16.0,
                                  "speed_max_gts": 32.0, "width_degraded": True}}
    r = sysfs_pci.parse_tail_v(read(real("sysfs-pci-link", "nokyan-resources-issue512-0000_03_00.0-width16-32GTs.txt")))
    assert r["0000:03:00.0"]["width_degraded"] is False and r["0000:03:00.0"]["gen"] == 5


def test_sysfs_pp_dpm_pcie():
    r = sysfs_pci.parse_pp_dpm_pcie(read(real("sysfs-pci-link", "nokyan-resources-issue512-amdgpu-pp_dpm_pcie.txt")))
    assert [(x["gen"], x["width"], x["active"]) for x in r] == [(1, 8, False), (4, 8, True)]


def test_sysfs_link_values_unknown():
    r = sysfs_pci.link_from_values("Unknown", "0", "Unknown speed", "255")
    assert r == {"width": None, "width_max": None, "gen": None, "gen_max": None, "speed_gts": None,
                 "speed_max_gts": None, "width_degraded": None}


@pytest.mark.parametrize("bad", ["", "no header here", "==> /tmp/x/current_link_width <==\n8"])
def test_sysfs_garbage(bad):
    with pytest.raises(ParseError):
        sysfs_pci.parse_tail_v(bad)


def test_numactl_real():
    r = numactl.parse_numactl_hardware(read(real("numactl-hardware", "stelline-esc8000a-e12-2s-epyc9374f.txt")))
    assert [(n["id"], n["cpus"], n["size_mb"]) for n in r["nodes"]] == [(0, "0-31", 193129), (1, "32-63", 193477)]
    assert r["distances"] == {0: {0: 10, 1: 32}, 1: {0: 32, 1: 10}}
    r = numactl.parse_numactl_hardware(read(real("numactl-hardware", "stelline-puget-wrx90-threadripper-pro-1s.txt")))
    assert [(n["id"], n["cpus"], n["size_mb"], n["free_mb"]) for n in r["nodes"]] == [(0, "0-23", 128295, 1724)]


def test_numactl_cpuless_node_and_no_numa():
    r = numactl.parse_numactl_hardware("available: 2 nodes (0-1)\nnode 0 cpus: 0 1\nnode 0 size: 10 MB\nnode 1 cpus:\nnode 1 size: 20 MB\n")
    assert r["nodes"][1]["cpus"] == ""
    assert numactl.parse_numactl_hardware("No NUMA available on this system\n")["available"] is False


@pytest.mark.parametrize("bad", ["", "hello", "node 0 cpus: a b", "available: 1 nodes (0)\nnode   0\n  0:  10 20"])
def test_numactl_garbage(bad):
    with pytest.raises(ParseError):
        numactl.parse_numactl_hardware(bad)
