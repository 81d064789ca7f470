"""fabric.ib_ports and fabric.ib_errors (issue 32) on the real mlx4 port of hwloc's 32em64t sysfs
capture (tests/data/real/SOURCES.md); a changed figure is named where a test changes one."""
import copy
import os
import tarfile

import pytest
from testpaths import DATA

from ansible_collections.dlrack.node.plugins.module_utils.hw import fabric
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import evaluate_host


@pytest.fixture(scope="module")
def ports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ib")
    with tarfile.open(os.path.join(DATA, "real", "pcie", "hwloc-32em64t-2n8c-dax-nvme-mic-dimms.tar.bz2")) as tf:
        tf.extractall(str(tmp))
    sampler = fabric.Sampler(os.path.join(str(tmp), "32em64t-2n8c+1mic"), [], sleep=lambda s: None)
    return sampler.finish()["ports"]


def hw(ports):
    return {"schema": 1, "source": "gathered", "fabric": {"ports": copy.deepcopy(ports)},
            "gpus": [{"index": 0, "pci_bus_id": "0000:02:00.0", "model": "NVIDIA H100 80GB HBM3"}]}


def result(doc, rule, declared=None):
    res = evaluate_host("ib-n01", doc, declared=declared, severity={rule: "error"})
    return [f for f in res["findings"] if f["rule"] == rule], res["rules"].get(rule)


def test_active_fdr_port_passes(ports):
    found, outcome = result(hw(ports), "fabric.ib_ports")
    assert outcome == "pass" and "mlx4_0/1 ACTIVE 56 Gb/s InfiniBand" in found[0]["observed"]
    assert result(hw(ports), "fabric.ib_errors")[1] == "pass"


def test_declaration_is_compared(ports):
    declared = {"schema": 1, "source": "declared",
                "fabric": {"ports": [{"device": "mlx4_0", "port": 1, "rate_gbps": 56, "width": "4X", "fw": "2.11.500",
                                      "pkeys": ["0xffff"], "link_layer": "InfiniBand"}]}}
    assert result(hw(ports), "fabric.ib_ports", declared)[1] == "pass"
    wrong = copy.deepcopy(declared)
    wrong["fabric"]["ports"][0].update(rate_gbps=200, fw="20.39.1002", pkeys=["0xffff", "0x8001"])
    wrong["fabric"]["ports"].append({"device": "mlx5_1", "port": 1})
    found, outcome = result(hw(ports), "fabric.ib_ports", wrong)
    msg = found[0]["message"]
    assert outcome == "fail" and "rate 56.0 (declared 200)" in msg and "firmware 2.11.500 (declared 20.39.1002)" in msg
    assert "P_Key 0x8001 missing" in msg and "mlx5_1/1: declared, not found" in msg


def test_down_port_without_declaration_is_a_warning(ports):
    doc = hw(ports)
    doc["fabric"]["ports"][0]["state"] = "DOWN"       # changed: the port is down
    found, outcome = result(doc, "fabric.ib_ports")
    assert outcome == "warn" and "not ACTIVE and not declared: mlx4_0/1" in found[0]["message"]


def test_growing_error_counters_fail(ports):
    doc = hw(ports)
    # changed: link_downed grew by 1 between the two reads
    doc["fabric"]["ports"][0]["counter_rates"]["link_downed"] = {"delta": 1, "per_s": 2.0}
    doc["fabric"]["ports"][0]["interval_s"] = 0.5
    found, outcome = result(doc, "fabric.ib_errors")
    assert outcome == "fail" and "mlx4_0/1 link_downed +1 in 0.5s (2.0/s)" in found[0]["message"]


def test_no_fabric_no_outcome():
    res = evaluate_host("n", {"schema": 1, "source": "gathered", "gpus": []})
    assert "fabric.ib_ports" not in res["rules"] and "fabric.ib_errors" not in res["rules"]
