# -*- coding: utf-8 -*-
"""The GPU affinity planner against real topologies (tests/data/topologies, built from the
captures named in its README) and against NVIDIA's gpu_affinity.py socket_unique_contiguous."""
import collections
import copy
import itertools
import json
import os
import re

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils.affinity import (
    AffinityCapacityError,
    AffinityError,
    gres_conf_lines,
    plan_gpu_affinity,
    plan_gpu_affinity_report,
    service_pins,
    slurm_cores,
)
from ansible_collections.dlrack.node.plugins.module_utils.hw.cpulist import format_cpulist, parse_cpulist

TOPO_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "data", "topologies")
TOPOLOGIES = sorted(f[:-5] for f in os.listdir(TOPO_DIR) if f.endswith(".json"))


def load(name):
    with open(os.path.join(TOPO_DIR, name + ".json")) as f:
        return json.load(f)


def node_cpus(hw):
    return dict((n["id"], set(parse_cpulist(n["cpus"]))) for n in hw["cpu"]["numa_nodes"])


def core_map(hw):
    out = {}
    for cl in hw["cpu"]["core_cpus"]:
        sib = tuple(parse_cpulist(cl))
        for c in sib:
            out[c] = sib
    return out


# --- guarantees on every real topology ------------------------------------------------------

@pytest.mark.parametrize("name", TOPOLOGIES)
@pytest.mark.parametrize("reserved", [0, 1, 2])
def test_guarantees_on_real_topologies(name, reserved):
    hw = load(name)
    report = plan_gpu_affinity_report(hw, reserved_cores_per_socket=reserved)
    plan = report["gpus"]
    nodes = node_cpus(hw)
    cores = core_map(hw)
    reserved_cpus = set(parse_cpulist(report["reserved_cpus"]))
    # one entry per GPU, index order, with its identity
    assert [g["index"] for g in plan] == sorted(g["index"] for g in hw["gpus"])
    by_index = dict((g["index"], g) for g in hw["gpus"])
    assert [(g["uuid"], g["pci_bus_id"]) for g in plan] == [
        (by_index[g["index"]].get("uuid"), by_index[g["index"]].get("pci_bus_id")) for g in plan]
    seen = set()
    per_node = collections.defaultdict(list)
    for entry in plan:
        cpus = set(parse_cpulist(entry["cpus"]))
        assert cpus, entry
        # NUMA-local: every real topology has a valid node for each GPU
        assert entry["fallback"] is None
        assert cpus <= nodes[entry["numa_node"]], entry
        # disjoint
        assert not (cpus & seen), entry
        seen |= cpus
        # whole cores
        for c in cpus:
            assert set(cores[c]) <= cpus, (entry, c)
        assert entry["cores"] == len(set(cores[c] for c in cpus))
        # reserved excluded
        assert not (cpus & reserved_cpus)
        assert entry["mems"] == str(entry["numa_node"])
        per_node[entry["numa_node"]].append(entry["cores"])
    # balanced within one core among GPUs of a node
    for counts in per_node.values():
        assert max(counts) - min(counts) <= 1, counts
    # deterministic, and independent of the order GPUs are listed in
    hw2 = copy.deepcopy(hw)
    hw2["gpus"].reverse()
    assert plan_gpu_affinity_report(hw2, reserved_cores_per_socket=reserved) == report
    assert json.dumps(report, sort_keys=True) == json.dumps(
        plan_gpu_affinity_report(load(name), reserved_cores_per_socket=reserved), sort_keys=True)


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_all_node_cores_used_when_nothing_reserved(name):
    """With no reservation and no cap, a node's cores all go to its GPUs (nothing wasted)."""
    hw = load(name)
    plan = plan_gpu_affinity(hw, reserved_cores_per_socket=0)
    nodes = node_cpus(hw)
    used = collections.defaultdict(set)
    for e in plan:
        used[e["numa_node"]] |= set(parse_cpulist(e["cpus"]))
    for node, cpus in used.items():
        assert cpus == nodes[node]


