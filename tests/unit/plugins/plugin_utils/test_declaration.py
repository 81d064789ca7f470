"""Declarations from gathered facts (issue 11.3), on the real h200-vm host and a captured
4-GPU server tree: what is kept, what is left out, and the round trip through the rule engine."""
import copy
import os
import tempfile

import pytest

from ansible_collections.dlrack.node.plugins.filter.hw_declaration import (
    hw_declaration, hw_declaration_host_error, hw_declaration_yaml)
from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather
from ansible_collections.dlrack.node.plugins.plugin_utils.declaration import (
    DeclarationError, declaration_from_gathered, declaration_yaml)
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_hw
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import compare_declared, evaluate_host, resolve_settings

from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

try:  # ansible-core 2.19: a template in a test is a trusted one, as in a playbook
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - ansible-core < 2.19 templates every str
    def trust_as_template(text):
        return text

from testpaths import sysfs_tree
from realhost import h200_vm


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    root, _bin = h200_vm(tmp_path_factory.mktemp("h200"))
    return gather(root=root, is_root=False)


@pytest.fixture(scope="module")
def esc():
    """4x RTX 6000 Ada, 17 NVMe, 2 sockets (tests/data/sysfs/esc8000a-e12), with blkid answers."""
    def run(argv):
        return (0, "PTTYPE=gpt\n", "") if argv[0].endswith("blkid") else (127, "", "")
    return gather(root=sysfs_tree("esc8000a-e12"), run_command=run, is_root=True,
                  dmidecode="never", blkid="/sbin/blkid")


def test_h200_declaration_keeps_the_hardware_and_drops_the_volatile(h200):
    decl = declaration_from_gathered(h200)
    assert decl["source"] == "declared" and h200["source"] == "gathered"   # input untouched
    assert "uptime_s" not in decl and "errors" not in decl
    assert decl["cpu"] == h200["cpu"] and decl["memory"] == h200["memory"]
    (gpu,) = decl["gpus"]
    assert (gpu["model"], gpu["memory_mb"], gpu["pci_bus_id"], gpu["ecc_enabled"]) == ("NVIDIA H200", 143771, "0000:00:06.0", True)
    assert gpu["pcie"] == {"width": 16, "width_max": 16, "gen_max": 5, "gen_host_max": None, "speed_max": 32.0}
    for key in ("uuid", "serial", "ecc_errors", "retired_pages", "remapped_rows"):
        assert key not in gpu
    assert [d["name"] for d in decl["disks"]] == ["vda", "vdb"]
    for disk in decl["disks"]:
        assert disk["in_use"] == {"system": disk["name"] == "vda"}
        for key in ("serial", "wwid", "wwn", "by_id", "by_id_all", "probe"):
            assert key not in disk
    assert decl["host"] == {"virtualization": "vm-other", "product": None, "manufacturer": None}


def test_identity_keeps_the_unit_ids(h200, esc):
    decl = declaration_from_gathered(h200, identity=True)
    assert decl["gpus"][0]["uuid"] == "GPU-84ef4d21-7100-fb54-14a3-d165c2f55af7"
    assert decl["gpus"][0]["serial"] == "1653724065741" and decl["host"]["hostname"] == "vm"
    assert [d["serial"] for d in decl["disks"]] == ["overlayblk", "199048143072"]
    assert "ecc_errors" not in decl["gpus"][0] and "kernel" not in decl["host"]   # volatile all the same
    esc_decl = declaration_from_gathered(esc, identity=True)
    assert esc["disks"][0]["probe"] is not None and esc["disks"][0]["in_use"]["signatures"]   # blkid answered
    assert "probe" not in esc_decl["disks"][0] and esc_decl["disks"][0]["in_use"] == {"system": False}


def test_edac_counters_left_out():
    doc = {"schema": 1, "source": "gathered", "cpu": None, "gpus": None, "disks": None,
           "memory": {"total_mb": 1024, "ecc": "multi-bit",
                      "edac": {"driver": "skx_edac", "controllers": 4, "corrected": 3, "uncorrected": 0}}}
    assert declaration_from_gathered(doc)["memory"]["edac"] == {"driver": "skx_edac", "controllers": 4}
    assert declaration_from_gathered(doc)["cpu"] is None     # not gathered stays unknown


@pytest.mark.parametrize("bad", [None, "text", [], {"source": "declared"}, {"cpu": {}}])
def test_only_gathered_documents(bad):
    with pytest.raises(DeclarationError):
        declaration_from_gathered(bad)
    with pytest.raises(AnsibleFilterError, match="hw_declaration"):
        hw_declaration(bad)


