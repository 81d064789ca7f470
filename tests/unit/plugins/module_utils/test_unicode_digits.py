"""str.isdigit() is True for superscripts such as '²', which int() refuses: every "digits only"
check before an int() must use isdecimal(), or a garbled capture becomes a traceback instead of a
clear error or an unknown value. (Found by the hypothesis fuzz of the parsers.)"""
import pytest

from ansible_collections.dlrack.node.plugins.module_utils import edac, gather
from ansible_collections.dlrack.node.plugins.module_utils.cpulist import CpuListError, parse_cpulist
from ansible_collections.dlrack.node.plugins.module_utils.parsers import ParseError, lscpu, numactl, sysfs_pci
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_hw


@pytest.mark.parametrize("text", ["²", "0-²", "0-3:²", "1,²"])
def test_cpulist_superscript_is_a_cpulist_error(text):
    with pytest.raises(CpuListError):
        parse_cpulist(text)


def test_numactl_superscript_cpu_is_a_parse_error():
    with pytest.raises(ParseError):
        numactl.parse_numactl_hardware("available: 1 nodes (0)\nnode 0 cpus: 0 1 ²\nnode 0 size: 1024 MB\n")


def test_lscpu_e_superscript_is_a_parse_error():
    with pytest.raises(ParseError):
        lscpu.parse_lscpu_e("CPU NODE SOCKET CORE\n0   0    0      0\n²   0    0      1\n")


def test_sysfs_link_width_superscript_is_unknown():
    assert sysfs_pci.link_from_values("8.0 GT/s PCIe", "²", "8.0 GT/s PCIe", "16")["width"] is None


def test_natural_sort_keys_take_superscripts_as_text():
    # re.split(r"(\d+)") leaves '²' as its own text part; int() of it used to raise
    assert edac._natural_key("mc1²") == ["mc", 1, "²"]
    assert gather._natural("nvme1²") == ["nvme", 1, "²"]
    assert sorted(["mc1²", "mc10", "mc1"], key=edac._natural_key) == ["mc1", "mc1²", "mc10"]


def test_schema_integer_field_superscript_is_a_problem_not_a_traceback():
    clean, problems = check_hw({"schema": 1, "source": "declared", "cpu": {"sockets": "²"}})
    assert clean["cpu"]["sockets"] is None
    assert any(p.path == "cpu.sockets" for p in problems)
