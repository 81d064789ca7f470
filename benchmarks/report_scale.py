"""report.html at fleet scale (issue 20.9): the size of report.{html,json,xml} and the time headless
Chromium takes to open report.html, for N declared hosts built as benchmarks/fleet.py builds them
(rack_a's HGX H200 node passes, gpu-b01 fails; --fail 0.6 = 60 % failing; --distinct gives every
host its own declaration, so no two hosts share an evaluation or a report section).

The reports are written by the same call the preflight_report action makes (run_preflight), without
ansible-playbook around it (fleet.py times the playbook). Open time: Chromium (the Debian package)
loads the page headless and a script appended to it records, at the load event and after forcing
style and layout of the whole page, performance.now() - i.e. from navigation start to a parsed and
laid-out page; the wall time of the whole chromium command is given too (it includes starting the
browser: a blank page's wall time is measured alongside for reference). Best of --reps.
Usage: .venv/bin/python benchmarks/report_scale.py [--hosts 10000] [--fail 0.6] [--distinct] [--reps 3]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, ".collections"))

# At the load event the script forces style and layout of the whole page (reading offsetHeight)
# and takes performance.now(): parsed, styled and laid out. (Waiting for animation frames as well
# was not reliable: under --virtual-time-budget on a loaded machine they sometimes never came.)
PROBE = ("<script>addEventListener('load',function(){var h=document.body.offsetHeight;"
         "var p=document.createElement('pre');p.id='probe';p.textContent=JSON.stringify({ms:performance.now(),h:h,"
         "rows:document.querySelectorAll('tr').length,nodes:document.getElementsByTagName('*').length});"
         "document.body.appendChild(p);});</script>")


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def open_time(path, profile, width=1366, height=768):
    """(in-page ms to a painted page, wall s of the chromium command, rows, DOM elements)."""
    probed = path + ".probed.html"
    with open(path, encoding="utf-8") as fh, open(probed, "w", encoding="utf-8") as out:
        out.write(fh.read().replace("</body>", PROBE + "</body>"))
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--disable-dev-shm-usage", "--user-data-dir=" + profile, "--window-size=%d,%d" % (width, height),
            "--virtual-time-budget=60000", "--dump-dom", "file://" + probed]
    for dummy in range(3):   # on a loaded machine headless Chromium now and then exits before the probe ran
        t0 = time.monotonic()
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300, check=False)
        wall = time.monotonic() - t0
        dom = proc.stdout.decode("utf-8", errors="replace")
        if '<pre id="probe">' in dom:
            break
    else:
        raise SystemExit("chromium did not finish the page %s (rc %d): %s" % (path, proc.returncode, dom[-500:]))
    got = json.loads(dom.split('<pre id="probe">', 1)[1].split("</pre>", 1)[0].replace("&quot;", '"'))
    os.unlink(probed)
    return got["ms"], wall, got["rows"], got["nodes"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--fail", type=float, default=0.6)
    ap.add_argument("--distinct", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--keep", help="copy the reports to this directory")
    args = ap.parse_args()
    from fleet import declared_inventory
    from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, run_preflight
    with tempfile.TemporaryDirectory() as d:
        inv = os.path.join(d, "inv.json")
        nf = declared_inventory(inv, args.hosts, args.fail, args.distinct)
        with open(inv) as fh:
            hosts = json.load(fh)["all"]["hosts"]
        inputs = {h: collect_host_inputs(h, v) for h, v in hosts.items()}
        t0 = time.monotonic()
        out = run_preflight(inputs, report_dir=os.path.join(d, "r"), fail_on="never")
        write_s = time.monotonic() - t0
        paths = out["report_paths"]
        sizes = {k: os.path.getsize(p) for k, p in paths.items()}
        blank = os.path.join(d, "blank.html")
        with open(blank, "w") as fh:
            fh.write("<!DOCTYPE html><html><body></body></html>")
        runs, blanks = [], []
        for i in range(args.reps):
            blanks.append(open_time(blank, os.path.join(d, "p%d" % i)))
            runs.append(open_time(paths["html"], os.path.join(d, "q%d" % i)))
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            for p in paths.values():
                shutil.copy(p, args.keep)
    best = min(runs)
    res = {"hosts": args.hosts, "failing": nf, "distinct": args.distinct, "evaluate_and_write_s": round(write_s, 2),
           "html_mb": round(sizes["html"] / 1e6, 2), "json_mb": round(sizes["json"] / 1e6, 2),
           "xml_mb": round(sizes["xml"] / 1e6, 2), "open_ms": round(best[0]), "open_wall_s": round(min(r[1] for r in runs), 2),
           "blank_wall_s": round(min(b[1] for b in blanks), 2), "table_rows": best[2], "dom_elements": best[3]}
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