def test_dlperf_8x_v100_xeon5118_exact():
    plan = plan_gpu_affinity(load("dlperf-8xv100-2s-xeon5118"))
    assert [e["cpus"] for e in plan] == [
        "1-3,25-27", "4-6,28-30", "7-9,31-33", "10-11,34-35",
        "13-15,37-39", "16-18,40-42", "19-21,43-45", "22-23,46-47"]
    assert [e["cores"] for e in plan] == [3, 3, 3, 2, 3, 3, 3, 2]


def test_stelline_epyc9374f_smt_off_and_bus_ids():
    report = plan_gpu_affinity_report(load("stelline-esc8000a-e12-4xrtx6000ada-2s-epyc9374f"))
    assert report["reserved_cpus"] == "0,32"
    assert [(e["pci_bus_id"], e["cpus"]) for e in report["gpus"]] == [
        ("00000000:01:00.0", "1-16"), ("00000000:41:00.0", "17-31"),
        ("00000000:C1:00.0", "33-48"), ("00000000:E1:00.0", "49-63")]
    assert report["warnings"] == []


def test_epyc7451_eight_nodes_sockets_inferred_like_the_capture():
    hw = load("util-linux-2s-epyc7451-8numa")
    report = plan_gpu_affinity_report(hw)
    # reserved: first core of each socket; the inferred sockets match lscpu -p's socket column
    assert report["reserved_cpus"] == "0,24,48,72"
    assert any("socket membership inferred" in w for w in report["warnings"])
    hw_explicit = copy.deepcopy(hw)
    hw_explicit["cpu"]["socket_cpus"] = hw["provenance"]["expected_socket_cpus"]
    explicit = plan_gpu_affinity_report(hw_explicit)
    assert explicit["gpus"] == report["gpus"]
    assert not any("inferred" in w for w in explicit["warnings"])
    assert report["gpus"][0]["cpus"] == "1-5,49-53"     # node 0 lost core 0 to the OS
    assert report["gpus"][4]["cpus"] == "25-29,73-77"   # node 4 = first node of socket 1


def test_x7550_stride_nodes_and_interleaved_sockets():
    hw = load("util-linux-4s-xeon-x7550-3numa-stride")
    report = plan_gpu_affinity_report(hw)
    assert report["reserved_cpus"] == "0-3,32-35"      # core 0 of each of the 4 sockets
    g0, g1 = report["gpus"]
    assert set(parse_cpulist(g0["cpus"])) <= set(parse_cpulist("1-61:4"))
    assert g0["cpus"] == "5,9,13,17,21,25,29,37,41,45,49,53,57,61"
    # Slurm: socket 1 (CPUs 1,5,..) is abstract cores 8-15; its first core (CPU 1) is reserved
    assert g0["slurm_cores"] == "9-15"
    assert g1["slurm_cores"] == "25-31"


def test_power9_cpuless_gpu_memory_nodes():
    hw = load("jdh4-traverse-2s-power9-4xv100")
    report = plan_gpu_affinity_report(hw)
    assert [e["cpus"] for e in report["gpus"]] == ["4-35", "36-63", "68-99", "100-127"]
    # SMT4: whole cores of 4 threads
    assert [e["cores"] for e in report["gpus"]] == [8, 7, 8, 7]
    assert report["warnings"] == []


def test_power9_gpu_on_cpuless_node_falls_back_to_local_cpus_then_all():
    hw = load("jdh4-traverse-2s-power9-4xv100")
    hw["gpus"][3]["numa_node"] = 255          # a GPU-memory node: no CPUs
    report = plan_gpu_affinity_report(hw)
    g3 = report["gpus"][3]
    assert g3["fallback"] == "socket"         # local_cpus 64-127 is exactly socket 1
    assert set(parse_cpulist(g3["cpus"])) <= set(range(64, 128))
    assert any("numa_node 255 has no CPUs" in w for w in report["warnings"])
    hw["gpus"][3]["local_cpus"] = None
    report = plan_gpu_affinity_report(hw)
    g3 = report["gpus"][3]
    assert g3["fallback"] == "all"
    assert any("are unknown; using its all CPUs: placed on NUMA node 8" in w
               for w in report["warnings"])
    # node 8 has one GPU (2) left, node 0 two: GPU 3 joins node 8 and splits it with GPU 2
    assert [e["cpus"] for e in report["gpus"]][2:] == ["68-99", "100-127"]
    # still disjoint from the node-local GPUs, which were planned first
    cpus = [set(parse_cpulist(e["cpus"])) for e in report["gpus"]]
    for a, b in itertools.combinations(cpus, 2):
        assert not (a & b)


