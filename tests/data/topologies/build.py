"""Rebuild the dlrack_hw topology documents in this folder from the real captures.

Run from the repository root when ../shared/fixtures/real exists:
    python tests/data/topologies/build.py
The JSON files are committed; the unit tests read them and never need ../shared.
Everything that is not in a capture (inferred SMT siblings, synthetic GPUs on a CPU-only
capture) is said in the document's "provenance" and in README.md.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(HERE, "..", "..", "..", "..", "shared", "fixtures", "real")
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", ".collections"))
from ansible_collections.dlrack.node.plugins.module_utils.hw.cpulist import (  # noqa: E402
    format_cpulist, parse_cpulist)


def read(rel):
    with open(os.path.join(REAL, rel)) as f:
        return f.read()


def topo_rows(rel):
    """GPU rows of `nvidia-smi topo -m`: (index, cpu affinity, numa affinity or None)."""
    rows = []
    for line in read(rel).splitlines():
        m = re.match(r"^\s*GPU(\d+)\s", line)
        if not m:
            continue
        cells = re.split(r"\t|\s{2,}", line.strip())
        if len(cells) > 1 and cells[1].startswith("GPU"):
            continue  # the header line
        aff = [c for c in cells if re.fullmatch(r"[\d,\-]+", c) and ("-" in c or "," in c)]
        tail = cells[cells.index(aff[0]) + 1:] if aff else []
        numa = int(tail[0]) if tail and tail[0].strip().isdigit() else None
        rows.append((int(m.group(1)), aff[0], numa))
    return rows


def siblings(cpus, offset):
    cpus = set(cpus)
    return [format_cpulist([c, c + offset]) if c + offset in cpus else str(c)
            for c in sorted(cpus) if c - offset not in cpus]


def parsable(rel, ncpu):
    """First `lscpu -p` block: {cpu: (core, socket, node)}."""
    out = {}
    for line in read(rel).splitlines():
        if re.match(r"^\d+,", line):
            f = line.split(",")
            cpu = int(f[0])
            if cpu in out:
                break
            out[cpu] = (int(f[1]), int(f[2]), int(f[3]))
    assert len(out) == ncpu, (rel, len(out))
    return out


def from_parsable(p):
    nodes, cores, sockets = {}, {}, {}
    for cpu, (core, sock, node) in sorted(p.items()):
        nodes.setdefault(node, []).append(cpu)
        cores.setdefault((sock, core), []).append(cpu)
        sockets.setdefault(sock, []).append(cpu)
    return ([{"id": n, "cpus": format_cpulist(c)} for n, c in sorted(nodes.items())],
            sorted((format_cpulist(c) for c in cores.values()), key=lambda s: parse_cpulist(s)[0]),
            [format_cpulist(c) for dummy, c in sorted(sockets.items())])


def gpu(index, node, local, bus=None, uuid=None):
    return {"index": index, "uuid": uuid, "pci_bus_id": bus, "numa_node": node,
            "local_cpus": local}


def doc(name, provenance, model, sockets, nodes, core_cpus, gpus, socket_cpus=None):
    allc = sorted(c for n in nodes for c in parse_cpulist(n["cpus"]))
    cpu = {"model": model, "sockets": sockets,
           "cores": len(core_cpus) if core_cpus else None, "threads": len(allc),
           "numa_nodes": nodes, "core_cpus": core_cpus}
    if socket_cpus:
        cpu["socket_cpus"] = socket_cpus
    d = {"schema": 1, "source": "declared", "provenance": provenance, "cpu": cpu, "gpus": gpus}
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        json.dump(d, f, indent=2, sort_keys=True)
        f.write("\n")


def main():
    # 1. 8x V100, 2x Xeon Gold 5118 (12C/24T each), old topo without NUMA column.
    rel = "nvidia-smi-topo/dlperf-8x-v100-sxm2-16gb-2s-xeon5118-no-numa-col-spaces.txt"
    rows = topo_rows(rel)
    nodes = [{"id": 0, "cpus": "0-11,24-35"}, {"id": 1, "cpus": "12-23,36-47"}]
    doc("dlperf-8xv100-2s-xeon5118",
        {"capture": rel, "inferred": "numa_node from CPU Affinity (no NUMA column); NUMA nodes "
         "= the two affinity sets; SMT siblings n/n+24 (Linux enumeration on 2S Xeon with HT, "
         "consistent with the affinity ranges); bus ids and UUIDs not in the capture"},
        "Intel Xeon Gold 5118", 2, nodes, siblings(range(48), 24),
        [gpu(i, 0 if a.startswith("0-") else 1, a) for i, a, dummy in rows])

    # 2. DGX-1-like 8x V100, 2x Xeon Gold 6271C (24C/48T), with NUMA column.
    rel = "nvidia-smi-topo/dlperf-dgx1-like-8x-v100-sxm2-32gb-2s-xeon6271c-tabs.txt"
    rows = topo_rows(rel)
    doc("dlperf-dgx1-8xv100-2s-xeon6271c",
        {"capture": rel, "inferred": "NUMA nodes = the affinity sets; SMT siblings n/n+48; "
         "bus ids and UUIDs not in the capture"},
        "Intel Xeon Gold 6271C", 2,
        [{"id": 0, "cpus": "0-23,48-71"}, {"id": 1, "cpus": "24-47,72-95"}],
        siblings(range(96), 48), [gpu(i, n, a) for i, a, n in rows])

    # 3. ASUS ESC8000A-E12: 2x EPYC 9374F (SMT off), 4x RTX 6000 Ada. lscpu -e + numactl + topo.
    rel = "nvidia-smi-topo/stelline-esc8000a-e12-4x-rtx6000ada-2s-epyc9374f-spaces.txt"
    rows = topo_rows(rel)
    cores = {}
    sockets = {}
    for line in read("lscpu/stelline-esc8000a-e12-2s-epyc9374f-lscpu-e.txt").splitlines()[1:]:
        f = line.split()
        cores.setdefault((int(f[2]), int(f[3])), []).append(int(f[0]))
        sockets.setdefault(int(f[2]), []).append(int(f[0]))
    nodes = []
    for line in read("numactl-hardware/stelline-esc8000a-e12-2s-epyc9374f.txt").splitlines():
        m = re.match(r"node (\d+) cpus: (.*)", line)
        if m:
            nodes.append({"id": int(m.group(1)),
                          "cpus": format_cpulist(int(x) for x in m.group(2).split())})
    bundle = read("hardware-report-bundle/stelline-asus-esc8000a-e12.md")
    bus = re.findall(r"\|\s+(\d)\s+NVIDIA RTX 6000 Ada.*?\|\s+([0-9A-F]{8}:[0-9A-F]{2}:"
                     r"[0-9A-F]{2}\.\d)", bundle)
    bus = dict((int(i), b) for i, b in bus)
    doc("stelline-esc8000a-e12-4xrtx6000ada-2s-epyc9374f",
        {"capture": [rel, "lscpu/stelline-esc8000a-e12-2s-epyc9374f-lscpu-e.txt",
                     "numactl-hardware/stelline-esc8000a-e12-2s-epyc9374f.txt",
                     "hardware-report-bundle/stelline-asus-esc8000a-e12.md (bus ids)"],
         "inferred": "nothing; UUIDs not in the capture"},
        "AMD EPYC 9374F 32-Core Processor", 2, nodes,
        sorted((format_cpulist(c) for c in cores.values()), key=lambda s: parse_cpulist(s)[0]),
        [gpu(i, n, a, bus.get(i)) for i, a, n in rows],
        socket_cpus=[format_cpulist(c) for dummy, c in sorted(sockets.items())])

    # 4. 2x EPYC 7451, 8 NUMA nodes (util-linux sysfs dump). No GPUs in the capture.
    rel = "lscpu/util-linux-expected-2s-epyc7451-8numa-with-parsable.txt"
    nodes, core_cpus, socket_cpus = from_parsable(parsable(rel, 96))
    doc("util-linux-2s-epyc7451-8numa",
        {"capture": rel, "inferred": "GPUs are synthetic (one per NUMA node, bus ids made up); "
         "socket_cpus left out on purpose so the planner infers sockets (the capture's socket "
         "column is kept in expected_socket_cpus)", "expected_socket_cpus": socket_cpus},
        "AMD EPYC 7451 24-Core Processor", 2, nodes, core_cpus,
        [gpu(n["id"], n["id"], n["cpus"], "0000:%02x:00.0" % (0x10 + 0x10 * n["id"]))
         for n in nodes])

    # 5. 4S Xeon X7550, 3 NUMA nodes (0, 2, 3) in stride syntax; sockets interleaved by CPU id.
    rel = "lscpu/util-linux-expected-4s-xeon-x7550-numa-stride-ranges-with-parsable.txt"
    text = read(rel)
    nodes = [{"id": int(a), "cpus": b.strip()}
             for a, b in re.findall(r"NUMA node(\d+) CPU\(s\):\s+(\S+)", text)]
    dummy, core_cpus, socket_cpus = from_parsable(parsable(rel, 64))
    doc("util-linux-4s-xeon-x7550-3numa-stride",
        {"capture": rel, "inferred": "GPUs synthetic (one on node 2, one on node 3)"},
        "Intel Xeon X7550", 4, nodes, core_cpus,
        [gpu(0, 2, "1-61:4".replace("1-61:4", format_cpulist(parse_cpulist("1-61:4"))),
             "0000:41:00.0"),
         gpu(1, 3, format_cpulist(parse_cpulist("3-63:4")), "0000:c1:00.0")],
        socket_cpus=socket_cpus)

    # 6. club-3090 issue 46: 5 GPUs, 2 NUMA nodes, socket count unknown.
    rel = "nvidia-smi-topo/club3090-issue46-5gpu-2numa-4090-mixed-spaces.txt"
    rows = topo_rows(rel)
    doc("club3090-issue46-5gpu-2numa",
        {"capture": rel, "inferred": "NUMA nodes = the affinity sets; SMT siblings n/n+16; "
         "socket count not in the capture (null); bus ids and UUIDs not in the capture"},
        None, None, [{"id": 0, "cpus": "0-7,16-23"}, {"id": 1, "cpus": "8-15,24-31"}],
        siblings(range(32), 16), [gpu(i, n, a) for i, a, n in rows])

    # 7. Princeton Traverse: 2S POWER9 (SMT4), 4x V100, CPU-less GPU-memory nodes 252-255.
    rel = "lscpu/jdh4-princeton-traverse-2s-power9-4x-v100-gpu-numa-nodes-252-255.txt"
    text = read(rel)
    nodes = [{"id": int(a), "cpus": b.strip()}
             for a, b in re.findall(r"NUMA node(\d+) CPU\(s\):[ \t]*(\S*)", text)]
    doc("jdh4-traverse-2s-power9-4xv100",
        {"capture": rel, "inferred": "SMT4 siblings are 4 consecutive CPU ids (POWER Linux "
         "enumeration); GPUs 0-1 on node 0 and 2-3 on node 8 (2 per socket on Traverse); "
         "bus ids and UUIDs not in the capture"},
        "POWER9, altivec supported", 2, nodes,
        [format_cpulist(range(c, c + 4)) for c in range(0, 128, 4)],
        [gpu(0, 0, "0-63"), gpu(1, 0, "0-63"), gpu(2, 8, "64-127"), gpu(3, 8, "64-127")])


if __name__ == "__main__":
    main()
