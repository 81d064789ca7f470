# -*- coding: utf-8 -*-
"""The counters beside the log, from real captures: the H200's nvidia-smi -q -x idle and under full
load (SW power cap active: not a fault), its --query-gpu CSV and NVML figures, the telegraf A100 XML,
and a GB300's nvidia-smi nvlink -e (srt-slurm PR 307). Rates need two reads; where the test needs a
counter that moved, it changes only that figure in a copy of the real read and says so."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os

from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults import counters
from testpaths import DATA

XID = os.path.join(DATA, "real", "xid")


def read(name):
    with open(os.path.join(XID, name)) as handle:
        return handle.read()


def test_h200_idle_and_load():
    idle = counters.counters_from_xml(read("h200-vm-nvidia-smi-q-x.xml"))
    gpu = idle["0000:00:06.0"]
    assert (gpu["remapped_pending"], gpu["remapped_failure"], gpu["pcie_replays"]) == (False, False, 0)
    assert gpu["retired_pending"] is None          # HBM3e: retired pages N/A, row remapping instead
    load = counters.counters_from_xml(read("h200-vm-nvidia-smi-q-x-load.xml"))["0000:00:06.0"]
    assert load["clock_reasons"] == ["sw_power_cap"] and counters.fault_reasons(load["clock_reasons"]) == []
    verdict = counters.judge_counters(idle, {"0000:00:06.0": load}, 60)
    assert verdict["rules"] == [] and verdict["notes"] == []
    # the CSV and NVML say the same: clocks_event_reasons.active 0x1 (idle), PCIe replay counter 0, no remap pending
    csv_row = read("h200-vm-nvidia-smi-query-versions-power.csv").splitlines()[1].split(", ")
    assert counters.reasons_from_mask(csv_row[11]) == ["gpu_idle"] and csv_row[13:15] == ["No", "No"]
    nvml = read("h200-vm-nvml-power-xid.txt")
    assert "nvmlDeviceGetPcieReplayCounter 0" in nvml and "nvmlDeviceGetRemappedRows (0, 0, 0, 0)" in nvml


def test_fault_clock_reasons_and_masks():
    assert counters.reasons_from_mask("0x0000000000000044") == ["hw_thermal_slowdown", "sw_power_cap"]
    assert counters.fault_reasons(counters.reasons_from_mask("0x48")) == ["hw_slowdown", "hw_thermal_slowdown"]
    assert counters.reasons_from_mask("[N/A]") is None


def test_pcie_replay_rate_between_reads():
    """The H200's real read, then the same read with its replay counter raised to 500 a minute later."""
    first = counters.counters_from_xml(read("h200-vm-nvidia-smi-q-x.xml"))
    second = copy.deepcopy(first)
    second["0000:00:06.0"]["pcie_replays"] = 500
    verdict = counters.judge_counters(first, second, 60)
    assert verdict["rules"] == ["gpu.pcie_replays"] and "30000/h" in verdict["notes"][0]
    slow = copy.deepcopy(first)
    slow["0000:00:06.0"]["pcie_replays"] = 1
    assert counters.judge_counters(first, slow, 3600)["rules"] == []
    # a counter that went down was reset: read from zero, no negative rate
    assert counters.rate_per_hour(500, 3, 3600) == 3.0


def test_remapped_rows_pending_and_failed():
    """The A100 (telegraf) and H200 reads with remapped_pending / remapped_failure set."""
    cur = counters.counters_from_xml(read("h200-vm-nvidia-smi-q-x.xml"))
    cur["0000:00:06.0"]["remapped_pending"] = True
    assert counters.judge_counters({}, cur, 60)["rules"] == ["gpu.xid"]
    cur["0000:00:06.0"]["remapped_failure"] = True
    assert "row remapping failed" in counters.judge_counters({}, cur, 60)["notes"][0]
    with open(os.path.join(DATA, "real", "nvidia-smi-q-xml", "telegraf-a100-sxm4-v12.xml")) as handle:
        a100 = counters.counters_from_xml(handle.read())
    assert a100["0000:01:00.0"]["pcie_replays"] == 0 and a100["0000:01:00.0"]["clock_reasons"] == []


def test_nvlink_errors_and_rates():
    errors = counters.nvlink_errors(read("srt-slurm-307-nvlink-e.txt"))
    assert errors == {0: {"uuid": None, "replay": 0, "recovery": 0, "crc": 0}}
    prev = {"0000:00:06.0": {"nvlink": errors[0]}}
    cur = {"0000:00:06.0": {"nvlink": dict(errors[0], crc=12)}}    # the GB300 read with 12 CRC errors an hour later
    verdict = counters.judge_counters(prev, cur, 3600)
    assert verdict["rules"] == ["gpu.nvlink_errors"] and "crc" in verdict["notes"][0]


def test_lost_gpu():
    assert counters.lost_gpus(["0000:00:06.0", "0000:18:00.0"], ["00000000:00:06.0"]) == ["0000:18:00.0"]
    # nvidia-smi's wording for a GPU it cannot reach, typed here from its usual form (no capture is stored)
    err = "Unable to determine the device handle for GPU0000:18:00.0: Unknown Error"
    assert counters.lost_gpus(["0000:18:00.0"], ["0000:18:00.0"], err) == ["0000:18:00.0"]
    verdict = counters.judge_counters({}, {}, 60, lost=["0000:18:00.0"])
    assert verdict["rules"] == ["gpu.lost"]
