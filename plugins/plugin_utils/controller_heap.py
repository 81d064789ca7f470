# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's heap and Python's garbage collector (controller only): the freeze is part of
the fleet fast path and lives in plugin_utils/fastpath.py (controller_freeze, with the
DLRACK_FAST_PATH switch and DLRACK_GC_FREEZE); this name stays for the actions that call it."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dlrack.node.plugins.plugin_utils.fastpath import controller_freeze as freeze  # noqa: F401 pylint: disable=unused-import
