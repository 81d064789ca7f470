# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drift recorder, loaded by Ansible for every playbook of this folder without configuration.

Ansible loads the callback plugins of a ``callback_plugins/`` folder next to a playbook by itself
(playbook-adjacent plugins), also when the playbook runs from an installed collection
(``ansible-playbook dlrack.node.drift``). Plugins of a collection, by contrast, run only when
``callbacks_enabled`` names them, so drift.yml would write no report for a user who installed
the collection and has no such line. This file is the collection's own ``dlrack.node.drift``
callback (plugins/callback/drift.py), marked as not needing to be enabled. It records only in
plays that set ``dlrack_drift_file`` (drift.yml's), and it steps aside when the configuration
enables ``dlrack.node.drift`` as well, so the records are made once.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: dlrack_node_drift
type: aggregate
short_description: dlrack.node.drift, active for drift.yml without configuration
description:
  - The collection callback C(dlrack.node.drift) as a playbook-adjacent plugin of the collection's C(playbooks/) folder.
author: dlrack.node contributors (@dlrack)
"""

from ansible import constants as C
from ansible_collections.dlrack.node.plugins.callback.drift import CallbackModule as _DriftRecorder

_ENABLED_NAMES = ("dlrack.node.drift",)


class CallbackModule(_DriftRecorder):
    CALLBACK_NAME = "dlrack_node_drift"
    CALLBACK_NEEDS_ENABLED = False

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        # callbacks_enabled names the collection's callback too: that one records, this one not.
        self.disabled = any(name in _ENABLED_NAMES for name in (C.CALLBACKS_ENABLED or []))
