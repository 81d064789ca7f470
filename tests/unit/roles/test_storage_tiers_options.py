"""Storage options are defined once (storage_plan.OPTIONS); the module's argument_spec is generated
from it, and this test holds the role's defaults, meta/argument_specs.yml, the planning task and
the module DOCUMENTATION to it, so a sixth spelling cannot drift."""
import os
import re

import yaml

from ansible_collections.dlrack.node.plugins.module_utils.storage import plan as sp
from ansible_collections.dlrack.node.plugins.modules import storage_tiers_plan as mod

from conftest import ROOT

ROLE = os.path.join(ROOT, "roles", "storage_tiers")
PREFIX = "storage_tiers_"


def load(*parts):
    with open(os.path.join(ROLE, *parts)) as fh:
        return yaml.safe_load(fh)


def test_argument_specs_match_the_planner_options():
    specs = load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    planner = dict((k[len(PREFIX):], v) for k, v in specs.items() if k[len(PREFIX):] in sp.OPTIONS)
    assert sorted(planner) == sorted(sp.OPTIONS)
    for name, opt in sp.OPTIONS.items():
        role = planner[name]
        assert role["type"] == opt["type"], name
        assert role.get("default") == opt["default"], name
        assert role.get("choices") == opt.get("choices"), name
        assert role.get("elements") == opt.get("elements"), name


def test_role_defaults_match_the_planner_options():
    defaults = load("defaults", "main.yml")
    for name, opt in sp.OPTIONS.items():
        assert defaults[PREFIX + name] == opt["default"], name
    specs = load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert sorted(defaults) == sorted(specs)   # every role variable is specified, none forgotten


def test_the_task_passes_every_option_under_its_role_variable():
    tasks = load("tasks", "main.yml")
    (task,) = [t for t in tasks if "dlrack.node.storage_tiers_plan" in t]
    args = task["dlrack.node.storage_tiers_plan"]
    assert args.pop("var_prefix") == PREFIX
    assert args == dict((name, "{{ %s%s }}" % (PREFIX, name)) for name in sp.OPTIONS)


def test_module_documentation_and_argument_spec_match():
    doc = yaml.safe_load(mod.DOCUMENTATION)["options"]
    spec = sp.argument_spec()
    assert sorted(doc) == sorted(list(spec) + ["var_prefix"])
    for name, opt in spec.items():
        for key in ("type", "default", "choices", "elements"):
            assert doc[name].get(key) == opt.get(key), (name, key)
    # fresh copies: a module run cannot change the defaults of the next
    spec["hot_dirs"]["default"].append({"path": "x"})
    assert sp.argument_spec()["hot_dirs"]["default"] == sp.OPTIONS["hot_dirs"]["default"]


def test_module_utils_spell_no_role_variable():
    for name in ("storage/plan.py", "storage/blockdev.py"):
        with open(os.path.join(ROOT, "plugins", "module_utils", name)) as fh:
            assert not re.search(r"storage_tiers_(?!plan\b)", fh.read()), name   # the module's name is fine
