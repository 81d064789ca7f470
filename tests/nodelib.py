"""Node-side Python as the roles install it (docs/node_code.md): shared by tests/unit/roles."""
import os
import shutil

import yaml

from testpaths import ROOT  # noqa: E402  (tests/ is on sys.path: conftest)
PKG = os.path.join("ansible_collections", "dlrack", "node", "plugins", "module_utils")
NODE_ROLES = ("ecc_monitor", "gpu_affinity", "scheduler")


def role_vars(role, root=ROOT):
    with open(os.path.join(root, "roles", role, "vars", "main.yml")) as f:
        return yaml.safe_load(f)


def module_utils_files(role, root=ROOT):
    return role_vars(role, root)["__%s_module_utils" % role]


def install_node_lib(lib, roles=NODE_ROLES, root=ROOT):
    """Do what the roles' copy tasks do: each role's files from role_path/../../plugins/module_utils
    to <lib>/ansible_collections/dlrack/node/plugins/module_utils, plus dlrack_affinity.py."""
    for role in roles:
        role_path = os.path.join(root, "roles", role)
        src = os.path.join(role_path, "..", "..", "plugins", "module_utils")
        for name in module_utils_files(role, root):
            dest = os.path.join(lib, PKG, name)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(os.path.join(src, name), dest)
        if role == "gpu_affinity":
            shutil.copyfile(os.path.join(role_path, "files", "dlrack_affinity.py"),
                            os.path.join(lib, "dlrack_affinity.py"))
    return str(lib)
