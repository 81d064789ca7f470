# -*- coding: utf-8 -*-
"""GPU fault lines from real kernel logs (tests/data/real/xid/, provenance in tests/data/real/SOURCES.md):
every form the parser reads, the bus id normalisation, the catalog's classes and actions, and hostile text."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults import parse
from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.catalog import Catalog, CatalogError, load_catalog, parse_overrides
from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.judge import classify
from testpaths import DATA

XID = os.path.join(DATA, "real", "xid")
OGKM_1150_BUSES = ("0000:dc:00.0", "0000:ed:00.0", "0000:ba:00.0", "0000:97:00.0", "0000:dc:00.0", "0000:ba:00.0", "0000:ed:00.0")


def events_of(name):
    with open(os.path.join(XID, name), "rb") as handle:
        events, parser = parse.parse_lines(handle.read().split(b"\n"))
    return classify(events, Catalog()), parser


def test_h200_xid31_dmesg_and_kmsg_forms():
    """The real Xid 31 of the project's H200 (driver 580.159.04, open module) in both forms."""
    dmesg, parser = events_of("h200-vm-dmesg-T-xid31.txt")
    assert [(e["vendor"], e["kind"], e["bus_id"], e["code"]) for e in dmesg] == [("nvidia", "xid", "0000:00:06.0", 31)]
    event = dmesg[0]
    assert event["uuid"] == "GPU-475a4ad9-0cda-5c6c-598f-d3078a8fb53d"
    assert event["pid"] == 458 and event["process"] == "python3"
    assert event["class"] == "application" and event["action"] == "check_workload"
    assert event["ts"] == 1796403138.0   # [Fri Dec  4 16:52:18 2026] read as UTC
    kmsg, dummy = events_of("h200-vm-dev-kmsg-records.txt")
    assert [(e["bus_id"], e["code"], e["seq"], e["mono"]) for e in kmsg] == [("0000:00:06.0", 31, 359, 28.800917)]
    assert kmsg[0]["text"] == dmesg[0]["text"]
    # NVML delivered the same code (nvmlEventTypeXidCriticalError, eventData 31)
    with open(os.path.join(XID, "h200-vm-nvml-xid-event.txt")) as handle:
        assert "xid(eventData) 31" in handle.read()


@pytest.mark.parametrize("name, expected", [
    ("gpud-pr46-dmesg-xid13-109.txt", [("xid", "0000:cb:00.0", 13)] * 3 + [("xid", "0000:cb:00.0", 109)]),
    ("bumblebee-677-xid32-31.txt", [("xid", "0000:01:00.0", 32)] * 2 + [("xid", "0000:01:00.0", 31)]),
    ("bumblebee-608-xid44-31.txt", [("xid", "0000:08:00.0", 44), ("xid", "0000:08:00.0", 31)]),
    ("akash-244-xid43-31-94.txt", [("xid", "0000:00:05.0", 43)] * 2 + [("xid", "0000:00:07.0", 31), ("xid", "0000:00:08.0", 94)]),
    ("gpu-operator-1146-xid48.txt", [("xid", "0000:07:00.0", 48)]),
    ("ml-engineering-debug-xid63.txt", [("xid", "0000:10:1c.0", 63)]),
    ("ogkm-1045-xid38-109.txt", [("xid", "0000:07:00.0", 38)] + [("xid", "0000:07:00.0", 109)] * 5),
    ("ogkm-1150-xid45.txt", [("xid", b, 45) for b in OGKM_1150_BUSES]),
    ("ogkm-446-xid119-gsp-old.txt", [("xid", "0000:61:00.0", 119)] * 7),
    ("gpud-testdata-dmesg-with-xid-119.log", [("xid", "0000:9b:00.0", 119)] * 5),
    ("ogkm-1151-xid79.txt", [("xid", "0000:06:00.0", 79), ("fallen_off_bus", "0000:06:00.0", 79)]),
    ("nvsentinel-155-fallen-off-bus.txt", [("fallen_off_bus", "0000:b3:00.0", 79)]),
    ("gpud-kmsg-test-lines.txt", [("xid", "0000:05:00.0", 79), ("xid", "0000:01:00.0", 79), ("xid", "0000:03:00.0", 14),
                                  ("xid", "0009:01:00.0", 149), ("xid", "0009:01:00.0", 154), ("xid", "0008:01:00.0", 149),
                                  ("xid", "0019:01:00.0", 154), ("xid", "0009:01:00.0", 149), ("xid", "0009:01:00.0", 149),
                                  ("xid", "0008:01:00.0", 149), ("xid", "0018:01:00.0", 154), ("xid", "0008:01:00.0", 154)]),
    ("gpud-pr1160-1174-nvlink5.txt", [("xid", "0000:01:00.0", 144), ("xid", "0000:00:00.0", 149), ("xid", "0019:01:00.0", 149),
                                      ("xid", "0018:01:00.0", 145)]),
    ("nccl-2241-xid145-137-redacted.txt", [("xid", None, 145), ("xid", None, 137)]),
    ("nvtrust-124-sxid22013.txt", [("sxid", "0000:04:00.0", 22013)] * 6),
    ("gpud-pr338-sxid12028.txt", [("sxid", "0000:84:00.0", 12028)]),
    ("pop-2132-amdgpu-ring-timeout.txt", [("ring_timeout", None, "ring_timeout"), ("gpu_reset", "0000:03:00.0", "gpu_reset")]),
    ("cosmic-epoch-3764-amdgpu-reset.txt", [("ring_timeout", "0000:28:00.0", "ring_timeout"), ("gpu_reset", "0000:28:00.0", "gpu_reset")]),
])
def test_real_lines(name, expected):
    events, dummy = events_of(name)
    assert [(e["kind"], e["bus_id"], e["code"]) for e in events] == expected
    for event in events:
        assert event["class"] in ("application", "driver", "memory", "nvlink", "thermal_power", "bus", "unknown")
        assert event["known"], event


