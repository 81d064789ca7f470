"""Every code block a user can run is a test (issue 20.1).

Each fenced code block of README.md, docs/*.md and roles/*/README.md is either run as it is
written, or the line right before it says why it cannot run here:

    <!-- not-run: needs reachable GPU nodes (molecule/site runs it) -->

A block with neither fails this test. Blocks that run:

- ``sh``/``bash``/``shell`` blocks: the text, unchanged, as a bash script (``bash -e``: every command
  must succeed; ``<!-- run: exit=N -->`` before the block expects exit status N instead);
- ``python`` blocks: the text, unchanged, with the project's Python;
- ``yaml`` blocks marked ``<!-- run: playbook -->``: written to a file and run with
  ``ansible-playbook -i inventories/example FILE``.

Where they run: as a user runs them (issue 30.4) - a scratch clone (the files git would commit,
copied to a temporary folder outside this checkout) set up as ``make demo`` leaves a clone
(``.collections/ansible_collections/dlrack/node`` linking the clone itself, ansible.posix,
community.general, containers.podman and kubernetes.core beside it, as scripts/bootstrap.sh
links them), the project's .venv/bin first on PATH (the README says to activate .venv), a HOME
of its own, and nothing a user's plain shell lacks: no ANSIBLE_* variable (no
ANSIBLE_COLLECTIONS_PATH, ANSIBLE_CONFIG or ANSIBLE_HOME: the clone's ansible.cfg is what Ansible
finds), no PYTHONPATH. The blocks of one file run in the order they are written, in the same
clone, as a reader following the page would.
"""
import glob
import os
import re
import subprocess

import pytest
from testpaths import ROOT, tracked_copy
from user_install import DEPS, VENV_BIN

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, ".git")),
                                reason="needs a git checkout (copies the files git would commit)")

