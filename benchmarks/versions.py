"""What the fleet version comparison (issue 33, plugin_utils/versions.py) adds to the pre-flight.

N declared hosts (benchmarks/fleet.py's declared_inventory: rack_a's HGX H200 node and gpu-b01, 60 %
failing) once without ``versions`` and once with a ``versions`` section on every host (the real
H200's driver 580.159.04, CUDA 13.0, VBIOS 96.00.A5.00.1A; every tenth host on driver 570.124.04 of
a real RTX 3060 capture: tests/data/real/versions, nvidia-smi-q-xml), interleaved, best of --reps:
  in-process  - plugin_utils/preflight.run_preflight with the reports written (the action's work)
  playbook    - playbooks/preflight.yml through ansible-playbook (fleet.py's timed_playbook), with
                --playbook
Goal (issue 33.4): at 10,000 hosts the comparison adds under 10 % to the pre-flight's time.
Usage: .venv/bin/python benchmarks/versions.py [--hosts 10000] [--reps 3] [--playbook]
"""
import argparse
import copy
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, ".collections"))

import fleet  # noqa: E402  (benchmarks/fleet.py: the declared fleet and the timed playbook)

from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu.stack import parse_smi_versions  # noqa: E402
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, run_preflight  # noqa: E402

REAL = os.path.join(ROOT, "tests", "data", "real")


def _smi(*path):
    with open(os.path.join(REAL, *path)) as fh:
        return parse_smi_versions(fh.read())


def stacks():
    """(the class's versions, the minority's): real strings from the captures."""
    new, old = _smi("versions", "h200-nvidia-smi-q-x.xml"), _smi("nvidia-smi-q-xml", "telegraf-rtx-3060-v12.xml")

    def ver(smi):
        return {"gpu_driver": smi["driver"], "cuda_driver": smi["cuda_driver"], "kernel": "5.15.0-105-generic",
                "gpus": [dict(new["gpus"][0], driver=smi["driver"]) for dummy in range(8)]}
    return ver(new), ver(old)


def inventories(workdir, n):
    """(plain inventory, the same with versions, the same with the versions as notes) as fleet.py
    writes it. In ``notes`` (dlrack_hw.notes: free data, validated and carried, never compared) the
    same data goes through Ansible and the reading, and no comparison runs: versions - notes is what
    the comparison costs, notes - plain what carrying the data costs."""
    plain = os.path.join(workdir, "plain.json")
    nf = fleet.declared_inventory(plain, n, 0.6)
    with open(plain) as fh:
        inv = json.load(fh)
    new, old = stacks()
    plain_hw = dict((name, hv["dlrack_hw"]) for name, hv in inv["all"]["hosts"].items())
    paths = [plain]
    for kind in ("versions", "notes"):
        for i, (name, hv) in enumerate(sorted(inv["all"]["hosts"].items())):
            ver = old if i % 10 == 0 else new
            hv["dlrack_hw"] = dict(plain_hw[name], **({"versions": ver} if kind == "versions" else {"notes": {"versions": ver}}))
        paths.append(os.path.join(workdir, kind + ".json"))
        with open(paths[-1], "w") as fh:
            json.dump(inv, fh)
    return paths[0], paths[1], paths[2], nf


def in_process(path, report_dir):
    with open(path) as fh:
        hosts = json.load(fh)["all"]["hosts"]
    inputs = dict((h, collect_host_inputs(h, copy.deepcopy(v))) for h, v in hosts.items())
    t0 = time.process_time()
    out = run_preflight(inputs, report_dir=report_dir)
    return time.process_time() - t0, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--playbook", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        plain, withv, notes, nf = inventories(d, args.hosts)
        cases = (("plain", plain), ("notes", notes), ("versions", withv))
        times = {"plain": [], "versions": [], "notes": []}
        in_process(withv, os.path.join(d, "warm-up"))
        for dummy in range(args.reps):
            for key, path in cases:
                cpu, out = in_process(path, os.path.join(d, "r-" + key))
                times[key].append(cpu)
                if key == "versions" and not out["summary"].get("versions"):
                    raise SystemExit("no version matrix")
        rows.append(("run_preflight (in-process, CPU)", min(times["plain"]), min(times["notes"]), min(times["versions"])))
        print(rows[-1], flush=True)
        if args.playbook:
            walls = {"plain": [], "versions": [], "notes": []}
            for dummy in range(args.reps):
                for key, path in cases:
                    wall, cpu, rc, out = fleet.timed_playbook(
                        os.path.join(ROOT, "playbooks", "preflight.yml"), path,
                        ["-e", "dlrack_report_dir=" + os.path.join(d, "p-" + key), "-e", "preflight_print_summary=false"])
                    if rc == 0:
                        raise SystemExit("preflight.yml passed a fleet with %d failing hosts:\n%s" % (nf, out[-2000:]))
                    with open(os.path.join(d, "p-" + key, "report.json")) as fh:
                        doc = json.load(fh)
                    named = sum(1 for h in doc["hosts"].values() for f in h["findings"] if f["rule"] == "fleet.version_drift")
                    if (key == "versions") != bool(doc["summary"].get("versions") and named):
                        raise SystemExit("%s: the version matrix or the outlier findings are not as expected" % key)
                    walls[key].append(cpu)
            rows.append(("preflight.yml (ansible-playbook and workers, CPU)", min(walls["plain"]), min(walls["notes"]),
                         min(walls["versions"])))
            print(rows[-1], flush=True)
    lines = ["## Fleet version comparison (issue 33): %d declared hosts" % args.hosts, "",
             "Produced by `.venv/bin/python benchmarks/versions.py --hosts %d --reps %d%s` on %s, %d CPUs, %s; best of %d, "
             "interleaved. The same fleet (fleet.py's declared hosts, 60 %% failing) without and with a `versions` "
             "section on every host (real strings; every tenth host on another driver, so the comparison names "
             "outliers and the reports carry the matrix)." % (
                 args.hosts, args.reps, " --playbook" if args.playbook else "", os.uname().nodename, os.cpu_count(),
                 time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), args.reps), "",
             "| what | without versions | the data as notes (no comparison) | with versions | comparison: versions vs notes "
             "(goal < 10 %) | the data: notes vs without |", "|---|---|---|---|---|---|"]
    for what, base, note, ver in rows:
        lines.append("| %s | %.2f s | %.2f s | %.2f s | %+.1f %% | %+.1f %% |" % (
            what, base, note, ver, 100.0 * (ver - note) / note, 100.0 * (note - base) / base))
    lines += ["", "The comparison (plugin_utils/versions.py: the classes, pins and majorities, the outliers' findings, the "
              "matrix in the four reports, the node rule) is the versions - notes column. What costs is the data itself: "
              "eight GPU entries of versions per host in the inventory make Ansible read, tag and copy that much more per "
              "host, whether the pre-flight compares it or not (the notes column)."]
    text = "\n".join(lines) + "\n\n"
    print(text)
    fleet.write_section("<!-- generated by benchmarks/versions.py -->", text)


if __name__ == "__main__":
    main()
