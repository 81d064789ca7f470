"""The platform rules (issue 32: plugin_utils/platform.py, rules pcie.* and fabric.*) on real
whole-system trees (tests/data/real/SOURCES.md, "pcie/"). A fault no capture shows is the capture
with one figure changed; each test says which."""
import copy
import os
import re
import sys

import pytest
from testpaths import DATA

from ansible_collections.dlrack.node.plugins.module_utils.hw import pcie_tree
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import lspci
from ansible_collections.dlrack.node.plugins.plugin_utils import platform
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import evaluate_host

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "module_utils", "hw"))


def real(*parts):
    with open(os.path.join(DATA, "real", *parts)) as handle:
        return handle.read()


ESC_GPUS = ["0000:01:00.0", "0000:41:00.0", "0000:c1:00.0", "0000:e1:00.0"]


def esc8000a():
    """ASUS ESC8000A-E12: 2x EPYC 9374F, 4 RTX 6000 Ada, 2 ConnectX-7 (2 functions each), NVMe behind switches."""
    tree = lspci.parse_lspci(real("pcie", "stelline-esc8000a-e12-lspci-vvv-8-devices.txt"),
                             real("pcie", "stelline-esc8000a-e12-lspci-tv.txt"))
    gpus = [{"index": i, "pci_bus_id": b, "model": "NVIDIA RTX 6000 Ada Generation", "memory_mb": 49140,
             "pcie": {"width": 16, "width_max": 16}} for i, b in enumerate(ESC_GPUS)]
    return {"schema": 1, "source": "gathered", "gpus": gpus, "pcie": tree,
            "cpu": {"model": "AMD EPYC 9374F 32-Core Processor", "sockets": 2, "cores": 64, "threads": 64,
                    "numa_nodes": [{"id": 0, "cpus": "0-31", "memory_mb": 193129},
                                   {"id": 1, "cpus": "32-63", "memory_mb": 193477}]}}


def dgx2(width=True):
    """NVIDIA DGX-2H (hwloc export): 16 V100 behind two levels of PLX switches. With ``width``, every
    link is written as the x16 Gen3 its 15.75 GB/s is (16 lanes x 8 GT/s x 128/130 / 8 bits)."""
    tree = lspci.parse_hwloc_xml(real("pcie", "hwloc-nvidiaDGX2.xml"))
    if width:
        for dev in tree["devices"]:
            if dev["link_gbs"] and abs(dev["link_gbs"] - 15.753846) < 1e-3:
                dev["link"] = {"width": 16, "width_max": 16, "gen": 3, "gen_max": 3}
    gpus = [{"index": i, "pci_bus_id": d["bdf"], "model": "Tesla V100-SXM3-32GB-H", "memory_mb": 32768}
            for i, d in enumerate(d for d in tree["devices"] if d["kind"] == "gpu")]
    return {"schema": 1, "source": "gathered", "gpus": gpus, "pcie": tree,
            "cpu": {"model": "Intel(R) Xeon(R) Platinum 8174 CPU @ 3.10GHz", "sockets": 2}}


def findings(hw, rule, **kwargs):
    res = evaluate_host("gpu-n01", hw, **kwargs)
    return [f for f in res["findings"] if f["rule"] == rule], res["rules"].get(rule)


def device(hw, bdf):
    return [d for d in hw["pcie"]["devices"] if d["bdf"] == bdf][0]


