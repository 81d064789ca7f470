"""str.isdigit() is True for superscripts such as '²', which int() refuses: every "digits only"
check before an int() must use isdecimal(), or a garbled capture becomes a traceback instead of a
clear error or an unknown value. (Found by the hypothesis fuzz of the parsers.)"""
import pytest

from ansible_collections.dlrack.node.plugins.module_utils.ecc import edac
from ansible_collections.dlrack.node.plugins.module_utils.hw import hostfs
from ansible_collections.dlrack.node.plugins.module_utils.hw.cpulist import CpuListError, parse_cpulist
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import sysfs_pci
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_hw


@pytest.mark.parametrize("text", ["²", "0-²", "0-3:²", "1,²"])
def test_cpulist_superscript_is_a_cpulist_error(text):
    with pytest.raises(CpuListError):
        parse_cpulist(text)


def test_sysfs_link_width_superscript_is_unknown():
    assert sysfs_pci.link_from_values("8.0 GT/s PCIe", "²", "8.0 GT/s PCIe", "16")["width"] is None


def test_natural_sort_keys_take_superscripts_as_text():
    # re.split(r"(\d+)") leaves '²' as its own text part; int() of it used to raise
    assert edac._natural_key("mc1²") == ["mc", 1, "²"]
    assert hostfs.natural_key("nvme1²") == ["nvme", 1, "²"]
    assert sorted(["mc1²", "mc10", "mc1"], key=edac._natural_key) == ["mc1", "mc1²", "mc10"]


def test_schema_integer_field_superscript_is_a_problem_not_a_traceback():
    clean, problems = check_hw({"schema": 1, "source": "declared", "cpu": {"sockets": "²"}})
    assert clean["cpu"]["sockets"] is None
    assert any(p.path == "cpu.sockets" for p in problems)
