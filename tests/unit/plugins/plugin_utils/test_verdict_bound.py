"""A verdict names its failing hosts within a bound (issue 23.3): a 10,000-host job whose
verdict named 6,000 failing hosts wrote one 66 kB line into the job's stdout (an AWX job's output
is read in a browser). The message names them through host_list() (plugin_utils/safe_text.py):
every host while that fits, else in Slurm's hostlist form, else the hostlist of the first hosts
and the count of the rest; the reports name every host."""
import time

from ansible_collections.dlrack.node.plugins.plugin_utils.hostlist import expand
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import (
    collect_host_inputs, run_preflight, verdict_message)
from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import HOST_LIST_MAX_CHARS

from hwdocs import GOOD

# Declared with an impossible socket count: fails the schema rule (an error).
BAD = {"schema": 1, "source": "declared", "cpu": {"model": "AMD EPYC 7763 64-Core Processor", "sockets": -2},
       "gpu": {"model": "NVIDIA A100-SXM4-80GB", "count": 8}}


def _named(text):
    """(the hosts a bounded list names, the count it says it left out)."""
    if " and " in text:
        head, tail = text.rsplit(" and ", 1)
        return expand(head), int(tail.split()[0])
    return expand(text), 0


def test_the_verdict_of_10000_declared_hosts_with_6000_failing_is_bounded():
    inputs = {}
    for i in range(10000):
        host = "gpu-%05d" % i
        inputs[host] = collect_host_inputs(host, {"dlrack_hw": BAD if i % 5 < 3 else GOOD})
    out = run_preflight(inputs, fail_on="error")
    failing = out["failed_hosts"]
    assert len(failing) == 6000 and out["summary"]["fail"] == 6000
    t0 = time.monotonic()
    msg = verdict_message(failing, "error", "/runner/reports/report.html")
    assert time.monotonic() - t0 < 2
    assert len(msg) <= HOST_LIST_MAX_CHARS + 200          # was 62 kB: every name, one line
    head = "pre-flight failed for 6000 host(s) (dlrack_fail_on=error): "
    tail = "; see /runner/reports/report.html"
    assert msg.startswith(head) and msg.endswith(tail)
    listed, more = _named(msg[len(head):-len(tail)])
    assert listed == failing[:len(listed)] and len(listed) + more == 6000 and len(listed) > 50
    # a fleet whose failing hosts are one rack: every one named, in the hostlist form
    rack = ["gpu-%05d" % i for i in range(2000, 8000)]
    assert verdict_message(rack, "error", "r.html") == (
        "pre-flight failed for 6000 host(s) (dlrack_fail_on=error): gpu-[02000-07999]; see r.html")


def test_the_groups_of_a_verdict_share_the_bound():
    from ansible_collections.dlrack.node.plugins.plugin_utils import verdict
    drifted = ["gpu-%05d" % i for i in range(0, 10000, 2)]
    unchecked = ["node%d" % i for i in range(0, 9000, 3)]
    msg = verdict.verdict_message("drift", [("drifted", drifted), ("could not be checked", unchecked)],
                                  "dlrack_fail_on=error", "d.html")
    assert msg.startswith("drift failed for 8000 host(s) (dlrack_fail_on=error): drifted: gpu-[00000,00002,")
    assert len(msg) <= HOST_LIST_MAX_CHARS + 200
    first, second = msg[len("drift failed for 8000 host(s) (dlrack_fail_on=error): drifted: "):-len("; see d.html")].split(
        "; could not be checked: ")
    listed, more = _named(first)
    assert listed == drifted[:len(listed)] and len(listed) + more == 5000
    assert second == "3000 host(s), named in the reports" or _named(second)[1] + len(_named(second)[0]) == 3000
