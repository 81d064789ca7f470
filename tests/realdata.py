"""Paths to the real captured outputs copied into tests/data/real (provenance: SOURCES.md there)."""
import glob
import os

from testpaths import ROOT  # noqa: E402  (tests/ is on sys.path: conftest)
REAL = os.path.join(ROOT, "tests", "data", "real")


def real(category, name=None):
    """Every file of a category (sorted), or one named file."""
    if name is None:
        return sorted(glob.glob(os.path.join(REAL, category, "*")))
    return os.path.join(REAL, category, name)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def ids(paths):
    return [os.path.basename(p) for p in paths]
