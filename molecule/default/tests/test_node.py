"""Node state after the default scenario's pre-flight, checked the way a person would by hand on the
node (pytest-testinfra over `podman exec`, no Ansible). The pre-flight sets nothing up: it promises
to read the node and write nothing there, and its report must say what the node really is. So: no
file written or changed since the container booted (but Ansible's empty remote temp directory), and
the report's figures - no GPU, the core count, the NUMA nodes, no EDAC - against the node's own
sysfs and lscpu. verify.yml runs this first:

    DLRACK_REPORT=.../reports/report.json python -m pytest -p no:cacheprovider --hosts=podman://CONTAINER molecule/default/tests/test_node.py

The node is read in ONE `podman exec` (~0.7 s here); the tests parse its sections. The Ansible-side
checks (hw_facts' document and check mode, the report's JSON, JUnit and HTML) stay in verify.yml.
"""
import json
import os

import pytest

# GPU vendors the pre-flight looks for (rules gpu.present): NVIDIA, AMD, Hygon
GPU_VENDORS = {"0x10de", "0x1002", "0x1d94"}
# Ansible's remote temp directory (emptied after every task); all else the pre-flight must not touch
ANSIBLE_TMP = ["/root", "/root/.ansible", "/root/.ansible/tmp"]
# written since boot, 2 s after systemd started (podman writes /etc/hosts, hostname, resolv.conf at start);
# /var/lib/systemd holds systemd's own timer stamps
CHANGED = ("S=$(( $(date -d \"$(systemctl show -p UserspaceTimestamp --value)\" +%s) + 2 )); "
           "find /etc /usr /opt /srv /var/lib /var/cache /root /home -xdev -path /var/lib/systemd -prune "
           "-o -newermt @$S -print | sort")


@pytest.fixture(scope="module")
def node(host, read_sections):
    return read_sections(host, [
        ("changed", CHANGED),
        ("ansible-tmp", "ls -A /root/.ansible/tmp 2>/dev/null"),
        ("pci-vendors", "cat /sys/bus/pci/devices/*/vendor | sort -u"),
        ("cores", "lscpu -p=socket,core | grep -v '^#' | sort -u"),
        ("numa-nodes", "ls -d /sys/devices/system/node/node[0-9]*"),
        ("edac", "ls /sys/devices/system/edac/mc 2>/dev/null | grep -c '^mc'"),
    ])


@pytest.fixture(scope="module")
def findings(host):
    with open(os.environ["DLRACK_REPORT"]) as handle:
        doc = json.load(handle)
    return dict((f["rule"], f) for f in doc["hosts"][host.backend.get_hostname()]["findings"])


def test_the_preflight_wrote_nothing_on_the_node(node):
    # Ansible's remote temp directory exists only where a module was copied to the node: over the
    # pipelined connection of the scenarios (molecule/plugins/connection) none is, so it may be absent.
    changed = node[0]["changed"]
    assert changed in ([], ANSIBLE_TMP), node
    assert node[0]["ansible-tmp"] == [], node[0]["ansible-tmp"]


def test_no_gpu_on_the_pci_bus_as_the_report_says(node, findings):
    vendors = set(node[0]["pci-vendors"])
    assert vendors and not vendors & GPU_VENDORS, vendors
    assert findings["gpu.present"]["severity"] == "error" and findings["gpu.present"]["observed"] == 0


def test_the_reported_core_count_is_the_nodes(node, findings):
    assert findings["cpu.cores_exceed_gpus"]["observed"] == len(node[0]["cores"]) > 0, node[0]["cores"]


def test_the_numa_nodes_are_the_reports(node, findings):
    nodes = node[0]["numa-nodes"]
    assert nodes, node
    one = findings["memory.numa_balanced"]["message"].startswith("one NUMA node with CPUs")
    assert one == (len(nodes) == 1), (nodes, findings["memory.numa_balanced"])


def test_no_edac_controller_as_the_report_says(node, findings):
    assert node[0]["edac"] == ["0"], node
    assert findings["memory.edac_active"]["observed"] == "no EDAC"
