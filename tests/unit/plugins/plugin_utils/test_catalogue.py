"""Tests for plugin_utils/catalogue.py and the data in plugin_utils/data/{cpus,gpus}.yml.

The model strings below are copied verbatim (padding included) from real captures in
../shared/fixtures/real/ (see its SOURCES.md); the file each comes from is named next to it.
They are hard-coded because ../shared does not exist in a plain clone.
"""
import re

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils import catalogue
from ansible_collections.dlrack.node.plugins.plugin_utils.catalogue import (
    cpu_lanes,
    lookup_cpu,
    lookup_gpu,
    normalize_cpu_name,
    normalize_gpu_name,
)

# (name as captured, fixture file, expected model, cores, threads, pcie_lanes per socket)
FIXTURE_CPUS = [
    # lscpu "Model name"
    ("AMD EPYC 7763 64-Core Processor", "lscpu/jasongross-azure-vm-epyc7763-4vcpu.txt", "AMD EPYC 7763", 64, 128, 128),
    ("AMD EPYC 7451 24-Core Processor", "lscpu/util-linux-expected-2s-epyc7451-8numa-with-parsable.txt", "AMD EPYC 7451", 24, 48, 128),
    ("AMD Opteron(tm) Processor 6328", "lscpu/util-linux-expected-vmware-guest-with-parsable.txt", "AMD Opteron 6328", 8, 8, None),
    ("AMD EPYC 9374F 32-Core Processor", "lscpu/stelline-esc8000a-e12-2s-epyc9374f.txt", "AMD EPYC 9374F", 32, 64, 128),
    ("AMD Ryzen Threadripper PRO 7965WX 24-Cores", "lscpu/stelline-puget-wrx90-threadripper-pro-1s.txt",
     "AMD Ryzen Threadripper PRO 7965WX", 24, 48, 128),
    ("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", "lscpu/linuxhw-1s-xeon-gold6248.txt", "Intel Xeon Gold 6248", 20, 40, 48),
    ("Intel(R) Xeon(R) Platinum 8280 CPU @ 2.70GHz", "lscpu/linuxhw-xen-dom0-xeon-platinum8280-bogus-topology.txt",
     "Intel Xeon Platinum 8280", 28, 56, 48),
    ("AMD EPYC 7742 64-Core Processor", "lscpu/linuxhw-2s-epyc7742-smt-off.txt", "AMD EPYC 7742", 64, 128, 128),
    ("Intel(R) Xeon(R) CPU           X7550  @ 2.00GHz", "lscpu/util-linux-expected-4s-xeon-x7550-numa-stride-ranges-with-parsable.txt",
     "Intel Xeon X7550", 8, 16, None),
    # lscpu -J (old flat format)
    ("Intel(R) Core(TM) i5 CPU       M 460  @ 2.53GHz", "lscpu-json/hardinfo-laptop-i5-m460-lscpu-J-flat-old.json",
     "Intel Core i5 M 460", 2, 4, 16),
    # hardware-report-bundle lscpu sections
    ("AMD EPYC 9374F 32-Core Processor", "hardware-report-bundle/stelline-asus-esc8000a-e12.md", "AMD EPYC 9374F", 32, 64, 128),
    ("AMD Ryzen Threadripper PRO 7965WX 24-Cores", "hardware-report-bundle/stelline-puget-threadripper-pro-wrx90.md",
     "AMD Ryzen Threadripper PRO 7965WX", 24, 48, 128),
    # dmidecode "Processor Information / Version" (trailing padding kept)
    ("AMD EPYC 4344P 8-Core Processor", "dmidecode/linuxhw-asrockrack-b650d4u-1s-epyc4344p-ddr5-ecc-none.txt", "AMD EPYC 4344P", 8, 16, 24),
    ("AMD EPYC 7453 28-Core Processor                ", "dmidecode/linuxhw-asus-esc4000a-e10-4gpu-1s-epyc7453-multibit-ecc.txt",
     "AMD EPYC 7453", 28, 56, 128),
    ("Intel(R) Xeon(R) Silver 4214 CPU @ 2.20GHz", "dmidecode/linuxhw-asus-esc8000g4-8gpu-server-2s-xeon4214-single-bit-ecc.txt",
     "Intel Xeon Silver 4214", 12, 24, 48),
    ("AMD EPYC 7742 64-Core Processor", "dmidecode/linuxhw-gigabyte-g242-z11-4gpu-1s-epyc7742-multibit-ecc.txt", "AMD EPYC 7742", 64, 128, 128),
    ("AMD EPYC 7302 16-Core Processor                ", "dmidecode/linuxhw-gigabyte-g482-z54-8gpu-2s-epyc7302-ddr4-multibit-ecc.txt",
     "AMD EPYC 7302", 16, 32, 128),
    ("AMD EPYC 9354 32-Core Processor", "dmidecode/linuxhw-hpe-cray-xd665-gpu-server-2s-epyc9354-ddr5-multibit-ecc.txt",
     "AMD EPYC 9354", 32, 64, 128),
    ("AMD EPYC 7763 64-Core Processor                ", "dmidecode/linuxhw-supermicro-as4124gs-tnr-8gpu-2s-epyc7763-ddr4-multibit-ecc.txt",
     "AMD EPYC 7763", 64, 128, 128),
    ("Intel(R) Xeon(R) Silver 4210 CPU @ 2.20GHz", "dmidecode/linuxhw-supermicro-sys4029gp-trt-8gpu-2s-xeon4210-single-bit-ecc.txt",
     "Intel Xeon Silver 4210", 10, 20, 48),
    ("Intel(R) Xeon(R) CPU E5-2630 v4 @ 2.20GHz", "dmidecode/netbox-agent-Dell_DSS7500.txt", "Intel Xeon E5-2630 v4", 10, 20, 40),
    ("Intel(R) Xeon(R) CPU E5-2683 v3 @ 2.00GHz", "dmidecode/netbox-agent-Dell_PowerEdge_M630.txt", "Intel Xeon E5-2683 v3", 14, 28, 40),
    ("Intel(R) Xeon(R) Gold 6126 CPU @ 2.60GHz", "dmidecode/netbox-agent-HP_BL460c_Gen10.txt", "Intel Xeon Gold 6126", 12, 24, 48),
    (" Intel(R) Xeon(R) CPU E5-2620 0 @ 2.00GHz       ", "dmidecode/netbox-agent-HP_DL380p_Gen8.txt", "Intel Xeon E5-2620", 6, 12, 40),
    ("Intel(R) Xeon(R) Gold 6132 CPU @ 2.60GHz", "dmidecode/netbox-agent-HP_ProLiant_BL460c_Gen10_Graphics_Exp.txt",
     "Intel Xeon Gold 6132", 14, 28, 48),
    ("Intel(R) Xeon(R) CPU E3-1240 v6 @ 3.70GHz", "dmidecode/netbox-agent-QCT_X10E-9N.txt", "Intel Xeon E3-1240 v6", 4, 8, 16),
    ("Intel(R) Xeon(R) CPU E5-2620 v4 @ 2.10GHz", "dmidecode/netbox-agent-SM_SSG-6028R.txt", "Intel Xeon E5-2620 v4", 8, 16, 40),
    ("Intel(R) Xeon(R) CPU E5-2630 v4 @ 2.20GHz", "dmidecode/netbox-agent-SM_SYS-6018R.txt", "Intel Xeon E5-2630 v4", 10, 20, 40),
    ("Intel(R) Atom(TM) CPU  C2750  @ 2.40GHz", "dmidecode/netbox-agent-unknown-desktop-nonecc.txt", "Intel Atom C2750", 8, 8, 16),
    # CPUs named in nvidia-smi-topo fixture file names (the captures themselves carry no CPU string)
    ("Intel(R) Xeon(R) Gold 5118 CPU @ 2.30GHz", "nvidia-smi-topo/dlperf-8x-v100-sxm2-16gb-2s-xeon5118-no-numa-col-spaces.txt",
     "Intel Xeon Gold 5118", 12, 24, 48),
    ("Intel(R) Xeon(R) Gold 6271C CPU @ 2.60GHz", "nvidia-smi-topo/dlperf-dgx1-like-8x-v100-sxm2-32gb-2s-xeon6271c-tabs.txt",
     "Intel Xeon Gold 6271C", 24, 48, 48),
]


