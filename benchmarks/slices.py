"""A sliced pre-flight at fleet scale (issue 23.5): N declared hosts run once unsliced and in
--slices slices, each slice by its own ansible-runner process on its own inventory (AWX's rule:
hosts ordered by name, hosts[n-1::count], awx/main/models/inventory.py get_sliced_hosts, reproduced
here in the harness only), the slices' reports merged with playbooks/report_merge.yml, and the
slices' published stats merged as AWX merges artifacts (awx/main/models/workflow.py
get_effective_artifacts: dict.update in finish order). Checks that the merge gives the unsliced
run's failing hosts, report.json (but for run id and time) and exit code, and that the merged
artifacts give the same failing hosts; records wall time and peak memory of each run in
benchmarks/RESULTS.md. Peak memory: the largest resident set of one process of that run
(ansible-playbook or one of its workers: getrusage RUSAGE_CHILDREN ru_maxrss of a fresh helper).
Hosts: benchmarks/fleet.py declared_inventory (rack_a's HGX H200 node and gpu-b01), 60 % failing.
Usage: flock /tmp/dlrack-heavy.lock .venv/bin/python benchmarks/slices.py [--hosts 10000] [--slices 4]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, ".collections"))
sys.path.insert(0, os.path.join(ROOT, "tests"))      # awxrules: AWX's rules, reproduced for tests and benchmarks

from awxrules import awx_effective_artifacts, awx_sliced_hosts  # noqa: E402
from fleet import declared_inventory, write_section  # noqa: E402
from ansible_collections.dlrack.node.plugins.plugin_utils.report_merge import fleet_verdict  # noqa: E402

PY = os.path.join(ROOT, ".venv", "bin", "python")
# One ansible-runner run in a fresh process, so that its children's peak RSS is this run's alone.
HELPER = r"""
import json, os, resource, sys, time
import ansible_runner
a = json.loads(sys.argv[1])
t0 = time.monotonic()
r = ansible_runner.run(private_data_dir=a["pdd"], project_dir=a["root"], playbook=a["playbook"],
                       inventory=a["inventory"], extravars=a["extravars"], envvars=a["env"], quiet=True, timeout=3000)
wall = time.monotonic() - t0
stats = [e for e in r.events if e["event"] == "playbook_on_stats"]
print(json.dumps({"rc": r.rc, "status": r.status, "wall": wall,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0,
                  "artifacts": stats[-1]["event_data"].get("artifact_data") or {} if stats else {}}))
"""


def runner(workdir, name, playbook, inventory, extravars):
    pdd = os.path.join(workdir, "pdd-" + name)
    os.makedirs(pdd)
    env = {"ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"), "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".collections"),
           "ANSIBLE_NOCOLOR": "1", "PATH": os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ.get("PATH", "")}
    arg = json.dumps({"pdd": pdd, "root": ROOT, "playbook": os.path.join(ROOT, playbook), "inventory": inventory,
                      "extravars": extravars, "env": env})
    out = subprocess.run([PY, "-c", HELPER, arg], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    res["finished"] = time.monotonic()
    print(name, json.dumps(dict((k, v) for k, v in res.items() if k != "artifacts")), flush=True)
    return res


def report(path):
    with open(path) as fh:
        doc = json.load(fh)
    for key in ("generated_at", "run_id"):
        doc["summary"].pop(key)
    return doc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--slices", type=int, default=4)
    ap.add_argument("--no-write", action="store_true", help="print the figures, leave RESULTS.md alone")
    args = ap.parse_args()
    n, count = args.hosts, args.slices
    with tempfile.TemporaryDirectory() as d:
        inv = os.path.join(d, "fleet.json")
        nf = declared_inventory(inv, n, 0.6)
        with open(inv) as fh:
            fleet = json.load(fh)["all"]["hosts"]
        names = sorted(fleet)
        whole = runner(d, "unsliced", "playbooks/preflight.yml", inv,
                       {"dlrack_report_dir": os.path.join(d, "r-whole"), "preflight_print_summary": False})
        slices = []
        for k in range(1, count + 1):
            part = awx_sliced_hosts(names, k, count)
            sinv = os.path.join(d, "slice%d.json" % k)   # AWX's pared-down inventory: the slice's hosts only
            with open(sinv, "w") as fh:
                json.dump({"all": {"hosts": dict((h, fleet[h]) for h in part)}}, fh)
            slices.append(runner(d, "slice%d" % k, "playbooks/preflight.yml", sinv,
                                 {"dlrack_report_dir": os.path.join(d, "r%d" % k), "preflight_print_summary": False}))
        merge = runner(d, "merge", "playbooks/report_merge.yml", inv, {
            "dlrack_report_merge_inputs": [os.path.join(d, "r%d" % k, "report.json") for k in range(1, count + 1)],
            "dlrack_report_dir": os.path.join(d, "r-merged")})
        same_report = report(os.path.join(d, "r-merged", "report.json")) == report(os.path.join(d, "r-whole", "report.json"))
        merged = fleet_verdict(awx_effective_artifacts([s["artifacts"] for s in sorted(slices, key=lambda s: s["finished"])]))
        whole_failed = fleet_verdict(whole["artifacts"])["failed_hosts"]
        checks = {"merged report.json == unsliced": same_report,
                  "merge exit code == unsliced": merge["rc"] == whole["rc"],
                  "failing hosts from the merged artifacts == unsliced (%d)" % nf:
                      merged["failed_hosts"] == whole_failed and len(whole_failed) == nf}
    if not all(checks.values()):
        raise SystemExit("sliced run differs from the unsliced one: %s" % checks)
    lines = ["## Sliced pre-flight: %d declared hosts in %d slices vs one unsliced run" % (n, count), "",
             "Produced by `.venv/bin/python benchmarks/slices.py --hosts %d --slices %d` on %s, %d CPUs, %s; one "
             "ansible-runner run each, one after the other (AWX runs slices in parallel on several nodes; here the "
             "slices' figures are each slice's own). %d of %d hosts fail (60 %%, dlrack_fail_on=error). Peak memory: "
             "the largest resident set of one process of the run." % (
                 n, count, os.uname().nodename, os.cpu_count(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), nf, n),
             "", "| run | hosts | wall | peak RSS | exit code |", "|---|---|---|---|---|",
             "| unsliced | %d | %.1f s | %.0f MB | %d |" % (n, whole["wall"], whole["maxrss_mb"], whole["rc"])]
    for k, s in enumerate(slices, 1):
        lines.append("| slice %d of %d | %d | %.1f s | %.0f MB | %d |" % (
            k, count, len(awx_sliced_hosts(names, k, count)), s["wall"], s["maxrss_mb"], s["rc"]))
    lines.append("| report_merge of the %d slices | %d | %.1f s | %.0f MB | %d |" % (
        count, n, merge["wall"], merge["maxrss_mb"], merge["rc"]))
    lines += ["", "Checked in the same run: " + "; ".join("%s: %s" % kv for kv in checks.items()) + ".", ""]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        write_section("<!-- generated by benchmarks/slices.py -->", text)


if __name__ == "__main__":
    main()
