"""The AWX / Automation Platform execution environment definition is valid: ansible-builder
renders its build context (nothing is built or pulled: no registry is reachable here)."""
import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_ansible_builder_create(tmp_path):
    for name in ("execution-environment.yml", "bindep.txt"):
        shutil.copy(os.path.join(ROOT, name), str(tmp_path))
    proc = subprocess.run([os.path.join(ROOT, ".venv", "bin", "ansible-builder"), "create",
                           "-f", "execution-environment.yml", "-c", "context"],
                          cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout
    containerfile = (tmp_path / "context" / "Containerfile").read_text()
    assert 'ANSIBLE_INSTALL_REFS="ansible-core==2.19.14 ansible-runner==2.4.3"' in containerfile
    assert "install-from-bindep" in containerfile
    bindep = (tmp_path / "context" / "_build" / "bindep.txt").read_text()
    for pkg in ("nvme-cli", "pciutils", "dmidecode", "mdadm", "numactl"):
        assert pkg in bindep
