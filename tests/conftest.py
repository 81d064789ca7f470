"""Test setup shared by every test: make this checkout importable as ansible_collections.dlrack.node.

Two layouts work: a bootstrapped checkout (scripts/bootstrap.sh links it under .collections/) and
a copy already placed under ansible_collections/dlrack/node (ansible-test units, make sanity)."""
import os
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)   # shared test helpers: tests/testpaths.py, hwdocs.py, realdata.py

from testpaths import COLLECTIONS, DATA, ROOT  # noqa: E402  (needs the sys.path entry above)

if COLLECTIONS is None:
    raise RuntimeError("run ./scripts/bootstrap.sh (or make test) first: .collections is missing "
                       "and this checkout is not under ansible_collections/dlrack/node")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

import molecule_runs  # noqa: E402  (the background lanes of molecule scenarios: tests/molecule_runs.py)

__all__ = ["DATA", "ROOT"]


def pytest_collection_modifyitems(items):
    """Background scenarios' tests last: they only wait for a run started at session start."""
    items[:] = molecule_runs.order(items, molecule_runs.background())


def pytest_collection_finish(session):
    if session.config.option.collectonly or hasattr(session.config, "workerinput"):
        return
    molecule_runs.stop_on_termination()   # SIGTERM/SIGHUP stop and destroy the scenario runs first
    for lane in molecule_runs.start_background(session.items):
        session.config.get_terminal_writer().line(
            "molecule: %s in a background lane, one after another (logs in %s)" % (", ".join(lane.names), molecule_runs.LOG_DIR))


def pytest_sessionfinish(session):
    molecule_runs.stop_all()          # a run still going (-x, Ctrl-C, a crash) is stopped and destroyed


def pytest_terminal_summary(terminalreporter):
    lines = molecule_runs.summary_lines()
    if lines:
        terminalreporter.write_sep("-", "molecule scenarios (wall time)")
        for line in lines:
            terminalreporter.write_line(line)