@pytest.mark.parametrize("name,fixture,model,cores,threads,lanes", FIXTURE_CPUS, ids=[f for _n, f, *_r in FIXTURE_CPUS])
def test_fixture_cpu_names_resolve(name, fixture, model, cores, threads, lanes):
    spec = lookup_cpu(name)
    assert spec is not None, "%r (%s) not found" % (name, fixture)
    assert spec["ambiguous"] is False
    assert (spec["model"], spec["cores"], spec["threads"], spec["pcie_lanes"]) == (model, cores, threads, lanes)


def test_power9_is_a_family_not_a_model():
    # lscpu/jdh4-princeton-traverse-2s-power9-4x-v100-gpu-numa-nodes-252-255.txt: no SKU in the name
    assert lookup_cpu("POWER9, altivec supported") is None


# (name as nvidia-smi reports it, fixture file, expected model, memory_gb, memory_mb, nvlink_links, ecc)
FIXTURE_GPUS = [
    ("NVIDIA A100-SXM4-80GB", "nvidia-smi-q-xml/telegraf-a100-sxm4-v12.xml", "A100 SXM4 80GB", 80, 81920, 12, True),
    ("NVIDIA A10G", "nvidia-smi-q-xml/telegraf-a10g.xml", "A10G", 24, 23028, 0, True),
    ("Tesla T4", "nvidia-smi-q-xml/telegraf-tesla-t4.xml", "Tesla T4", 16, 15360, 0, True),
    ("NVIDIA RTX A5000", "nvidia-smi-q-xml/telegraf-dual_a5000-v13.xml", "RTX A5000", 24, 24564, 4, True),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "nvidia-smi-q-xml/telegraf-pro-6000-maxq-blackwell-v13.xml",
     "RTX PRO 6000 Blackwell Max-Q Workstation Edition", 96, 97887, 0, True),
    ("NVIDIA RTX 4000 SFF Ada Generation", "nvidia-smi-q-xml/telegraf-rtx-4000-sff-ada-v13.xml", "RTX 4000 SFF Ada Generation", 20, 20475, 0, True),
    ("NVIDIA GeForce RTX 2070", "nvidia-smi-q-xml/telegraf-dual_2070-v13.xml", "GeForce RTX 2070", 8, 8192, 0, False),
    ("NVIDIA GeForce RTX 2080", "nvidia-smi-q-xml/telegraf-dual_2080-v13.xml", "GeForce RTX 2080", 8, 8192, 1, False),
    ("NVIDIA GeForce RTX 3090", "nvidia-smi-q-xml/telegraf-3090-v13.xml", "GeForce RTX 3090", 24, 24576, 4, False),
    ("NVIDIA GeForce RTX 3080", "nvidia-smi-q-xml/telegraf-rtx-3080-v13.xml", "GeForce RTX 3080", 10, 10240, 0, False),
    ("NVIDIA GeForce RTX 3060", "nvidia-smi-q-xml/telegraf-rtx-3060-v12.xml", "GeForce RTX 3060", 12, 12288, 0, False),
    ("Quadro P2000", "nvidia-smi-q-xml/telegraf-quadro-p2000-v12.xml", "Quadro P2000", 5, 5120, 0, False),
    ("Quadro P400", "nvidia-smi-q-xml/telegraf-quadro-p400.xml", "Quadro P400", 2, 1998, 0, False),
    ("NVIDIA GeForce GT 1030", "nvidia-smi-q-xml/telegraf-gt-1030.xml", "GeForce GT 1030", 2, 1998, 0, False),
    ("NVIDIA H100 80GB HBM3", "nvidia-smi-q-text/utkuozdemir-h100-sxm-80gb-1gpu-vm-drv590-idle.txt", "H100 SXM5 80GB", 80, 81559, 18, True),
    ("NVIDIA H200", "nvidia-smi-q-text/utkuozdemir-h200-1gpu-vm-drv590-idle.txt", "H200 SXM 141GB", 141, 143771, 18, True),
    ("NVIDIA L40S", "nvidia-smi-q-text/utkuozdemir-l40s-1gpu-vm-drv595-idle.txt", "L40S", 48, 46068, 0, True),
    ("NVIDIA GeForce RTX 2080 SUPER", "nvidia-smi-query-gpu-csv/utkuozdemir-rtx2080super-desktop-drv595-idle.csv",
     "GeForce RTX 2080 SUPER", 8, 8192, 1, False),
    ("NVIDIA GeForce RTX 4080 SUPER", "nvidia-smi-query-gpu-csv/utkuozdemir-rtx4080super-desktop-drv595-idle.csv",
     "GeForce RTX 4080 SUPER", 16, 16376, 0, False),
    ("Tesla P100-PCIE-16GB", "nvidia-smi-query-gpu-csv/netdata-tesla-p100-pcie-16gb-no-trailing-newline.csv", "Tesla P100 PCIe 16GB", 16, 16384, 0, True),
    ("NVIDIA RTX 6000 Ada Generation", "hardware-report-bundle/stelline-asus-esc8000a-e12.md", "RTX 6000 Ada Generation", 48, 49140, 0, True),
    # nvidia-smi's table truncates long names
    ("NVIDIA RTX 6000 Ada Gene...", "hardware-report-bundle/stelline-asus-esc8000a-e12.md", "RTX 6000 Ada Generation", 48, 49140, 0, True),
    # lspci device names (bracketed marketing names)
    ("GeForce RTX 2080 Ti", "lspci-vv/linuxhw-esc8000g4-rtx2080ti-1d_00.0-lspci-vvnn-behind-plx-idle-2.5GTs.txt", "GeForce RTX 2080 Ti", 11, 11264, 2, False),
    ("RTX 6000 Ada Generation", "lspci-vv/stelline-esc8000a-e12-rtx6000ada-01_00.0-idle-2.5GTs.txt", "RTX 6000 Ada Generation", 48, 49140, 0, True),
    # GPUs named in nvidia-smi-topo fixture file names
    ("Tesla V100-SXM2-16GB", "nvidia-smi-topo/dlperf-8x-v100-sxm2-16gb-2s-xeon5118-no-numa-col-spaces.txt", "Tesla V100 SXM2 16GB", 16, 16384, 6, True),
    ("Tesla V100-SXM2-32GB", "nvidia-smi-topo/dlperf-dgx1-like-8x-v100-sxm2-32gb-2s-xeon6271c-tabs.txt", "Tesla V100 SXM2 32GB", 32, 32768, 6, True),
    ("NVIDIA GeForce RTX 5090", "nvidia-smi-topo/club3090-issue1229-2x-rtx5090-phb-tabs.txt", "GeForce RTX 5090", 32, 32768, 0, False),
    ("NVIDIA GeForce RTX 4090", "nvidia-smi-topo/club3090-issue46-5gpu-2numa-4090-mixed-spaces.txt", "GeForce RTX 4090", 24, 24576, 0, False),
]


