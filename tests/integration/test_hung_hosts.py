"""One hung or unreachable host never costs the others their report (issue 18.4), with real
ansible-playbook runs: a host whose stand-in interpreter never answers (local connection), a host
with an unreachable loopback address (ssh to 127.0.0.2 port 1: refused at once) and healthy hosts
(declared, or this machine through the local connection with the project's venv). Every entry
point writes its report for every host within the task timeout (dlrack_task_timeout, 10 s here),
the hung and unreachable hosts are errors with their reason, and the run exits non-zero, also with
dlrack_fail_on=never.

The stand-in interpreter records its pid; Ansible's local connection leaves a timed-out module
running, so each test kills exactly those processes at the end."""
import json
import os
import signal
import subprocess
import time

import pytest

from hwdocs import GOOD

from testpaths import ROOT  # noqa: E402  (tests/ is on sys.path: conftest)

VENV_PY = os.path.join(ROOT, ".venv", "bin", "python")
DEAD = {"ansible_host": "127.0.0.2", "ansible_port": 1, "ansible_connection": "ssh",
        "ansible_ssh_common_args": "-o ConnectTimeout=5"}
TIMEOUT = 10


@pytest.fixture
def hang(tmp_path):
    """A stand-in ansible_python_interpreter that never answers; its processes are killed after."""
    pids = tmp_path / "hang.pids"
    script = tmp_path / "hang-python"
    script.write_text("#!/bin/sh\necho $$ >> %s\nexec sleep 300\n" % pids)  # ends by itself if a run is killed
    script.chmod(0o755)
    yield {"ansible_connection": "local", "ansible_python_interpreter": str(script)}
    if pids.exists():
        for pid in set(pids.read_text().split()):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def _play(tmp_path, playbook, hosts, *extra):
    inv = tmp_path / "inventory.json"
    inv.write_text(json.dumps({"all": {"hosts": hosts, "vars": {"dlrack_become": False}}}))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"),
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"),
               PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ.get("PATH", ""))
    cmd = ["ansible-playbook", os.path.join(ROOT, "playbooks", playbook), "-i", str(inv),
           "-e", "dlrack_task_timeout=%d" % TIMEOUT] + list(extra)
    started = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=400, check=False)
    return proc.returncode, proc.stdout.decode(errors="replace"), time.monotonic() - started


def _failing_with_a_template(tmp_path):
    """A stand-in interpreter whose every module fails with a message that would run a command
    (touch the marker) if the controller templated it: (marker, interpreter)."""
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil-python"
    evil.write_text("#!/bin/sh\nprintf '%%s' '{\"failed\": true, \"msg\": \"{{ lookup(\\\"pipe\\\", \\\"touch %s\\\") }}\"}'\n"
                    % marker)
    evil.chmod(0o755)
    return marker, evil


def _errors(doc, host):
    return [f for f in doc["hosts"][host]["findings"] if f["severity"] == "error"]


def test_preflight_judges_every_host_when_one_hangs_and_one_is_unreachable(tmp_path, hang):
    reports = tmp_path / "reports"
    hosts = {"good-01": {"dlrack_hw": GOOD, "dlrack_external_archive": "nfs://archive/raw"},
             "hang-01": hang, "gone-01": DEAD}
    rc, out, took = _play(tmp_path, "preflight.yml", hosts, "-e", "dlrack_report_dir=%s" % reports)
    assert rc != 0, out[-3000:]
    assert took < 120, "bounded by the task timeout (%.0f s)" % took
    doc = json.loads((reports / "report.json").read_text())
    assert set(doc["hosts"]) == {"good-01", "hang-01", "gone-01"}
    assert doc["hosts"]["good-01"]["status"] == "pass"
    hung = [f for f in _errors(doc, "hang-01") if f["rule"] == "host.gathered"]
    assert len(hung) == 1 and "Timed out after %d second(s)" % TIMEOUT in hung[0]["message"], hung
    gone = [f for f in _errors(doc, "gone-01") if f["rule"] == "host.gathered"]
    assert len(gone) == 1 and gone[0]["message"].startswith("host gone-01 was not checked: unreachable: ")
    assert "127.0.0.2" in gone[0]["message"]
    assert "pre-flight failed for 2 host(s)" in out and "gone-01, hang-01" in out


