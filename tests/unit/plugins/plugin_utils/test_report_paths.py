"""Report paths stay where they belong (issue 18.6): the directory lock never follows a symbolic
link, an interrupted write (SIGINT, SIGTERM, SIGHUP; also with an Ansible worker's handler, which
exits at once) leaves no temporary file, and hostile host names (300 characters, path
separators, control characters) are data in the reports, never a path or an exception."""
import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils import report
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import read_host, run_preflight

from hwdocs import GOOD
from testpaths import COLLECTIONS


def test_symlinked_lock_is_refused_and_its_target_never_created(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    target = tmp_path / "nologin"          # stands for /etc/nologin
    os.symlink(str(target), str(reports / report.LOCK_NAME))
    with pytest.raises(report.ReportWriteError) as err:
        report.write_file_set(str(reports), {"report.json": "{}"})
    assert "is a symbolic link" in str(err.value) and str(reports / report.LOCK_NAME) in str(err.value)
    assert not target.exists()
    assert sorted(os.listdir(str(reports))) == [report.LOCK_NAME]     # no report, no temporary file


def test_symlinked_lock_to_an_existing_file_is_refused(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    target = tmp_path / "someone-elses"
    target.write_text("keep")
    os.symlink(str(target), str(reports / report.LOCK_NAME))
    with pytest.raises(report.ReportWriteError):
        report.atomic_write(str(reports / "drift-records.json"), "{}")
    assert target.read_text() == "keep" and not (reports / "drift-records.json").exists()


def test_lock_that_is_not_a_regular_file_is_refused(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    os.mkfifo(str(reports / report.LOCK_NAME))
    started = time.monotonic()
    with pytest.raises(report.ReportWriteError) as err:
        report.write_file_set(str(reports), {"report.json": "{}"})
    assert "not a regular file" in str(err.value) and time.monotonic() - started < 5


def test_a_plain_lock_still_works(tmp_path):
    paths = report.write_file_set(str(tmp_path), {"a.json": "1", "b.json": "2"})
    assert open(paths["a.json"]).read() == "1"
    assert sorted(os.listdir(str(tmp_path))) == [report.LOCK_NAME, "a.json", "b.json"]


CHILD = textwrap.dedent("""
    import os, signal, sys
    sys.path[:0] = [%(collections)r]
    from ansible_collections.dlrack.node.plugins.plugin_utils import report
    if sys.argv[2] == "ansible-worker":
        # what an Ansible WorkerProcess installs: exit at once, no cleanup (worker.py _term)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, frame: os._exit(1))
    report.write_file_set(sys.argv[1], {"report.json": "x" * 100000, "report.html": "y"})
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
@pytest.mark.parametrize("handlers", ["default", "ansible-worker"])
def test_an_interrupted_write_leaves_no_temporary_file(tmp_path, sig, handlers):
    reports = tmp_path / "reports"
    reports.mkdir()
    script = tmp_path / "child.py"
    script.write_text(CHILD % {"collections": COLLECTIONS})
    # Hold the directory's lock: the writer has made its temporary files and waits for the lock.
    lock = os.open(str(reports / report.LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        child = subprocess.Popen([sys.executable, str(script), str(reports), handlers])
        deadline = time.monotonic() + 30
        while len([n for n in os.listdir(str(reports)) if n.endswith(".tmp")]) < 2:
            assert child.poll() is None and time.monotonic() < deadline, "the writer did not start"
            time.sleep(0.02)
        time.sleep(0.1)   # in flock() now
        child.send_signal(sig)
        rc = child.wait(30)
    finally:
        os.close(lock)
    assert rc != 0                                       # the run still ends as asked
    assert sorted(os.listdir(str(reports))) == [report.LOCK_NAME]


HOSTILE = ["x" * 300, "../../etc/cron.d/x", "a/b", "/abs/path", "..", "h\x1b]52;c;QUJD\x07", "nl\nPASS  fake",
           "{{ lookup('pipe', 'id') }}"]


def test_hostile_host_names_are_data_in_the_reports(tmp_path):
    reports = tmp_path / "reports"
    inputs = {h: read_host(h, {"dlrack_hw": GOOD, "dlrack_external_archive": "nfs://a/b"}, plain=True)[0]
              for h in HOSTILE}
    out = run_preflight(inputs, report_dir=str(reports), fail_on="error")
    assert out.get("report_error") is None
    assert sorted(os.listdir(str(reports))) == [report.LOCK_NAME, "report.html", "report.json", "report.xml"]
    assert sorted(os.listdir(str(tmp_path))) == ["reports"]          # nothing written beside it
    doc = json.loads((reports / "report.json").read_text())
    assert set(doc["hosts"]) == set(HOSTILE)
    assert "\x1b" not in (reports / "report.html").read_text()
