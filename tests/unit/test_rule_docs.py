"""The rules and profiles tables of README.md and docs/dlrack_hw.md are generated from the rule
registry (scripts/gen-rule-docs.py) and a stale one fails here."""
import importlib.util
import os
import subprocess
import sys

import pytest

from testpaths import ROOT  # noqa: E402  (tests/ is on sys.path: conftest)

from ansible_collections.dlrack.node.plugins.plugin_utils import rules

SCRIPT = os.path.join(ROOT, "scripts", "gen-rule-docs.py")


def _gen():
    spec = importlib.util.spec_from_file_location("gen_rule_docs", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_rule_tables_in_the_docs_are_current():
    proc = subprocess.run([sys.executable, SCRIPT, "--check"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout


def test_every_rule_and_profile_is_in_the_generated_tables():
    gen = _gen()
    table = "\n".join(gen.rules_table(rules))
    for r in rules.registry():
        assert "| `%s` | " % r.id in table and table.count("`%s`" % r.id) == 1
    assert "`recommended_cores_per_gpu` (%g)" % rules.DEFAULT_THRESHOLDS["recommended_cores_per_gpu"] in table
    profiles = "\n".join(gen.profiles_table(rules))
    for name, prof in rules.PROFILES.items():
        assert "| `%s`" % name in profiles
        for rid, level in prof["severity"].items():
            row = next(line for line in profiles.splitlines() if line.startswith("| `%s`" % name))
            assert "`%s`" % rid in row and level in row


def test_a_stale_table_is_rewritten_and_text_around_it_is_kept():
    gen = _gen()
    text = ("before\n<!-- generated: rules by hand -->\n| id | rule |\n|---|---|\n| `memory.ecc` | old text | error |\n"
            "<!-- /generated: rules -->\nafter\n")
    new = gen.render(text, {"rules": gen.rules_table(rules)})
    assert new.startswith("before\n<!-- generated: rules by hand -->\n| id | rule | default severity")
    assert new.endswith("<!-- /generated: rules -->\nafter\n") and "old text" not in new
    assert gen.render(new, {"rules": gen.rules_table(rules)}) == new
    with pytest.raises(ValueError):
        gen.render("no markers\n", {"rules": gen.rules_table(rules)})
