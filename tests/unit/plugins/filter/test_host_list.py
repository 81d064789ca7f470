"""The host_list filter (plugins/filter/console_text.py): site.yml's "provisioned:" line names its
hosts escaped and bounded - it listed every host raw (a 10,000-host job: one line of every name)."""
from ansible_collections.dlrack.node.plugins.filter.console_text import FilterModule

host_list = FilterModule().filters()["host_list"]


def test_few_hosts_are_named_and_none_is_none():
    assert host_list(["gpu-01", "gpu-02"]) == "gpu-01, gpu-02"
    assert host_list([]) == "none"


def test_a_control_character_in_a_name_is_escaped():
    assert host_list(["gpu-01\x1b]52;c;x\x07"]) == "gpu-01\\x1b]52;c;x\\x07"


def test_ten_thousand_hosts_take_about_the_bound():
    names = ["gpu-%05d" % i for i in range(10000)]
    text = host_list(names)
    assert len(text) <= 1100 and text == "gpu-[00000-09999]"
    scattered = ["rack%d-node%d" % (i, i * 7) for i in range(10000)]
    text = host_list(scattered, 200)
    assert len(text) <= 260 and text.endswith("more host(s)")
