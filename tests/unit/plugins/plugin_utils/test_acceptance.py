"""Acceptance verdicts and reports: link arithmetic, the H200 reference figures, degraded links,
storage and memory expectations, health findings, skips without a GPU, and the three report files."""
import copy
import json
import os
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.acceptance.health import health_from_xml
from ansible_collections.dlrack.node.plugins.plugin_utils import acceptance as acc
from conftest import DATA

H200_XML = open(os.path.join(DATA, "acceptance", "h200-vm-nvidia-smi-q-x-idle.xml")).read()
NO_DRIVER = {"status": "skip", "reason": "libcuda.so.1 cannot be loaded (...): no NVIDIA driver on this node", "devices": []}


def _fig(gbps):
    return {"gbps": gbps, "best": gbps, "worst": gbps, "n": 10, "bytes": 1 << 30}


def _h200_raw(h2d=54.8, d2h=55.0, link=None):
    health = dict(health_from_xml(H200_XML), status="ok", reason=None)
    dev = {"ordinal": 0, "pci_bus_id": "0000:00:06.0", "name": "NVIDIA H200", "numa_node": None,
           "h2d_pinned": _fig(h2d), "d2h_pinned": _fig(d2h), "h2d_pageable": _fig(17.6), "d2h_pageable": _fig(13.4),
           "link": link or dict(health["gpus"][0]["pcie"], source="nvidia-smi")}
    return {"check_mode": False, "gpu": {"status": "ok", "devices": [dev], "p2p": None}, "health": health,
            "dcgm": {"status": "skip", "reason": "dcgmi is not installed (DCGM diagnostics not run)", "tests": []},
            "storage": {"hot": {"path": "/mnt/hot", "status": "ok", "direct": True,
                                "read": {"bytes_per_s": 9.0e9, "ioengine": "libaio", "jobs": 4},
                                "write": {"bytes_per_s": 6.0e9, "ioengine": "libaio", "jobs": 4}},
                        "cold": {"path": "", "status": "skip", "reason": "no path set for this tier"}},
            "memory": {"status": "ok", "nodes": [{"node": 0, "status": "ok", "gbps": 180.0, "threads": 8}]},
            "gpu_count": 1}


def _by(ms, name, target=None):
    found = [m for m in ms if m["name"] == name and (target is None or m["target"] == target)]
    assert len(found) == 1, (name, target, ms)
    return found[0]


def test_link_rates():
    assert round(acc.link_rate_gbps(5, 16), 2) == 63.02
    assert (round(acc.link_rate_gbps(4, 16), 2), round(acc.link_rate_gbps(3, 16), 2)) == (31.51, 15.75)
    assert (acc.link_rate_gbps(2, 16), acc.link_rate_gbps(1, 16)) == (8.0, 4.0)
    assert round(acc.link_rate_gbps(6, 16), 1) == 121.0
    assert acc.link_rate_gbps(None, 16) is None and acc.link_rate_gbps(5, None) is None


def test_h200_reference_figures_pass():
    status, ms = acc.judge_host(_h200_raw())
    h2d = _by(ms, "gpu.h2d_bandwidth")
    assert (h2d["verdict"], h2d["value"], h2d["unit"], h2d["expected"]) == ("pass", 54.8, "GB/s", 50.41)
    assert h2d["target"] == "GPU0 0000:00:06.0"
    assert h2d["reason"].startswith("54.8 GB/s = 87% of PCIe Gen5 x16 (63.0 GB/s); expected >= 80% (50.41 GB/s)")
    assert "pageable 17.6 GB/s" in h2d["reason"]
    assert _by(ms, "gpu.d2h_bandwidth")["verdict"] == "pass"
    assert _by(ms, "gpu.p2p_bandwidth")["verdict"] == "skip"
    assert _by(ms, "gpu.health")["verdict"] == "pass"
    assert _by(ms, "gpu.dcgm_diag")["verdict"] == "skip"
    assert status == "pass"


def test_a_gpu_wired_x8_is_an_error_and_says_so():
    raw = _h200_raw(h2d=26.1, d2h=26.3, link={"gen_max": 5, "width": 8, "width_max": 16})
    m = _by(acc.judge_host(raw)[1], "gpu.h2d_bandwidth")
    assert m["verdict"] == "error" and "negotiated at x8 of x16" in m["reason"]


def test_gen4_platform_and_tolerance_band():
    gen4 = {"gen_max": 4, "width": 16, "width_max": 16}
    assert _by(acc.judge_host(_h200_raw(26.0, 26.0, gen4))[1], "gpu.h2d_bandwidth")["verdict"] == "pass"
    assert _by(acc.judge_host(_h200_raw(47.0))[1], "gpu.h2d_bandwidth")["verdict"] == "warning"   # >= 90% of 50.41
    assert _by(acc.judge_host(_h200_raw(45.0))[1], "gpu.h2d_bandwidth")["verdict"] == "error"
    unknown = _by(acc.judge_host(_h200_raw(link={"gen_max": None, "width": None, "width_max": None}))[1], "gpu.h2d_bandwidth")
    assert unknown["verdict"] == "warning" and "cannot be judged" in unknown["reason"]


