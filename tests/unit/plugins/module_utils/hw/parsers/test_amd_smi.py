"""AMD parsers: amdgpu sysfs formats (kernel Documentation/gpu/amdgpu/ras.rst), amd-smi JSON in
every shape its releases print (tests/data/amd/, written from ROCm/amdsmi's CLI source, not
captured) and rocm-smi JSON of two real MI100 nodes (tests/data/real/amd-rocm-smi-json)."""
import json
import os

import pytest
from testpaths import DATA

from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import amd_smi as a

AMD = os.path.join(DATA, "amd")
ROCM = os.path.join(DATA, "real", "amd-rocm-smi-json")


def read(*parts):
    with open(os.path.join(*parts)) as fh:
        return fh.read()


def test_ras_features_mask_names_the_blocks():
    assert a.parse_ras_features("feature mask: 0x3\n") == {"mask": 3, "blocks": ["umc", "sdma"]}
    assert a.parse_ras_features("feature mask: 0x0") == {"mask": 0, "blocks": []}
    for junk in (None, "", "0x3", "feature mask: zz", "mask: 0x3"):
        assert a.parse_ras_features(junk) is None        # unknown, never "no RAS"


def test_err_count_with_and_without_deferred():
    assert a.parse_err_count("ue: 0\nce: 12\n") == {"ue": 0, "ce": 12}
    assert a.parse_err_count("ue: 1\nce: 2\nde: 3\n") == {"ue": 1, "ce": 2, "de": 3}
    assert a.parse_err_count("garbage") is None and a.parse_err_count(None) is None


def test_bad_pages_counts_by_flag():
    text = "0x00000c8d : 0x00001000 : R\n0x00000c8e : 0x00001000 : P\n0x00000c8f : 0x00001000 : F\nnoise\n"
    assert a.parse_bad_pages(text) == {"retired": 1, "pending": 1, "failed": 1}
    assert a.parse_bad_pages("") == {"retired": 0, "pending": 0, "failed": 0}
    assert a.parse_bad_pages(None) is None


@pytest.mark.parametrize("value,expected", [
    (12, (12, None)), (12.5, (12.5, None)), ("12", (12, None)), ("196592 MB", (196592, "MB")),
    ({"value": 32, "unit": "GT/s"}, (32, "GT/s")), ({"value": "N/A", "unit": "MB"}, (None, None)),
    ("N/A", (None, None)), (None, (None, None)), (True, (None, None)), ([1], (None, None)),
])
def test_value_of_every_shape(value, expected):
    assert a.value_of(value) == expected


def test_to_mib_units():
    assert a.to_mib({"value": 196592, "unit": "MB"}) == 196592
    assert a.to_mib(34342961152, default_unit="B") == 32752
    assert a.to_mib("192 GB") == 196608
    assert a.to_mib("N/A") is None and a.to_mib({"value": 1, "unit": "parsecs"}) is None


def test_amd_smi_static_new_and_old_shapes_agree_where_both_know():
    new = a.parse_amd_smi_static(read(AMD, "amd-smi-static-mi300x-gpu_data.json"))
    old = a.parse_amd_smi_static(read(AMD, "amd-smi-static-mi300x-bare-list-strings.json"))
    assert len(new) == len(old) == 8
    g = new[3]
    assert (g["model"], g["pci_bus_id"], g["memory_mib"], g["width_max"], g["speed_max_gts"], g["numa_node"],
            g["ecc_enabled"], g["package"]) == ("AMD Instinct MI300X", "0000:75:00.0", 196592, 16, 32.0, 0, True, 3)
    assert "umc" in g["ras_blocks"] and "athub" not in g["ras_blocks"]
    for n, o in zip(new[:7], old[:7]):
        assert (n["model"], n["pci_bus_id"], n["memory_mib"], n["speed_max_gts"], n["ecc_enabled"]) == \
               (o["model"], o["pci_bus_id"], o["memory_mib"], o["speed_max_gts"], o["ecc_enabled"])
    assert old[0]["package"] is None                     # "N/A" oam_id
    assert (old[7]["ecc_enabled"], old[7]["memory_mib"]) == (None, None)   # "N/A": unknown, not a pass


def test_amd_smi_one_gpu_object_and_bad_input():
    one = json.loads(read(AMD, "amd-smi-static-mi300x-gpu_data.json"))["gpu_data"][0]
    assert [g["pci_bus_id"] for g in a.parse_amd_smi_static(json.dumps(one))] == ["0000:05:00.0"]
    warned = "WARNING: user is not in the render group\n" + json.dumps([one])
    assert len(a.parse_amd_smi_static(warned)) == 1
    for bad in ("", "not json", "{\"foo\": 1}", "42"):
        with pytest.raises(ParseError):
            a.parse_amd_smi_static(bad)


def test_amd_smi_metric_counters_and_na():
    m = a.parse_amd_smi_metric(read(AMD, "amd-smi-metric-mi300x-gpu_data.json"))
    assert (m[3]["width"], m[3]["speed_gts"], m[3]["ecc"]) == (16, 32.0, {"ce": 6, "ue": 0, "de": 0})
    assert m[3]["ecc_blocks"]["umc"] == {"ce": 5, "ue": 0, "de": 0}
    assert m[7]["ecc"] == {"ce": None, "ue": None, "de": None} and m[7]["ecc_blocks"] is None
    old = a.parse_amd_smi_metric(json.dumps([{"gpu": 0, "ecc": {"correctable_count": 2, "uncorrectable_count": 0}}]))
    assert old[0]["ecc"] == {"ce": 2, "ue": 0, "de": None}


def test_rocm_smi_real_mi100_captures():
    six = a.parse_rocm_smi(read(ROCM, "telegraf-mi100_rocm571.json"))
    assert [c["pci_bus_id"] for c in six] == ["0000:1e:00.0", "0000:22:00.0", "0000:3f:00.0", "0000:43:00.0",
                                              "0000:46:00.0", "0000:49:00.0"]
    c = six[0]
    assert (c["model"], c["memory_mib"], c["numa_node"], c["serial"], c["unique_id"]) == (
        "AMD Instinct MI100", 32752, 0, None, None)     # serial "0" and Unique ID "N/A" are unknown
    four = a.parse_rocm_smi(read(ROCM, "telegraf-mi100_rocm602.json"))
    assert [(x["card"], x["numa_node"], x["unique_id"]) for x in four][:2] == [
        (0, 1, "0x79ccd55167a2124a"), (1, 1, "0x4edfb117a17a07d")]
    assert (four[0]["width"], four[0]["speed_gts"]) == (16, 16.0)
    with pytest.raises(ParseError):
        a.parse_rocm_smi("[]")
