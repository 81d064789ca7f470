"""The pre-flight under ansible-runner's streaming path (issue 23.4), the one AWX's receptor uses:
`ansible-runner transmit PDD | ansible-runner worker` as real processes, the stream then read by
ansible-runner's `process` step (its Python API, which gives the Runner AWX reads: status, rc,
events, artifact_data). The same run through ansible_runner.run (ansible-playbook underneath) must
give the same status, rc, published verdict and report. Declared hosts: nothing is contacted. The
worker runs on this machine, so the absolute playbook and inventory paths are valid there (in an
AWX execution environment they are the project's paths inside the container).

drift.yml and site.yml run the same way on hosts that need no container: an unreachable host (ssh
to a port where nothing listens), a declared host that fails the pre-flight, and this machine over
the local connection (drift in check mode with a storage check that fails; site with its roles
switched off, so it gathers facts and reports without changing this machine). Both paths must give
the same status, exit code, published stats, failing tasks and messages, and report set."""
import json
import os
import subprocess
import time

import ansible_runner

from awxrules import awx_sliced_hosts
from hwdocs import GOOD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, ".venv", "bin")
INVENTORY = os.path.join(ROOT, "inventories", "example")
ENV = {"ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"), "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".collections"),
       "ANSIBLE_NOCOLOR": "1", "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}


def _pdd(path, extravars, env=None):
    env = env or ENV
    os.makedirs(os.path.join(str(path), "env"))
    with open(os.path.join(str(path), "env", "extravars"), "w") as fh:
        json.dump(extravars, fh)
    with open(os.path.join(str(path), "env", "envvars"), "w") as fh:
        json.dump(env, fh)
    return str(path)


def _streamed(tmp_path, playbook, extravars, limit=None, inventory=INVENTORY, cmdline=None, env=None):
    env = env or ENV
    pdd = _pdd(tmp_path / "transmit", extravars, env)
    cmd = [os.path.join(BIN, "ansible-runner"), "transmit", pdd, "-p", os.path.join(ROOT, playbook),
           "--inventory", inventory] + (["--limit", limit] if limit else []) + (
        ["--cmdline", cmdline] if cmdline else [])
    stream = tmp_path / "stream"
    with open(str(stream), "wb") as out:
        transmit = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=dict(os.environ, **env))
        worker = subprocess.Popen([os.path.join(BIN, "ansible-runner"), "worker"], stdin=transmit.stdout,
                                  stdout=out, env=dict(os.environ, **env))
        transmit.stdout.close()
        worker_rc = worker.wait(timeout=600)
        assert transmit.wait(timeout=60) == 0
    with open(str(stream), "rb") as src:
        processed = ansible_runner.run(streamer="process", _input=src, private_data_dir=str(tmp_path / "process"),
                                       quiet=True)
    # The process step has no rc of its own (ansible-runner 2.4 streaming.Processor leaves it None;
    # the stream carries the status): the exit code is the worker's, ansible-playbook's.
    return processed, worker_rc


def _direct(tmp_path, playbook, extravars, limit=None, inventory=INVENTORY, cmdline=None, env=None):
    env = env or ENV
    pdd = tmp_path / "direct"
    pdd.mkdir()
    return ansible_runner.run(private_data_dir=str(pdd), project_dir=ROOT, playbook=os.path.join(ROOT, playbook),
                              inventory=inventory, limit=limit, extravars=extravars, envvars=env, cmdline=cmdline,
                              quiet=True, timeout=600)


def _events(runner):
    """A Runner's events; for the process step (a streaming.Processor), the job_events it wrote."""
    if hasattr(runner, "events"):
        return list(runner.events)
    where = os.path.join(runner.artifact_dir, "job_events")
    out = []
    for name in os.listdir(where):
        with open(os.path.join(where, name), encoding="utf-8") as fh:
            out.append(json.load(fh))
    return sorted(out, key=lambda e: e["counter"])


def _stats(runner):
    return [e for e in _events(runner) if e["event"] == "playbook_on_stats"][-1]["event_data"].get("artifact_data") or {}


def _failed(runner):
    return [(e["event_data"]["host"], e["event_data"]["res"].get("msg")) for e in _events(runner)
            if e["event"] == "runner_on_failed"]


