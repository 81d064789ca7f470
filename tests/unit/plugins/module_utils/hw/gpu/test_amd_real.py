"""AMD and Hygon GPUs of real machines (issue 31.2) through hw_facts' root= replay: sysfs trees
built from the captures in tests/data/real/amd/ (tests/data/amd/build_real_trees.py; which figure
is the capture's and which is built: tests/data/amd/README.md) with the captured tool output
replayed, and the parsers on the captures themselves. Machines: RX 6700 XT, Radeon Instinct
MI50, Vega 10 XT, MI250X (HPE board name), Radeon 780M APU, RX 6800-class + Raphael iGPU,
RX 7900 XT, Hygon K100_AI, MI300X in CPX; the two MI100 nodes are in test_amd_gather.py."""
import json
import os
import shutil

import gputrees
import pytest
from testpaths import DATA

from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather
from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import amd, amd_ids
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import amd_smi
from ansible_collections.dlrack.node.plugins.plugin_utils import catalogue

REAL = os.path.join(DATA, "real", "amd")


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    return gputrees.build("amd/build_real_trees.py", tmp_path_factory)


def replay(root, tmp_path, answers=None):
    """gather(root=) of a copy of a tree in which the answered tools exist, each answering with its
    capture in tests/data/real/amd; (gpus, errors, the tools called)."""
    got, errors, calls = gputrees.replay(root, str(tmp_path / "node"),
                                         dict((tool, os.path.join(REAL, name)) for tool, name in (answers or {}).items()))
    return got, errors, [call[0] for call in calls]


def test_radeon_rx6700xt_model_vram_link_from_rocm_smi(trees, tmp_path):
    got, errors, calls = replay(trees("rx6700xt"), tmp_path, {"rocm-smi": "telegraf-rx6700xt_rocm612.json"})
    assert errors == [] and calls == ["rocm-smi"]
    g = got[0]
    assert len(got) == 1
    assert (g["model"], g["memory_mb"], g["device_id"]) == ("AMD Radeon RX 6700/6700 XT / 6800M", 12272, "0x73df")
    assert (g["pcie"]["gen"], g["pcie"]["width"]) == (4, 16)


def test_radeon_instinct_mi50_serial_and_unique_id(trees, tmp_path):
    got, errors, dummy = replay(trees("mi50-vega20"), tmp_path, {"rocm-smi": "telegraf-vega-20-WKS-GL-XE.json"})
    g = got[0]
    assert len(got) == 1
    assert errors == [] and (g["model"], g["memory_mb"], g["serial"], g["uuid"]) == (
        "AMD Radeon Instinct MI50 32GB", 32752, "692024000810", "GPU-02f048617326b1ea")


def test_vega10_without_a_product_name_stays_unknown(trees, tmp_path):
    got, errors, dummy = replay(trees("vega10-xt"), tmp_path, {"rocm-smi": "telegraf-vega-10-XT.json"})
    g = got[0]
    assert len(got) == 1
    # rocm-smi printed no card series and the capture no device id: unknown, never a guess
    assert errors == [] and (g["model"], g["memory_mb"], g["pcie"]["gen"]) == (None, 16368, 3)


def test_mi250x_model_from_device_id_not_the_hpe_board_name(trees, tmp_path):
    got, errors, dummy = replay(trees("mi250x-hpe-c2"), tmp_path)
    g = got[0]
    assert len(got) == 1
    # the FRU name is NUL padded in the tree and a board name: the model comes from 0x7408
    assert errors == [] and (g["model"], g["board"], g["gcds_per_package"]) == (
        "AMD Instinct MI250X", "AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2", 2)
    with open(os.path.join(REAL, "rocm_smi_lib-159-mi250x-productname.json")) as fh:
        (card,) = amd_smi.parse_rocm_smi(fh.read())
    assert (card["device_id"], card["series"]) == ("0x7408", "AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2")
    # the catalogue knows the model (it found nothing under the board name): two GCDs a package
    assert catalogue.lookup_gpu(g["model"])["gcds_per_package"] == 2


