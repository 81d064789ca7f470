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
                textfile=str(tmp_path / "prom" / "dlrack_ecc.prom"), history_file=str(tmp_path / "{node}-history.json"),
                audit_log=str(tmp_path / "log" / "health-check.jsonl"), metrics_textfile=str(tmp_path / "{node}.prom"),
                return_copy=False)
    conf.update(kw)
    return hc.settle_config(conf)


def test_accept_then_pass_on_the_real_h200(tmp_path, host):
    conf = _conf(tmp_path, host)
    _textfile(tmp_path)
    doc = hc.accept(conf)
    assert doc["gpus"] == [{"pci_bus_id": "0000:00:06.0", "width": 16}]
    assert hc.judge(conf) == {"rules": [], "notes": [], "unknown": []}


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


def _act(conf, sc, rules, unknown=(), **kw):
    return hc.act(conf, {"rules": list(rules), "notes": ["evidence"], "unknown": list(unknown)}, scontrol=sc, **kw)


def test_drains_and_resumes_its_own_node_only(tmp_path, host):
    conf = _conf(tmp_path, host, fail_runs=1, pass_runs=1)
    fake = _fake_idle()
    sc = slurm.Scontrol(runner=fake)
    line = _act(conf, sc, ["memory.ecc_errors"])["line"]
    assert line.startswith("slurm01: drained (dlrack: memory.ecc_errors health-")
    node = slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]
    assert node["drained"] and slurm.is_health_run_id(slurm.parse_reason(node["reason"])[1])
    assert "already drained" in _act(conf, sc, ["memory.ecc_errors"])["line"]
    assert "resumed" in _act(conf, sc, [])["line"]
    assert not slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["drained"]
    # a drain by a dlrack Ansible run, or by a person (also one imitating our grammar), is not the
    # health program's to lift or to overwrite
    for reason in ("dlrack: acceptance.gpu_h2d 20261201T164800Z-77aa88bb99cc", "maintenance: DIMM B3",
                   "dlrack: gpu.x health-anything", "dlrack: rma pending"):
        fake(["scontrol", "update", "NodeName=slurm01", "State=DRAIN", "Reason=" + reason])
        line = _act(conf, sc, [])["line"]
        assert slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["reason"] == reason, line
        assert reason in line, line     # the operator reads whose drain it is
        line = _act(conf, sc, ["gpu.present"])["line"]
        assert slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["reason"] == reason, line
        fake(["scontrol", "update", "NodeName=slurm01", "State=RESUME"])


@pytest.mark.parametrize("state", ["DOWN+DRAIN", "IDLE+DRAIN+REBOOT_REQUESTED", "IDLE+DRAIN+POWERING_DOWN"])
def test_its_own_drain_is_not_resumed_while_the_node_is_down_or_rebooting(tmp_path, host, state):
    """A drain of its own on a node slurmctld holds down, or with a reboot or power-down pending, is
    left as it is (the Ansible act skips these states too: slurm.skip_reason); resumed once back."""
    conf = _conf(tmp_path, host, fail_runs=1, pass_runs=1)
    fake = _fake_idle()
    sc = slurm.Scontrol(runner=fake)
    assert "drained" in _act(conf, sc, ["memory.ecc_errors"])["line"]
    fake.lines["slurm01"] = fake.lines["slurm01"].replace("State=IDLE+DRAIN", "State=" + state)
    line = _act(conf, sc, [])["line"]
    assert "judged again when it is" in line and slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["drained"], line
    fake.lines["slurm01"] = fake.lines["slurm01"].replace("State=" + state, "State=IDLE+DRAIN")
    assert "resumed" in _act(conf, sc, [])["line"]


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


# --- issue 28: mount points as the kernel writes them, --accept without a GPU, modes, damping,
# --- the fleet cap, validated return, the audit trail

T0 = 1796400000   # 2026-12-04T16:00:00Z
MOUNTINFO = os.path.join(DATA, "real", "mountinfo", "podman-hot-tier-space-bind.txt")


def _mount_root(tmp_path):
    root = tmp_path / "mroot"
    (root / "proc" / "self").mkdir(parents=True)
    shutil.copy(MOUNTINFO, str(root / "proc" / "self" / "mountinfo"))
    return str(root)