def _doc(path):
    with open(str(path), encoding="utf-8") as fh:
        doc = json.load(fh)
    for key in ("generated_at", "run_id"):
        doc["summary"].pop(key)
    return doc


def test_preflight_streamed_gives_what_ansible_playbook_gives(tmp_path):
    streamed, rc = _streamed(tmp_path, "playbooks/preflight.yml", {"dlrack_report_dir": str(tmp_path / "r-stream")})
    direct = _direct(tmp_path, "playbooks/preflight.yml", {"dlrack_report_dir": str(tmp_path / "r-direct")})
    assert direct.status == "failed" and direct.rc == 2
    assert (streamed.status, rc) == (direct.status, direct.rc)
    assert _stats(streamed) == _stats(direct) and _stats(streamed)["dlrack_preflight_failed_hosts"]
    assert [f[0] for f in _failed(streamed)] == [f[0] for f in _failed(direct)]
    assert [f[1].replace("r-stream", "r-direct") for f in _failed(streamed)] == [f[1] for f in _failed(direct)]
    assert _doc(tmp_path / "r-stream" / "report.json") == _doc(tmp_path / "r-direct" / "report.json")


def test_report_merge_streamed(tmp_path):
    """A workflow's merge node, streamed as AWX runs it: two slices' reports in, the unsliced verdict out."""
    hosts = sorted(["gpu-a01", "gpu-a02", "gpu-b01", "gpu-b02", "gpu-b03", "gpu-d01", "gpu-x01", "ws-01", "ws-02"])
    inputs = []
    for n in (1, 2):
        part = awx_sliced_hosts(hosts, n, 2)
        d = tmp_path / ("slice%d" % n)
        d.mkdir()
        r = _direct(d, "playbooks/preflight.yml", {"dlrack_report_dir": str(d / "r")}, limit=",".join(part))
        assert r.status == "failed"
        inputs.append(str(d / "r" / "report.json"))
    merged, rc = _streamed(tmp_path, "playbooks/report_merge.yml",
                           {"dlrack_report_merge_inputs": inputs, "dlrack_report_dir": str(tmp_path / "fleet")})
    assert merged.status == "failed" and rc == 2
    (host, msg), = _failed(merged)
    assert "pre-flight failed for 5 host(s)" in msg
    assert _doc(tmp_path / "fleet" / "report.json")["summary"]["fail"] == 5


# 127.0.0.2 port 1: nothing listens there, the connection is refused at once (as in test_drift.py).
DEAD = {"ansible_host": "127.0.0.2", "ansible_port": 1, "ansible_connection": "ssh",
        "ansible_ssh_common_args": "-o ConnectTimeout=5"}
LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": os.path.join(BIN, "python")}
BAD = {"schema": 1, "source": "declared", "cpu": {"model": "AMD EPYC 7763 64-Core Processor", "sockets": -2},
       "gpu": {"model": "NVIDIA A100-SXM4-80GB", "count": 8}}


