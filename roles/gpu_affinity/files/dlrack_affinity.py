# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``import dlrack_affinity`` on a GPU node: the collection's node-side gpu_bind module.

The dlrack.node.gpu_affinity role installs this file next to the copied package tree
(ansible_collections/dlrack/node/plugins/module_utils/) in the same directory, which
dlrack-gpu-bind puts on PYTHONPATH (see docs/node_code.md). This module *is* gpu_bind: the name
is an alias, so WorkerPinner pickles and unpickles the same in DataLoader workers.
"""
import sys

from ansible_collections.dlrack.node.plugins.module_utils.programs import gpu_bind

sys.modules[__name__] = gpu_bind
