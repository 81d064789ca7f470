"""Misspelled variables are named (issue 30.6): a variable with the collection's prefixes that no
role or playbook reads is warned about, with the closest known name; the known names are computed
from the collection (argument specs, defaults, vars, what the playbooks, roles and plugins spell)."""
import os

import yaml

from ansible_collections.dlrack.node.plugins.plugin_utils import known_vars
from testpaths import ROOT


def test_every_role_option_and_the_playbooks_settings_are_known():
    known = known_vars.known_names()
    for spec in sorted(os.listdir(os.path.join(ROOT, "roles"))):
        with open(os.path.join(ROOT, "roles", spec, "meta", "argument_specs.yml")) as fh:
            doc = yaml.safe_load(fh)
        for entry in doc["argument_specs"].values():
            assert set(entry.get("options") or {}) <= known, spec
    # the playbooks' and the pre-flight's own settings (read in playbooks/*.yml and plugin_utils)
    assert {"dlrack_fail_on", "dlrack_report_dir", "dlrack_profile", "dlrack_hw", "dlrack_become", "dlrack_serial",
            "dlrack_declare_dir", "dlrack_declare_overwrite", "dlrack_task_timeout", "dlrack_junit_warnings",
            "dlrack_gather", "dlrack_use_fact_cache", "dlrack_scheduler", "dlrack_hosts", "dlrack_ecc"} <= known
    assert known_vars.prefixes() == ("dlrack_", "acceptance_", "ecc_monitor_", "gpu_affinity_", "preflight_",
                                     "scheduler_", "storage_tiers_")


def test_the_issues_misspellings_are_named_with_the_closest_known_name():
    names = ["dlrack_failon", "dlrack_profle", "acceptance_hot_pth", "dlrack_fail_on", "storage_tiers_hot_devices",
             "ansible_host", "my_own_var", "__dlrack_site_error", "dlrack_zzzz_qqqq_xxxx"]
    assert known_vars.unknown_variables(names) == [
        ("acceptance_hot_pth", "acceptance_hot_path"), ("dlrack_failon", "dlrack_fail_on"),
        ("dlrack_profle", "dlrack_profile"), ("dlrack_zzzz_qqqq_xxxx", None)]
    text = known_vars.warnings_for(known_vars.unknown_variables(["dlrack_failon", "dlrack_zzzz_qqqq_xxxx"]))
    assert text == ["dlrack.node: the variable dlrack_failon is set (extra vars or the inventory) but no role or playbook "
                    "of dlrack.node reads it, so it changes nothing; did you mean dlrack_fail_on?",
                    "dlrack.node: the variable dlrack_zzzz_qqqq_xxxx is set (extra vars or the inventory) but no role or "
                    "playbook of dlrack.node reads it, so it changes nothing; docs/roles.md lists every role variable"]


def test_many_unknown_names_are_bounded():
    found = known_vars.unknown_variables(["dlrack_typo_%03d" % i for i in range(100)])
    text = known_vars.warnings_for(found)
    assert len(text) == known_vars.MAX_WARNINGS + 1 and text[-1].startswith("dlrack.node: 80 more variable(s)")


def test_the_example_inventory_sets_no_unknown_name():
    names = set()
    for top, dummy, files in os.walk(os.path.join(ROOT, "inventories", "example")):
        for name in files:
            with open(os.path.join(top, name)) as fh:
                doc = yaml.safe_load(fh)
            stack = [doc]
            while stack:
                item = stack.pop()
                if isinstance(item, dict):
                    names.update(k for k in item if isinstance(k, str))
                    stack.extend(item.values())
    assert "dlrack_hw" in names and known_vars.unknown_variables(names) == []


def test_the_preflights_own_slice_artifacts_are_known():
    """An AWX workflow hands the pre-flight's artifacts to every later job node as extra variables:
    dlrack_preflight_slice_<16 hex> (one per slice) is the collection's own, never a misspelling;
    a name that only looks like one is still named."""
    from ansible_collections.dlrack.node.plugins.plugin_utils.report_merge import slice_artifact
    key = slice_artifact(["gpu-a01", "gpu-a02"], {"gpu-a01": "pass", "gpu-a02": "fail"}, ["gpu-a02"], "error")[0]
    assert known_vars.unknown_variables([key, "dlrack_preflight_failed_hosts", "dlrack_preflight_slice_xyz"]) == [
        ("dlrack_preflight_slice_xyz", "dlrack_preflight_slice")]
