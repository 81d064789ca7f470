"""The ECC collector's GPU fault series (issue 29) from real kernel logs (tests/data/real/xid/): bounded
labels (GPU x class, GPU x one level), parsed by the Prometheus client and, where installed (Debian
package prometheus), clean for `promtool check metrics`; the collector's --kernel-log replay."""
import os
import shutil
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.dlrack.node.plugins.module_utils.ecc import metrics as em
from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.cli import check

from testpaths import DATA

XID = os.path.join(DATA, "real", "xid")


def faults(name):
    return check({"kernel_log": os.path.join(XID, name), "state_file": os.devnull}, boot="b")


def samples(text):
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_fault_series_from_real_logs():
    text = em.render_metrics(gpu_faults=faults("gpud-kmsg-test-lines.txt"), now=1.0)
    got = samples(text)
    assert got[("dlrack_gpu_faults_collector_up", ())] == 1
    assert got[("dlrack_gpu_fault_events_total", (("class", "nvlink"), ("gpu", "0009:01:00.0")))] == 3
    assert got[("dlrack_gpu_fault_action", (("gpu", "0000:05:00.0"),))] == 3          # Xid 79: reboot
    assert got[("dlrack_gpu_fault_action", (("gpu", "0000:03:00.0"),))] == 0          # Xid 14: nothing to do
    labels = set(k[1] for k in got if k[0] == "dlrack_gpu_fault_events_total")
    assert all(dict(lab)["class"] in em.FAULT_CLASSES for lab in labels)


def test_label_cardinality_is_bounded():
    """One real line on 200 made-up bus ids: at most 64 GPUs, and only the 7 classes, ever become series."""
    with open(os.path.join(XID, "gpu-operator-1146-xid48.txt")) as handle:
        line = handle.read().strip()
    verdict = {"since_boot": {"0000:%02x:%02x.0" % (i // 32, i % 32): {"memory": 1, "made-up": 5} for i in range(200)}, "gpus": {}}
    got = samples(em.render_metrics(gpu_faults=verdict, now=1.0))
    assert len([k for k in got if k[0] == "dlrack_gpu_fault_events_total"]) == em.MAX_FAULT_GPUS
    assert line   # the real line the bus ids stand in for


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian package prometheus) is not installed")
def test_promtool_clean():
    text = em.render_metrics(gpu_faults=faults("gpud-kmsg-test-lines.txt"), now=1.0)
    res = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False, timeout=60)
    assert res.returncode == 0 and not res.stdout.strip() and not res.stderr.strip(), res.stdout + res.stderr


def test_collector_replays_a_kernel_log(capsys):
    rc = em.main(["--root", os.path.join(DATA, "edac", "netdata-issue1508-serverB"), "--nvidia-smi", "none", "--stdout",
                  "--kernel-log", os.path.join(XID, "gpu-operator-1146-xid48.txt")])
    got = samples(capsys.readouterr().out)
    assert rc == 0 and got[("dlrack_gpu_fault_action", (("gpu", "0000:07:00.0"),))] == 2
    assert got[("dlrack_gpu_fault_events_total", (("class", "memory"), ("gpu", "0000:07:00.0")))] == 1
    # a captured tree without --kernel-log: no fault series (the live node's log is not the tree's)
    em.main(["--root", os.path.join(DATA, "edac", "netdata-issue1508-serverB"), "--nvidia-smi", "none", "--stdout"])
    assert "dlrack_gpu_fault" not in capsys.readouterr().out


def test_counter_series_from_the_h200_xml(capsys, tmp_path):
    """The collector's one nvidia-smi -q -x (the H200's real idle read) gives the PCIe replay counter and the fault
    clock-event reasons (none active); a second read with the counter raised to 120 (the one changed figure) an
    hour later gives the rate, and the counter state the gatherer reads is written."""
    xml = os.path.join(XID, "h200-vm-nvidia-smi-q-x.xml")
    rc = em.main(["--root", os.path.join(DATA, "edac", "netdata-issue1508-serverB"), "--stdout", "--nvidia-smi-xml", xml,
                  "--kernel-log", os.path.join(XID, "h200-vm-dmesg-T-xid31.txt")])
    text = capsys.readouterr().out
    got = samples(text)
    assert rc == 0 and got[("dlrack_gpu_pcie_replays_total", (("gpu", "0000:00:06.0"),))] == 0
    assert got[("dlrack_gpu_clock_fault_active", (("gpu", "0000:00:06.0"), ("reason", "hw_slowdown")))] == 0
    assert got[("dlrack_gpu_ecc_collector_up", ())] == 1
    if shutil.which("promtool"):
        res = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False, timeout=60)
        assert res.returncode == 0 and not (res.stdout + res.stderr).strip(), res.stdout + res.stderr
    state = str(tmp_path / "gpu-counters.json")
    with open(xml) as handle:
        body = handle.read()
    em.gpu_fault_counters(body, state, now=1000.0)
    later = em.gpu_fault_counters(body.replace("<replay_counter>0<", "<replay_counter>120<"), state, now=4600.0)
    got = samples(em.render_metrics(gpu_faults={"counters": later, "gpus": {}, "since_boot": {}}, now=4600.0))
    assert got[("dlrack_gpu_pcie_replays_per_hour", (("gpu", "0000:00:06.0"),))] == 120.0
    assert later["rules"] == ["gpu.pcie_replays"]
