"""A pre-flight sliced as AWX/AAP slices a job (issue 23), run by real ansible-runner processes,
one per slice, on the declared example inventory (no host is contacted), then merged.

AWX cannot run here (it needs Kubernetes); its two rules are reproduced in this harness only, from
ansible/awx at e21dd0a0933fd544d1fe2513c54fe41203775eb5:
  awx/main/models/inventory.py  get_script_data: enabled hosts order_by('name'), then
                                get_sliced_hosts: hosts[slice_number - 1::slice_count]
  awx/main/models/workflow.py   get_effective_artifacts: artifacts.update(...) per job in
                                order_by('finished', 'id'), the last to finish winning per key
AWX hands each slice an inventory holding its hosts only; here the slice is the run's limit (the
example inventory keeps host_vars in files), which gives the play the same hosts.
"""
import json
import os

import ansible_runner
import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils.report_merge import fleet_verdict

from awxrules import awx_effective_artifacts, awx_sliced_hosts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ["PATH"] = os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ.get("PATH", "")
INVENTORY = os.path.join(ROOT, "inventories", "example")
HOSTS = sorted(["gpu-a01", "gpu-a02", "gpu-b01", "gpu-b02", "gpu-b03", "gpu-d01", "gpu-x01", "ws-01", "ws-02"])
FAILING = ["gpu-b01", "gpu-b02", "gpu-d01", "gpu-x01", "ws-01"]


def _run(pdd, playbook, limit=None, extravars=None):
    env = {"ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"),
           "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".collections"), "ANSIBLE_NOCOLOR": "1"}
    pdd.mkdir(parents=True, exist_ok=True)
    return ansible_runner.run(private_data_dir=str(pdd), project_dir=ROOT, playbook=os.path.join(ROOT, playbook),
                              inventory=INVENTORY, limit=limit, extravars=extravars or {}, envvars=env,
                              quiet=True, timeout=600)


def _artifacts(runner):
    """What AWX stores as the job's artifacts: the playbook_on_stats event's artifact_data."""
    stats = [e for e in runner.events if e["event"] == "playbook_on_stats"]
    return stats[-1]["event_data"].get("artifact_data") or {}


def _doc(path):
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    for key in ("generated_at", "run_id"):
        doc["summary"].pop(key)
    return doc


@pytest.mark.parametrize("count", [3])
def test_slices_run_by_ansible_runner_merge_to_the_unsliced_run(tmp_path, count):
    whole = _run(tmp_path / "whole", "playbooks/preflight.yml", extravars={"dlrack_report_dir": str(tmp_path / "r-whole")})
    assert whole.status == "failed" and whole.rc != 0
    slices = []
    for n in range(1, count + 1):
        hosts = awx_sliced_hosts(HOSTS, n, count)
        r = _run(tmp_path / ("slice%d" % n), "playbooks/preflight.yml", limit=",".join(hosts),
                 extravars={"dlrack_report_dir": str(tmp_path / ("r%d" % n))})
        assert r.status in ("failed", "successful"), r.stdout.read()[-3000:]
        slices.append((hosts, r))
    # 1. the merged artifacts hold every slice's verdict, whichever slice finishes last
    for order in (slices, slices[::-1]):
        artifacts = awx_effective_artifacts([_artifacts(r) for dummy, r in order])
        verdict = fleet_verdict(artifacts)
        assert verdict["failed_hosts"] == FAILING and verdict["hosts"] == len(HOSTS) and verdict["slices"] == count
        assert verdict["failed_hosts"] == fleet_verdict(_artifacts(whole))["failed_hosts"]
        # the shared key alone lost the other slices' failing hosts
        assert artifacts.get("dlrack_preflight_failed_hosts") != FAILING
    # 2. one fleet report from the slices' report.json: that of the unsliced run, and its exit code
    merge = _run(tmp_path / "merge", "playbooks/report_merge.yml", extravars={
        "dlrack_report_merge_inputs": [str(tmp_path / ("r%d" % n) / "report.json") for n in range(1, count + 1)],
        "dlrack_report_dir": str(tmp_path / "r-merged")})
    assert merge.status == "failed" and merge.rc == whole.rc
    failed = [e for e in merge.events if e["event"] == "runner_on_failed"]
    assert len(failed) == 1 and all(h in failed[0]["event_data"]["res"]["msg"] for h in FAILING)
    assert _doc(tmp_path / "r-merged" / "report.json") == _doc(tmp_path / "r-whole" / "report.json")


def test_merging_one_slice_twice_is_refused(tmp_path):
    hosts = awx_sliced_hosts(HOSTS, 1, 2)
    r = _run(tmp_path / "s1", "playbooks/preflight.yml", limit=",".join(hosts), extravars={"dlrack_report_dir": str(tmp_path / "r1")})
    assert r.status == "failed"
    path = str(tmp_path / "r1" / "report.json")
    merge = _run(tmp_path / "merge", "playbooks/report_merge.yml", extravars={
        "dlrack_report_merge_inputs": [path, path], "dlrack_report_dir": str(tmp_path / "m")})
    assert merge.status == "failed"
    msg = [e for e in merge.events if e["event"] == "runner_on_failed"][0]["event_data"]["res"]["msg"]
    assert "is in report merge inputs" in msg and "each host must come from exactly one slice" in msg
    assert "Traceback" not in msg and not (tmp_path / "m" / "report.json").exists()
