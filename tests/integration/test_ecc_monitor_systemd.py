"""ecc_monitor on a node that systemd does not run (issue 30.7): one sentence saying what the role
needs and what still works, before anything is changed - not Ansible's "Failed to find required
executable systemctl" halfway through. Check mode on this machine, with the role's systemd
marker pointed at a folder that does not exist (so the test does not depend on whether systemd
runs where the tests run)."""
import os
import subprocess

from testpaths import ROOT

VENV_BIN = os.path.join(ROOT, ".venv", "bin")


def test_ecc_monitor_says_it_needs_systemd(tmp_path):
    play = tmp_path / "ecc.yml"
    play.write_text("- hosts: all\n  gather_facts: false\n  roles:\n    - dlrack.node.ecc_monitor\n")
    env = dict(os.environ, PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""), ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(["ansible-playbook", str(play), "-i", "node-1,", "--check", "-e", "ansible_connection=local",
                           "-e", "ansible_python_interpreter=%s" % os.path.join(VENV_BIN, "python"),
                           "-e", "__ecc_monitor_systemd_dir=%s" % (tmp_path / "no-systemd")],
                          cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    out = " ".join(proc.stdout.split())   # the message as one line (the console folds it)
    assert proc.returncode != 0, out[-3000:]
    assert "ecc_monitor needs systemd on node-1: rasdaemon and the collector's timer are systemd units" in out.replace("''", "'")
    assert "Nothing was changed. What still works without it: the pre-flight's memory.ecc_errors rule" in out.replace("''", "'")
    assert "-e dlrack_ecc=false or --skip-tags ecc" in out
    assert "systemctl" not in out
    # it stopped before deciding or installing anything
    assert "Find which of rasdaemon and the EDAC tools are missing" not in out and "changed=0" in out
