"""gather() on sysfs/procfs trees built from real captures (tests/data/sysfs/README.md)."""
import os

import pytest
from testpaths import DATA, sysfs_tree

from ansible_collections.dlrack.node.plugins.module_utils.hw import gather as gather_mod
from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_hw

REAL = os.path.join(DATA, "real")
tree = sysfs_tree


class FakeRun(object):
    """run_command that answers with real captured outputs and records every call."""

    def __init__(self, outputs=None):
        self.outputs = outputs or {}
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        tool = os.path.basename(argv[0])
        if len(argv) > 1 and "%s %s" % (tool, argv[1]) in self.outputs:  # "nvidia-smi nvlink"
            tool = "%s %s" % (tool, argv[1])
        if tool in self.outputs:
            out = self.outputs[tool]
            if isinstance(out, tuple):
                return out
            with open(os.path.join(REAL, out)) as fh:
                return 0, fh.read(), ""
        if tool == "blkid":
            return 2, "", ""
        return 127, "", "%s: not found" % tool


def test_esc8000a_e12():
    run = FakeRun()
    d = gather(root=tree("esc8000a-e12"), run_command=run, is_root=False)
    assert d["schema"] == 1 and d["source"] == "gathered"
    cpu = d["cpu"]
    assert cpu["model"] == "AMD EPYC 9374F 32-Core Processor" and cpu["vendor"] == "amd"
    assert (cpu["sockets"], cpu["cores"], cpu["threads"]) == (2, 64, 64)
    assert cpu["core_cpus"][:3] == ["0", "1", "2"] and len(cpu["core_cpus"]) == 64
    assert cpu["pcie_lanes"] is None
    assert cpu["numa_nodes"] == [{"id": 0, "cpus": "0-31", "memory_mb": 193129},
                                 {"id": 1, "cpus": "32-63", "memory_mb": 193477}]
    assert d["memory"]["total_mb"] == 193129 + 193477
    assert d["memory"]["ecc"] == "unknown"  # not root: no dmidecode
    assert d["memory"]["edac"] is None
    gpus = d["gpus"]
    assert [g["pci_bus_id"] for g in gpus] == ["0000:01:00.0", "0000:41:00.0", "0000:c1:00.0", "0000:e1:00.0"]
    assert [g["numa_node"] for g in gpus] == [0, 0, 1, 1]
    assert [g["local_cpus"] for g in gpus] == ["0-31", "0-31", "32-63", "32-63"]
    for g in gpus:  # idle: 2.5 GT/s of 16 GT/s, full x16
        assert (g["pcie"]["width"], g["pcie"]["width_max"], g["pcie"]["gen"], g["pcie"]["gen_max"]) == (16, 16, 1, 4)
        assert g["driver"] == "nvidia" and g["uuid"] is None and g["nvlink_active"] is None
    disks = d["disks"]
    names = [x["name"] for x in disks]
    assert len(disks) == 17 and "sda" not in names and "sr0" not in names and "md0" not in names
    assert all(x["kind"] == "nvme" and x["transport"] == "nvme" for x in disks)
    osd = [x for x in disks if x["name"] == "nvme16n1"][0]
    assert osd["in_use"]["system"] is True
    assert sorted(osd["in_use"]["mounted"]) == ["/", "/boot/efi"]
    assert osd["in_use"]["partitions"] == ["nvme16n1p1", "nvme16n1p2"]
    m0 = [x for x in disks if x["name"] == "nvme0n1"][0]
    assert m0["in_use"] == {"mounted": ["/mnt/nvme-raid-0"], "holders": ["md0"], "partitions": [],
                            "signatures": [], "system": False}
    assert sum(1 for x in disks if x["in_use"]["holders"] == ["md1"]) == 8
    assert d["host"]["product"] == "ESC8000A-E12" and d["host"]["hostname"] == "coyote2"
    assert d["errors"] == []
    assert run.calls == []  # no nvidia-smi, not root: nothing ran
    clean, problems = check_hw(d)
    assert problems == []


def test_cpuless_numa_nodes_kept():
    d = gather(root=tree("traverse-power9-cpuless-numa"), run_command=FakeRun(), is_root=False)
    cpu = d["cpu"]
    assert (cpu["sockets"], cpu["cores"], cpu["threads"], cpu["threads_per_core"]) == (2, 32, 128, 4)
    assert cpu["core_cpus"][:2] == ["0-3", "4-7"]
    assert [(n["id"], n["cpus"]) for n in cpu["numa_nodes"]] == [
        (0, "0-63"), (8, "64-127"), (252, ""), (253, ""), (254, ""), (255, "")]
    assert all(n["memory_mb"] is None for n in cpu["numa_nodes"])  # no meminfo in the capture
    assert d["memory"]["total_mb"] is None and d["gpus"] == [] and d["disks"] == []


