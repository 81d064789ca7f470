"""playbooks/declare.yml round trip on this machine (issue 11.3): gather localhost -> write its
declaration as a host_vars file -> preflight.yml with dlrack_gather=true ->
inventory.matches_declared passes. Real ansible-playbook runs, connection=local."""
import json
import os
import subprocess

import pytest
from ansible.parsing.dataloader import DataLoader

from realhost import h200_vm

from testpaths import ROOT  # noqa: E402  (tests/ is on sys.path: conftest)
VENV_BIN = os.path.join(ROOT, ".venv", "bin")


def read_declaration(path):
    """The declaration file as Ansible's inventory reads it (its strings are tagged !unsafe)."""
    return DataLoader().load_from_file(str(path), cache="none")["dlrack_hw"]


def playbook(name, inventory, *extra, check=False):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), ANSIBLE_NOCOLOR="1",
               PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", str(inventory),
            os.path.join(ROOT, "playbooks", name), "-e", "dlrack_become=false"]
    for item in extra:
        argv += ["-e", item]
    if check:
        argv.append("--check")
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                          timeout=600, check=False, universal_newlines=True)


@pytest.fixture
def inventory(tmp_path):
    inv = tmp_path / "inventory"
    inv.mkdir()
    (inv / "hosts.ini").write_text("[rack]\nlocalhost ansible_connection=local ansible_python_interpreter=%s\n"
                                   % os.path.join(VENV_BIN, "python"))
    return inv


def test_check_mode_writes_nothing(inventory):
    run = playbook("declare.yml", inventory / "hosts.ini", check=True)
    assert run.returncode == 0, run.stdout
    assert not (inventory / "host_vars").exists()


def test_declaration_file_and_no_overwrite(inventory):
    run = playbook("declare.yml", inventory / "hosts.ini")
    assert run.returncode == 0, run.stdout
    path = inventory / "host_vars" / "localhost" / "dlrack_hw.yml"
    doc = read_declaration(path)
    assert doc["source"] == "declared" and doc["schema"] == 1
    assert "uptime_s" not in doc and "errors" not in doc and "hostname" not in (doc.get("host") or {})
    assert doc["cpu"]["cores"] >= 1 and doc["memory"]["total_mb"] > 0
    path.write_text("---\n# reviewed by hand\ndlrack_hw: {schema: 1, source: declared}\n")
    run = playbook("declare.yml", inventory / "hosts.ini")
    assert run.returncode == 0, run.stdout
    assert "reviewed by hand" in path.read_text()          # kept without dlrack_declare_overwrite
    run = playbook("declare.yml", inventory / "hosts.ini", "dlrack_declare_overwrite=true")
    assert run.returncode == 0 and "reviewed by hand" not in path.read_text()


def test_round_trip_preflight_matches_declared(inventory, tmp_path):
    assert playbook("declare.yml", inventory / "hosts.ini").returncode == 0
    reports = tmp_path / "reports"
    run = playbook("preflight.yml", inventory / "hosts.ini", "dlrack_gather=true", "preflight_become=false",
                   "dlrack_fail_on=never", "dlrack_report_dir=%s" % reports)
    assert run.returncode == 0, run.stdout
    host = json.loads((reports / "report.json").read_text())["hosts"]["localhost"]
    matches = [f for f in host["findings"] if f["rule"] == "inventory.matches_declared"]
    assert host["rules"]["inventory.matches_declared"] == "pass", matches
    assert matches[0]["message"] == "gathered hardware matches the declaration"


def test_declaration_of_a_captured_host(inventory, tmp_path):
    """dlrack_hw_root: the h200-vm capture (its stand-in nvidia-smi under the tree) declared."""
    root, _bin = h200_vm(tmp_path / "h200")
    out = tmp_path / "declared"
    run = playbook("declare.yml", inventory / "hosts.ini", "dlrack_hw_root=%s" % root, "dlrack_declare_dir=%s" % out)
    assert run.returncode == 0, run.stdout
    doc = read_declaration(out / "localhost" / "dlrack_hw.yml")
    (gpu,) = doc["gpus"]
    assert (gpu["model"], gpu["memory_mb"], gpu["pci_bus_id"], gpu["ecc_enabled"]) == ("NVIDIA H200", 143771, "0000:00:06.0", True)
    assert "uuid" not in gpu and "serial" not in gpu and "gen" not in gpu["pcie"]
    assert (doc["cpu"]["cores"], doc["memory"]["total_mb"]) == (16, 128887)
    assert [d["name"] for d in doc["disks"]] == ["vda", "vdb"] and "serial" not in doc["disks"][0]
