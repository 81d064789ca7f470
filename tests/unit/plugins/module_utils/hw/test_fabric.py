"""RDMA ports (module_utils/hw/fabric.py) from the real /sys/class/infiniband of hwloc's 32em64t
capture (tests/data/real/SOURCES.md, pcie/hwloc-32em64t-...tar.bz2): an mlx4 FDR HCA."""
import os
import tarfile

import pytest
from testpaths import DATA

from ansible_collections.dlrack.node.plugins.module_utils.hw import fabric
from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather

TARBALL = os.path.join(DATA, "real", "pcie", "hwloc-32em64t-2n8c-dax-nvme-mic-dimms.tar.bz2")


def capture(tmp_path):
    with tarfile.open(TARBALL) as tf:
        tf.extractall(str(tmp_path))
    return os.path.join(str(tmp_path), "32em64t-2n8c+1mic")


def counter(root, name):
    return os.path.join(root, "sys", "class", "infiniband", "mlx4_0", "ports", "1", "counters", name)


def test_real_mlx4_port(tmp_path):
    errors = []
    ports = fabric.read_ports(capture(tmp_path), errors)
    assert ports == [{"device": "mlx4_0", "port": 1, "state": "ACTIVE", "phys_state": "LinkUp", "rate_gbps": 56.0,
                      "width": "4X", "speed": "FDR", "link_layer": "InfiniBand", "fw": "2.11.500",
                      "pci_bus_id": "0000:82:00.0", "pkeys": ["0xffff"],
                      "counters": {"symbol_error": 0, "link_downed": 0, "excessive_buffer_overrun_errors": 0,
                                   "port_rcv_errors": 0, "link_error_recovery": 0}}]
    assert errors == []


def test_counters_read_twice_in_one_run(tmp_path):
    root = capture(tmp_path)
    now = [100.0]
    slept = []
    sampler = fabric.Sampler(root, [], clock=lambda: now[0], sleep=lambda s: (slept.append(s), now.__setitem__(0, now[0] + s)))
    with open(counter(root, "symbol_error"), "w") as handle:
        handle.write("3\n")             # changed: three symbol errors between the two reads
    with open(counter(root, "link_downed"), "w") as handle:
        handle.write("\n")              # unreadable the second time: unknown, never "0"
    now[0] += 0.1
    out = sampler.finish()["ports"][0]
    assert slept == [pytest.approx(0.4)] and out["interval_s"] == 0.5
    assert out["counter_rates"]["symbol_error"] == {"delta": 3, "per_s": 6.0}
    assert out["counter_rates"]["link_downed"] is None
    assert out["counter_rates"]["excessive_buffer_overrun_errors"] == {"delta": 0, "per_s": 0.0}


def test_no_ports_no_wait(tmp_path):
    slept = []
    sampler = fabric.Sampler(str(tmp_path), [], sleep=slept.append)
    assert sampler.finish() == {"ports": []} and slept == []


def test_rate_words():
    assert fabric.parse_rate("56 Gb/sec (4X FDR)") == (56.0, "4X", "FDR")
    assert fabric.parse_rate("junk") == (None, None, None)


def test_gather_reads_the_fabric(tmp_path):
    doc = gather(capture(tmp_path), subset=["gpus"], nvidia_smi="never", run_command=lambda argv: (1, "", ""))
    port = doc["fabric"]["ports"][0]
    assert port["device"] == "mlx4_0" and port["interval_s"] >= fabric.MIN_INTERVAL_S
    assert port["counter_rates"]["symbol_error"] == {"delta": 0, "per_s": 0.0}
    assert [d["rdma"] for d in doc["pcie"]["devices"] if d["bdf"] == "0000:82:00.0"] == [["mlx4_0"]]


def test_non_ascii_digits_are_unknown_not_a_lost_section(tmp_path):
    """str.isdigit() says yes to '²' and int() then raises: one such counter file or port directory
    name took the whole fabric section with it (gather: 'fabric: unexpected ValueError'). Counters
    are read with hostfs.read_int (ASCII digits) and port names matched as ASCII digits."""
    root = capture(tmp_path)
    with open(counter(root, "symbol_error"), "w") as handle:
        handle.write(u"\u00b2\n")                        # changed: the real counter file holds '0'
    os.makedirs(os.path.join(root, "sys", "class", "infiniband", "mlx4_0", "ports", u"\u00b2"))
    errors = []
    ports = fabric.read_ports(root, errors)
    assert [p["port"] for p in ports] == [1] and ports[0]["counters"]["symbol_error"] is None
    assert ports[0]["counters"]["link_downed"] == 0 and errors == []
