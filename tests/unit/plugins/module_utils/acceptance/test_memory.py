"""Memory copy bandwidth per NUMA node: one CPU per physical core from sysfs, a real (small) parallel
memmove, CPU-less nodes skipped."""
from ansible_collections.dlrack.node.plugins.module_utils.acceptance import memory as am


def _tree(tmp_path):
    base = tmp_path / "sys/devices/system"
    for node, cpus in (("node0", "0-3"), ("node1", "4-7"), ("node2", "")):
        (base / "node" / node).mkdir(parents=True)
        (base / "node" / node / "cpulist").write_text(cpus + "\n")
    (base / "node" / "possible").write_text("0-2\n")
    for cpu in range(8):  # SMT pairs (0,2) (1,3) (4,6) (5,7)
        d = base / "cpu" / ("cpu%d" % cpu) / "topology"
        d.mkdir(parents=True)
        sib = cpu - 2 if cpu % 4 >= 2 else cpu
        d.joinpath("thread_siblings_list").write_text("%d,%d\n" % (sib, sib + 2))
    return str(tmp_path)


def test_one_cpu_per_physical_core(tmp_path):
    assert am.node_cores(_tree(tmp_path)) == {0: [0, 1], 1: [4, 5], 2: []}


def test_cpu_less_node_is_skipped_and_others_measured(tmp_path, monkeypatch):
    root = _tree(tmp_path)
    monkeypatch.setattr(am.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(am, "copy_bandwidth", lambda cpus, n, it: {"gbps": 10.0 * len(cpus), "threads": len(cpus)})
    doc = am.measure(1 << 22, 2, root=root)
    by = {n["node"]: n for n in doc["nodes"]}
    assert by[0]["status"] == "ok" and by[0]["gbps"] == 20.0 and by[0]["cores"] == 2
    assert by[1]["status"] == "skip" and "cpuset" in by[1]["reason"]
    assert by[2]["status"] == "skip" and "memory-only" in by[2]["reason"]


def test_real_copy_counts_read_plus_write():
    clock = iter([10.0, 10.5])
    fig = am.copy_bandwidth([0], 1 << 22, 3, clock=lambda: next(clock))
    # 1 thread, 2 MiB buffers, 3 copies, read + write = 2 * 2 MiB * 3 bytes in 0.5 s
    assert fig["bytes_per_thread"] == 1 << 21
    assert fig["gbps"] == round(2 * (1 << 21) * 3 / 0.5 / 1e9, 2)


def test_no_numa_information(tmp_path):
    assert am.measure(1 << 20, 1, root=str(tmp_path))["status"] == "skip"
