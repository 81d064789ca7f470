# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn gathered hardware facts into a declaration: hw_declaration, hw_declaration_yaml."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: hw_declaration
short_description: Turn a gathered dlrack_hw document into a declaration
version_added: 0.2.0
description:
  - Returns the C(dlrack_hw) document with C(source=declared) that a host gathered by
    C(dlrack.node.hw_facts) would be declared with, for the acceptance workflow (gather a golden
    node, save it as the declaration, check every delivered node against it).
  - Volatile values are left out (uptime, errors, current PCIe link speed, ECC/EDAC error
    counters, disk mounts/holders/partitions/signatures, the running kernel), and so are per-unit
    ids (GPU UUID and serial, disk serial/WWID/WWN/by-id links, hostname) unless O(identity=true).
  - C(hw_declaration_yaml) returns the text of a host_vars file (C(dlrack_hw:) plus a comment
    saying where it came from); C(playbooks/declare.yml) writes it.
positional: identity
options:
  _input:
    description: C(dlrack_hw_gathered) as returned by C(dlrack.node.hw_facts).
    type: dict
    required: true
  identity:
    description: Keep the per-unit ids, so that the declaration pins this very unit.
    type: bool
    default: false
  host:
    description: Host name written in the file's comment (C(hw_declaration_yaml) only).
    type: str
    default: host
author: dlrack.node contributors
"""

EXAMPLES = r"""
- name: Write this host's declaration next to the inventory
  ansible.builtin.copy:
    content: "{{ dlrack_hw_gathered | dlrack.node.hw_declaration_yaml(host=inventory_hostname) }}"
    dest: "inventories/rack1/host_vars/{{ inventory_hostname }}.yml"
    mode: "0644"
  delegate_to: localhost
"""

RETURN = r"""
_value:
  description: The declaration (C(hw_declaration)) or the host_vars file text (C(hw_declaration_yaml)).
  type: raw
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.dlrack.node.plugins.plugin_utils.declaration import (
    DeclarationError, declaration_from_gathered, declaration_yaml)


def hw_declaration(gathered, identity=False):
    try:
        return declaration_from_gathered(gathered, identity=bool(identity))
    except DeclarationError as exc:
        raise AnsibleFilterError("hw_declaration: %s" % exc)


def hw_declaration_yaml(gathered, identity=False, host="host"):
    try:
        return declaration_yaml(gathered, host, identity=bool(identity))
    except DeclarationError as exc:
        raise AnsibleFilterError("hw_declaration_yaml (%s): %s" % (host, exc))


class FilterModule(object):
    def filters(self):
        return {"hw_declaration": hw_declaration, "hw_declaration_yaml": hw_declaration_yaml}
