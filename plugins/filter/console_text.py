# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter console_text: node strings for the console, control characters escaped."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The documentation is one page per filter, as ansible-doc reads it: plugins/filter/<filter name>.yml.

from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import console


def console_text(value, sep="; "):
    if isinstance(value, (list, tuple)):
        return sep.join(console(v) for v in value)
    return console(value)


class FilterModule(object):
    def filters(self):
        return {"console_text": console_text}
