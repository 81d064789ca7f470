"""hw_facts on the real H200 VM capture (tests/data/real/h200-vm/tree.tar.gz, with the GPU's captured
config space and BARs written back) against a plain ansible.builtin.ping, both through `ansible
localhost` in the same run, alternated (issue 32: the gatherer with the PCIe tree, power and fabric
stays within 1.2x of ping). Also the in-process cost of the new readers alone on the same tree.

Usage: .venv/bin/python benchmarks/platform_gather.py [--runs N]
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".collections"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "plugins", "module_utils", "hw"))

from test_pcie_tree import h200_tree  # noqa: E402  (the tree the unit tests replay)

from ansible_collections.dlrack.node.plugins.module_utils.hw import fabric, pcie_tree, power  # noqa: E402
from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import listdir  # noqa: E402


def ansible(module, args, env):
    cmd = [os.path.join(ROOT, ".venv", "bin", "ansible"), "localhost", "-c", "local", "-m", module]
    if args:
        cmd += ["-a", args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    opts = parser.parse_args()
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false", PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
    with tempfile.TemporaryDirectory() as tmp:
        root = h200_tree(tmp)
        hw_args = "root=%s nvidia_smi=never dmidecode=never" % root
        ping, facts = [], []
        for dummy in range(opts.runs):
            ping.append(ansible("ansible.builtin.ping", None, env))
            facts.append(ansible("dlrack.node.hw_facts", hw_args, env))
        inproc = []
        for dummy in range(50):
            start = time.perf_counter()
            pcie_tree.read_sysfs(root, [])
            power.gather_power(lambda argv: (1, "", ""), None, [], root, listdir, lambda p: pcie_tree._read_bytes(p, 4096))
            fabric.Sampler(root, []).finish()
            inproc.append(time.perf_counter() - start)
    print("| runs | measure | ansible.builtin.ping | dlrack.node.hw_facts on the H200 replay | ratio |")
    print("|---|---|---|---|---|")
    for i, what in ((0, "wall, median"), (1, "CPU (user+sys, ansible and children), median")):
        p, f = statistics.median(r[i] for r in ping), statistics.median(r[i] for r in facts)
        print("| %d | %s | %.2f s | %.2f s | %.2fx |" % (opts.runs, what, p, f, f / p))
    print("The PCIe tree, power and fabric readers alone on the same tree, in process: median %.2f ms (of 50)."
          % (statistics.median(inproc) * 1000))
    return 0


if __name__ == "__main__":
    sys.exit(main())
