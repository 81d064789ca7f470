"""AMD GPUs in the affinity plan, gres.conf and dlrack-gpu-bind (issue 21.7): ROCR_VISIBLE_DEVICES /
HIP_VISIBLE_DEVICES, /dev/dri/renderD* and /dev/kfd. Documents shaped like hw_facts' AMD output
(tests/unit/plugins/module_utils/hw/gpu/ gathers them from built sysfs trees)."""
import pytest

from ansible_collections.dlrack.node.plugins.module_utils.programs import gpu_bind
from ansible_collections.dlrack.node.plugins.plugin_utils.affinity import (
    AffinityError, gres_conf_lines, plan_gpu_affinity_report)


def hw(vendor="amd", n=8, render=True):
    gpus = []
    for i in range(n):
        g = {"index": i, "pci_bus_id": "0000:%02x:00.0" % (16 + i), "numa_node": i * 2 // n,
             "uuid": "GPU-%016x" % (0x6f00 + i)}
        if vendor == "amd":
            g.update({"vendor": "amd", "vendor_id": "0x1002", "render_node": "renderD%d" % (128 + i) if render else None})
        gpus.append(g)
    return {"schema": 1, "source": "gathered",
            "cpu": {"sockets": 2, "cores": 32, "threads": 32, "core_cpus": [str(c) for c in range(32)],
                    "numa_nodes": [{"id": 0, "cpus": "0-15"}, {"id": 1, "cpus": "16-31"}]},
            "gpus": gpus}