def test_no_gpu_or_driver_skips_every_gpu_measurement():
    raw = _h200_raw()
    raw.update(gpu=NO_DRIVER, health={"status": "skip", "reason": "nvidia-smi is not installed", "gpus": []}, gpu_count=0)
    status, ms = acc.judge_host(raw)
    gpu = [m for m in ms if m["name"].startswith("gpu.")]
    assert {m["name"] for m in gpu} == {"gpu.h2d_bandwidth", "gpu.d2h_bandwidth", "gpu.p2p_bandwidth", "gpu.health", "gpu.dcgm_diag"}
    # GPUs expected (the default) but none measured: the GPU figures are incomplete, never pass (issue 20.4)
    assert [m["verdict"] for m in gpu if m["name"] in ("gpu.h2d_bandwidth", "gpu.d2h_bandwidth", "gpu.p2p_bandwidth")] == ["incomplete"] * 3
    assert all("the GPU figures were not measured" in m["reason"] and "libcuda" in m["reason"] for m in gpu
               if m["verdict"] == "incomplete")
    assert status == "incomplete"
    # a node declared without GPUs (dlrack_hw.gpus: []): every gpu.* measurement is a skip
    status, ms = acc.judge_host(raw, {"expect_gpus": False})
    gpu = [m for m in ms if m["name"].startswith("gpu.")]
    assert all(m["verdict"] == "skip" and m["reason"] for m in gpu)
    assert "declared without GPUs" in _by(ms, "gpu.h2d_bandwidth")["reason"]
    assert status == "pass"  # storage and memory passed; no gpu.* error without a GPU


def test_unmeasured_hardware_is_incomplete_never_pass():
    """Issue 20.4: a node without fio and without a GPU driver is not PASS. Unmeasured tier and GPU
    figures are incomplete with the reason and the fix; an explicit opt-out stays a skip; check mode
    stays skip; incomplete fails under fail_on error and warning, not never."""
    raw = _h200_raw()
    nofio = {"path": "/mnt/hot", "status": "skip",
             "reason": "fio is not installed on this node (install the fio package to measure storage)"}
    unmounted = {"path": "/mnt/archive", "status": "skip", "reason": "/mnt/archive is not a mount point (it is on /)"}
    raw.update(gpu=NO_DRIVER, health={"status": "skip", "reason": "nvidia-smi is not installed", "gpus": []},
               gpu_count=0, storage={"hot": nofio, "cold": unmounted})
    status, ms = acc.judge_host(raw)
    assert status == "incomplete"
    hot = _by(ms, "storage.hot_read_throughput")
    assert hot["verdict"] == "incomplete" and "fio is not installed" in hot["reason"]
    assert "acceptance_hot_path: ''" in hot["reason"]
    assert _by(ms, "storage.cold_write_throughput")["verdict"] == "incomplete"
    assert _by(ms, "gpu.h2d_bandwidth")["verdict"] == "incomplete"
    assert _by(ms, "memory.bandwidth")["verdict"] == "measured"      # one NUMA node, no floor: not judged
    # opted out: acceptance_gpu false and empty tier paths -> skip; what is left (one NUMA node's
    # memory figure) has no expectation, so nothing was judged: skip, never pass (issue 30.8)
    opted = copy.deepcopy(raw)
    opted["gpu"] = {"status": "skip", "reason": "disabled (acceptance_gpu: false)", "devices": [], "opted_out": True}
    opted["storage"] = {t: {"path": "", "status": "skip", "reason": "no path set for this tier"} for t in ("hot", "cold")}
    assert acc.judge_host(opted)[0] == "skip"
    assert acc.judge_host(opted, {"memory_min_gbps": 100})[0] == "pass"
    # an error still outranks incomplete
    err = copy.deepcopy(raw)
    err["storage"]["hot"] = {"path": "/mnt/hot", "status": "error", "reason": "fio read on /mnt/hot exited 1"}
    assert acc.judge_host(err)[0] == "error"
    # check mode: nothing is measured by design, so it is skip (check mode never lies or fails)
    check = copy.deepcopy(raw)
    check["check_mode"] = True
    assert acc.judge_host(check)[0] == "skip"
    assert _by(acc.judge_host(check)[1], "storage.hot_read_throughput")["verdict"] == "skip"
    for fail_on, failed in (("error", ["gpu-01"]), ("warning", ["gpu-01"]), ("never", [])):
        doc = acc.evaluate({"gpu-01": {"raw": raw}, "gpu-02": {"raw": opted}}, fail_on)
        assert doc["summary"]["failed_hosts"] == failed
        assert (doc["summary"]["incomplete"], doc["summary"]["skip"], doc["summary"]["pass"]) == (1, 1, 0)
        assert doc["summary"]["measurements"]["storage.hot_read_throughput"]["incomplete"] == 1
    lines = acc.summary_lines(doc)
    assert lines[0].endswith(", 1 incomplete (not everything was measured); 2 figure(s) measured, not judged "
                             "(no expectation: see their reasons)")
    assert "INCOMPLETE gpu-01" in lines
    assert any(line.lstrip().startswith("incomplete storage.hot_read_throughput") for line in lines)


