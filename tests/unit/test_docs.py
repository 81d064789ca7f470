"""Docs that are generated stay current; the README keeps the two commands first."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_role_variables_doc_is_generated_from_argument_specs():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen-role-docs.py"), "--check"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout


def test_readme_gives_the_two_commands_first():
    text = open(os.path.join(ROOT, "README.md")).read()
    first = text.index("## ")
    assert text[first:].startswith("## The two commands")
    assert "make demo" in text and "make test" in text
    ci = open(os.path.join(ROOT, ".ci", "run")).read()
    assert "exec make test" in ci
