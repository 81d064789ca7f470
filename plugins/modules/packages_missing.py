#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: packages_missing
short_description: Which packages are not installed, decided read-only (check mode without python3-apt)
version_added: "0.1.0"
description:
  - Asks the package database with its own query tool - C(dpkg-query) on Debian/Ubuntu, C(rpm -q --whatprovides)
    on the RHEL family - which of O(name) are not installed. Installs nothing.
  - In check mode a missing package is a change (C(changed=true), "would install ..."), so a drift
    check reports it; outside check mode it only reports, and the roles install RV(missing) with
    M(ansible.builtin.package). M(ansible.builtin.apt) and M(ansible.builtin.dnf) cannot run in check
    mode when the interpreter has no python3-apt / dnf bindings (a venv, a conda env); this module
    needs no bindings.
  - Use RV(install) (not the C(ansible_check_mode) variable) to decide whether to install - a play's
    C(check_mode) keyword does not set that variable, while the module knows whether it runs in check mode.
options:
  name:
    description:
      - Package names. Debian - C(NAME[:ARCH][=VERSION]) as apt takes them. RHEL - package names or
        capabilities.
    type: list
    elements: str
    required: true
  manager:
    description: C(auto) picks C(dpkg) where C(dpkg-query) exists, else C(rpm).
    type: str
    choices: [auto, dpkg, rpm]
    default: auto
attributes:
  check_mode:
    support: full
    description: Reads the package database only; in check mode missing packages are reported as a change.
  diff_mode:
    support: full
    description: The packages that would be installed.
  platform:
    support: full
    platforms: posix
    description: Debian/Ubuntu (dpkg) and RHEL-family (rpm) hosts.
author:
  - dlrack.node contributors (@dlrack)
"""

EXAMPLES = r"""
- name: Find the missing packages (read-only; in check mode "would install")
  dlrack.node.packages_missing:
    name: [rasdaemon, edac-utils]
  register: pkgs

- name: Install only what is missing
  ansible.builtin.package:
    name: "{{ pkgs.install }}"
    state: present
  when: pkgs.install | length > 0
"""

RETURN = r"""
missing:
  description: The packages of O(name) that are not installed.
  type: list
  elements: str
  returned: always
  sample: [rasdaemon]
install:
  description: What to install now - RV(missing) outside check mode, nothing in check mode (where
    the missing packages are reported as a change instead).
  type: list
  elements: str
  returned: always
present:
  description: The packages of O(name) that are installed.
  type: list
  elements: str
  returned: always
manager:
  description: The package database asked.
  type: str
  returned: always
  sample: dpkg
"""


from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dlrack.node.plugins.module_utils.system.packages import (
    PackageQueryError, choose_manager, missing_packages)


def main():
    module = AnsibleModule(
        argument_spec={"name": {"type": "list", "elements": "str", "required": True},
                       "manager": {"type": "str", "choices": ["auto", "dpkg", "rpm"], "default": "auto"}},
        supports_check_mode=True,
    )
    names = [n.strip() for n in module.params["name"] if n and n.strip()]
    try:
        manager = module.params["manager"]
        if manager == "auto":
            manager = choose_manager(module.get_bin_path)
        # the bounded runner (system/command.py): LC_ALL=C, each query limited in time and output
        missing = missing_packages(names, manager)
    except PackageQueryError as exc:
        module.fail_json(msg=str(exc))
    present = [n for n in names if n not in missing]
    result = {"missing": missing, "present": present, "manager": manager, "changed": False,
              "install": [] if module.check_mode else missing}
    if missing:
        result["msg"] = "%s: %s" % ("would install" if module.check_mode else "missing", ", ".join(missing))
        if module.check_mode:
            result["changed"] = True
            if module._diff:
                result["diff"] = {"before": "", "after": "".join("install %s\n" % m for m in missing),
                                  "before_header": "packages", "after_header": "packages"}
    else:
        result["msg"] = "installed: %s" % (", ".join(present) or "nothing asked")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
