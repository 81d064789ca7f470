"""ECC collector: textfile metrics from EDAC trees built from real captures and from real
nvidia-smi XML outputs; assess_ecc thresholds; garbage input."""
import glob
import json
import os

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.dlrack.node.plugins.module_utils.ecc import metrics as em
from ansible_collections.dlrack.node.plugins.module_utils.ecc.edac import read_edac_sysfs
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import nvidia_smi

from testpaths import DATA  # noqa: E402  (tests/ is on sys.path: conftest)
TREES = os.path.join(DATA, "edac")
XML_DIR = os.path.join(DATA, "real", "nvidia-smi-q-xml")
TREE_NAMES = sorted(d for d in os.listdir(TREES) if os.path.isdir(os.path.join(TREES, d)))
XMLS = sorted(glob.glob(os.path.join(XML_DIR, "*.xml")))


def samples(text):
    """{(name, frozenset(labels)): value} via the Prometheus text parser (validates the format)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(parsed, name, **labels):
    return parsed.get((name, frozenset(labels.items())))


def names(parsed):
    return {k[0] for k in parsed}


def write(base, rel, text):
    path = os.path.join(str(base), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


# ---- EDAC trees ------------------------------------------------------------------------------

@pytest.mark.parametrize("tree", TREE_NAMES)
def test_every_tree_renders_valid_text(tree):
    text = em.collect(root=os.path.join(TREES, tree), now=1700000000)
    parsed = samples(text)
    assert value(parsed, "dlrack_edac_supported") == 1
    assert value(parsed, "dlrack_ecc_collector_last_run_timestamp_seconds") == 1700000000
    assert all(n.startswith("dlrack_") for n in names(parsed))
    assert sum(value(parsed, "dlrack_edac_status", status=s) for s in em.STATUSES) == 1


def test_issue15_reports_the_sysfs_ce():
    parsed = samples(em.collect(root=os.path.join(TREES, "edac-utils-issue15-4mc"), now=1))
    assert value(parsed, "dlrack_edac_memory_controllers") == 4
    assert value(parsed, "dlrack_edac_corrected_errors_total", controller="mc0") == 1
    assert value(parsed, "dlrack_edac_corrected_errors_total", controller="mc3") == 0
    assert value(parsed, "dlrack_edac_dimm_corrected_errors_total", controller="mc0",
                 dimm="rank4", label="", location="") == 1
    # no ue file was captured: no uncorrected sample at all (unknown is not 0)
    assert "dlrack_edac_uncorrected_errors_total" not in names(parsed)
    assert value(parsed, "dlrack_edac_status", status="ok") == 1


def test_netdata_csrows():
    parsed = samples(em.collect(root=os.path.join(TREES, "netdata-issue1508-serverB"), now=1))
    for row in range(4):
        assert value(parsed, "dlrack_edac_csrow_corrected_errors_total", controller="mc0",
                     csrow="csrow%d" % row) == 0
        assert value(parsed, "dlrack_edac_csrow_uncorrected_errors_total", controller="mc0",
                     csrow="csrow%d" % row) == 0
    assert value(parsed, "dlrack_edac_uncorrected_errors_total", controller="mc0") == 0


def test_rasdaemon_channels_keep_their_labels():
    parsed = samples(em.collect(root=os.path.join(TREES, "rasdaemon-issue121-ryzen7800x3d"), now=1))
    assert value(parsed, "dlrack_edac_csrow_channel_corrected_errors_total", controller="mc0",
                 csrow="csrow3", channel="ch1", label="mc#0csrow#3channel#1") == 0


def test_layout_tree_sizes_and_no_counts():
    parsed = samples(em.collect(root=os.path.join(TREES, "rasdaemon-pr232-romed8-2t"), now=1))
    sizes = [v for (n, _l), v in parsed.items() if n == "dlrack_edac_dimm_size_bytes"]
    assert sizes == [32768 * 1024 * 1024] * 8
    assert "dlrack_edac_dimm_corrected_errors_total" not in names(parsed)
    assert value(parsed, "dlrack_edac_status", status="unknown") == 1


def test_no_edac_is_unknown_not_healthy(tmp_path):
    parsed = samples(em.collect(root=str(tmp_path), now=1))
    assert value(parsed, "dlrack_edac_supported") == 0
    assert value(parsed, "dlrack_edac_status", status="unknown") == 1
    assert value(parsed, "dlrack_edac_status", status="ok") == 0
    assert "dlrack_edac_corrected_errors_total" not in names(parsed)


def test_label_escaping_round_trips(tmp_path):
    mc = "sys/devices/system/edac/mc/mc0/"
    write(tmp_path, mc + "ce_count", "5\n")
    write(tmp_path, mc + "ue_count", "1\n")
    write(tmp_path, mc + "dimm0/dimm_label", 'CPU "A"\\slot\n')
    write(tmp_path, mc + "dimm0/dimm_ce_count", "5\n")
    write(tmp_path, mc + "dimm0/dimm_ue_count", "1\n")
    parsed = samples(em.collect(root=str(tmp_path), now=1))
    assert value(parsed, "dlrack_edac_dimm_uncorrected_errors_total", controller="mc0",
                 dimm="dimm0", label='CPU "A"\\slot', location="") == 1
    assert value(parsed, "dlrack_edac_status", status="error") == 1


# ---- GPU ECC from real nvidia-smi outputs ---------------------------------------------------

needs_xml = pytest.mark.skipif(not XMLS, reason="tests/data/real/nvidia-smi-q-xml not present")


@needs_xml
@pytest.mark.parametrize("path", XMLS, ids=os.path.basename)
def test_every_xml_capture(path, tmp_path):
    text = em.collect(root=str(tmp_path), nvidia_smi_xml=path, now=1)
    parsed = samples(text)
    with open(path) as handle:
        gpus = nvidia_smi.parse_xml(handle.read())["gpus"]
    assert value(parsed, "dlrack_gpu_ecc_collector_up") == 1
    for gpu in gpus:
        ids = {"gpu": str(gpu["index"]), "uuid": gpu["uuid"] or ""}
        supported = value(parsed, "dlrack_gpu_ecc_supported", **ids)
        assert supported == (0 if gpu["ecc_mode"]["current"] is None else 1)


@needs_xml
def test_a100_and_t4_counters():
    with open(os.path.join(XML_DIR, "telegraf-a100-sxm4-v12.xml")) as handle:
        gpus, up = em.gpus_from_nvidia_smi(xml_text=handle.read())
    parsed = samples(em.render_metrics(gpus=gpus, gpu_up=up, now=1))
    ids = {"gpu": "0", "uuid": "GPU-513536b6-7d19-9063-b049-1e69664bb298"}
    assert value(parsed, "dlrack_gpu_ecc_enabled", **ids) == 1
    for scope in ("volatile", "aggregate"):
        assert value(parsed, "dlrack_gpu_ecc_corrected_errors_total", scope=scope, **ids) == 0
        assert value(parsed, "dlrack_gpu_ecc_uncorrected_errors_total", scope=scope, **ids) == 0
    with open(os.path.join(XML_DIR, "telegraf-tesla-t4.xml")) as handle:
        gpus, _up = em.gpus_from_nvidia_smi(xml_text=handle.read())
    parsed = samples(em.render_metrics(gpus=gpus, now=1))
    uuid = gpus[0]["uuid"]
    assert value(parsed, "dlrack_gpu_retired_pages", gpu="0", uuid=uuid, cause="double_bit") == 0
    assert value(parsed, "dlrack_gpu_retired_pages_pending", gpu="0", uuid=uuid) == 0


@needs_xml
def test_consumer_gpu_has_no_ecc_and_no_counters():
    with open(os.path.join(XML_DIR, "telegraf-dual_2080-v13.xml")) as handle:
        gpus, _up = em.gpus_from_nvidia_smi(xml_text=handle.read())
    parsed = samples(em.render_metrics(gpus=gpus, now=1))
    assert [value(parsed, "dlrack_gpu_ecc_supported", gpu=str(g["index"]), uuid=g["uuid"])
            for g in gpus] == [0, 0]
    assert "dlrack_gpu_ecc_corrected_errors_total" not in names(parsed)


def test_nvidia_smi_failures(tmp_path):
    assert em.gpus_from_nvidia_smi() == (None, None)
    assert em.gpus_from_nvidia_smi(xml_text="<not xml") == ([], False)
    assert em.gpus_from_nvidia_smi(xml_text="") == ([], False)
    assert em.gpus_from_nvidia_smi(command=str(tmp_path / "missing")) == ([], False)
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nexit 9\n")
    fake.chmod(0o755)
    assert em.gpus_from_nvidia_smi(command=str(fake)) == ([], False)
    parsed = samples(em.render_metrics(gpus=[], gpu_up=False, now=1))
    assert value(parsed, "dlrack_gpu_ecc_collector_up") == 0
    # garbage GPU dicts are skipped, not fatal
    samples(em.render_metrics(gpus=[None, 3, {"index": 0, "ecc_mode": None,
                                              "ecc_errors": {"volatile_corrected": "x"}}], now=1))


# ---- assess_ecc ---------------------------------------------------------------------------

def sev(findings):
    return [f["severity"] for f in findings]


def test_assess_shape():
    for finding in em.assess_ecc({"controllers": 2, "corrected": 0, "uncorrected": 0}):
        assert set(finding) == {"rule", "severity", "observed", "required", "message", "remedy"}
        assert finding["rule"] == "memory.ecc_errors"


@pytest.mark.parametrize("summary,uptime,budget,expected", [
    (None, None, 9, ["warning"]),                                       # no EDAC: unknown
    ({"controllers": 0}, None, 9, ["warning"]),
    ({"controllers": 4, "corrected": 0, "uncorrected": 0}, 3600, 9, ["info"]),
    ({"controllers": 4, "corrected": 9, "uncorrected": 0}, 86400, 9, ["info"]),    # at budget
    ({"controllers": 4, "corrected": 10, "uncorrected": 0}, 86400, 9, ["warning"]),
    ({"controllers": 4, "corrected": 10, "uncorrected": 0}, 7 * 86400, 9, ["info"]),  # 1.4/day
    ({"controllers": 4, "corrected": 64, "uncorrected": 0}, 7 * 86400, 9, ["warning"]),  # 9.1/day
    ({"controllers": 4, "corrected": 5, "uncorrected": 0}, 600, 9, ["info"]),   # no extrapolation
    ({"controllers": 4, "corrected": 10, "uncorrected": 0}, None, 9, ["warning"]),  # raw count
    ({"controllers": 4, "corrected": 0, "uncorrected": 1}, 86400, 9, ["error"]),
    ({"controllers": 4, "corrected": 100, "uncorrected": 2}, 86400, 9, ["error", "warning"]),
    ({"controllers": 4, "corrected": 3, "uncorrected": 0}, 86400, 2, ["warning"]),
    ({"controllers": 4, "corrected": None, "uncorrected": None}, 86400, 9, ["warning"]),
    ({"controllers": 4, "corrected": None, "uncorrected": 0}, 86400, 9, ["info"]),
    ({"controllers": 4, "corrected": 0, "uncorrected": 0}, "garbage", "x", ["info"]),
    ({"controllers": 4, "corrected": True, "uncorrected": -1}, 86400, 9, ["warning"]),
    ("garbage", None, 9, ["warning"]),
])
def test_assess_thresholds(summary, uptime, budget, expected):
    assert sev(em.assess_ecc(summary, uptime_s=uptime, budget_24h=budget)) == expected


def test_assess_uses_seconds_since_reset_and_names_the_dimm(tmp_path):
    mc = "sys/devices/system/edac/mc/mc0/"
    write(tmp_path, mc + "ce_count", "20\n")
    write(tmp_path, mc + "ue_count", "0\n")
    write(tmp_path, mc + "seconds_since_reset", "%d\n" % (10 * 86400))
    write(tmp_path, mc + "dimm3/dimm_label", "CPU_SrcID#0_Ha#0_Chan#1_DIMM#0\n")
    write(tmp_path, mc + "dimm3/dimm_ce_count", "20\n")
    full = read_edac_sysfs(str(tmp_path))
    assert sev(em.assess_ecc(full)) == ["info"]                  # 2 per day over 10 days
    findings = em.assess_ecc(full, uptime_s=86400)
    assert sev(findings) == ["warning"]
    assert "dimm3" in findings[0]["message"] and "CPU_SrcID#0_Ha#0_Chan#1_DIMM#0" in findings[0]["message"]


def test_assess_on_every_tree():
    for tree in TREE_NAMES:
        findings = em.assess_ecc(read_edac_sysfs(os.path.join(TREES, tree)), uptime_s=86400)
        assert findings and all(f["severity"] in ("info", "warning", "error") for f in findings)


# ---- node-side entry point ---------------------------------------------------------------------

def test_main_writes_atomically(tmp_path):
    out = tmp_path / "textfile"
    root = os.path.join(TREES, "edac-utils-issue15-4mc")
    assert em.main(["--root", root, "--textfile-dir", str(out), "--nvidia-smi", "none"]) == 0
    prom = out / em.DEFAULT_TEXTFILE_NAME
    parsed = samples(prom.read_text())
    assert value(parsed, "dlrack_edac_corrected_errors_total", controller="mc0") == 1
    assert oct(prom.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in out.iterdir()] == [em.DEFAULT_TEXTFILE_NAME]   # no temp left behind
    assert em.main(["--root", root, "--textfile-dir", str(out), "--nvidia-smi", "none"]) == 0
    assert [p.name for p in out.iterdir()] == [em.DEFAULT_TEXTFILE_NAME]


def test_main_arguments(tmp_path, capsys):
    assert em.main(["--bogus"]) == 2
    assert em.main(["--budget-24h", "lots"]) == 2
    assert em.main(["--help"]) == 0
    capsys.readouterr()
    assert em.main(["--root", str(tmp_path), "--assess"]) == 0
    assert sev(json.loads(capsys.readouterr().out)) == ["warning"]
    assert em.main(["--root", str(tmp_path), "--stdout", "--nvidia-smi", "none"]) == 0
    assert value(samples(capsys.readouterr().out), "dlrack_edac_supported") == 0
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert em.main(["--root", str(tmp_path), "--textfile-dir", str(blocker / "sub"),
                    "--nvidia-smi", "none"]) == 1
