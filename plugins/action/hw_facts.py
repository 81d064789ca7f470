# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's side of dlrack.node.hw_facts: run the module on the node, keep only its
document.

A node controls its whole module result (a compromised one answers anything), and Ansible turns
every key of a result's ``ansible_facts`` into a variable of that host, above the inventory and
the play's vars: ``ansible_facts: {preflight_fail_on: never, dlrack_report_dir: X}`` from the
first host of a run would open the gate and move the reports, ``dlrack_hw: ...`` would replace
the host's declaration, ``ansible_stats`` would write the run's stats. So what comes back is only
``dlrack_hw_gathered`` (in ``ansible_facts``, and as ``dlrack_hw``); any other fact or key is left
out with a warning naming it, ``changed`` is always false (the module only reads), and what the
console shows of the node's answer (warnings, a failure's message) has its control characters
escaped (plugin_utils/safe_text.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import console

FACT = "dlrack_hw_gathered"
# What a module result carries beside its facts that Ansible or this action may keep.
_KEPT = frozenset(("changed", "failed", "msg", "dlrack_hw", "ansible_facts", "warnings", "deprecations", "command_failures",
                   "invocation", "_ansible_parsed", "_ansible_no_log", "skipped", "exception", "module_stdout",
                   "module_stderr", "rc", "stdout", "stderr", "stdout_lines", "stderr_lines"))
MAX_MESSAGE = 2000   # characters of a node's failure message or warning shown on the console
MAX_WARNINGS = 20


def _short(text):
    text = console(text)
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "... (%d characters)" % len(text)


def sanitize(raw):
    """The result to hand to Ansible for a module result ``raw`` (see the module docstring)."""
    raw = raw if isinstance(raw, dict) else {}
    facts = raw.get("ansible_facts")
    facts = facts if isinstance(facts, dict) else {}
    ignored = sorted(console(k) for k in facts if k != FACT)
    ignored += sorted("%s (result key)" % console(k) for k in raw if k not in _KEPT)
    out = {"changed": False}
    warnings = raw.get("warnings")
    out["warnings"] = [_short(w) for w in warnings[:MAX_WARNINGS]] if isinstance(warnings, list) else []
    if ignored:
        out["warnings"].append(
            "hw_facts: left out what the node returned besides %s (a node cannot set other variables, "
            "the run's settings or stats): %s" % (FACT, ", ".join(ignored[:12]) + (
                " and %d more" % (len(ignored) - 12) if len(ignored) > 12 else "")))
    if raw.get("failed"):
        out.update(failed=True, msg=_short(raw.get("msg") or "hw_facts failed on the node"))
        for key in ("module_stdout", "module_stderr", "rc", "exception"):
            if key in raw:
                out[key] = _short(raw[key]) if isinstance(raw[key], str) else raw[key]
        # a command past its limit: the names and limits (console text), and what was read (data)
        if isinstance(raw.get("command_failures"), list):
            out["command_failures"] = [_short(c) for c in raw["command_failures"][:MAX_WARNINGS]]
        if isinstance(raw.get("dlrack_hw"), dict):
            out["dlrack_hw"] = raw["dlrack_hw"]
        return out
    doc = facts.get(FACT)
    if not isinstance(doc, dict):
        out.update(failed=True, msg="hw_facts: the node's answer holds no %s document (a mapping) in "
                                    "ansible_facts; got %s" % (FACT, type(doc).__name__))
        return out
    out["dlrack_hw"] = doc
    out["ansible_facts"] = {FACT: doc}
    return out


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        raw = self._execute_module(task_vars=task_vars)
        result.update(sanitize(raw))
        if not result["warnings"]:
            result.pop("warnings")
        return result