def topo_matrix(text):
    """{(row, column): legend} of an nvidia-smi topo -m capture."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0].split()
    out = {}
    for line in lines[1:]:
        cells = line.split()
        if not cells or not re.match(r"^(GPU|NIC)\d+$", cells[0]):
            break
        for col, value in zip(header, cells[1:]):
            if re.match(r"^(GPU|NIC)\d+$", col):
                out[(cells[0], col)] = value
    return out


def test_legend_computed_from_the_tree_equals_the_real_topo_m():
    tree = platform.Tree(esc8000a()["pcie"])
    want = topo_matrix(real("nvidia-smi-topo", "stelline-esc8000a-e12-4x-rtx6000ada-2s-epyc9374f-spaces.txt"))
    names = dict(("GPU%d" % i, b) for i, b in enumerate(ESC_GPUS))
    # NIC0-3 = mlx5_0-3 = the two ConnectX-7 cards' functions in address order (ibv_devinfo's GUIDs pair them)
    names.update(("NIC%d" % i, b) for i, b in enumerate(["0000:21:00.0", "0000:21:00.1", "0000:81:00.0", "0000:81:00.1"]))
    compared = 0
    for (row, col), legend in want.items():
        if legend == "X":
            continue
        assert platform.distance(tree, names[row], names[col]) == legend, (row, col)
        compared += 1
    assert compared == 56
    assert platform.matrix(tree)["nics"] == ["0000:21:00.0", "0000:21:00.1", "0000:81:00.0", "0000:81:00.1"]


def test_legend_on_the_dgx2_switch_tree():
    tree = platform.Tree(dgx2()["pcie"])
    assert platform.distance(tree, "0000:34:00.0", "0000:36:00.0") == "PIX"    # one switch
    assert platform.distance(tree, "0000:34:00.0", "0000:39:00.0") == "PXB"    # two levels
    assert platform.distance(tree, "34:00.0", "0000:57:00.0") == "NODE"        # host bridges of one socket
    assert platform.distance(tree, "0000:34:00.0", "0000:b7:00.0") == "SYS"
    assert platform.distance(tree, "0000:34:00.0", "0000:99:00.0") is None


def test_path_link_gen4_nic_in_gen5_port_is_not_downgraded():
    hw = esc8000a()
    findings_, outcome = findings(hw, "pcie.path_link")
    assert outcome == "warn"      # the NVMe bridges have no -vvv block: unknown, never a pass
    # changed: the ConnectX-7 reads Gen4 x16 (cap and status) under a Gen5 x16 root port
    hw = esc8000a()
    device(hw, "0000:20:03.1")["link"] = {"width": 16, "width_max": 16, "gen": 4, "gen_max": 5}
    device(hw, "0000:21:00.0")["link"] = {"width": 16, "width_max": 16, "gen": 4, "gen_max": 4}
    problems, unknown = platform.path_problems(platform.Tree(hw["pcie"]), device(hw, "0000:21:00.0"))
    assert problems == [] and unknown == []
    # changed: the same NIC negotiated x8
    device(hw, "0000:21:00.0")["link"]["width"] = 8
    found, outcome = findings(hw, "pcie.path_link")
    fail = [f for f in found if f["severity"] == "warning" and f.get("shadow")]
    assert fail and "link 0000:21:00.0 -> 0000:20:03.1 runs x8 of x16" in fail[0]["message"] and fail[0]["message"].startswith("[shadow]")


def test_path_link_idle_gpu_speed_is_not_a_fault_but_a_narrow_uplink_is():
    hw = dgx2()
    for dev in hw["pcie"]["devices"]:
        if dev["kind"] == "gpu":
            dev["link"]["gen"] = 1            # idle V100s at 2.5 GT/s
    found, outcome = findings(hw, "pcie.path_link")
    assert outcome == "pass", found
    # changed: the top switch's uplink 0000:2c:00.0 capable of x8 only
    device(hw, "0000:2c:00.0")["link"] = {"width": 8, "width_max": 8, "gen": 3, "gen_max": 3}
    found, outcome = findings(hw, "pcie.path_link")
    assert outcome == "warn"                  # shadow: a warning until enforced
    msg = [f for f in found if f.get("shadow")][0]["message"]
    assert "x16 device behind an x8 hop at 0000:2c:00.0 -> 0000:2b:00.0" in msg
    assert "GPU0 0000:34:00.0" in msg and "GPU4 " not in msg
    found, outcome = findings(hw, "pcie.path_link", severity={"pcie.path_link": "error"})
    assert outcome == "fail"


def test_acs_judged_only_on_gpu_and_nic_paths():
    hw = esc8000a()
    # changed: ACS redirect on every NVMe switch port (the "global grep" fault): no GPU/NIC path crosses them
    for dev in hw["pcie"]["devices"]:
        if dev["kind"] == "bridge" and dev["port"] != "root":
            dev["acs"], dev["acs_readable"] = {"cap": list(pcie_tree.ACS_BITS), "ctl": ["SrcValid", "ReqRedir", "CmpltRedir"]}, True
    found, outcome = findings(hw, "pcie.acs_p2p")
    assert outcome == "pass" and "no GPU-GPU or GPU-NIC pair shares a PCIe switch" in found[0]["message"]


def test_acs_on_a_switch_port_between_two_gpus_names_pair_and_port():
    hw = dgx2()
    found, outcome = findings(hw, "pcie.acs_p2p")
    assert outcome == "warn" and "cannot verify ACS" in found[0]["message"]     # hwloc does not export ACS
    for dev in hw["pcie"]["devices"]:
        if dev["kind"] == "bridge":
            dev["acs"], dev["acs_readable"] = {"cap": list(pcie_tree.ACS_BITS), "ctl": []}, True
    found, outcome = findings(hw, "pcie.acs_p2p")
    assert outcome == "pass"
    # changed: ReqRedir+ CmpltRedir+ on the downstream port above GPU0
    device(hw, "0000:33:00.0")["acs"]["ctl"] = ["SrcValid", "ReqRedir", "CmpltRedir"]
    found, outcome = findings(hw, "pcie.acs_p2p", severity={"pcie.acs_p2p": "error"})
    assert outcome == "fail"
    msg = found[0]["message"]
    assert "GPU0 0000:34:00.0 <-> GPU1 0000:36:00.0: ReqRedir+CmpltRedir on port 0000:33:00.0" in msg
    assert "GPU4" not in msg and "SrcValid" not in msg


def test_switch_oversubscription_dgx2_is_two_to_one():
    found, outcome = findings(dgx2(width=False), "pcie.switch_oversubscription")
    assert outcome == "pass" and "31.5 GB/s downstream on a 15.8 GB/s uplink (2.0:1)" in found[0]["observed"]
    found, outcome = findings(dgx2(), "pcie.switch_oversubscription",
                              thresholds={"pcie_switch_oversubscription_max": 1.5})
    assert outcome == "warn" and "0000:2c:00.0: x32 downstream on an x16 uplink (2.0:1, 4 lanes per GPU to the host)" \
        in found[0]["message"]
    assert "0000:32:00.0: x32 downstream on an x16 uplink (2.0:1, 8 lanes per GPU to the host)" in found[0]["message"]


def test_lane_budget_counts_nics_and_nvme_per_socket():
    found, outcome = findings(esc8000a(), "pcie.lane_budget")
    # the NVMe switches' root ports have no -vvv block in the capture: a lower bound, never a pass
    assert outcome == "warn" and "at least node 0: 48 of 64 lanes" in found[0]["observed"]
    assert "4 gpu" in found[0]["message"] and "6 nic" in found[0]["message"] and "17 nvme" in found[0]["message"]
    hw = dgx2()
    hw["cpu"].update(pcie_lanes=96, numa_nodes=[{"id": 0, "cpus": "0-23", "memory_mb": 1}, {"id": 1, "cpus": "24-47", "memory_mb": 1}])
    found, outcome = findings(hw, "pcie.lane_budget")
    assert outcome == "pass" and found[0]["observed"] == "node 0: 32 of 48 lanes; node 1: 32 of 48 lanes"
    hw = esc8000a()
    hw["cpu"]["pcie_lanes"] = 64        # changed: a platform with 32 lanes per socket
    found, outcome = findings(hw, "pcie.lane_budget", severity={"pcie.lane_budget": "error"})
    assert outcome == "fail" and "NUMA node 0: 48 of 32" in found[0]["observed"]


def test_bar1_against_vram():
    found, outcome = findings(esc8000a(), "pcie.bar1")
    assert outcome == "pass" and "64 GiB" in found[0]["observed"]
    tree = lspci.parse_lspci(real("lspci-vv", "linuxhw-esc8000g4-rtx2080ti-1d_00.0-lspci-vvnn-behind-plx-idle-2.5GTs.txt"))
    hw = {"schema": 1, "source": "gathered", "pcie": tree,
          "gpus": [{"index": 0, "pci_bus_id": "0000:1d:00.0", "model": "NVIDIA GeForce RTX 2080 Ti", "memory_mb": 11264}]}
    found, outcome = findings(hw, "pcie.bar1", severity={"pcie.bar1": "error"})
    assert outcome == "fail" and "GPU0 0000:1d:00.0 BAR1 256 MiB for 11 GiB VRAM" in found[0]["message"]


def test_iommu_modes():
    hw = esc8000a()
    hw["pcie"]["iommu"] = {"mode": "translated", "groups": 80, "units": ["ivhd0"], "cmdline": ["iommu.passthrough=0"],
                           "group_types": []}
    found, outcome = findings(hw, "pcie.iommu")
    assert outcome == "warn" and "IOMMU in translated mode" in found[0]["message"] and "iommu=pt" in found[0]["remedy"]
    hw["pcie"]["iommu"]["mode"] = "passthrough"
    assert findings(hw, "pcie.iommu")[1] == "pass"


def test_flat_vm_tree_says_what_it_cannot_see():
    from test_pcie_tree import h200_tree       # the real H200 VM tree with its config space
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        tree = pcie_tree.read_sysfs(h200_tree(tmp))
    hw = {"schema": 1, "source": "gathered", "pcie": tree, "host": {"virtualization": "kvm"},
          "gpus": [{"index": 0, "pci_bus_id": "0000:00:06.0", "model": "NVIDIA H200", "memory_mb": 143771}]}
    res = evaluate_host("h200", hw)
    by_rule = dict((r, [f for f in res["findings"] if f["rule"] == r]) for r in res["rules"])
    assert res["rules"]["pcie.path_link"] == "warn"
    assert "sits on the virtual machine's root bus" in by_rule["pcie.path_link"][0]["message"]
    # the VM's virtio NIC (0000:00:03.0, no link attributes) is on the same hypervisor bus: no second warning
    assert len(by_rule["pcie.path_link"]) == 1, by_rule["pcie.path_link"]
    assert res["rules"]["pcie.acs_p2p"] == "skip"         # one GPU, no NIC: no peer path
    assert res["rules"]["pcie.bar1"] == "pass" and "256 GiB" in by_rule["pcie.bar1"][0]["observed"]
    assert res["rules"]["pcie.iommu"] == "warn" and "hypervisor" in by_rule["pcie.iommu"][0]["message"]
    assert res["rules"]["pcie.lane_budget"] == "warn"
    assert res["rules"]["fabric.nic_affinity"] == "skip"


def test_nic_affinity_and_rail_alignment():
    found, outcome = findings(esc8000a(), "fabric.nic_affinity")
    assert outcome == "pass" and "GPU2 0000:c1:00.0 -> NIC 0000:81:00.0 NODE" in found[0]["observed"]
    hw = esc8000a()
    # changed: the second ConnectX-7 (socket 1) removed
    hw["pcie"]["devices"] = [d for d in hw["pcie"]["devices"] if not d["bdf"].startswith("0000:81:")]
    found, outcome = findings(hw, "fabric.nic_affinity")
    assert outcome == "warn" and "GPU2 0000:c1:00.0: nearest NIC 0000:21:00.0 is SYS" in found[0]["message"]
    assert findings(esc8000a(), "fabric.rail_alignment")[1] == "skip"
    hw = esc8000a()
    hw["fabric"] = {"rail_optimized": True}
    found, outcome = findings(hw, "fabric.rail_alignment", severity={"fabric.rail_alignment": "error"})
    assert outcome == "fail" and "nearest RDMA NIC 0000:21:00.0 is NODE (needs PXB or closer)" in found[0]["message"]


def test_declared_topology_is_judged_by_capabilities():
    hw = dgx2()
    hw["source"] = "declared"
    hw["pcie"]["source"] = "declared"
    for dev in hw["pcie"]["devices"]:
        for key in ("width", "gen"):
            dev["link"].pop(key, None)
        for key in ("link_gbs", "config_bytes", "acs_readable"):
            dev.pop(key, None)
    found, outcome = findings(hw, "pcie.path_link")
    assert outcome == "pass"
    hw2 = copy.deepcopy(hw)
    device(hw2, "0000:2c:00.0")["link"]["width_max"] = 8
    assert findings(hw2, "pcie.path_link")[1] == "warn"
    assert evaluate_host("d", hw)["rules"]["inventory.schema"] == "pass"


@pytest.mark.parametrize("bad", [{"devices": "x"}, {"devices": [{"bdf": 5, "kind": "toaster"}]}, "x",
                                 {"devices": [{"bdf": "0000:01:00.0", "parent": "0000:01:00.0", "kind": "gpu"}]}])
def test_hostile_trees_never_raise(bad):
    res = evaluate_host("h", {"schema": 1, "source": "gathered", "pcie": bad,
                              "gpus": [{"index": 0, "pci_bus_id": "0000:01:00.0", "memory_mb": 1}]})
    assert res["status"] in ("pass", "warn", "fail")


def test_topology_picture_shows_switches_and_nics():
    from ansible_collections.dlrack.node.plugins.plugin_utils import report
    hw = esc8000a()
    for g, node in zip(hw["gpus"], (0, 0, 1, 1)):
        g["numa_node"] = node
    hw["pcie"]["devices"][0]["name"] = "<script>x</script>"      # hostile text from a node stays data
    cols = dict((c["title"], c) for c in report.topology(hw)["columns"])
    node0 = [(i["kind"], i["label"], i["right"]) for i in cols["NUMA node 0"]["items"]]
    assert ("nic", "NIC 0000:21:00.0 x16", "GPU0 NODE, GPU1 NODE") in node0
    assert not [i for i in node0 if i[0] == "switch"]         # the NVMe-only switches are not drawn as switches
    hw = dgx2()
    hw["cpu"]["numa_nodes"] = [{"id": 0, "cpus": "0-23", "memory_mb": 1}, {"id": 1, "cpus": "24-47", "memory_mb": 1}]
    cols = dict((c["title"], c) for c in report.topology(hw)["columns"])
    items = cols["NUMA node 0"]["items"]
    assert ("switch", "PCIe switch 0000:2c:00.0: 4 GPU", "2.0:1") == (items[0]["kind"], items[0]["label"], items[0]["right"])
    assert [i["kind"] for i in items] == ["switch"] * 6 and len(items) == platform.PICTURE_ROWS
    assert report.topology({"schema": 1, "pcie": {"devices": "junk"}}) is not None


def test_topology_picture_keeps_nics_of_unknown_numa_node():
    """NICs whose NUMA node is unknown (lspci without NUMA lines, a VM) were left out of the picture:
    only the drawn NUMA columns took the switch and NIC lines. They go with the loose GPUs now."""
    from ansible_collections.dlrack.node.plugins.plugin_utils import report
    hw = esc8000a()
    for dev in hw["pcie"]["devices"]:
        dev["numa_node"] = None          # changed: the capture's NUMA node lines removed
    cols = dict((c["title"], c) for c in report.topology(hw)["columns"])
    loose = [i["label"] for i in cols["No NUMA affinity"]["items"]]
    assert "NIC 0000:21:00.0 x16" in loose and "NIC 0000:81:00.0 x16" in loose


def test_nic_affinity_of_unknown_numa_nodes_cannot_verify():
    """GPUs and NICs behind different host bridges whose NUMA node is unknown (sysfs numa_node -1, lspci
    without NUMA lines) were called SYS, and fabric.nic_affinity failed a node it cannot judge."""
    hw = esc8000a()
    for dev in hw["pcie"]["devices"]:
        dev["numa_node"] = None          # changed: the capture's NUMA node lines removed
    tree = platform.Tree(hw["pcie"])
    assert platform.distance(tree, ESC_GPUS[0], "0000:21:00.0") is None
    found, outcome = findings(hw, "fabric.nic_affinity", severity={"fabric.nic_affinity": "error"})
    assert outcome == "warn" and len(found) == 1, found
    assert found[0]["message"].startswith("cannot verify the NIC affinity of GPU0 0000:01:00.0")
    hw["fabric"] = {"rail_optimized": True}
    found, outcome = findings(hw, "fabric.rail_alignment", severity={"fabric.rail_alignment": "error"})
    assert outcome == "fail" and "GPU0 0000:01:00.0: no RDMA NIC at PXB or closer" in found[0]["message"]


def test_gathered_topology_against_the_declared_one():
    declared = dgx2()
    declared["source"] = declared["pcie"]["source"] = "declared"
    gathered = dgx2()
    found, outcome = findings(gathered, "pcie.matches_declared", declared=declared)
    assert outcome == "pass" and "16 declared GPU/NIC/NVMe devices" in found[0]["message"]
    # changed: GPU1 0000:36:00.0 gathered under the other switch of its top-level switch (0000:38:10.0)
    moved = dgx2()
    device(moved, "0000:36:00.0")["parent"] = "0000:38:10.0"
    device(moved, "0000:36:00.0")["link"]["gen_max"] = 2
    found, outcome = findings(moved, "pcie.matches_declared", declared=declared, severity={"pcie.matches_declared": "error"})
    msg = found[0]["message"]
    assert outcome == "fail" and "0000:34:00.0 <-> 0000:36:00.0 legend: declared PIX, gathered PXB" in msg
    assert "0000:36:00.0 gen_max: declared 3, gathered 2" in msg
    assert "pcie.matches_declared" not in evaluate_host("n", gathered)["rules"]     # nothing declared: no outcome


@pytest.mark.parametrize("where, value", [
    ("bars", 5), ("rebar", True), ("rdma", {"a": 1}), ("link_gbs", "x"), ("acs", ["ReqRedir+"]),
    ("iommu.cmdline", 5), ("ports.counters", "x"), ("ports.pkeys", 5), ("power.gpus", 5)])
def test_a_section_of_the_wrong_shape_is_a_schema_problem_of_its_host_not_a_traceback(where, value):
    """The free-form parts of pcie/fabric/power (a node's facts, untrusted) in a shape the checks
    cannot compute with: evaluate_host names the field in inventory.schema and judges the rest
    (before: a TypeError/AttributeError out of evaluate_host, and the fleet's preflight without a report)."""
    hw = esc8000a()
    hw["fabric"] = {"ports": [{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "counters": {"symbol_error": 1},
                               "counter_rates": {"symbol_error": {"delta": 1, "per_s": 1.0}}, "pkeys": ["0xffff"]}]}
    hw["power"] = {"psus": [{"capacity_w": 3000, "present": True}],
                   "gpus": [{"pci_bus_id": b, "limit_w": 300, "default_w": 300} for b in ESC_GPUS]}
    hw["pcie"]["iommu"] = {"mode": "translated", "cmdline": ["iommu=on"]}
    if where == "iommu.cmdline":
        hw["pcie"]["iommu"]["cmdline"] = value
        path = "dlrack_hw.pcie.iommu.cmdline"
    elif where.startswith("ports."):
        hw["fabric"]["ports"][0][where[6:]] = value
        path = "dlrack_hw.fabric.ports[0].%s" % where[6:]
    elif where == "power.gpus":
        hw["power"]["gpus"] = value
        path = "dlrack_hw.power.gpus"
    else:
        for dev in hw["pcie"]["devices"]:
            dev[where] = value
        path = "dlrack_hw.pcie.devices[0].%s" % where
    res = evaluate_host("gpu-n01", hw)
    schema = [f["message"] for f in res["findings"] if f["rule"] == "inventory.schema" and f["severity"] == "error"]
    assert any((path + ":") in m for m in schema), schema
    assert res["rules"]["pcie.path_link"] in ("pass", "fail", "warn")      # the rest is judged


@pytest.mark.parametrize("mangle", [
    lambda d: device(d, ESC_GPUS[0])["link"].update(width_max="x16"),
    lambda d: device(d, ESC_GPUS[0]).update(link="x16"),
    lambda d: d.update(fabric={"ports": 5, "rail_optimized": True}),
    lambda d: d.update(fabric={"ports": [{"device": "mlx5_0", "port": 1, "pkeys": 5}]}),
    lambda d: d["pcie"].update(devices=5)])
def test_a_typo_in_the_declared_topology_is_named_not_a_traceback(mangle):
    """A declaration the operator typed (``width_max: "x16"``, ``ports: 5``) beside a gathered document:
    inventory.matches_declared names the field, the platform rules judge what is well formed (before:
    TypeError/AttributeError out of evaluate_host from tree_differences, check_ib_ports)."""
    declared = esc8000a()
    declared["source"] = declared["pcie"]["source"] = "declared"
    declared["fabric"] = {"ports": [{"device": "mlx5_0", "port": 1, "state": "ACTIVE"}]}
    mangle(declared)
    gathered = esc8000a()
    gathered["fabric"] = {"ports": [{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "pkeys": ["0xffff"]}]}
    res = evaluate_host("gpu-n01", gathered, declared=declared)
    malformed = [f["message"] for f in res["findings"] if f["rule"] == "inventory.matches_declared"]
    assert malformed and "the declaration of gpu-n01 is malformed: dlrack_hw." in malformed[0]
    assert res["rules"]["fabric.ib_ports"] in ("pass", "fail", "warn")
