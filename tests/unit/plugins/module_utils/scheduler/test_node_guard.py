# -*- coding: utf-8 -*-
"""The fleet cap of the node program (plugins/module_utils/scheduler/node_guard.py, used by
programs/health_check.py; issue 28.3/.5/.7) on a cluster made of the real `scontrol show node -o`
line of Slurm 22.05.8 (tests/data/slurm/show-node-draining.txt, slurm01 idle) renamed n01..n10, all
in partition gpu, behind the stand-in slurmctld (tests/slurmfake.py). Two nodes deciding at once
run in two threads that both count before either drains. molecule/scheduler does the same with
several real slurmd under one slurmctld."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import threading

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.programs import health_check as hc
from ansible_collections.dlrack.node.plugins.module_utils.scheduler import node_guard as guard
from ansible_collections.dlrack.node.plugins.module_utils.scheduler import slurm
from slurmfake import FakeSlurmctld
from testpaths import DATA

T0 = 1796400000   # 2026-12-04T16:00:00Z
ANSIBLE = "dlrack: acceptance.gpu_h2d 20261201T164800Z-77aa88bb99cc"


def _cluster(n=10):
    with open(os.path.join(DATA, "slurm", "show-node-draining.txt")) as f:
        line = f.read().splitlines()[0].replace("+NOT_RESPONDING", "")
    text = "".join(line.replace("slurm01", "n%02d" % i) + "\n" for i in range(1, n + 1))
    fake = FakeSlurmctld(text)
    fake.ticks = 0
    return fake


def _conf(tmp_path, node, **kw):
    conf = dict(hc.DEFAULTS, node=node, root=str(tmp_path / "empty"), state_file=str(tmp_path / "none.json"),
                textfile=str(tmp_path / "none.prom"), history_file=str(tmp_path / "{node}.json"),
                audit_log=str(tmp_path / "{node}.jsonl"), metrics_textfile=str(tmp_path / "{node}.prom"),
                fail_runs=1, pass_runs=1, return_copy=False)
    conf.update(kw)
    return hc.settle_config(conf)


def _act(conf, fake, rules, **kw):
    return hc.act(conf, {"rules": list(rules), "notes": ["evidence"], "unknown": []}, scontrol=slurm.Scontrol(runner=fake), **kw)


def _held(fake):
    return sorted(n for n, node in slurm.parse_show_node("\n".join(fake.lines.values())).items()
                  if node["drained"] and slurm.is_ours(node["reason"]))


def test_cap_limit():
    assert guard.cap_limit(10, 5, 10) == 1 and guard.cap_limit(100, 5, 10) == 5 and guard.cap_limit(3, 5, 10) == 1
    assert guard.cap_limit(10, 5, 30) == 3


def test_a_bad_rule_on_every_node_drains_at_most_the_cap(tmp_path, monkeypatch):
    """Every node fails the same (bad) rule; the cap is 3 of 10 (30 %): three drain, seven say
    why not (output, exit status 4, audit line, metric); an Ansible run's drain counts, a person's
    does not. Fixed: the drained ones resume and the cap re-arms by itself."""
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    fake = _cluster()
    fake(["scontrol", "update", "NodeName=n10", "State=DRAIN", "Reason=dlrack: rma pending"])
    fake(["scontrol", "update", "NodeName=n09", "State=DRAIN", "Reason=" + ANSIBLE])
    outs = {}
    for i in range(1, 9):
        conf = _conf(tmp_path, "n%02d" % i, cap_max_nodes=5, cap_max_percent=30)
        outs[conf["node"]] = _act(conf, fake, ["storage.hot_tier_mounted"], now=T0)
    assert _held(fake) == ["n01", "n02", "n09"]
    refused = sorted(n for n, o in outs.items() if o["rc"] == hc.RC_CAP)
    assert refused == ["n03", "n04", "n05", "n06", "n07", "n08"]
    assert "at the cap of 3: not drained" in outs["n03"]["line"] and outs["n03"]["fleet"]["held"] == 3
    with open(str(tmp_path / "n05.jsonl")) as f:
        rec = [json.loads(line) for line in f]
    assert [r["event"] for r in rec] == ["refused_cap"] and rec[0]["rules"] == ["storage.hot_tier_mounted"]
    assert rec[0]["action"] == "refused" and rec[0]["why"].startswith("cap: 3 of 10 nodes of gpu held by dlrack, the cap is 3")
    with open(str(tmp_path / "n05.prom")) as f:
        prom = f.read()
    assert 'dlrack_health_check_events_total{event="refused_cap"} 1' in prom and "dlrack_health_check_refused_cap 1" in prom
    # the same refusal again is not logged again; after a pass, a new failure is a new refusal
    conf = _conf(tmp_path, "n05", cap_max_nodes=5, cap_max_percent=30)
    assert _act(conf, fake, ["storage.hot_tier_mounted"], now=T0 + 5)["rc"] == hc.RC_CAP
    _act(conf, fake, [], now=T0 + 10)
    assert _act(conf, fake, ["storage.hot_tier_mounted"], now=T0 + 15)["rc"] == hc.RC_CAP
    with open(str(tmp_path / "n05.jsonl")) as f:
        assert [json.loads(line)["event"] for line in f] == ["refused_cap", "refused_cap"]
    # one bounded call counts the fleet: show (own), show (all)
    assert fake.calls[-2:] == [["scontrol", "show", "node", "-o", "n05"], ["scontrol", "show", "node", "-o"]]
    # beyond the cap a passing node is still resumed; the cap re-arms by itself and n03 drains
    assert "resumed" in _act(_conf(tmp_path, "n01"), fake, [], now=T0 + 60)["line"]
    assert "drained" in _act(_conf(tmp_path, "n03", cap_max_nodes=5, cap_max_percent=30), fake, ["gpu.present"], now=T0 + 90)["line"]
    assert _held(fake) == ["n02", "n03", "n09"]
    # the person's drain was never touched
    assert slurm.parse_show_node(fake.lines["n10"])["n10"]["reason"] == "dlrack: rma pending"


class _Racing(object):
    """The stand-in slurmctld behind a lock, with a barrier after each node's fleet count: both
    nodes count (each sees one slot left), then both drain, then both count again."""

    def __init__(self, fake, parties):
        self.fake, self.lock = fake, threading.Lock()
        self.barrier = threading.Barrier(parties, timeout=10)

    def __call__(self, argv):
        with self.lock:
            res = self.fake(argv)
        if argv[1:] == ["show", "node", "-o"]:
            self.barrier.wait()
        return res


@pytest.mark.parametrize("racers", [2, 4])
def test_nodes_racing_for_the_last_slot_never_exceed_the_cap(tmp_path, monkeypatch, racers):
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    fake = _cluster()
    fake(["scontrol", "update", "NodeName=n09", "State=DRAIN", "Reason=" + ANSIBLE])   # one slot of 2 left
    racing = _Racing(fake, racers)
    outs = {}

    def run(name):
        conf = _conf(tmp_path, name, cap_max_nodes=2, cap_max_percent=100)
        outs[name] = hc.act(conf, {"rules": ["gpu.present"], "notes": [], "unknown": []},
                            scontrol=slurm.Scontrol(runner=racing), now=T0)
    threads = [threading.Thread(target=run, args=("n%02d" % i,)) for i in range(1, racers + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    held = _held(fake)
    assert len(held) == 2 and "n09" in held, held
    kept = [n for n, o in outs.items() if o["rc"] == hc.RC_UNHEALTHY]
    gave = [n for n, o in outs.items() if o["rc"] == hc.RC_CAP]
    assert len(kept) == 1 and len(gave) == racers - 1
    # the oldest drain (slurmctld's stamp) keeps the slot, every newer one was given back
    first = [c[2][len("NodeName="):] for c in fake.calls if c[1] == "update" and c[3] == "State=DRAIN"][1]
    assert kept == [first] and all("given back" in outs[n]["line"] for n in gave)
    with open(str(tmp_path / ("%s.jsonl" % gave[0]))) as f:
        assert [json.loads(line)["event"] for line in f] == ["drain", "gave_back"]


def test_history_is_root_only_and_survives_garbage(tmp_path):
    path = str(tmp_path / "h.json")
    doc, note = guard.load_history(path)
    assert note is None and doc["fail_streak"] == 0
    guard.save_history(path, doc)
    assert os.stat(path).st_mode & 0o777 == 0o600
    with open(path, "w") as f:
        f.write("{not json")
    doc, note = guard.load_history(path)
    assert doc["drains"] == [] and "unreadable" in note


def test_guard_settings_are_checked(tmp_path):
    for key, bad in (("fail_runs", 0), ("cap_max_percent", 0), ("cap_max_percent", 150), ("partitions", "gpu"), ("pass_runs", True)):
        with pytest.raises(hc.ConfigError, match=key):
            _conf(tmp_path, "n01", **{key: bad})


def test_audit_log_is_bounded(tmp_path):
    conf = _conf(tmp_path, "n01", audit_max_bytes=2000)
    for i in range(100):
        assert guard.audit(conf, {"event": "drain", "i": i}, T0) is None
    assert os.path.getsize(conf["audit_log"]) <= 2000 and os.path.getsize(conf["audit_log"] + ".1") <= 2000
    with open(conf["audit_log"]) as f:
        assert json.loads(f.read().splitlines()[-1])["i"] == 99


def test_fleet_from_text_counts_like_the_full_parse():
    """fleet_text parses in full only the lines a drain of ours can be on; same answer as the full
    parse, with drains of both grammars, a person's, another partition and a reason imitating ours."""
    fake = _cluster()
    fake.lines["n08"] = fake.lines["n08"].replace("Partitions=gpu", "Partitions=cpu")
    for name, reason in (("n02", ANSIBLE), ("n03", "dlrack: gpu.present health-20261204T160000Z-0a1b2c3d4e5f"),
                         ("n04", "dlrack: rma pending"), ("n05", "dlrack: gpu.x health-anything"),
                         ("n08", "dlrack: gpu.present health-20261204T160000Z-0a1b2c3d4e5f")):
        fake(["scontrol", "update", "NodeName=" + name, "State=DRAIN", "Reason=" + reason])
    text = fake(["scontrol", "show", "node", "-o"])[1]
    for parts in (None, ["gpu"], ["cpu"], ["gpu", "cpu"]):
        full = guard.fleet(slurm.parse_show_node(text), "n01", parts)
        fast = guard.fleet_text(text, "n01", parts)
        assert (fast["total"], sorted(n["name"] for n in fast["held"])) == (full["total"], sorted(n["name"] for n in full["held"]))
    fast = guard.fleet_text(text, "n01")
    assert fast["partitions"] == ["gpu"] and fast["total"] == 9 and sorted(n["name"] for n in fast["held"]) == ["n02", "n03"]


