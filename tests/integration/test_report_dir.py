"""The report settings through the real playbook: an empty or unusable dlrack_report_dir stops the
run with a message naming it (after the per-host summary is printed), and dlrack_junit_warnings
reaches report.xml."""
import json
import os
import subprocess
import xml.etree.ElementTree as ET

from hwdocs import GATHERED, GOOD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _inventory(tmp_path):
    inv = {"all": {"hosts": {"good-01": {"dlrack_hw": GOOD, "dlrack_external_archive": "nfs://archive/raw"},
                             "live-01": {"dlrack_hw": dict(GATHERED, source="declared")}}}}
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(inv))   # JSON is YAML: the inventory plugin reads it
    return str(path)


def _play(tmp_path, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"),
               PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ.get("PATH", ""))
    cmd = ["ansible-playbook", os.path.join(ROOT, "playbooks", "preflight.yml"), "-i", _inventory(tmp_path)] + list(extra)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=300, check=False)
    return proc.returncode, proc.stdout.decode(errors="replace")


def test_empty_report_dir_is_an_error(tmp_path):
    rc, out = _play(tmp_path, "-e", "dlrack_report_dir=")
    assert rc != 0 and "dlrack_report_dir is empty" in out, out[-3000:]


def test_report_dir_that_is_a_file_fails_naming_it_after_the_summary(tmp_path):
    afile = tmp_path / "not-a-dir"
    afile.write_text("keep me")
    rc, out = _play(tmp_path, "-e", "dlrack_report_dir=%s" % afile, "-e", "dlrack_fail_on=never")
    assert rc != 0, out[-3000:]
    assert "dlrack.node preflight: 2 host(s)" in out                  # the verdicts are still printed
    assert str(afile) in out and "dlrack_report_dir" in out
    assert out.index("dlrack.node preflight: 2 host(s)") < out.index("is not a directory")
    assert afile.read_text() == "keep me"


def test_junit_warnings_setting_reaches_the_report(tmp_path):
    reports = tmp_path / "reports"
    rc, out = _play(tmp_path, "-e", "dlrack_report_dir=%s" % reports, "-e", "dlrack_fail_on=never",
                    "-e", "dlrack_junit_warnings=failed")
    assert rc == 0, out[-3000:]
    root = ET.parse(str(reports / "report.xml")).getroot()
    kinds = {f.get("type") for f in root.iter("failure")}
    assert "warning" in kinds                                         # live-01 has warnings
    doc = json.loads((reports / "report.json").read_text())
    warnings = sum(1 for v in doc["hosts"].values() for f in v["findings"] if f["severity"] == "warning")
    errors = sum(1 for v in doc["hosts"].values() for f in v["findings"] if f["severity"] == "error")
    assert int(root.get("failures")) == warnings + errors
