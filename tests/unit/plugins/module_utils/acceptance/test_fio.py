"""fio on a scratch file: argv bounds, JSON parsing (a real fio 3.33 document), the skip reasons,
the O_DIRECT fallback, and that nothing is left behind on success, failure or timeout."""
import errno
import os
import shutil

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.acceptance import fio as af
from conftest import DATA

FIO_JSON = os.path.join(DATA, "acceptance", "fio-3.33-read.json")


def _left(path):
    return sorted(n for n in os.listdir(str(path)) if n.startswith(af.SCRATCH_PREFIX))


def test_argv_is_bounded_and_targets_only_the_scratch_file(tmp_path):
    argv = af.fio_argv("/usr/bin/fio", str(tmp_path / "x.fio"), "write", 1024, 10, 1024, 32, 4, True)
    assert "--filename=%s" % (tmp_path / "x.fio") in argv
    assert {"--size=256M", "--offset_increment=256M", "--numjobs=4", "--runtime=10", "--time_based",
            "--direct=1", "--end_fsync=1", "--output-format=json"} <= set(argv)
    assert not [a for a in argv if a.startswith("--filename=/dev/")]
    assert "--end_fsync=1" not in af.fio_argv("fio", "f", "read", 64, 2, 1024, 1, 2, False)


def test_parse_real_fio_json_with_a_warning_before_it():
    text = "fio: some warning printed first\n" + open(FIO_JSON).read()
    fig = af.parse_fio_json(text, "read")
    assert fig["fio_version"] == "fio-3.33"
    assert fig["bytes_per_s"] > 0 and fig["io_bytes"] > 0 and fig["runtime_ms"] > 0
    with pytest.raises(af.FioError, match="no JSON"):
        af.parse_fio_json("fio: engine libaio not loadable", "read")
    with pytest.raises(af.FioError, match="job error 22"):
        af.parse_fio_json('{"jobs": [{"error": 22, "read": {}}]}', "read")


def test_skip_reasons(tmp_path):
    assert "no path set" in af.check_target("", 64)
    assert "does not exist" in af.check_target(str(tmp_path / "missing"), 64)
    assert "is not a mount point" in af.check_target(str(tmp_path), 64, require_mount=True)
    assert af.check_target(str(tmp_path), 64, require_mount=False) is None
    assert "MiB free" in af.check_target(str(tmp_path), 1 << 40, require_mount=False)
    doc = af.measure_path(str(tmp_path), None, None, 64, 1, require_mount=False)
    assert doc["status"] == "skip" and "fio is not installed" in doc["reason"]


def test_failure_and_timeout_leave_no_scratch_file(tmp_path):
    calls = []

    def run(argv, timeout):
        calls.append((argv, timeout))
        scratch = [a.split("=", 1)[1] for a in argv if a.startswith("--filename=")][0]
        open(scratch, "w").close()  # fio lays the file out, then fails
        return 124, "", "fio timed out after %d s" % timeout
    doc = af.measure_path(str(tmp_path), "/usr/bin/fio", run, 64, 2, require_mount=False)
    assert doc["status"] == "error" and "exited 124" in doc["reason"]
    assert calls[0][1] == 2 + af.LAYOUT_ALLOWANCE_S
    assert _left(tmp_path) == []


def test_no_libaio_falls_back_to_psync(tmp_path):
    seen = []

    def run(argv, timeout):
        seen.append([a for a in argv if a.startswith("--ioengine=")][0])
        if "--ioengine=libaio" in argv:
            return 1, "", "fio: engine libaio not loadable"
        rw = [a for a in argv if a.startswith("--rw=")][0][5:]
        return 0, '{"fio version": "fio-3.1", "jobs": [{"error": 0, "%s": {"bw_bytes": 2000000000}}]}' % rw, ""
    doc = af.measure_path(str(tmp_path), "fio", run, 64, 1, require_mount=False)
    assert doc["status"] == "ok" and doc["read"]["ioengine"] == "psync" and doc["write"]["bytes_per_s"] == 2000000000
    assert seen == ["--ioengine=libaio", "--ioengine=psync", "--ioengine=psync"]  # remembered for the read phase


def test_o_direct_refused_means_buffered(tmp_path, monkeypatch):
    real_open = os.open

    def no_direct(path, flags, mode=0o777):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, mode)
    monkeypatch.setattr(af.os, "open", no_direct)
    assert af.direct_io_supported(str(tmp_path / "probe")) is False


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed here")
def test_real_fio_on_a_directory(tmp_path):
    doc = af.measure_path(str(tmp_path), shutil.which("fio"), _run, size_mb=32, runtime_s=1, jobs=2, require_mount=False)
    assert doc["status"] == "ok", doc
    assert doc["read"]["bytes_per_s"] > 0 and doc["write"]["bytes_per_s"] > 0
    assert doc["write"]["jobs"] == 2 and doc["direct"] in (True, False)
    assert os.listdir(str(tmp_path)) == []


def _run(argv, timeout):
    from ansible_collections.dlrack.node.plugins.module_utils.acceptance.node import run_command
    return run_command(argv, timeout)
