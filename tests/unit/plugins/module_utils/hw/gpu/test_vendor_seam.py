# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU vendor seam holds (issue 31.1): outside plugins/module_utils/hw/gpu/ no Python code
names a GPU vendor's PCI id, tool or visible-devices variable. Code is every string literal and
name that is not documentation: docstrings, comments and a module's DOCUMENTATION/EXAMPLES/
RETURN are prose for people and may name the tools they describe.

The exceptions are listed below, each with its reason; a file that no longer needs its
exception fails the test too, so the list only shrinks.
"""
from __future__ import absolute_import, division, print_function

import io
import os
import re
import tokenize

import pytest

from testpaths import ROOT

PLUGINS = os.path.join(ROOT, "plugins")
SEAM = os.path.join("plugins", "module_utils", "hw", "gpu") + os.sep

# PCI vendor ids (NVIDIA, AMD, Hygon, Huawei), vendor tools, *_VISIBLE_DEVICES variables
VENDOR_MARK = re.compile(r"0x(10de|1002|1d94|19e5)\b|\b(nvidia-smi|amd-smi|rocm-smi|hy-smi|npu-smi)\b|"
                         r"[A-Z]+_VISIBLE_DEVICES", re.I)

# path (relative to the repository root) -> why its code may name a vendor
EXCEPTIONS = {
    # a vendor tool's output parser is part of that vendor (hw/gpu/<vendor>.py calls it alone); it
    # names its tool in its error messages ("nvidia-smi -q -x: not XML")
    "plugins/module_utils/hw/parsers/nvidia_smi.py": "the NVIDIA module's parser of its tool's output",
    "plugins/module_utils/hw/parsers/amd_smi.py": "the AMD module's parser of its tools' output",
    "plugins/module_utils/hw/parsers/npu_smi.py": "the Ascend module's parser of its tool's output",
    # the copy-bandwidth runtimes (a vendor's COPY_RUNTIME) run as plain files too
    # (python3 plugins/module_utils/acceptance/gpu.py), so they cannot import the seam; their error
    # texts name the runtime's own variable
    "plugins/module_utils/acceptance/gpu.py": "NVIDIA's copy runtime (libcuda), runnable as a plain file",
    "plugins/module_utils/acceptance/gpu_hip.py": "AMD's copy runtime (libamdhip64), runnable as a plain file",
    # other engineers' files while issue 31 was done (acceptance's node pass and its GPU health,
    # the ECC exporter's command line): they move behind the seam in a follow-up
    "plugins/module_utils/acceptance/node.py": "node pass: finds the NVIDIA health tool by name (follow-up)",
    "plugins/module_utils/acceptance/health.py": "GPU health wording of the NVIDIA tool (follow-up)",
    "plugins/plugin_utils/acceptance.py": "acceptance report wording of the NVIDIA tool (follow-up)",
    "plugins/plugin_utils/platform.py": "issue 32's power-limit remedies name the NVIDIA tool (follow-up: the vendor's WORDING)",
    "plugins/module_utils/gpu_faults/gather.py": "issue 29's fault counters read the NVIDIA tool's XML (follow-up)",
    "plugins/module_utils/ecc/metrics.py": "the exporter's --nvidia-smi option is its installed command line (ecc_monitor's unit)",
}


def _python_files():
    for base, dirs, files in os.walk(PLUGINS):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(base, name)
                rel = os.path.relpath(path, ROOT)
                if not rel.startswith(SEAM):
                    yield rel


def code_marks(source):
    """[(line, text)] of the string literals and names in ``source`` that name a vendor, leaving
    out docstrings, comments and the DOCUMENTATION/EXAMPLES/RETURN blocks of a module."""
    out = []
    toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    prev = None          # last significant token
    skip_block = False   # inside DOCUMENTATION = r'''...'''
    skip_doc = False     # the strings of a doc= keyword argument (a rule's documentation row)
    for i, tok in enumerate(toks):
        if tok.type in (tokenize.COMMENT, tokenize.NL):
            continue
        if tok.type == tokenize.NAME and tok.string in ("DOCUMENTATION", "EXAMPLES", "RETURN") and \
                (prev is None or prev.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)):
            skip_block = True
        if tok.type == tokenize.NEWLINE:
            skip_block = False
        if tok.type == tokenize.OP and tok.string == "=" and prev is not None and prev.string == "doc":
            skip_doc = True
        elif tok.type != tokenize.STRING:
            skip_doc = False
        if tok.type == tokenize.STRING and not skip_block and not skip_doc:
            nxt = next((t for t in toks[i + 1:] if t.type not in (tokenize.COMMENT, tokenize.NL)), None)
            docstring = (prev is None or prev.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)) and \
                (nxt is None or nxt.type in (tokenize.NEWLINE, tokenize.ENDMARKER))
            if not docstring and VENDOR_MARK.search(tok.string):
                out.append((tok.start[0], tok.string[:80]))
        elif tok.type == tokenize.NAME and VENDOR_MARK.search(tok.string):
            out.append((tok.start[0], tok.string))
        prev = tok
    return out


def _marks(rel):
    with io.open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
        return code_marks(fh.read())


@pytest.mark.parametrize("rel", list(_python_files()))
def test_no_vendor_outside_the_seam(rel):
    marks = _marks(rel)
    if rel in EXCEPTIONS:
        assert marks, "%s no longer names a vendor: drop its exception (%s)" % (rel, EXCEPTIONS[rel])
        return
    assert not marks, "%s names a GPU vendor's id/tool/variable outside plugins/module_utils/hw/gpu/ " \
        "(ask the vendor module instead): %s" % (rel, marks)


def test_exceptions_exist():
    for rel in EXCEPTIONS:
        if rel.endswith("npu_smi.py") and not os.path.exists(os.path.join(ROOT, rel)):
            continue
        assert os.path.exists(os.path.join(ROOT, rel)), rel


def test_the_guard_sees_code_not_prose():
    src = ('"""Reads nvidia-smi and CUDA_VISIBLE_DEVICES."""\n'
           'DOCUMENTATION = r"""\n  uses amd-smi\n"""\n'
           '# npu-smi in a comment\n'
           'def f(env):\n'
           '    """Docstring naming 0x10de."""\n'
           '    return env.get("ROCR_VISIBLE_DEVICES"), ["hy-smi", "-a"], "0x19e5"\n'
           '@rule("a.b", doc="by the `nvidia-smi topo -m` legend "\n'
           '      "(PIX)", title="npu-smi")\n')
    assert [m[1] for m in code_marks(src)] == ['"ROCR_VISIBLE_DEVICES"', '"hy-smi"', '"0x19e5"', '"npu-smi"']
