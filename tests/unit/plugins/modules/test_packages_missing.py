"""Run packages_missing as Ansible would, with stand-in dpkg-query / rpm executables on PATH that
replay real captured outputs (tests/data/packages): check mode reports "would install" and
changed; outside check mode nothing changes and the missing list is returned."""
import json
import os
import stat
import subprocess
import sys

from testpaths import ROOT, module_pythonpath  # noqa: E402  (tests/ is on sys.path: conftest)

MODULE = os.path.join(ROOT, "plugins", "modules", "packages_missing.py")
DATA = os.path.join(ROOT, "tests", "data", "packages")

# The stand-in answers like the real tool for the names captured (NAME.out: installed, rc 0;
# NAME.missing: not installed, rc 1); every other name is unknown to it.
FAKE = """#!/bin/sh
for last; do :; done
name=${last%%:*}
if [ -f "%(data)s/%(tool)s.$name.out" ]; then /bin/cat "%(data)s/%(tool)s.$name.out"; exit 0; fi
if [ -f "%(data)s/%(tool)s.$name.missing" ]; then /bin/cat "%(data)s/%(tool)s.$name.missing"; exit 1; fi
%(unknown)s
exit 1
"""


def _bin(tmp_path, tool, unknown):
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    p = d / tool
    p.write_text(FAKE % {"data": DATA, "tool": tool.split("-")[0] if tool == "rpm" else tool, "unknown": unknown})
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(d)


def run_module(tmp_path, path, **args):
    argfile = tmp_path / "args.json"
    argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=module_pythonpath(), PATH=path)   # the collection and ansible-core, both layouts
    proc = subprocess.run([sys.executable, MODULE, str(argfile)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env, timeout=120, check=False)
    assert proc.stdout, proc.stderr.decode()
    return json.loads(proc.stdout.decode())


def test_dpkg_check_mode_would_install(tmp_path):
    path = _bin(tmp_path, "dpkg-query", 'echo "dpkg-query: no packages found matching $last" >&2')
    (tmp_path / "bin" / "apt-get").write_text("#!/bin/sh\nexit 99\n")   # present, never run
    (tmp_path / "bin" / "apt-get").chmod(0o755)
    res = run_module(tmp_path, path, name=["mdadm", "rasdaemon", "libc6:amd64"], manager="auto",
                     _ansible_check_mode=True, _ansible_diff=True)
    assert res["manager"] == "dpkg" and res["changed"] is True, res
    assert res["missing"] == ["rasdaemon"] and res["present"] == ["mdadm", "libc6:amd64"] and res["install"] == []
    assert res["msg"] == "would install: rasdaemon"
    assert res["diff"]["after"] == "install rasdaemon\n"


def test_dpkg_outside_check_mode_reports_only(tmp_path):
    path = _bin(tmp_path, "dpkg-query", 'echo "dpkg-query: no packages found matching $last" >&2')
    res = run_module(tmp_path, path, name=["rasdaemon"], manager="dpkg")
    assert res["changed"] is False and res["missing"] == res["install"] == ["rasdaemon"] and res["msg"] == "missing: rasdaemon"
    res = run_module(tmp_path, path, name=["mdadm"], manager="dpkg", _ansible_check_mode=True)
    assert res["changed"] is False and res["missing"] == []


def test_rpm(tmp_path):
    path = _bin(tmp_path, "rpm", 'echo "no package provides $last"')
    res = run_module(tmp_path, path, name=["dlrack-probe", "numactl"], _ansible_check_mode=True)
    assert res["manager"] == "rpm" and res["missing"] == ["numactl"] and res["msg"] == "would install: numactl"


def test_no_package_database_is_a_clear_failure(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run_module(tmp_path, str(empty), name=["numactl"])
    assert res["failed"] is True and "dpkg-query nor rpm" in res["msg"]
