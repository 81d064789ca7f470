#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_code
short_description: Install files of this collection's plugins/module_utils on a node, in one call
version_added: "0.1.0"
description:
  - Copies the listed files of the collection's C(plugins/module_utils) (read on the controller by the action
    plugin of the same name) to C(<lib_dir>/ansible_collections/dlrack/node/plugins/module_utils/), the layout
    under which node-side programs import them (docs/node_code.md). Used by the roles that run collection code
    on nodes - M(dlrack.node.node_code) for C(ecc_monitor), C(gpu_affinity) and C(scheduler).
  - Decides for every file first (content by SHA-256, mode 0644 and owner root for files, 0755 root for the
    directories it creates) and writes only what differs, each file atomically (a temporary file renamed
    over it). One module run for all files, where M(ansible.builtin.copy) takes two per file.
  - Files it no longer lists are left in place.
options:
  files:
    description:
      - The files, as paths under C(plugins/module_utils) (C(hw/cpulist.py)); relative, lower-case Python names.
    type: list
    elements: str
    required: true
  lib_dir:
    description: The directory on the node's Python path that receives the collection's import path.
    type: path
    required: true
  content:
    description:
      - Set by the action plugin, not by a task - each file's text, read from the collection on the controller.
    type: dict
notes:
  - Needs root on the node (the files are owned by root).
attributes:
  check_mode:
    support: full
    description: Reports the files and directories that would change; writes nothing.
  diff_mode:
    support: full
    description: One line per directory and file that changes, with the files' SHA-256 before and after.
  platform:
    support: full
    platforms: posix
    description: Any POSIX node with Python 3.6 or later (the node-side programs need no more).
author:
  - dlrack.node contributors (@dlrack)
"""

EXAMPLES = r"""
- name: Install the ECC collector's Python
  dlrack.node.node_code:
    files: [ecc/metrics.py, ecc/edac.py, ecc/policy.py, system/command.py]
    lib_dir: /usr/local/lib/dlrack/python
"""

RETURN = r"""
updated:
  description: The files of O(files) that were (in check mode, would be) written, or their mode or owner fixed.
  type: list
  elements: str
  returned: always
  sample: [ecc/metrics.py]
directories:
  description: The directories that were (would be) created, or their mode or owner fixed.
  type: list
  elements: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dlrack.node.plugins.module_utils.system.node_code import NodeCodeError, apply, diff, plan


def main():
    module = AnsibleModule(
        argument_spec={"files": {"type": "list", "elements": "str", "required": True},
                       "lib_dir": {"type": "path", "required": True},
                       "content": {"type": "dict"}},
        supports_check_mode=True,
    )
    files, content = module.params["files"], module.params["content"] or {}
    missing = [f for f in files if f not in content]
    if missing:
        module.fail_json(msg="node_code: no content for %s - run the module through its action plugin "
                             "(dlrack.node.node_code), which reads the files from the collection" % ", ".join(missing[:5]))
    try:
        decided = plan(module.params["lib_dir"], dict((f, content[f]) for f in files))
        changed = bool(decided["dirs"] or decided["files"])
        result = {"changed": changed, "updated": [f[0] for f in decided["files"]], "directories": decided["dirs"]}
        if changed and module._diff:
            result["diff"] = diff(decided)
        if changed and not module.check_mode:
            apply(decided)
    except NodeCodeError as exc:
        module.fail_json(msg=str(exc))
    except (IOError, OSError) as exc:
        module.fail_json(msg="node_code: %s: %s" % (getattr(exc, "filename", None) or module.params["lib_dir"],
                                                    exc.strerror or exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
