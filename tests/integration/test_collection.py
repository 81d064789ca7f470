"""dlrack.node as users get it: built with ansible-galaxy from a clean copy of this checkout,
installed offline into an empty path, then used from OUTSIDE the repository without its ansible.cfg:
the pre-flight validates a declared fleet and ansible-doc renders every plugin and role."""
import json
import os
import re
import shutil
import subprocess
import tarfile

import pytest
from testpaths import ROOT, build_collection

VENV_BIN = os.path.join(ROOT, ".venv", "bin")
# The dependencies (ansible.posix, community.general, containers.podman) as bootstrap.sh extracts
# them; NOT .collections, which links this checkout itself as dlrack.node.
DEPS = os.path.join(ROOT, ".venv", "collections")
USER_PATHS = ("plugins/", "roles/", "playbooks/", "docs/", "meta/", "changelogs/", "inventories/example/")
DEV_PATHS = ("tests/", "molecule/", "benchmarks/", "scripts/", ".venv/", ".collections/", ".cache/", "reports/",
             "context/", ".git/", "Makefile", "ansible.cfg", "requirements-dev.txt", ".hypothesis/")

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, ".git")),
                                reason="needs a git checkout (copies the files git would commit)")


def _clean_env(tmp):
    """The environment of a user's shell: no ANSIBLE_* of this project, no ansible.cfg in reach."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(PATH=VENV_BIN + os.pathsep + env.get("PATH", ""), ANSIBLE_HOME=os.path.join(tmp, "ansible-home"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", PYTHONDONTWRITEBYTECODE="1")
    return env


def _run(argv, cwd, env, timeout=300):
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout, check=False)
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Build the tarball from the files git would commit (uncommitted edits included, ignored
    files such as .venv or reports not), install it offline, return the paths."""
    tmp = str(tmp_path_factory.mktemp("collection"))
    env = _clean_env(tmp)
    tarball = build_collection(tmp, env)
    dest = os.path.join(tmp, "installed")
    env_deps = dict(env, ANSIBLE_COLLECTIONS_PATH=DEPS)   # --offline: dependencies already present
    proc = _run(["ansible-galaxy", "collection", "install", "--offline", "-p", dest, tarball], cwd=tmp,
                env=env_deps)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "dlrack.node:" in proc.stdout and "installed successfully" in proc.stdout
    user = os.path.join(tmp, "user")        # the user's working folder: no ansible.cfg
    os.makedirs(user)
    env_user = dict(env, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([dest, DEPS]))
    return {"tarball": tarball, "coll": os.path.join(dest, "ansible_collections", "dlrack", "node"),
            "user": user, "env": env_user, "tmp": tmp}


def test_tarball_carries_what_users_need_and_no_dev_material(installed):
    with tarfile.open(installed["tarball"]) as tar:
        names = tar.getnames()
    for top in ("README.md", "LICENSE", "MANIFEST.json", "FILES.json", "meta/runtime.yml",
                "meta/execution-environment.yml", "changelogs/changelog.yaml", "docs/dlrack_hw.md",
                "playbooks/preflight.yml", "playbooks/site.yml", "roles/preflight/README.md"):
        assert top in names, top
    for prefix in USER_PATHS:
        assert any(n.startswith(prefix) for n in names), prefix
    leaked = [n for n in names if n.startswith(DEV_PATHS) or n in {p.rstrip("/") for p in DEV_PATHS}
              or "__pycache__" in n or n.endswith((".pyc", ".tar.gz"))]
    assert leaked == []
    assert not any(":" in n for n in names)
    with open(os.path.join(installed["coll"], "MANIFEST.json")) as fh:
        manifest = json.load(fh)["collection_info"]
    with open(os.path.join(ROOT, "LICENSE")) as fh:
        assert "GNU GENERAL PUBLIC LICENSE" in fh.read(200) and manifest["license"] == ["GPL-3.0-or-later"]


def test_readme_states_the_tarball_size(installed):
    """README says how big the tarball is; keep it within 25 % of what the build produces."""
    with open(os.path.join(ROOT, "README.md")) as fh:
        m = re.search(r"tarball of about (\d+) KB", fh.read())
    assert m, "README.md must state 'tarball of about N KB'"
    size_kb = os.path.getsize(installed["tarball"]) / 1024.0
    assert abs(size_kb - int(m.group(1))) <= 0.25 * size_kb, "README says %s KB, the build gives %.0f KB" % (
        m.group(1), size_kb)


