"""drift.yml always writes its report, through ansible-runner as a pipeline runs it: an
unreachable host and a host whose storage check fails both get drift status `error` naming the
task and message, the failing check does not stop the next role's check on that host, and the run
exits non-zero. The live host is this machine (local connection, check mode: nothing changes),
through the project's venv interpreter, which has no python3-apt: check mode must work without it."""
import json
import os
import subprocess

import ansible_runner

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ["PATH"] = os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ.get("PATH", "")
VENV_PY = os.path.join(ROOT, ".venv", "bin", "python")

# 127.0.0.2 port 1: nothing listens there, the connection is refused at once.
DEAD = {"ansible_host": "127.0.0.2", "ansible_port": 1, "ansible_connection": "ssh",
        "ansible_ssh_common_args": "-o ConnectTimeout=5"}


def _drift(tmp_path, hosts):
    inv = tmp_path / "inventory.json"
    inv.write_text(json.dumps({"all": {"hosts": hosts, "vars": {"dlrack_become": False}}}))
    env = {"ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"),
           "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".collections"), "ANSIBLE_NOCOLOR": "1"}
    pdd = tmp_path / "runner"
    pdd.mkdir()
    reports = tmp_path / "drift"
    r = ansible_runner.run(private_data_dir=str(pdd), project_dir=ROOT, playbook=os.path.join(ROOT, "playbooks", "drift.yml"),
                           inventory=str(inv), extravars={"dlrack_report_dir": str(reports)}, envvars=env,
                           cmdline="--check --diff", quiet=True, timeout=600)
    return r, reports


def _reports(reports):
    assert all((reports / ("drift." + ext)).exists() for ext in ("json", "xml", "html"))
    return json.loads((reports / "drift.json").read_text()), (reports / "drift.xml").read_text()


def test_all_hosts_unreachable_still_writes_the_report(tmp_path):
    r, reports = _drift(tmp_path, {"dead-1": DEAD, "dead-2": DEAD})
    assert r.rc != 0 and r.status == "failed"
    doc, xml = _reports(reports)
    for host in ("dead-1", "dead-2"):
        d = doc["drift"][host]
        assert d["status"] == "error" and d["unreachable"] is True
        assert d["failures"][0]["task"] == "Gather hardware facts" and "127.0.0.2" in d["failures"][0]["msg"]
        assert 'classname="%s.drift"' % host in xml
    assert xml.count('<error message="Gather hardware facts:') == 2
    html = (reports / "drift.html").read_text()
    assert "not checked (error)" in html and "<title>dlrack.node drift report</title>" in html
    assert "2 host(s) not checked (unreachable or a check failed) of 2" in html and "badge pass" not in html


def test_a_failing_check_does_not_stop_the_other_roles(tmp_path):
    probe = subprocess.run([VENV_PY, "-c", "import apt"], stderr=subprocess.DEVNULL, check=False)
    assert probe.returncode != 0          # the interpreter used below has no apt bindings
    live = {"ansible_connection": "local", "ansible_python_interpreter": VENV_PY,
            "dlrack_thresholds": {"min_gpus": 0}, "dlrack_affinity": False,
            # ecc_monitor stops on a node that systemd does not run (issue 30.7); this machine may be a
            # container without it, and the ECC check must run to its end here: the node is taken to run systemd
            "__ecc_monitor_systemd_dir": "/",
            # the storage check fails: a device that does not exist
            "storage_tiers_hot_devices": ["/dev/dlrack-test-missing"], "storage_tiers_cold_enabled": False}
    r, reports = _drift(tmp_path, {"dead-1": DEAD, "live-1": live})
    assert r.rc != 0
    doc, xml = _reports(reports)
    assert doc["drift"]["dead-1"]["status"] == "error"
    d = doc["drift"]["live-1"]
    assert d["status"] == "error" and d["unreachable"] is False
    storage = [f for f in d["failures"] if f["role"] == "storage_tiers"]
    assert len(storage) == 1 and "/dev/dlrack-test-missing" in storage[0]["msg"]
    assert '<error message="%s' % storage[0]["task"][:20] in xml
    # After the storage check failed, the ECC monitoring check ran to its end on the same host.
    ecc = [e for e in r.events if e["event"] in ("runner_on_ok", "runner_on_skipped", "runner_on_failed")
           and e["event_data"].get("host") == "live-1" and e["event_data"].get("role") == "ecc_monitor"]
    assert len(ecc) > 10
    pkg = [e for e in ecc if e["event_data"]["task"] == "Find which of rasdaemon and the EDAC tools are missing"]
    assert len(pkg) == 1 and pkg[0]["event"] == "runner_on_ok"       # check mode without python3-apt
    res = pkg[0]["event_data"]["res"]
    if res["missing"]:                                               # on this machine: rasdaemon is not installed
        assert res["changed"] is True and res["msg"].startswith("would install: ")
        assert any(c["task"] == pkg[0]["event_data"]["task"] and c["msg"] == res["msg"] for c in d["changes"])
    # The verdict fails once, on the first failing host, naming every failing host by why
    # (issue 19.5: it was one failing task per host).
    failed = [(e["event_data"]["host"], e["event_data"]["res"]["msg"]) for e in r.events if e["event"] == "runner_on_failed"
              and e["event_data"]["play"].startswith("Drift - verdict")]
    assert len(failed) == 1 and failed[0][0] == "dead-1", failed
    assert failed[0][1].startswith("drift failed for 2 host(s) (dlrack_fail_on=error for the findings): "), failed
    assert "could not be checked (status error): dead-1, live-1;" in failed[0][1], failed
    assert failed[0][1].endswith("; see %s" % (reports / "drift.html")), failed
    assert not [e for e in r.events if e["event"] == "runner_on_failed" and e["event_data"]["task"].startswith("Fail the hosts")]
