"""Fail closed on a broken inventory (issue 18.5): problems() against Ansible's own
InventoryManager parsing real files: a missing -i path, a file with a bracket typo inside an
inventory directory (Ansible keeps the siblings' hosts and only warns), a single file it stopped
parsing half-way, an inventory without hosts; a whole inventory (the example fleet, a host list)
has none."""
import os

import pytest
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader

from ansible_collections.dlrack.node.plugins.plugin_utils.inventory_check import inventory_problems, problems

from testpaths import ROOT


def _check(*sources):
    return inventory_problems(InventoryManager(loader=DataLoader(), sources=[str(s) for s in sources]))


def test_missing_source_is_named(tmp_path):
    missing = tmp_path / "nope"
    assert _check(missing) == ["inventory source %s does not exist: check the -i path (or the inventory "
                               "setting of ansible.cfg)" % missing]


def test_one_unparsable_file_in_a_directory_is_named(tmp_path):
    inv = tmp_path / "inv"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "group_vars" / "all.yml").write_text("dlrack_profile: training\n")   # not a source: ignored
    (inv / "a.yml").write_text("all:\n  hosts:\n    gpu-01: {}\n")
    # the bracket typo; a name without an extension (ansible-core 2.16's inventory_ignore_extensions
    # leaves out *.ini files of a directory, 2.19's reads them: this one is a source on both)
    (inv / "rack-b").write_text("[gpu\ngpu-02\ngpu-03\n")
    (inv / "notes.retry").write_text("ignored by Ansible's inventory_ignore_extensions\n")
    found = _check(inv)
    assert len(found) == 1 and found[0].startswith("inventory source %s could not be parsed" % (inv / "rack-b"))


def test_half_parsed_single_file_is_named(tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text("[gpu]\ngpu-01\n[rack:children\ngpu\n")   # Ansible keeps gpu-01, then gives up
    manager = InventoryManager(loader=DataLoader(), sources=[str(path)])
    assert list(manager._inventory.hosts) == ["gpu-01"]
    assert inventory_problems(manager)[0].startswith("inventory source %s could not be parsed" % path)


def test_empty_inventory_is_refused(tmp_path):
    path = tmp_path / "empty.yml"
    path.write_text("")
    assert _check(path) == ["the inventory holds no host (sources: %s): give the fleet's inventory with -i" % path]


@pytest.mark.parametrize("sources", [[os.path.join(ROOT, "inventories", "example")], ["gpu-01,gpu-02,"]])
def test_whole_inventories_pass(sources):
    assert _check(*sources) == []


def test_absent_default_source_only_counts_hosts():
    assert problems(["/etc/ansible/hosts"], [], 0, default_source="/etc/ansible/hosts")[0].startswith(
        "the inventory holds no host")
    assert problems(["/etc/ansible/hosts", "a,b,"], ["a,b,"], 2, default_source="/etc/ansible/hosts") == []


def test_control_characters_in_a_source_are_escaped(tmp_path):
    found = problems([str(tmp_path / "x\x1b]52;c;QUJD\x07")], [], 0)
    assert "\x1b" not in found[0] and "\\x1b" in found[0]


def test_host_names_a_file_cache_cannot_store():
    from ansible_collections.dlrack.node.plugins.plugin_utils.inventory_check import host_name_problems
    names = ["gpu-01", "x" * 300, "../../etc/cron.d/x", "ok.example.com", "h\x1b]52;c;QUJD\x07"]
    found = host_name_problems(names, "jsonfile")
    assert len(found) == 2
    assert found[0].startswith("host name %s... is 300 bytes long: the fact cache (fact_caching=jsonfile)" % ("x" * 60))
    assert found[1].startswith("host name ../../etc/cron.d/x holds a path separator")
    assert host_name_problems(names, "memory") == []


def test_host_names_with_control_characters_are_named_escaped(tmp_path):
    """18.8 (d): Ansible's task headers and PLAY RECAP print host names raw, so inventory_check
    warns about a name holding ESC/BEL/a line feed, escaped, parsed by Ansible's own inventory."""
    from ansible_collections.dlrack.node.plugins.plugin_utils.inventory_check import inventory_warnings

    inv = tmp_path / "hosts.yml"
    inv.write_text('all:\n  hosts:\n    "gpu\\e]52;c;eA==\\aok\\nPASS  forged": {}\n    plain-01: {}\n    "gpu\\u202eevil": {}\n')
    manager = InventoryManager(loader=DataLoader(), sources=[str(inv)])
    assert sorted(manager._inventory.hosts) == ["gpu\x1b]52;c;eA==\x07ok\nPASS  forged", "gpu\u202eevil", "plain-01"]
    [warning] = inventory_warnings(manager)
    assert warning.startswith("2 host name(s) hold control characters: ")
    assert "gpu\\x1b]52;c;eA==\\x07ok\\nPASS  forged" in warning and "gpu\\u202eevil" in warning
    assert "plain-01" not in warning and "\x1b" not in warning and "\n" not in warning and "\u202e" not in warning
    assert "rename the hosts in the inventory" in warning
    assert _check(inv) == []                      # a warning, not a refusal: the run goes on


def test_host_name_warnings_are_bounded():
    from ansible_collections.dlrack.node.plugins.plugin_utils.inventory_check import host_name_warnings

    assert host_name_warnings(["a", "b-01"]) == []
    [warning] = host_name_warnings(["h\x07%d%s" % (i, "x" * 100) for i in range(10000)])
    assert warning.startswith("10000 host name(s)") and " and 9995 more." in warning and len(warning) < 1000