def test_preflight_with_every_gathered_host_unreachable_still_judges_the_declared(tmp_path):
    # before: Ansible ended the run after the gather play (all its hosts unreachable): no report
    reports = tmp_path / "reports"
    hosts = {"good-01": {"dlrack_hw": GOOD, "dlrack_external_archive": "nfs://archive/raw"},
             "gone-01": DEAD, "gone-02": DEAD}
    rc, out, dummy = _play(tmp_path, "preflight.yml", hosts, "-e", "dlrack_report_dir=%s" % reports,
                           "-e", "dlrack_fail_on=never")
    assert rc != 0, out[-3000:]      # not checked fails the gate, whatever dlrack_fail_on says
    doc = json.loads((reports / "report.json").read_text())
    assert doc["hosts"]["good-01"]["status"] == "pass"
    for host in ("gone-01", "gone-02"):
        assert doc["hosts"][host]["status"] == "fail"
        assert any(f["rule"] == "host.gathered" for f in _errors(doc, host))
    assert "pre-flight failed for 2 host(s) (dlrack_fail_on=never): gone-01, gone-02" in out


def test_drift_writes_every_report_when_one_host_hangs(tmp_path, hang):
    # before: still running after 240 s, no drift.json for the healthy hosts
    reports = tmp_path / "drift"
    live = {"ansible_connection": "local", "ansible_python_interpreter": VENV_PY,
            "dlrack_thresholds": {"min_gpus": 0}, "dlrack_storage": False, "dlrack_ecc": False,
            "dlrack_affinity": False}
    hosts = {"hang-1": hang, "dead-1": DEAD, "live-1": live, "live-2": dict(live)}
    rc, out, took = _play(tmp_path, "drift.yml", hosts, "--check", "--diff", "-e", "dlrack_report_dir=%s" % reports)
    assert rc != 0, out[-3000:]
    assert took < 150, "bounded by the task timeout (%.0f s)" % took
    doc = json.loads((reports / "drift.json").read_text())
    assert set(doc["drift"]) == {"hang-1", "dead-1", "live-1", "live-2"}
    assert doc["drift"]["live-1"]["status"] == doc["drift"]["live-2"]["status"] == "clean"
    hung = doc["drift"]["hang-1"]
    assert hung["status"] == "error" and hung["unreachable"] is False
    assert hung["failures"][0]["task"] == "Gather hardware facts"
    assert "Timed out after %d second(s)" % TIMEOUT in hung["failures"][0]["msg"]
    assert doc["drift"]["dead-1"]["status"] == "error" and doc["drift"]["dead-1"]["unreachable"] is True


def test_preflight_with_a_hanging_nvidia_smi_names_it_and_its_limit(tmp_path):
    # issue 18.3 end to end: hw_facts on this machine (local connection) finds a stand-in
    # nvidia-smi on PATH that never answers; before, the module waited for ever
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexec sleep 120\n")
    smi.chmod(0o755)
    reports = tmp_path / "reports"
    hosts = {"live-1": {"ansible_connection": "local", "ansible_python_interpreter": VENV_PY}}
    old_path = os.environ["PATH"]
    os.environ["PATH"] = str(bindir) + os.pathsep + old_path
    try:
        rc, out, took = _play(tmp_path, "preflight.yml", hosts, "-e", "dlrack_report_dir=%s" % reports,
                              "-e", "dlrack_command_timeout=3")
    finally:
        os.environ["PATH"] = old_path
    assert rc != 0 and took < 60, out[-3000:]
    doc = json.loads((reports / "report.json").read_text())
    gathered = [f["message"] for f in _errors(doc, "live-1") if f["rule"] == "host.gathered"]
    assert gathered == ["host live-1 was not checked: nvidia-smi -q -x did not answer within 3 s and was killed "
                        "(the limit is the hw_facts option command_timeout)"]


def test_site_writes_its_report_when_no_host_can_be_reached_for_provisioning(tmp_path):
    # declared hosts pass the pre-flight without a connection, then cannot be reached: before, the
    # provisioning play lost every host, Ansible ended the run and site.json was never written
    reports = tmp_path / "reports"
    declared = dict(DEAD, dlrack_hw=GOOD, dlrack_external_archive="nfs://archive/raw")
    rc, out, dummy = _play(tmp_path, "site.yml", {"good-01": declared, "good-02": dict(declared)},
                           "-e", "dlrack_report_dir=%s" % reports)
    assert rc != 0, out[-3000:]
    assert set(json.loads((reports / "site.json").read_text())["hosts"]) == {"good-01", "good-02"}
    assert "provisioned: none" in out
    for host in ("good-01", "good-02"):
        assert "%s was not provisioned: unreachable: " % host in out