def test_gpu_without_driver_and_dmidecode_as_root():
    run = FakeRun({"dmidecode": "dmidecode/linuxhw-asus-esc8000g4-8gpu-server-2s-xeon4214-single-bit-ecc.txt"})
    d = gather(root=tree("esc8000g4-gpu-nodriver"), run_command=run, is_root=True)
    assert len(d["gpus"]) == 1
    g = d["gpus"][0]
    assert g["pci_bus_id"] == "0000:1d:00.0" and g["driver"] is None and g["device_id"] == "0x1e04"
    assert (g["pcie"]["width"], g["pcie"]["width_max"], g["pcie"]["gen"], g["pcie"]["gen_max"]) == (16, 16, 1, 3)
    assert g["model"] is None and g["uuid"] is None and g["memory_mb"] is None
    assert d["memory"]["ecc"] == "single-bit"
    assert d["memory"]["dimm_count"] == 8 and d["memory"]["installed_mb"] == 8 * 32768
    assert [c[0].endswith("dmidecode") for c in run.calls] == [True]
    assert run.calls[0][1:] == ["-t", "memory"]


def test_installed_ram_leaves_out_a_bios_flash_device():
    """hw_facts' memory.installed_mb / dimm_count: a type 17 device of a Flash Memory array (built
    from a real capture, tests/data/dmidecode/README.md) is not a DIMM."""
    built = os.path.join(DATA, "dmidecode", "supermicro-as4124gs-tnr-with-bios-flash-array.txt")
    d = gather(root=tree("esc8000g4-gpu-nodriver"), run_command=FakeRun({"dmidecode": built}), is_root=True)
    assert d["memory"]["dimm_count"] == 16 and d["memory"]["installed_mb"] == 16 * 65536
    assert all(m["type"] == "DDR4" for m in d["memory"]["dimms"]) and d["memory"]["ecc"] == "multi-bit"


def test_dmidecode_not_run_without_root():
    run = FakeRun({"dmidecode": "dmidecode/linuxhw-asus-esc8000g4-8gpu-server-2s-xeon4214-single-bit-ecc.txt"})
    d = gather(root=tree("esc8000g4-gpu-nodriver"), run_command=run, is_root=False)
    assert d["memory"]["ecc"] == "unknown" and run.calls == []
    d = gather(root=tree("esc8000g4-gpu-nodriver"), run_command=run, is_root=True, dmidecode="never")
    assert d["memory"]["ecc"] == "unknown" and run.calls == []


def test_x8_of_x16_enriched_by_one_nvidia_smi_call():
    # two GPUs: the XML, then one `nvlink -s` for both (empty answer here: link state unknown)
    run = FakeRun({"nvidia-smi": "nvidia-smi-q-xml/telegraf-dual_2070-v13.xml",
                   "nvidia-smi nvlink": (0, "", "")})
    d = gather(root=tree("dual-2070-x8"), run_command=run, is_root=False)
    assert [c[1:] for c in run.calls] == [["-q", "-x"], ["nvlink", "-s"]]
    assert [g["nvlink_active"] for g in d["gpus"]] == [None, None] and d["errors"] == []
    assert [g["model"] for g in d["gpus"]] == ["NVIDIA GeForce RTX 2070"] * 2
    assert [g["memory_mb"] for g in d["gpus"]] == [8192, 8192]
    assert [g["index"] for g in d["gpus"]] == [0, 1]
    for g in d["gpus"]:
        assert (g["pcie"]["width"], g["pcie"]["width_max"]) == (8, 16)
        assert g["numa_node"] == -1  # stays -1
        assert g["uuid"].startswith("GPU-") and g["ecc_enabled"] is None


