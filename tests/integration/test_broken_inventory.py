"""Fail closed on a broken inventory (issue 18.5), as a user of the installed collection runs the
entry points: real ansible-playbook runs from a directory without the repository's ansible.cfg
(ANSIBLE_CONFIG unset), so unparsed_is_failed / any_unparsed_is_failed are Ansible's defaults
(off). Before, `-i` pointing at nothing and an inventory directory with one unparsable file (1 of
3 hosts kept) both exited 0 with a green report."""
import json
import os
import subprocess

import pytest

from hwdocs import GOOD

from testpaths import ROOT  # noqa: E402  (tests/ is on sys.path: conftest)


def _play(tmp_path, playbook, inventory, *extra):
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_"))
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), ANSIBLE_NOCOLOR="1",
               PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ.get("PATH", ""))
    cmd = ["ansible-playbook", os.path.join(ROOT, "playbooks", playbook), "-i", str(inventory),
           "-e", "dlrack_report_dir=%s" % (tmp_path / "reports"), "-e", "dlrack_become=false"] + list(extra)
    proc = subprocess.run(cmd, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                          timeout=300, check=False)
    return proc.returncode, proc.stdout.decode(errors="replace")


def _partly_parsed(tmp_path):
    inv = tmp_path / "inventory"
    inv.mkdir()
    (inv / "a.yml").write_text(json.dumps({"all": {"hosts": {"gpu-01": {
        "dlrack_hw": GOOD, "dlrack_external_archive": "nfs://archive/raw"}}}}))
    (inv / "b.ini").write_text("[gpu\ngpu-02\ngpu-03\n")      # one bracket typo: 1 of 3 hosts kept
    return inv


@pytest.mark.parametrize("playbook, extra", [("preflight.yml", []), ("drift.yml", ["--check", "--diff"]),
                                             ("acceptance.yml", []), ("site.yml", ["--check"])])
def test_missing_inventory_fails_naming_it(tmp_path, playbook, extra):
    rc, out = _play(tmp_path, playbook, tmp_path / "no-such-inventory", *extra)
    assert rc != 0, out[-3000:]
    assert "inventory source %s does not exist" % (tmp_path / "no-such-inventory") in out
    assert not (tmp_path / "reports").exists()


def test_partly_parsed_inventory_fails_naming_the_file(tmp_path):
    rc, out = _play(tmp_path, "preflight.yml", _partly_parsed(tmp_path))
    assert rc != 0, out[-3000:]
    assert "inventory source %s could not be parsed" % (tmp_path / "inventory" / "b.ini") in out
    assert not (tmp_path / "reports").exists()      # no green report for a fleet nobody checked


def test_whole_inventory_still_runs(tmp_path):
    inv = _partly_parsed(tmp_path)
    (inv / "b.ini").write_text("[gpu]\n")
    rc, out = _play(tmp_path, "preflight.yml", inv)
    assert rc == 0, out[-3000:]
    assert json.loads((tmp_path / "reports" / "report.json").read_text())["summary"]["pass"] == 1
