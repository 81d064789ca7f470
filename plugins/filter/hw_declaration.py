# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn gathered hardware facts into a declaration: hw_declaration, hw_declaration_yaml,
hw_declaration_host_error, hw_declaration_dir."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The documentation is one page per filter, as ansible-doc reads it: plugins/filter/<filter name>.yml.

from ansible.errors import AnsibleFilterError

from ansible_collections.dlrack.node.plugins.plugin_utils.declaration import (
    DeclarationError, declaration_from_gathered, declaration_yaml, declare_dir, host_error)


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


def hw_declaration_host_error(host):
    return host_error(host)


def hw_declaration_dir(path):
    try:
        return declare_dir(path)
    except DeclarationError as exc:
        raise AnsibleFilterError("hw_declaration_dir: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"hw_declaration": hw_declaration, "hw_declaration_yaml": hw_declaration_yaml,
                "hw_declaration_host_error": hw_declaration_host_error, "hw_declaration_dir": hw_declaration_dir}
