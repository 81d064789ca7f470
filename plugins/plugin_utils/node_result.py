# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the controller keeps of a module result that a node returned (issue 28.1; docs/trust.md).

A node controls its whole module result, and Ansible acts on some keys of any result, whatever
the module: ``ansible_facts`` become the host's variables (above the inventory and role
defaults, and cached for 24 h by the jsonfile fact cache), ``ansible_stats`` the run's custom
stats (AWX), ``add_host`` adds a host with variables, ``add_group`` puts the host in a group (and
so under that group's variables). None of the collection's node-side modules returns any of
them (dlrack.node.hw_facts returns one fact and has its own filter), so their action plugins
(plugins/action/{node_code,acceptance_measure,storage_tiers_plan,md_array,packages_missing,
slurm_node}.py, through NodeModuleAction) drop them, and Ansible's private ``_ansible_*`` keys
except the two a module may set, with a warning naming what was left out."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import console

# Keys of a result that Ansible turns into variables, stats, hosts or groups.
STEERING = frozenset(("ansible_facts", "ansible_stats", "add_host", "add_group"))
# Private keys a module's result may carry (AnsibleModule sets them); any other _ansible_* is Ansible's own.
PRIVATE_KEPT = frozenset(("_ansible_no_log", "_ansible_parsed"))
MAX_NAMES = 12


def filter_result(raw, module):
    """``raw`` without the keys a node must not set; the names left out in a warning."""
    raw = raw if isinstance(raw, dict) else {}
    left_out = sorted(k for k in raw if k in STEERING or (isinstance(k, str) and k.startswith("_ansible_") and k not in PRIVATE_KEPT))
    out = dict((k, v) for k, v in raw.items() if k not in left_out)
    if left_out:
        names = []
        for key in left_out:
            facts = raw[key] if key == "ansible_facts" and isinstance(raw[key], dict) else None
            names.append("ansible_facts (%s)" % ", ".join(console(n) for n in sorted(facts, key=str)[:MAX_NAMES])
                         if facts else console(key))
        warnings = list(out.get("warnings") or []) if isinstance(out.get("warnings"), list) else []
        warnings.append("%s: left out what the node returned that Ansible would turn into variables, stats, hosts or groups "
                        "(a node cannot set them): %s" % (module, ", ".join(names[:MAX_NAMES]) + (
                            " and %d more" % (len(names) - MAX_NAMES) if len(names) > MAX_NAMES else "")))
        out["warnings"] = warnings
    return out


class NodeModuleAction(ActionBase):
    """The action plugin of a module that runs on a node: run it, keep what filter_result keeps."""

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(NodeModuleAction, self).run(tmp, task_vars)
        raw = self._execute_module(task_vars=task_vars)
        result.update(filter_result(raw, self._task.action))
        return result