def test_club3090_five_gpus_two_nodes_unknown_sockets():
    report = plan_gpu_affinity_report(load("club3090-issue46-5gpu-2numa"))
    assert [e["cpus"] for e in report["gpus"]] == [
        "9-15,25-31", "1-2,17-18", "3-4,19-20", "5-6,21-22", "7,23"]
    assert report["reserved_cpus"] == "0,8,16,24"   # per NUMA node: socket count unknown
    assert any("cpu.sockets unknown" in w for w in report["warnings"])


# --- edge cases ---------------------------------------------------------------------------

def small_hw(gpus, nodes=None, core_cpus=None, sockets=1):
    return {"schema": 1, "cpu": {"sockets": sockets,
                                 "numa_nodes": nodes or [{"id": 0, "cpus": "0-7"}],
                                 "core_cpus": core_cpus}, "gpus": gpus}


def test_no_gpu_is_an_empty_plan():
    assert plan_gpu_affinity({"cpu": {}, "gpus": []}) == []
    assert plan_gpu_affinity_report({"cpu": {}}, include_smt="false") == {
        "schema": 1, "policy": "numa_local", "gpus": [], "reserved_cpus": "", "warnings": [],
        "options": {"reserved_cores_per_socket": 1, "include_smt": False, "max_cores_per_gpu": 0}}
    assert plan_gpu_affinity({"cpu": {"numa_nodes": [{"id": 0, "cpus": "0-3"}]}}) == []


def test_numa_node_minus_one_on_single_node_box_is_not_a_fallback():
    hw = small_hw([{"index": 0, "numa_node": -1, "local_cpus": "0-7"},
                   {"index": 1, "numa_node": None}])
    report = plan_gpu_affinity_report(hw)
    assert [e["cpus"] for e in report["gpus"]] == ["1-4", "5-7"]
    assert [e["fallback"] for e in report["gpus"]] == [None, None]
    assert [e["numa_node"] for e in report["gpus"]] == [-1, -1]
    assert any("core_cpus absent" in w for w in report["warnings"])