@pytest.mark.parametrize("name,fixture,model,gb,mb,links,ecc", FIXTURE_GPUS, ids=[f + ":" + n for n, f, *_r in FIXTURE_GPUS])
def test_fixture_gpu_names_resolve(name, fixture, model, gb, mb, links, ecc):
    spec = lookup_gpu(name)
    assert spec is not None, "%r (%s) not found" % (name, fixture)
    assert spec["ambiguous"] is False
    assert (spec["model"], spec["memory_gb"], spec["memory_mb"], spec["nvlink_links"], spec["ecc"]) == (model, gb, mb, links, ecc)
    assert spec["nvlink"] is (links > 0)


@pytest.mark.parametrize("name,fixture", [
    ("Graphics Device", "nvidia-smi-q-xml/telegraf-gtx-1660-ti.xml"),   # card newer than its driver
    ("GRID P4-1Q", "nvidia-smi-q-xml/telegraf-tesla_p4.xml"),          # vGPU profile, not a card
])
def test_fixture_gpu_names_that_must_not_resolve(name, fixture):
    assert lookup_gpu(name) is None


@pytest.mark.parametrize("name,model", [
    ("Intel(R) Xeon(R) Platinum 8480+", "Intel Xeon Platinum 8480+"),
    ("Xeon Platinum 8480+", "Intel Xeon Platinum 8480+"),
    ("Intel Xeon Platinum 8480", "Intel Xeon Platinum 8480+"),
    ("Intel(R) Xeon(R) Platinum 8462Y+", "Intel Xeon Platinum 8462Y+"),
    ("EPYC 9654", "AMD EPYC 9654"),
    ("AMD EPYC 9654P 96-Core Processor", "AMD EPYC 9654P"),
    ("13th Gen Intel(R) Core(TM) i9-13900K", "Intel Core i9-13900K"),
    ("Intel(R) Core(TM) i9-13900KF", "Intel Core i9-13900K"),
    ("Intel(R) Core(TM) Ultra 9 285K", "Intel Core Ultra 9 285K"),
    ("AMD Ryzen 9 7950X 16-Core Processor", "AMD Ryzen 9 7950X"),
    ("AMD Ryzen 7 7800X3D 8-Core Processor", "AMD Ryzen 7 7800X3D"),
    ("Ryzen 9950X", "AMD Ryzen 9 9950X"),
    ("AMD Ryzen Threadripper PRO 5975WX 32-Cores", "AMD Ryzen Threadripper PRO 5975WX"),
    ("AMD Ryzen Threadripper 3970X 32-Core Processor", "AMD Ryzen Threadripper 3970X"),
    ("Intel(R) Xeon(R) 6980P", "Intel Xeon 6980P"),
    ("Intel(R) Xeon(R) w9-3495X", "Intel Xeon w9-3495X"),
    ("Intel(R) Xeon(R) W-2295 CPU @ 3.00GHz", "Intel Xeon W-2295"),
    ("Intel(R) Xeon(R) E-2388G CPU @ 3.20GHz", "Intel Xeon E-2388G"),
    ("Xeon E5-2620 v4", "Intel Xeon E5-2620 v4"),
    ("AMD EPYC 9575F 64-Core Processor", "AMD EPYC 9575F"),
])
def test_tricky_cpu_names(name, model):
    spec = lookup_cpu(name)
    assert spec is not None and spec["model"] == model


