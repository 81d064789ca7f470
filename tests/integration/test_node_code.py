"""dlrack.node.node_code through ansible-playbook (the action reads the files on the controller, the
module installs them): check -> apply -> idempotent -> idempotent check, with --diff, on this
machine's localhost into a scratch lib dir."""
import json
import os
import subprocess

import pytest

from testpaths import ROOT  # noqa: E402  (tests/ is on sys.path: conftest)

VENV_BIN = os.path.join(ROOT, ".venv", "bin")
FILES = ["hw/cpulist.py", "hw/parsers/__init__.py", "hw/parsers/nvidia_smi.py", "system/command.py"]
PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Install node code
      dlrack.node.node_code:
        files: %s
        lib_dir: "{{ lib }}"
      register: shipped
    - name: Record
      ansible.builtin.copy:
        content: "{{ shipped | to_json }}"
        dest: "{{ out }}"
      check_mode: false
"""


def _run(tmp_path, *extra):
    play = tmp_path / "play.yml"
    play.write_text(PLAY % json.dumps(FILES))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"))
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", str(play),
            "-e", "ansible_python_interpreter=%s" % os.path.join(VENV_BIN, "python"),
            "-e", "lib=%s" % (tmp_path / "lib"), "-e", "out=%s" % (tmp_path / "result.json")] + list(extra)
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=300,
                          check=False, universal_newlines=True)
    assert proc.returncode == 0, proc.stdout[-4000:]
    return json.loads((tmp_path / "result.json").read_text()), proc.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="node_code installs files owned by root")
def test_check_apply_idempotent_idempotent_check(tmp_path):
    lib = tmp_path / "lib"
    result, out = _run(tmp_path, "--check", "--diff")
    assert result["changed"] and sorted(result["updated"]) == sorted(FILES)
    assert "hw/parsers/nvidia_smi.py sha256:" in out and not lib.exists()     # check mode wrote nothing
    result, dummy = _run(tmp_path)
    assert result["changed"] and sorted(result["updated"]) == sorted(FILES)
    pkg = lib / "ansible_collections" / "dlrack" / "node" / "plugins" / "module_utils"
    for rel in FILES:
        assert (pkg / rel).read_bytes() == open(os.path.join(ROOT, "plugins", "module_utils", rel), "rb").read()
    result, dummy = _run(tmp_path)
    assert not result["changed"] and result["updated"] == [] and result["directories"] == []
    result, dummy = _run(tmp_path, "--check", "--diff")
    assert not result["changed"]
