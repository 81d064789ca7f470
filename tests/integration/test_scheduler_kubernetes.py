"""The scheduler role's kubernetes backend through ansible-playbook and kubernetes.core (k8s_info,
k8s_taint, k8s) against a stand-in API server on 127.0.0.1 (tests/k8sfake.py: no API server can run
here; the stand-in serves the documented Node objects, discovery and PATCH semantics). The verdicts
are real pre-flight reports of the declared fleets in molecule/scheduler/fleets."""
import copy
import json
import os
import re
import socket
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import k8sfake  # noqa: E402
from schedulerlib import FLEETS, preflight_reports, this_run  # noqa: E402
from schedulerlib import playbook as _playbook  # noqa: E402

THEIRS = {"key": "maintenance.example.com/psu", "effect": "NoSchedule", "value": "ticket-4711"}

pytestmark = pytest.mark.skipif(
    not os.path.isdir(os.path.join(ROOT, ".collections", "ansible_collections", "kubernetes", "core")),
    reason="kubernetes.core is not installed (scripts/bootstrap.sh extracts it)")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return preflight_reports(tmp_path_factory.mktemp("reports"))


@pytest.fixture()
def api():
    server, url = k8sfake.serve([k8sfake.node("slurm01"), k8sfake.node("ghost01", taints=[THEIRS], unschedulable=True),
                                 k8sfake.node("ghost02")])          # ghost03: not in the API
    yield server, url
    server.shutdown()
    server.server_close()


def _act(reports, fleet, url, *extra, timeout=300):
    return _playbook("playbooks/scheduler.yml", "-i", os.path.join(FLEETS, fleet + ".yml"), "-e", "dlrack_scheduler=kubernetes",
                     "-e", json.dumps({"__dlrack_scheduler_reports": [this_run("%s/%s/report.json" % (reports, fleet))],
                                       "scheduler_k8s_host": url, "scheduler_k8s_api_key": "stand-in-token",
                                       "scheduler_k8s_validate_certs": False}), *extra, timeout=timeout)


def _changed(out):
    return int(re.findall(r"changed=(\d+)", out.split("PLAY RECAP")[-1])[0])


def test_taint_label_again_check_untaint(reports, api):
    server, url = api
    run_id = json.loads((reports / "fail-slurm01" / "report.json").read_text())["summary"]["run_id"]
    ghost01 = copy.deepcopy(server.nodes["ghost01"])
    rc, out = _act(reports, "fail-slurm01", url)
    assert rc == 0, out[-4000:]
    node = server.nodes["slurm01"]
    assert node["spec"]["taints"] == [{"key": "dlrack.node/unhealthy", "effect": "NoSchedule", "value": run_id}]
    assert node["metadata"]["annotations"]["dlrack.node/taint-run-id"] == run_id
    assert node["metadata"]["labels"]["dlrack.node/memory.exceeds_vram"] == "fail"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "slurm01"
    assert node["metadata"]["annotations"]["dlrack.node/reason"] == "dlrack: memory.exceeds_vram " + run_id
    assert server.nodes["ghost01"] == ghost01                 # a person's taint and cordon: untouched
    assert "ghost03: skipped, the API server has no such Node" in out

    rc, out = _act(reports, "fail-slurm01", url)
    assert rc == 0 and _changed(out) == 0, out[-4000:]

    before = copy.deepcopy(server.nodes)
    rc, out = _act(reports, "pass-all", url, "--check")
    assert rc == 0 and _changed(out) > 0 and server.nodes == before, out[-4000:]

    rc, out = _act(reports, "pass-all", url)
    assert rc == 0, out[-4000:]
    node = server.nodes["slurm01"]
    assert node["spec"].get("taints") == [] and not any(k.startswith("dlrack.node/") for k in node["metadata"]["labels"])
    assert "dlrack.node/reason" not in node["metadata"]["annotations"]
    assert "dlrack.node/taint-run-id" not in node["metadata"]["annotations"]
    assert node["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"] == "0"
    assert server.nodes["ghost01"]["spec"]["taints"] == [THEIRS] and server.nodes["ghost01"]["spec"]["unschedulable"]


def test_over_the_cap_changes_nothing(reports, api):
    server, url = api
    before = copy.deepcopy(server.nodes)
    rc, out = _act(reports, "fail-two", url)
    assert rc != 0 and "2 of 4 judged nodes fail, more than the cap of 1" in out, out[-4000:]
    assert server.nodes == before
    assert not [r for r in server.requests if r[0] == "PATCH"]


def test_a_hung_api_server_fails_the_act_in_time(reports):
    """kubernetes.core has no request timeout: an API server that accepts the connection and never
    answers would hang the run; each call is bounded by scheduler_k8s_timeout."""
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(16)                       # the kernel completes the handshake; nobody ever answers
    try:
        url = "http://127.0.0.1:%d" % hung.getsockname()[1]
        started = time.monotonic()
        rc, out = _act(reports, "fail-slurm01", url, "-e", "scheduler_k8s_timeout=5", timeout=120)
        took = time.monotonic() - started
    finally:
        hung.close()
    assert rc != 0 and "Timed out after 5 second(s)" in out, out[-4000:]
    assert took < 100, took


def test_a_persons_taint_with_our_key_survives_everything(reports):
    """28.2: a taint with our key that a person set (any other value, no dlrack.node/taint-run-id
    annotation) is neither overwritten on a failing Node nor removed from a passing one."""
    persons = {"key": "dlrack.node/unhealthy", "effect": "NoSchedule", "value": "rma-pending"}
    server, url = k8sfake.serve([k8sfake.node("slurm01", taints=[persons]), k8sfake.node("ghost01"), k8sfake.node("ghost02")])
    try:
        for fleet in ("fail-slurm01", "pass-all"):
            rc, out = _act(reports, fleet, url)
            assert rc == 0, out[-4000:]
            assert server.nodes["slurm01"]["spec"]["taints"] == [persons], fleet
            assert "slurm01: carries a taint dlrack.node/unhealthy that is not ours" in out
            assert "dlrack.node/taint-run-id" not in (server.nodes["slurm01"]["metadata"].get("annotations") or {})
    finally:
        server.shutdown()
        server.server_close()