def test_incomplete_in_junit_and_html(tmp_path):
    raw = _h200_raw()
    raw["storage"]["hot"] = {"path": "/mnt/hot", "status": "skip", "reason": "fio is not installed on this node"}
    doc = acc.evaluate({"gpu-01": {"raw": raw}}, "error")
    paths = acc.write_reports(str(tmp_path), doc)
    assert json.loads(open(paths["json"]).read())["hosts"]["gpu-01"]["status"] == "incomplete"
    root = ET.parse(paths["xml"]).getroot()
    cases = {tc.get("name"): tc for tc in root.iter("testcase")}
    fail = cases["storage.hot_read_throughput [/mnt/hot]"].find("failure")
    assert fail is not None and fail.get("type") == "incomplete" and "fio is not installed" in fail.get("message")
    assert root.get("failures") == "3"   # hot read, write and random read
    html = open(paths["html"]).read()
    assert '<span class="badge inc">incomplete</span></h2>' in html
    assert '<b class="inc">1</b>incomplete' in html


def test_cuda_error_with_a_driver_is_an_error():
    raw = _h200_raw()
    raw["gpu"] = {"status": "error", "reason": "cuInit failed: CUDA_ERROR_SYSTEM_NOT_READY (802)", "devices": []}
    assert _by(acc.judge_host(raw)[1], "gpu.h2d_bandwidth")["verdict"] == "error"


@pytest.mark.parametrize("change, verdict, words", [
    ({"remapped_rows": {"pending": True}}, "warning", "row remap is pending"),
    ({"remapped_rows": {"failure": True}}, "error", "replace the GPU"),
    ({"throttle_active": ["hw_thermal_slowdown"]}, "error", "check cooling"),
    ({"throttle_active": ["sw_power_cap"]}, "pass", "healthy"),
    ({"throttle_counters": {"hw_power_brake": 2500000}}, "warning", "hw_power_brake 2.5 s"),
    ({"persistence_mode": False}, "warning", "nvidia-persistenced"),
    ({"ecc_volatile_uncorrected": 3}, "error", "3 volatile uncorrectable"),
])
def test_health_findings(change, verdict, words):
    raw = _h200_raw()
    g = raw["health"]["gpus"][0]
    for k, v in change.items():
        g[k] = dict(g[k], **v) if isinstance(v, dict) and isinstance(g[k], dict) else v
    m = _by(acc.judge_host(raw)[1], "gpu.health")
    assert m["verdict"] == verdict and words in m["reason"]


def test_persistence_can_be_excused():
    raw = _h200_raw()
    raw["health"]["gpus"][0]["persistence_mode"] = False
    assert _by(acc.judge_host(raw, {"require_persistence": "false"})[1], "gpu.health")["verdict"] == "pass"


def test_storage_expected_is_rate_per_gpu_times_gpus():
    raw = _h200_raw()
    raw["gpu_count"] = 8
    ms = acc.judge_host(raw)[1]
    read, write = _by(ms, "storage.hot_read_throughput"), _by(ms, "storage.hot_write_throughput")
    assert (read["value"], read["expected"], read["verdict"]) == (9.0, 8.0, "pass")
    assert (write["value"], write["expected"], write["verdict"]) == (6.0, 4.0, "pass")
    assert "1.0 GB/s x 8 GPU(s) = 8.0 GB/s" in read["reason"]
    assert _by(acc.judge_host(raw, {"gpu_count": 10})[1], "storage.hot_read_throughput")["verdict"] == "warning"  # 9 of 10
    assert _by(acc.judge_host(raw, {"gpu_count": 16})[1], "storage.hot_read_throughput")["verdict"] == "error"
    cold = _by(ms, "storage.cold_read_throughput")
    assert cold["verdict"] == "skip" and "acceptance_cold_path is empty" in cold["reason"]
    raw["storage"]["hot"]["direct"] = False
    m = _by(acc.judge_host(raw)[1], "storage.hot_read_throughput")
    assert m["verdict"] == "warning" and "page cache" in m["reason"]


