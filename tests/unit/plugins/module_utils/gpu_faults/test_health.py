# -*- coding: utf-8 -*-
"""The node health check's GPU-fault judgement (programs/health_check.py -> gpu_faults/health.py) on real
kernel logs (tests/data/real/xid/) and the h200-vm captured tree: one call in judge(), the new rules in
shadow by default (modes.py), the accepted state ending an old event's hold, and the --kernel-log replay."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from ansible_collections.dlrack.node.plugins.module_utils.programs import health_check as hc
from testpaths import DATA

XID = os.path.join(DATA, "real", "xid")


def conf_for(tmp_path, log, **faults):
    settings = {"kernel_log": os.path.join(XID, log), "state_file": str(tmp_path / "gpu-faults.json")}
    settings.update(faults)
    return hc.load_config(None, {"root": str(tmp_path), "state_file": str(tmp_path / "accepted.json"),
                                 "textfile": str(tmp_path / "none.prom"), "gpu_faults": settings, "act": False,
                                 "history_file": str(tmp_path / "history.json"), "audit_log": str(tmp_path / "audit.log"),
                                 "metrics_textfile": str(tmp_path / "hc.prom")})


def test_judge_adds_gpu_fault_rules_and_notes(tmp_path):
    verdict = hc.judge(conf_for(tmp_path, "gpu-operator-1146-xid48.txt"))
    assert "gpu.xid" in verdict["rules"]
    assert any("0000:07:00.0: reset_gpu (xid:48 x1)" in n for n in verdict["notes"])
    enforced, shadowed = hc._modes(conf_for(tmp_path, "gpu-operator-1146-xid48.txt"), verdict["rules"])
    assert "gpu.xid" in shadowed and "gpu.xid" not in enforced          # new rule: shadow until enforced


def test_workload_and_application_faults_do_not_fail(tmp_path):
    for log in ("ogkm-1150-xid45.txt", "h200-vm-dmesg-T-xid31.txt"):
        verdict = hc.judge(conf_for(tmp_path / log, log))
        assert not set(verdict["rules"]) & {"gpu.xid", "gpu.nvlink_errors", "gpu.lost"}, log


def test_accepted_state_ends_an_old_events_hold(tmp_path):
    conf = conf_for(tmp_path, "gpud-testdata-dmesg-with-xid-119.log")
    assert "gpu.xid" in hc.judge(conf)["rules"]
    # --accept after the operator's fix: the accepted time is after the events (2025), they no longer count
    with open(conf["state_file"], "w") as handle:
        json.dump({"schema": 1, "accepted_at": int(time.time()), "gpus": []}, handle)
    assert "gpu.xid" not in hc.judge(conf)["rules"]


def test_captured_tree_reads_no_kernel_log(tmp_path):
    conf = hc.load_config(None, {"root": str(tmp_path), "state_file": str(tmp_path / "a.json"), "textfile": str(tmp_path / "t.prom"),
                                 "history_file": str(tmp_path / "h.json"), "audit_log": str(tmp_path / "a.log"),
                                 "metrics_textfile": str(tmp_path / "m.prom")})
    verdict = hc.judge(conf)
    assert not any(n.startswith("GPU faults") for n in verdict["notes"])
    assert not os.path.exists("/var/lib/dlrack/gpu-faults.json.tmp.%d" % os.getpid())


def test_bad_settings_say_which_field(tmp_path):
    verdict = hc.judge(conf_for(tmp_path, "gpu-operator-1146-xid48.txt", overrides={"xid48": {}}))
    assert "gpu.xid" in verdict["unknown"]
    assert any("FAMILY:CODE" in n and "fix gpu_faults" in n for n in verdict["notes"])


def test_kernel_log_replay_prints_every_event_and_the_verdict(capsys, tmp_path):
    config = str(tmp_path / "hc.json")
    with open(config, "w") as handle:
        json.dump({"gpu_faults": {"overrides": {"xid:31": {"count": 1, "action": "reset_gpu"}}}}, handle)
    rc = hc.main(["--kernel-log", os.path.join(XID, "h200-vm-dev-kmsg-records.txt"), "--config", config, "--dry-run", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["rules"] == ["gpu.xid"]
    event = out["events"][0]
    assert (event["vendor"], event["kind"], event["bus_id"], event["code"], event["class"], event["action"]) == \
        ("nvidia", "xid", "0000:00:06.0", 31, "application", "reset_gpu")     # the operator's override shows
    assert hc.main(["--kernel-log", os.path.join(XID, "h200-vm-dev-kmsg-records.txt"), "--dry-run"]) == 0
    assert "PASS" in capsys.readouterr().out
