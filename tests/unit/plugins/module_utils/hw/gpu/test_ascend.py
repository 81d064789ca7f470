"""Huawei Ascend NPUs (issue 31.3): the npu-smi parser on every real capture in
tests/data/real/ascend (npu-smi 24.1.1 to 26.0.rc2: the 910B layout, the A3's Phy-ID layout and
the 310P's Device layout), and gather(root=) of three real machines (910B4, Atlas A3, Atlas 300I Duo)
with their npu-smi output replayed; then what the rest of the collection does with the entries:
device files, visible devices, gres, the plan, the rules."""
import os

import gputrees
import pytest
from testpaths import DATA

from ansible_collections.dlrack.node.plugins.module_utils.hw import gpu as seam
from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import ascend
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError, npu_smi
from ansible_collections.dlrack.node.plugins.plugin_utils import affinity, catalogue
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import evaluate_host

REAL = os.path.join(DATA, "real", "ascend")


def _read(name):
    with open(os.path.join(REAL, name)) as fh:
        return fh.read()


@pytest.mark.parametrize("name, version, chips", [
    ("1panel-9472-910b4-npu-smi-24.1.1.txt", "24.1.1",
     [(0, "910B4", 0, None, "0000:c1:00.0", 32768, 26838), (1, "910B4", 0, None, "0000:c2:00.0", 32768, 29356)]),
    ("hami-webui-47-910b4-1-npu-smi-25.2.0.txt", "25.2.0",       # the bus ids masked by the poster: unknown
     [(0, "910B4-1", 0, None, None, 65536, 3197), (1, "910B4-1", 0, None, None, 65536, 3197)]),
    ("vllm-ascend-2035-a3-npu-smi-24.1.rc3.7.txt", "24.1.rc3.7",
     [(0, "Ascend910", 0, 0, "0000:9d:00.0", 65536, 3397), (0, "Ascend910", 1, 1, "0000:9f:00.0", 65536, 3186)]),
    ("vllm-ascend-12980-a3-npu-smi-26.0.rc2.txt", "26.0.rc2",    # the wider table of 26.0
     [(0, "Ascend910", 0, 0, "0000:9d:00.0", 65536, 3419), (0, "Ascend910", 1, 1, "0000:9f:00.0", 65536, 2874)]),
    ("nvtop-421-310p3-npu-smi-25.2.0.txt", "25.2.0",             # no HBM column: the chip's DDR
     [(2, "310P3", 0, 0, "0000:01:00.0", None, None), (2, "310P3", 1, 1, "0000:01:00.0", None, None)]),
    ("vllm-ascend-3316-310p3-npu-smi-25.0.rc1.txt", "25.0.rc1.b033",
     [(1, "310P3", 0, 0, "0000:01:00.0", None, None), (1, "310P3", 1, 1, "0000:01:00.0", None, None)]),
])
def test_npu_smi_info_every_real_layout(name, version, chips):
    info = npu_smi.parse_info(_read(name))
    assert info["version"] == version
    assert [(c["npu"], c["name"], c["chip"], c["phy_id"], c["bus_id"], c["hbm_total_mb"], c["hbm_used_mb"])
            for c in info["chips"]] == chips
    assert all(c["health"] == "OK" for c in info["chips"])


def test_npu_smi_310p_memory_and_unknown_power():
    (c0, c1) = npu_smi.parse_info(_read("nvtop-421-310p3-npu-smi-25.2.0.txt"))["chips"]
    assert (c0["memory_total_mb"], c1["memory_total_mb"], c0["power_w"], c0["temp_c"]) == (44280, 43693, None, 45)


@pytest.mark.parametrize("text", ["", "npu-smi: command not found", "dcmi module initialize failed. ret is -8005\n"])
def test_npu_smi_without_a_table_is_a_parse_error(text):
    with pytest.raises(ParseError):
        npu_smi.parse_info(text)


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    return gputrees.build("ascend/build_trees.py", tmp_path_factory)