def test_memory_nodes_are_compared_with_the_best():
    raw = _h200_raw()
    raw["memory"]["nodes"] = [{"node": 0, "status": "ok", "gbps": 100.0, "threads": 48},
                              {"node": 1, "status": "ok", "gbps": 75.0, "threads": 48},
                              {"node": 2, "status": "skip", "reason": "node 2 has no CPUs (memory-only node)"}]
    ms = acc.judge_host(raw)[1]
    assert _by(ms, "memory.bandwidth", "node0")["verdict"] == "pass"
    n1 = _by(ms, "memory.bandwidth", "node1")
    assert (n1["expected"], n1["verdict"]) == (80.0, "warning")
    assert _by(ms, "memory.bandwidth", "node2")["verdict"] == "skip"
    raw["memory"]["nodes"][1]["gbps"] = 60.0
    assert _by(acc.judge_host(raw)[1], "memory.bandwidth", "node1")["verdict"] == "error"
    single = _by(acc.judge_host(_h200_raw())[1], "memory.bandwidth")
    assert single["expected"] is None and "not judged" in single["reason"] and single["verdict"] == "measured"
    floor = _by(acc.judge_host(_h200_raw(), {"memory_min_gbps": 200})[1], "memory.bandwidth")
    assert (floor["expected"], floor["verdict"]) == (200.0, "warning")


def test_p2p_pairs_against_the_median():
    raw = _h200_raw()
    dev1 = dict(raw["gpu"]["devices"][0], ordinal=1, pci_bus_id="0000:00:07.0")
    raw["gpu"]["devices"].append(dev1)
    raw["gpu"]["p2p"] = [{"src": 0, "dst": 1, "peer_access": True, "gbps": 380.0},
                         {"src": 1, "dst": 0, "peer_access": True, "gbps": 120.0}]
    ms = acc.judge_host(raw)[1]
    assert _by(ms, "gpu.p2p_bandwidth", "GPU0->GPU1")["verdict"] == "pass"
    slow = _by(ms, "gpu.p2p_bandwidth", "GPU1->GPU0")
    assert slow["verdict"] == "error" and slow["expected"] == 200.0  # 80% of the median pair (250)


def test_fleet_status_fail_on_and_bad_input():
    good, bad = _h200_raw(), _h200_raw(h2d=20.0)
    inputs = {"ok": {"raw": good}, "slow": {"raw": bad}, "gone": {}, "typo": {"raw": good, "thresholds": {"link_fractoin": 0.7}},
              "range": {"raw": good, "thresholds": {"link_fraction": 80}}}
    doc = acc.evaluate(inputs, "error")
    st = {h: r["status"] for h, r in doc["hosts"].items()}
    assert st == {"ok": "pass", "slow": "error", "gone": "error", "typo": "error", "range": "error"}
    assert doc["hosts"]["gone"]["measurements"][0]["reason"].startswith("no measurements")
    assert "unknown acceptance threshold 'link_fractoin'" in doc["hosts"]["typo"]["measurements"][0]["reason"]
    assert "typo:" in doc["hosts"]["typo"]["measurements"][0]["reason"]
    assert "link_fraction=80 is out of range" in doc["hosts"]["range"]["measurements"][0]["reason"]
    assert doc["summary"]["failed_hosts"] == ["gone", "range", "slow", "typo"]
    assert acc.evaluate(inputs, "never")["summary"]["failed_hosts"] == []
    warn = _h200_raw(h2d=47.0)
    assert acc.evaluate({"w": {"raw": warn}}, "warning")["summary"]["failed_hosts"] == ["w"]
    assert acc.evaluate({"w": {"raw": warn}}, "error")["summary"]["failed_hosts"] == []


def test_reports(tmp_path):
    raw = _h200_raw(h2d=20.0)
    raw["storage"]["hot"] = {"path": "/mnt/hot", "status": "error", "reason": "fio said \x1b[31m<bad> & \x00worse"}
    check = copy.deepcopy(_h200_raw())
    check["check_mode"] = True
    doc = acc.evaluate({"gpu-01": {"raw": raw}, "gpu-02": {"raw": check}}, "error")
    paths = acc.write_reports(str(tmp_path), doc)
    written = sorted(n for n in os.listdir(str(tmp_path)) if not n.startswith("."))
    assert written == ["acceptance.html", "acceptance.json", "acceptance.xml"]
    assert not [n for n in os.listdir(str(tmp_path)) if n.endswith(".tmp")]  # no temporary file left
    data = json.loads(open(paths["json"]).read(), parse_constant=lambda c: pytest.fail("non-strict JSON " + c))
    assert set(data) == {"hosts", "summary"}
    for m in data["hosts"]["gpu-01"]["measurements"]:
        assert {"name", "value", "unit", "expected", "verdict", "reason"} <= set(m)
    assert data["hosts"]["gpu-02"]["check_mode"] is True
    suites = ET.parse(paths["xml"]).getroot()
    assert suites.get("failures") == str(sum(1 for m in data["hosts"]["gpu-01"]["measurements"] if m["verdict"] == "error"))
    names = [tc.get("name") for tc in suites.iter("testcase")]
    assert "gpu.h2d_bandwidth [GPU0 0000:00:06.0]" in names
    html = open(paths["html"]).read()
    assert "gpu-01" in html and "&lt;bad&gt; &amp;" in html and "\x00" not in html and "\\x00worse" in html
    with pytest.raises(acc.ReportWriteError, match="not a directory"):
        acc.write_reports(paths["json"], doc)
    lines = acc.summary_lines(doc)
    # each host's one-NUMA-node memory figure has no expectation: counted apart, never as a pass
    assert lines[0] == ("dlrack.node acceptance: 2 host(s): 1 pass, 0 warning, 1 error, 0 skip; "
                        "2 figure(s) measured, not judged (no expectation: see their reasons)")