def test_nvidia_smi_failure_is_an_error_not_a_crash():
    run = FakeRun({"nvidia-smi": (9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")})
    d = gather(root=tree("dual-2070-x8"), run_command=run, is_root=False)
    assert len(d["gpus"]) == 2 and d["gpus"][0]["model"] is None
    assert any("nvidia-smi" in e for e in d["errors"])
    run = FakeRun({"nvidia-smi": (0, "<nvidia_smi_log><gpu", "")})
    d = gather(root=tree("dual-2070-x8"), run_command=run, is_root=False)
    assert len(d["gpus"]) == 2 and d["errors"]


def test_amd_display_gpu_is_listed_through_the_vendor_seam():
    # issue 21: an AMD GPU is no longer dropped; this one (VGA class, no other GPU on the node)
    # is listed as AMD with its real link, x8 of x16, and nothing the tree does not show
    d = gather(root=tree("amd-dgpu-x8-not-nvidia"), run_command=FakeRun(), is_root=False)
    assert [(g["vendor"], g["pci_bus_id"], g["pcie"]["width"], g["pcie"]["width_max"]) for g in d["gpus"]] == [
        ("amd", "0000:01:00.0", 8, 16)]
    g = d["gpus"][0]
    assert (g["model"], g["memory_mb"], g["ecc_enabled"], g["interconnect"]) == (None, None, None, None)


def test_garbled_tree_gives_nulls():
    d = gather(root=tree("garbled"), run_command=FakeRun(), is_root=False)
    # garbled values are null; the garbled cpulists are named in errors
    assert d["errors"] == [
        "cpu3 thread_siblings_list: '3-x,' is not a usable cpulist (character 'x' is not part of a cpulist)",
        "NUMA node0 cpulist: '0-31-7' is not a usable cpulist (bad range '0-31-7' in cpulist '0-31-7')",
        "GPU 0000:41:00.0 local_cpulist: 'ff,zz' is not a usable cpulist (character 'f' is not part of a cpulist)"]
    assert d["cpu"]["model"] is None
    assert d["memory"]["total_mb"] is None
    assert d["cpu"]["numa_nodes"][0]["cpus"] is None  # unreadable, not CPU-less
    assert d["cpu"]["numa_nodes"][1]["memory_mb"] is None
    by = dict((g["pci_bus_id"], g) for g in d["gpus"])
    assert "0000:c1:00.0" not in by and "0000:e1:00.0" not in by  # no class / no vendor
    assert by["0000:01:00.0"]["pcie"]["width"] is None and by["0000:01:00.0"]["pcie"]["gen_max"] is None
    assert by["0000:01:00.0"]["numa_node"] is None
    assert by["0000:41:00.0"]["local_cpus"] is None
    nv0 = [x for x in d["disks"] if x["name"] == "nvme0n1"][0]
    assert nv0["size_bytes"] is None and nv0["rotational"] is None
    assert d["uptime_s"] is None
    check_hw(d)


def test_empty_root(tmp_path):
    d = gather(root=str(tmp_path), run_command=FakeRun(), is_root=False)
    assert d["gpus"] == [] and d["disks"] == [] and d["cpu"]["cores"] is None
    assert d["cpu"]["numa_nodes"] is None and d["memory"]["total_mb"] is None


def test_subset_disks_only():
    run = FakeRun()
    d = gather(root=tree("esc8000a-e12"), run_command=run, subset=["disks"], is_root=False)
    assert d["cpu"] is None and d["memory"] is None and d["gpus"] is None
    assert len(d["disks"]) == 17 and "host" not in d


def test_blkid_signatures_as_root():
    outputs = {"blkid": (0, "DEVNAME=/dev/x\nUUID=abc\nTYPE=linux_raid_member\nLABEL=coyote2:0\n", "")}
    run = FakeRun(outputs)
    d = gather(root=tree("esc8000a-e12"), run_command=run, subset=["disks"], is_root=True, blkid="/sbin/blkid")
    m0 = [x for x in d["disks"] if x["name"] == "nvme0n1"][0]
    assert m0["in_use"]["signatures"] == ["nvme0n1:linux_raid_member"]
    assert m0["probe"]["type"] == "linux_raid_member" and m0["probe"]["label"] == "coyote2:0"
    assert ["/dev/nvme16n1p1"] in [c[-1:] for c in run.calls]  # partitions probed too


def test_this_machine():
    d = gather()
    assert d["source"] == "gathered"
    assert isinstance(d["gpus"], list)
    if not any(os.path.basename(p).startswith("0000") for p in os.listdir("/sys/bus/pci/devices")
               if open(os.path.join("/sys/bus/pci/devices", p, "vendor")).read().strip() == "0x10de"):
        assert d["gpus"] == []
    assert d["cpu"]["threads"] and d["memory"]["total_mb"]


def test_default_runner_missing_tool():
    rc, out, err = gather_mod.default_run_command(["/nonexistent/tool-xyz"])
    assert rc == 127 and out == ""


@pytest.mark.parametrize("subset", [["cpu"], ["memory"], ["edac"], ["host"], ["gpus"]])
def test_subsets(subset):
    d = gather(root=tree("esc8000a-e12"), run_command=FakeRun(), subset=subset, is_root=False)
    assert d["errors"] == []


def test_driverless_gpu_named_from_the_nodes_pci_ids():
    """No driver, no nvidia-smi: the node's pci.ids (a verbatim Debian excerpt) names the device;
    the model itself stays null because the GPU did not report it."""
    d = gather(root=tree("esc8000g4-gpu-nodriver"), run_command=FakeRun(), is_root=False)
    assert d["gpus"][0]["pci_name"] == "TU102 [GeForce RTX 2080 Ti]"
    assert d["gpus"][0]["model"] is None
    d = gather(root=tree("esc8000a-e12"), run_command=FakeRun(), is_root=False)
    assert [g["pci_name"] for g in d["gpus"]] == ["AD102GL [L6000 / RTX 6000 Ada Generation]"] * 4


def test_pci_ids_reader_stays_in_the_vendor_block(tmp_path):
    names = gather_mod.pci_ids_names(tree("esc8000a-e12"), ["0x2330", "0x26b1", "0xffff", None])
    assert names == {"0x2330": "GH100[H100 SXM5 80GB]", "0x26b1": "AD102GL [L6000 / RTX 6000 Ada Generation]"}
    assert gather_mod.pci_ids_names(str(tmp_path), ["0x2330"]) == {}          # no pci.ids: no names