def test_installed_preflight_validates_a_declared_fleet(installed):
    inv = os.path.join(installed["user"], "inventory")
    shutil.copytree(os.path.join(ROOT, "inventories", "example"), inv)
    reports = os.path.join(installed["user"], "reports")
    proc = _run(["ansible-playbook", "dlrack.node.preflight", "-i", inv, "-e", "dlrack_report_dir=" + reports,
                 "-e", "dlrack_fail_on=never"], cwd=installed["user"], env=installed["env"])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    for noise in ("[ERROR]", "[WARNING]", "[DEPRECATION"):
        assert noise not in proc.stdout + proc.stderr, proc.stderr
    assert ROOT not in proc.stdout + proc.stderr          # nothing came from the checkout
    with open(os.path.join(reports, "report.json")) as fh:
        doc = json.load(fh)
    assert doc["hosts"]["gpu-a01"]["status"] == "pass"
    assert doc["hosts"]["gpu-b01"]["status"] == "fail"   # 8x H100 with 512 GB RAM
    assert doc["hosts"]["gpu-x01"]["status"] == "fail"   # the declaration with typos
    assert len(doc["hosts"]) == 9


def _plugin_names(coll):
    """Every documented thing the installed copy ships, found from its files."""
    names = {"module": [], "callback": [], "filter": [], "role": []}
    for kind, sub in (("module", "modules"), ("callback", "callback")):
        for f in sorted(os.listdir(os.path.join(coll, "plugins", sub))):
            if f.endswith(".py") and not f.startswith("_"):
                names[kind].append(f[:-3])
    for f in sorted(os.listdir(os.path.join(coll, "plugins", "filter"))):
        if f.endswith(".py"):
            with open(os.path.join(coll, "plugins", "filter", f)) as fh:
                block = re.search(r"def filters\(self\):(.*?)\n\S", fh.read() + "\nX", re.S).group(1)
            names["filter"].extend(re.findall(r"[\"'](\w+)[\"']\s*:", block))
    names["role"] = sorted(d for d in os.listdir(os.path.join(coll, "roles")))
    return names


def test_ansible_doc_renders_every_module_filter_callback_and_role(installed):
    names = _plugin_names(installed["coll"])
    assert len(names["module"]) >= 4 and len(names["filter"]) >= 5 and names["callback"] and len(names["role"]) >= 4
    for kind, items in sorted(names.items()):
        fq = ["dlrack.node." + n for n in sorted(items)]
        proc = _run(["ansible-doc", "-t", kind] + fq, cwd=installed["user"], env=installed["env"])
        assert proc.returncode == 0, (kind, proc.stderr)
        assert "WARNING" not in proc.stderr and "ERROR" not in proc.stderr, (kind, proc.stderr)
        for name in fq:
            assert name in proc.stdout, (kind, name)
        # no page points to a document the collection does not contain
        assert "DESIGN.md" not in proc.stdout, kind
    # each filter has its own page: the secondary filters do not show their neighbour's
    for name in names["filter"]:
        proc = _run(["ansible-doc", "-t", "filter", "--json", "dlrack.node." + name], cwd=installed["user"],
                    env=installed["env"])
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)["dlrack.node." + name]["doc"]
        assert doc["name"] == name and doc.get("version_added"), name


def test_every_plugin_and_role_has_version_added_for_the_changelog(installed):
    """antsibull-changelog builds "New Modules / New Plugins / New Roles" of a release from
    ansible-doc --metadata-dump (the role's main entry point for roles): each needs version_added."""
    proc = _run(["ansible-doc", "--metadata-dump", "dlrack.node"], cwd=installed["user"], env=installed["env"])
    assert proc.returncode == 0, proc.stderr
    dump = json.loads(proc.stdout)["all"]
    names = _plugin_names(installed["coll"])
    with open(os.path.join(installed["coll"], "MANIFEST.json")) as fh:
        version = json.load(fh)["collection_info"]["version"]
    for kind, items in names.items():
        for name in items:
            entry = dump[kind]["dlrack.node." + name]
            doc = entry.get("doc") or (entry.get("entry_points") or {}).get("main") or {}
            added = str(doc.get("version_added") or "")
            assert re.match(r"^\d+\.\d+\.\d+$", added), (kind, name, added)
            assert tuple(map(int, added.split("."))) <= tuple(map(int, version.split("."))), (kind, name, added)
