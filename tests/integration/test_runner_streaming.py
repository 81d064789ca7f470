"""The pre-flight under ansible-runner's streaming path (issue 23.4), the one AWX's receptor uses:
`ansible-runner transmit PDD | ansible-runner worker` as real processes, the stream then read by
ansible-runner's `process` step (its Python API, which gives the Runner AWX reads: status, rc,
events, artifact_data). The same run through ansible_runner.run (ansible-playbook underneath) must
give the same status, rc, published verdict and report. Declared hosts: nothing is contacted. The
worker runs on this machine, so the absolute playbook and inventory paths are valid there (in an
AWX execution environment they are the project's paths inside the container)."""
import json
import os
import subprocess

import ansible_runner

from awxrules import awx_sliced_hosts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, ".venv", "bin")
INVENTORY = os.path.join(ROOT, "inventories", "example")
ENV = {"ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"), "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".collections"),
       "ANSIBLE_NOCOLOR": "1", "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}


def _pdd(path, extravars):
    os.makedirs(os.path.join(str(path), "env"))
    with open(os.path.join(str(path), "env", "extravars"), "w") as fh:
        json.dump(extravars, fh)
    with open(os.path.join(str(path), "env", "envvars"), "w") as fh:
        json.dump(ENV, fh)
    return str(path)


def _streamed(tmp_path, playbook, extravars, limit=None):
    pdd = _pdd(tmp_path / "transmit", extravars)
    cmd = [os.path.join(BIN, "ansible-runner"), "transmit", pdd, "-p", os.path.join(ROOT, playbook),
           "--inventory", INVENTORY] + (["--limit", limit] if limit else [])
    stream = tmp_path / "stream"
    with open(str(stream), "wb") as out:
        transmit = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=dict(os.environ, **ENV))
        worker = subprocess.Popen([os.path.join(BIN, "ansible-runner"), "worker"], stdin=transmit.stdout,
                                  stdout=out, env=dict(os.environ, **ENV))
        transmit.stdout.close()
        worker_rc = worker.wait(timeout=600)
        assert transmit.wait(timeout=60) == 0
    with open(str(stream), "rb") as src:
        processed = ansible_runner.run(streamer="process", _input=src, private_data_dir=str(tmp_path / "process"),
                                       quiet=True)
    # The process step has no rc of its own (ansible-runner 2.4 streaming.Processor leaves it None;
    # the stream carries the status): the exit code is the worker's, ansible-playbook's.
    return processed, worker_rc


def _direct(tmp_path, playbook, extravars, limit=None):
    pdd = tmp_path / "direct"
    pdd.mkdir()
    return ansible_runner.run(private_data_dir=str(pdd), project_dir=ROOT, playbook=os.path.join(ROOT, playbook),
                              inventory=INVENTORY, limit=limit, extravars=extravars, envvars=ENV, quiet=True, timeout=600)


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