def test_racing_within_one_second_of_slurmctld_never_exceeds_the_cap(tmp_path, monkeypatch):
    """slurmctld stamps a reason to the second. n02 counts (one slot left), then n01 drains,
    counts again (at the cap, not over) and keeps its drain; then n02 drains in the same second
    and counts again (over): its run id sorts before n01's, but n01 has already decided to keep,
    so n02 must not keep it - a tie at the boundary of the cap is given back."""
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    fake = _cluster()
    fake.ticks = None     # every update stamped 17:00:00
    fake(["scontrol", "update", "NodeName=n09", "State=DRAIN", "Reason=" + ANSIBLE])   # one slot of 2 left
    tokens = iter(["000000000000", "ffffffffffff"])   # n02 asks first, then n01
    monkeypatch.setattr(hc, "new_health_run_id", lambda now: slurm.new_health_run_id(now, next(tokens)))
    outs = {}

    def n02_runner(argv):
        res = fake(argv)
        if argv[1:] == ["show", "node", "-o"] and "n01" not in outs:
            outs["n01"] = _act(_conf(tmp_path, "n01", cap_max_nodes=2, cap_max_percent=100), fake, ["gpu.present"], now=T0)
        return res
    outs["n02"] = hc.act(_conf(tmp_path, "n02", cap_max_nodes=2, cap_max_percent=100),
                         {"rules": ["gpu.present"], "notes": [], "unknown": []}, scontrol=slurm.Scontrol(runner=n02_runner), now=T0)
    assert outs["n01"]["rc"] == hc.RC_UNHEALTHY and "drained" in outs["n01"]["line"]
    assert _held(fake) == ["n01", "n09"], outs["n02"]["line"]
    assert outs["n02"]["rc"] == hc.RC_CAP and "given back" in outs["n02"]["line"]


