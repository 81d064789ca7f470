# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dlrack_hw.versions from a node (issue 33): hw/versions.py and the vendor part hw/gpu/stack.py,
against real captures (tests/data/real/versions/, nvidia-smi-q-xml/; SOURCES.md)."""
import os
import re

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.hw import versions
from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather
from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import stack
from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu.pci import SysReader

from realdata import ids, read, real

XMLS = real("nvidia-smi-q-xml") + [real("versions", "h200-nvidia-smi-q-x.xml")]
H200_XML = real("versions", "h200-nvidia-smi-q-x.xml")


@pytest.mark.parametrize("path", XMLS, ids=ids(XMLS))
def test_smi_versions_of_every_driver_generation(path):
    """418 to 595 drivers: the driver, the CUDA version and each GPU's VBIOS and InfoROM image as
    the XML writes them (N/A and [REDACTED] as they are read: N/A is None)."""
    text = read(path)
    got = stack.parse_smi_versions(text)
    assert got["driver"] == re.search(r"<driver_version>([^<]*)<", text).group(1)
    assert got["cuda_driver"] == stack.clean(re.search(r"<cuda_version>([^<]*)<", text).group(1))
    vbios = re.findall(r"<vbios_version>([^<]*)<", text)
    assert [g["vbios"] for g in got["gpus"]] == [stack.clean(v) for v in vbios]
    images = re.findall(r"<img_version>([^<]*)<", text)
    assert [g["inforom"]["image"] for g in got["gpus"]] == [stack.clean(v) for v in images]
    assert all(g["pci_bus_id"] and re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", g["pci_bus_id"])
               for g in got["gpus"])


def test_h200_xml_and_its_query_csv_agree():
    """The real H200 (driver 580.159.04): the XML's figures are those of its --query-gpu CSV."""
    got = stack.parse_smi_versions(read(H200_XML))
    header, row = [line.split(", ") for line in read(real("versions", "h200-nvidia-smi-query-versions-power.csv")).splitlines()[:2]]
    csv = dict(zip(header, row))
    assert got["driver"] == csv["driver_version"] == "580.159.04"
    assert got["gpus"] == [{"pci_bus_id": "0000:00:06.0", "vbios": csv["vbios_version"],
                            "inforom": {"image": csv["inforom.img"], "oem": "2.1", "ecc": got["gpus"][0]["inforom"]["ecc"],
                                        "power": got["gpus"][0]["inforom"]["power"]}}]
    assert got["gpus"][0]["vbios"] == "96.00.A5.00.1A" and got["cuda_driver"] == "13.0"


def test_proc_driver_version():
    assert stack.parse_proc_driver_version(read(real("versions", "h200-proc-driver-nvidia-version.txt"))) == "580.159.04"
    assert stack.parse_proc_driver_version("garbage") is None


def test_not_xml_is_a_parse_error():
    with pytest.raises(stack.ParseError):
        stack.parse_smi_versions("<nvidia_smi_log><gpu>")
    with pytest.raises(stack.ParseError):
        stack.parse_smi_versions("<other/>")


def test_ethtool_i_real():
    got = versions.parse_ethtool_i(read(real("versions", "node_exporter-ethtool-i-eth0.txt")))
    assert got == {"driver": "e1000e", "version": "5.11.0-22-generic", "firmware": "0.5-4", "bus": "0000:00:1f.6"}


def test_small_parsers():
    # the line quoted in a public Go test of nv-fabricmanager --version parsing (SOURCES.md)
    assert stack.parse_fabricmanager_version("\n\n\n\tFabric Manager version is : 535.161.08\n\n") == "535.161.08"
    assert stack.parse_fabricmanager_version("command not found") is None
    assert versions.parse_ofed_info("MLNX_OFED_LINUX-5.8-1.0.1.1:\n") == "MLNX_OFED_LINUX-5.8-1.0.1.1"
    assert versions.parse_ofed_info("") is None
    assert versions.parse_ipmi_mc_info("Device ID                 : 32\nFirmware Revision         : 2.73\n") == "2.73"
    assert stack.library_version(["libnccl.so", "libnccl.so.2", "libnccl.so.2.18.5", "libnccl.so.2.9.9"],
                                 "libnccl.so.") == "2.18.5"
    assert stack.library_version(["libnccl.so.2"], "libnccl.so.") == "2"
    assert stack.library_version(["libfoo.so.1"], "libnccl.so.") is None
    assert stack.parse_cuda_version('{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}', "version.json") == "12.4.1"
    assert stack.parse_cuda_version("CUDA Version 10.2.89\n", "version.txt") == "10.2.89"
    assert stack.parse_cuda_version("{not json", "version.json") is None


def test_clean_bounds_and_escapes():
    assert stack.clean("N/A") is None
    assert stack.clean("1.2\x1b[31m\nsecond line") == "1.2?[31m"
    assert len(stack.clean("9" * 5000)) == stack.MAX_VALUE


