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

__all__ = ["DATA", "ROOT"]
