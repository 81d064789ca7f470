# -*- coding: utf-8 -*-
"""The stateful judgement on real lines. Where a case needs more than a capture holds (50 repeats, 8
GPUs, a second boot), the real line is repeated with only its time, sequence number or bus id changed,
and each test says which."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults import parse
from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.cli import main
from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.judge import Judge
from testpaths import DATA

XID = os.path.join(DATA, "real", "xid")
# the bus ids of an 8-GPU HGX H100 (Dell XE9680 order, as nvidia-smi topo prints them)
EIGHT = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"]
GPUS = [{"index": i, "pci_bus_id": b, "uuid": "GPU-%d" % i} for i, b in enumerate(EIGHT)]


def real_line(name, code):
    with open(os.path.join(XID, name)) as handle:
        for line in handle:
            if "Xid" in line and "): %d," % code in line:
                return line.rstrip("\n")
    raise AssertionError("no Xid %d in %s" % (code, name))


H200_XID31 = real_line("h200-vm-dev-kmsg-records.txt", 31).split(";", 1)[1]   # NVRM: Xid (PCI:0000:00:06): 31, ...
XID48 = real_line("gpu-operator-1146-xid48.txt", 48)


def on_bus(line, bus):
    """The real line with its bus id changed to ``bus`` (0000:18:00.0 -> PCI:0000:18:00)."""
    head, rest = line.split("NVRM: Xid (", 1)
    return head + "NVRM: Xid (PCI:%s%s" % (bus[:-2], rest[rest.index(")"):])


def events(lines, ts0=1000.0, step=0.0, boot="boot-a"):
    parser = parse.Parser()
    out = []
    for i, line in enumerate(lines):
        out.extend(parser.feed(line, {"ts": ts0 + i * step, "boot_id": boot}))
    return out


def test_burst_of_50_identical_xids_is_one_event():
    """The H200's real Xid 31 line 50 times, 0.1 s apart."""
    verdict, state = Judge().judge(events([H200_XID31] * 50, step=0.1), now=1010.0, boot="boot-a")
    assert len(verdict["events"]) == 1 and verdict["events"][0]["repeats"] == 50
    assert state["gpus"]["0000:00:06.0"]["xid:31"]["since_boot"] == {"boot-a": 50}
    assert verdict["rules"] == []       # one application fault: the workload's to fix, no drain


def test_a_burst_split_between_two_reads_is_still_one_event():
    """The H200's real Xid 31 line 50 times 0.1 s apart, the health check reading after the 25th: one event in
    the state (one time kept), 50 counted since boot; the same line a minute later is a new event."""
    judge = Judge()
    lines = events([H200_XID31] * 50, step=0.1)
    dummy, state = judge.judge(lines[:25], now=1002.5, boot="boot-a")
    dummy, state = judge.judge(lines[25:], state=json.loads(json.dumps(state)), now=1005.0, boot="boot-a")
    code = state["gpus"]["0000:00:06.0"]["xid:31"]
    assert len(code["times"]) == 1 and code["since_boot"] == {"boot-a": 50} and abs(code["last"] - 1004.9) < 1e-6
    dummy, state = judge.judge(events([H200_XID31], ts0=1065.0), state=state, now=1065.0, boot="boot-a")
    assert len(state["gpus"]["0000:00:06.0"]["xid:31"]["times"]) == 2


def test_application_code_repeating_on_one_gpu_is_hardware():
    """The same real line on one GPU, 6 bursts a minute apart (count 5 in an hour for check_workload codes)."""
    verdict, dummy = Judge().judge(events([H200_XID31] * 6, step=60.0), now=1400.0, boot="boot-a", gpus=GPUS)
    assert verdict["rules"] == ["gpu.xid"]
    assert verdict["gpus"]["0000:00:06.0"]["action"] == "reset_gpu"
    assert any("read as hardware" in n for n in verdict["notes"])


def test_a_code_on_all_8_gpus_at_once_is_the_workload():
    """The real Xid 31 line on each of 8 GPUs within a second."""
    lines = [on_bus(H200_XID31, b) for b in EIGHT]
    verdict, state = Judge().judge(events(lines, step=0.1), now=1001.0, boot="boot-a", gpus=GPUS)
    assert verdict["workload"] == ["xid:31"] and verdict["rules"] == []
    assert all(e["scope"] == "workload" for e in verdict["events"])
    # and repeated 6 times on all 8: still the workload, nothing drained
    verdict, dummy = Judge().judge(events(lines * 6, step=1.0), now=1100.0, boot="boot-a", gpus=GPUS)
    assert verdict["rules"] == [] and verdict["gpus"] == {}
    # the real case: Xid 45 on 4 GPUs of a node (open-gpu-kernel-modules issue 1150)
    with open(os.path.join(XID, "ogkm-1150-xid45.txt")) as handle:
        verdict, dummy = Judge().judge(events(handle.read().splitlines()), boot="boot-a")
    assert verdict["workload"] == ["xid:45"] and verdict["rules"] == []


