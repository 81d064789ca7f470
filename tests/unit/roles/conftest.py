"""Fixtures for the role tests (node-side code as installed: tests/nodelib.py)."""
import pytest

from nodelib import install_node_lib


@pytest.fixture
def node_lib(tmp_path):
    """<lib> as gpu_affinity and ecc_monitor leave it on a node (from this checkout)."""
    return install_node_lib(str(tmp_path / "lib"))
