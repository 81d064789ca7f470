"""sysfs trees of the real Ascend machines in ../real/ascend/ (issue 31.3), for hw_facts' root=
replay (see README.md here: which figures are the captures' and which are built)."""
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_SPEC = importlib.util.spec_from_file_location("dlrack_amd_trees_for_ascend", os.path.join(os.path.dirname(HERE), "amd", "build_trees.py"))
_BASE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_BASE)
gpu, fresh, GEN4, GEN3 = _BASE.gpu, _BASE.fresh, _BASE.GEN4, _BASE.GEN3
NPU = "0x120000"


def npu(root, bdf, device, numa, cpus):
    return gpu(root, bdf, device, NPU, (GEN4, "16", GEN4, "16"), numa, cpus, vendor="0x19e5", driver="devdrv_device_driver")


def huawei_nic(root):
    """A Huawei NIC (0x19e5, class 0x0200) beside the NPUs: never an NPU."""
    gpu(root, "0000:3d:00.0", "0x1822", "0x020000", (GEN4, "16", GEN4, "16"), 0, "0-23", vendor="0x19e5", driver="hinic")


def build_all(out):
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    roots = []
    root = fresh(out, "910b4-1panel")            # 1Panel#9472: 910B4 at c1:00.0 and c2:00.0
    for i, bdf in enumerate(("0000:c1:00.0", "0000:c2:00.0")):
        npu(root, bdf, "0xd802", 1, "24-47")
    huawei_nic(root)
    roots.append(root)
    root = fresh(out, "a3-vllm-2035")            # vllm-ascend#2035 (A3): NPU 0's chips at 9d:00.0, 9f:00.0
    for bdf in ("0000:9d:00.0", "0000:9f:00.0"):
        npu(root, bdf, "0xd803", 1, "40-79")
    roots.append(root)
    root = fresh(out, "310p3-nvtop")             # nvtop#421: an Atlas 300I Duo, both chips on 01:00.0
    npu(root, "0000:01:00.0", "0xd500", 0, "0-31")
    roots.append(root)
    return roots


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_trees.py OUTDIR")
    for path in build_all(sys.argv[1]):
        print(path)
