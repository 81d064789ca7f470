#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: slurm_node
short_description: Drain or resume Slurm nodes with an owned reason, never touching a person's drain
version_added: "0.1.0"
description:
  - Reads the nodes' state and reason with C(scontrol show node -o) (one call per O(batch) nodes, as a
    hostlist), decides per node, changes the nodes that need it with one C(scontrol update) per batch and
    reads them back.
  - "The reason grammar is C(dlrack: <rule ids> <run id>) (rule ids comma separated). A node whose reason
    follows it is ours; any other reason belongs to a person or another tool and the node is left alone
    with its reason kept (LBNL NHC's node-mark-offline/online rule)."
  - O(state=drain) drains nodes that are up and not drained; a node already drained by us for the same
    rule ids is unchanged (a new run id alone is no change), its reason is updated when the rule ids differ.
  - O(state=resume) resumes only nodes drained with our reason.
  - Nodes in states where a drain means nothing are skipped with a message - DOWN, UNKNOWN (never
    registered), FUTURE, ERROR, powered down or powering up/down (CLOUD, POWERED_DOWN), rebooting, PLANNED -
    as are names Slurm does not know.
options:
  nodes:
    description: Slurm node names (not hostlist expressions).
    type: list
    elements: str
    required: true
  state:
    description: C(drain) or C(resume).
    type: str
    choices: [drain, resume]
    required: true
  reason:
    description:
      - "The drain reason, in the grammar C(dlrack: <rule ids> <run id>), at most 240 characters. Required for
        O(state=drain)."
    type: str
  scontrol:
    description: The scontrol program.
    type: path
    default: scontrol
  timeout:
    description: Seconds each scontrol call may take before it is killed.
    type: int
    default: 30
  batch:
    description: Nodes per scontrol call.
    type: int
    default: 200
attributes:
  check_mode:
    support: full
    description: Reads the nodes only and reports what would be drained or resumed.
  diff_mode:
    support: full
    description: Each node's state and reason before and after.
  platform:
    support: full
    platforms: posix
    description: A host where C(scontrol) reaches slurmctld (the scheduler's admin host or a node).
notes:
  - Tested against Slurm 22.05 (Debian 12) in molecule/scheduler.
seealso:
  - name: LBNL Node Health Check helpers
    description: node-mark-offline / node-mark-online, the ownership rule this module follows.
    link: https://github.com/mej/nhc/tree/master/helpers
author:
  - dlrack.node contributors (@dlrack)
"""

EXAMPLES = r"""
- name: Drain the nodes that failed this run
  dlrack.node.slurm_node:
    nodes: [gpu01, gpu07]
    state: drain
    reason: "dlrack: gpu.pcie_link 20261201T163000Z-0a1b2c3d4e5f"

- name: Put back the nodes that pass (only those we drained)
  dlrack.node.slurm_node:
    nodes: [gpu02, gpu03]
    state: resume
"""

RETURN = r"""
drained:
  description: Nodes drained (or whose dlrack reason was updated) by this call; read back from slurmctld.
  type: list
  elements: str
  returned: always
resumed:
  description: Nodes resumed by this call; read back from slurmctld.
  type: list
  elements: str
  returned: always
would:
  description: In check mode, the nodes that would be drained or resumed.
  type: list
  elements: str
  returned: always
unchanged:
  description: Nodes that needed nothing (already in the wanted state, or drained by someone else).
  type: list
  elements: str
  returned: always
left_alone:
  description: Nodes with a reason that is not ours, with that reason (kept).
  type: list
  elements: dict
  returned: always
skipped_nodes:
  description: Nodes skipped for their state (C(node), C(state), C(why)).
  type: list
  elements: dict
  returned: always
failed:
  description: Nodes scontrol did not change as asked (read back).
  type: list
  elements: dict
  returned: always
messages:
  description: One line per skipped, left-alone or failed node.
  type: list
  elements: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dlrack.node.plugins.module_utils.scheduler.slurm import Scontrol, SlurmError, apply


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="list", elements="str", required=True),
            state=dict(type="str", choices=["drain", "resume"], required=True),
            reason=dict(type="str"),
            scontrol=dict(type="path", default="scontrol"),
            timeout=dict(type="int", default=30),
            batch=dict(type="int", default=200),
        ),
        required_if=[("state", "drain", ["reason"])],
        supports_check_mode=True,
    )
    p = module.params
    if p["timeout"] < 1 or p["batch"] < 1:
        module.fail_json(msg="slurm_node: timeout and batch must be at least 1")
    path = p["scontrol"]
    if "/" not in path:
        path = module.get_bin_path(path) or path
    try:
        res = apply(Scontrol(path=path, timeout=p["timeout"], batch=p["batch"]), p["nodes"], p["state"],
                    p["reason"], check_mode=module.check_mode)
    except SlurmError as exc:
        module.fail_json(msg="slurm_node: %s" % exc, changed=False)
    before, after = res.pop("before"), res.pop("after")
    res["diff"] = {"before": "".join("%s: %s\n" % kv for kv in sorted(before.items())),
                   "after": "".join("%s: %s\n" % kv for kv in sorted(after.items()))}
    if res["failed"]:
        module.fail_json(msg="slurm_node: " + res["messages"][-1], **res)
    module.exit_json(**res)


if __name__ == "__main__":
    main()
