# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible's privilege-escalation errors as one sentence that says what to set (issue 30.7).

Every play of site.yml, preflight.yml and drift.yml runs with ``become: dlrack_become`` (default
true: sudo). A login user without sudo gets Ansible's raw error instead - "Premature end of stream
waiting for become success" with "sudo: not found" (no sudo at all; captured with ansible-core
2.19.14 as an ordinary user, tests/unit/plugins/plugin_utils/test_become.py), "Missing sudo
password" / "Incorrect sudo password" (ansible/plugins/connection/ssh.py raises these),
"Timeout (12s) waiting for privilege escalation prompt" (the same file), sudo's own "is not in the
sudoers file" / "a password is required". explain() keeps that message and adds what to do.
sudo's "unable to resolve host <name>" is a warning that sudo prints and then runs the command
(a host name missing from /etc/hosts): a task that failed with it in its message failed for
another reason.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_BECOME = re.compile(r"waiting for become success|waiting for privilege escalation prompt|Missing \w+ password|"
                     r"Incorrect \w+ password|is not in the sudoers file|sudo: a (terminal|password) is required|"
                     r"may not run sudo|sudo: (not found|command not found|Permission denied)|sudo: unable to (?!resolve host)",
                     re.IGNORECASE)

ADVICE = ("cannot become root with sudo (dlrack_become is true): give the login user sudo rights (add -K when sudo "
          "asks for a password), or log in as root and run with -e dlrack_become=false -e ansible_user=root")


def is_become_error(message):
    """Whether ``message`` (a failed task's msg) is a privilege-escalation failure."""
    return bool(message) and _BECOME.search(str(message)) is not None


def explain(message):
    """``message`` with ADVICE in front when it is a privilege-escalation failure, else as it is."""
    text = "" if message is None else str(message)
    return "%s (Ansible said: %s)" % (ADVICE, text) if is_become_error(text) else text
