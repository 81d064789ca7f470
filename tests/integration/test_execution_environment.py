"""The AWX / Automation Platform execution environment: ansible-builder renders its build context
with dlrack.node inside (nothing is built or pulled: no registry is reachable here), the collection
requirements it would install resolve offline, and the introspection of the installed collection,
which is what ansible-builder runs inside the image, asks for controller-side dependencies only:
no dev/test pins (molecule, pytest...) and no tools of the managed nodes (mdadm, nvme-cli...)."""
import ast
import os
import re
import shutil
import subprocess

import pytest
import yaml
from testpaths import ROOT, build_collection

BIN = os.path.join(ROOT, ".venv", "bin")
DEPS = os.path.join(ROOT, ".venv", "collections")   # ansible.posix, community.general (bootstrap.sh)

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, ".git")),
                                reason="needs a git checkout (builds the collection from the files git would commit)")


def _env(tmp):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(PATH=BIN + os.pathsep + env.get("PATH", ""), ANSIBLE_HOME=os.path.join(tmp, "ansible-home"),
               ANSIBLE_NOCOLOR="1")
    return env


def _run(argv, cwd, env):
    return subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("ee"))
    env = _env(tmp)
    tarball = build_collection(os.path.join(tmp, "build"), env)
    os.makedirs(os.path.join(tmp, "dist"))
    shutil.copy(tarball, os.path.join(tmp, "dist"))
    shutil.copy(os.path.join(ROOT, "execution-environment.yml"), tmp)
    # --output-filename: without it the name depends on whether podman (Containerfile) or only
    # docker (Dockerfile) is installed.
    proc = _run(["ansible-builder", "create", "-f", "execution-environment.yml", "-c", "context",
                 "--output-filename", "Containerfile"], cwd=tmp, env=env)
    assert proc.returncode == 0, proc.stdout
    return {"tmp": tmp, "ctx": os.path.join(tmp, "context"), "tarball": tarball, "env": env}


def test_ansible_builder_renders_the_context_with_dlrack_node(context):
    with open(os.path.join(context["ctx"], "Containerfile")) as fh:
        containerfile = fh.read()
    assert 'ANSIBLE_INSTALL_REFS="ansible-core==2.19.14 ansible-runner==2.4.3"' in containerfile
    assert "ansible-galaxy collection install" in containerfile and "COPY _build /build" in containerfile
    with open(os.path.join(context["ctx"], "_build", "requirements.yml")) as fh:
        reqs = yaml.safe_load(fh)["collections"]
    local = [r for r in reqs if r.get("type") == "file"]
    assert len(local) == 1
    # the tarball the requirements name is in the build context, and it is this collection
    in_ctx = os.path.join(context["ctx"], "_build", local[0]["name"][len("/build/"):])
    assert os.path.isfile(in_ctx)
    assert os.path.basename(in_ctx) == os.path.basename(context["tarball"]), \
        "execution-environment.yml names %s but galaxy.yml builds %s" % (
            os.path.basename(in_ctx), os.path.basename(context["tarball"]))
    # no requirement files of the repository root leak into the EE definition
    assert not os.path.exists(os.path.join(context["ctx"], "_build", "requirements.txt"))
    assert not os.path.exists(os.path.join(context["ctx"], "_build", "bindep.txt"))


def test_collection_requirements_install_offline_and_introspect_to_runtime_only(context):
    """What the galaxy stage of the image does (ansible-galaxy install -r requirements.yml), offline
    and with the dependencies present, then what the builder stage does (introspect)."""
    build = os.path.join(context["ctx"], "_build")
    with open(os.path.join(build, "requirements.yml")) as fh:
        text = fh.read().replace("/build/", build + "/")
    req = os.path.join(context["tmp"], "requirements.yml")
    with open(req, "w") as fh:
        fh.write(text)
    dest = os.path.join(context["tmp"], "ee-collections")
    proc = _run(["ansible-galaxy", "collection", "install", "--offline", "-r", req, "-p", dest], cwd=context["tmp"],
                env=dict(context["env"], ANSIBLE_COLLECTIONS_PATH=DEPS))
    assert proc.returncode == 0, proc.stdout
    coll = os.path.join(dest, "ansible_collections", "dlrack", "node")
    assert os.path.isfile(os.path.join(coll, "meta", "execution-environment.yml"))

    proc = _run(["ansible-builder", "introspect", "--sanitize", dest], cwd=context["tmp"], env=context["env"])
    assert proc.returncode == 0, proc.stdout
    deps = yaml.safe_load(proc.stdout)          # {python: [...], system: [...]} the image would install
    python = " ".join(deps["python"]).lower()
    system = " ".join(deps["system"]).lower()
    for dev in ("molecule", "pytest", "hypothesis", "ansible-lint", "yamllint", "black", "testinfra"):
        assert not re.search(r"\b%s\b" % re.escape(dev), python), (dev, deps)
    for node_tool in ("mdadm", "nvme-cli", "dmidecode", "pciutils", "numactl", "xfsprogs"):
        assert node_tool not in system, (node_tool, deps)
    # what is left is what meta/ee-requirements.txt and meta/ee-bindep.txt list: nothing today
    assert deps == {"python": [], "system": []}, deps


def test_meta_dependency_files_list_what_the_controller_plugins_import():
    """The collection's EE metadata names files that exist, and its Python requirements are exactly
    the third-party modules the controller-side plugins import (today none: the standard library,
    ansible-core and what ansible-core requires, Jinja2, MarkupSafe and PyYAML)."""
    import sys
    with open(os.path.join(ROOT, "meta", "execution-environment.yml")) as fh:
        meta = yaml.safe_load(fh)
    listed = {}
    for kind in ("python", "system"):
        with open(os.path.join(ROOT, meta["dependencies"][kind])) as fh:
            listed[kind] = {re.split(r"[<>=!~;\[ ]", ln.strip())[0].lower().replace("-", "_")
                            for ln in fh if ln.strip() and not ln.lstrip().startswith("#")}
    imported = set()
    for sub in ("action", "callback", "filter", "plugin_utils"):
        folder = os.path.join(ROOT, "plugins", sub)
        for name in os.listdir(folder):
            if name.endswith(".py"):
                with open(os.path.join(folder, name)) as fh:
                    tree = ast.parse(fh.read())
                # import statements only (a docstring line that starts with "from ..." is prose)
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        imported.update(a.name.split(".")[0] for a in node.names)
                    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                        imported.add(node.module.split(".")[0])
    # ansible-core requires Jinja2 (which requires MarkupSafe) and PyYAML: every EE has them.
    with_core = {"__future__", "ansible", "ansible_collections", "yaml", "jinja2", "markupsafe"}
    third_party = {m.lower() for m in imported} - with_core - set(sys.stdlib_module_names)
    assert third_party == listed["python"], "controller plugins import %s; meta/ee-requirements.txt lists %s" % (
        sorted(third_party), sorted(listed["python"]))
    assert listed["system"] == set(), "controller-side system packages need a reason: %s" % listed["system"]
