# -*- coding: utf-8 -*-
"""dlrack_hw.gpu_faults for the gatherer: the H200's real nvidia-smi -q -x idle read, rated against a
previous read; a journal file the test writes stands in for the node's journal (read-only)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults import gather, readers
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_hw
import journalfile
from testpaths import DATA

XID = os.path.join(DATA, "real", "xid")


def xml():
    with open(os.path.join(XID, "h200-vm-nvidia-smi-q-x.xml")) as handle:
        return handle.read()


def test_counters_section_and_state(tmp_path):
    first = gather.counters_section(xml(), None, now=1000.0)
    assert first["interval_s"] is None and first["rules"] == [] and first["gpus"]["0000:00:06.0"]["pcie_replays"] == 0
    path = str(tmp_path / "c.json")
    gather.write_counter_state(path, first["gpus"], now=1000.0)
    prev = gather.read_counter_state(path)
    bumped = xml().replace("<replay_counter>0</replay_counter>", "<replay_counter>900</replay_counter>")   # the one changed figure
    second = gather.counters_section(bumped, prev, now=1060.0)
    assert second["interval_s"] == 60.0 and second["rules"] == ["gpu.pcie_replays"]
    assert gather.read_counter_state(str(tmp_path / "missing")) is None


def test_nvlink_counters_rated_between_two_reads(tmp_path):
    """The H200's real XML with a GB300's real nvidia-smi nvlink -e (srt-slurm PR 307: GPU 0, no UUID printed, so
    matched by index), then the same pair an hour later with the CRC count of link 0 at 12 (the changed figure):
    the counters reach judge_counters and gpu.nvlink_errors, and the state keeps them for the next read."""
    with open(os.path.join(XID, "srt-slurm-307-nvlink-e.txt")) as handle:
        nvlink = handle.read()
    first = gather.counters_section(xml(), None, now=1000.0, nvlink_text=nvlink)
    assert first["gpus"]["0000:00:06.0"]["nvlink"] == {"replay": 0, "recovery": 0, "crc": 0} and first["rules"] == []
    path = str(tmp_path / "c.json")
    gather.write_counter_state(path, first["gpus"], now=1000.0)
    grown = nvlink.replace("Link 0: CRC Errors: 0", "Link 0: CRC Errors: 12")
    second = gather.counters_section(xml(), gather.read_counter_state(path), now=4600.0, nvlink_text=grown)
    assert second["rules"] == ["gpu.nvlink_errors"] and second["by_gpu"] == {"0000:00:06.0": ["gpu.nvlink_errors"]}
    assert any("NVLink crc errors at 12.0/h" in n for n in second["notes"])


def test_not_for_a_captured_tree():
    assert gather.gather_faults("/some/tree", None, None, []) is None


@pytest.mark.skipif(not journalfile.available(), reason="systemd-journal-remote is not installed")
def test_gather_faults_document_validates(tmp_path):
    with open(os.path.join(XID, "gpu-operator-1146-xid48.txt")) as handle:
        line = handle.read().split("kernel: ", 1)[1].strip()
    # this boot's id and a time of an hour ago: the journal of the node being gathered
    jf = journalfile.write_journal(str(tmp_path / "k.journal"), [line], boot_id=readers.boot_id().replace("-", ""),
                                   start_realtime_us=int((time.time() - 3600) * 1e6))

    def run(argv):
        assert argv[1:] in (["-q", "-x"], ["nvlink", "-e"])
        # nvlink -e: empty, as the H200 VM's nvidia-smi nvlink -s printed nothing (h200-vm/cmd/nvidia-smi-nvlink-s.txt)
        return (0, xml(), "") if argv[1] == "-q" else (0, "", "")

    errors = []
    doc = gather.gather_faults("/", run, "nvidia-smi", errors, conf={"source": "journal", "journal_file": jf})
    assert errors == [] and doc["rules"] == ["gpu.xid"] and doc["counters"]["gpus"]["0000:00:06.0"]["remapped_pending"] is False
    hw = {"schema": 1, "source": "gathered", "gpu_faults": json.loads(json.dumps(doc))}
    clean, problems = check_hw(hw)
    assert problems == [] and clean["gpu_faults"]["rules"] == ["gpu.xid"]


def test_a_gpu_on_the_bus_that_nvidia_smi_does_not_answer_for_is_lost():
    """The H200 VM's GPU (0000:00:06.0, vendor 0x10de as the gatherer reads it) answers in the real XML; a second
    GPU on the bus (a made-up 0000:18:00.0) does not: gpu.lost. And nvidia-smi failing with its usual wording."""
    gpus = [{"pci_bus_id": "0000:00:06.0", "vendor_id": "0x10de"}, {"pci_bus_id": "0000:18:00.0", "vendor_id": "0x10de"},
            {"pci_bus_id": "0000:c1:00.0", "vendor_id": "0x1002"}]
    counters = gather.counters_section(xml(), None, now=1.0)
    assert gather.lost_nvidia_gpus(gpus, counters, (0, xml(), "")) == ["0000:18:00.0"]
    failed = (255, "", "Unable to determine the device handle for GPU0000:18:00.0: Unknown Error")   # typed, see test_counters
    assert gather.lost_nvidia_gpus(gpus, None, failed) == ["0000:00:06.0", "0000:18:00.0"]