def test_e5_first_generation_is_not_v4():
    v1 = lookup_cpu("Intel(R) Xeon(R) CPU E5-2620 0 @ 2.00GHz")
    v4 = lookup_cpu("Intel(R) Xeon(R) CPU E5-2620 v4 @ 2.10GHz")
    assert (v1["model"], v1["cores"]) == ("Intel Xeon E5-2620", 6)
    assert (v4["model"], v4["cores"]) == ("Intel Xeon E5-2620 v4", 8)


def test_brand_words_must_agree():
    assert lookup_cpu("Xeon 9654") is None          # 9654 is an EPYC
    assert lookup_cpu("EPYC 6248") is None          # 6248 is a Xeon Gold


@pytest.mark.parametrize("name", ["", None, "Intel Xeon Processor (Icelake)", "QEMU Virtual CPU version 2.5+", "AMD EPYC 1234",
                                  "Neoverse-N1", "Hygon C86 7291 32-core Processor"])
def test_unknown_cpus_return_none(name):
    assert lookup_cpu(name) is None


@pytest.mark.parametrize("name,model", [
    ("Tesla V100-SXM2-32GB", "Tesla V100 SXM2 32GB"),
    ("H100 SXM", "H100 SXM5 80GB"),
    ("H100-SXM5-80GB", "H100 SXM5 80GB"),
    ("NVIDIA H100 PCIe", "H100 PCIe 80GB"),
    ("NVIDIA H100 NVL", "H100 NVL 94GB"),
    ("A100 80GB PCIe", "A100 PCIe 80GB"),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
    ("A100-SXM4-40GB", "A100 SXM4 40GB"),
    ("RTX 4090", "GeForce RTX 4090"),
    ("RTX 4070", "GeForce RTX 4070"),
    ("RTX 4070 Ti", "GeForce RTX 4070 Ti"),
    ("NVIDIA RTX A6000", "RTX A6000"),
    ("RTX 6000 Ada", "RTX 6000 Ada Generation"),
    ("Quadro RTX 6000", "Quadro RTX 6000"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell Server Edition"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell Workstation Edition"),
    ("H200", "H200 SXM 141GB"),
    ("NVIDIA H200 NVL", "H200 NVL 141GB"),
    ("NVIDIA B200", "B200 SXM 180GB"),
    ("A10", "A10"),
    ("NVIDIA L4", "L4"),
    ("T4", "Tesla T4"),
    ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "H100 SXM5 80GB"),
])
def test_tricky_gpu_names(name, model):
    spec = lookup_gpu(name)
    assert spec is not None and spec["ambiguous"] is False and spec["model"] == model


def test_rtx_6000_family_is_never_confused():
    models = {n: lookup_gpu(n)["model"] for n in ("Quadro RTX 6000", "NVIDIA RTX 6000 Ada Generation", "NVIDIA RTX A6000",
                                                  "NVIDIA RTX PRO 6000 Blackwell Workstation Edition")}
    assert len(set(models.values())) == 4
    plain = lookup_gpu("RTX 6000")
    assert plain["ambiguous"] is True and plain["model"] is None
    assert set(plain["candidates"]) >= {"Quadro RTX 6000", "RTX 6000 Ada Generation", "RTX PRO 6000 Blackwell Workstation Edition"}
    assert "RTX A6000" not in plain["candidates"]


def test_h100_alone_is_ambiguous_and_guesses_nothing():
    spec = lookup_gpu("H100")
    assert spec["ambiguous"] is True
    assert spec["candidates"] == ["H100 SXM5 80GB", "H100 PCIe 80GB", "H100 NVL 94GB"]
    assert spec["memory_gb"] is None and spec["nvlink_links"] is None and spec["form_factor"] is None
    assert spec["ranges"]["memory_gb"] == [80, 94]
    assert spec["ranges"]["nvlink_links"] == [12, 18]
    assert spec["ecc"] is True and spec["architecture"] == "Hopper"     # shared figures are kept


