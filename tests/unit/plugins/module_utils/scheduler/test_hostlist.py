"""The hostlist compressor against Slurm's documented hostlist syntax (Slurm::Hostlist(3pm):
"a common prefix followed by a list of numeric ranges contained within brackets: e.g.
tux[0-5,12,20-25]", names separated by ',' or whitespace; slurm_hostlist_create(3):
"linux[1-3,6]" represents linux1, linux2, linux3 and linux6), and a round trip on any names."""
import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.dlrack.node.plugins.module_utils.scheduler.hostlist import HostlistError, compress, expand


@pytest.mark.parametrize("expression,names", [
    # the examples of the Slurm manual pages, expanded as they say
    ("tux[0-5,12,20-25]", ["tux%d" % i for i in list(range(0, 6)) + [12] + list(range(20, 26))]),
    ("linux[1-3,6]", ["linux1", "linux2", "linux3", "linux6"]),
    ("node1,node[2-5,12]", ["node1", "node2", "node3", "node4", "node5", "node12"]),
    ("node21 node[27-34]", ["node21"] + ["node%d" % i for i in range(27, 35)]),
    # zero padding is the lower bound's
    ("gpu-[001-003,120]", ["gpu-001", "gpu-002", "gpu-003", "gpu-120"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
])
def test_expand_follows_the_documented_syntax(expression, names):
    assert expand(expression) == names


@pytest.mark.parametrize("names,expression", [
    (["gpu-%03d" % i for i in range(1, 121)] + ["gpu-200"], "gpu-[001-120,200]"),
    (["tux%d" % i for i in list(range(0, 6)) + [12] + list(range(20, 26))], "tux[0-5,12,20-25]"),
    (["linux6", "linux2", "linux1", "linux3", "linux2"], "linux[1-3,6]"),       # sorted, duplicates once
    (["login1"], "login1"),                                                    # one name: no bracket
    (["login1", "gpu-01", "gpu-02"], "gpu-[01-02],login1"),
    (["n8", "n9", "n10"], "n[8-10]"),
    (["n08", "n09", "n10"], "n[08-10]"),
    (["n1", "n01", "n2"], "n[1-2,01]"),                                        # two paddings never share a range
    (["gpu-01.rack7.example.com", "gpu-02.rack7.example.com"],                 # no trailing digits: whole names
     "gpu-01.rack7.example.com,gpu-02.rack7.example.com"),
    (["db", "node-00001", "node-00002", "node-00004"], "db,node-[00001-00002,00004]"),
    ([], ""),
])
def test_compress(names, expression):
    assert compress(names) == expression
    assert sorted(expand(expression)) == sorted(set(names))


def test_names_the_syntax_cannot_carry_are_written_whole_and_not_ranged():
    hostile = ['x" onmouseover="alert(1)', "a[1]", "b,c", "n" + "9" * 40]
    out = compress(hostile + ["n1", "n2"])
    for name in hostile:
        assert name in out
    assert "n[1-2]" in out


@pytest.mark.parametrize("bad", ["tux[1-3", "tux[3-1]", "tux[a-b]", "tux[1-3]x", "tux[]"])
def test_expand_refuses_what_the_syntax_does_not_allow(bad):
    with pytest.raises(HostlistError):
        expand(bad)


NAME = st.builds(lambda p, n, w: p + str(n).zfill(w), st.sampled_from(["gpu-", "node", "rack1-n", "", "db"]),
                 st.integers(0, 300), st.integers(1, 4)) | st.sampled_from(["login", "mgmt-a", "x.example.com"])


@settings(max_examples=300, deadline=None)
@given(st.lists(NAME, max_size=60))
def test_round_trip(names):
    """expand(compress(names)) is the names, sorted and de-duplicated: nothing lost, nothing added."""
    got = expand(compress(names))
    assert len(got) == len(set(got)) and set(got) == set(names)