def test_a_hardware_code_on_one_gpu_is_not_the_workload():
    """The real Xid 48 (gpu-operator issue 1146) on one GPU of eight: reset the GPU."""
    verdict, dummy = Judge().judge(events([on_bus(XID48, EIGHT[3])]), now=1001.0, boot="boot-a", gpus=GPUS)
    assert verdict["rules"] == ["gpu.xid"]
    gpu = verdict["gpus"]["0000:5d:00.0"]
    assert (gpu["action"], gpu["index"], gpu["uuid"]) == ("reset_gpu", 3, "GPU-3")


def test_a_hardware_code_on_most_gpus_at_once_is_not_the_workload():
    """The real Xid 48 (double-bit ECC error, gpu-operator issue 1146) on 6 of 8 GPUs within a second: the
    node's hardware (power, cooling), not a job's bug - every GPU named, none read as the workload. An
    application code on the same GPUs at once (the H200's real Xid 31) still is the workload."""
    verdict, dummy = Judge().judge(events([on_bus(XID48, b) for b in EIGHT[:6]], step=0.1), now=1001.0, boot="boot-a", gpus=GPUS)
    assert verdict["workload"] == [] and verdict["rules"] == ["gpu.xid"]
    assert sorted(verdict["gpus"]) == sorted(EIGHT[:6]) and all(g["action"] == "reset_gpu" for g in verdict["gpus"].values())
    verdict, dummy = Judge().judge(events([on_bus(H200_XID31, b) for b in EIGHT[:6]], step=0.1), now=1001.0, boot="boot-a", gpus=GPUS)
    assert verdict["workload"] == ["xid:31"] and verdict["rules"] == []


def test_the_same_hardware_code_after_a_reboot_escalates():
    """The real Xid 48 line in boot A, then again after a reboot (boot B): service required."""
    judge = Judge()
    first, state = judge.judge(events([XID48], ts0=1000.0, boot="boot-a"), now=1001.0, boot="boot-a")
    assert first["gpus"]["0000:07:00.0"]["action"] == "reset_gpu"
    state = json.loads(json.dumps(state))          # through the state file
    # after the reboot, before it shows again: boot A's event does not keep the node drained
    quiet, state = judge.judge([], state=state, now=5000.0, boot="boot-b")
    assert quiet["rules"] == []
    again, state = judge.judge(events([XID48], ts0=6000.0, boot="boot-b"), state=state, now=6001.0, boot="boot-b")
    assert again["gpus"]["0000:07:00.0"]["action"] == "service"
    assert any("service required" in n for n in again["notes"])
    assert state["gpus"]["0000:07:00.0"]["xid:48"]["boots"] == ["boot-a", "boot-b"]


def test_an_old_event_does_not_keep_the_node_drained():
    """The real Xid 48 line: older than the accepted state, or outside its 24 h window, it drains nothing."""
    judge = Judge()
    verdict, state = judge.judge(events([XID48], ts0=1000.0), now=1001.0, boot="boot-a")
    assert verdict["rules"] == ["gpu.xid"]
    accepted, dummy = judge.judge([], state=state, now=1100.0, boot="boot-a", accepted_at=1050.0)
    assert accepted["rules"] == []
    later, dummy = judge.judge([], state=state, now=1000.0 + 86400 + 1, boot="boot-a")
    assert later["rules"] == []
    # and an accepted state does not stop a new one from counting
    new, dummy = judge.judge(events([XID48], ts0=2000.0), state=state, now=2001.0, boot="boot-a", accepted_at=1050.0)
    assert new["rules"] == ["gpu.xid"]
    # nor does escalation count boots whose events were all accepted
    state_b = json.loads(json.dumps(state))
    esc, dummy = judge.judge(events([XID48], ts0=9000.0, boot="boot-b"), state=state_b, now=9001.0, boot="boot-b", accepted_at=8000.0)
    assert esc["gpus"]["0000:07:00.0"]["action"] == "reset_gpu"