def test_numa_node_minus_one_on_multi_node_box():
    nodes = [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": "4-7"}]
    hw = small_hw([{"index": 0, "numa_node": -1, "local_cpus": "4-7"}], nodes, sockets=2)
    e = plan_gpu_affinity(hw, reserved_cores_per_socket=0)[0]
    assert (e["cpus"], e["fallback"]) == ("4-7", "socket")
    hw = small_hw([{"index": 0, "numa_node": -1, "local_cpus": "0-7"}], nodes, sockets=2)
    e = plan_gpu_affinity(hw, reserved_cores_per_socket=0)[0]
    assert (e["cpus"], e["fallback"], e["mems"]) == ("0-3", "all", "0")


def test_more_gpus_than_cores_is_a_clear_error():
    hw = small_hw([{"index": i, "numa_node": 0} for i in range(8)])
    with pytest.raises(AffinityCapacityError) as exc:
        plan_gpu_affinity(hw)                 # 8 cores, 1 reserved, 8 GPUs
    msg = str(exc.value)
    assert "NUMA node 0 has 7 usable physical core(s) (1 reserved for the OS) for 8 GPU(s)" in msg
    assert exc.value.gpus == list(range(8))
    assert len(plan_gpu_affinity(hw, reserved_cores_per_socket=0)) == 8


def test_smt_siblings_stay_together_and_can_be_left_out():
    hw = small_hw([{"index": 0, "numa_node": 0}, {"index": 1, "numa_node": 0}],
                  core_cpus=["0,4", "1,5", "2,6", "3,7"])
    assert [e["cpus"] for e in plan_gpu_affinity(hw)] == ["1-2,5-6", "3,7"]
    assert [e["cpus"] for e in plan_gpu_affinity(hw, include_smt=False)] == ["1-2", "3"]


def test_policy_socket_spans_the_nodes_of_a_socket():
    hw = load("util-linux-2s-epyc7451-8numa")
    hw["gpus"] = [g for g in hw["gpus"] if g["index"] in (0, 4)]
    plan = plan_gpu_affinity(hw, policy="socket", reserved_cores_per_socket=0)
    assert plan[0]["cpus"] == "0-23,48-71"
    assert plan[0]["mems"] == "0-3"
    assert plan[1]["cpus"] == "24-47,72-95"


def test_max_cores_per_gpu():
    plan = plan_gpu_affinity(load("dlperf-dgx1-8xv100-2s-xeon6271c"), max_cores_per_gpu=4)
    assert [e["cores"] for e in plan] == [4] * 8
    assert plan[0]["cpus"] == "1-4,49-52"


@pytest.mark.parametrize("hw,opts,needle", [
    ({"gpus": [{"index": 0}], "cpu": {"numa_nodes": [{"id": 0, "cpus": "0-x"}]}}, {},
     "cpu.numa_nodes[0].cpus"),
    ({"gpus": [{"index": 0}], "cpu": {"numa_nodes": [{"id": 0, "cpus": "0-3"},
                                                     {"id": 1, "cpus": "3-5"}]}}, {},
     "cpu 3 is in node 0 and node 1"),
    ({"gpus": [{"index": 0}, {"index": 0}], "cpu": {"threads": 4}}, {}, "not unique"),
    ({"gpus": [{"index": 0}], "cpu": {}}, {}, "cpu.numa_nodes (or cpu.threads)"),
    ({"gpus": [{"index": 0}], "cpu": {"threads": 4}}, {"policy": "nope"}, "policy"),
    ({"gpus": [{"index": 0}], "cpu": {"threads": 4}}, {"reserved_cores_per_socket": -1},
     "reserved_cores_per_socket"),
])
def test_bad_input_names_the_field(hw, opts, needle):
    with pytest.raises(AffinityError) as exc:
        plan_gpu_affinity(hw, **opts)
    assert needle in str(exc.value)


def test_declared_host_with_only_thread_count():
    report = plan_gpu_affinity_report({"cpu": {"threads": 16, "sockets": 1},
                                       "gpus": [{"index": 0}, {"index": 1}]})
    assert [e["cpus"] for e in report["gpus"]] == ["1-8", "9-15"]
    assert any("numa_nodes absent" in w for w in report["warnings"])


# --- Slurm ------------------------------------------------------------------------------

def test_slurm_core_index_orders_by_socket_then_cpu():
    hw = load("util-linux-4s-xeon-x7550-3numa-stride")
    # socket 0 = CPUs 0,4,8,..: abstract cores 0-7; socket 1 (CPU 1, 5, ...) starts at 8
    assert slurm_cores(hw, "0,4") == "0-1"
    assert slurm_cores(hw, "1") == "8"
    assert slurm_cores(hw, "33") == "8"        # SMT sibling of CPU 1: same core
    assert slurm_cores(hw, "3,7") == "24-25"
    hw = load("dlperf-8xv100-2s-xeon5118")     # sockets contiguous: abstract index = CPU id
    assert slurm_cores(hw, "13-15,37-39") == "13-15"


def test_gres_conf_lines():
    report = plan_gpu_affinity_report(load("stelline-esc8000a-e12-4xrtx6000ada-2s-epyc9374f"))
    lines = gres_conf_lines(report, gpu_type="rtx6000ada")
    assert lines[0] == "Name=gpu Type=rtx6000ada File=/dev/nvidia0 Cores=1-16"
    assert lines[3] == "Name=gpu Type=rtx6000ada File=/dev/nvidia3 Cores=49-63"


def test_service_pins():
    report = plan_gpu_affinity_report(load("dlperf-8xv100-2s-xeon5118"))
    pins = service_pins(report, [{"name": "triton", "gpus": [0, 1]},
                                 {"name": "a.service", "gpus": [3, 4], "numa_policy": "preferred"}])
    assert pins[0] == {"name": "triton.service", "gpus": [0, 1], "cpus": "1-6,25-30",
                       "mems": "0", "policy": "preferred"}
    assert pins[1]["policy"] == "bind" and pins[1]["mems"] == "0-1"
    with pytest.raises(AffinityError, match="GPU 9 is not in the plan"):
        service_pins(report, [{"name": "x", "gpus": [9]}])


# --- NVIDIA DeepLearningExamples gpu_affinity.py, socket_unique_contiguous ---------------
#
# Re-implemented from NVIDIA/DeepLearningExamples
# PyTorch/Classification/ConvNets/image_classification/gpu_affinity.py
# (commit 0fadac23d764429ed0da54dc8c5a31677dc923d5, Apache-2.0; the same file is shipped with
# several other models in that repository): set_socket_unique_affinity(..., mode="contiguous",
# balanced=True), cores="all_logical". Inputs that NVML gives it are taken from the topology:
# nvmlDeviceGetCpuAffinity = the GPU's local_cpus; thread_siblings_list = core_cpus; all CPUs
# are available (os.sched_getaffinity).

def nvidia_socket_unique_contiguous(hw, balanced=True):
    siblings = {}
    for cl in hw["cpu"]["core_cpus"]:
        # get_thread_siblings_list: re.findall(r"(\d+)\D(\d+)", thread_siblings_list)[0]
        res = re.findall(r"(\d+)\D(\d+)", cl)
        if res:
            pair = tuple(sorted(map(int, res[0])))
            for c in pair:
                siblings[c] = pair
    gpus = sorted(hw["gpus"], key=lambda g: g["index"])
    socket_affinities = [parse_cpulist(g["local_cpus"]) for g in gpus]
    grouped = []
    for aff in socket_affinities:
        srt = sorted(aff, key=lambda x: siblings.get(x, (x,)))
        grouped.append([tuple(g) for dummy, g in itertools.groupby(
            srt, key=lambda x: siblings.get(x, (x,)))])
    to_ids = collections.OrderedDict()
    for idx, g in enumerate(grouped):
        to_ids.setdefault(tuple(g), []).append(idx)
    min_per_gpu = min(len(c) // len(ids) for c, ids in to_ids.items())
    out = [None] * len(gpus)
    for groups, ids in to_ids.items():
        if balanced:
            per = min_per_gpu
            groups = groups[:len(ids) * min_per_gpu]
        else:
            per = len(groups) // len(ids)
        for sub, dev in enumerate(ids):
            out[dev] = list(groups[sub * per:(sub + 1) * per])
    return [format_cpulist(itertools.chain(*a)) for a in out]


@pytest.mark.parametrize("name", ["dlperf-8xv100-2s-xeon5118", "dlperf-dgx1-8xv100-2s-xeon6271c",
                                  "stelline-esc8000a-e12-4xrtx6000ada-2s-epyc9374f",
                                  "util-linux-2s-epyc7451-8numa"])
def test_agrees_with_nvidia_when_nothing_is_reserved_and_nodes_divide_evenly(name):
    """Same GPUs per node and cores divisible by GPUs: identical sets, CPU for CPU."""
    hw = load(name)
    ours = [e["cpus"] for e in plan_gpu_affinity(hw, reserved_cores_per_socket=0)]
    assert ours == nvidia_socket_unique_contiguous(hw)


def test_differs_from_nvidia_by_reserving_os_cores():
    hw = load("dlperf-8xv100-2s-xeon5118")
    nv = nvidia_socket_unique_contiguous(hw)
    ours = plan_gpu_affinity(hw)
    assert nv[0] == "0-2,24-26"               # NVIDIA hands core 0 (and IRQs, sshd) to GPU 0
    assert ours[0]["cpus"] == "1-3,25-27"
    # NVIDIA balanced=True drops the remainder; we hand it out (sizes differ by <= 1)
    assert [len(parse_cpulist(c)) // 2 for c in nv] == [3] * 8
    assert [e["cores"] for e in ours] == [3, 3, 3, 2, 3, 3, 3, 2]


def test_differs_from_nvidia_on_uneven_nodes():
    """club-3090 issue 46: 1 GPU on node 1, 4 on node 0. NVIDIA's balanced mode takes the global
    minimum (8 cores / 4 GPUs = 2) for every GPU, so GPU 0 gets 2 of node 1's 8 cores; we give it
    its whole node (less the OS core)."""
    hw = load("club3090-issue46-5gpu-2numa")
    nv = nvidia_socket_unique_contiguous(hw)
    assert nv == ["8-9,24-25", "0-1,16-17", "2-3,18-19", "4-5,20-21", "6-7,22-23"]
    ours = plan_gpu_affinity(hw, reserved_cores_per_socket=0)
    assert ours[0]["cpus"] == "8-15,24-31"
    assert [e["cpus"] for e in ours[1:]] == nv[1:]
    # NVIDIA's unbalanced mode gives the same as ours without reservation
    assert nvidia_socket_unique_contiguous(hw, balanced=False) == [e["cpus"] for e in ours]


def test_power9_smt4_nvidia_splits_cores():
    """NVIDIA's sibling parser reads only the first two ids of thread_siblings_list ("0-3" ->
    (0, 3)), so on SMT4 POWER9 CPUs 1 and 2 look like cores of their own and a split can cut a
    core in two; ours keep all 4 threads of a core together."""
    hw = load("jdh4-traverse-2s-power9-4xv100")
    hw["gpus"] = [dict(hw["gpus"][0], index=i) for i in range(3)] + [dict(hw["gpus"][2], index=3)]
    nv = [set(parse_cpulist(c)) for c in nvidia_socket_unique_contiguous(hw)]
    assert 20 in nv[0] and 21 in nv[1]             # core 20-23 split between GPU 0 and GPU 1
    ours = plan_gpu_affinity(hw, reserved_cores_per_socket=0)
    assert [e["cpus"] for e in ours] == ["0-23", "24-43", "44-63", "64-127"]


# --- boundaries and validation pinned by mutation testing ----------------------------------

def test_capacity_error_carries_pool_gpus_and_counts():
    hw = small_hw([{"index": i, "numa_node": 0} for i in range(8)])
    with pytest.raises(AffinityCapacityError) as exc:
        plan_gpu_affinity(hw, reserved_cores_per_socket=2)
    e = exc.value
    assert (e.pool, e.gpus, e.cores, e.reserved) == ("NUMA node 0", list(range(8)), 6, 2)


@pytest.mark.parametrize("cpus,ok", [("0-3,10000", True), ("0,16383", True), ("0,16384", False),
                                     ("0,99999", False), ("0-999999", False), ([0, 16383], True),
                                     ([0, 16384], False)])
def test_cpu_ids_up_to_16383_are_accepted_and_above_refused(cpus, ok):
    hw = {"cpu": {"numa_nodes": [{"id": 0, "cpus": cpus}]}, "gpus": [{"index": 0, "numa_node": 0}]}
    if ok:
        assert plan_gpu_affinity(hw, reserved_cores_per_socket=0)[0]["cpus"] == format_cpulist(
            parse_cpulist(cpus))
    else:
        big = max(cpus) if isinstance(cpus, list) else max(
            int(n) for n in re.findall(r"[0-9]+", cpus))
        with pytest.raises(AffinityError, match=r"cpu.numa_nodes\[0\].cpus: cpu id.* %d|cpu id %d .*above" % (big, big)):
            plan_gpu_affinity(hw)


@pytest.mark.parametrize("threads,ok", [(1, True), (16384, True), (0, False), (16385, False), (-3, False)])
def test_declared_thread_count_bounds(threads, ok):
    hw = {"cpu": {"threads": threads}, "gpus": [{"index": 0}]}
    if ok:
        e = plan_gpu_affinity(hw, reserved_cores_per_socket=0)[0]
        assert (e["cores"], e["mems"], e["numa_node"]) == (threads, "0", -1)
    else:
        with pytest.raises(AffinityError, match="cpu.threads: expected 1 to 16384, got %d" % threads):
            plan_gpu_affinity(hw)


def test_empty_numa_node_means_unknown_and_one_node_hosts_place_it_there():
    hw = small_hw([{"index": 0, "numa_node": ""}, {"index": 1, "numa_node": "0"}])
    assert [(e["cpus"], e["numa_node"]) for e in plan_gpu_affinity(hw)] == [("1-4", -1), ("5-7", 0)]


@pytest.mark.parametrize("cpu,needle", [
    ({"numa_nodes": ["x"]}, "cpu.numa_nodes[0]: expected {id, cpus}"),
    ({"numa_nodes": [{"cpus": "0-3"}]}, "cpu.numa_nodes[0]: expected {id, cpus}"),
    ({"numa_nodes": [{"id": 0, "cpus": "0-3"}], "core_cpus": ["0,1", "1,2"]}, "cpu.core_cpus[1]: cpu 1 is in two cores"),
    ({"numa_nodes": [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": "4-7"}], "core_cpus": ["3,4"]},
     "cpu.core_cpus[0]: siblings 3,4 span NUMA nodes"),
    ({"numa_nodes": [{"id": 0, "cpus": "0-3"}], "sockets": "two"}, "cpu.sockets: expected an integer, got 'two'"),
    ({"numa_nodes": [{"id": 0, "cpus": "0-3"}], "sockets": 0}, "cpu.sockets: expected a count >= 1, got 0"),
    ({"numa_nodes": [{"id": 0, "cpus": "0-3"}, {"id": 0, "cpus": "4-7"}]}, "cpu.numa_nodes[1].id: node 0 listed twice"),
])
def test_bad_cpu_fields_are_named(cpu, needle):
    with pytest.raises(AffinityError) as exc:
        plan_gpu_affinity({"cpu": cpu, "gpus": [{"index": 0, "numa_node": 0}]})
    assert needle in str(exc.value)


def test_repeated_sibling_lists_are_one_core():
    hw = small_hw([{"index": 0, "numa_node": 0}], core_cpus=["0,4", "0,4", "1,5", "2,6", "3,7"])
    e = plan_gpu_affinity(hw)[0]
    assert (e["cpus"], e["cores"]) == ("1-3,5-7", 3)


def test_gpus_must_be_a_list_and_indexes_unique():
    with pytest.raises(AffinityError, match="^gpus: expected a list, got str$"):
        plan_gpu_affinity({"cpu": {"threads": 4}, "gpus": "0,1"})
    with pytest.raises(AffinityError, match=r"^gpus\[1\].index: GPU index 0 is not unique$"):
        plan_gpu_affinity({"cpu": {"threads": 4}, "gpus": [{"index": 0, "uuid": "a"}, {"index": "0", "uuid": "b"}]})


def test_one_socket_with_two_nodes_reserves_one_core_in_all_and_infers_nothing():
    nodes = [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": "4-7"}]
    report = plan_gpu_affinity_report(small_hw([{"index": 0, "numa_node": 0}, {"index": 1, "numa_node": 1}],
                                               nodes, sockets=1))
    assert report["reserved_cpus"] == "0"
    assert [e["cpus"] for e in report["gpus"]] == ["1-3", "4-7"]
    assert not any("inferred" in w for w in report["warnings"])


def test_gpu_on_node_zero_without_cpus_says_node_zero_has_none():
    nodes = [{"id": 0, "cpus": ""}, {"id": 1, "cpus": "0-7"}]
    report = plan_gpu_affinity_report(small_hw([{"index": 0, "numa_node": 0, "local_cpus": "0-3",
                                                 "pci_bus_id": "0000:3b:00.0", "uuid": "GPU-1"}], nodes))
    assert (report["gpus"][0]["fallback"], report["gpus"][0]["uuid"]) == ("local_cpus", "GPU-1")
    assert report["warnings"][-1].startswith(
        "GPU 0 (0000:3b:00.0): numa_node 0 has no CPUs; using its local_cpus 0-3")


def test_unplaced_gpu_joins_the_node_with_most_usable_cores_per_gpu():
    """Node 0: 7 usable cores and one GPU (3.5 each if shared); node 1: 4 usable, no GPU."""
    nodes = [{"id": 0, "cpus": "0-7"}, {"id": 1, "cpus": "8-12"}]
    hw = {"cpu": {"numa_nodes": nodes}, "gpus": [{"index": 0, "numa_node": 0}, {"index": 1, "numa_node": -1}]}
    report = plan_gpu_affinity_report(hw)
    assert [(e["cpus"], e["fallback"]) for e in report["gpus"]] == [("1-7", None), ("9-12", "all")]
    assert report["warnings"][-1].endswith("placed on NUMA node 1")
    nodes[1]["cpus"] = "8-11"       # 3 usable: sharing node 0 (3.5 each) is better
    assert [e["cpus"] for e in plan_gpu_affinity(hw)] == ["1-4", "5-7"]


def test_options_are_reported_normalised_and_policy_kept():
    report = plan_gpu_affinity_report(load("dlperf-8xv100-2s-xeon5118"), reserved_cores_per_socket="2",
                                      include_smt="no", policy="socket", max_cores_per_gpu=3.0)
    assert report["options"] == {"reserved_cores_per_socket": 2, "include_smt": False, "max_cores_per_gpu": 3}
    assert report["policy"] == "socket"


def test_nodes_that_do_not_divide_into_sockets_reserve_per_node_and_say_so():
    nodes = [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": "4-7"}, {"id": 2, "cpus": "8-11"}]
    report = plan_gpu_affinity_report(small_hw([{"index": 0, "numa_node": 2}], nodes, sockets=2))
    assert report["reserved_cpus"] == "0,4,8"
    assert "3 NUMA nodes with CPUs do not divide into 2 sockets: reserved cores are taken per " \
        "NUMA node and there is no socket fallback" in report["warnings"]


def test_policy_socket_without_socket_membership_splits_nodes_and_says_so():
    report = plan_gpu_affinity_report(load("club3090-issue46-5gpu-2numa"), policy="socket")
    assert report["gpus"] == plan_gpu_affinity_report(load("club3090-issue46-5gpu-2numa"))["gpus"]
    assert "policy socket but socket membership unknown: splitting NUMA nodes instead" in report["warnings"]


@pytest.mark.parametrize("node,why", [
    (None, "numa_node is null on a host with 2 NUMA nodes and local_cpus are unknown"),
    (-1, "numa_node is -1 on a host with 2 NUMA nodes and local_cpus are unknown"),
    (5, "numa_node 5 is not in cpu.numa_nodes and local_cpus are unknown"),
])
def test_fallback_warning_says_why_the_node_was_not_used(node, why):
    nodes = [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": "4-7"}]
    report = plan_gpu_affinity_report(small_hw([{"index": 0, "numa_node": node}], nodes, sockets=2))
    assert report["warnings"] == ["cpu.core_cpus absent (declared host?): SMT siblings unknown, each CPU "
                                  "treated as its own physical core",
                                  "GPU 0 (None): %s; using its all CPUs: placed on NUMA node 0" % why]


@pytest.mark.parametrize("services,needle", [
    (["triton"], "gpu_affinity_systemd_services[0]: needs a name"),
    ([{"name": 5, "gpus": [0]}], "gpu_affinity_systemd_services[0]: needs a name"),
    ([{"name": "t", "gpus": []}], "(t): gpus must be a non-empty list of GPU indices"),
    ([{"name": "t", "gpus": "0"}], "(t): gpus must be a non-empty list of GPU indices"),
])
def test_service_pins_refuse_bad_services(services, needle):
    with pytest.raises(AffinityError) as exc:
        service_pins(plan_gpu_affinity_report(load("dlperf-8xv100-2s-xeon5118")), services)
    assert needle in str(exc.value)
