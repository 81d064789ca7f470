"""Run the hw_facts module as Ansible would (args file, JSON on stdout) against captured trees."""
import json
import os
import subprocess
import sys
import time

from testpaths import ROOT, module_pythonpath, sysfs_tree

MODULE = os.path.join(ROOT, "plugins", "modules", "hw_facts.py")


def run_module(tmp_path, **args):
    argfile = tmp_path / "args.json"
    argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=module_pythonpath())
    proc = subprocess.run([sys.executable, MODULE, str(argfile)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env, timeout=120, check=False)
    assert proc.stdout, proc.stderr.decode()
    return json.loads(proc.stdout.decode())


def test_captured_tree(tmp_path):
    res = run_module(tmp_path, root=sysfs_tree("esc8000a-e12"), nvidia_smi="never",
                     dmidecode="never")
    assert res.get("failed") is not True, res
    assert res["changed"] is False
    hw = res["dlrack_hw"]
    assert res["ansible_facts"] == {"dlrack_hw_gathered": hw}
    assert "dlrack_hw" not in res["ansible_facts"]
    assert (hw["cpu"]["sockets"], hw["cpu"]["cores"]) == (2, 64)
    assert len(hw["gpus"]) == 4 and len(hw["disks"]) == 17
    assert hw["memory"]["total_mb"] == 386606


def test_subset_and_check_mode(tmp_path):
    res = run_module(tmp_path, root=sysfs_tree("esc8000a-e12"), gather_subset=["disks"],
                     _ansible_check_mode=True)
    assert res["changed"] is False
    assert res["dlrack_hw"]["cpu"] is None and len(res["dlrack_hw"]["disks"]) == 17


def test_bad_subset_is_a_clear_failure(tmp_path):
    res = run_module(tmp_path, gather_subset=["gpu"])
    assert res["failed"] is True and "gather_subset" in res["msg"]


def test_this_machine(tmp_path):
    res = run_module(tmp_path)
    assert res.get("failed") is not True, res
    assert isinstance(res["dlrack_hw"]["gpus"], list)


def _stand_in(tmp_path, body):
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_hanging_nvidia_smi_fails_the_host_in_bounded_time(tmp_path):
    # issue 18.3: module.run_command without a timeout waited for ever on this stand-in
    smi = _stand_in(tmp_path, "sleep 600\n")
    started = time.monotonic()
    res = run_module(tmp_path, root=sysfs_tree("esc8000a-e12"), nvidia_smi=smi, dmidecode="never",
                     command_timeout=2)
    assert time.monotonic() - started < 2 + 10
    assert res["failed"] is True
    assert res["msg"] == ("nvidia-smi -q -x did not answer within 2 s and was killed "
                          "(the limit is the hw_facts option command_timeout)")
    assert "ansible_facts" not in res and len(res["dlrack_hw"]["gpus"]) == 4


def test_300_mb_of_nvidia_smi_output_fails_the_host(tmp_path):
    smi = _stand_in(tmp_path, "head -c 314572800 /dev/zero | tr '\\0' '<'\n")
    res = run_module(tmp_path, root=sysfs_tree("esc8000a-e12"), nvidia_smi=smi, dmidecode="never",
                     command_output_limit=65536)
    assert res["failed"] is True
    assert res["msg"] == ("nvidia-smi -q -x printed more than 64 KiB on stdout and was stopped "
                          "(the limit is the hw_facts option command_output_limit)")


def test_absurd_limits_are_refused(tmp_path):
    res = run_module(tmp_path, root=sysfs_tree("esc8000a-e12"), command_timeout=0)
    assert res["failed"] is True and "command_timeout must be at least 1" in res["msg"]


def test_amd_smi_never_skips_every_amd_tool(tmp_path):
    # a node whose ROCm tools hang (a wedged amdgpu driver): command_timeout fails the host, and
    # amd_smi: never is the way to still describe its GPUs (from sysfs), as nvidia_smi: never is
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "dlrack_amd_trees_module", os.path.join(ROOT, "tests", "data", "amd", "build_trees.py"))
    trees = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trees)
    root = trees.mi300x(str(tmp_path / "trees"))
    tool = os.path.join(root, "usr", "bin", "rocm-smi")
    os.makedirs(os.path.dirname(tool))
    with open(tool, "w") as fh:
        fh.write("#!/bin/sh\nsleep 600\n")
    os.chmod(tool, 0o755)
    started = time.monotonic()
    res = run_module(tmp_path, root=root, gather_subset=["gpus"], command_timeout=2)
    assert time.monotonic() - started < 2 + 10
    assert res["failed"] is True and res["msg"].startswith("rocm-smi --showproductname --showbus")
    res = run_module(tmp_path, root=root, gather_subset=["gpus"], command_timeout=2, amd_smi="never")
    assert res.get("failed") is not True, res
    gpus = res["dlrack_hw"]["gpus"]
    assert len(gpus) == 8 and all(g["vendor"] == "amd" and g["memory_mb"] == 196608 for g in gpus)
    assert res["dlrack_hw"]["errors"] == []
