"""Test setup shared by every test: make this checkout importable as ansible_collections.dlrack.node."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".collections")
if not os.path.isdir(os.path.join(COLLECTIONS, "ansible_collections", "dlrack", "node")):
    raise RuntimeError("run ./scripts/bootstrap.sh (or make test) first: .collections is missing")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

DATA = os.path.join(ROOT, "tests", "data")

TESTS = os.path.dirname(os.path.abspath(__file__))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)   # shared test documents: tests/hwdocs.py