def test_ambiguous_same_name_variants():
    spec = lookup_gpu("NVIDIA GeForce RTX 4060 Ti")
    assert spec["ambiguous"] is True and spec["ranges"]["memory_gb"] == [8, 16]
    pro = lookup_gpu("RTX PRO 6000")
    assert pro["ambiguous"] is True and pro["memory_gb"] == 96


@pytest.mark.parametrize("name", ["", None, "Graphics Device", "NVIDIA GeForce RTX 9999", "AMD Instinct MI999",
                                  "NVIDIA GeForce RTX 4090 Laptop GPU", "Matrox G200eW3"])
def test_unknown_gpus_return_none(name):
    assert lookup_gpu(name) is None


def test_normalizers():
    assert normalize_cpu_name("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz") == "xeon gold 6248"
    assert normalize_cpu_name("AMD Ryzen Threadripper PRO 7965WX 24-Cores") == "ryzen threadripper pro 7965wx"
    assert normalize_cpu_name("13th Gen Intel(R) Core(TM) i9-13900K") == "core i9-13900k"
    assert normalize_gpu_name("Tesla V100-SXM2-32GB") == "v100 sxm 32gb"
    assert normalize_gpu_name("NVIDIA GeForce RTX 4090") == "rtx 4090"
    assert normalize_gpu_name("NVIDIA RTX 6000 Ada Gene...") == "rtx 6000 ada gene ..."


def test_results_are_copies():
    spec = lookup_gpu("NVIDIA L40S")
    spec["memory_gb"] = 1
    spec["aliases"].append("x")
    assert lookup_gpu("NVIDIA L40S")["memory_gb"] == 48
    assert "x" not in lookup_gpu("NVIDIA L40S")["aliases"]


# ---- cpu_lanes ---------------------------------------------------------------------------

def test_cpu_lanes_epyc_two_sockets_is_conservative():
    lanes, note = cpu_lanes(lookup_cpu("AMD EPYC 9654 96-Core Processor"), 2)
    assert lanes == 128
    assert "160" in note and "xGMI" in note and "conservative" in note


def test_cpu_lanes_epyc_naples_two_sockets():
    lanes, _note = cpu_lanes(lookup_cpu("AMD EPYC 7451 24-Core Processor"), 2)
    assert lanes == 128


def test_cpu_lanes_single_and_intel():
    assert cpu_lanes(lookup_cpu("EPYC 9654"), 1)[0] == 128
    assert cpu_lanes(lookup_cpu("Xeon Platinum 8480+"), 2)[0] == 160
    assert cpu_lanes(lookup_cpu("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz"), 2)[0] == 96


def test_cpu_lanes_cannot_verify():
    assert cpu_lanes(None, 2)[0] is None
    assert "cannot verify" in cpu_lanes(None, 2)[1]
    assert cpu_lanes(lookup_cpu("Intel(R) Xeon(R) CPU X7550 @ 2.00GHz"), 4)[0] is None
    assert cpu_lanes(lookup_cpu("EPYC 9654"), None)[0] is None
    assert cpu_lanes(lookup_cpu("EPYC 9654"), "two")[0] is None
    assert cpu_lanes(lookup_cpu("EPYC 9654"), 0)[0] is None


def test_cpu_lanes_flags_too_many_sockets():
    lanes, note = cpu_lanes(lookup_cpu("AMD EPYC 9654P"), 2)
    assert lanes == 256 and "exceeds" in note


# ---- schema of the data ------------------------------------------------------------------

URL = re.compile(r"^https://[a-z0-9.-]+\.[a-z]{2,}/\S*$")


def _num(value, low, high):
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


@pytest.mark.parametrize("entry", catalogue.catalogue_entries("cpus"), ids=lambda e: e["model"])
def test_cpu_entry_schema(entry):
    assert URL.match(entry["source"]), entry["source"]
    assert entry["vendor"] in ("intel", "amd", "arm", "other")
    assert entry["family"] and entry["generation"]
    assert _num(entry["cores"], 1, 256)
    assert _num(entry["threads"], entry["cores"], 2 * entry["cores"])
    if entry["pcie_lanes"] is None:
        assert entry.get("note"), "a null pcie_lanes needs a note saying why"
    else:
        assert _num(entry["pcie_lanes"], 4, 160)
    # null = cannot verify, never guessed: allowed only with a note saying why
    for key, low, high in (("pcie_gen", 2, 6), ("memory_channels", 2, 12)):
        if entry[key] is None:
            assert entry.get("note"), "a null %s needs a note saying why" % key
        else:
            assert _num(entry[key], low, high), key
    assert _num(entry["max_sockets"], 1, 8)
    assert entry["ecc"] in (True, False, "unknown")
    if "tdp_w" in entry:
        assert _num(entry["tdp_w"], 10, 600)
    if "pcie_lanes_2s" in entry:
        two = entry["pcie_lanes_2s"]
        assert entry["max_sockets"] == 2
        assert _num(two["min"], 64, 256) and _num(two["max"], two["min"], 256)


