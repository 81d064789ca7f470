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
    """Do what the roles' dlrack.node.node_code tasks do: each role's files from the collection's
    plugins/module_utils to <lib>/ansible_collections/dlrack/node/plugins/module_utils (as root,
    with the module's own code; elsewhere a plain copy), plus dlrack_affinity.py."""
    from ansible_collections.dlrack.node.plugins.module_utils.system import node_code
    for role in roles:
        role_path = os.path.join(root, "roles", role)
        src = os.path.join(root, "plugins", "module_utils")
        files = module_utils_files(role, root)
        if os.geteuid() == 0:
            contents = {}
            for name in files:
                with open(os.path.join(src, name)) as f:
                    contents[name] = f.read()
            node_code.apply(node_code.plan(os.path.abspath(str(lib)), contents))
        for name in files if os.geteuid() != 0 else ():
            dest = os.path.join(lib, PKG, name)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(os.path.join(src, name), dest)
        if role == "gpu_affinity":
            shutil.copyfile(os.path.join(role_path, "files", "dlrack_affinity.py"),
                            os.path.join(lib, "dlrack_affinity.py"))
    return str(lib)
