"""The node-side helper (roles/gpu_affinity/files/dlrack_affinity.py) is stdlib-only and cannot import
the collection, so it carries its own cpulist and PCI bus id helpers. These tests hold those twins
to the collection's implementations on the same inputs, so the two can never drift apart."""
import os
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.dlrack.node.plugins.module_utils.cpulist import format_cpulist, parse_cpulist
from ansible_collections.dlrack.node.plugins.module_utils.parsers import normalize_pci_bus_id

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FILES = os.path.join(ROOT, "roles", "gpu_affinity", "files")
if FILES not in sys.path:
    sys.path.insert(0, FILES)
import dlrack_affinity as da  # noqa: E402

CPU_SETS = st.sets(st.integers(min_value=0, max_value=511), max_size=64)


@settings(max_examples=300, deadline=None)
@given(CPU_SETS)
def test_format_cpulist_matches_the_collection(cpus):
    assert da.format_cpulist(cpus) == format_cpulist(cpus)


@settings(max_examples=300, deadline=None)
@given(CPU_SETS)
def test_parse_cpulist_matches_the_collection(cpus):
    text = format_cpulist(cpus)
    assert da.parse_cpulist(text) == parse_cpulist(text) == sorted(cpus)


def test_stride_and_real_kernel_forms_match():
    # forms seen in the real captures: util-linux 4-socket X7550 (stride), stelline EPYC (ranges)
    for text in ("0-62:2", "1-63:2", "0-31,64-95", "0", "0-95,192-287", " 0-3,8\n"):
        assert da.parse_cpulist(text) == parse_cpulist(text)


def test_bus_ids_match_for_both_spellings():
    # nvidia-smi (telegraf dual_a5000: 00000000:81:00.0) and sysfs spellings
    for bus in ("00000000:81:00.0", "00000000:C1:00.0", "0000:c1:00.0", "0000:01:00.0", "00000000:00:1E.0"):
        assert da.norm_bus_id(bus) == normalize_pci_bus_id(bus)