def test_no_drain_without_time_to_count_again(tmp_path, monkeypatch):
    """slurmd kills the program after 60 s: a drain starts only when the drain, the count after it
    and a give-back fit in what is left of the run (hc.RUN_BUDGET_S); a slow scontrol runs each call
    only as long as is left. Too little left: not drained, said so, drained at a later run."""
    import time
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    fake = _cluster()
    conf = _conf(tmp_path, "n01", timeout_s=10)
    out = _act(conf, fake, ["gpu.present"], now=T0, deadline=time.monotonic() + 25)
    assert "too little to drain and count again" in out["line"] and _held(fake) == []
    assert not [c for c in fake.calls if c[1] == "update"]
    out = _act(conf, fake, ["gpu.present"], now=T0 + 5)
    assert "drained" in out["line"] and _held(fake) == ["n01"]
    # resume: the copy check (return_copy_timeout_s) and the resume must fit
    conf = _conf(tmp_path, "n01", timeout_s=10, return_copy=True, return_copy_timeout_s=30)
    out = _act(conf, fake, [], now=T0 + 10, deadline=time.monotonic() + 35)
    assert "too little of this run is left" in out["line"] and _held(fake) == ["n01"]
    # a scontrol that hangs is stopped at the run's end, not after timeout_s
    t0 = time.monotonic()
    res = hc._bounded_runner(conf, t0 + 1.5)(["sleep", "20"])
    assert res.timed_out and time.monotonic() - t0 < 5


