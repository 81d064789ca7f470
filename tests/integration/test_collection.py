"""dlrack.node as users get it: built with ansible-galaxy from a clean copy of this checkout,
installed offline into an empty path, then used from OUTSIDE the repository without its ansible.cfg:
the pre-flight validates a declared fleet and ansible-doc renders every plugin and role, drift.yml
writes its report with no callback configured (issue 20.2), ecc_monitor runs in a play that gathers
no facts and the pre-flight gathers from dlrack_hw_root as declare.yml does (issue 20.6)."""
import json
import os
import re
import shutil
import tarfile

import pytest
from user_install import install, run, VENV_BIN
from testpaths import ROOT, sysfs_tree

VENV_PY = os.path.join(VENV_BIN, "python")

USER_PATHS = ("plugins/", "roles/", "playbooks/", "docs/", "meta/", "changelogs/", "inventories/example/")
DEV_PATHS = ("tests/", "molecule/", "benchmarks/", "scripts/", ".venv/", ".collections/", ".cache/", "reports/",
             "context/", ".git/", "Makefile", "ansible.cfg", "requirements-dev.txt", ".hypothesis/")

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, ".git")),
                                reason="needs a git checkout (copies the files git would commit)")
_run = run


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The tarball built and installed offline (tests/user_install.py), a user folder outside the repo."""
    return install(str(tmp_path_factory.mktemp("collection")))


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


def _local_inventory(installed, name, **hostvars):
    """An inventory of one host on this machine (local connection, the venv's interpreter)."""
    inv = os.path.join(installed["user"], name)
    os.makedirs(inv)
    host = dict({"ansible_connection": "local", "ansible_python_interpreter": VENV_PY, "dlrack_become": False},
                **hostvars)
    with open(os.path.join(inv, "hosts.yml"), "w") as fh:
        json.dump({"all": {"hosts": {"node-1": host}}}, fh)
    return inv


def test_installed_drift_writes_its_report_without_configuration(installed):
    """No ansible.cfg and no ANSIBLE_CALLBACKS_ENABLED: the would-be changes and failures are still
    recorded (playbooks/callback_plugins/ is loaded by Ansible itself) and drift.* is written."""
    assert not any(k.startswith("ANSIBLE_CALLBACK") for k in installed["env"])
    inv = os.path.join(installed["user"], "drift-inventory.yml")
    with open(inv, "w") as fh:   # nothing listens on 127.0.0.2 port 1: refused at once
        json.dump({"all": {"hosts": {"dead-1": {"ansible_host": "127.0.0.2", "ansible_port": 1, "ansible_connection": "ssh",
                                                "ansible_ssh_common_args": "-o ConnectTimeout=5"}},
                           "vars": {"dlrack_become": False}}}, fh)
    reports = os.path.join(installed["user"], "drift")
    proc = _run(["ansible-playbook", "dlrack.node.drift", "--check", "--diff", "-i", inv, "-e", "dlrack_report_dir=" + reports],
                cwd=installed["user"], env=installed["env"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-4000:]
    assert "cannot read the drift records" not in out and ROOT not in out
    with open(os.path.join(reports, "drift.json")) as fh:
        d = json.load(fh)["drift"]["dead-1"]
    assert d["status"] == "error" and d["unreachable"] is True
    assert d["failures"][0]["task"] == "Gather hardware facts" and "127.0.0.2" in d["failures"][0]["msg"]
    for ext in ("xml", "html"):
        assert os.path.getsize(os.path.join(reports, "drift." + ext)) > 0
    # With the callback enabled as well (the repository's ansible.cfg does) the run records the same
    # (the adjacent copy then stays inactive: tests/unit/plugins/callback/test_drift_adjacent.py).
    env = dict(installed["env"], ANSIBLE_CALLBACKS_ENABLED="dlrack.node.drift")
    proc = _run(["ansible-playbook", "dlrack.node.drift", "--check", "--diff", "-i", inv, "-e", "dlrack_report_dir=" + reports],
                cwd=installed["user"], env=env)
    assert proc.returncode == 2, proc.stdout[-4000:]
    with open(os.path.join(reports, "drift-records.json")) as fh:
        assert len(json.load(fh)["dead-1"]["failures"]) == 1
    with open(os.path.join(reports, "drift.json")) as fh:
        assert json.load(fh)["drift"]["dead-1"]["status"] == "error"


def test_installed_ecc_monitor_in_a_play_without_facts(installed):
    """A play with gather_facts: false: the role gathers the two fact groups it needs (check mode:
    nothing on this machine changes), and a play that gathered them already is not asked again."""
    # the role stops on a node that systemd does not run (issue 30.7; test_ecc_monitor_systemd.py); this
    # machine may be a container without it: the node is taken to run systemd
    inv = _local_inventory(installed, "ecc-inventory", __ecc_monitor_systemd_dir="/")
    play = os.path.join(installed["user"], "ecc.yml")
    with open(play, "w") as fh:
        fh.write("- name: ECC monitoring on its own\n  hosts: all\n  gather_facts: false\n"
                 "  roles:\n    - role: dlrack.node.ecc_monitor\n"
                 "- name: ECC monitoring after the play's own facts\n  hosts: all\n  gather_facts: true\n"
                 "  roles:\n    - role: dlrack.node.ecc_monitor\n")
    proc = _run(["ansible-playbook", "-i", inv, play, "--check"], cwd=installed["user"], env=installed["env"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "os_family" not in out and "[ERROR]" not in out
    gather = re.findall(r"TASK \[dlrack.node.ecc_monitor : Gather the facts this role needs[^\n]*\n(\w+): \[node-1\]", out)
    assert gather == ["ok", "skipping"], gather
    assert len(re.findall(r"TASK \[dlrack.node.ecc_monitor : Load the package names[^\n]*\nok: \[node-1\]", out)) == 2


def test_installed_preflight_gathers_from_dlrack_hw_root(installed):
    """declare.yml and the pre-flight's gather step read the same tree: a declaration made from a
    captured host's tree matches when the pre-flight gathers that tree (not this machine)."""
    tree = sysfs_tree("esc8000a-e12")
    inv = _local_inventory(installed, "root-inventory")
    proc = _run(["ansible-playbook", "dlrack.node.declare", "-i", inv, "-e", "dlrack_hw_root=" + tree],
                cwd=installed["user"], env=installed["env"])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert os.path.exists(os.path.join(inv, "host_vars", "node-1", "dlrack_hw.yml"))
    reports = os.path.join(installed["user"], "root-reports")
    proc = _run(["ansible-playbook", "dlrack.node.preflight", "-i", inv, "-e", "dlrack_hw_root=" + tree,
                 "-e", "dlrack_gather=true", "-e", "dlrack_fail_on=never", "-e", "dlrack_report_dir=" + reports],
                cwd=installed["user"], env=installed["env"])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    with open(os.path.join(reports, "report.json")) as fh:
        host = json.load(fh)["hosts"]["node-1"]
    matches = [f for f in host["findings"] if f["rule"] == "inventory.matches_declared"]
    assert host["rules"]["inventory.matches_declared"] == "pass", matches


def test_installed_declare_writes_a_relative_dir_where_the_command_runs(installed):
    """A relative dlrack_declare_dir is taken from the folder the command runs in, as the report
    dir is - not from the playbook's folder, the installed collection that a reinstall deletes - and
    the run prints the path of the file it wrote (issue 30.3)."""
    tree = sysfs_tree("esc8000a-e12")
    inv = _local_inventory(installed, "declare-inventory")
    work = os.path.join(installed["user"], "declare-work")
    os.makedirs(work)
    wrote = os.path.join(work, "decl", "rack-7", "node-1", "dlrack_hw.yml")
    # --check writes nothing and says so (it printed "wrote <path>" for a file it never wrote)
    proc = _run(["ansible-playbook", "dlrack.node.declare", "-i", inv, "-e", "dlrack_hw_root=" + tree,
                 "-e", "dlrack_declare_dir=decl/rack-7", "--check"], cwd=work, env=installed["env"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "node-1: would write %s" % wrote in out, out[-4000:]
    assert not os.path.exists(os.path.join(work, "decl"))
    proc = _run(["ansible-playbook", "dlrack.node.declare", "-i", inv, "-e", "dlrack_hw_root=" + tree,
                 "-e", "dlrack_declare_dir=decl/rack-7"], cwd=work, env=installed["env"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert os.path.exists(wrote), out[-4000:]
    assert "node-1: wrote %s" % wrote in out
    # nothing went into the installed collection
    for top, dirs, files in os.walk(installed["coll"]):
        assert "dlrack_hw.yml" not in files and "decl" not in dirs, top
    # a second run keeps the file and says where it is; a misspelled overwrite switch is named (issue 30.6)
    proc = _run(["ansible-playbook", "dlrack.node.declare", "-i", inv, "-e", "dlrack_hw_root=" + tree,
                 "-e", "dlrack_declare_dir=decl/rack-7", "-e", "dlrack_declare_overwite=true"], cwd=work, env=installed["env"])
    out = proc.stdout + proc.stderr
    assert "node-1: kept the existing %s (-e dlrack_declare_overwrite=true replaces it)" % wrote in out
    assert "dlrack_declare_overwite is set (extra vars or the inventory) but no role or playbook of dlrack.node reads it, so it " \
           "changes nothing; did you mean dlrack_declare_overwrite?" in " ".join(out.split())


def test_installed_preflight_names_misspelled_variables_once(installed):
    """dlrack_failon on the command line, dlrack_profle in group_vars, acceptance_hot_pth: each is
    named once, with the name that was meant; a correct run warns about nothing (issue 30.6)."""
    inv = os.path.join(installed["user"], "typo-inventory")
    os.makedirs(os.path.join(inv, "group_vars"))
    with open(os.path.join(installed["coll"], "inventories", "example", "group_vars", "rack_a.yml")) as fh:
        hw = fh.read()
    with open(os.path.join(inv, "group_vars", "all.yml"), "w") as fh:
        fh.write(hw + "dlrack_profle: inference\n")
    with open(os.path.join(inv, "hosts.yml"), "w") as fh:
        fh.write("all:\n  hosts:\n    gpu-a01:\n    gpu-a02:\n")
    argv = ["ansible-playbook", "dlrack.node.preflight", "-i", inv, "-e", "dlrack_report_dir=typo-reports"]
    proc = _run(argv + ["-e", "dlrack_failon=never", "-e", "acceptance_hot_pth=/mnt/x"], cwd=installed["user"], env=installed["env"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    text = " ".join(out.split())
    for typo, meant in (("dlrack_failon", "dlrack_fail_on"), ("dlrack_profle", "dlrack_profile"),
                        ("acceptance_hot_pth", "acceptance_hot_path")):
        warning = "dlrack.node: the variable %s is set (extra vars or the inventory) but no role or playbook of dlrack.node reads it" % typo
        assert text.count(warning) == 1, out[-4000:]
        assert warning + ", so it changes nothing; did you mean %s?" % meant in text
    # the inventory fixed, and the extra vars spelled right: not a word
    with open(os.path.join(inv, "group_vars", "all.yml"), "w") as fh:
        fh.write(hw + "dlrack_profile: inference\n")
    proc = _run(argv + ["-e", "dlrack_fail_on=never", "-e", "acceptance_hot_path=/mnt/x"], cwd=installed["user"], env=installed["env"])
    assert proc.returncode == 0 and "[WARNING]" not in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_installed_acceptance_summary_prints_as_lines(installed):
    """Without this repository's ansible.cfg (no yaml result format) the acceptance summary is one
    console line per host and measurement, not one string full of \\n (issue 30.5). Check mode on
    this machine: nothing is measured."""
    inv = _local_inventory(installed, "acceptance-inventory")
    proc = _run(["ansible-playbook", "dlrack.node.acceptance", "-i", inv, "--check", "-e", "dlrack_report_dir=acceptance-reports"],
                cwd=installed["user"], env=installed["env"])
    out = proc.stdout + proc.stderr
    shown = out[out.index("TASK [dlrack.node.acceptance : Show the acceptance summary]"):]
    shown = shown[:shown.index("TASK [", 10)]
    assert '\n        "dlrack.node acceptance: 1 host(s): ' in shown, shown
    assert '\n        "SKIP    node-1 (check mode: nothing measured)",\n' in shown, shown
    assert "\\n" not in shown, shown


def test_readme_says_where_the_installed_example_inventory_is(installed):
    """After installing, `ansible-galaxy collection list dlrack.node` names the folder, and the
    README's path under it is the example fleet, which the pre-flight validates (issue 30.5)."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    assert "`ansible-galaxy collection list dlrack.node`" in readme and "`dlrack/node/inventories/example` under it" in readme
    proc = _run(["ansible-galaxy", "collection", "list", "dlrack.node"], cwd=installed["user"], env=installed["env"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folders = re.findall(r"^# (\S+/ansible_collections)$", proc.stdout, re.M)
    assert folders == [os.path.join(installed["collections"], "ansible_collections")], proc.stdout
    inv = os.path.join(folders[0], "dlrack", "node", "inventories", "example")
    proc = _run(["ansible-playbook", "dlrack.node.preflight", "-i", inv, "-e", "dlrack_report_dir=installed-example",
                 "-e", "dlrack_fail_on=never"], cwd=installed["user"], env=installed["env"])
    assert proc.returncode == 0 and "dlrack.node preflight: 9 host(s)" in proc.stdout, proc.stdout[-3000:]
