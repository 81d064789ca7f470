"""Run acceptance_measure as Ansible would (args file, JSON on stdout): check mode measures and
writes nothing; a real run measures a directory with fio (when installed) and leaves nothing."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from testpaths import ROOT, module_pythonpath  # noqa: E402  (tests/ is on sys.path: conftest)

MODULE = os.path.join(ROOT, "plugins", "modules", "acceptance_measure.py")


def run_module(tmp_path, **args):
    argfile = tmp_path / "args.json"
    argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=module_pythonpath())   # the collection and ansible-core, both layouts
    proc = subprocess.run([sys.executable, MODULE, str(argfile)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env, timeout=300, check=False)
    assert proc.stdout, proc.stderr.decode()
    return json.loads(proc.stdout.decode())


def test_check_mode_measures_nothing(tmp_path):
    hot = tmp_path / "hot"
    hot.mkdir()
    res = run_module(tmp_path, _ansible_check_mode=True, hot_path=str(hot), cold_path="", require_mount=False)
    assert res["changed"] is False and not res.get("failed"), res
    doc = res["acceptance"]
    assert doc["check_mode"] is True
    for part in ("gpu", "health", "dcgm", "memory"):
        assert doc[part]["status"] == "skip" and doc[part]["reason"], part
    assert doc["memory"]["reason"].startswith("check mode: would measure")
    hot_plan = doc["storage"]["hot"]
    assert hot_plan["status"] == "skip"
    assert hot_plan["reason"].startswith("check mode: would measure %s with fio" % hot) or "fio is not installed" in hot_plan["reason"]
    assert doc["storage"]["cold"]["reason"] == "no path set for this tier"
    assert os.listdir(str(hot)) == []


def test_bad_arguments_fail_clearly(tmp_path):
    res = run_module(tmp_path, fio_jobs=0)
    assert res["failed"] and "must be positive: fio_jobs=0" in res["msg"]


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed here")
def test_real_run_on_a_directory_leaves_nothing(tmp_path):
    hot = tmp_path / "hot"
    hot.mkdir()
    res = run_module(tmp_path, hot_path=str(hot), require_mount=False, fio_size_mb=16, fio_runtime_s=1, fio_jobs=1,
                     memory_bytes=1 << 23, memory_iterations=2, dcgm=False)
    doc = res["acceptance"]
    assert res["changed"] is False and doc["check_mode"] is False
    assert doc["storage"]["hot"]["status"] == "ok" and doc["storage"]["hot"]["read"]["bytes_per_s"] > 0
    assert doc["memory"]["status"] == "ok" and doc["memory"]["nodes"]
    assert doc["gpu"]["status"] in ("skip", "ok", "error")
    assert os.listdir(str(hot)) == []
