# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one write path of the reports: a set of files that belong together (a run's
report.json, report.xml and report.html) written atomically under the directory's lock, and the
single-file form of it (the drift callback's record file)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import os
import signal
import stat
import tempfile

try:
    import fcntl
except ImportError:  # pragma: no cover - Ansible controllers are POSIX; no lock then, still atomic per file
    fcntl = None

LOCK_NAME = ".dlrack-report.lock"


class ReportWriteError(Exception):
    """The reports could not be written; the message names the path and what to change."""


@contextlib.contextmanager
def _dir_lock(directory):
    """An exclusive flock on ``directory``'s LOCK_NAME. The lock file is opened without following
    a symbolic link (O_NOFOLLOW: another user's ``.dlrack-report.lock -> /etc/nologin`` must not
    make root create or open that file) and must be a regular file; otherwise ReportWriteError."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    path = os.path.join(directory, LOCK_NAME)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | \
        getattr(os, "O_NOCTTY", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if os.path.islink(path):
            raise ReportWriteError("the report lock %s is a symbolic link (to %s); the reports never follow "
                                   "a link there: remove it (rm %s) or choose another dlrack_report_dir"
                                   % (path, ascii(os.readlink(path)), path))
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ReportWriteError("the report lock %s is not a regular file; remove it or choose another "
                                   "dlrack_report_dir" % path)
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class _Terminated(BaseException):
    """A signal while a report set is being written: the temporary files are removed first."""


@contextlib.contextmanager
def _termination_raises():
    """While the body runs, SIGINT, SIGTERM and SIGHUP raise _Terminated, so that the caller's
    ``except BaseException`` removes its temporary files and then calls _deliver_again() with the
    list this yields: the run still ends the way it was asked to, with the handler it had (an
    Ansible worker's handler for SIGINT/SIGTERM exits at once, os._exit, with no cleanup). Only the
    main thread can set handlers; elsewhere this does nothing."""
    caught, previous = [], {}

    def handler(signum, dummy_frame):
        if not caught:
            caught.append((signum, previous.get(signum)))
        raise _Terminated(signum)

    try:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread
        for sig, old in previous.items():
            signal.signal(sig, old)
        previous = {}
    try:
        yield caught
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _deliver_again(caught):
    for signum, dummy in caught[:1]:
        os.kill(os.getpid(), signum)


def _problem(exc):
    return exc.strerror or str(exc)


def prepare_dir(directory, what="dlrack_report_dir"):
    """Create ``directory`` if needed; ReportWriteError naming it (and ``what`` sets it) when it is
    empty, is a file, or cannot be created or written."""
    if directory is None or not str(directory).strip():
        raise ReportWriteError("%s is empty: set it to the directory where the reports go (e.g. -e %s=reports)"
                               % (what, what))
    directory = str(directory)
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ReportWriteError("the report directory %s (%s) is not a directory; set %s to a directory"
                               % (directory, what, what))
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise ReportWriteError("cannot create the report directory %s (%s): %s; set %s to a writable directory"
                               % (directory, what, _problem(exc), what))
    if not os.path.isdir(directory):
        raise ReportWriteError("the report directory %s (%s) is not a directory; set %s to a directory"
                               % (directory, what, what))
    return directory


def write_file_set(directory, files, what="dlrack_report_dir", mode=0o644):
    """Write ``files`` ({file name: text or bytes}; text is written UTF-8) into ``directory`` as one set and return {name: path}.

    Every file is first written in full to a temporary file in the same directory; then, under an
    exclusive lock on the directory's ``.dlrack-report.lock``, all temporary files are renamed into
    place. Readers never see a half-written file, and when two runs write the same directory at the
    same time the set that stays is one run's complete set, never a mix. Any failure raises
    ReportWriteError naming the path (``what`` names the setting that chose it); no temporary file
    is left behind."""
    directory = prepare_dir(directory, what)
    tmps = []
    caught = []
    try:
        # an interrupted run (SIGINT, SIGTERM, SIGHUP) leaves no temporary file behind
        with _termination_raises() as caught:
            for name, content in files.items():
                fd, tmp = tempfile.mkstemp(prefix=".%s." % name, suffix=".tmp", dir=directory)
                tmps.append((name, tmp))
                if isinstance(content, bytes):
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(content)
                else:
                    with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
                        fh.write(content)
                os.chmod(tmp, mode)
            with _dir_lock(directory):
                for name, tmp in tmps:
                    os.replace(tmp, os.path.join(directory, name))
    except OSError as exc:
        _cleanup(tmps)
        raise ReportWriteError("cannot write the reports in %s (%s): %s; set %s to a writable directory"
                               % (directory, exc.filename or directory, _problem(exc), what))
    except BaseException:
        _cleanup(tmps)
        _deliver_again(caught)
        raise
    return {name: os.path.join(directory, name) for name in files}


def _cleanup(tmps):
    for dummy, tmp in tmps:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def atomic_write(path, text, mode=0o644):
    """Replace one file atomically (write_file_set with a single file)."""
    return write_file_set(os.path.dirname(path) or ".", {os.path.basename(path): text}, what=path, mode=mode)[
        os.path.basename(path)]
