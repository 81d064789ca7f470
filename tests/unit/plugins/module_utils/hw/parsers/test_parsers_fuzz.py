"""Hypothesis: truncated / garbled real outputs give a valid result or ParseError, nothing else."""
from realdata import read, real  # tests/realdata.py

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import dmidecode, nvidia_smi

PARSERS = [
    ("nvidia-smi-q-xml", nvidia_smi.parse_xml),
    ("nvidia-smi-nvlink", nvidia_smi.parse_nvlink_status),
    ("dmidecode", dmidecode.parse_dmidecode),
]


def _mutate(text, data):
    """Truncate, drop/duplicate lines, splice junk or flip characters."""
    op = data.draw(st.sampled_from(["truncate", "drop_line", "dup_line", "junk", "flip", "head"]))
    if op == "truncate":
        return text[: data.draw(st.integers(0, len(text)))]
    lines = text.splitlines(True)
    if op in ("drop_line", "dup_line") and lines:
        i = data.draw(st.integers(0, len(lines) - 1))
        return "".join(lines[:i] + lines[i + 1:]) if op == "drop_line" else "".join(lines[:i + 1] + lines[i:])
    if op == "junk":
        i = data.draw(st.integers(0, len(text)))
        junk = data.draw(st.text(max_size=40))
        return text[:i] + junk + text[i:]
    if op == "flip" and text:
        i = data.draw(st.integers(0, len(text) - 1))
        ch = data.draw(st.characters())
        return text[:i] + ch + text[i + 1:]
    n = data.draw(st.integers(0, 30))
    return "".join(lines[:n])


def _check(fn, text):
    try:
        out = fn(text)
    except ParseError:
        return
    assert isinstance(out, (dict, list))


@pytest.mark.parametrize("category,fn", PARSERS, ids=[c for c, dummy in PARSERS])
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_garbled_real_outputs(category, fn, data):
    files = real(category)
    path = data.draw(st.sampled_from(files))
    text = read(path)
    for dummy in range(data.draw(st.integers(1, 3))):
        text = _mutate(text, data)
    _check(fn, text)


@pytest.mark.parametrize("category,fn", PARSERS, ids=[c for c, dummy in PARSERS])
@settings(max_examples=40, deadline=None, database=None)
@given(text=st.text(max_size=300))
def test_arbitrary_text(category, fn, text):
    _check(fn, text)
