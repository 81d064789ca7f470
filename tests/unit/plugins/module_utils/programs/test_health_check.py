# -*- coding: utf-8 -*-
"""The node's own health program (plugins/module_utils/programs/health_check.py) on real captures:
the h200-vm host's sysfs tree (tests/data/hosts/h200-vm, one H200 at 0000:00:06.0, x16) and the
ECC collector's textfile rendered by the real collector from the EDAC tree of netdata issue 1508
(tests/data/edac/netdata-issue1508-serverB, all counters 0). The uncorrected count is written into
a copy of that tree (no real capture with one exists). scontrol is the stand-in of test_slurm.py,
built from the real Slurm 22.05 captures; molecule/scheduler runs it under a real slurmd."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.ecc import metrics
from ansible_collections.dlrack.node.plugins.module_utils.programs import health_check as hc
from ansible_collections.dlrack.node.plugins.module_utils.scheduler import slurm
from realhost import h200_vm
from slurmfake import FakeSlurmctld
from testpaths import COLLECTIONS, DATA


SERVER_B = os.path.join(DATA, "edac", "netdata-issue1508-serverB")


def _read(name):
    with open(os.path.join(DATA, "slurm", name)) as f:
        return f.read()


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    base = tmp_path_factory.mktemp("h200")
    root, dummy = h200_vm(base)
    return root


def _textfile(tmp_path, ue=0):
    tree = tmp_path / "edac"
    if not tree.exists():
        shutil.copytree(SERVER_B, str(tree))
    (tree / "sys/devices/system/edac/mc/mc0/ue_count").write_text("%d\n" % ue)
    (tree / "sys/devices/system/edac/mc/mc0/csrow1/ue_count").write_text("%d\n" % ue)
    out = tmp_path / "prom"
    assert metrics.main(["--root", str(tree), "--nvidia-smi", "none", "--textfile-dir", str(out)]) == 0
    return str(out / "dlrack_ecc.prom")


def _conf(tmp_path, root, **kw):
    conf = dict(hc.DEFAULTS, node="slurm01", root=root, state_file=str(tmp_path / "accepted.json"),
                textfile=str(tmp_path / "prom" / "dlrack_ecc.prom"))
    conf.update(kw)
    return conf


def test_accept_then_pass_on_the_real_h200(tmp_path, host):
    conf = _conf(tmp_path, host)
    _textfile(tmp_path)
    doc = hc.accept(conf)
    assert doc["gpus"] == [{"pci_bus_id": "0000:00:06.0", "width": 16}]
    assert hc.judge(conf) == {"rules": [], "notes": []}


def test_gpu_gone_or_narrower_link(tmp_path, host):
    conf = _conf(tmp_path, host)
    _textfile(tmp_path)
    with open(conf["state_file"], "w") as f:
        json.dump({"schema": 1, "gpus": [{"pci_bus_id": "0000:00:06.0", "width": 32},
                                         {"pci_bus_id": "0000:18:00.0", "width": 16}]}, f)
    v = hc.judge(conf)
    assert v["rules"] == ["gpu.pcie_link", "gpu.present"]
    assert "x16, accepted x32" in v["notes"][0] and "'0000:18:00.0'" in v["notes"][1]


def test_uncorrected_count_from_the_real_collector(tmp_path, host):
    conf = _conf(tmp_path, host)
    hc.accept(conf)
    _textfile(tmp_path, ue=1)
    v = hc.judge(conf)
    assert v["rules"] == ["memory.ecc_errors"] and "uncorrected memory error" in v["notes"][0]
    os.utime(conf["textfile"], (time.time() - 7200, time.time() - 7200))
    v = hc.judge(conf)
    assert v["rules"] == [] and "ECC state unknown" in v["notes"][0]


def test_hot_tier_mount(tmp_path, host):
    conf = _conf(tmp_path, host, hot_mount="/mnt/hot")
    hc.accept(conf)
    _textfile(tmp_path)
    assert hc.judge(conf)["rules"] == ["storage.hot_tier_mounted"]
    assert hc.judge(_conf(tmp_path, host, hot_mount="/"))["rules"] == []


def _fake_idle():
    fake = FakeSlurmctld(_read("show-node-draining.txt").splitlines()[0] + "\n")
    return fake


def test_drains_and_resumes_its_own_node_only(tmp_path, host):
    conf = _conf(tmp_path, host)
    fake = _fake_idle()
    sc = slurm.Scontrol(runner=fake)
    line = hc.act(conf, {"rules": ["memory.ecc_errors"]}, scontrol=sc)
    assert line.startswith("slurm01: drained (dlrack: memory.ecc_errors health-")
    node = slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]
    assert node["drained"] and slurm.parse_reason(node["reason"])[1].startswith("health-")
    assert "already drained" in hc.act(conf, {"rules": ["memory.ecc_errors"]}, scontrol=sc)
    assert "resumed" in hc.act(conf, {"rules": []}, scontrol=sc)
    assert not slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["drained"]
    # a drain by a dlrack Ansible run, or by a person, is not the health program's to lift
    for reason in ("dlrack: acceptance.gpu_h2d 20261201T164800Z-77aa88bb99cc", "maintenance: DIMM B3"):
        fake(["scontrol", "update", "NodeName=slurm01", "State=DRAIN", "Reason=" + reason])
        line = hc.act(conf, {"rules": []}, scontrol=sc)
        assert slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["reason"] == reason, line
        line = hc.act(conf, {"rules": ["gpu.present"]}, scontrol=sc)
        assert slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["reason"] == reason, line


def test_runtime_as_slurmd_runs_it(tmp_path, host):
    """The whole program in a fresh interpreter, as HealthCheckProgram starts it, on the h200-vm
    tree with a textfile from the real collector: the judgement alone (--dry-run) and with the
    two scontrol calls (a stand-in scontrol printing the captured line)."""
    conf = _conf(tmp_path, host, scontrol=str(tmp_path / "scontrol"))
    hc.accept(conf)
    _textfile(tmp_path)
    line = _read("show-node-draining.txt").splitlines()[0]
    (tmp_path / "line").write_text(line + "\n")
    (tmp_path / "scontrol").write_text("#!/bin/sh\nexec cat %s\n" % (tmp_path / "line"))
    os.chmod(str(tmp_path / "scontrol"), 0o755)
    cfg = tmp_path / "hc.json"
    cfg.write_text(json.dumps(conf))
    prog = ("import sys; sys.path.insert(0, %r)\n"
            "from ansible_collections.dlrack.node.plugins.module_utils.programs.health_check import main\n"
            "sys.exit(main())" % COLLECTIONS)
    timings = {}
    for mode in ("--dry-run", None):
        argv = [sys.executable, "-I", "-S", "-c", prog, "--config", str(cfg)] + ([mode] if mode else [])
        best = None
        for dummy in range(3):
            t0 = time.monotonic()
            res = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
            best = min(best or 99, time.monotonic() - t0)
            assert res.returncode == 0, res.stdout + res.stderr
        timings[mode or "act"] = best
        assert res.stdout.startswith("dlrack-health-check: PASS"), res.stdout
    print("health check wall time (best of 3): %s" % timings)
    assert timings["act"] < 1.0 and timings["--dry-run"] < 1.0