def replay(root, tmp_path, capture=None):
    """gather(root=) of a copy of a tree, npu-smi answering with ``capture`` (else not installed)."""
    return gputrees.replay(root, str(tmp_path / "node"), {"npu-smi": os.path.join(REAL, capture)} if capture else None)


def test_910b4_server(trees, tmp_path):
    got, errors, calls = replay(trees("910b4-1panel"), tmp_path, "1panel-9472-910b4-npu-smi-24.1.1.txt")
    assert errors == [] and calls == [["npu-smi", "info"]]
    # two NPUs; the Huawei NIC (0x19e5:0x1822) beside them is not one
    assert [(g["vendor"], g["pci_bus_id"], g["model"], g["memory_mb"], g["health"], g["phy_id"], g["numa_node"])
            for g in got] == [("ascend", "0000:c1:00.0", "Ascend 910B4", 32768, "OK", 0, 1),
                              ("ascend", "0000:c2:00.0", "Ascend 910B4", 32768, "OK", 1, 1)]
    assert seam.device_files(got[1]) == ["/dev/davinci1", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    assert catalogue.lookup_gpu(got[0]["model"])["memory_mb"] == 32768


def test_910b_from_sysfs_alone(trees, tmp_path):
    got, errors, calls = replay(trees("910b4-1panel"), tmp_path)
    assert errors == [] and calls == []
    assert [(g["model"], g["memory_mb"], g["pcie"]["width"]) for g in got] == [("Ascend 910B", None, 16)] * 2


def test_atlas_a3_two_chips_per_npu(trees, tmp_path):
    got, errors, dummy = replay(trees("a3-vllm-2035"), tmp_path, "vllm-ascend-2035-a3-npu-smi-24.1.rc3.7.txt")
    assert errors == []
    assert [(g["model"], g["npu_id"], g["chip_id"], g["phy_id"], g["chips_per_npu"], g["memory_mb"]) for g in got] == [
        ("Ascend 910 A3", 0, 0, 0, 2, 65536), ("Ascend 910 A3", 0, 1, 1, 2, 65536)]
    assert catalogue.lookup_gpu("Ascend 910 A3")["gcds_per_package"] == 2


def test_atlas_300i_duo_two_chips_on_one_bus(trees, tmp_path):
    got, errors, dummy = replay(trees("310p3-nvtop"), tmp_path, "nvtop-421-310p3-npu-smi-25.2.0.txt")
    assert errors == []
    assert [(g["pci_bus_id"], g["model"], g["phy_id"], g["memory_mb"], g["chips_per_npu"]) for g in got] == [
        ("0000:01:00.0", "Ascend 310P3", 0, 44280, 2), ("0000:01:00.0", "Ascend 310P3", 1, 43693, 2)]
    assert got[0]["pcie"] is not got[1]["pcie"]         # two entries, not one shared dict


def test_npu_smi_garbage_is_one_line_and_sysfs_stays(trees, tmp_path):
    got, errors, calls = gputrees.replay(trees("310p3-nvtop"), str(tmp_path / "g"), {"npu-smi": (0, "Segmentation fault", "")})
    assert [g["model"] for g in got] == ["Ascend 310P"] and len(errors) == 1 and calls == [["npu-smi", "info"]]
    assert errors[0].startswith("npu-smi info: no NPU table")


def test_visible_devices_gres_and_plan(trees, tmp_path):
    got, dummy, dummy2 = replay(trees("a3-vllm-2035"), tmp_path, "vllm-ascend-2035-a3-npu-smi-24.1.rc3.7.txt")
    assert seam.visible_devices_env(got[0]) == ("ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES")
    assert seam.visible_selection(got, {"ASCEND_RT_VISIBLE_DEVICES": "1,-1,0"}) == ("ASCEND_RT_VISIBLE_DEVICES", "1,-1,0", ["1"])
    assert seam.visible_selection(got, {"CUDA_VISIBLE_DEVICES": "0"}) is None
    hw = {"schema": 1, "source": "gathered", "gpus": got,
          "cpu": {"sockets": 2, "cores": 80, "threads": 80, "numa_nodes": [{"id": 0, "cpus": "0-39"}, {"id": 1, "cpus": "40-79"}],
                  "core_cpus": [str(i) for i in range(80)]}}
    plan = affinity.plan_gpu_affinity_report(hw)
    assert [(p["vendor"], p["phy_id"], p["device_files"][0]) for p in plan["gpus"]] == [
        ("ascend", 0, "/dev/davinci0"), ("ascend", 1, "/dev/davinci1")]
    lines = affinity.gres_conf_lines(plan)
    assert [line.split()[1] for line in lines] == ["File=/dev/davinci0", "File=/dev/davinci1"]
    # dlrack-gpu-bind picks the NPU by ASCEND_RT_VISIBLE_DEVICES (the vendor's variable, from the seam)
    from ansible_collections.dlrack.node.plugins.module_utils.programs import gpu_bind
    res = gpu_bind.resolve(plan, env={"ASCEND_RT_VISIBLE_DEVICES": "1", "LOCAL_RANK": "0"})
    assert [g["index"] for g in res["gpus"]] == [1] and res["why"] == "LOCAL_RANK=0 -> ASCEND_RT_VISIBLE_DEVICES[0]=1"


def test_rules_judge_an_ascend_node_with_its_own_words(trees, tmp_path):
    got, dummy, dummy2 = replay(trees("910b4-1panel"), tmp_path, "1panel-9472-910b4-npu-smi-24.1.1.txt")
    hw = {"schema": 1, "source": "gathered", "gpus": got, "memory": {"total_mb": 48 * 1024}}
    res = evaluate_host("npu-01", hw)
    assert res["rules"]["gpu.present"] == "pass"
    # RAM (48 GiB) is below the NPUs' 2 x 32 GiB HBM
    ram = [f for f in res["findings"] if f["rule"] == "memory.exceeds_vram"][0]
    assert ram["observed"] is not None and res["rules"]["memory.exceeds_vram"] != "pass"
    ic = [f for f in res["findings"] if f["rule"] == "gpu.interconnect"][0]
    assert "HCCS" in (ic["required"] or "") or "HCCS" in ic["message"]


def test_no_gpu_message_names_every_vendor():
    want = "no NVIDIA GPU (PCI vendor 0x10de), AMD GPU (0x1002, Hygon 0x1d94) or Huawei Ascend NPU (0x19e5) on this node"
    assert seam.no_gpu_message() == want


def test_model_names():
    assert ascend._model("910B4", "Ascend 910B") == "Ascend 910B4"
    assert ascend._model("Ascend910", "Ascend 910 A3") == "Ascend 910 A3"
    assert ascend._model("Ascend910", None) is None
    assert ascend._model("310P3", None) == "Ascend 310P3"
    assert ascend._model("../../x", "Ascend 910B") == "Ascend 910B"


def test_chips_without_a_bus_id_are_never_counted_twice(trees, tmp_path):
    """npu-smi output whose bus ids cannot be read (the HAMi capture's "0000:xx:00.0") on a node
    whose sysfs shows its two NPUs: two NPUs, sysfs's, each chip named in one line (it gave four:
    two entries without a bus id beside the two of sysfs). Without sysfs NPUs npu-smi's chips stay."""
    got, errors, dummy = replay(trees("910b4-1panel"), tmp_path, "hami-webui-47-910b4-1-npu-smi-25.2.0.txt")
    assert [(g["pci_bus_id"], g["model"]) for g in got] == [("0000:c1:00.0", "Ascend 910B"), ("0000:c2:00.0", "Ascend 910B")]
    assert errors == ["npu-smi info: NPU %d chip 0 has no PCI bus id, so its name, memory and health are not used" % n
                      for n in (0, 1)]
    text = _read("hami-webui-47-910b4-1-npu-smi-25.2.0.txt")
    got = ascend.gather(None, [], lambda argv: (0, text, ""), {"npu-smi": "/usr/bin/npu-smi"}, [])
    assert [(g["pci_bus_id"], g["model"], g["memory_mb"]) for g in got] == [(None, "Ascend 910B4-1", 65536)] * 2
