#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done on the controller by plugins/action/inventory_check.py.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: inventory_check
short_description: Fail the run when the inventory is missing or only partly parsed
version_added: 0.1.0
description:
  - Runs on the controller and reads the inventory of the run. It fails, naming the source, when an
    inventory source given with C(-i) (or by C(ansible.cfg)) does not exist, when Ansible could not parse
    a source or one file of an inventory directory (Ansible only warns and goes on without its hosts),
    or when the inventory holds no host at all.
  - With a file-based fact cache (C(fact_caching=jsonfile), C(yaml), C(pickle)), which keeps one file per
    host name, it also fails naming each host whose name cannot be such a file (longer than 239 bytes,
    or holding a path separator or NUL); Ansible would otherwise fail deep in a task on that host.
  - Does not depend on C(unparsed_is_failed) or C(any_unparsed_is_failed) in C(ansible.cfg), so it also
    holds for users of the installed collection.
  - The collection's entry points (preflight.yml, site.yml through it, drift.yml, acceptance.yml) run it
    first, in a play on C(localhost), so that even an inventory without hosts fails the run.
  - Never connects to a host and never reports a change.
options: {}
attributes:
  check_mode:
    support: full
    description: It only reads the inventory.
  diff_mode:
    support: none
    description: Nothing changes.
  platform:
    support: full
    platforms: posix
    description: Runs on the controller.
author:
  - dlrack.node contributors (@dlrack)
"""

EXAMPLES = r"""
- name: The inventory is whole
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Fail closed on a broken inventory
      dlrack.node.inventory_check:
"""

RETURN = r"""
msg:
  description: What was found when nothing was wrong.
  returned: success
  type: str
  sample: "inventory: every source parsed"
"""
