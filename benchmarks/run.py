"""Reproducible performance figures for dlrack.node (writes benchmarks/RESULTS.md).

Every figure is a ratio against the plain alternative measured in the same run:
  (a) rule evaluation of a generated fleet of 10,000 declared hosts (controller CPU time);
  (b) the preflight playbook vs the same rules as per-host assert tasks, 500 declared hosts;
  (c) the preflight playbook on 20 vs 2,000 declared hosts (the playbook's own scaling);
  (d) dlrack.node.hw_facts vs ansible.builtin.setup on localhost.
Tools: ansible-playbook / ansible (public), hyperfine-style repetition done here with min-of-N.
Usage: .venv/bin/python benchmarks/run.py [--quick]
"""
import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".collections"))

from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import run_preflight  # noqa: E402
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import RULE_IDS  # noqa: E402

CPUS = [("Intel(R) Xeon(R) Platinum 8480+", 2), ("AMD EPYC 9654 96-Core Processor", 2),
        ("AMD EPYC 7763 64-Core Processor", 2), ("13th Gen Intel(R) Core(TM) i9-13900K", 1),
        ("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", 2)]
GPUS = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "NVIDIA GeForce RTX 4090", "NVIDIA H200"]


def fleet(n, seed=1):
    rnd = random.Random(seed)
    hosts = {}
    for i in range(n):
        model, sockets = rnd.choice(CPUS)
        gpus = rnd.choice([1, 2, 4, 8])
        hosts["node-%05d" % i] = {
            "schema": 1, "source": "declared",
            "cpu": {"model": model, "sockets": sockets},
            "memory": {"total_mb": rnd.choice([256, 512, 1024, 2048]) * 1024,
                       "ecc": rnd.choice(["multi-bit", "single-bit", "none"])},
            "gpus": {"model": rnd.choice(GPUS), "count": gpus},
            "disks": [{"kind": "nvme", "size_bytes": 3840755982336, "count": rnd.choice([0, 2, 8])},
                      {"kind": "hdd", "size_bytes": 18000207937536, "count": rnd.choice([0, 12])}],
        }
    return hosts


def bench_rules(n):
    hosts = fleet(n)
    inputs = {h: {"hw": hw} for h, hw in hosts.items()}
    t0 = time.process_time()
    out = run_preflight(inputs)
    t_eval = time.process_time() - t0
    with tempfile.TemporaryDirectory() as d:
        t0 = time.process_time()
        run_preflight(inputs, report_dir=d)
        t_all = time.process_time() - t0
    return t_eval, t_all, out["summary"]


def write_inventory(path, n, explicit_memory=False):
    hosts = fleet(n)
    from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_hw
    from ansible_collections.dlrack.node.plugins.plugin_utils.rules import _enrich
    inv = {"all": {"hosts": {}}}
    for h, hw in hosts.items():
        if explicit_memory:   # the assert playbook cannot use the catalogue: give it the figures
            clean, dummy = check_hw(hw)
            _enrich(clean)
            for g in clean["gpus"]:
                g.pop("_spec", None)
            clean.pop("_cpu_spec", None)
            hw = clean
        inv["all"]["hosts"][h] = {"dlrack_hw": hw}
    with open(path, "w") as fh:
        json.dump(inv, fh)


def run_playbook(playbook, inventory, extra=()):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.null")
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), playbook, "-i", inventory,
            "-e", "dlrack_fail_on=never"] + list(extra)
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit("%s failed:\n%s" % (" ".join(argv), proc.stdout.decode()[-3000:]))
    return wall


def best(fn, reps):
    return min(fn() for dummy in range(reps))


