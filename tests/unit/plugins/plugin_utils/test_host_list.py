"""host_list() (plugin_utils/safe_text.py), the bound of the host names in one console message
(a verdict, issue 23.3): every host while that fits, else Slurm's hostlist form, else the hostlist
of the first hosts and the count of the rest; the reports name every host. The verdicts' use of
it: test_verdict_bound.py."""
from ansible_collections.dlrack.node.plugins.plugin_utils.hostlist import expand
from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import HOST_LIST_MAX_CHARS, host_list

# What a bounded message may add to the names: " and NNNNN more host(s)".
SUFFIX = 40


def _named(text):
    """(the hosts a bounded list names, the count it says it left out)."""
    if " and " in text:
        head, tail = text.rsplit(" and ", 1)
        return expand(head), int(tail.split()[0])
    return expand(text), 0


def test_a_short_list_is_every_name_as_given():
    assert host_list(["b-1", "a-2"]) == "b-1, a-2"
    assert host_list([]) == ""
    assert host_list(["a\x1b]52;c;eA==\x07"]) == "a\\x1b]52;c;eA==\\x07"


def test_a_long_list_is_the_hostlist_of_every_name_when_that_fits():
    names = ["gpu-%05d" % i for i in range(4000, 10000)]
    assert host_list(names) == "gpu-[04000-09999]"
    mixed = ["login1"] + ["gpu-%d" % i for i in range(1, 400)]      # unpadded: gpu-9 before gpu-10
    assert host_list(mixed) == "gpu-[1-399],login1"


def test_past_the_bound_the_first_hosts_in_name_order_then_the_count():
    names = ["gpu-%05d" % i for i in range(10000) if i % 5 < 3]     # no long runs: 2,000 ranges
    text = host_list(names)
    assert len(text) <= HOST_LIST_MAX_CHARS + SUFFIX
    listed, more = _named(text)
    assert listed == names[:len(listed)] and len(listed) + more == 6000 and more > 0
    # irregular names (no ranges): the bound still holds, the names are whole
    irregular = ["node-%x.rack" % (i * 7919) for i in range(3000)]
    text = host_list(irregular)
    assert len(text) <= HOST_LIST_MAX_CHARS + SUFFIX
    listed, more = _named(text)
    assert set(listed) <= set(irregular) and len(listed) + more == 3000


def test_the_bound_is_on_the_escaped_text():
    # each name is about 8 characters raw and 17 escaped, and none can be ranged (no trailing
    # number): the escaped text is what the console shows
    names = ["\x1b\x1b\x1b%dx" % i for i in range(1000)]
    assert len(", ".join(names[:20])) < 200 < len(host_list(names[:20], max_chars=10000))
    text = host_list(names, max_chars=200)
    assert len(text) <= 200 + SUFFIX and "\x1b" not in text and text.endswith("more host(s)")
    assert host_list(["x" * 5000]) == "1 host(s), named in the reports"