def test_apu_is_never_an_accelerator(trees, tmp_path):
    got, errors, dummy = replay(trees("apu-780m"), tmp_path)
    assert (got, errors) == ([], [])          # Radeon 780M (0x1900 HawkPoint1): the APU's iGPU


def test_radeon_next_to_the_raphael_igpu_is_the_only_gpu(trees, tmp_path):
    got, errors, dummy = replay(trees("navi21-raphael"), tmp_path)
    assert errors == [] and [(g["device_id"], g["memory_mb"]) for g in got] == [("0x73bf", 16368)]


def test_radeon_rx7900xt_from_sysfs_and_its_rocm_smi(trees, tmp_path):
    got, errors, dummy = replay(trees("rx7900xt"), tmp_path)
    assert errors == [] and [(g["device_id"], g["memory_mb"], g["model"]) for g in got] == [("0x744c", 20464, None)]
    with open(os.path.join(REAL, "marimo-9237-rx7900xt.json")) as fh:
        (card,) = amd_smi.parse_rocm_smi(fh.read())
    assert (card["model"], card["device_id"], card["memory_mib"]) == ("AMD Radeon RX 7900 XT", "0x744c", 20464)


def test_hygon_k100_from_real_hy_smi(trees, tmp_path):
    got, errors, calls = replay(trees("hygon-k100ai"), tmp_path, {"hy-smi": "gpustack-2032-hy-smi-k100ai.json"})
    assert errors == [] and calls == ["hy-smi"]
    assert [(g["vendor"], g["model"], g["memory_mb"], g["serial"]) for g in got] == [
        ("hygon", "Hygon K100_AI", 65520, "TRCW280005090201"), ("hygon", "Hygon K100_AI", 65520, "TRCW340004110601")]


def test_hy_smi_without_a_comma_still_parses():
    """The real capture with the comma after card0's "HCU use (%)" value removed (the fault the
    issue reports of hy-smi's JSON; this file shows every comma): same cards."""
    with open(os.path.join(REAL, "gpustack-2032-hy-smi-k100ai.json")) as fh:
        text = fh.read()
    broken = text.replace('"HCU use (%)": "0.0", "vram', '"HCU use (%)": "0.0" "vram', 1)
    assert broken != text
    with pytest.raises(ValueError):
        json.loads(broken)
    assert amd_smi.parse_rocm_smi(broken, "Hygon") == amd_smi.parse_rocm_smi(text, "Hygon")


def test_mi300x_cpx_peers_per_package_and_partition_memory(trees, tmp_path):
    got, errors, dummy = replay(trees("mi300x-cpx-real"), tmp_path)
    assert errors == [] and len(got) == 8
    # 56 XGMI io_links per KFD node (every partition of the 7 other packages): 7 peers, not 56
    assert [g["interconnect"]["links_active"] for g in got] == [7] * 8
    # "CPX\0" (NUL padded) read as cpx; 8 partitions of 25767706624 B each (ROCm#4750)
    assert all((g["compute_partition"], g["partitions"], g["kfd_partitions"], g["partition_memory_mb"], g["memory_mb"])
               == ("cpx", 8, 8, 24574, 196592) for g in got)


def test_nul_padded_vendor_does_not_hide_the_gpu(trees, tmp_path):
    copy = str(tmp_path / "nul")
    shutil.copytree(trees("mi250x-hpe-c2"), copy, symlinks=True)
    with open(os.path.join(copy, "sys/devices/pci0000:00/0000:c1:00.0/vendor"), "w") as fh:
        fh.write("0x1002\0\0\0\n")
    d = gather(root=copy, subset=["gpus"], run_command=lambda argv: (127, "", ""), is_root=False)
    assert [g["model"] for g in d["gpus"]] == ["AMD Instinct MI250X"]