def test_hosts_left_out_after_a_failed_preflight_are_skip_not_error():
    """site.yml --tags acceptance ends the hosts that failed the pre-flight before measuring: they
    are reported as skip with the reason, never as "no measurements" errors, and do not fail."""
    doc = acc.evaluate({"bad": {}, "gone": {}}, "error", skipped={"bad": "failed the pre-flight of this run"})
    assert doc["hosts"]["bad"]["status"] == "skip"
    [m] = doc["hosts"]["bad"]["measurements"]
    assert (m["name"], m["verdict"], m["reason"]) == ("host.measured", "skip", "failed the pre-flight of this run")
    assert doc["hosts"]["gone"]["status"] == "error"          # not measured for another reason: still an error
    assert doc["summary"]["failed_hosts"] == ["gone"] and doc["summary"]["skip"] == 1


def _rand_raw(iops, devices, direct=True, tier="hot"):
    from ansible_collections.dlrack.node.plugins.module_utils.acceptance.fio import parse_fio_json
    fig = parse_fio_json(open(os.path.join(DATA, "acceptance", "fio-3.33-randread-disk-direct.json")).read(), "read")
    fig.update(iops=iops, ioengine="libaio", jobs=4 * max(1, len(devices)), iodepth=32, block_kb=4)
    raw = _h200_raw()
    raw["storage"][tier] = dict(raw["storage"]["hot"], path="/mnt/" + tier, direct=direct, devices=devices, randread=fig)
    return raw


def test_random_reads_judged_against_the_tiers_devices():
    """Issue 24.1: 4 KiB random read IOPS per tier against a figure derived from the tier's devices
    (kind and count), with p50/p99 latency in the reason; both sides of the line; overrides."""
    nvme4 = [{"name": "nvme%dn1" % i, "kind": "nvme"} for i in range(4)]
    m = _by(acc.judge_host(_rand_raw(850000, nvme4))[1], "storage.hot_randread_iops")
    assert (m["verdict"], m["value"], m["unit"], m["expected"]) == ("pass", 850000, "IOPS", 800000)
    assert "4 NVME x 200,000" in m["reason"] and "p50 1105.9 us, p99 29753.3 us" in m["reason"]
    assert m["details"]["lat_p99_us"] == 29753.3 and m["details"]["devices"] == nvme4
    assert _by(acc.judge_host(_rand_raw(750000, nvme4))[1], "storage.hot_randread_iops")["verdict"] == "warning"
    assert _by(acc.judge_host(_rand_raw(700000, nvme4))[1], "storage.hot_randread_iops")["verdict"] == "error"
    # an HDD tier: 12 spindles x 100 IOPS; its small-read collapse is plain next to the NVMe figure
    hdd12 = [{"name": "sd%s" % c, "kind": "hdd"} for c in "abcdefghijkl"]
    m = _by(acc.judge_host(_rand_raw(1500, hdd12, tier="cold"))[1], "storage.cold_randread_iops")
    assert (m["verdict"], m["expected"]) == ("pass", 1200) and "12 HDD x 100" in m["reason"]
    assert _by(acc.judge_host(_rand_raw(900, hdd12, tier="cold"))[1], "storage.cold_randread_iops")["verdict"] == "error"
    # a loop device or tmpfs has no device-derived figure: reported, not judged, until set per tier
    loop = [{"name": "loop3", "kind": "loop"}]
    m = _by(acc.judge_host(_rand_raw(60000, loop))[1], "storage.hot_randread_iops")
    assert m["expected"] is None and "not judged: the tier is on a loop device" in m["reason"] and m["verdict"] == "measured"
    m = _by(acc.judge_host(_rand_raw(60000, loop), {"hot_rand_iops": 100000})[1], "storage.hot_randread_iops")
    assert (m["verdict"], m["expected"]) == ("error", 100000)
    m = _by(acc.judge_host(_rand_raw(60000, []))[1], "storage.hot_randread_iops")
    assert "devices are not known" in m["reason"]
    # buffered (tmpfs refuses O_DIRECT): the page cache is in the figure, never better than warning
    m = _by(acc.judge_host(_rand_raw(900000, nvme4, direct=False))[1], "storage.hot_randread_iops")
    assert m["verdict"] == "warning" and "page cache" in m["reason"]
    # per-kind override
    m = _by(acc.judge_host(_rand_raw(850000, nvme4), {"rand_iops_per_nvme": 500000})[1], "storage.hot_randread_iops")
    assert (m["verdict"], m["expected"]) == ("error", 2000000)