def test_at_least_twenty_codes_across_generations():
    codes = set()
    for path in glob.glob(os.path.join(XID, "*")):
        events, dummy = events_of(os.path.basename(path))
        codes.update((e["kind"] if e["kind"] == "sxid" else "xid", e["code"]) for e in events if e["vendor"] == "nvidia")
    assert len(codes) >= 20, sorted(codes)


def test_classes_and_actions_from_the_catalog():
    cat = Catalog()
    assert (cat.lookup("xid", 79)["class"], cat.lookup("xid", 79)["action"]) == ("bus", "reboot")
    assert (cat.lookup("xid", 48)["class"], cat.lookup("xid", 48)["action"]) == ("memory", "reset_gpu")
    assert (cat.lookup("xid", 13)["class"], cat.lookup("xid", 13)["action"]) == ("application", "check_workload")
    assert (cat.lookup("xid", 74)["class"], cat.lookup("xid", 74)["action"]) == ("nvlink", "reset_gpu")
    assert cat.lookup("xid", 63)["action"] == "none"
    assert (cat.lookup("sxid", 12028)["class"], cat.lookup("sxid", 12028)["action"]) == ("nvlink", "reboot")
    assert cat.lookup("sxid", 10004)["class"] == "thermal_power"
    unknown = cat.lookup("xid", 999)
    assert unknown["class"] == "unknown" and not unknown["known"]


def test_catalog_is_sourced_and_complete():
    doc = load_catalog()
    assert doc["version"] and "NVSentinel" in doc["sources"]["xid"]["data"] and "docs.nvidia.com" in doc["sources"]["xid"]["published"]
    assert sorted(int(c) for c in doc["xid"]) == list(range(1, 163))
    assert len(doc["sxid"]) == 398 and "12028" in doc["sxid"] and "22013" in doc["sxid"]
    for family in ("xid", "sxid", "amd"):
        for code, row in doc[family].items():
            assert row[1] in doc["classes"] and row[2] in doc["actions"], (family, code)


def test_operator_overrides():
    cat = Catalog({"xid:31": {"count": 3, "window_s": 600, "action": "reset_gpu"}, "amd:ring_timeout": {"action": "none"}})
    entry = cat.lookup("xid", 31)
    assert (entry["count"], entry["window_s"], entry["action"], entry["overridden"]) == (3, 600, "reset_gpu", True)
    assert cat.lookup("amd", "ring_timeout")["action"] == "none"
    for bad, words in (({"xid31": {}}, "FAMILY:CODE"), ({"xid:x": {}}, "number"), ({"xid:31": {"count": -1}}, "whole number"),
                       ({"xid:31": {"action": "explode"}}, "action must be one of"), ({"xid:31": {"colour": 1}}, "unknown field"),
                       ([], "mapping")):
        with pytest.raises(CatalogError, match=words):
            parse_overrides(bad)


