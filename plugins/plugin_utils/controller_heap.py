# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's heap and Python's garbage collector (controller only)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gc
import os


def freeze(environ=None, cli_args=None):
    """Move every object the Ansible controller holds when the preflight_report action is first
    loaded (the whole inventory: ~180,000 tracked containers for 2,000 declared hosts) into
    Python's permanent generation, so that the cyclic garbage collector stops walking it again and
    again.

    ansible-playbook loads an action plugin's class in its main process before it forks the
    worker for the task, so this runs there, once per run (the action calls it when it is
    imported). Measured on 2,000 declared hosts (benchmarks/RESULTS.md): a full collection of
    that heap takes 0.17-0.29 s, and a pre-flight run met two or three of them (while the play was
    processed, in the forked worker, and when the interpreter exits). It is the pattern Python
    documents for processes that fork without exec: no collection in the parent or in its
    children touches the frozen objects again. What it costs: a reference cycle that is already
    garbage at this moment is freed when the process ends instead of earlier; objects are still
    freed by reference counting, and what is created afterwards is collected as usual.

    Only under an Ansible command line (its options parsed: ``ansible.context.CLIARGS``), not
    when a test or another program imports the plugin; DLRACK_GC_FREEZE=false in the environment
    turns it off (the action's worker still freezes what it inherited: that process ends with the
    task). Returns whether it froze."""
    value = (os.environ if environ is None else environ).get("DLRACK_GC_FREEZE", "true")
    if str(value).strip().lower() in ("0", "false", "no", "off"):
        return False
    if cli_args is None:
        try:
            from ansible import context
            cli_args = context.CLIARGS
        except ImportError:
            cli_args = None
    if not cli_args:
        return False
    gc.freeze()
    return True