@pytest.mark.parametrize("entry", catalogue.catalogue_entries("gpus"), ids=lambda e: e["model"])
def test_gpu_entry_schema(entry):
    assert URL.match(entry["source"]), entry["source"]
    assert entry["vendor"] in ("nvidia", "amd", "ascend")
    if entry["vendor"] == "amd":
        _amd_entry_schema(entry)
        return
    if entry["vendor"] == "ascend":
        _ascend_entry_schema(entry)
        return
    assert entry["memory_mb_basis"] in ("observed", "reported", "nominal")
    # null = cannot verify, never guessed: allowed only with a note saying why
    for key in ("memory_gb", "pcie_gen", "pcie_width", "ecc"):
        if entry[key] is None:
            assert entry.get("note"), "a null %s needs a note saying why" % key
    if entry["memory_gb"] is None:
        assert entry["memory_mb"] is None
    else:
        assert _num(entry["memory_gb"], 1, 512)
        if entry["memory_mb_basis"] == "nominal":
            assert entry["memory_mb"] == entry["memory_gb"] * 1024
        else:
            assert 0.9 * entry["memory_gb"] * 1024 <= entry["memory_mb"] <= 1.05 * entry["memory_gb"] * 1024
    assert isinstance(entry["nvlink"], bool)
    assert _num(entry["nvlink_links"], 0, 18)
    assert entry["nvlink"] is (entry["nvlink_links"] > 0)
    assert entry["nvlink_kind"] in (("sxm", "bridge") if entry["nvlink"] else ("none",))
    assert entry["pcie_gen"] is None or _num(entry["pcie_gen"], 3, 6)
    assert entry["pcie_width"] in (None, 4, 8, 16)
    assert entry["ecc"] in (None, True, False)
    assert entry["form_factor"] in ("sxm", "pcie")
    if entry["form_factor"] == "sxm":
        assert entry["nvlink_kind"] == "sxm"
    if entry["model"].startswith("GeForce"):
        assert entry["ecc"] is False


def _ascend_entry_schema(entry):
    """Ascend entries (issue 31.3): per chip, the HBM npu-smi printed on the real machine the source
    names (observed), nothing without a capture: a null needs a note."""
    assert entry["memory_mb_basis"] == "observed" and "nvlink" not in entry
    assert entry["source"].startswith("https://github.com/"), "the issue thread with the npu-smi capture"
    assert entry["gcds_per_package"] in (1, 2) and entry["chips_per_npu"] in (1, 2)
    for key in ("memory_gb", "pcie_gen", "pcie_width", "ecc", "hccs"):
        if entry[key] is None:
            assert entry.get("note"), "a null %s needs a note saying why" % key
    if entry["memory_mb"] is not None:
        assert entry["memory_mb"] * entry["gcds_per_package"] == entry["memory_gb"] * 1024


def _amd_entry_schema(entry):
    """AMD entries (issue 21): XGMI links instead of NVLink, memory per logical device (GCD)."""
    assert "nvlink" not in entry and entry["source"].startswith("https://www.amd.com/")
    assert entry["memory_mb_basis"] in ("observed", "nominal")
    assert entry["gcds_per_package"] in (1, 2)
    for key in ("memory_gb", "pcie_gen", "pcie_width", "ecc", "xgmi_links", "power_w"):
        if entry[key] is None:
            assert entry.get("note"), "a null %s needs a note saying why" % key
    if entry["memory_gb"] is None:
        assert entry["memory_mb"] is None
    elif entry["memory_mb_basis"] == "nominal":
        assert entry["memory_mb"] * entry["gcds_per_package"] == entry["memory_gb"] * 1024
    else:
        assert 0.95 * entry["memory_gb"] * 1024 <= entry["memory_mb"] * entry["gcds_per_package"] <= entry["memory_gb"] * 1024
    assert entry["xgmi_links"] is None or _num(entry["xgmi_links"], 0, 8)
    assert entry["xgmi_kind"] in ("oam", "bridge") and entry["form_factor"] in ("oam", "pcie")
    assert entry["power_w"] is None or _num(entry["power_w"], 100, 2000)
    assert entry["pcie_gen"] is None or _num(entry["pcie_gen"], 4, 6)
    assert entry.get("unified_memory", False) is (entry["model"] == "Instinct MI300A")


@pytest.mark.parametrize("name,model,mb,links,gcds", [
    ("AMD Instinct MI300X", "Instinct MI300X", 196608, 7, 1),      # amd-smi market_name
    ("AMD Instinct MI300X OAM", "Instinct MI300X", 196608, 7, 1),
    ("AMD Instinct MI100", "Instinct MI100", 32752, 3, 1),          # rocm-smi "Card series" bracket (real capture)
    ("Instinct MI210", "Instinct MI210", 65536, 3, 1),
    ("AMD Instinct MI250X", "Instinct MI250X", 65536, 8, 2),
    ("MI250", "Instinct MI250", 65536, 6, 2),
    ("MI300A", "Instinct MI300A", 131072, None, 1),
    ("AMD Instinct MI325X", "Instinct MI325X", 262144, 7, 1),
    ("MI355X", "Instinct MI355X", 294912, 7, 1),
    ("MI308X", "Instinct MI308X", None, None, 1),
])
def test_amd_instinct_models_resolve(name, model, mb, links, gcds):
    spec = lookup_gpu(name)
    assert (spec["model"], spec["memory_mb"], spec["xgmi_links"], spec["gcds_per_package"], spec["ambiguous"]) == (
        model, mb, links, gcds, False)


def test_mi250x_or_mi250_is_ambiguous_but_memory_is_shared():
    spec = lookup_gpu("Instinct MI250X/MI250")          # pci.ids names device 0x740c so
    assert spec["ambiguous"] and spec["memory_mb"] == 65536 and spec["xgmi_links"] is None
    assert spec["ranges"]["xgmi_links"] == [6, 8]