@pytest.mark.parametrize("point", ["/mnt/hot tier", "/mnt/hot tier/", "/mnt/hot-bind", "/mnt/hot-bind//", "/mnt/tab\tdir", "/"])
def test_hot_tier_mounted_as_the_kernel_writes_it(tmp_path, point):
    """The real mountinfo: '/mnt/hot\\040tier', '/mnt/tab\\011dir' and a bind mount; the old check
    compared the escaped field with the operator's path (and no trailing slash): every such node
    was judged unmounted and drained."""
    root = _mount_root(tmp_path)
    assert hc.mounted(root, point) is True
    assert hc.judge(_conf(tmp_path, root, hot_mount=point))["rules"] == []


def test_hot_tier_not_mounted_and_unreadable(tmp_path):
    root = _mount_root(tmp_path)
    for point in ("/mnt/hot", "/mnt/hot tier/sub", "/mnt/hot\\040tier"):
        assert hc.mounted(root, point) is False, point
    v = hc.judge(_conf(tmp_path, str(tmp_path / "nothing"), hot_mount="/mnt/hot"))
    assert v["rules"] == [] and "storage.hot_tier_mounted" in v["unknown"]


def test_a_mount_table_longer_than_the_read_limit_is_not_judged(tmp_path, monkeypatch):
    """A mount table cut at the read limit (TEXTFILE_LIMIT; here the real mountinfo against a limit
    just below its size) would lose '/mnt/tab\\011dir' in its last line: not judged, not "not mounted"."""
    root = _mount_root(tmp_path)
    monkeypatch.setattr(hc, "TEXTFILE_LIMIT", os.path.getsize(MOUNTINFO) - 20)
    assert hc.mounted(root, "/mnt/tab\tdir") is None
    v = hc.judge(_conf(tmp_path, root, hot_mount="/mnt/tab\tdir"))
    assert v["rules"] == [] and "storage.hot_tier_mounted" in v["unknown"]