def _ttar_tree(root, ttar, strip="fixtures"):
    """The files of a ttar excerpt (prometheus/procfs fixtures) written under ``root``."""
    text = read(ttar)
    for m in re.finditer(r"^Path: (\S+)\nLines: (\d+)\n", text, re.M):
        lines = text[m.end():].split("\n")[:int(m.group(2))]
        path = os.path.join(root, os.path.relpath(m.group(1), strip))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write("\n".join(lines) + "\n")


def _node(tmp_path):
    """A node tree: the real sysfs values of procfs's fixtures (BIOS, RDMA firmware, an amdgpu
    vbios_version moved to its PCI device), the H200's /proc/driver/nvidia/version, and an
    ethernet interface whose driver link names e1000e (the node_exporter ethtool capture's)."""
    root = str(tmp_path / "root")
    _ttar_tree(root, real("versions", "procfs-fixtures-sysfs-versions.ttar"))
    os.makedirs(os.path.join(root, "proc/driver/nvidia"))
    with open(os.path.join(root, "proc/driver/nvidia/version"), "w") as fh:
        fh.write(read(real("versions", "h200-proc-driver-nvidia-version.txt")))
    os.makedirs(os.path.join(root, "proc/sys/kernel"))
    with open(os.path.join(root, "proc/sys/kernel/osrelease"), "w") as fh:
        fh.write("5.11.0-22-generic\n")   # the kernel the ethtool capture names as e1000e's version
    net = os.path.join(root, "sys/class/net")
    os.makedirs(os.path.join(root, "sys/devices/pci0000:00/0000:00:1f.6"))
    os.makedirs(os.path.join(root, "sys/bus/pci/drivers/e1000e"))
    os.makedirs(os.path.join(net, "eth0"))
    os.makedirs(os.path.join(net, "lo"))
    os.symlink("../../../devices/pci0000:00/0000:00:1f.6", os.path.join(net, "eth0", "device"))
    os.symlink("../../../bus/pci/drivers/e1000e", os.path.join(root, "sys/devices/pci0000:00/0000:00:1f.6/driver"))
    bus = os.path.join(root, "sys/bus/pci/devices/0000:03:00.0")
    os.makedirs(bus)
    os.rename(os.path.join(root, "sys/class/drm/card0/device/vbios_version"), os.path.join(bus, "vbios_version"))
    return root


def _find(root, names):
    return lambda name: os.path.join(root, "usr/bin", name) if name in names else None


def test_gather_versions_from_real_values(tmp_path):
    root = _node(tmp_path)
    calls = []

    def run(argv):
        calls.append(argv)
        name = os.path.basename(argv[0])
        if name == "nvidia-smi":
            return (0, read(H200_XML), "")
        if name == "ethtool":
            return (0, read(real("versions", "node_exporter-ethtool-i-eth0.txt")), "")
        return (127, "", "not here")

    errors = []
    gpus = [{"pci_bus_id": "0000:00:06.0"}, {"pci_bus_id": "0000:03:00.0", "vendor": "amd"}]
    got = versions.gather_versions(SysReader(root, errors), run, {"nvidia-smi": "/usr/bin/nvidia-smi"},
                                   _find(root, ("ethtool",)), gpus, False, errors)
    assert errors == []
    assert got["kernel"] == "5.11.0-22-generic"
    assert got["bios"] == {"vendor": "Dell Inc.", "version": "2.2.4", "date": "04/12/2021"}
    assert got["gpu_driver"] == "580.159.04" and got["cuda_driver"] == "13.0"
    assert [(g["pci_bus_id"], g["vbios"]) for g in got["gpus"]] == [
        ("0000:00:06.0", "96.00.A5.00.1A"), ("0000:03:00.0", "115-D050PIL-100")]
    assert [(n["name"], n["kind"], n["firmware"], n["model"]) for n in got["nics"]] == [
        ("hfi1_0", "infiniband", "1.27.0", "HPE 100Gb 1-port OP101 QSFP28 x16 PCIe Gen3 with Intel Omni-Path Adapter"),
        ("mlx4_0", "infiniband", "2.31.5050", "MT4099"), ("mlx5_0", "infiniband", "14.28.2006", "MT4118"),
        ("eth0", "ethernet", "0.5-4", None)]
    assert got["nics"][-1]["driver"] == "e1000e" and got["nics"][-1]["driver_version"] == "5.11.0-22-generic"
    # lo has no device: no ethtool call for it; no ofed_info, ipmitool or nv-fabricmanager installed
    assert [os.path.basename(c[0]) for c in calls] == ["nvidia-smi", "ethtool"]
    assert got["ofed"] is None and got["bmc"] is None and got["fabric_manager"] is None


