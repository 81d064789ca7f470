"""dlrack.node as a user gets it, for the integration tests: built with ansible-galaxy from a clean
copy of this checkout, installed offline into an empty collections path, used from a folder
OUTSIDE the repository with an environment that has no ANSIBLE_* of this project and no
ansible.cfg in reach (tests/integration/test_collection.py, test_doc_blocks.py)."""
import os
import subprocess

from testpaths import ROOT, build_collection

VENV_BIN = os.path.join(ROOT, ".venv", "bin")
# The dependencies (ansible.posix, community.general, containers.podman) as bootstrap.sh extracts
# them; NOT .collections, which links this checkout itself as dlrack.node.
DEPS = os.path.join(ROOT, ".venv", "collections")


def clean_env(tmp):
    """The environment of a user's shell: no ANSIBLE_* of this project, no ansible.cfg in reach."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(PATH=VENV_BIN + os.pathsep + env.get("PATH", ""), ANSIBLE_HOME=os.path.join(tmp, "ansible-home"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", PYTHONDONTWRITEBYTECODE="1")
    return env


def run(argv, cwd, env, timeout=300, **kwargs):
    return subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout, check=False, **kwargs)


def install(tmp):
    """Build the tarball from the files git would commit (uncommitted edits included, ignored
    files such as .venv or reports not), install it offline into tmp/installed; the paths."""
    env = clean_env(tmp)
    tarball = build_collection(tmp, env)
    dest = os.path.join(tmp, "installed")
    env_deps = dict(env, ANSIBLE_COLLECTIONS_PATH=DEPS)   # --offline: dependencies already present
    proc = run(["ansible-galaxy", "collection", "install", "--offline", "-p", dest, tarball], cwd=tmp, env=env_deps)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "dlrack.node:" in proc.stdout and "installed successfully" in proc.stdout
    user = os.path.join(tmp, "user")        # the user's working folder: no ansible.cfg
    os.makedirs(user)
    env_user = dict(env, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([dest, DEPS]))
    return {"tarball": tarball, "coll": os.path.join(dest, "ansible_collections", "dlrack", "node"),
            "collections": dest, "user": user, "env": env_user, "tmp": tmp}