@pytest.mark.parametrize("raw, bus", [
    ("PCI:0000:06:00", "0000:06:00.0"), ("0000:03:00", "0000:03:00.0"), ("PCI:0000:00:1E.0", "0000:00:1e.0"),
    ("00:1E.0", "0000:00:1e.0"), ("PCI:0000:3b:00 GPU-I:00 GPU-CI:00", "0000:3b:00.0"), ("PCI:...", None),
    ("invalid", None), ("", None), ("PCI:0000:ff:20.0", None),
])
def test_bus_ids(raw, bus):
    assert parse.norm_bus(raw) == bus


def test_hostile_text_is_bounded_and_escaped():
    """Escapes, a 1 MB line and invalid UTF-8: nothing unescaped or unbounded reaches an event."""
    lines = [
        b"NVRM: Xid (PCI:0000:06:00): 79, pid=1, name=\x1b[31mevil\x07, GPU has fallen off the bus.",
        b"NVRM: Xid (PCI:0000:06:00): 31, pid=2, " + b"A" * (1024 * 1024),
        b"NVRM: Xid (PCI:0000:06:00): 13, name=\xff\xfe\xc3(, Graphics Exception \xe2\x80\xae",
        b"NVRM: Xid (PCI:" + b"9" * 5000 + b"): 48, x",
    ]
    events, parser = parse.parse_lines(lines)
    assert [e["code"] for e in events] == [79, 31, 13]
    assert parser.cut == 2
    for event in events:
        assert len(event["text"]) <= parse.TEXT_LIMIT + 3
        assert all(32 <= ord(c) < 127 for c in event["text"]), event["text"]
        assert all(32 <= ord(c) < 127 for c in event.get("process", ""))
    assert "\\x1b[31mevil\\x07" in events[0]["process"]
    assert "\\ufffd" in events[2]["text"] and "\\u202e" in events[2]["text"]


def test_line_times():
    assert parse.line_time("3,354,490780,-;NVRM: x") == (None, 0.49078, 354)
    wall, mono, seq = parse.line_time("kern  :err   : 2025-01-25T10:34:54,859532+00:00 nvidia-nvswitch1: SXid")
    assert abs(wall - 1737801294.859532) < 1e-3 and seq is None
    assert parse.line_time("Dec  2 10:43:35 worker4 kernel: [240314.528856] NVRM: Xid")[1] == 240314.528856
    assert parse.line_time("no time here") == (None, None, None)


def test_amd_ras_forms_from_the_driver_source():
    """No public capture of these amdgpu RAS lines was found: the lines are the driver's format strings
    (amdgpu_ras.c, kfd poison handler, amdgpu_ras_eeprom.c) filled in by hand, and say so."""
    lines = ["amdgpu 0000:0b:00.0: amdgpu: 2 uncorrectable hardware errors detected in umc block",
             "amdgpu 0000:0b:00.0: amdgpu: no uncorrectable hardware errors detected in umc block",
             "amdgpu 0000:68:00.0: {14}poison is consumed by client 12, kick off gpu reset flow",
             "amdgpu 0000:68:00.0: amdgpu: Saved bad pages(409) reaches threshold value(408).",
             "amdgpu 0000:68:00.0: amdgpu: GPU reset(2) failed"]
    events, dummy = parse.parse_lines(lines)
    events = classify(events, Catalog())
    assert [(e["kind"], e["class"], e["action"]) for e in events] == [
        ("ras_uncorrectable", "memory", "reset_gpu"), ("poison_consumed", "memory", "reset_gpu"),
        ("bad_page_threshold", "memory", "service"), ("gpu_reset_failed", "driver", "reboot")]
    assert events[0]["count"] == 2 and events[0]["block"] == "umc"


def test_catalog_has_one_copy_and_its_rows_the_sources_counts():
    """catalog_embedded.py is the catalog (Ansible ships only Python module_utils to a node): no second
    copy beside it, every row has the fields the catalog names, and the code counts its sources give."""
    import re
    from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults import catalog
    here = os.path.dirname(catalog.__file__)
    assert [n for n in os.listdir(here) if n.startswith("catalog") and not n.endswith(".py")] == []
    doc = load_catalog()
    for family in ("xid", "sxid", "amd", "nvidia_other"):
        for code, row in doc[family].items():
            assert len(row) == len(doc["fields"]) and (row[0] is None or row[0].isupper()), (family, code)
    for family in ("xid", "sxid"):
        assert len(doc[family]) == int(re.search(r"(\d+) codes", doc["sources"][family]["data"]).group(1))
    assert Catalog().version == doc["version"]
