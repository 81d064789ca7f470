"""memory.numa_balanced against NUMA layouts of real machines.

The layouts are read from real captures in tests/data/real/ (provenance in SOURCES.md there):
``numactl --hardware`` of the ASUS ESC8000A-E12 (2S EPYC 9374F) and the Puget WRX90 (1S
Threadripper PRO), and the lscpu of a Princeton Traverse node (2S POWER9, V100 memory as CPU-less
NUMA nodes 252-255). The faults (a socket without memory, DIMMs missing on one socket) are those
captures with one node's size changed: no capture of such a fault was found, and the test says
which figure it changed."""
import copy
import os
import re

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils.rules import evaluate_host

from hwdocs import GATHERED  # noqa: E402  (tests/hwdocs.py)
from testpaths import DATA  # noqa: E402

REAL = os.path.join(DATA, "real")


def numactl_nodes(name):
    """cpu.numa_nodes as the gatherer writes them, from a ``numactl --hardware`` capture (node N
    cpus: a space-separated list; node N size: MemTotal of the node in MB)."""
    with open(os.path.join(REAL, "numactl-hardware", name)) as fh:
        text = fh.read()
    nodes = {}
    for nid, cpus in re.findall(r"^node (\d+) cpus:(.*)$", text, re.M):
        ids = [int(c) for c in cpus.split()]
        nodes[int(nid)] = {"id": int(nid), "cpus": "%d-%d" % (ids[0], ids[-1]) if ids else ""}
    for nid, size in re.findall(r"^node (\d+) size: (\d+) MB$", text, re.M):
        nodes[int(nid)]["memory_mb"] = int(size)
    return [nodes[k] for k in sorted(nodes)]


def _host(nodes, source="gathered"):
    doc = copy.deepcopy(GATHERED)
    doc["source"] = source
    doc["cpu"]["numa_nodes"] = nodes
    doc["memory"]["total_mb"] = sum(n.get("memory_mb") or 0 for n in nodes) or doc["memory"]["total_mb"]
    return doc


def _numa(doc, **kwargs):
    res = evaluate_host("gpu-n01", doc, **kwargs)
    found = [f for f in res["findings"] if f["rule"] == "memory.numa_balanced"]
    return found, res


def test_a_balanced_two_socket_server_passes():
    nodes = numactl_nodes("stelline-esc8000a-e12-2s-epyc9374f.txt")
    assert [n["memory_mb"] for n in nodes] == [193129, 193477]     # the capture as it is
    found, res = _numa(_host(nodes))
    assert [f["severity"] for f in found] == ["info"] and res["rules"]["memory.numa_balanced"] == "pass"
    assert found[0]["observed"] == "189 GiB to 189 GiB per node (smallest 99.8 % of largest)"


def test_one_socket_has_nothing_to_balance():
    found, dummy = _numa(_host(numactl_nodes("stelline-puget-wrx90-threadripper-pro-1s.txt")))
    assert found[0]["severity"] == "info" and "one NUMA node with CPUs (125 GiB)" in found[0]["message"]


def test_a_socket_without_memory_fails_and_names_the_node():
    nodes = numactl_nodes("stelline-esc8000a-e12-2s-epyc9374f.txt")
    nodes[1]["memory_mb"] = 0          # changed: socket 1 without DIMMs (a memoryless NUMA node)
    found, res = _numa(_host(nodes))
    assert [f["severity"] for f in found] == ["error"] and res["status"] == "fail"
    assert "node 1 (CPUs 32-63)" in found[0]["message"] and "dmidecode -t 17" in found[0]["remedy"]


def test_dimms_missing_on_one_socket_is_a_warning_with_the_threshold():
    nodes = numactl_nodes("stelline-esc8000a-e12-2s-epyc9374f.txt")
    nodes[1]["memory_mb"] = nodes[1]["memory_mb"] * 11 // 12      # changed: one DIMM of 12 missing
    found, dummy = _numa(_host(nodes))
    assert [f["severity"] for f in found] == ["warning"]
    assert "node 1 (CPUs 32-63) has less than 95 %" in found[0]["message"]
    assert found[0]["required"] == ">= 95 % of the largest node"
    found, dummy = _numa(_host(nodes), thresholds={"numa_memory_balance_pct": 90})
    assert [f["severity"] for f in found] == ["info"]


def test_cpu_less_memory_nodes_are_not_judged():
    """POWER9 with NVLink V100s: GPU memory is NUMA nodes 252-255 without CPUs (lscpu capture);
    their size is not in the capture and does not matter: only nodes 0 and 8 are judged."""
    with open(os.path.join(REAL, "lscpu", "jdh4-princeton-traverse-2s-power9-4x-v100-gpu-numa-nodes-252-255.txt")) as fh:
        listed = re.findall(r"^NUMA node(\d+) CPU\(s\):[ \t]*(\S*)$", fh.read(), re.M)
    assert [n for n, dummy in listed] == ["0", "8", "252", "253", "254", "255"]
    nodes = [{"id": int(n), "cpus": cpus, "memory_mb": 262144 if cpus else 32768} for n, cpus in listed]
    found, dummy = _numa(_host(nodes))
    assert found[0]["severity"] == "info" and found[0]["message"].startswith("2 NUMA nodes with CPUs")


@pytest.mark.parametrize("source,nodes,expect", [
    ("declared", None, "only known once the host is gathered"),
    ("gathered", None, "no NUMA layout gathered"),
])
def test_no_layout_is_not_checked(source, nodes, expect):
    doc = _host([], source)
    doc["cpu"].pop("numa_nodes")
    found, res = _numa(doc)
    assert found[0].get("skipped") and expect in found[0]["message"]
    assert res["rules"]["memory.numa_balanced"] == "skip"


def test_an_unreadable_node_size_cannot_be_verified():
    nodes = numactl_nodes("stelline-esc8000a-e12-2s-epyc9374f.txt")
    nodes[0]["memory_mb"] = None       # changed: the node's meminfo could not be read
    found, dummy = _numa(_host(nodes))
    assert found[0]["severity"] == "warning" and "memory unknown on node 0 (CPUs 0-31)" in found[0]["message"]


def test_severity_overrides_apply_to_the_new_rule():
    nodes = numactl_nodes("stelline-esc8000a-e12-2s-epyc9374f.txt")
    nodes[1]["memory_mb"] = 0
    found, res = _numa(_host(nodes), severity={"memory.numa_balanced": "off"})
    assert found == [] and "memory.numa_balanced" not in res["rules"]
    found, res = _numa(_host(nodes), severity={"memory.numa_balanced": "warning"})
    assert found[0]["severity"] == "warning"