def test_site_names_an_unreachable_host_with_control_characters_escaped(tmp_path):
    # 18.8 for site.yml's last play: its failure message ("<host> was not provisioned: <why>") is
    # printed by Ansible as it is; a host name with ESC/BEL and a line feed printed raw there
    # forged a console line of its own ("PASS  forged was not provisioned ...")
    reports = tmp_path / "reports"
    host = "gpu\x1bc\x07\nPASS  forged"
    declared = dict(DEAD, dlrack_hw=GOOD, dlrack_external_archive="nfs://archive/raw")
    rc, out, dummy = _play(tmp_path, "site.yml", {host: declared}, "-e", "dlrack_report_dir=%s" % reports)
    assert rc != 0, out[-3000:]
    assert "gpu\\x1bc\\x07\\nPASS  forged was not provisioned: unreachable: " in out, out[-3000:]
    assert not [line for line in out.splitlines() if line.startswith("PASS  forged was not provisioned")], out[-3000:]


def test_drift_names_a_host_with_control_characters_escaped(tmp_path):
    # 18.8 for drift.yml's last task: "<host>: could not be checked (status error); see ..." is a
    # fail message, which Ansible prints as it is (a raw ESC/BEL, a forged "PASS  forged" line)
    reports = tmp_path / "drift"
    host = "dead\x1bc\x07\nPASS  forged"
    rc, out, dummy = _play(tmp_path, "drift.yml", {host: DEAD}, "--check", "--diff", "-e", "dlrack_report_dir=%s" % reports)
    assert rc != 0, out[-3000:]
    # (19.5: the verdict fails once, naming every failing host by why; the name is passed over as
    # a host pattern, so the verdict play runs on localhost)
    assert "Action failed: drift failed for 1 host(s) (dlrack_fail_on=error for the findings): could not be " \
           "checked (status error): dead\\x1bc\\x07\\nPASS  forged;" in out, out[-3000:]
    assert not [line for line in out.splitlines() if line.startswith("PASS  forged;")], out[-3000:]


def test_a_failing_hosts_reason_is_data_never_templated(tmp_path):
    # a compromised node controls its whole module result: its failure message is the reason shown
    marker, evil = _failing_with_a_template(tmp_path)
    reports = tmp_path / "reports"
    hosts = {"evil-1": {"ansible_connection": "local", "ansible_python_interpreter": str(evil)}}
    rc, out, dummy = _play(tmp_path, "preflight.yml", hosts, "-e", "dlrack_report_dir=%s" % reports)
    assert rc != 0 and not marker.exists(), out[-3000:]
    doc = json.loads((reports / "report.json").read_text())
    assert [f["message"] for f in _errors(doc, "evil-1") if f["rule"] == "host.gathered"] == [
        'host evil-1 was not checked: {{ lookup("pipe", "touch %s") }}' % marker]


def test_acceptance_writes_its_report_when_no_host_can_be_measured(tmp_path, hang):
    # before: every host failed or was unreachable at the measuring step, Ansible ended the play
    # before the report task and acceptance.json was never written (exit 2, no report)
    reports = tmp_path / "reports"
    hosts = {"hung-1": dict(hang, dlrack_hw=GOOD), "dead-1": dict(DEAD, dlrack_hw=GOOD)}
    rc, out, took = _play(tmp_path, "acceptance.yml", hosts, "-e", "dlrack_report_dir=%s" % reports)
    assert rc != 0, out[-3000:]
    doc = json.loads((reports / "acceptance.json").read_text())
    assert set(doc["hosts"]) == {"hung-1", "dead-1"}
    for host in ("hung-1", "dead-1"):
        assert doc["hosts"][host]["status"] == "error", doc["hosts"][host]
    [hung] = [m for m in doc["hosts"]["hung-1"]["measurements"] if m["name"] == "host.measured"]
    [dead] = [m for m in doc["hosts"]["dead-1"]["measurements"] if m["name"] == "host.measured"]
    assert hung["verdict"] == "error" and "timed out after 10 second" in hung["reason"].lower(), hung
    assert dead["verdict"] == "error" and "unreachable" in dead["reason"], dead
    assert took < 120, took


