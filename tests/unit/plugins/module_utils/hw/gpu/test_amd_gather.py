"""AMD GPUs through the vendor seam: gather() on sysfs trees built from the kernel's documented
amdgpu formats (MI300X, MI250X, MI210) and on the two real MI100 machines whose rocm-smi JSON is
in tests/data/real (tests/data/amd/README.md says which is which)."""
import os
import shutil

import gputrees
import pytest
from testpaths import DATA, sysfs_tree

from ansible_collections.dlrack.node.plugins.module_utils.hw import gpu as seam
from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather

AMD = os.path.join(DATA, "amd")
ROCM = os.path.join(DATA, "real", "amd-rocm-smi-json")


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    return gputrees.build("amd/build_trees.py", tmp_path_factory)


Run = gputrees.Run      # stands in for amd-smi / rocm-smi with the files in tests/data; records its calls


def gpus(root, run=None, **kw):
    d = gather(root=root, subset=["gpus"], run_command=run or Run(), is_root=False, **kw)
    return d["gpus"], d["errors"]


def test_mi300x_from_sysfs_alone(trees):
    got, errors = gpus(trees("mi300x-8gpu"))
    assert errors == []
    assert [g["index"] for g in got] == list(range(8))
    assert all((g["vendor"], g["model"], g["memory_mb"], g["driver"], g["ecc_enabled"]) ==
               ("amd", "AMD Instinct MI300X", 192 * 1024, "amdgpu", True) for g in got)
    assert [g["interconnect"]["links_active"] for g in got] == [7] * 8
    assert len(set(g["interconnect"]["hive_id"] for g in got)) == 1 and got[0]["interconnect"]["kind"] == "xgmi"
    assert [g["numa_node"] for g in got] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert got[6]["pcie"]["width"] == 8 and got[6]["pcie"]["width_max"] == 16 and got[0]["pcie"]["gen"] == 5
    assert got[3]["ecc_errors"]["volatile_corrected"] == 6 and got[3]["ras"]["blocks"]["umc"] == {"ue": 0, "ce": 5, "de": 0}
    assert got[3]["retired_pages"] == {"retired": 1, "pending": 0, "failed": 0}
    assert got[0]["retired_pages"] == {"retired": 0, "pending": 0, "failed": 0}
    assert got[2]["render_node"] == "renderD130" and got[2]["uuid"] == "GPU-6f1f0a2b3c4d5e02"
    assert seam.device_files(got[2]) == ["/dev/dri/renderD130", "/dev/kfd"]
    assert seam.visible_devices_env(got[2]) == ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


def test_mi250x_lists_every_gcd_as_a_logical_device(trees):
    got, errors = gpus(trees("mi250x-4oam"))
    assert errors == [] and len(got) == 8
    assert all(g["memory_mb"] == 64 * 1024 and g["model"] == "AMD Instinct MI250X" for g in got)
    assert all(g["interconnect"]["links_active"] == 3 for g in got)


def test_mi210_without_ras_or_bridge_is_unknown_ecc_and_no_links(trees):
    got, errors = gpus(trees("mi210-2gpu-pcie"))
    assert errors == []
    assert [(g["model"], g["ecc_enabled"], g["ras"], g["interconnect"]) for g in got] == [
        ("AMD Instinct MI210", None, None, {"kind": None, "links_active": 0, "hive_id": None})] * 2


def with_tools(src, tmp_path, *tools):
    """A copy of a tree in which ``tools`` exist under usr/bin (found by 'auto' under root)."""
    root = str(tmp_path / "t")
    shutil.copytree(src, root, symlinks=True)
    os.makedirs(os.path.join(root, "usr", "bin"))
    for tool in tools:
        open(os.path.join(root, "usr", "bin", tool), "w").close()
    return root


def test_real_rocm_smi_fills_what_sysfs_lacks(trees, tmp_path):
    run = Run({"rocm-smi": os.path.join(ROCM, "telegraf-mi100_rocm602.json")})
    got, errors = gpus(with_tools(trees("mi100-rocm602"), tmp_path, "rocm-smi"), run, amd_smi="/usr/bin/amd-smi")
    # amd-smi is "installed" but answers 127: one line, then rocm-smi is asked
    assert errors == ["amd-smi static --json failed (rc=127): /usr/bin/amd-smi: not found"]
    assert [c[0:2] for c in run.calls] == [["amd-smi", "static"], ["rocm-smi", "--showproductname"]]
    assert [g["pci_bus_id"] for g in got] == ["0000:83:00.0", "0000:a3:00.0", "0000:c3:00.0", "0000:e3:00.0"]
    assert all((g["model"], g["memory_mb"], g["numa_node"]) == ("AMD Instinct MI100", 32752, 1) for g in got)
    assert got[1]["uuid"] == "GPU-04edfb117a17a07d" and got[0]["serial"] is None


