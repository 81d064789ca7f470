# -*- coding: utf-8 -*-
"""The bounded command runner (plugins/module_utils/system/command.py), driven with real
processes: stand-in programs that hang, print 300 MB, leave children behind or exit badly."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat
import sys
import textwrap
import time

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.system import command


def _tool(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie (not reaped by its parent, the test's init) counts as gone
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except IOError:
        return False


def test_normal_command_is_a_plain_tuple(tmp_path):
    tool = _tool(tmp_path, "nvidia-smi", 'echo "lang=$LC_ALL"; echo oops >&2; exit 3\n')
    res = command.run([tool, "-q", "-x"])
    rc, out, err = res
    assert (rc, out, err) == (3, "lang=C\n", "oops\n")
    assert not res.timed_out and not res.truncated and res.problem is None
    assert command.failure(res) == "nvidia-smi -q -x failed (rc=3): oops"


def test_hanging_command_is_killed_in_bounded_time(tmp_path):
    # a stand-in nvidia-smi that never answers, with a child that would keep the pipe open
    pidfile = tmp_path / "child.pid"
    tool = _tool(tmp_path, "nvidia-smi", 'sleep 600 & echo $! > %s\nsleep 600\n' % pidfile)
    started = time.monotonic()
    res = command.run([tool, "-q", "-x"], timeout=1.5, timeout_hint="the module option command_timeout")
    took = time.monotonic() - started
    assert took < 1.5 + 2.0
    assert res.timed_out and res.rc == command.RC_TIMED_OUT
    assert res.problem == ("nvidia-smi -q -x did not answer within 1.5 s and was killed "
                           "(the limit is the module option command_timeout)")
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 3
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the whole process group is killed, children included"


def test_300_mb_output_is_bounded(tmp_path):
    # 300 MB on stdout: the runner keeps output_limit bytes and stops the command
    tool = _tool(tmp_path, "nvidia-smi", "head -c 314572800 /dev/zero | tr '\\0' 'x'\n")
    started = time.monotonic()
    res = command.run([tool, "-q", "-x"], timeout=60, output_limit=1 << 20)
    took = time.monotonic() - started
    assert res.truncated and not res.timed_out and res.rc == command.RC_TRUNCATED
    assert len(res.stdout) == 1 << 20 and set(res.stdout) == {"x"}
    assert res.problem == "nvidia-smi -q -x printed more than 1 MiB on stdout and was stopped"
    assert took < 10, "stopped at the limit, not after reading 300 MB (took %.1f s)" % took


def test_stderr_is_bounded_too(tmp_path):
    tool = _tool(tmp_path, "dmidecode", "head -c 5000000 /dev/zero >&2\n")
    res = command.run([tool, "-t", "memory"], output_limit=4096, limit_hint="command_output_limit")
    assert res.truncated and res.stream == "stderr" and len(res.stderr) == 4096
    assert res.problem.endswith("on stderr and was stopped (the limit is command_output_limit)")


def test_exactly_the_limit_is_not_truncated(tmp_path):
    tool = _tool(tmp_path, "t", "head -c 4096 /dev/zero\n")
    res = command.run([tool], output_limit=4096)
    assert res.rc == 0 and not res.truncated and len(res.stdout) == 4096


def test_missing_and_unexecutable_programs(tmp_path):
    res = command.run([str(tmp_path / "nope"), "-q"])
    assert res.rc == command.RC_NOT_FOUND and "could not be started" in res.problem
    plain = tmp_path / "plain"
    plain.write_text("data")
    res = command.run([str(plain)])
    assert res.rc == command.RC_NOT_EXECUTABLE and res.problem.startswith("plain could not be started")


def test_stdin_is_not_inherited(tmp_path):
    tool = _tool(tmp_path, "reader", "cat; echo done\n")
    res = command.run([tool], timeout=5)
    assert res.rc == 0 and res.stdout == "done\n" and not res.timed_out


def test_closed_pipes_but_running_process_still_times_out(tmp_path):
    tool = _tool(tmp_path, "quiet", "exec >/dev/null 2>&1\nsleep 600\n")
    res = command.run([tool], timeout=1)
    assert res.timed_out and res.duration_s < 1 + 2


def test_hostile_names_are_escaped():
    assert command.command_name(["/x/nvidia\x1b]52;c;AA\x07", "a b"]) == \
        "'nvidia\\x1b]52;c;AA\\x07' 'a b'"
    assert command.command_name(["y" * 100]) == "y" * 40 + "..."


def test_runner_keeps_its_limits(tmp_path):
    tool = _tool(tmp_path, "fio", "sleep 5\n")
    runner = command.Runner(timeout=0.5, output_limit=10, timeout_hint="command_timeout")
    res = runner([tool, "--name=x"])
    assert res.timed_out and "within 0.5 s" in res.problem and "command_timeout" in res.problem
    res = runner([tool], 0.3)  # per-call timeout (fio: runtime + allowance)
    assert res.timed_out and res.timeout == 0.3


def test_failure_of_plain_tuples():
    assert command.failure((0, "ok", "")) is None
    assert command.failure((2, "", "bad\n"), "blkid -p") == "blkid -p failed (rc=2): bad"


@pytest.mark.skipif(sys.version_info < (3, 6), reason="node code is py3.6+")
def test_human_bytes():
    assert command.human_bytes(16 * 1024 * 1024) == "16 MiB"
    assert command.human_bytes(1536) == "1.5 KiB"
    assert command.human_bytes(12) == "12 bytes"