def test_cpu_keys_are_unique():
    seen = {}
    for entry in catalogue.catalogue_entries("cpus"):
        names = [entry["model"]] + list(entry.get("aliases") or [])
        for name in names:
            norm = normalize_cpu_name(name)
            # a name without a digit-carrying token is keyed by its whole normalized text (exact match only)
            key = catalogue._cpu_key(norm) or ("exact", norm)
            assert norm, name
            assert seen.setdefault(key, entry["model"]) == entry["model"], "%s collides with %s" % (name, seen[key])
        # every entry is found by its own canonical name and aliases
        for name in names:
            assert lookup_cpu(name)["model"] == entry["model"]


def test_gpu_aliases_are_unique_and_resolve():
    seen = {}
    for entry in catalogue.catalogue_entries("gpus"):
        for name in [entry["model"]] + entry["aliases"]:
            tokens = catalogue._gpu_tokens(name)
            assert seen.setdefault(tokens, entry["model"]) == entry["model"], "%s collides with %s" % (name, seen[tokens])
            spec = lookup_gpu(name)
            assert spec is not None and spec["model"] == entry["model"], name


def test_coverage_of_required_models():
    cpus = {e["model"] for e in catalogue.catalogue_entries("cpus")}
    gpus = {e["model"] for e in catalogue.catalogue_entries("gpus")}
    for sku in ("8480+", "8470", "8468", "8462Y+", "6448Y", "6430", "5418Y", "4410Y", "8380", "8358", "6348", "6338", "8280", "8268",
                "6248", "6230", "6226R", "5218", "5118", "4214", "4210", "6271C", "6132", "6126"):
        assert any(m.endswith(" " + sku) and "Xeon" in m for m in cpus), sku
    for sku in ("7451", "7601", "7742", "7702", "7302", "7502", "7402", "7763", "7713", "7543", "7453", "7313", "7443", "9654", "9554",
                "9454", "9354", "9374F", "9334", "9124", "9965", "9755", "9655", "9575F", "9555", "9455", "9355", "4344P"):
        assert "AMD EPYC " + sku in cpus, sku
    for model in ("AMD Ryzen Threadripper PRO 7965WX", "AMD Ryzen Threadripper PRO 7985WX", "AMD Ryzen Threadripper PRO 7995WX",
                  "AMD Ryzen Threadripper PRO 5975WX", "AMD Ryzen 9 7950X", "AMD Ryzen 9 9950X", "AMD Ryzen 9 5950X",
                  "AMD Ryzen 7 7800X3D", "Intel Core i9-13900K", "Intel Core Ultra 9 285K"):
        assert model in cpus, model
    for model in ("Instinct MI210", "Instinct MI250", "Instinct MI250X", "Instinct MI300X", "Instinct MI300A",
                  "Instinct MI308X", "Instinct MI325X", "Instinct MI355X"):
        assert model in gpus, model
    for model in ("H100 SXM5 80GB", "H100 PCIe 80GB", "H100 NVL 94GB", "H200 SXM 141GB", "H200 NVL 141GB", "B200 SXM 180GB",
                  "A100 SXM4 40GB", "A100 PCIe 80GB", "A800 SXM4 80GB", "H800 SXM5 80GB", "L40", "L40S", "A40", "A30", "A10", "A10G",
                  "Tesla T4", "L4", "RTX A6000", "RTX 6000 Ada Generation", "RTX PRO 6000 Blackwell Server Edition",
                  "GeForce RTX 3090 Ti", "GeForce RTX 4090", "GeForce RTX 5090", "Tesla V100 PCIe 32GB"):
        assert model in gpus, model


# ---- models added for issue 11 (names as nvidia-smi / lscpu / dmidecode print them) -----------

@pytest.mark.parametrize("name,model,gb,links", [
    ("NVIDIA H20", "H20 96GB", 96, 18),
    ("NVIDIA L20", "L20", 48, 0),
    ("NVIDIA L2", "L2", None, 0),
    ("NVIDIA GeForce RTX 4090 D", "GeForce RTX 4090 D", 24, 0),
    ("NVIDIA GH200 480GB", "GH200 96GB", 96, 18),
    ("GH200 144GB HBM3e", "GH200 144GB", 144, 18),
    ("NVIDIA GB200", "GB200 186GB", 186, 18),
    ("NVIDIA B300 SXM6 AC", "B300 SXM 288GB", 288, 18),
    ("B300", "B300 SXM 288GB", 288, 18),
])
def test_issue11_gpus_resolve(name, model, gb, links):
    spec = lookup_gpu(name)
    assert spec["model"] == model and not spec["ambiguous"]
    assert (spec["memory_gb"], spec["nvlink_links"]) == (gb, links)
    assert spec["source"].startswith("https://")


def test_issue11_gpu_neighbours_stay_apart():
    assert lookup_gpu("NVIDIA GeForce RTX 4090")["model"] == "GeForce RTX 4090"   # not the 4090 D
    assert lookup_gpu("NVIDIA H200")["model"] == "H200 SXM 141GB"                 # not the H20
    assert lookup_gpu("NVIDIA L4")["model"] == "L4"
    gh200 = lookup_gpu("GH200")                                                  # 96 or 144 GB: not guessed
    assert gh200["ambiguous"] and gh200["memory_gb"] is None and gh200["ranges"]["memory_gb"] == [96, 144]
    assert lookup_gpu("NVIDIA L2")["pcie_gen"] is None                            # cannot verify