def _inventory(tmp_path, hosts):
    """(inventory path, environment): the run's fact cache is its own (ansible.cfg's ./.cache/facts
    would hand this machine's gathered hardware from another test's run to the pre-flight)."""
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps({"all": {"hosts": hosts, "vars": {"dlrack_become": False}}}))
    return str(path), dict(ENV, ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"))


def _same(tmp_path, streamed, rc, direct, prefix):
    """Both paths gave the same run: status, exit code, published stats, failing tasks and their
    messages (the report directory's name aside), and the same report set and JSON report."""
    assert (streamed.status, rc) == (direct.status, direct.rc)
    assert _stats(streamed) == _stats(direct)
    assert [(h, m.replace("r-stream", "r-direct")) for h, m in _failed(streamed)] == _failed(direct)
    assert sorted(os.listdir(str(tmp_path / "r-stream"))) == sorted(os.listdir(str(tmp_path / "r-direct")))
    assert _doc(tmp_path / "r-stream" / (prefix + ".json")) == _doc(tmp_path / "r-direct" / (prefix + ".json"))


def test_drift_streamed_gives_what_ansible_playbook_gives(tmp_path):
    live = dict(LOCAL, dlrack_thresholds={"min_gpus": 0}, dlrack_ecc=False, dlrack_affinity=False,
                # the storage check fails: a device that does not exist
                storage_tiers_hot_devices=["/dev/dlrack-test-missing"], storage_tiers_cold_enabled=False)
    inventory, env = _inventory(tmp_path, {"dead-1": DEAD, "live-1": live})
    t0 = time.monotonic()
    streamed, rc = _streamed(tmp_path, "playbooks/drift.yml", {"dlrack_report_dir": str(tmp_path / "r-stream")},
                             inventory=inventory, cmdline="--check --diff", env=env)
    t1 = time.monotonic()
    direct = _direct(tmp_path, "playbooks/drift.yml", {"dlrack_report_dir": str(tmp_path / "r-direct")},
                     inventory=inventory, cmdline="--check --diff", env=env)
    print("drift: streamed %.1f s, direct %.1f s" % (t1 - t0, time.monotonic() - t1))
    assert direct.status == "failed" and direct.rc == 2
    _same(tmp_path, streamed, rc, direct, "drift")
    drift = _doc(tmp_path / "r-stream" / "drift.json")["drift"]
    assert drift["dead-1"]["status"] == "error" and drift["dead-1"]["unreachable"] is True
    assert drift["live-1"]["status"] == "error" and "/dev/dlrack-test-missing" in json.dumps(drift["live-1"]["failures"])
    assert sorted(h for h, dummy in _failed(streamed) if h in ("dead-1", "live-1")) == ["dead-1", "live-1"]


def _site(tmp_path, hosts):
    off = {"dlrack_storage": False, "dlrack_ecc": False, "dlrack_affinity": False}
    inventory, env = _inventory(tmp_path, dict((h, dict(v, **off)) for h, v in hosts.items()))
    t0 = time.monotonic()
    streamed, rc = _streamed(tmp_path, "playbooks/site.yml", {"dlrack_report_dir": str(tmp_path / "r-stream")},
                             inventory=inventory, env=env)
    t1 = time.monotonic()
    direct = _direct(tmp_path, "playbooks/site.yml", {"dlrack_report_dir": str(tmp_path / "r-direct")},
                     inventory=inventory, env=env)
    print("site: streamed %.1f s, direct %.1f s" % (t1 - t0, time.monotonic() - t1))
    assert direct.status == "failed" and direct.rc == 2
    _same(tmp_path, streamed, rc, direct, "site")
    hosts = _doc(tmp_path / "r-stream" / "site.json")["hosts"]
    return dict(_failed(streamed)), _stats(streamed), {h: hosts[h]["status"] for h in hosts}


def test_site_streamed_gives_what_ansible_playbook_gives(tmp_path):
    """site.yml: an unreachable host fails naming why, this machine is provisioned (its roles
    switched off: facts gathered, nothing changed) and reported."""
    failed, stats, status = _site(tmp_path, {"dead-1": dict(DEAD, dlrack_hw=GOOD), "live-1": dict(LOCAL, dlrack_hw=GOOD)})
    assert sorted(failed) == ["dead-1"] and failed["dead-1"].startswith("dead-1 was not provisioned: unreachable: ")
    # site.json tells the host's final state (issue 30.1): unreachable is fail, it said pass
    assert status == {"dead-1": "fail", "live-1": "pass"}
    assert not stats.get("dlrack_preflight_failed_hosts")


def test_site_streamed_with_a_host_that_failed_the_preflight(tmp_path):
    """site.yml with a host that fails the pre-flight as well: it is not provisioned and the verdict
    fails once naming it; the unreachable host still fails naming why (before, the verdict play's
    one host failed, Ansible ran no later play, and the unreachable host was never named)."""
    failed, stats, status = _site(tmp_path, {"bad-1": {"dlrack_hw": BAD}, "dead-1": dict(DEAD, dlrack_hw=GOOD),
                                             "live-1": dict(LOCAL, dlrack_hw=GOOD)})
    assert sorted(failed) == ["bad-1", "dead-1"]
    assert failed["bad-1"].startswith("pre-flight failed for 1 host(s) (dlrack_fail_on=error): bad-1; see ")
    assert failed["dead-1"].startswith("dead-1 was not provisioned: unreachable: ")
    assert stats["dlrack_preflight_failed_hosts"] == ["bad-1"]
    assert status == {"bad-1": "fail", "dead-1": "fail", "live-1": "pass"}     # dead-1 unreachable (issue 30.1)
