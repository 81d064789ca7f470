"""roles/ecc_monitor ships the collector as the files listed in its vars (__ecc_monitor_module_utils):
those files alone, laid out as on the node, must import and run the collector (no Ansible, no other
module_utils), on the captured H200 host."""
import os
import shutil
import subprocess
import sys

import yaml

from realhost import ROOT, h200_vm

VARS = os.path.join(ROOT, "roles", "ecc_monitor", "vars", "main.yml")
MODULE_UTILS = os.path.join(ROOT, "plugins", "module_utils")


def test_shipped_files_are_self_contained(tmp_path):
    files = yaml.safe_load(open(VARS))["__ecc_monitor_module_utils"]
    pkg = tmp_path / "lib" / "ansible_collections" / "dlrack" / "node" / "plugins" / "module_utils"
    for rel in files:
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(MODULE_UTILS, rel), str(pkg / rel))
    root, bin_dir = h200_vm(tmp_path / "host")
    out = tmp_path / "textfile"
    out.mkdir()
    # as the role's dlrack-ecc-collector script does: the lib dir first on sys.path
    code = ("import sys; sys.path.insert(0, %r); "
            "from ansible_collections.dlrack.node.plugins.module_utils.ecc import metrics as ecc_metrics; "
            "assert ecc_metrics.__file__.startswith(%r), ecc_metrics.__file__; "
            "sys.exit(ecc_metrics.main(sys.argv[1:]))" % (str(tmp_path / "lib"), str(tmp_path / "lib")))
    env = {"PATH": bin_dir + os.pathsep + "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-I", "-c", code, "--root", root, "--textfile-dir", str(out),
                           "--nvidia-smi", os.path.join(bin_dir, "nvidia-smi")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=60, check=False,
                          universal_newlines=True)
    assert proc.returncode == 0, proc.stderr
    (name,) = os.listdir(str(out))
    text = (out / name).read_text()
    assert 'dlrack_gpu_ecc_enabled{gpu="0",uuid="GPU-84ef4d21-7100-fb54-14a3-d165c2f55af7"} 1' in text
