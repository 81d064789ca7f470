# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters console_text (node strings for the console, control characters escaped) and host_list
(host names for the console, escaped and bounded)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The documentation is one page per filter, as ansible-doc reads it: plugins/filter/<filter name>.yml.

from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import HOST_LIST_MAX_CHARS, console
from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import host_list as _host_list


def console_text(value, sep="; "):
    if isinstance(value, (list, tuple)):
        return sep.join(console(v) for v in value)
    return console(value)


def host_list(value, max_chars=HOST_LIST_MAX_CHARS):
    names = list(value) if isinstance(value, (list, tuple, set)) else [value]
    return _host_list(names, max_chars=int(max_chars)) if names else "none"


class FilterModule(object):
    def filters(self):
        return {"console_text": console_text, "host_list": host_list}