def test_a_drain_whose_count_fails_is_given_back(tmp_path, monkeypatch):
    """The count after the drain gets no answer from slurmctld (here: the second `show node -o`
    times out): the drain may be over the cap, so it is given back and the run says why."""
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    fake = _cluster()
    counts = []

    def runner(argv):
        if argv[1:] == ["show", "node", "-o"]:
            counts.append(1)
            if len(counts) == 2:
                return (124, "", "scontrol show node -o timed out after 10 s")
        return fake(argv)
    out = hc.act(_conf(tmp_path, "n01"), {"rules": ["gpu.present"], "notes": [], "unknown": []},
                 scontrol=slurm.Scontrol(runner=runner), now=T0)
    assert out["rc"] == hc.RC_CAP and "the count after it failed" in out["line"] and _held(fake) == [], out
    assert [e["event"] for e in out["events"]] == ["drain", "gave_back"]


def test_a_history_that_cannot_be_written_is_a_note(tmp_path, monkeypatch, capsys):
    """A full or read-only disk (here: the history's directory is a file): the run ends with its
    verdict and a note, no traceback; nothing is counted, so nothing drains by the streaks."""
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    (tmp_path / "ro").write_text("")
    fake = _cluster()
    conf = _conf(tmp_path, "n01", history_file=str(tmp_path / "ro" / "h.json"), fail_runs=2)
    for dummy in range(3):
        out = _act(conf, fake, ["gpu.present"], now=T0)
        assert "failing run 1 of 2" in out["line"] and any("not written" in n for n in out["notes"]), out
    assert _held(fake) == []
    state = tmp_path / "ro" / "accepted.json"
    cfg = tmp_path / "hc.json"
    cfg.write_text(json.dumps({"root": str(tmp_path), "state_file": str(state)}))
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    assert hc.main(["--config", str(cfg), "--accept", "--no-gpu"]) == hc.RC_UNHEALTHY
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "was not written" in err and "Traceback" not in err


def test_a_persons_drain_while_the_fleet_is_counted_is_not_overwritten(tmp_path, monkeypatch):
    """Between the node's first read and its drain it counts the fleet (and after a give-back waits
    a random moment): a person who drains it meanwhile keeps their reason."""
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    fake = _cluster()

    counted = []

    def runner(argv):
        res = fake(argv)
        if argv[1:] == ["show", "node", "-o"] and not counted:     # once, after the first count
            counted.append(1)
            fake(["scontrol", "update", "NodeName=n01", "State=DRAIN", "Reason=hw: DIMM B3, ticket-4711"])
        return res
    out = hc.act(_conf(tmp_path, "n01"), {"rules": ["gpu.present"], "notes": [], "unknown": []},
                 scontrol=slurm.Scontrol(runner=runner), now=T0)
    assert slurm.parse_show_node(fake.lines["n01"])["n01"]["reason"] == "hw: DIMM B3, ticket-4711", out["line"]
    assert "changed while the fleet was counted" in out["line"]
