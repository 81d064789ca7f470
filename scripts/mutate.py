"""Mutation testing of one or more source files against their own unit tests (`make mutate`).

Uses mutmut's mutation operators (mutmut 2.5.1, installed into .venv on demand by `make mutate`,
not a project requirement): every mutant mutmut can make of the file is listed, --sample mutants
(default 150) are picked evenly spread over the file, skipping those that only change a human
message string (a string literal with a space in it). Each mutant is written into a
private copy of the tree and the file's unit tests run against it (pytest -x); the mutant is
killed when they fail. Prints the score and every survivor (line and change); --json writes them.

  .venv/bin/python scripts/mutate.py [--sample 150] [--jobs 2] [FILE ...]

FILE defaults to the three files issue 12 names. Outside CI: a file takes minutes.
"""
import argparse
import difflib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_FILES = ("plugins/plugin_utils/rules.py", "plugins/module_utils/storage/plan.py",
                 "plugins/plugin_utils/affinity.py")
# A file's unit tests: tests/unit mirrors plugins/ (tests/unit/plugins/<dir>/test_<name>.py).
# Property tests (hypothesis) are left out: each mutant runs the example-based tests only.
DESELECT = "not property"


def tests_for(path):
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    head, name = os.path.split(rel)
    test = os.path.join("tests", "unit", head, "test_" + name)
    if not os.path.exists(os.path.join(ROOT, test)):
        sys.exit("no unit tests for %s (expected %s)" % (rel, test))
    return rel, test


def _tokens(source):
    try:
        return [(t.type, t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline)]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None


def is_message_mutant(original, mutated):
    """True when the mutant only changes string literals that are human messages (contain a space)."""
    old, new = _tokens(original), _tokens(mutated)
    if old is None or new is None or len(old) != len(new):
        return False
    changed = [(a, b) for a, b in zip(old, new) if a != b]
    return bool(changed) and all(a[0] == tokenize.STRING and " " in a[1] for a, dummy in changed)


def pick_mutants(rel, sample):
    """``sample`` mutmut mutants of ``rel`` evenly spread over the file, as (mutation id, mutated source):
    from each evenly spaced position the next mutant that changes more than a message string.
    Returns (source, chosen, message-only mutants skipped, mutants in all)."""
    from mutmut import ALL, Context, list_mutations, mutate  # noqa: E402  (installed on demand)
    with open(os.path.join(ROOT, rel)) as fh:
        source = fh.read()
    ids = list_mutations(Context(source=source, mutation_id=ALL, filename=rel))
    chosen, messages, pos = [], 0, 0
    for i in range(min(sample, len(ids))):
        pos = max(pos, int(i * len(ids) / min(sample, len(ids))))
        while pos < len(ids):
            mutated, dummy = mutate(Context(source=source, mutation_id=ids[pos], filename=rel))
            pos += 1
            if not is_message_mutant(source, mutated):
                chosen.append((ids[pos - 1], mutated))
                break
            messages += 1
    return source, chosen, messages, len(ids)


def make_tree():
    """A private copy of the checkout whose .collections points at the copy itself."""
    tmp = tempfile.mkdtemp(prefix="dlrack-mutate-")
    shutil.copytree(ROOT, os.path.join(tmp, "src"), symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".collections", "reports", ".cache", "__pycache__", ".pytest_cache", ".hypothesis"))
    coll = os.path.join(tmp, "src", ".collections", "ansible_collections", "dlrack")
    os.makedirs(coll)
    os.symlink(os.path.join(tmp, "src"), os.path.join(coll, "node"))
    return tmp


def run_tests(tree, test, timeout):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-k", DESELECT, test]
    try:
        proc = subprocess.run(cmd, cwd=os.path.join(tree, "src"), env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return "killed (timeout)"
    if proc.returncode == 0:
        return "survived"
    failed = [line for line in proc.stdout.decode("utf-8", "replace").splitlines() if line.startswith(("FAILED", "ERROR"))]
    return "killed" + (" by " + failed[0].split(" ", 1)[1].split(" - ")[0] if failed else " (rc %d)" % proc.returncode)


def _diff(source, mutated):
    lines = [line for line in difflib.unified_diff(source.splitlines(), mutated.splitlines(), lineterm="", n=0)
             if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return " | ".join(line.strip() for line in lines)


def mutate_file(path, sample, jobs):
    rel, test = tests_for(path)
    source, chosen, messages, total = pick_mutants(rel, sample)
    trees = [make_tree() for dummy in range(max(1, jobs))]
    try:
        t0 = time.time()
        if run_tests(trees[0], test, 600) != "survived":
            sys.exit("the unit tests of %s fail without any mutant: fix them first" % rel)
        timeout = max(60, 10 * (time.time() - t0))
        free = list(trees)

        def one(item):
            mid, mutated = item
            tree = free.pop()
            try:
                target = os.path.join(tree, "src", rel)
                with open(target, "w") as fh:
                    fh.write(mutated)
                res = {"line": mid.line_number + 1, "change": _diff(source, mutated),
                       "result": run_tests(tree, test, timeout)}
                sys.stderr.write("%s line %d: %s\n" % (rel, res["line"], res["result"]))
                return res
            finally:
                with open(os.path.join(tree, "src", rel), "w") as fh:
                    fh.write(source)
                free.append(tree)

        with ThreadPoolExecutor(max_workers=len(trees)) as pool:
            results = list(pool.map(one, chosen))
    finally:
        for tree in trees:
            shutil.rmtree(tree, ignore_errors=True)
    killed = sum(1 for r in results if r["result"].startswith("killed"))
    return {"file": rel, "tests": test, "mutants": total, "message_only": messages, "sampled": len(results),
            "killed": killed, "score": round(100.0 * killed / len(results), 1) if results else None,
            "survivors": [r for r in results if r["result"] == "survived"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("files", nargs="*", default=list(DEFAULT_FILES))
    parser.add_argument("--sample", type=int, default=150, help="mutants per file, evenly spread (default 150)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    out = []
    for path in args.files:
        res = mutate_file(path, args.sample, args.jobs)
        out.append(res)
        print("%s: %d of %d sampled mutants killed (%.1f%%); %d mutants in all, %d message-only skipped; tests %s"
              % (res["file"], res["killed"], res["sampled"], res["score"] or 0, res["mutants"], res["message_only"],
                 res["tests"]))
        for s in res["survivors"]:
            print("  survived line %d: %s" % (s["line"], s["change"]))
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
