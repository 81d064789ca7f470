# -*- coding: utf-8 -*-
"""Rule modes (module_utils/scheduler/modes.py) and the pre-flight's shadow rules (rules.rule(shadow=True))."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.scheduler import modes
from ansible_collections.dlrack.node.plugins.plugin_utils import rules


def test_the_rules_of_0_1_stay_enforced_and_every_new_rule_starts_in_shadow():
    for rule_id in rules.RULE_IDS:
        if not rules._RULE_BY_ID[rule_id].shadow:
            assert modes.default_mode(rule_id) == "enforce", rule_id
    assert modes.default_mode("acceptance.fio_read") == "enforce"
    for new in ("gpu.xid", "gpu.nvlink_errors", "fleet.version_drift", "service.required", "pcie.acs"):
        assert modes.default_mode(new) == "shadow"


def test_run_wide_area_and_group_modes():
    assert modes.mode_of("gpu.xid", {"gpu.*": "enforce"}) == "enforce"
    assert modes.mode_of("gpu.xid", {"gpu.*": "enforce", "gpu.xid": "off"}) == "off"
    # groups win over the run-wide setting; where they disagree the mode that acts least wins
    group_modes = {"rack_a": {"gpu.xid": "enforce"}, "rack_b": {"gpu.xid": "shadow"}}
    assert modes.mode_of("gpu.xid", {"gpu.xid": "off"}, group_modes, ["rack_a"]) == "enforce"
    assert modes.mode_of("gpu.xid", {}, group_modes, ["rack_a", "rack_b"]) == "shadow"
    assert modes.mode_of("gpu.pcie_link", {}, group_modes, ["rack_b"]) == "enforce"
    assert modes.split(["gpu.pcie_link", "gpu.xid", "memory.ecc"], {"memory.ecc": "off"}) == (["gpu.pcie_link"], ["gpu.xid"])


@pytest.mark.parametrize("value, words", [
    ("enforce", "must be a mapping"),
    ({"gpu.xid": "on"}, "dlrack_rule_modes.gpu.xid is 'on': use enforce, shadow or off"),
    ({"GPU XID": "off"}, "is not a rule id"),
])
def test_bad_modes_are_one_sentence(value, words):
    with pytest.raises(modes.ModeError) as exc:
        modes.check_modes(value)
    assert words in str(exc.value)


def test_bad_group_modes_name_the_group():
    with pytest.raises(modes.ModeError) as exc:
        modes.check_group_modes({"rack a": {"gpu.xid": "off"}})
    assert "'rack a' is not an inventory group name" in str(exc.value)
    with pytest.raises(modes.ModeError) as exc:
        modes.check_group_modes({"rack_a": {"gpu.xid": "sometimes"}})
    assert "dlrack_rule_modes_groups.rack_a.gpu.xid is 'sometimes'" in str(exc.value)


def _shadow_ctx(monkeypatch, severity=None):
    monkeypatch.setattr(rules, "_SHADOW_RULES", ("gpu.pcie_link",))
    monkeypatch.setattr(rules, "_SETTINGS_CACHE", {})
    dummy, sev, problems = rules.resolve_settings("training", None, severity)
    assert problems == []
    ctx = rules._Ctx("gpu-a01", sev)
    ctx.rule = "gpu.pcie_link"
    return ctx


def test_a_shadow_rule_reports_what_it_would_be_and_does_not_fail_the_gate(monkeypatch):
    ctx = _shadow_ctx(monkeypatch)
    ctx.report("fail", 1, 2, "no NVLink", "fit the bridges")
    ctx.report("warn", None, 2, "cannot verify", "look")
    ctx.report("pass", 2, 2, "ok")
    fail, warn, ok = ctx.findings
    assert fail["severity"] == "warning" and fail["shadow"] == "error" and fail["message"] == "[shadow] no NVLink"
    assert warn["severity"] == "warning" and "shadow" not in warn
    assert ok["severity"] == "info" and "shadow" not in ok


def test_the_operator_enforces_a_shadow_rule_with_dlrack_severity(monkeypatch):
    ctx = _shadow_ctx(monkeypatch, {"gpu.pcie_link": "error"})
    ctx.report("fail", 1, 2, "no NVLink", "fit the bridges")
    assert ctx.findings[0]["severity"] == "error" and "shadow" not in ctx.findings[0]


def test_site_provisioned_is_new_and_starts_in_shadow():
    """A run outcome added since 0.1.0 is no exception: a role that fails on every host must not drain them."""
    assert modes.default_mode("site.provisioned") == "shadow"
    assert modes.mode_of("site.provisioned", {"site.provisioned": "enforce"}) == "enforce"
