"""site.yml's fleet report carries every host's final state (issue 30.1): a host that passed the
pre-flight and then failed provisioning is never `pass` in site.json, site.xml or site.html; the
report says where it failed (role and task), that a host was unreachable, or that it was not
provisioned because it failed the pre-flight.

Local connection, --tags limited to the always-tagged tasks (the roles' argument checks among
them), so nothing on this machine is changed: good-1 fails in storage_tiers' argument check (a
variable that is no boolean), good-2 is provisioned (with no tag selected: nothing to change),
bad-1 fails the pre-flight, dead-1 cannot be reached (ssh to a closed port)."""
import json
import os
import subprocess
import xml.etree.ElementTree as ET

import yaml
from testpaths import ROOT

VENV_BIN = os.path.join(ROOT, ".venv", "bin")


def _inventory(tmp_path):
    ex = os.path.join(ROOT, "inventories", "example")
    with open(os.path.join(ex, "group_vars", "rack_a.yml")) as fh:
        good = yaml.safe_load(fh)["dlrack_hw"]
    with open(os.path.join(ex, "host_vars", "gpu-b01.yml")) as fh:
        bad = yaml.safe_load(fh)["dlrack_hw"]
    local = {"ansible_connection": "local", "ansible_python_interpreter": os.path.join(VENV_BIN, "python")}
    hosts = {"bad-1": dict(local, dlrack_hw=bad),
             "good-1": dict(local, dlrack_hw=good, storage_tiers_safe_mode="sometimes"),
             "good-2": dict(local, dlrack_hw=good),
             "dead-1": {"dlrack_hw": good, "ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_user": "nobody",
                        "ansible_ssh_common_args": "-o ConnectTimeout=5 -o BatchMode=yes"}}
    inv = tmp_path / "inv.json"
    inv.write_text(json.dumps({"all": {"hosts": hosts}}))
    return str(inv)


def test_site_report_says_how_each_host_ended(tmp_path):
    env = dict(os.environ, PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""), ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), ANSIBLE_NOCOLOR="1", ANSIBLE_RUN_TAGS="dlrack_none")
    out = tmp_path / "r"
    proc = subprocess.run(["ansible-playbook", os.path.join(ROOT, "playbooks", "site.yml"), "-i", _inventory(tmp_path),
                           "-e", "dlrack_report_dir=%s" % out, "-e", "dlrack_become=false"],
                          cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=600, check=False)
    log = proc.stdout
    assert proc.returncode != 0, log[-3000:]
    site = json.loads((out / "site.json").read_text())
    hosts = site["hosts"]
    assert {h: v["status"] for h, v in hosts.items()} == {"bad-1": "fail", "good-1": "fail", "good-2": "pass", "dead-1": "fail"}, log[-3000:]
    states = {h: [f for f in v["findings"] if f["rule"] == "site.provisioned"] for h, v in hosts.items()}
    assert all(len(found) == 1 for found in states.values()), states
    good1 = states["good-1"][0]
    assert good1["severity"] == "error"
    assert good1["message"].startswith("host good-1: not provisioned: failed in role storage_tiers at task 'Validating arguments")
    assert "storage_tiers_safe_mode" in good1["message"]
    assert states["dead-1"][0]["severity"] == "error" and "not provisioned: unreachable" in states["dead-1"][0]["message"]
    assert states["bad-1"][0]["severity"] == "info" and "failed the pre-flight" in states["bad-1"][0]["message"]
    assert hosts["bad-1"]["rules"]["site.provisioned"] == "skip"
    assert states["good-2"][0]["message"] == "host good-2: provisioned" and hosts["good-2"]["rules"]["site.provisioned"] == "pass"
    # site.xml: a failing case for each host that failed provisioning, a passing one for good-2
    root = ET.parse(str(out / "site.xml")).getroot()
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    assert cases[("good-1.preflight", "site.provisioned")].find("failure") is not None
    assert cases[("dead-1.preflight", "site.provisioned")].find("failure") is not None
    assert cases[("bad-1.preflight", "site.provisioned")].find("skipped") is not None
    case = cases[("good-2.preflight", "site.provisioned")]
    assert case.find("failure") is None and case.find("skipped") is None and case.find("error") is None
    # site.html: good-1's row is no passing row, and its finding names the role and the task
    html = (out / "site.html").read_text()
    row = html[html.index('<tr data-host="good-1">'):]
    row = row[:row.index("</tr>")]
    assert 'badge fail' in row and 'badge pass' not in row
    assert "failed in role storage_tiers at task &#39;Validating arguments" in html
    # the console summary of the fleet report says it too
    assert "FAIL  good-1" in log and "not provisioned: failed in role storage_tiers" in log