def test_amd_smi_static_without_bdf_is_matched_and_gives_a_pcie_generation(tmp_path):
    """amd-smi static JSON in the shape of ../amd/amd-smi-static-mi300x-gpu_data.json with every
    ``bdf`` removed (releases without it): matched by position (both bus-id order); the gen from
    max_pcie_speed."""
    with open(os.path.join(DATA, "amd", "amd-smi-static-mi300x-gpu_data.json")) as fh:
        doc = json.load(fh)
    for g in doc["gpu_data"]:
        g["bus"].pop("bdf", None)
    static = amd_smi.parse_amd_smi_static(json.dumps(doc))
    gpus = [amd.blank_gpu("0000:%02x:00.0" % (i + 1)) for i in range(len(static))]
    pairs = amd._match_static(static, gpus)
    assert [g["pci_bus_id"] for dummy, g in pairs] == [g["pci_bus_id"] for g in gpus]
    assert amd.pcie_gen(32.0) == 5 and amd.pcie_gen(16) == 4 and amd.pcie_gen(12.5) is None


@pytest.mark.parametrize("device, names, model", [
    ("0x7408", ("AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2",), "AMD Instinct MI250X"),
    ("0x740c", ("AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2",), None),    # MI250X or MI250: unknown
    ("0x740c", ("AMD Instinct MI250",), "AMD Instinct MI250"),
    ("0x740c", ("Aldebaran/MI200 [Instinct MI250X/MI250]",), None),
    ("0x74a1", ("0x1002",), "AMD Instinct MI300X"),
    ("0x73df", ("Navi 22",), None),
])
def test_model_from_device_id(device, names, model):
    assert amd_ids.model_of(device, *names) == model


def test_mi300x_cpx_is_planned_as_64_logical_devices(trees, tmp_path):
    """The CPX node of ROCm#4750 through the affinity plan: 8 packages x 8 partitions, each its own
    block of cores and 24574 MiB (the capture's partition size), in ROCm's order."""
    from ansible_collections.dlrack.node.plugins.plugin_utils.affinity import plan_gpu_affinity_report
    got, errors, dummy = replay(trees("mi300x-cpx-real"), tmp_path)
    hw = {"schema": 1, "source": "gathered", "gpus": got,
          "cpu": {"sockets": 2, "cores": 96, "threads": 96, "core_cpus": [str(c) for c in range(96)],
                  "numa_nodes": [{"id": 0, "cpus": "0-47"}, {"id": 1, "cpus": "48-95"}]}}
    rep = plan_gpu_affinity_report(hw)
    assert rep["warnings"] == [] and len(rep["gpus"]) == 64
    assert [(p["index"], p["package_index"], p["partition"]) for p in rep["gpus"][7:10]] == [(7, 0, 7), (8, 1, 0), (9, 1, 1)]
    assert all(p["memory_mb"] == 24574 and p["cores"] >= 1 for p in rep["gpus"])


@pytest.mark.parametrize("key", ["compute_partition", "accelerator_partition"])
def test_amd_smi_partition_section(key):
    """amd-smi static's partition section in both spellings of ROCm/amdsmi amdsmi_commands.py
    (static_dict['partition'] = {"compute_partition"|"accelerator_partition": ..., "memory_partition": ...});
    written into the source-shaped ../amd/amd-smi-static-mi300x-gpu_data.json, not a capture."""
    with open(os.path.join(DATA, "amd", "amd-smi-static-mi300x-gpu_data.json")) as fh:
        doc = json.load(fh)
    doc["gpu_data"][0]["partition"] = {key: "CPX", "memory_partition": "NPS4", "partition_id": 0}
    doc["gpu_data"][1]["partition"] = {key: "N/A", "memory_partition": "N/A"}
    static = amd_smi.parse_amd_smi_static(json.dumps(doc))
    assert [(s["compute_partition"], s["memory_partition"]) for s in static[:3]] == [("cpx", "nps4"), (None, None), (None, None)]
