# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dlrack-health-check's cost with the fleet count (issue 28.3), on a node with a real slurmctld and
slurmd, run as slurmd runs it (a fresh interpreter per run).

Three cases, interleaved, ``--runs`` each (wall time of the whole process, median and spread):

- ``dry-run``: the judgement only (no scontrol call) - the floor;
- ``pass``: a passing node (one ``scontrol show node -o <node>``) - what every healthy node pays;
- ``fleet``: a failing node at the cap: its own state, then ONE ``scontrol show node -o`` of every
  node to count those held by dlrack, then "not drained" (nothing changes, so it repeats
  identically). Another node is held by dlrack for the run (``--hold``, resumed at the end).

Usage on the node (root; the program installed by roles/scheduler, or any copy of the collection):

    python3 benchmarks/health_check_fleet.py --bin /usr/local/sbin/dlrack-health-check --node n1 --hold n2 --runs 30

Prints one JSON document (medians in ms and the ratios against ``pass``); benchmarks/RESULTS.md
has the figures.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(argv, env):
    """(wall s, CPU s of the process and the scontrol it ran, result). The CPU time (user + system,
    RUSAGE_CHILDREN) barely moves when other jobs share the CPUs; the wall time does."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False,
                         universal_newlines=True, timeout=60)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--bin", default="/usr/local/sbin/dlrack-health-check")
    ap.add_argument("--node", required=True, help="the Slurm node the runs judge (SLURMD_NODENAME)")
    ap.add_argument("--hold", required=True, help="another node of its partition, drained by dlrack for the run")
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="dlrack-bench-")
    base = {"state_file": os.path.join(tmp, "accepted.json"), "textfile": os.path.join(tmp, "none.prom"),
            "history_file": os.path.join(tmp, "history-{node}.json"), "audit_log": os.path.join(tmp, "audit.jsonl"),
            "metrics_textfile": os.path.join(tmp, "metrics.prom"), "fail_runs": 1, "cap_max_nodes": 1, "cap_max_percent": 100}
    configs = {"pass": dict(base), "fleet": dict(base, hot_mount="/nonexistent/dlrack-bench-hot-tier")}
    paths = {}
    for name, conf in configs.items():
        paths[name] = os.path.join(tmp, name + ".json")
        with open(paths[name], "w") as f:
            json.dump(conf, f)
    env = dict(os.environ, SLURMD_NODENAME=args.node)
    run_id = "%s-%s" % (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()), os.urandom(6).hex())
    subprocess.run(["scontrol", "update", "NodeName=" + args.hold, "State=DRAIN", "Reason=dlrack: bench.hold " + run_id], check=True)
    cases = {"dry-run": [args.bin, "--config", paths["pass"], "--dry-run"], "pass": [args.bin, "--config", paths["pass"]],
             "fleet": [args.bin, "--config", paths["fleet"], "--json"]}
    times = dict((k, []) for k in cases)
    cpu = dict((k, []) for k in cases)
    own = []   # the fleet run's own duration_s (judgement + 2 scontrol calls, no interpreter start-up)
    try:
        for k, cmd in cases.items():          # one warm-up each
            timed(cmd, env)
        for dummy in range(args.runs):
            for k, cmd in cases.items():
                took, used, res = timed(cmd, env)
                want = {"dry-run": 0, "pass": 0, "fleet": 4}[k]
                if res.returncode != want:
                    sys.stderr.write("%s: rc %d, expected %d: %s%s\n" % (k, res.returncode, want, res.stdout, res.stderr))
                    return 1
                if k == "fleet":
                    doc = json.loads(res.stdout)
                    if doc["fleet"]["held"] < 1:
                        sys.stderr.write("fleet: the count did not see the held node: %s\n" % res.stdout)
                        return 1
                    own.append(doc["duration_s"])
                times[k].append(took)
                cpu[k].append(used)
    finally:
        subprocess.run(["scontrol", "update", "NodeName=" + args.hold, "State=RESUME"], check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    out = {"runs": args.runs, "node": args.node,
           "nodes_in_cluster": len(subprocess.run(["scontrol", "show", "node", "-o"], stdout=subprocess.PIPE, check=True,
                                                  universal_newlines=True).stdout.splitlines())}
    for k, vals in times.items():
        vals = sorted(vals)
        out[k] = {"median_ms": round(statistics.median(vals) * 1000, 1), "min_ms": round(vals[0] * 1000, 1),
                  "max_ms": round(vals[-1] * 1000, 1), "cpu_median_ms": round(statistics.median(cpu[k]) * 1000, 1)}
    out["fleet"]["own_duration_median_ms"] = round(statistics.median(own) * 1000, 1)
    out["load_average"] = os.getloadavg()
    out["fleet_over_pass"] = round(out["fleet"]["median_ms"] / out["pass"]["median_ms"], 2)
    out["pass_over_dry_run"] = round(out["pass"]["median_ms"] / out["dry-run"]["median_ms"], 2)
    print(json.dumps(out, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
