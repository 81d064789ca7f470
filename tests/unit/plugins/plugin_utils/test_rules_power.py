"""power.psu_capacity and power.gpu_caps (issue 32) on real SMBIOS power-supply tables and real NVML
power limits (tests/data/real/SOURCES.md). Where a test joins two captures or changes a figure, it
says so."""
import os

from testpaths import DATA

from ansible_collections.dlrack.node.plugins.module_utils.hw import power
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import evaluate_host


def real(*parts):
    with open(os.path.join(DATA, "real", *parts)) as handle:
        return handle.read()


H200 = power.gpu_limits_from_xml(real("pcie", "h200-vm-2026-11-30-nvidia-smi-q-x.xml"))[0]
A100 = power.gpu_limits_from_xml(real("nvidia-smi-q-xml", "telegraf-a100-sxm4-v12.xml"))[0]


def host(dmidecode, cpu, sockets, limit, count):
    """A node: the PSUs of a real dmidecode table, ``count`` GPUs at one real GPU's NVML limits."""
    gpus = [{"index": i, "pci_bus_id": "0000:%02x:00.0" % (0x10 + i), "model": "NVIDIA A100-SXM4-40GB"} for i in range(count)]
    limits = [dict(limit, pci_bus_id=g["pci_bus_id"]) for g in gpus]
    psus = power.parse_psus(real("dmidecode", dmidecode)) if dmidecode else None
    return {"schema": 1, "source": "gathered", "gpus": gpus, "cpu": {"model": cpu, "sockets": sockets},
            "power": {"source": "dmidecode" if psus else None, "psus": psus, "gpus": limits}}


def outcome(hw, rule, **kwargs):
    res = evaluate_host("gpu-n01", hw, **kwargs)
    return [f for f in res["findings"] if f["rule"] == rule], res["rules"].get(rule)


def test_8_gpu_server_with_four_2000_w_psus_passes():
    # Supermicro AS-4124GS-TNR's own table (4 x 2000 W) with eight GPUs at the real A100 SXM4 limit (500 W)
    hw = host("linuxhw-supermicro-as4124gs-tnr-8gpu-2s-epyc7763-ddr4-multibit-ecc.txt", "AMD EPYC 7763 64-Core Processor", 2,
              A100, 8)
    found, result = outcome(hw, "power.psu_capacity")
    assert result == "pass", found
    assert "4000 W for GPUs" in found[0]["observed"] and "6000 W usable of 4 PSU(s) (N+1" in found[0]["observed"]


def test_four_h200_on_two_2200_w_psus_fail():
    # ASUS ESC4000A-E10's table (2 x 2200 W, N+1: 2200 W usable) with four GPUs at the real H200 limit (700 W)
    hw = host("linuxhw-asus-esc4000a-e10-4gpu-1s-epyc7453-multibit-ecc.txt", "AMD EPYC 7453 28-Core Processor", 1, H200, 4)
    found, result = outcome(hw, "power.psu_capacity", severity={"power.psu_capacity": "error"})
    assert result == "fail" and "2800 W for GPUs (700+700+700+700)" in found[0]["message"]
    found, result = outcome(hw, "power.psu_capacity")
    assert result == "warn" and found[0]["message"].startswith("[shadow]")


def test_unknown_and_zero_watt_tables_cannot_verify():
    for table, text in (("linuxhw-asus-esc8000g4-8gpu-server-2s-xeon4214-single-bit-ecc.txt", "reports Unknown"),
                        ("linuxhw-gigabyte-g482-z54-8gpu-2s-epyc7302-ddr4-multibit-ecc.txt", "reports 0 W")):
        found, result = outcome(host(table, "AMD EPYC 7302 16-Core Processor", 2, A100, 8), "power.psu_capacity")
        assert result == "warn" and "cannot verify" in found[0]["message"] and text in found[0]["message"], found


def test_h200_vm_has_no_psu_table():
    hw = host(None, "Intel(R) Xeon(R) Processor", 1, H200, 1)
    found, result = outcome(hw, "power.psu_capacity")
    assert result == "warn" and "no power-supply table (SMBIOS type 39)" in found[0]["message"]
    assert "CPU TDP unknown" in found[0]["message"]
    assert outcome(hw, "power.gpu_caps")[1] == "pass"


def test_power_cap_below_default_is_reported():
    capped = dict(H200, limit_w=500.0)      # changed: the H200's enforced limit lowered from 700 W to 500 W
    found, result = outcome(host(None, "x", 1, capped, 1), "power.gpu_caps")
    assert result == "warn" and "GPU0 0000:10:00.0 capped at 500 W of its default 700 W" in found[0]["message"]


def test_documents_without_power_get_no_outcome():
    hw = host(None, "x", 1, H200, 1)
    del hw["power"]
    res = evaluate_host("n", hw)
    assert "power.psu_capacity" not in res["rules"] and "power.gpu_caps" not in res["rules"]


def test_a_psu_of_unknown_capacity_beside_known_ones_cannot_verify():
    # changed: the Supermicro AS-4124GS-TNR table (4 x 2000 W) with PSU2-PSU4 reporting "Unknown" as the
    # ESC8000 G4's table does: 2000 W known is less than the 4560 W needed, but the other three may carry it
    hw = host("linuxhw-supermicro-as4124gs-tnr-8gpu-2s-epyc7763-ddr4-multibit-ecc.txt", "AMD EPYC 7763 64-Core Processor", 2,
              A100, 8)
    for psu in hw["power"]["psus"][1:]:
        psu.update(capacity_w=None, capacity_text="Unknown")
    found, result = outcome(hw, "power.psu_capacity", severity={"power.psu_capacity": "error"})
    assert result == "warn" and "cannot verify the power budget" in found[0]["message"], found
    assert "PSU PSU2 reports Unknown" in found[0]["message"]
    # the same three PSUs not present (empty slots): the one PSU's 2000 W is all there is, and too little
    for psu in hw["power"]["psus"][1:]:
        psu["present"] = False
    found, result = outcome(hw, "power.psu_capacity", severity={"power.psu_capacity": "error"})
    assert result == "fail" and "2000 W usable of 1 PSU(s)" in found[0]["message"], found