def test_accept_without_a_visible_gpu_is_refused(tmp_path, capsys):
    """issue 30.8: no GPU visible -> one sentence, non-zero exit, nothing recorded; --no-gpu says the
    node has none."""
    (tmp_path / "empty" / "sys" / "bus" / "pci" / "devices").mkdir(parents=True)   # a PCI bus without a GPU
    conf = _conf(tmp_path, str(tmp_path / "empty"))
    cfg = tmp_path / "hc.json"
    cfg.write_text(json.dumps(dict((k, conf[k]) for k in ("root", "state_file", "textfile", "history_file"))))
    assert hc.main(["--config", str(cfg), "--accept"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no GPU is visible" in err and "--no-gpu" in err
    assert not os.path.exists(conf["state_file"])
    assert hc.main(["--config", str(cfg), "--accept", "--no-gpu"]) == 0
    with open(conf["state_file"]) as f:
        assert json.load(f)["no_gpu"] is True


@pytest.mark.parametrize("text, key", [
    ('{"timeout_s": "10"}', "timeout_s"), ('{"act": "no"}', "act"), ('{"textfile_max_age_s": "x"}', "textfile_max_age_s"),
    ('{"root": null}', "root"), ('{"return_copy_min_share": 80}', "return_copy_min_share"), ('{"node": "../etc"}', "node"),
    ('{"hot_mount": ["/mnt/hot"]}', "hot_mount"), ('{"timeout_s": 20}', "timeout_s"),
    ('{"return_copy_timeout_s": 40}', "return_copy_timeout_s"), ('{"fail_runs": "2"}', "fail_runs"), ('{"timeout_s": 10,', "not JSON"),
    (None, "does not exist")])
def test_a_malformed_configuration_is_one_sentence_and_never_acts(tmp_path, capsys, monkeypatch, text, key):
    """A setting of the wrong kind (a string where a number or a flag goes, a null path, a share
    in per cent, a node name that is a path), a file that is not JSON or not there: exit 2, one line
    naming the file and the key, scontrol never started."""
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    marker = tmp_path / "scontrol-ran"
    (tmp_path / "scontrol").write_text("#!/bin/sh\ntouch %s\n" % marker)
    os.chmod(str(tmp_path / "scontrol"), 0o755)
    cfg = tmp_path / "hc.json"
    if text is not None:
        doc = text if not text.endswith("}") else json.dumps(dict(json.loads(text), scontrol=str(tmp_path / "scontrol")))
        cfg.write_text(doc)
    for args in ([], ["--dry-run"], ["--accept"]):
        assert hc.main(["--config", str(cfg)] + args) == hc.RC_CONFIG
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(cfg) in err and key in err and "Traceback" not in err, err
    assert not marker.exists()


def _audit(conf):
    with open(conf["audit_log"]) as f:
        return [json.loads(line) for line in f]


def test_shadow_rule_never_drains_and_says_what_it_would_do(tmp_path, host):
    conf = _conf(tmp_path, host, fail_runs=1, rule_modes={"memory.ecc_errors": "shadow"})
    fake = _fake_idle()
    sc = slurm.Scontrol(runner=fake)
    for dummy in range(3):
        out = _act(conf, sc, ["memory.ecc_errors"])
        assert out["rc"] == hc.RC_HEALTHY and out["shadowed"] == ["memory.ecc_errors"] and out["enforced"] == []
    assert not slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["drained"]
    assert [c[1] for c in fake.calls] == ["show"] * 3        # nothing but the node's own state read
    events = _audit(conf)
    assert [e["event"] for e in events] == ["would_drain"] and events[0]["rules"] == ["memory.ecc_errors"]
    # the keys of the Ansible act's audit lines (plugin_utils/act_audit.py): one query reads both logs
    assert events[0]["action"] == "would_drain" and events[0]["outcome"] == "not_acted" and events[0]["side"] == "node"
    assert events[0]["node"] == "slurm01" and events[0]["why"].startswith("shadow:") and events[0]["ts"].endswith("+00:00")
    with open(conf["metrics_textfile"]) as f:
        prom = f.read()
    assert 'dlrack_health_check_would_drain{rule="memory.ecc_errors"} 1' in prom
    assert 'dlrack_health_check_events_total{event="would_drain"} 1' in prom
    # a group of this node can hold a rule back; an off rule is not even reported
    conf = _conf(tmp_path, host, fail_runs=1, rule_modes_groups={"rack_b": {"gpu.*": "off"}})
    out = _act(conf, sc, ["gpu.present"])
    assert out["shadowed"] == [] and out["enforced"] == [] and out["rc"] == 0


def test_a_check_that_errors_never_drains(tmp_path, host, monkeypatch):
    conf = _conf(tmp_path, host)
    hc.accept(conf)

    def broken(root="/"):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(hc, "find_gpus", broken)
    v = hc.judge_safely(conf)
    assert v["rules"] == [] and v["unknown"] == ["*"] and "could not run" in v["notes"][0]


def test_a_pass_that_judged_less_says_so_in_its_first_line(tmp_path, host, capsys):
    """slurmd's log and an operator read the first line: a PASS without the GPU and ECC checks
    (no accepted state, no collector textfile) names what was not judged there, not only below."""
    conf = _conf(tmp_path, host)
    cfg = tmp_path / "hc.json"
    cfg.write_text(json.dumps(dict((k, conf[k]) for k in ("root", "state_file", "textfile", "history_file"))))
    assert hc.main(["--config", str(cfg), "--dry-run"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "dlrack-health-check: PASS (not judged: gpu.ecc_errors,gpu.pcie_link,gpu.present,memory.ecc_errors)", first


def test_an_unreadable_pci_bus_is_not_a_gpu_gone(tmp_path, host):
    """/sys/bus/pci/devices that cannot be read (here: not there under the root) judges no GPU:
    the accepted GPU is not "gone", nothing drains, and the return validation does not pass."""
    conf = _conf(tmp_path, host)
    _textfile(tmp_path)
    hc.accept(conf)
    conf = _conf(tmp_path, str(tmp_path / "no-sysfs"))
    v = hc.judge(conf)
    assert v["rules"] == [] and v["unknown"] == ["gpu.pcie_link", "gpu.present"], v
    assert "cannot be read: GPU presence and link width not judged" in v["notes"][0]
    ok, notes = hc.validate_return(conf)
    assert not ok and "cannot be read" in notes[0]
    with pytest.raises(hc.NoGpuError, match="cannot be read"):
        hc.accept(conf, no_gpu=True)


def test_flap_damping_drain_after_n_resume_after_m(tmp_path, host):
    conf = _conf(tmp_path, host)           # defaults: 2 and 2
    fake = _fake_idle()
    sc = slurm.Scontrol(runner=fake)

    def state():
        return slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["drained"]
    assert "failing run 1 of 2" in _act(conf, sc, ["gpu.present"])["line"] and not state()
    assert _act(conf, sc, [])["rc"] == 0 and not state()         # a pass breaks the streak
    assert "failing run 1 of 2" in _act(conf, sc, ["gpu.present"])["line"] and not state()
    assert "drained" in _act(conf, sc, ["gpu.present"])["line"] and state()
    assert "passing run 1 of 2" in _act(conf, sc, [])["line"] and state()
    # a run that cannot judge the rule it was drained for is neither a pass nor a failure
    assert "cannot be judged" in _act(conf, sc, [], unknown=["gpu.present"])["line"] and state()
    assert "resumed" in _act(conf, sc, [])["line"] and not state()
    assert [(r["event"], r["why"]) for r in _audit(conf)] == [      # why each act, for "what did dlrack do and why"
        ("drain", "streak: 2 consecutive failing runs"), ("resume", "streak: 2 consecutive passing runs, return validated")]
    # a run that cannot judge the failing rule (the textfile went stale) does not break the streak
    conf = _conf(tmp_path, host, history_file=str(tmp_path / "u.json"))
    assert "failing run 1 of 2" in _act(conf, sc, ["memory.ecc_errors"])["line"]
    assert _act(conf, sc, [], unknown=["memory.ecc_errors", "gpu.ecc_errors"])["rc"] == 0 and not state()
    assert "drained" in _act(conf, sc, ["memory.ecc_errors"])["line"] and state()
    fake(["scontrol", "update", "NodeName=slurm01", "State=RESUME"])
    # a fault persisting T seconds drains at once
    conf = _conf(tmp_path, host, fail_runs=5, fault_persist_s=600, history_file=str(tmp_path / "t.json"))
    assert "failing run 1 of 5" in _act(conf, sc, ["gpu.present"], now=T0)["line"]
    assert "failing run 2 of 5" in _act(conf, sc, ["gpu.present"], now=T0 + 300)["line"]
    assert "drained" in _act(conf, sc, ["gpu.present"], now=T0 + 600)["line"] and state()


def test_a_reboot_starts_the_streaks_again_and_keeps_the_drain_history(tmp_path):
    """A run failing while the node shuts down (the hot tier unmounted) and one failing while it
    comes up are no two consecutive failing runs: the kernel's boot_id changed between them. The
    drains of the service breaker are counted across the reboot."""
    root = tmp_path / "root"
    (root / "proc/sys/kernel/random").mkdir(parents=True)

    def boot(boot_id):
        (root / "proc/sys/kernel/random/boot_id").write_text(boot_id + "\n")
    conf = _conf(tmp_path, str(root), service_drains=2)
    fake = _fake_idle()
    sc = slurm.Scontrol(runner=fake)
    boot("0b0e6a5c-3f7a-4c55-9d0e-5a3c1a9f0001")
    assert "failing run 1 of 2" in _act(conf, sc, ["storage.hot_tier_mounted"], now=T0)["line"]
    boot("0b0e6a5c-3f7a-4c55-9d0e-5a3c1a9f0002")
    out = _act(conf, sc, ["storage.hot_tier_mounted"], now=T0 + 300)
    assert "failing run 1 of 2" in out["line"] and "a new boot" in out["notes"][0], out
    assert "drained" in _act(conf, sc, ["storage.hot_tier_mounted"], now=T0 + 600)["line"]
    assert "passing run 1 of 2" in _act(conf, sc, [], now=T0 + 900)["line"]
    assert "resumed" in _act(conf, sc, [], now=T0 + 1200)["line"]
    boot("0b0e6a5c-3f7a-4c55-9d0e-5a3c1a9f0003")
    _act(conf, sc, ["storage.hot_tier_mounted"], now=T0 + 1500)
    line = _act(conf, sc, ["storage.hot_tier_mounted"], now=T0 + 1800)["line"]
    assert "service.required" in line, line      # the second drain in the window, across the reboot


def test_service_required_after_k_drains_in_the_window(tmp_path, host):
    conf = _conf(tmp_path, host, fail_runs=1, pass_runs=1)
    fake = _fake_idle()
    sc = slurm.Scontrol(runner=fake)
    day = 86400
    for i in range(2):
        assert "drained" in _act(conf, sc, ["gpu.pcie_link"], now=T0 + i * day)["line"]
        assert "resumed" in _act(conf, sc, [], now=T0 + i * day + 60)["line"]
    out = _act(conf, sc, ["gpu.pcie_link"], now=T0 + 2 * day)
    reason = slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["reason"]
    assert slurm.parse_reason(reason)[0] == ("gpu.pcie_link", "service.required")
    assert out["events"][0]["event"] == "service_required"
    for i in range(3):      # passing runs, and other failing rules, change nothing
        assert "a person resumes it" in _act(conf, sc, [], now=T0 + 2 * day + 60 * (i + 1))["line"]
    _act(conf, sc, ["gpu.present"], now=T0 + 3 * day)
    assert slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["reason"] == reason
    # drains older than the window are forgotten: a person resumed it; the next drain is a plain one
    fake(["scontrol", "update", "NodeName=slurm01", "State=RESUME"])
    _act(conf, sc, ["gpu.present"], now=T0 + 12 * day)
    assert slurm.parse_reason(slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]["reason"])[0] == ("gpu.present",)


def _copy_doc(gbps):
    """What acceptance/gpu.py prints for the h200-vm's one GPU, built with its own functions."""
    from ansible_collections.dlrack.node.plugins.module_utils.acceptance import gpu
    doc = gpu.document(256 << 20, 3)
    doc["devices"].append({"ordinal": 0, "pci_bus_id": "00000000:00:06.0",
                           "h2d_pinned": gpu.bandwidth(256 << 20, [(256 << 20) / (gbps * 1e9)] * 3)})
    return json.dumps(doc)


def test_validated_return(tmp_path, host):
    conf = _conf(tmp_path, host, return_copy=True)
    _textfile(tmp_path)
    hc.accept(conf)
    # the h200-vm's link: 32 GT/s x16 -> 63.0 GB/s after 128b/130b
    assert round(hc.link_gbps(host, "0000:00:06.0"), 1) == 63.0
    ok, notes = hc.validate_return(conf, copy_runner=lambda argv: (0, _copy_doc(55.0), ""))
    assert ok and "every GPU at >= 80 %" in notes[-1]
    ok, notes = hc.validate_return(conf, copy_runner=lambda argv: (0, _copy_doc(30.0), ""))
    assert not ok and "30.0 GB/s, below 80 % of its link (63.0 GB/s)" in notes[0]
    # no CUDA on this machine: the real acceptance code in a child says so, and the return is not blocked
    ok, notes = hc.validate_return(conf)
    assert ok and "copy check skipped" in notes[-1], notes
    # an uncorrected error in the textfile blocks the return whatever the rule's mode
    _textfile(tmp_path, ue=1)
    ok, notes = hc.validate_return(conf, copy_runner=lambda argv: (0, _copy_doc(55.0), ""))
    assert not ok and "uncorrected memory error" in notes[0]
    # wired into the act: passing runs, but the validation fails -> stays drained, one audit line
    conf = _conf(tmp_path, host, fail_runs=1, pass_runs=1, rule_modes={"memory.ecc_errors": "off"})
    fake = _fake_idle()
    sc = slurm.Scontrol(runner=fake)
    _act(conf, sc, ["gpu.present"])
    for dummy in range(2):
        assert "stays drained" in _act(conf, sc, [])["line"]
    assert [e["event"] for e in _audit(conf)] == ["drain", "return_blocked"]
    _textfile(tmp_path, ue=0)
    assert "resumed" in _act(conf, sc, [])["line"]


def test_a_persons_drain_during_the_return_validation_is_not_lifted(tmp_path, host):
    """The copy check takes seconds; a person who drains the node meanwhile (with their reason)
    keeps their drain: the resume reads the node again first."""
    conf = _conf(tmp_path, host, fail_runs=1, pass_runs=1, return_copy=True)
    _textfile(tmp_path)
    hc.accept(conf)
    fake = _fake_idle()
    sc = slurm.Scontrol(runner=fake)
    _act(conf, sc, ["gpu.present"])

    def copy_while_a_person_drains(argv):
        fake(["scontrol", "update", "NodeName=slurm01", "State=DRAIN", "Reason=hw: GPU reseat, ticket-4711"])
        return (0, _copy_doc(55.0), "")
    out = _act(conf, sc, [], copy_runner=copy_while_a_person_drains)
    node = slurm.parse_show_node(fake.lines["slurm01"])["slurm01"]
    assert node["drained"] and node["reason"] == "hw: GPU reseat, ticket-4711", out["line"]
    assert "changed during the return validation" in out["line"]