def test_random_reads_not_measured():
    raw = _h200_raw()
    assert _by(acc.judge_host(raw)[1], "storage.hot_randread_iops")["verdict"] == "skip"   # runtime 0: none asked
    assert _by(acc.judge_host(raw)[1], "storage.cold_randread_iops")["reason"].startswith("acceptance_cold_path is empty")
    raw["storage"]["hot"] = {"path": "/mnt/hot", "status": "skip", "reason": "fio is not installed on this node"}
    assert _by(acc.judge_host(raw)[1], "storage.hot_randread_iops")["verdict"] == "incomplete"


def _sf_raw(files_per_s, gpus=8, devices=None, tier="hot"):
    """A host whose small-file read gave ``files_per_s`` files/s cold (figures in the shape
    smallfiles.measure returns; the real runs are in test_smallfiles.py and molecule/acceptance)."""
    raw = _h200_raw()
    raw["gpu_count"] = gpus
    raw["storage"][tier] = dict(raw["storage"]["hot"], path="/mnt/" + tier, devices=devices or [])
    per = files_per_s / gpus
    groups = [{"name": "GPU%d" % i, "cpus": "0-7", "workers": 4, "files": 1000, "bytes": 1000 * 65536,
               "files_per_s": per, "mb_per_s": round(per * 0.065536, 1)} for i in range(gpus)]
    phase = {"groups": groups, "files": 1000 * gpus, "files_per_s": files_per_s, "mb_per_s": round(files_per_s * 0.065536, 1),
             "complete": True}
    raw["smallfiles"] = {"hot": {"path": "/mnt/hot", "status": "skip", "reason": "x"},
                         "cold": {"path": "", "status": "skip", "reason": "no path set for this tier"}}
    raw["smallfiles"][tier] = {"path": "/mnt/" + tier, "status": "ok", "files": 1000 * gpus, "file_kb": 64,
                               "cold": phase, "warm": dict(phase, files_per_s=files_per_s * 5)}
    raw["mem_total_bytes"] = 2048 * 10 ** 9
    return raw


def test_small_files_feed_the_declared_workload_or_the_gpus_wait():
    """Issue 24.3: 8 GPUs x 3,000 samples/s = 24,000 files/s; +25% margin = 30,000."""
    wl = {"samples_per_s_per_gpu": 3000, "sample_kb": 64}
    for fps, verdict, words in ((31000, "pass", "with margin"), (26000, "warning", "barely"),
                                (20000, "error", "the GPUs would wait for data (83% of what they need)")):
        ms = acc.judge_host(_sf_raw(fps), None, wl)[1]
        m = _by(ms, "storage.hot_smallfile_read")
        assert (m["verdict"], m["value"], m["unit"], m["expected"]) == (verdict, fps, "files/s", 24000.0), m
        assert words in m["reason"] and "3000.0 samples/s/GPU x 8 GPU(s) = 24000.0 files/s" in m["reason"]
        assert "GPU0 %s files/s" % (fps / 8.0) in m["reason"]            # per GPU, beside the total
        assert len(m["details"]["cold"]["groups"]) == 8
        if verdict != "pass":
            assert "more NVMe devices" in m["reason"] and "page cache" in m["reason"]
    assert "page cache dropped per file;" in _by(acc.judge_host(_sf_raw(31000), None, wl)[1], "storage.hot_smallfile_read")["reason"]
    tmpfs = _sf_raw(31000)
    tmpfs["storage"]["hot"]["fstype"] = "tmpfs"
    assert "on tmpfs the files are the page cache" in _by(acc.judge_host(tmpfs, None, wl)[1], "storage.hot_smallfile_read")["reason"]
    m = _by(acc.judge_host(_sf_raw(31000), {"smallfile_margin": 0.5}, wl)[1], "storage.hot_smallfile_read")
    assert m["verdict"] == "warning"
    m = _by(acc.judge_host(_sf_raw(31000), None, dict(wl, sample_kb=512))[1], "storage.hot_smallfile_read")
    assert "set acceptance_smallfile_kb" in m["reason"]


