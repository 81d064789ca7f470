"""Print the ECC collector's textfile for a copy of a real EDAC tree with UE uncorrected errors.

The tree is tests/data/edac/netdata-issue1508-serverB (mc0 with csrow0-3, all counters 0 in the
capture; tests/data/edac/README.md); ue_count of mc0 and csrow1 are set to UE in a temporary copy
(no real capture with an uncorrected error exists). The text is what the real collector
(plugins/module_utils/ecc/metrics.py) renders for it.
usage: ecc_textfile.py UE
"""
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".collections"))

from ansible_collections.dlrack.node.plugins.module_utils.ecc.metrics import collect  # noqa: E402


def main():
    ue = int(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="dlrack-sched-edac-")
    try:
        tree = os.path.join(tmp, "root")
        shutil.copytree(os.path.join(ROOT, "tests", "data", "edac", "netdata-issue1508-serverB"), tree)
        mc0 = os.path.join(tree, "sys", "devices", "system", "edac", "mc", "mc0")
        for path in (os.path.join(mc0, "ue_count"), os.path.join(mc0, "csrow1", "ue_count")):
            with open(path, "w") as f:
                f.write("%d\n" % ue)
        sys.stdout.write(collect(root=tree, nvidia_smi=None))
    finally:
        shutil.rmtree(tmp, True)


if __name__ == "__main__":
    main()