def test_real_rocm_smi_of_the_other_node_na_stays_unknown(trees, tmp_path):
    root = with_tools(trees("mi100-rocm571"), tmp_path, "rocm-smi")
    got, errors = gpus(root, Run({"rocm-smi": os.path.join(ROCM, "telegraf-mi100_rocm571.json")}))
    assert errors == [] and len(got) == 6
    assert all(g["uuid"] is None and g["serial"] is None and g["memory_mb"] == 32752 for g in got)


def test_amd_smi_static_and_metric_fill_the_gaps(trees, tmp_path):
    root = str(tmp_path / "t")
    shutil.copytree(trees("mi300x-8gpu"), root, symlinks=True)
    for bdf in os.listdir(os.path.join(root, "sys/devices/pci0000:00")):   # a driver without FRU/VRAM/RAS files
        d = os.path.join(root, "sys/devices/pci0000:00", bdf)
        for name in ("mem_info_vram_total", "product_name"):
            os.remove(os.path.join(d, name))
        shutil.rmtree(os.path.join(d, "ras"))
    run = Run({"amd-smi static": os.path.join(AMD, "amd-smi-static-mi300x-gpu_data.json"),
               "amd-smi metric": os.path.join(AMD, "amd-smi-metric-mi300x-gpu_data.json")})
    got, errors = gpus(root, run, amd_smi="/opt/rocm/bin/amd-smi")
    assert errors == [] and [c[0:2] for c in run.calls] == [["amd-smi", "static"], ["amd-smi", "metric"]]
    assert all((g["model"], g["memory_mb"], g["ecc_enabled"]) == ("AMD Instinct MI300X", 196592, True) for g in got)
    assert got[3]["ecc_errors"]["volatile_corrected"] == 6 and got[3]["package"] == 3
    assert got[7]["ecc_errors"] is None            # metric says N/A: unknown, not zero


def test_amd_smi_garbage_is_one_line_and_sysfs_stays(trees):
    got, errors = gpus(trees("mi300x-8gpu"), Run({"amd-smi": (0, "Segmentation fault", "")}),
                       amd_smi="/usr/bin/amd-smi")
    assert len(got) == 8 and got[0]["memory_mb"] == 196608
    assert len(errors) == 1 and errors[0].startswith("amd-smi static --json: not JSON")


def test_amd_never_leaves_out_every_amd_tool(trees, tmp_path):
    run = Run({"rocm-smi": os.path.join(ROCM, "telegraf-mi100_rocm602.json")})
    got, errors = gpus(with_tools(trees("mi100-rocm602"), tmp_path, "rocm-smi", "amd-smi"), run, amd_smi="never")
    # no tool runs; the model is the PCI device id's (0x738c, amd_ids), the VRAM stays unknown
    assert run.calls == [] and (got[0]["model"], got[0]["memory_mb"]) == ("AMD Instinct MI100", None)


def test_amd_integrated_graphics_next_to_nvidia_gpus_is_not_a_gpu(tmp_path):
    root = str(tmp_path / "esc")
    shutil.copytree(sysfs_tree("esc8000a-e12"), root, symlinks=True)
    d = os.path.join(root, "sys/devices/pci0000:00/0000:0e:00.0")
    os.makedirs(d)
    for name, value in (("vendor", "0x1002"), ("device", "0x164e"), ("class", "0x030000")):
        with open(os.path.join(d, name), "w") as fh:
            fh.write(value + "\n")
    os.symlink("../../../devices/pci0000:00/0000:0e:00.0", os.path.join(root, "sys/bus/pci/devices/0000:0e:00.0"))
    got, errors = gpus(root)
    assert [g["pci_bus_id"] for g in got] == ["0000:01:00.0", "0000:41:00.0", "0000:c1:00.0", "0000:e1:00.0"]
    assert all("vendor" not in g for g in got)        # NVIDIA entries keep their schema-1 shape


def test_seam_picks_vendor_by_entry():
    assert seam.vendor_of({}).NAME == "nvidia"
    assert seam.vendor_of({"vendor_id": "0x1002"}).NAME == "amd"
    assert seam.vendor_of({"vendor": "hygon"}).NAME == "amd"
    assert seam.device_files({"index": 3}) == ["/dev/nvidia3"]
    assert seam.visible_devices_env({}) == ("CUDA_VISIBLE_DEVICES",)
    assert [seam.vendor_name(g) for g in ({}, {"vendor_id": "0x10DE"}, {"vendor_id": "0x1d94"},
                                          {"vendor": "AMD", "vendor_id": "0x10de"}, {"vendor_id": "0x8086"})] == \
        [None, "nvidia", "hygon", "amd", None]


@pytest.mark.parametrize("render,files", [
    ("renderD129", ["/dev/dri/renderD129", "/dev/kfd"]),
    (None, ["/dev/kfd"]),
    # the name comes from the node (or a declaration) and becomes a path: only a render node name
    ("../../sda", ["/dev/kfd"]),
    ("renderD128/../../../dev/sda", ["/dev/kfd"]),
    (["renderD128"], ["/dev/kfd"]),
])
def test_amd_device_files_take_only_a_render_node_name(render, files):
    assert seam.device_files({"vendor": "amd", "render_node": render}) == files