def test_small_files_without_a_workload_against_the_devices():
    nvme2 = [{"name": "nvme0n1", "kind": "nvme"}, {"name": "nvme1n1", "kind": "nvme"}]
    # 2 x 200,000 IOPS / (1 + 1) I/Os per 64 KiB file = 200,000 files/s
    m = _by(acc.judge_host(_sf_raw(250000, devices=nvme2))[1], "storage.hot_smallfile_read")
    assert (m["verdict"], m["expected"]) == ("pass", 200000.0) and "no workload declared" in m["reason"]
    assert _by(acc.judge_host(_sf_raw(150000, devices=nvme2))[1], "storage.hot_smallfile_read")["verdict"] == "error"
    hdd = [{"name": "sd%s" % c, "kind": "hdd"} for c in "abcd"]
    m = _by(acc.judge_host(_sf_raw(180, devices=hdd, tier="cold"))[1], "storage.cold_smallfile_read")
    assert (m["verdict"], m["expected"]) == ("warning", 200.0)      # 4 x 100 IOPS / 2 I/Os per file; 180 within 10%
    assert _by(acc.judge_host(_sf_raw(100, devices=hdd, tier="cold"))[1], "storage.cold_smallfile_read")["verdict"] == "error"
    m = _by(acc.judge_host(_sf_raw(5000, devices=[{"name": "loop1", "kind": "loop"}]))[1], "storage.hot_smallfile_read")
    assert m["verdict"] == "measured" and m["expected"] is None and "not judged" in m["reason"]
    # the hot tier's small-file read not measured while its path is set: incomplete
    raw = _sf_raw(5000)
    raw["smallfiles"]["hot"] = {"path": "/mnt/hot", "status": "skip", "reason": "/mnt/hot is not a mount point"}
    assert _by(acc.judge_host(raw)[1], "storage.hot_smallfile_read")["verdict"] == "incomplete"
    raw["smallfiles"]["hot"] = {"path": "/mnt/hot", "status": "skip", "reason": "disabled", "opted_out": True}
    assert _by(acc.judge_host(raw)[1], "storage.hot_smallfile_read")["verdict"] == "skip"


def test_page_cache_note():
    raw = _sf_raw(31000)                      # 2,048 GB RAM, 8 GPUs x 8 GB pinned = 64 GB
    m = _by(acc.judge_host(raw, None, {"dataset_gb": 1500})[1], "storage.page_cache")
    assert (m["verdict"], m["value"], m["expected"]) == ("pass", 1984.0, 1500.0)
    assert "fits in RAM 2048.0 GB minus GPU-pinned buffers 64.0 GB" in m["reason"]
    m = _by(acc.judge_host(raw, None, {"dataset_gb": 2000})[1], "storage.page_cache")
    assert m["verdict"] == "warning" and "does not fit" in m["reason"] and "every epoch reads from the tier" in m["reason"]
    assert [x for x in acc.judge_host(raw)[1] if x["name"] == "storage.page_cache"] == []   # no dataset_gb: no note


def test_a_bad_declared_workload_is_the_hosts_error():
    doc = acc.evaluate({"gpu-01": {"raw": _sf_raw(1000), "thresholds_error": "dlrack_hw.workload.sample_kb: expected a number"}})
    [m] = doc["hosts"]["gpu-01"]["measurements"]
    assert (m["name"], m["verdict"]) == ("host.workload", "error") and m["reason"].startswith("gpu-01: dlrack_hw.workload")


def test_the_action_reads_and_validates_the_declared_workload():
    from ansible_collections.dlrack.node.plugins.action.acceptance_report import _workload
    wl = {"samples_per_s_per_gpu": 3000, "sample_kb": 64}
    assert _workload({"dlrack_hw": {"workload": wl}})[0]["samples_per_s_per_gpu"] == 3000
    assert _workload({"dlrack_workload": wl})[0]["sample_kb"] == 64
    assert _workload({}) == (None, None)
    clean, problem = _workload({"dlrack_hw": {"workload": {"samples_per_s_per_gpu": "many"}}})
    assert clean is None and problem.startswith("dlrack_hw.workload.samples_per_s_per_gpu: expected a number")


def test_a_host_the_role_could_not_measure_is_an_error_with_its_reason():
    """roles/acceptance records why a host failed, hung or was unreachable ({"failed": msg}):
    an error naming the reason (bounded), never a pass or a skip."""
    status, ms = acc.judge_host({"failed": "Task failed: Timed out after 10 second(s)."})
    assert status == "error" and [m["name"] for m in ms] == ["host.measured"]
    assert ms[0]["reason"] == ("not measured: Task failed: Timed out after 10 second(s); fix the host (or its "
                               "connection), then re-run")
    status, ms = acc.judge_host({"failed": "x" * 5000})
    assert status == "error" and len(ms[0]["reason"]) < 1100 and "(5000 characters)" in ms[0]["reason"]


def test_a_host_whose_module_never_ran_is_named_by_its_stderr():
    """A module that never ran (the interpreter missing on the node) fails with Ansible's "Module
    result deserialization failed: No start of json char found": the reason carries the module's
    stderr, which names the cause, on one line and bounded."""
    stderr = ("pyenv: python3.13: command not found\n\nThe `python3.13' command exists in these Python versions:\n"
              "  3.13.0\n") + "x" * 3000
    status, ms = acc.judge_host({"failed": "Module result deserialization failed: No start of json char found",
                                 "stderr": stderr})
    assert status == "error"
    reason = ms[0]["reason"]
    assert reason.startswith("not measured: Module result deserialization failed: No start of json char found; "
                             "the node printed: pyenv: python3.13: command not found The `python3.13' command"), reason
    assert "\n" not in reason and len(reason) < 1100 and reason.endswith("fix the host (or its connection), then re-run")
    assert acc.judge_host({"failed": "Timed out", "stderr": ""})[1][0]["reason"] == (
        "not measured: Timed out; fix the host (or its connection), then re-run")


