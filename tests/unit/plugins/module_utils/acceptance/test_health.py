"""GPU health from real nvidia-smi -q -x captures (H200 idle and under load, older drivers'
clocks_throttle_reasons) and dcgmi diag JSON in the DCGM 3.x and 4.x shapes."""
import glob
import json
import os

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.acceptance import health as ah
from conftest import DATA

ACC = os.path.join(DATA, "acceptance")


def _xml(name):
    return open(os.path.join(ACC, name)).read()


def test_h200_idle_and_under_load():
    idle = ah.health_from_xml(_xml("h200-vm-nvidia-smi-q-x-idle.xml"))
    g = idle["gpus"][0]
    assert (g["pci_bus_id"], g["product_name"], g["persistence_mode"], g["ecc_mode"]) == ("0000:00:06.0", "NVIDIA H200", True, True)
    assert g["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert g["throttle_active"] == ["gpu_idle"] and g["ecc_volatile_uncorrected"] == 0
    assert (g["pcie"]["gen_max"], g["pcie"]["width"], g["pcie"]["width_max"]) == (5, 16, 16)
    load = ah.health_from_xml(_xml("h200-vm-nvidia-smi-q-x-load.xml"))["gpus"][0]
    assert load["throttle_active"] == ["sw_power_cap"]  # normal at full load, not a fault
    assert load["throttle_counters"]["sw_power_cap"] == 6108705 and load["throttle_counters"]["hw_therm_slowdown"] == 0


def test_every_real_capture_parses():
    files = glob.glob(os.path.join(DATA, "real", "nvidia-smi-q-xml", "*.xml"))
    assert len(files) >= 10
    older = 0
    for path in files:
        doc = ah.health_from_xml(open(path).read())
        for g in doc["gpus"]:
            assert g["persistence_mode"] in (True, False, None)  # N/A on some GeForce cards
            assert set(g["throttle_active"]) <= {"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
                                                 "hw_thermal_slowdown", "hw_power_brake_slowdown", "sync_boost",
                                                 "sw_thermal_slowdown", "display_clocks_setting", "unknown"}, path
        older += "clocks_throttle_reasons" in open(path).read()
    assert older >= 3  # the pre-535 element name is covered


def test_gpu_health_runs_nvidia_smi_and_reports_its_failures():
    xml = _xml("h200-vm-nvidia-smi-q-x-idle.xml")
    doc = ah.gpu_health("/usr/bin/nvidia-smi", lambda argv, t: (0, xml, ""))
    assert doc["status"] == "ok" and doc["driver_version"] == "580.159.04"
    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    doc = ah.gpu_health("/usr/bin/nvidia-smi", lambda argv, t: (9, "", msg))
    assert doc["status"] == "skip" and "couldn't communicate" in doc["reason"]
    doc = ah.gpu_health("/usr/bin/nvidia-smi", lambda argv, t: (0, "<nvidia_smi_log><gpu", ""))
    assert doc["status"] == "error" and "not well-formed" in doc["reason"]
    assert ah.gpu_health(None, None)["status"] == "skip"


# dcgmi diag -j documents, hand-written in the two shapes DCGM prints (3.x: "DCGM GPU Diagnostic"
# with gpu_ids results; 4.x: "DCGM Diagnostic" with entity results and test_summary).
DCGM3 = {"DCGM GPU Diagnostic": {"test_categories": [
    {"category": "Deployment", "tests": [
        {"name": "Denylist", "results": [{"status": "Pass"}]},
        {"name": "Persistence Mode", "results": [{"status": "Warn", "warnings": [{"warning": "Persistence mode for GPU 0 is disabled."}]}]},
        {"name": "Permissions and OS Blocks", "results": [{"status": "Skip"}]}]}],
    "version": "3.3.5"}}
DCGM4 = {"DCGM Diagnostic": {"test_categories": [
    {"category": "Deployment", "tests": [
        {"name": "software", "results": [{"entity_group": "GPU", "entity_id": 0, "status": "Pass"},
                                         {"entity_group": "GPU", "entity_id": 1, "status": "Fail",
                                          "warnings": [{"warning": "Found 1 uncorrectable row remapping", "error_id": 94}]}],
         "test_summary": {"status": "Fail"}}]}]},
    "metadata": {"version": "4.2.3"}}


def test_dcgm_shapes():
    d3 = ah.parse_dcgm_diag(json.dumps(DCGM3))
    assert [(t["name"], t["status"]) for t in d3["tests"]] == [
        ("Denylist", "pass"), ("Persistence Mode", "warn"), ("Permissions and OS Blocks", "skip")]
    assert d3["tests"][1]["messages"] == ["Persistence mode for GPU 0 is disabled."]
    d4 = ah.parse_dcgm_diag("Successfully ran diagnostic\n" + json.dumps(DCGM4))
    assert d4["version"] == "4.2.3" and d4["tests"][0]["status"] == "fail"
    assert d4["tests"][0]["messages"] == ["Found 1 uncorrectable row remapping"]


def test_dcgm_runner():
    ok = ah.dcgm_diag("/usr/bin/dcgmi", lambda argv, t: (0, json.dumps(DCGM3), ""), level=1)
    assert ok["status"] == "ok" and ok["level"] == 1
    down = ah.dcgm_diag("/usr/bin/dcgmi", lambda argv, t: (255, "", "Error: unable to establish a connection to the specified host: localhost"))
    assert down["status"] == "error" and "host engine" in down["reason"]
    assert ah.dcgm_diag(None, None)["status"] == "skip"
    with pytest.raises(ah.ParseError):
        ah.parse_dcgm_diag("[1, 2]")
