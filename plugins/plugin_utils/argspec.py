# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An action plugin's options, validated against its module's DOCUMENTATION (controller only).

The collection's controller-side modules (preflight_report, acceptance_report, report_merge,
scheduler_plan) are documentation only: an action plugin of the same name does the work. Each
option's type, elements, choices, default and required are written once, in the module's
DOCUMENTATION, which ansible-doc and ansible-test validate-modules read; the action builds its
argument spec from it (argument_spec()) and validates its task's arguments with Ansible's own
ArgumentSpecValidator (validate()). That is the pattern of ansible.utils
(plugins/module_utils/common/argspec_validate.py, AnsibleArgSpecValidator with
schema_format="doc"), written here in a few lines because ansible.utils is not a dependency of
this collection (galaxy.yml)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # PyYAML without libyaml
    from yaml import SafeLoader as _Loader

# What an option's documentation says that is also an argument spec's key (the rest - description,
# version_added... - is for readers). suboptions become the spec's options.
OPTION_KEYS = ("type", "elements", "choices", "default", "required", "aliases", "no_log", "apply_defaults")


def _options_spec(options):
    spec = {}
    for name, doc in (options or {}).items():
        spec[name] = dict((key, doc[key]) for key in OPTION_KEYS if key in doc)
        if doc.get("suboptions"):
            spec[name]["options"] = _options_spec(doc["suboptions"])
    return spec


def argument_spec(documentation):
    """The argument spec ({option: {type, choices, default, ...}}) of a module's DOCUMENTATION
    (the YAML text)."""
    return _options_spec(yaml.load(documentation, Loader=_Loader).get("options"))


def validate(spec, args):
    """(validated parameters, error messages) of ``args`` against ``spec``. The spec is copied
    first, so that a default (a list, a dict) handed out in one result is never another's."""
    result = ArgumentSpecValidator(copy.deepcopy(spec)).validate(args)
    return result.validated_parameters, list(result.error_messages)


def task_args(name, spec, args, variables=None):
    """An action's validated options, or AnsibleActionFail with one sentence: ``name: <errors>``,
    and, where ``variables`` ({option: variable}) names the variable behind a wrong option,
    ``: set <option> (variable <variable>)``. The arguments are made plain first (Ansible 2.19's
    tagged values)."""
    from ansible.errors import AnsibleActionFail
    from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import _plain

    validated, errors = validate(spec, _plain(dict(args)))
    if errors:
        text = "; ".join(errors)
        named = ["%s (variable %s)" % (o, v) for o, v in sorted((variables or {}).items()) if o in text]
        raise AnsibleActionFail("%s: %s%s" % (name, text, (": set " + ", ".join(named)) if named else ""))
    return validated