def adhoc(module, reps):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"))
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible"), "localhost", "-c", "local", "-m", module,
            "-e", "ansible_python_interpreter=/usr/bin/python3"]

    def once():
        t0 = time.monotonic()
        proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        if proc.returncode != 0:
            raise SystemExit(proc.stdout.decode()[-2000:])
        return time.monotonic() - t0
    return best(once, reps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args()
    reps = 1 if args.quick else 3
    rows = []
    bench_rules(10)   # load the catalogue once (YAML), as a long-lived controller would
    t_eval, t_all, summary = bench_rules(10000)
    rows.append(("(a) rule evaluation, 10,000 declared hosts (CPU s)", "%.2f s" % t_eval,
                 "%.2f s with JSON+JUnit+HTML written" % t_all, "target < 1 s"))
    with tempfile.TemporaryDirectory() as d:
        inv500 = os.path.join(d, "inv500.json")
        inv500x = os.path.join(d, "inv500x.json")
        write_inventory(inv500, 500)
        write_inventory(inv500x, 500, explicit_memory=True)
        rep = ["-e", "dlrack_report_dir=%s/r" % d, "-e", "preflight_print_summary=false"]
        t_pre = best(lambda: run_playbook("playbooks/preflight.yml", inv500, rep), reps)
        t_ass = best(lambda: run_playbook("benchmarks/assert_rules.yml", inv500x), reps)
        rows.append(("(b) 500 declared hosts: preflight playbook vs 5 rules as per-host assert tasks",
                     "%.1f s" % t_pre, "%.1f s" % t_ass, "ratio %.2f (preflight checks all %d rules)" % (t_pre / t_ass, len(RULE_IDS))))
        inv20 = os.path.join(d, "inv20.json")
        inv2000 = os.path.join(d, "inv2000.json")
        write_inventory(inv20, 20)
        write_inventory(inv2000, 2000)
        t20 = best(lambda: run_playbook("playbooks/preflight.yml", inv20, rep), reps)
        t2000 = best(lambda: run_playbook("playbooks/preflight.yml", inv2000, rep), reps)
        n20 = best(lambda: run_playbook("benchmarks/noop.yml", inv20), reps)
        n2000 = best(lambda: run_playbook("benchmarks/noop.yml", inv2000), reps)
        rows.append(("(c) preflight playbook wall time, 20 vs 2,000 declared hosts", "%.1f s" % t20, "%.1f s" % t2000,
                     "ratio %.2f (target <= ~3)" % (t2000 / t20)))
        rows.append(("(c') Ansible's floor for the same inventories (one task run once, benchmarks/noop.yml)",
                     "%.1f s" % n20, "%.1f s" % n2000,
                     "ratio %.2f; preflight above the floor: %.1f s vs %.1f s" % (n2000 / n20, t20 - n20, t2000 - n2000)))
    t_hw = adhoc("dlrack.node.hw_facts", reps + 2)
    t_setup = adhoc("ansible.builtin.setup", reps + 2)
    rows.append(("(d) localhost: hw_facts vs ansible.builtin.setup (wall, incl. ansible start)",
                 "%.2f s" % t_hw, "%.2f s" % t_setup, "ratio %.2f" % (t_hw / t_setup)))
    out = ["# Benchmark results", "",
           "Produced by `.venv/bin/python benchmarks/run.py` on %s (%s, %d CPUs, Python %s), %s."
           % (platform.node(), platform.machine(), os.cpu_count(), platform.python_version(),
              time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
           "Times are the best of %d runs; ratios compare with the plain alternative measured in the same run." % reps,
           "", "| measurement | dlrack.node | plain alternative | note |", "|---|---|---|---|"]
    for r in rows:
        out.append("| %s |" % " | ".join(r))
    out.append("")
    out.append("Fleet of (a): %d hosts, %d pass, %d warn, %d fail." % (summary["hosts"], summary["pass"],
                                                                       summary["warn"], summary["fail"]))
    text = "\n".join(out) + "\n"
    print(text)
    marker = "<!-- generated by benchmarks/run.py: preflight -->"
    path = os.path.join(ROOT, "benchmarks", "RESULTS.md")
    old = open(path).read() if os.path.exists(path) else ""
    keep = old.split(marker)[2] if old.count(marker) >= 2 else ("\n" + old if old and marker not in old else "")
    with open(path, "w") as fh:
        fh.write(marker + "\n" + text + marker + keep)


if __name__ == "__main__":
    main()