def ansible_load(text):
    """What Ansible's inventory reads from a host_vars file: the host_group_vars plugin's call."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "dlrack_hw.yml")
        with open(path, "w") as handle:
            handle.write(text)
        try:
            return DataLoader().load_from_file(path, cache="none", unsafe=True, trusted_as_template=True)
        except TypeError:  # pragma: no cover - ansible-core < 2.19 trusts every file it reads
            return DataLoader().load_from_file(path, cache="none", unsafe=True)


def test_yaml_file_round_trips(h200):
    text = declaration_yaml(h200, "gpu-a01")
    assert text.startswith("---\n# dlrack_hw of gpu-a01, written by playbooks/declare.yml")
    assert "\ndlrack_hw: !unsafe\n" in text
    assert ansible_load(text) == {"dlrack_hw": declaration_from_gathered(h200)}
    assert ansible_load(hw_declaration_yaml(h200, True, "x"))["dlrack_hw"]["gpus"][0]["uuid"]


HOSTILE = "{{ lookup('pipe', 'touch %s') }}"


def test_node_strings_read_back_as_data_never_templated(h200, tmp_path):
    """Issue 18.1: a gathered string holding a template stays that text when Ansible reads the
    declaration back and templates the variable (the file the lookup would create never exists);
    strings that look like numbers (a PCI bus id, a numeric serial) stay strings."""
    marker = tmp_path / "PWNED"
    hostile = copy.deepcopy(h200)
    hostile["cpu"]["model"] = HOSTILE % marker
    hostile["disks"][0]["serial"] = "0123{# x #}"
    hostile["disks"][1]["serial"] = "000123"
    hostile["disks"][0]["model"] = "{% raw %}x"
    hostile["host"]["{{ 7 * 7 }}"] = "key"
    text = declaration_yaml(hostile, "gpu-a01", identity=True)
    loaded = ansible_load(text)
    assert loaded == {"dlrack_hw": declaration_from_gathered(hostile, identity=True)}
    templar = Templar(loader=DataLoader(), variables=loaded)
    doc = templar.template(trust_as_template("{{ dlrack_hw }}"))
    assert doc["cpu"]["model"] == HOSTILE % marker
    assert templar.template(trust_as_template("{{ dlrack_hw.cpu.model }}")) == HOSTILE % marker
    assert [d["serial"] for d in doc["disks"]] == ["0123{# x #}", "000123"]
    assert doc["disks"][0]["model"] == "{% raw %}x" and doc["host"]["{{ 7 * 7 }}"] == "key"
    assert doc["gpus"][0]["pci_bus_id"] == "0000:00:06.0"
    assert not marker.exists()


def test_a_host_name_in_the_comment_cannot_end_it(h200):
    text = declaration_yaml(h200, "gpu\ndlrack_hw: {source: gathered}")
    assert ansible_load(text) == {"dlrack_hw": declaration_from_gathered(h200)}
    assert "# dlrack_hw of gpu\\ndlrack_hw: {source: gathered}, written" in text


@pytest.mark.parametrize("host, why", [
    ("../../x", "path separator"), ("a/b", "path separator"), ("..", "'..'"), ("", "empty"),
    ("a\\b", "path separator"), ("nul\x00x", "control character"), ("esc\x1b[2J", "control character"),
    ("x" * 300, "300 bytes long"), ("\u00e9" * 128, "256 bytes long"),
    ("gpu\u202etxt.exe", "control character"), ("gpu\u2028x", "control character"),   # bidi override, line separator
])
def test_host_names_that_cannot_name_a_directory_are_refused(host, why):
    msg = hw_declaration_host_error(host)
    assert msg.startswith("declare.yml refuses host '") and why in msg and "nothing was written" in msg
    assert "\x00" not in msg and "\x1b" not in msg and len(msg) < 400


@pytest.mark.parametrize("host", ["gpu-a01", "gpu-a01.rack1.example.org", "x" * 255, "10.0.0.7", "\u00e9" * 127])
def test_ordinary_host_names_pass(host):
    assert hw_declaration_host_error(host) == ""


def test_compare_declared_finds_a_missing_gpu_and_a_smaller_ram(esc):
    decl = declaration_from_gathered(esc)
    th = resolve_settings("training")[0]
    dclean = check_hw(decl)[0]
    assert compare_declared(dclean, check_hw(esc)[0], th) == []
    worse = copy.deepcopy(esc)
    worse["gpus"].pop()
    worse["memory"]["total_mb"] //= 2
    diffs = compare_declared(dclean, check_hw(worse)[0], th)
    assert ("gpus.count", 4, 3) in diffs and ("memory.total_mb", 386606, 193303) in diffs


@pytest.mark.parametrize("which", ["h200", "esc"])
def test_round_trip_matches_declared(which, h200, esc):
    gathered = {"h200": h200, "esc": esc}[which]
    decl = declaration_from_gathered(gathered)
    assert check_hw(decl, strict=True)[1] == []
    result = evaluate_host(which, gathered, declared=decl)
    assert result["rules"]["inventory.matches_declared"] == "pass"


def test_the_declaration_folder_is_taken_from_where_the_command_runs(monkeypatch, tmp_path):
    """Issue 30.3: a relative dlrack_declare_dir is the folder the command runs in's, not the
    playbook's (the installed collection); ~ is the user's home; a blank one is one sentence."""
    from ansible_collections.dlrack.node.plugins.filter.hw_declaration import hw_declaration_dir
    from ansible_collections.dlrack.node.plugins.plugin_utils.declaration import declare_dir
    monkeypatch.chdir(str(tmp_path))
    monkeypatch.setenv("HOME", "/home/ops")
    assert hw_declaration_dir("decl/rack-7/") == os.path.join(str(tmp_path), "decl", "rack-7")
    assert declare_dir("../x", cwd="/srv/inv") == "/srv/x" and declare_dir("/abs//y/") == "/abs/y"
    assert declare_dir("~/decl") == "/home/ops/decl"
    with pytest.raises(AnsibleFilterError, match="hw_declaration_dir: dlrack_declare_dir is empty: set it to the folder"):
        hw_declaration_dir("  ")