DOCS = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))) + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "roles", "*", "README.md")))
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<lang>[^`\n]*)$")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>not-run|run)\s*:(?P<arg>.*?)-->\s*$")
SHELL = ("sh", "bash", "shell")
TIMEOUT = 300


def parse_blocks(text):
    """[(line, lang, body, marker)] of every fenced block; marker is (kind, arg) from the line
    right before the fence (blank lines between are allowed), or None."""
    lines = text.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group("fence"), m.group("lang").strip().split(" ")[0].lower(), i
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence[0] * len(fence))
                                      and lines[j].strip().strip(fence[0]) == ""):
            j += 1
        body = "\n".join(ln[len(m.group("indent")):] for ln in lines[i + 1:j]) + "\n"
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mm = MARKER.match(lines[k]) if k >= 0 else None
        blocks.append((start + 1, lang, body, (mm.group("kind"), mm.group("arg").strip()) if mm else None))
        i = j + 1
    return blocks


def _all_blocks():
    out = []
    for rel in DOCS:
        with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
            for line, lang, body, marker in parse_blocks(fh.read()):
                out.append(pytest.param(rel, line, lang, body, marker, id="%s:%d" % (rel, line)))
    return out


BLOCKS = _all_blocks()


def plan(lang, marker):
    """How a block is handled: ('skip', reason) or ('run', kind, expected exit), or ('bad', why)."""
    if marker and marker[0] == "not-run":
        if len(marker[1].split()) < 3:
            return ("bad", "a not-run marker must say why in a few words")
        return ("skip", marker[1])
    options = dict(opt.split("=", 1) if "=" in opt else (opt, "") for opt in (marker[1].replace(",", " ").split() if marker else []))
    unknown = set(options) - {"exit", "playbook"}
    if unknown:
        return ("bad", "unknown run option(s) %s (known: exit=N, playbook)" % sorted(unknown))
    try:
        rc = int(options.get("exit", "0"))
    except ValueError:
        return ("bad", "exit= needs a number")
    if "playbook" in options:
        return ("run", "playbook", rc) if lang in ("yaml", "yml") else ("bad", "run: playbook is for yaml blocks")
    if lang in SHELL:
        return ("run", "sh", rc)
    if lang == "python":
        return ("run", "python", rc)
    return ("bad", "a %r block can neither run here nor says why: put <!-- not-run: why --> before it, "
                   "or make it a sh/python block (or <!-- run: playbook --> for a play)" % (lang or "plain"))


def test_parse_blocks_and_markers():
    text = ("intro\n\n<!-- not-run: needs GPU nodes here -->\n```sh\nmake x\n```\n\n"
            "<!-- run: exit=2 -->\n\n```sh\nfalse\n```\n\n  ```yaml\n  a: 1\n  ```\n~~~python\nprint(1)\n~~~\n")
    got = parse_blocks(text)
    assert [(b[0], b[1], b[2], b[3]) for b in got] == [
        (4, "sh", "make x\n", ("not-run", "needs GPU nodes here")), (10, "sh", "false\n", ("run", "exit=2")),
        (14, "yaml", "a: 1\n", None), (17, "python", "print(1)\n", None)]
    assert plan("sh", None) == ("run", "sh", 0) and plan("sh", ("run", "exit=2")) == ("run", "sh", 2)
    assert plan("yaml", ("run", "playbook")) == ("run", "playbook", 0)
    assert plan("yaml", None)[0] == "bad" and plan("", None)[0] == "bad" and plan("json", None)[0] == "bad"
    assert plan("sh", ("not-run", ""))[0] == "bad" and plan("sh", ("run", "exitt=2"))[0] == "bad"
    assert plan("python", ("not-run", "runs on a node only")) == ("skip", "runs on a node only")


def test_every_document_has_its_blocks_found():
    """A guard against a parser that finds nothing."""
    assert sum(1 for p in BLOCKS if p.values[0] == "README.md") >= 8
    assert {p.values[0] for p in BLOCKS} >= {"README.md", "docs/catalogue.md", "roles/preflight/README.md"}


DEP_COLLECTIONS = ("ansible/posix", "community/general", "containers/podman", "kubernetes/core")


def user_env(home):
    """The environment of a user's plain shell with .venv activated: no ANSIBLE_* and no
    PYTHONPATH (nothing the README does not tell the user to set), a HOME of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    os.makedirs(home, exist_ok=True)
    env.update(PATH=VENV_BIN + os.pathsep + env.get("PATH", ""), HOME=home, VIRTUAL_ENV=os.path.dirname(VENV_BIN),
               PYTHONDONTWRITEBYTECODE="1")
    return env


def user_clone(dest):
    """A scratch clone as `make demo` leaves one: the files git would commit, and .collections
    linking the clone as dlrack.node and the dependencies beside it (scripts/bootstrap.sh)."""
    src = tracked_copy(dest)
    coll = os.path.join(src, ".collections", "ansible_collections")
    os.makedirs(os.path.join(coll, "dlrack"))
    os.symlink(src, os.path.join(coll, "dlrack", "node"))
    for name in DEP_COLLECTIONS:
        os.makedirs(os.path.join(coll, os.path.dirname(name)), exist_ok=True)
        os.symlink(os.path.join(DEPS, "ansible_collections", name), os.path.join(coll, name))
    return src


def test_the_doc_environment_is_a_plain_shell(tmp_path):
    env = user_env(str(tmp_path / "home"))
    assert not [k for k in env if k.startswith("ANSIBLE_")] and "PYTHONPATH" not in env


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A scratch clone as a user has it after `make demo`, and a user's plain shell."""
    tmp = str(tmp_path_factory.mktemp("docblocks"))
    src = user_clone(os.path.join(tmp, "clone"))
    return {"dir": src, "env": user_env(os.path.join(tmp, "home")), "tmp": tmp}


@pytest.mark.parametrize("rel,line,lang,body,marker", BLOCKS)
def test_doc_block(clone, rel, line, lang, body, marker):
    how = plan(lang, marker)
    if how[0] == "bad":
        pytest.fail("%s:%d: %s" % (rel, line, how[1]))
    if how[0] == "skip":
        pytest.skip("not run (%s:%d): %s" % (rel, line, how[1]))
    kind, want = how[1], how[2]
    script = os.path.join(clone["tmp"], "block-%s-%d" % (re.sub(r"\W", "_", rel), line))
    with open(script, "w") as fh:
        fh.write(body)
    if kind == "sh":
        argv = ["bash", "-e", script]
    elif kind == "python":
        argv = [os.path.join(VENV_BIN, "python"), script]
    else:
        os.rename(script, script + ".yml")
        argv = ["ansible-playbook", "-i", "inventories/example", script + ".yml"]
    try:
        proc = subprocess.run(argv, cwd=clone["dir"], env=clone["env"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True, timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("%s:%d: the block ran past %d s" % (rel, line, TIMEOUT))
    out = proc.stdout
    assert proc.returncode == want, "%s:%d exits %d, expected %d:\n%s" % (rel, line, proc.returncode, want, out[-4000:])
    # A command with a placeholder (-i INVENTORY) "passes" on an empty inventory: Ansible only warns.
    noise = ["Traceback (most recent call last)", "Unexpected Exception", "[DEPRECATION", "[WARNING]",
             "Unable to parse", "No inventory was parsed", "provided hosts list is empty"]
    for noise in noise + (["[ERROR]"] if want == 0 else []):   # a block that must fail says why in [ERROR]
        assert noise not in out, "%s:%d:\n%s" % (rel, line, out[-4000:])
    assert ROOT not in out, "%s:%d used this checkout instead of the scratch clone" % (rel, line)


def test_readme_says_how_to_reach_the_commands_after_make_demo(tmp_path):
    """After `make demo` the README's next commands (ansible-playbook, ansible-galaxy, python) are
    in .venv/bin, which only make put on PATH: the README says to activate it, and that line works
    in a plain shell whose PATH lacks .venv/bin (issue 30.5)."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    first = readme[readme.index("## The two commands"):readme.index("## The four uses")]
    assert "`. .venv/bin/activate`" in first and "`.venv/bin/ansible-playbook ...`" in first
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(os.path.join(ROOT, ".venv"))),
               HOME=str(tmp_path))
    proc = subprocess.run(["bash", "-c", "command -v ansible-playbook || echo missing; . .venv/bin/activate && command -v ansible-playbook"],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, universal_newlines=True, check=False)
    lines = proc.stdout.split()
    assert proc.returncode == 0 and lines[-1] == os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), proc.stdout