def test_amd_plan_entries_carry_vendor_and_device_files():
    rep = plan_gpu_affinity_report(hw())
    g = rep["gpus"][2]
    assert (g["vendor"], g["render_node"], g["device_files"]) == ("amd", "renderD130", ["/dev/dri/renderD130", "/dev/kfd"])
    assert [x["numa_node"] for x in rep["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    # 8 logical devices (a 4-OAM MI250X node is the same document) get 8 disjoint sets
    sets = [set(gpu_bind.parse_cpulist(x["cpus"])) for x in rep["gpus"]]
    assert all(not (a & b) for i, a in enumerate(sets) for b in sets[i + 1:])
    nv = plan_gpu_affinity_report(hw("nvidia"))["gpus"][2]
    assert "vendor" not in nv and "device_files" not in nv          # NVIDIA entries unchanged


def test_gres_conf_uses_render_nodes_for_amd():
    lines = gres_conf_lines(plan_gpu_affinity_report(hw()), gpu_type="mi300x")
    assert lines[0] == "Name=gpu Type=mi300x File=/dev/dri/renderD128 Cores=1-4"
    assert gres_conf_lines(plan_gpu_affinity_report(hw("nvidia")))[0] == "Name=gpu File=/dev/nvidia0 Cores=1-4"
    assert gres_conf_lines(plan_gpu_affinity_report(hw(render=False)), file_template="/dev/dri/card{index}")[1] == \
        "Name=gpu File=/dev/dri/card1 Cores=5-8"


def test_gres_conf_of_a_declared_amd_host_is_slurm_autodetect():
    """No render node is known before the node runs (a declaration): Slurm's own AMD detection
    (gres.conf(5): AutoDetect=rsmi fills File, Cores and Links), never a guessed renderD number."""
    declared = hw(render=False)
    declared["source"] = "declared"
    assert gres_conf_lines(plan_gpu_affinity_report(declared)) == ["AutoDetect=rsmi"]
    assert gres_conf_lines(plan_gpu_affinity_report(declared), gpu_type="mi250x") == ["AutoDetect=rsmi"]


@pytest.mark.parametrize("case, why", [
    ("partial", "other GPUs of the node have one"),
    ("hygon", "not Hygon DCUs"),
    ("mixed", "GPUs of another vendor"),
])
def test_gres_conf_without_render_node_otherwise_names_the_field_and_fix(case, why):
    doc = hw()
    if case == "partial":
        doc["gpus"][0]["render_node"] = None
    for g in doc["gpus"]:
        if case == "hygon":
            g.update(vendor="hygon", vendor_id="0x1d94", render_node=None)
        if case == "mixed":
            g["render_node"] = None
    if case == "mixed":
        for g in doc["gpus"][:4]:
            for key in ("vendor", "vendor_id", "render_node"):
                g.pop(key)
    with pytest.raises(AffinityError) as err:
        gres_conf_lines(plan_gpu_affinity_report(doc))
    msg = str(err.value)
    assert "has no known render node (dlrack_hw.gpus[].render_node" in msg and why in msg
    assert "gather the host (dlrack_hw_gathered), or set gpu_affinity_slurm_gres_file_template" in msg


@pytest.fixture
def plan():
    return plan_gpu_affinity_report(hw())


@pytest.mark.parametrize("env,gpus", [
    ({"ROCR_VISIBLE_DEVICES": "3"}, [3]),
    ({"ROCR_VISIBLE_DEVICES": "GPU-0000000000006f05"}, [5]),
    ({"ROCR_VISIBLE_DEVICES": "4,5,6", "LOCAL_RANK": "1"}, [5]),
    ({"ROCR_VISIBLE_DEVICES": "4,5,6", "HIP_VISIBLE_DEVICES": "2"}, [6]),
    ({"HIP_VISIBLE_DEVICES": "7"}, [7]),
    ({"CUDA_VISIBLE_DEVICES": "1"}, [1]),                          # HIP reads it too
    ({"LOCAL_RANK": "2"}, [2]),
    ({"ROCR_VISIBLE_DEVICES": "0,1"}, [0, 1]),
])
def test_bind_resolves_rocm_variables(plan, env, gpus):
    assert [g["index"] for g in gpu_bind.resolve(plan, env=env)["gpus"]] == gpus


def test_bind_rocm_errors_name_the_variable(plan):
    with pytest.raises(gpu_bind.BindError, match="ROCR_VISIBLE_DEVICES='4,5' shows 2 device"):
        gpu_bind.resolve(plan, env={"ROCR_VISIBLE_DEVICES": "4,5", "LOCAL_RANK": "3"})
    with pytest.raises(gpu_bind.BindError, match="HIP_VISIBLE_DEVICES='5'"):
        gpu_bind.resolve(plan, env={"ROCR_VISIBLE_DEVICES": "4,5", "HIP_VISIBLE_DEVICES": "5"})
    why = gpu_bind.resolve(plan, env={"ROCR_VISIBLE_DEVICES": "4,5", "LOCAL_RANK": "1"})["why"]
    assert why == "LOCAL_RANK=1 -> ROCR_VISIBLE_DEVICES[1]=5"


def test_partitioned_package_of_unknown_count_warns_that_indexes_do_not_match_the_plan():
    doc = hw()
    for g in doc["gpus"]:
        g.update(compute_partition="cpx", partitions=None)     # CPX without enforce_isolation: how many unknown
    warnings = plan_gpu_affinity_report(doc)["warnings"]
    assert len(warnings) == 8 and warnings[0].startswith("GPU 0 is in compute partition mode CPX (several logical devices)")
    doc = hw()
    for g in doc["gpus"]:
        g.update(compute_partition="spx", partitions=1)
    assert plan_gpu_affinity_report(doc)["warnings"] == []


def test_partitioned_packages_get_one_cpu_set_per_logical_device():
    """issue 31.2: a package in DPX/CPX is planned as its logical devices in ROCm's order, each a
    block of the package's cores and, where gathered, the memory of one partition."""
    doc = hw(n=2)
    for g in doc["gpus"]:
        g.update(compute_partition="dpx", partitions=2, partition_memory_mb=98304)
    rep = plan_gpu_affinity_report(doc)
    assert rep["warnings"] == []
    assert [(x["index"], x["package_index"], x["partition"], x["cpus"], x["memory_mb"]) for x in rep["gpus"]] == [
        (0, 0, 0, "1-8", 98304), (1, 0, 1, "9-15", 98304), (2, 1, 0, "17-24", 98304), (3, 1, 1, "25-31", 98304)]
    assert [x["render_node"] for x in rep["gpus"]] == ["renderD128", None, "renderD129", None]
    # ROCR_VISIBLE_DEVICES counts the logical devices: index 3 is package 1's second partition
    assert gpu_bind.resolve(rep, env={"ROCR_VISIBLE_DEVICES": "3", "LOCAL_RANK": "0"})["cpus"] == list(range(25, 32))
    # fewer cores than partitions: that package stays one entry, said so
    doc = hw(n=8)
    for g in doc["gpus"]:
        g.update(compute_partition="cpx", partitions=8)
    rep = plan_gpu_affinity_report(doc)
    assert len(rep["gpus"]) == 8 and "has 4 cores: planned as one package" in rep["warnings"][0]
