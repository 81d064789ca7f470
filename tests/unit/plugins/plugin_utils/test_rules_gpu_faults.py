"""gpu.xid, gpu.nvlink_errors, gpu.pcie_replays and gpu.lost (issue 29) on dlrack_hw.gpu_faults built by the
node's own code (module_utils/gpu_faults) from real kernel log lines and the H200's real nvidia-smi -q -x
(tests/data/real/xid/, SOURCES.md). New rules start in shadow mode: a failure is a warning marked [shadow]
until dlrack_severity enforces it. Where a test changes a figure of a capture, it says so."""
import os

from testpaths import DATA

from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults import gather, parse
from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.judge import Judge
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import evaluate_host

XID = os.path.join(DATA, "real", "xid")
RULES = ("gpu.xid", "gpu.nvlink_errors", "gpu.pcie_replays", "gpu.lost")


def real(name):
    with open(os.path.join(XID, name)) as handle:
        return handle.read()


def faults(log_name=None, counters=None):
    """dlrack_hw.gpu_faults as gpu_faults/gather.py builds it, from a real log replayed through the judge."""
    lines = real(log_name).splitlines() if log_name else []
    verdict, dummy = Judge().judge(parse.parse_lines(lines)[0], boot="b")
    return {"catalog_version": verdict["catalog_version"], "source": "journal", "rules": verdict["rules"],
            "gpus": verdict["gpus"], "workload": verdict["workload"], "events": verdict["events"],
            "events_total": verdict["events_total"], "notes": verdict["notes"], "counters": counters}


def outcome(hw, rule, **kwargs):
    res = evaluate_host("gpu-n01", hw, **kwargs)
    return [f for f in res["findings"] if f["rule"] == rule], res["rules"].get(rule)


def hw_of(gpu_faults):
    return {"schema": 1, "source": "gathered", "gpu_faults": gpu_faults}


def test_h200_application_fault_passes():
    """The H200's real Xid 31 (an application's bad pointer): reported, nothing to do for the node."""
    found, result = outcome(hw_of(faults("h200-vm-dmesg-T-xid31.txt")), "gpu.xid")
    assert result == "pass" and found[0]["observed"] == "1 event(s)"


def test_xid48_fails_in_shadow_and_when_enforced():
    hw = hw_of(faults("gpu-operator-1146-xid48.txt"))
    found, result = outcome(hw, "gpu.xid")
    assert result == "warn" and found[0]["message"].startswith("[shadow]") and "0000:07:00.0 (reset_gpu: xid:48 x1)" in found[0]["message"]
    found, result = outcome(hw, "gpu.xid", severity={"gpu.xid": "error"})
    assert result == "fail" and "reset it" in found[0]["remedy"]


def test_fallen_off_the_bus_is_gpu_lost_and_nvlink_is_its_own_rule():
    hw = hw_of(faults("ogkm-1151-xid79.txt"))
    found, result = outcome(hw, "gpu.lost", severity={"gpu.lost": "error"})
    assert result == "fail" and "reboot" in found[0]["remedy"]
    assert outcome(hw, "gpu.xid")[1] == "pass"
    found, result = outcome(hw_of(faults("gpud-pr338-sxid12028.txt")), "gpu.nvlink_errors", severity={"gpu.nvlink_errors": "error"})
    assert result == "fail" and "0000:84:00.0" in found[0]["message"]


def test_workload_is_reported_not_failed():
    found, result = outcome(hw_of(faults("ogkm-1150-xid45.txt")), "gpu.xid")
    assert result == "pass" and "workload: xid:45" in found[0]["observed"]


def test_pcie_replays_from_two_reads():
    """The H200's real read, then the same read with its replay counter at 900 a minute later (the changed figure)."""
    first = gather.counters_section(real("h200-vm-nvidia-smi-q-x.xml"), None, now=1000.0)
    found, result = outcome(hw_of(faults(counters=first)), "gpu.pcie_replays")
    assert result == "skip" and "two reads" in found[0]["message"]
    prev = {"time": 1000.0, "gpus": first["gpus"]}
    second = gather.counters_section(real("h200-vm-nvidia-smi-q-x.xml").replace("<replay_counter>0<", "<replay_counter>900<"),
                                     prev, now=1060.0)
    found, result = outcome(hw_of(faults(counters=second)), "gpu.pcie_replays", severity={"gpu.pcie_replays": "error"})
    assert result == "fail" and "54000/h" in found[0]["message"] and "reseat" in found[0]["remedy"]
    found, result = outcome(hw_of(faults(counters=gather.counters_section(real("h200-vm-nvidia-smi-q-x.xml"), prev, now=1060.0))),
                            "gpu.pcie_replays")
    assert result == "pass"


def test_no_gpu_faults_section_gives_no_outcome():
    """Declared racks and facts gathered before the rules existed: no finding at all (reports unchanged)."""
    res = evaluate_host("gpu-n01", {"schema": 1, "source": "declared"})
    assert not [f for f in res["findings"] if f["rule"] in RULES]


def test_hostile_gpu_faults_section_is_data():
    hw = hw_of({"gpus": {"\x1b[31m": {"rules": ["gpu.xid"], "action": "service", "codes": [{"code": "<b>", "count": 1}]}},
                "rules": ["gpu.xid"], "events_total": 1})
    found, result = outcome(hw, "gpu.xid", severity={"gpu.xid": "error"})
    assert result == "fail" and "service case" in found[0]["remedy"]
    bad = evaluate_host("gpu-n01", hw_of({"gpus": float("nan")}))
    assert bad["rules"].get("inventory.schema") == "fail"
    # fields of another shape (another version's node, hand-edited facts): a verdict, never a traceback
    for shape in ({"gpus": ["0000:07:00.0"]}, {"workload": 5}, {"counters": {"by_gpu": ["x"], "notes": 3}},
                  {"gpus": {"0000:07:00.0": {"rules": 7, "codes": 3}}}, {"gpus": {1: {"rules": ["gpu.xid"]}, "a": {"rules": ["gpu.xid"]}}}):
        res = evaluate_host("gpu-n01", hw_of(shape), severity={"gpu.xid": "error"})
        assert all(res["rules"].get(r) in ("pass", "fail", "skip") for r in RULES), shape
