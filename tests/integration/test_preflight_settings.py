"""playbooks/preflight.yml calls the preflight_report action itself in its first play (so that the
plugin is loaded first): its options follow the role's chain - the role option when given
(preflight_*), else the run-wide dlrack_* variable, else the role's default. Checked on the example
fleet (5 of 9 hosts fail with errors, 1 more warns) through the exit code and report.json."""
import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("extra, rc, failed", [
    ([], 2, 5),                                                           # defaults: fail_on error
    (["dlrack_fail_on=never"], 0, 0),                                     # the run-wide variable
    (["dlrack_fail_on=warning"], 2, 6),                                   # the warning host fails too
    (["preflight_fail_on=never", "dlrack_fail_on=warning"], 0, 0),        # the role option wins
    (["preflight_fail_on=warning", "dlrack_fail_on=never"], 2, 6),
])
def test_first_play_follows_the_roles_option_chain(tmp_path, extra, rc, failed):
    reports = tmp_path / "reports"
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), os.path.join(ROOT, "playbooks", "preflight.yml"),
            "-i", os.path.join(ROOT, "inventories", "example"), "-e", "dlrack_report_dir=%s" % reports]
    for e in extra:
        argv += ["-e", e]
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    assert proc.returncode == rc, proc.stdout[-3000:]
    doc = json.loads((reports / "report.json").read_text())
    assert doc["summary"]["fail"] == 5 and doc["summary"]["warn"] == 1
    if failed:
        assert "pre-flight failed for %d host(s)" % failed in proc.stdout
    else:
        assert "pre-flight failed" not in proc.stdout