def test_fallen_off_the_bus_on_every_gpu_is_never_the_workload():
    """The real Xid 79 (open-gpu-kernel-modules issue 1151) on all 8 GPUs at once: gpu.lost, drained."""
    line = real_line("ogkm-1151-xid79.txt", 79)
    verdict, dummy = Judge().judge(events([on_bus(line, b) for b in EIGHT]), now=1001.0, boot="boot-a", gpus=GPUS)
    assert verdict["rules"] == ["gpu.lost"] and verdict["workload"] == []
    assert all(g["action"] == "reboot" for g in verdict["gpus"].values()) and len(verdict["gpus"]) == 8


def test_recovery_action_line_and_nvlink_and_sxid_rules():
    with open(os.path.join(XID, "gpud-kmsg-test-lines.txt")) as handle:
        verdict, dummy = Judge().judge(events(handle.read().splitlines()), boot="boot-a")
    assert verdict["rules"] == ["gpu.lost", "gpu.nvlink_errors", "gpu.xid"]
    assert verdict["gpus"]["0000:05:00.0"]["action"] == "reboot"
    assert verdict["gpus"]["0019:01:00.0"]["action"] == "reset_gpu"   # 154: "GPU Reset Required"
    with open(os.path.join(XID, "gpud-pr338-sxid12028.txt")) as handle:
        verdict, dummy = Judge().judge(events(handle.read().splitlines()), boot="boot-a")
    assert verdict["rules"] == ["gpu.nvlink_errors"] and verdict["gpus"]["0000:84:00.0"]["action"] == "reboot"
    with open(os.path.join(XID, "nvtrust-124-sxid22013.txt")) as handle:     # non-fatal MINION SXid: reported only
        verdict, dummy = Judge().judge(events(handle.read().splitlines()), boot="boot-a")
    assert verdict["rules"] == [] and len(verdict["events"]) == 1


def test_override_count_and_window():
    """An operator's own threshold: Xid 31 drains at 2 in 10 minutes."""
    judge = Judge(overrides={"xid:31": {"count": 2, "window_s": 600, "action": "reset_gpu"}})
    one, state = judge.judge(events([H200_XID31]), now=1000.0, boot="boot-a")
    assert one["rules"] == []
    two, dummy = judge.judge(events([H200_XID31], ts0=1300.0), state=state, now=1301.0, boot="boot-a")
    assert two["rules"] == ["gpu.xid"]


def test_corrupt_state_is_a_fresh_start():
    for bad in (None, [], {"schema": 2}, {"schema": 1, "gpus": {"x": {"xid:1": {"times": [["a", 1], 5]}}}},
                {"schema": 1, "gpus": {"0000:07:00.0": {"48": {"times": [[1000.5, "boot-a"]], "since_boot": {"boot-a": 1}}}}}):
        verdict, state = Judge().judge(events([XID48]), state=bad, now=1001.0, boot="boot-a")
        assert verdict["rules"] == ["gpu.xid"] and state["schema"] == 1


def test_replay_cli_prints_every_event_and_the_verdict(capsys):
    rc = main(["--kernel-log", os.path.join(XID, "gpud-testdata-dmesg-with-xid-119.log"), "--dry-run", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["rules"] == ["gpu.xid"]
    assert [(e["vendor"], e["kind"], e["bus_id"], e["code"], e["class"], e["action"]) for e in out["events"]][0] == \
        ("nvidia", "xid", "0000:9b:00.0", 119, "driver", "reset_gpu")
    assert out["events"][0]["repeats"] == 3 and out["events"][0]["uuid"] == "GPU-509665ad-b600-ac93-3616-d754b23d636d"
    assert main(["--kernel-log", os.path.join(XID, "h200-vm-dmesg-T-xid31.txt")]) == 0
    text = capsys.readouterr().out
    assert "0000:00:06.0" in text and "check_workload" in text and "PASS" in text
    assert main(["--bogus"]) == 2 and "bad argument" in capsys.readouterr().err
    for unreadable in ("/nonexistent/kern.log", XID):          # a typo or a directory: no PASS
        assert main(["--kernel-log", unreadable, "--dry-run"]) == 2
        captured = capsys.readouterr()
        assert "cannot be read" in captured.err and "PASS" not in captured.out
    h200 = os.path.join(XID, "h200-vm-dmesg-T-xid31.txt")
    assert main(["--kernel-log", h200, "--config", "[1]"]) == 2 and "JSON mapping" in capsys.readouterr().err
    assert main(["--kernel-log", "/nonexistent", "--config", "{\"overrides\": {\"xid\": 1}}"]) == 2
    assert "FAMILY:CODE" in capsys.readouterr().err
