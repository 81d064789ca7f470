"""Pre-flight in a provisioning pipeline: driven through ansible-runner's Python API, the way a
pipeline or AWX runs it. The tests read the runner's status, rc, events and artifacts and the
report files, on a failing fleet, a passing fleet and a fleet validated from the fact cache."""
import json
import os

import ansible_runner
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# ansible-runner starts the ansible-playbook it finds on PATH: the project's pinned one.
os.environ["PATH"] = os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ.get("PATH", "")


def _run(tmp_path, playbook="playbooks/preflight.yml", inventory=None, limit=None, extravars=None, envvars=None,
         ident=None):
    env = {
        "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".collections"),
        "ANSIBLE_NOCOLOR": "1",
    }
    env.update(envvars or {})
    pdd = tmp_path / "runner"
    pdd.mkdir(exist_ok=True)
    return ansible_runner.run(
        private_data_dir=str(pdd), project_dir=ROOT, playbook=os.path.join(ROOT, playbook),
        inventory=inventory or os.path.join(ROOT, "inventories", "example"), limit=limit,
        extravars=extravars or {}, envvars=env, quiet=True, timeout=600, ident=ident,
    )


def _verdict(runner):
    """The one failing task of a failing fleet, and the failing hosts the run published (custom stats)."""
    failed = [e for e in runner.events if e["event"] == "runner_on_failed"]
    stats = [e for e in runner.events if e["event"] == "playbook_on_stats"]
    return failed, stats[-1]["event_data"].get("artifact_data", {}).get("dlrack_preflight_failed_hosts")


def test_failing_fleet_fails_the_pipeline_once_and_names_the_hosts(tmp_path):
    reports = tmp_path / "reports"
    r = _run(tmp_path, extravars={"dlrack_report_dir": str(reports)})
    assert r.status == "failed" and r.rc != 0
    doc = json.loads((reports / "report.json").read_text())
    failing = sorted(h for h, v in doc["hosts"].items() if v["status"] == "fail")
    assert failing == ["gpu-b01", "gpu-b02", "gpu-d01", "gpu-x01", "ws-01"]
    # One failing task for the whole fleet, on the first failing host, naming every failing host;
    # the same list in the run's stats (artifact_data) for the pipeline to read.
    failed, published = _verdict(r)
    assert len(failed) == 1 and failed[0]["event_data"]["host"] == failing[0]
    msg = failed[0]["event_data"]["res"]["msg"]
    assert "5 host(s)" in msg and all(h in msg for h in failing)
    assert not any(h in msg for h in ("gpu-a01", "gpu-a02", "gpu-b03", "ws-02"))
    assert published == failing
    assert r.stats["failures"] == {failing[0]: 1}
    # JUnit names every failing host too.
    xml = (reports / "report.xml").read_text()
    for h in failing:
        assert 'testsuite name="%s"' % h in xml
    assert (reports / "report.html").exists()
    # No host was contacted: every host is declared (gpu-d01's facts come from its inventory).
    assert not any(e["event"] == "runner_on_unreachable" for e in r.events)
    # The artifacts a pipeline archives are there.
    art = os.path.join(str(tmp_path / "runner"), "artifacts", r.config.ident)
    assert os.path.exists(os.path.join(art, "rc")) and os.path.exists(os.path.join(art, "job_events"))


def test_site_provisions_only_passing_hosts_then_fails_once(tmp_path):
    """site.yml on a fleet with failing hosts: the failing hosts get no provisioning task (the
    provisioning play ends them first), the passing one is provisioned, and the run fails once at
    the end naming the failing hosts. Local connection, --tags limited to the always-tagged gate and
    fact gathering, so nothing on this machine is changed."""
    import yaml
    ex = os.path.join(ROOT, "inventories", "example")
    with open(os.path.join(ex, "group_vars", "rack_a.yml")) as fh:
        good = yaml.safe_load(fh)["dlrack_hw"]
    with open(os.path.join(ex, "host_vars", "gpu-b01.yml")) as fh:
        bad = yaml.safe_load(fh)["dlrack_hw"]
    local = {"ansible_connection": "local", "ansible_python_interpreter": os.path.join(ROOT, ".venv", "bin", "python")}
    inv = tmp_path / "inv.json"
    inv.write_text(json.dumps({"all": {"hosts": {"bad-1": dict(local, dlrack_hw=bad), "good-1": dict(local, dlrack_hw=good),
                                                 "bad-2": dict(local, dlrack_hw=bad)}}}))
    r = _run(tmp_path, playbook="playbooks/site.yml", inventory=str(inv),
             extravars={"dlrack_report_dir": str(tmp_path / "r"), "dlrack_become": False},
             envvars={"ANSIBLE_RUN_TAGS": "dlrack_none"})
    assert r.status == "failed" and r.rc != 0, r.stdout.read()[-3000:]
    setup = sorted(e["event_data"]["host"] for e in r.events if e["event"] == "runner_on_ok"
                   and e["event_data"].get("task_action") in ("ansible.builtin.setup", "setup"))
    assert setup == ["good-1"]                                  # only the passing host is provisioned
    failed, published = _verdict(r)
    assert [e["event_data"]["host"] for e in failed] == ["bad-1"] and published == ["bad-1", "bad-2"]
    assert "bad-1, bad-2" in failed[0]["event_data"]["res"]["msg"]
    site = json.loads((tmp_path / "r" / "site.json").read_text())
    assert {h: v["status"] for h, v in site["hosts"].items()} == {"bad-1": "fail", "bad-2": "fail", "good-1": "pass"}


