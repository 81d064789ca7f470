# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm hostlist form for the reports: the one implementation is node-side code,
plugins/module_utils/scheduler/hostlist.py (scontrol calls on the admin host and the node's own
health check use it too, and node-side code cannot import plugin_utils)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dlrack.node.plugins.module_utils.scheduler.hostlist import (
    HostlistError, compress, expand)

__all__ = ["HostlistError", "compress", "expand"]