@pytest.mark.parametrize("name,model,cores,threads,lanes", [
    ("Intel(R) Core(TM) i9-10900K CPU @ 3.70GHz", "Intel Core i9-10900K", 10, 20, 16),
    ("Intel(R) Core(TM) i9-10900KF CPU @ 3.70GHz", "Intel Core i9-10900K", 10, 20, 16),
    ("Intel(R) Core(TM) i9-10850K CPU @ 3.60GHz", "Intel Core i9-10850K", 10, 20, 16),
    ("Intel(R) Core(TM) i7-10700 CPU @ 2.90GHz", "Intel Core i7-10700", 8, 16, 16),
    ("Intel(R) Core(TM) i5-10400F CPU @ 2.90GHz", "Intel Core i5-10400", 6, 12, 16),
    ("11th Gen Intel(R) Core(TM) i9-11900K @ 3.50GHz", "Intel Core i9-11900K", 8, 16, 20),
    ("11th Gen Intel(R) Core(TM) i7-11700K @ 3.60GHz", "Intel Core i7-11700K", 8, 16, 20),
    ("11th Gen Intel(R) Core(TM) i5-11400 @ 2.60GHz", "Intel Core i5-11400", 6, 12, 20),
    ("Ampere(R) Altra(R) Processor Q80-30", "Ampere Altra Q80-30", 80, 80, 128),
    ("Ampere Altra Q32-17", "Ampere Altra Q32-17", 32, 32, 128),
    ("Ampere Altra Max M128-30", "Ampere Altra Max M128-30", 128, 128, 128),
    ("AmpereOne A192-32X", "AmpereOne A192-32X", 192, 192, 128),
    ("Hygon C86 7285 32-core Processor", "Hygon C86 7285", 32, 64, None),
    ("Hygon C86 7380 32-core Processor", "Hygon C86 7380", 32, 64, None),
    ("Kunpeng 920 6426", "Huawei Kunpeng 920-6426", 64, 64, None),
    ("HiSilicon Kunpeng 920-4826", "Huawei Kunpeng 920-4826", 48, 48, None),
])
def test_issue11_cpus_resolve(name, model, cores, threads, lanes):
    spec = lookup_cpu(name)
    assert spec["model"] == model and not spec["ambiguous"]
    assert (spec["cores"], spec["threads"], spec["pcie_lanes"]) == (cores, threads, lanes)


def test_issue11_cpu_lanes():
    assert cpu_lanes(lookup_cpu("Ampere Altra Q80-30"), 2)[0] == 192     # 32 lanes per socket link the sockets
    assert cpu_lanes(lookup_cpu("Ampere Altra Q80-30"), 1)[0] == 128
    lanes, note = cpu_lanes(lookup_cpu("Hygon C86 7285"), 2)
    assert lanes is None and "cannot verify" in note
    assert cpu_lanes(lookup_cpu("Intel Core i9-11900K"), 1)[0] == 20
    # a family name without the SKU is not a SKU
    assert lookup_cpu("Kunpeng-920") is None


# ---- NVIDIA Grace: digitless names, matched only exactly ------------------------------------------

@pytest.mark.parametrize("name,model", [
    # as an inventory declares it
    ("NVIDIA Grace", "NVIDIA Grace"),
    ("NVIDIA Grace CPU", "NVIDIA Grace"),
    ("Grace", "NVIDIA Grace"),
    ("  nvidia   GRACE ", "NVIDIA Grace"),
    ("NVIDIA(R) Grace(TM) CPU", "NVIDIA Grace"),
    ("Grace CPU Superchip", "NVIDIA Grace CPU Superchip"),
    ("NVIDIA Grace CPU Superchip", "NVIDIA Grace CPU Superchip"),
    ("Grace Superchip", "NVIDIA Grace CPU Superchip"),
])
def test_grace_resolves_by_exact_name(name, model):
    spec = lookup_cpu(name)
    assert spec["model"] == model and not spec["ambiguous"]
    assert (spec["vendor"], spec["cores"], spec["threads"], spec["pcie_lanes"], spec["pcie_gen"]) == ("arm", 72, 72, 64, 5)
    assert spec["ecc"] is True and spec["memory_channels"] is None
    assert spec["source"].startswith("https://resources.nvidia.com/")


def test_grace_superchip_is_two_grace_sockets():
    spec = lookup_cpu("Grace CPU Superchip")
    assert cpu_lanes(spec, 2) == (128, "2 x 64 lanes per socket (NVIDIA Grace CPU Superchip)")   # 8 x PCIe Gen5 x16
    assert spec["cores"] * 2 == 144 and spec["max_sockets"] == 2
    assert cpu_lanes(lookup_cpu("NVIDIA Grace"), 1)[0] == 64                                    # 4 x PCIe Gen5 x16


@pytest.mark.parametrize("name", [
    None, "", "   ",
    # what a Grace host itself reports: arm64 /proc/cpuinfo has no model name (hw_facts: null), lscpu
    # names the core, shared with other Neoverse V2 parts -> not Grace
    "Neoverse-V2", "Neoverse V2", "ARM Neoverse-V2",
    # digitless names that are not an exact model or alias: no word matching
    "Neoverse", "NVIDIA", "Superchip", "Grace Hopper", "NVIDIA Grace Hopper Superchip", "Grace CPU Superchip 2",
    "Intel(R) Xeon(R) Processor", "Intel Xeon Processor", "AMD EPYC Processor", "Common KVM processor",
    "QEMU Virtual CPU", "Ampere Altra", "Kunpeng", "Hygon C86",
])
def test_digitless_names_without_exact_alias_stay_unknown(name):
    assert lookup_cpu(name) is None