def test_passing_fleet_succeeds(tmp_path):
    reports = tmp_path / "reports"
    r = _run(tmp_path, limit="rack_a", extravars={"dlrack_report_dir": str(reports)})
    assert r.status == "successful" and r.rc == 0, r.stdout.read()[-3000:]
    doc = json.loads((reports / "report.json").read_text())
    assert set(doc["hosts"]) == {"gpu-a01", "gpu-a02"}
    assert doc["summary"]["status"] == "pass"


def test_fail_on_never_reports_without_failing_and_warning_is_stricter(tmp_path):
    r = _run(tmp_path, extravars={"dlrack_report_dir": str(tmp_path / "r1"), "dlrack_fail_on": "never"})
    assert r.status == "successful" and r.rc == 0
    r = _run(tmp_path, limit="rack_b:ws-02", extravars={"dlrack_report_dir": str(tmp_path / "r2"),
                                                        "dlrack_fail_on": "warning"})
    assert r.status == "failed"
    failed, published = _verdict(r)
    assert "gpu-b03" in published and "gpu-b03" in failed[0]["event_data"]["res"]["msg"]   # warnings only, fatal with 'warning'


def test_validate_from_fact_cache_without_reconnecting(tmp_path):
    """Gather once (local connection), then validate the same host from the jsonfile fact cache
    (ansible-runner keeps it in artifacts/<ident>/fact_cache, as AWX does per job template) while
    its address is unreachable: the preflight must not try to connect."""
    inv1 = tmp_path / "inv1.yml"
    inv1.write_text("all:\n  hosts:\n    cached-01:\n      ansible_connection: local\n"
                    "      ansible_python_interpreter: /usr/bin/python3\n")
    r = _run(tmp_path, inventory=str(inv1), ident="fleet",
             extravars={"dlrack_report_dir": str(tmp_path / "r1"), "dlrack_fail_on": "never", "preflight_become": False})
    assert r.status == "successful", r.stdout.read()[-3000:]
    cache = tmp_path / "runner" / "artifacts" / "fleet" / "fact_cache"
    files = [p for p in cache.iterdir() if p.name.endswith("cached-01")]   # ansible-core 2.19 names it s1_<host>
    assert len(files) == 1
    cached = json.loads(files[0].read_text())
    cached = json.loads(cached["__payload__"]) if "__payload__" in cached else cached   # 2.19 wraps it
    assert cached["dlrack_hw_gathered"]["source"] == "gathered"
    inv2 = tmp_path / "inv2.yml"
    inv2.write_text("all:\n  hosts:\n    cached-01:\n      ansible_host: 192.0.2.1\n      ansible_connection: ssh\n")
    r = _run(tmp_path, inventory=str(inv2), ident="fleet",
             extravars={"dlrack_report_dir": str(tmp_path / "r2"), "dlrack_fail_on": "never",
                        "dlrack_use_fact_cache": True})
    assert r.status == "successful", r.stdout.read()[-3000:]
    assert not any(e["event"] == "runner_on_unreachable" for e in r.events)
    doc = json.loads((tmp_path / "r2" / "report.json").read_text())
    assert doc["hosts"]["cached-01"]["source"] == "gathered"


@pytest.mark.parametrize("bad", ["dlrack_report_dir", "dlrack_fail_on"])
def test_bad_settings_are_a_clear_error_not_a_traceback(tmp_path, bad):
    extravars = {"dlrack_report_dir": str(tmp_path / "r"), "dlrack_fail_on": "never"}
    if bad == "dlrack_fail_on":
        extravars["dlrack_fail_on"] = "sometimes"
    else:
        (tmp_path / "file").write_text("x")
        extravars["dlrack_report_dir"] = str(tmp_path / "file")
    r = _run(tmp_path, limit="rack_a", extravars=extravars)
    assert r.status == "failed"
    out = r.stdout.read()
    assert "Traceback" not in out
    assert ("sometimes" in out) if bad == "dlrack_fail_on" else ("file" in out)