def test_a_small_file_write_stopped_at_its_limit_is_said_with_the_counts():
    """smallfiles.measure stops writing at WRITE_LIMIT_S: the reason says how many of how many files
    the figure was read from, and the details keep the requested count."""
    raw = _sf_raw(31000)
    raw["smallfiles"]["hot"].update(files=2000, files_requested=8000, write_s=120.4)
    m = _by(acc.judge_host(raw, None, {"samples_per_s_per_gpu": 3000, "sample_kb": 64})[1], "storage.hot_smallfile_read")
    assert "the write stopped at its time limit (2000 of 8000 files written in 120.4 s)" in m["reason"], m["reason"]
    assert m["details"]["files_requested"] == 8000
    plain = _by(acc.judge_host(_sf_raw(31000), None, None)[1], "storage.hot_smallfile_read")
    assert "time limit" not in plain["reason"] and "files_requested" not in plain["details"]


def test_a_figure_without_an_expectation_is_measured_never_pass_in_every_format(tmp_path):
    """Issue 30.8: acceptance showed `pass` for figures it did not judge ("not judged: ..." only in
    the reason). One NUMA node's memory figure, random reads and small files on a loop device have
    no expectation: `measured` in acceptance.json, a skipped JUnit case of type measured (never a
    green test), a `measured` badge in the HTML, `measured` on the console; a host judged on
    nothing else is skip, and the scheduler neither drains nor resumes it."""
    from ansible_collections.dlrack.node.plugins.plugin_utils import scheduler
    raw = _sf_raw(5000, devices=[{"name": "loop1", "kind": "loop"}])
    raw["storage"]["hot"]["randread"] = dict(iops=60000, ioengine="libaio", jobs=4, iodepth=32, block_kb=4,
                                             lat_p50_us=80.0, lat_p99_us=200.0)
    unjudged = {"check_mode": False, "gpu": {"status": "skip", "reason": "disabled (acceptance_gpu: false)", "devices": [],
                                             "opted_out": True},
                "storage": {t: {"path": "", "status": "skip", "reason": "no path set for this tier"} for t in ("hot", "cold")},
                "memory": {"status": "ok", "nodes": [{"node": 0, "status": "ok", "gbps": 180.0, "threads": 8}]}}
    doc = acc.evaluate({"gpu-01": {"raw": raw}, "gpu-02": {"raw": unjudged}}, "error")
    names = ("memory.bandwidth", "storage.hot_randread_iops", "storage.hot_smallfile_read")
    ms = doc["hosts"]["gpu-01"]["measurements"]
    for name in names:
        m = _by(ms, name)
        assert (m["verdict"], m["expected"]) == ("measured", None) and "not judged" in m["reason"], m
    assert doc["hosts"]["gpu-01"]["status"] == "pass"          # its judged figures (GPU, fio) pass
    assert doc["hosts"]["gpu-02"]["status"] == "skip"          # nothing on it was judged
    assert doc["summary"]["figures_measured"] == 4 and doc["summary"]["measurements"]["memory.bandwidth"]["measured"] == 2
    paths = acc.write_reports(str(tmp_path), doc)
    data = json.loads(open(paths["json"]).read())
    assert all(m["verdict"] != "pass" for h in data["hosts"].values() for m in h["measurements"] if m["expected"] is None
               and m["name"] not in ("gpu.p2p_bandwidth",))
    cases = {(tc.get("classname"), tc.get("name")): tc for tc in ET.parse(paths["xml"]).getroot().iter("testcase")}
    unjudged_cases = [cases[(h + ".acceptance", m["name"] + (" [%s]" % m["target"] if m["target"] else ""))]
                      for h, r in data["hosts"].items() for m in r["measurements"] if m["verdict"] == "measured"]
    assert len(unjudged_cases) == 4
    for tc in unjudged_cases:
        [skipped] = tc.findall("skipped")
        assert skipped.get("type") == "measured" and skipped.get("message").startswith("measured, not judged: "), ET.tostring(tc)
        assert "[pass]" not in (tc.findtext("system-out") or "")
    page = open(paths["html"]).read()
    rows = [r for r in page.split("<tr>") if "memory.bandwidth" in r]
    assert len(rows) == 2 and all('class="badge meas">measured<' in r and ">pass<" not in r for r in rows)
    assert "figures measured, not judged" in page
    lines = acc.summary_lines(doc)
    assert [ln.split()[0] for ln in lines if "memory.bandwidth" in ln] == ["measured", "measured"]
    assert lines[0].endswith("4 figure(s) measured, not judged (no expectation: see their reasons)")
    assert "SKIP    gpu-02" in lines
    # the scheduler leaves a host acceptance judged nothing on alone (not judged: neither drained nor resumed)
    assert scheduler.verdicts([data])[0] == {"gpu-01": []}