def test_hygon_dcu_is_listed_by_its_pci_vendor_id(tmp_path):
    # Hygon DCUs run an amdgpu-derived driver; the PCI vendor id 0x1d94 is public (pci.ids). The
    # attributes are the amdgpu formats (no public Hygon sysfs capture was found): documented only.
    mod = gputrees.load("amd/build_trees.py")
    root = str(tmp_path)
    mod.gpu(root, "0000:41:00.0", "0x51b7", "0x038000", (mod.GEN4, "16", mod.GEN4, "16"), 0, "0-31",
            vendor="0x1d94", vram=64 << 30, product="DCU Z100", card=0)
    got, errors = gpus(root)
    assert errors == []
    assert [(g["vendor"], g["vendor_id"], g["model"], g["memory_mb"]) for g in got] == [
        ("hygon", "0x1d94", "Hygon DCU Z100", 65536)]
    assert seam.visible_devices_env(got[0]) == ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


def test_amd_smi_runs_through_the_bounded_runner(trees, tmp_path):
    # a real process (a stand-in amd-smi that hangs) under system/command.py's Runner: killed after
    # its limit, named in errors and command_failures; the GPUs stay listed from sysfs
    import stat
    import time
    from ansible_collections.dlrack.node.plugins.module_utils.system.command import Runner
    smi = tmp_path / "amd-smi"
    smi.write_text("#!/bin/sh\nsleep 600\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    broke = []
    started = time.monotonic()
    d = gather(root=trees("mi300x-8gpu"), subset=["gpus"], is_root=False, amd_smi=str(smi), command_failures=broke,
               run_command=Runner(timeout=1, timeout_hint="the hw_facts option command_timeout"))
    assert time.monotonic() - started < 1 + 3
    assert len(broke) == 1 and broke[0].startswith("amd-smi static --json did not answer within 1 s")
    assert broke[0] in d["errors"] and len(d["gpus"]) == 8 and d["gpus"][0]["memory_mb"] == 196608


HY_SMI = os.path.join(AMD, "hy-smi-categraf-readme.json")     # categraf's documented example, not a capture


def test_hy_smi_documented_output_parses_and_guesses_nothing(tmp_path):
    """hy-smi's JSON (rocm-smi's shape: cards by name, every value a string, HCU where rocm-smi
    says GPU) as categraf documents it: read without error; it names no PCI bus, model or VRAM,
    so the DCU keeps what sysfs says and nothing is matched by card order."""
    from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers.amd_smi import parse_rocm_smi
    with open(HY_SMI) as fh:
        cards = parse_rocm_smi(fh.read(), "Hygon", "hy-smi --json")
    assert cards == [{"card": 0, "model": None, "pci_bus_id": None, "memory_mib": None, "serial": None,
                      "unique_id": None, "numa_node": None, "width": None, "speed_gts": None,
                      "device_id": "0x6320", "series": None}]
    mod = gputrees.load("amd/build_trees.py")
    root = str(tmp_path / "node")
    mod.gpu(root, "0000:41:00.0", "0x6320", "0x038000", (mod.GEN4, "16", mod.GEN4, "16"), 0, "0-31",
            vendor="0x1d94", card=0)
    root = with_tools(root, tmp_path, "hy-smi")
    run = Run({"hy-smi": HY_SMI})
    got, errors = gpus(root, run)
    assert errors == [] and [c[0] for c in run.calls] == ["hy-smi"]
    assert [(g["vendor"], g["pci_bus_id"], g["model"], g["memory_mb"]) for g in got] == [
        ("hygon", "0000:41:00.0", None, None)]
    # hy-smi that prints something else than JSON: one line naming the tool, the DCU stays listed
    got, errors = gpus(root, Run({"hy-smi": (0, '{"card0": {"HCU use (%)": "0"', "")}))
    assert len(got) == 1 and len(errors) == 1 and errors[0].startswith("hy-smi --json")


@pytest.mark.parametrize("tree, mode, partitions", [
    ("mi300x-cpx", "cpx", 8),                   # one logical device per XCD: enforce_isolation has 8 values
    ("mi300x-cpx-no-isolation", "cpx", None),   # CPX without enforce_isolation: how many is unknown
    ("mi300x-dpx", "dpx", 2),                   # DPX is 2 by its name
    ("mi300x-8gpu", None, None),                # no attribute: not partitioned
])
def test_mi300x_compute_partition_from_sysfs(trees, tree, mode, partitions):
    got, errors = gpus(trees(tree))
    assert errors == [] and len(got) == 8        # one entry per package (PCI device)
    assert all((g["compute_partition"], g["partitions"]) == (mode, partitions) for g in got)
