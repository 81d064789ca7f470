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


def _python_files():
    """Every Python file of the collection that Ansible loads: all of plugins/ (controller plugins,
    plugin_utils, and the modules and module_utils: a module delegated to localhost, such as the
    scheduler plan, runs inside the EE too) and the playbook-adjacent callback plugins."""
    for top in (os.path.join(ROOT, "plugins"), os.path.join(ROOT, "playbooks", "callback_plugins")):
        for folder, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.join(folder, name)


def test_meta_dependency_files_list_what_the_controller_plugins_import():
    """The collection's EE metadata names files that exist, and its Python requirements are exactly
    the third-party modules the collection's Python files import (today none: the standard library,
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
    for name in _python_files():
        with open(name) as fh:
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


# Collections the content uses that the EE leaves out on purpose, each with the option that needs
# it; docs/awx.md says how to add it to the EE.
OPTIONAL_COLLECTIONS = {"kubernetes.core": "dlrack_scheduler=kubernetes"}
_FQCN = re.compile(r"^([a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*)\.[a-z_][a-z0-9_]*$")
# a filter, test or lookup named by FQCN inside a template: "| ns.coll.f", "is ns.coll.t", query('ns.coll.l'
_IN_JINJA = re.compile(r"(?:\|\s*|\bis\s+(?:not\s+)?|\b(?:query|lookup|q)\(\s*['\"])"
                       r"([a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*)\.[a-z_][a-z0-9_]*")


def _used_collections():
    """{collection: [files]} of every module, action, filter, test or lookup the roles and
    playbooks name by FQCN (a task's key, module_defaults, a template's filter or lookup), and of
    every other collection a Python file imports."""
    used = {}

    def walk(value, path):
        if isinstance(value, dict):
            for key, item in value.items():
                m = _FQCN.match(key) if isinstance(key, str) else None
                if m:
                    used.setdefault(m.group(1), set()).add(path)
                walk(item, path)
        elif isinstance(value, list):
            for item in value:
                walk(item, path)
        elif isinstance(value, str):
            for m in _IN_JINJA.finditer(value):
                used.setdefault(m.group(1), set()).add(path)

    for top in ("roles", "playbooks"):
        for folder, dummy, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith((".yml", ".yaml")):
                    path = os.path.join(folder, name)
                    with open(path) as fh:
                        walk(yaml.safe_load(fh), os.path.relpath(path, ROOT))
    for path in _python_files():
        with open(path) as fh:
            for node in ast.walk(ast.parse(fh.read())):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(
                        "ansible_collections."):
                    used.setdefault(".".join(node.module.split(".")[1:3]), set()).add(os.path.relpath(path, ROOT))
    return used


def test_the_ee_requirements_list_every_collection_the_content_uses(context):
    """What `ansible-builder create` put into the EE's galaxy requirements (the context's
    _build/requirements.yml) names every collection whose modules, filters or lookups the roles and
    playbooks call, or whose code a plugin imports, besides ansible.builtin and dlrack.node; the
    ones left out on purpose (OPTIONAL_COLLECTIONS) are used and documented in docs/awx.md, and
    galaxy.yml depends on exactly the required ones."""
    used = _used_collections()
    assert "community.general" in used and "ansible.posix" in used      # the walk finds the known ones
    with open(os.path.join(context["ctx"], "_build", "requirements.yml")) as fh:
        in_ee = {r["name"] for r in yaml.safe_load(fh)["collections"] if r.get("type") != "file"}
    needed = set(used) - {"ansible.builtin", "dlrack.node"}
    missing = needed - in_ee - set(OPTIONAL_COLLECTIONS)
    assert not missing, "the EE lacks %s, used by %s" % (sorted(missing), sorted(set().union(*(used[c] for c in missing))))
    assert set(OPTIONAL_COLLECTIONS) <= needed, "no longer used: %s" % sorted(set(OPTIONAL_COLLECTIONS) - needed)
    assert in_ee - needed == set(), "the EE installs collections nothing uses: %s" % sorted(in_ee - needed)
    with open(os.path.join(ROOT, "docs", "awx.md")) as fh:
        awx = fh.read()
    for name, option in OPTIONAL_COLLECTIONS.items():
        assert name in awx and option in awx, "docs/awx.md must say how to add %s (for %s) to the EE" % (name, option)
    with open(os.path.join(ROOT, "galaxy.yml")) as fh:
        assert set(yaml.safe_load(fh)["dependencies"]) == needed - set(OPTIONAL_COLLECTIONS)