def test_bmc_only_as_root_with_an_ipmi_device(tmp_path):
    root = _node(tmp_path)
    answers = {"ipmitool": (0, "Firmware Revision         : 2.73\n", ""), "ofed_info": (0, "MLNX_OFED_LINUX-5.8-1.0.1.1:\n", ""),
               "nv-fabricmanager": (0, "Fabric Manager version is : 580.159.03\n", "")}

    def run(argv):
        return answers.get(os.path.basename(argv[0]), (127, "", ""))

    find = _find(root, tuple(answers))
    got = versions.gather_versions(SysReader(root, []), run, {}, find, [{"pci_bus_id": "0000:00:06.0"}], True, [])
    assert got["bmc"] is None                       # no /dev/ipmi0 in the tree
    assert got["ofed"] == "MLNX_OFED_LINUX-5.8-1.0.1.1" and got["fabric_manager"] == "580.159.03"
    os.makedirs(os.path.join(root, "dev"))
    open(os.path.join(root, "dev/ipmi0"), "w").close()
    assert versions.gather_versions(SysReader(root, []), run, {}, find, [], False, [])["bmc"] is None   # not root
    assert versions.gather_versions(SysReader(root, []), run, {}, find, [], True, [])["bmc"] == "2.73"


def test_a_failing_tool_is_a_line_not_a_value(tmp_path):
    root = _node(tmp_path)
    errors = []
    got = versions.gather_versions(SysReader(root, errors), lambda argv: (9, "", "NVIDIA-SMI has failed"),
                                   {"nvidia-smi": "/usr/bin/nvidia-smi"}, _find(root, ()), [{}], False, errors)
    assert got["gpus"] == [] and got["gpu_driver"] == "580.159.04"     # /proc still says
    assert len(errors) == 1 and "nvidia-smi -q -x" in errors[0]


def test_gather_runs_the_xml_once(tmp_path):
    """gather(): the GPUs and their versions share one nvidia-smi -q -x."""
    root = _node(tmp_path)
    calls = []

    def run(argv):
        calls.append(tuple(argv[1:]))
        return (0, read(H200_XML), "") if argv[1:] == ["-q", "-x"] else (0, "", "")

    doc = gather(root=root, run_command=run, is_root=False, nvidia_smi="/usr/bin/nvidia-smi", subset=["gpus", "host"])
    assert calls.count(("-q", "-x")) == 1
    assert doc["versions"]["gpus"][0]["vbios"] == "96.00.A5.00.1A"
    assert doc["versions"]["kernel"] == "5.11.0-22-generic"
    assert "versions" not in gather(root=root, run_command=run, is_root=False, subset=["cpu"])


def test_the_version_commands_share_one_budget(tmp_path):
    """Each command is bounded by the runner; together they stop after BUDGET_S: a node whose
    ethtool hangs to its limit on every interface costs the budget, not 16 limits."""
    root = _node(tmp_path)
    for i in range(1, 6):
        os.makedirs(os.path.join(root, "sys/class/net/eth%d" % i))
        os.symlink("../../../devices/pci0000:00/0000:00:1f.6", os.path.join(root, "sys/class/net/eth%d/device" % i))
    now = [0.0]
    ran = []

    def run(argv):
        ran.append(os.path.basename(argv[0]))
        now[0] += 20.0           # every command runs 20 s
        return (0, read(real("versions", "node_exporter-ethtool-i-eth0.txt")), "")

    errors = []
    budget = versions._Budget(run, errors, clock=lambda: now[0])
    got = versions._nics(SysReader(root, []), budget, _find(root, ("ethtool",)), errors)
    budget.report()
    assert ran == ["ethtool", "ethtool"]          # 0 s and 20 s: started; 40 s: past the 30 s budget
    assert [n["firmware"] for n in got if n["kind"] == "ethernet"] == ["0.5-4", "0.5-4", None, None, None, None]
    assert errors == ["versions: ethtool not run: the 30 s budget of the version commands was spent"]


def test_nccl_is_found_in_a_library_directory_of_thousands(tmp_path):
    """NCCL and DCGM come from the library file names. In a library directory of more than 4096 entries
    whose names sort before 'libnccl' the reader looked at only the first 4096 names (sorted) and said
    'not installed'; it now keeps the names that start with a library's stem."""
    lib = tmp_path / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    for i in range(4200):
        (lib / ("liba%04d.so.1" % i)).write_text(u"")
    for name in ("libnccl.so", "libnccl.so.2", "libnccl.so.2.21.5", "libdcgm.so.4.2.3"):
        (lib / name).write_text(u"")
    got = stack.nvidia_stack(SysReader(str(tmp_path), []), lambda argv: (127, "", ""), {}, lambda name: None, [])
    assert got["nccl"] == "2.21.5" and got["dcgm"] == "4.2.3"