def test_an_acceptance_failure_reason_is_data_never_templated(tmp_path):
    # the role records a failed host's message (ansible_failed_result.msg) with set_fact: a node
    # that fails with a template in its message must not run it on the controller
    marker, evil = _failing_with_a_template(tmp_path)
    reports = tmp_path / "reports"
    hosts = {"evil-1": {"ansible_connection": "local", "ansible_python_interpreter": str(evil), "dlrack_hw": GOOD}}
    rc, out, dummy = _play(tmp_path, "acceptance.yml", hosts, "-e", "dlrack_report_dir=%s" % reports)
    assert rc != 0 and not marker.exists(), out[-3000:]
    doc = json.loads((reports / "acceptance.json").read_text())
    [m] = [m for m in doc["hosts"]["evil-1"]["measurements"] if m["name"] == "host.measured"]
    assert m["verdict"] == "error" and '{{ lookup("pipe", "touch %s") }}' % marker in m["reason"], m


def test_an_acceptance_host_whose_module_never_ran_is_named_by_its_stderr_never_templated(tmp_path):
    # no interpreter on the node (pyenv's shim without the version): Ansible's message is only
    # "Module result deserialization failed: No start of json char found"; the reason carries the
    # module's stderr, which names the cause, and a template in it is never run on the controller
    marker = tmp_path / "pwned"
    shim = tmp_path / "python3.13"
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.13: command not found {{ lookup(\"pipe\", \"touch %s\") }}' >&2\n"
                    "exit 127\n" % marker)
    shim.chmod(0o755)
    reports = tmp_path / "reports"
    hosts = {"shim-1": {"ansible_connection": "local", "ansible_python_interpreter": str(shim), "dlrack_hw": GOOD}}
    rc, out, dummy = _play(tmp_path, "acceptance.yml", hosts, "-e", "dlrack_report_dir=%s" % reports)
    assert rc != 0 and not marker.exists(), out[-3000:]
    doc = json.loads((reports / "acceptance.json").read_text())
    [m] = [m for m in doc["hosts"]["shim-1"]["measurements"] if m["name"] == "host.measured"]
    assert m["verdict"] == "error" and "the node printed: pyenv: python3.13: command not found" in m["reason"], m
    assert '{{ lookup("pipe", "touch %s") }}' % marker in m["reason"], m


def _ssh_that_goes_away(tmp_path, name):
    """Connection variables of a host reached through a stand-in ssh client (ansible_ssh_executable):
    its first call - the provisioning play's setup - gets a canned answer, and from then on it
    exits 255 with OpenSSH's connection-refused message, as ssh does when a host goes away (Ansible's
    ssh connection reads exit status 255 as unreachable). Nothing is ever run on this machine."""
    count = tmp_path / ("%s.calls" % name)
    script = tmp_path / ("%s-ssh" % name)
    script.write_text(
        "#!/bin/sh\n"
        "n=$(cat %(count)s 2>/dev/null || echo 0); n=$((n + 1)); echo $n > %(count)s\n"
        "cat > /dev/null\n"
        "if [ $n -le 1 ]; then echo '{\"changed\": false, \"ansible_facts\": {\"ansible_system\": \"Linux\"}}'; exit 0; fi\n"
        "echo 'ssh: connect to host %(name)s port 22: Connection refused' >&2\n"
        "exit 255\n" % {"count": count, "name": name})
    script.chmod(0o755)
    return {"ansible_connection": "ssh", "ansible_host": "%s.invalid" % name, "ansible_ssh_executable": str(script),
            "ansible_python_interpreter": "/usr/bin/python3", "ansible_ssh_retries": 0}, count


def test_site_writes_its_report_when_every_host_goes_away_in_the_middle_of_a_role(tmp_path):
    # 18.4: both hosts pass the pre-flight (declared), answer the provisioning play's setup, then
    # cannot be reached in storage_tiers: before, Ansible ended the playbook after that play (every
    # host of the batch unreachable) and site.json was never written
    reports = tmp_path / "reports"
    hosts = {}
    counts = []
    for name in ("away-01", "away-02"):
        conn, count = _ssh_that_goes_away(tmp_path, name)
        hosts[name] = dict(conn, dlrack_hw=GOOD, dlrack_external_archive="nfs://archive/raw")
        counts.append(count)
    rc, out, took = _play(tmp_path, "site.yml", hosts, "-e", "dlrack_report_dir=%s" % reports)
    assert rc != 0, out[-3000:]
    assert all(int(c.read_text()) >= 2 for c in counts), out[-3000:]      # setup answered, then gone in a role
    assert "UNREACHABLE" in out and "dlrack.node.storage_tiers" in out, out[-3000:]
    site = json.loads((reports / "site.json").read_text())
    assert set(site["hosts"]) == {"away-01", "away-02"}, out[-3000:]
    assert "provisioned: none" in out, out[-3000:]
    assert took < 120, took
