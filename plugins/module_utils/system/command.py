# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way node-side code runs an external command: bounded in time and in bytes.

``run(argv, timeout=..., output_limit=...)`` starts ``argv`` (never through a shell) in a new
session (its own process group), with stdin from /dev/null and ``LC_ALL=C``, and reads stdout and
stderr incrementally. It stops the command, by killing its whole process group (SIGKILL: the
command and every child it started), when

- it has not finished within ``timeout`` seconds (``timed_out``, rc 124 like coreutils' timeout),
- or one of the two streams goes past ``output_limit`` bytes (``truncated``, rc 125): at most
  ``output_limit`` bytes of each stream are ever held in memory, so a tool printing 300 MB costs
  a few milliseconds and ``output_limit`` bytes, never 300 MB.

A command wedged in the kernel (uninterruptible sleep in a hung driver) cannot be killed at all;
the runner waits at most ``REAP_GRACE_S`` more for it and then returns anyway, so the caller's
time is bounded by ``timeout + REAP_GRACE_S`` whatever the command does.

The result is a :class:`Result`: a ``(rc, stdout, stderr)`` tuple (text, UTF-8 with
replacement) that also carries ``timed_out``, ``truncated``, ``duration_s``, the limits, and
``problem``: one sentence naming the command and the limit it broke, or None. A program that is
not there is rc 127, one that cannot be executed rc 126 (``problem`` says so too).

Standard library only, Python 3.6+: it runs on the nodes.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import selectors
import signal
import subprocess
import time

DEFAULT_TIMEOUT_S = 60
DEFAULT_OUTPUT_LIMIT = 16 * 1024 * 1024   # bytes, per stream
REAP_GRACE_S = 5.0
CHUNK = 65536
RC_TIMED_OUT = 124
RC_TRUNCATED = 125
RC_NOT_EXECUTABLE = 126
RC_NOT_FOUND = 127


def human_bytes(n):
    """16777216 -> '16 MiB'; 1536 -> '1.5 KiB'."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / float(size)
            return ("%d %s" % (value, unit)) if value == int(value) else ("%.1f %s" % (value, unit))
    return "%d bytes" % n


def command_name(argv, words=5):
    """The command as a person names it: program base name and its first arguments
    ('nvidia-smi -q -x'), each word cut to 40 characters and shown with repr() escapes when it
    holds anything unprintable."""
    parts = []
    for i, word in enumerate(list(argv)[:words]):
        word = str(word)
        if i == 0:
            word = os.path.basename(word) or word
        if len(word) > 40:
            word = word[:40] + "..."
        if not word.isprintable() or " " in word:
            word = ascii(word)
        parts.append(word)
    more = " ..." if len(argv) > words else ""
    return " ".join(parts) + more


class Result(tuple):
    """``(rc, stdout, stderr)`` plus what the runner knows about how the command ended."""

    def __new__(cls, rc, stdout, stderr, argv=(), timed_out=False, truncated=False,
                timeout=None, output_limit=None, duration_s=None, stream=None, error=None,
                timeout_hint=None, limit_hint=None):
        self = tuple.__new__(cls, (rc, stdout, stderr))
        self.argv = list(argv)
        self.timed_out = timed_out
        self.truncated = truncated
        self.timeout = timeout
        self.output_limit = output_limit
        self.duration_s = duration_s
        self.stream = stream          # 'stdout' or 'stderr': the one that went past the limit
        self.error = error            # OSError text when the program could not be started
        self.timeout_hint = timeout_hint
        self.limit_hint = limit_hint
        return self

    @property
    def rc(self):
        return self[0]

    @property
    def stdout(self):
        return self[1]

    @property
    def stderr(self):
        return self[2]

    @property
    def problem(self):
        """One sentence naming the command and the limit it broke (or why it did not start);
        None when it ran to its end within the limits (whatever its exit status)."""
        name = command_name(self.argv)
        if self.timed_out:
            return "%s did not answer within %s s and was killed%s" % (
                name, _seconds(self.timeout), _hint(self.timeout_hint))
        if self.truncated:
            return "%s printed more than %s on %s and was stopped%s" % (
                name, human_bytes(self.output_limit), self.stream or "its output",
                _hint(self.limit_hint))
        if self.error is not None:
            return "%s could not be started: %s" % (name, self.error)
        return None


def _seconds(value):
    return ("%d" % value) if value == int(value) else ("%.1f" % value)


def _hint(hint):
    return " (the limit is %s)" % hint if hint else ""


def problem(result):
    """``result.problem`` for a Result, None for a plain (rc, out, err) tuple (test stand-ins)."""
    return getattr(result, "problem", None)


def failure(result, what=None):
    """The sentence for a command that did not give a usable answer: ``problem`` (limit broken,
    not started), else '<what> failed (rc=N): <first 200 characters of stderr or stdout>' for a
    non-zero exit status; None when it exited 0 within the limits. ``what`` names the command
    (default: from the Result's argv)."""
    why = problem(result)
    if why:
        return why
    rc, out, err = result[0], result[1], result[2]
    if rc == 0:
        return None
    name = what or command_name(getattr(result, "argv", None) or ["command"])
    return "%s failed (rc=%s): %s" % (name, rc, (err or out or "").strip()[:200])


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (OSError, AttributeError):
        try:
            proc.kill()
        except OSError:
            pass


def run(argv, timeout=DEFAULT_TIMEOUT_S, output_limit=DEFAULT_OUTPUT_LIMIT, env=None,
        timeout_hint=None, limit_hint=None):
    """Run ``argv`` bounded by ``timeout`` seconds and ``output_limit`` bytes per stream; never
    raises for anything the command does. ``env``: extra variables over os.environ (LC_ALL=C and
    LANG=C are always set unless ``env`` names them). ``timeout_hint`` / ``limit_hint``: how the
    user changes the limit (e.g. "the module option command_timeout"), added to ``problem``."""
    argv = [str(a) for a in argv]
    meta = dict(argv=argv, timeout=timeout, output_limit=output_limit,
                timeout_hint=timeout_hint, limit_hint=limit_hint)
    full_env = dict(os.environ, LC_ALL="C", LANG="C")
    full_env.update(env or {})
    started = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=full_env, start_new_session=True,
                                close_fds=True)
    except OSError as exc:
        rc = RC_NOT_FOUND if exc.errno == errno.ENOENT else RC_NOT_EXECUTABLE
        text = exc.strerror or str(exc)
        return Result(rc, "", "%s: %s" % (argv[0] if argv else "", text), error=text,
                      duration_s=time.monotonic() - started, **meta)
    deadline = started + timeout
    bufs = {"stdout": [], "stderr": []}
    sizes = {"stdout": 0, "stderr": 0}
    timed_out = False
    over = None
    sel = selectors.DefaultSelector()
    try:
        sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
        sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, dummy in sel.select(min(left, 1.0)):
                name = key.data
                try:
                    chunk = os.read(key.fd, CHUNK)
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                room = output_limit - sizes[name]
                if len(chunk) > room:
                    if room > 0:
                        bufs[name].append(chunk[:room])
                    sizes[name] = output_limit
                    over = name
                    break
                bufs[name].append(chunk)
                sizes[name] += len(chunk)
            if over:
                break
        if timed_out or over:
            _kill_group(proc)
        else:
            # both streams are closed; the process itself still has until the deadline
            try:
                proc.wait(max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)
        try:
            proc.wait(REAP_GRACE_S if (timed_out or over) else None)
        except subprocess.TimeoutExpired:
            pass   # unkillable (D state): give up on it, the caller's time is what counts
    finally:
        sel.close()
        for stream in (proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
    out = b"".join(bufs["stdout"]).decode("utf-8", "replace")
    err = b"".join(bufs["stderr"]).decode("utf-8", "replace")
    if timed_out:
        rc = RC_TIMED_OUT
    elif over:
        rc = RC_TRUNCATED
    else:
        rc = proc.returncode
    return Result(rc, out, err, timed_out=timed_out, truncated=bool(over), stream=over,
                  duration_s=time.monotonic() - started, **meta)


class Runner(object):
    """A ``run`` with the limits of one caller: ``runner(argv)`` or ``runner(argv, timeout)``
    (a per-call timeout, e.g. fio's runtime plus an allowance, still never above ``max_timeout``
    when that is set). Callable where the code takes ``run(argv) -> (rc, out, err)``."""

    def __init__(self, timeout=DEFAULT_TIMEOUT_S, output_limit=DEFAULT_OUTPUT_LIMIT, env=None,
                 timeout_hint=None, limit_hint=None):
        self.timeout = timeout
        self.output_limit = output_limit
        self.env = env
        self.timeout_hint = timeout_hint
        self.limit_hint = limit_hint

    def __call__(self, argv, timeout=None):
        return run(argv, timeout=self.timeout if timeout is None else timeout,
                   output_limit=self.output_limit, env=self.env,
                   timeout_hint=self.timeout_hint if timeout is None else None,
                   limit_hint=self.limit_hint)
