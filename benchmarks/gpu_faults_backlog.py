"""GPU fault judgement with a 100,000-line kernel log backlog (issue 29): the health check's GPU-fault
call (gpu_faults.cli.check: read after the saved cursor/offset, judge with the saved state) against the
plain alternative, reading and judging the whole log every time. Both on a journal file written by
systemd-journal-remote (read with journalctl --file) and on a /dev/kmsg stand-in file; nothing touches
this machine's own logs. The backlog cycles through real kernel log lines (tests/data/real/xid/), 1 in
1000 an Xid. Prints the median, min and max of RUNS runs of each, in milliseconds.
  python benchmarks/gpu_faults_backlog.py [LINES] [RUNS]     (PYTHONPATH as for the tests: .collections)"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, os.path.join(HERE, "..", ".collections"))

import journalfile  # noqa: E402  (tests/journalfile.py)
from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.cli import check  # noqa: E402

XID = os.path.join(HERE, "..", "tests", "data", "real", "xid")


def real_lines():
    noise, faults = [], []
    for name in sorted(os.listdir(XID)):
        if not name.endswith((".txt", ".log")) or name.startswith("h200-vm-nvml") or name.endswith(".csv"):
            continue
        with open(os.path.join(XID, name), "rb") as handle:
            for raw in handle.read().decode("utf-8", "replace").splitlines():
                text = raw.split(";", 1)[1] if name.endswith("kmsg-records.txt") else raw
                (faults if ("Xid" in text or "SXid" in text) else noise).append(text)
    return noise, faults


def backlog(n):
    noise, faults = real_lines()
    return [faults[i // 1000 % len(faults)] if i % 1000 == 999 else noise[i % len(noise)] for i in range(n)]


def timed(fn, runs):
    out = []
    for dummy in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return statistics.median(out), min(out), max(out)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    lines = backlog(n)
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        kmsg = os.path.join(tmp, "kmsg")
        with open(kmsg, "w") as handle:
            for i, text in enumerate(lines):
                handle.write("4,%d,%d,-;%s\n" % (i, 1000000 + i * 1000, text))
        state = os.path.join(tmp, "kmsg-state.json")
        conf = {"source": "kmsg", "kmsg": kmsg, "state_file": state}
        check(conf, boot="bench", btime=0)                      # the first run reads the backlog once
        rows.append(("kmsg stand-in, saved seq + offset (health check)", timed(lambda: check(conf, boot="bench", btime=0), runs)))
        whole = dict(conf, state_file=os.path.join(tmp, "none.json"))
        rows.append(("kmsg stand-in, whole log each time", timed(lambda: check(whole, boot="bench", btime=0, dry_run=True), runs)))
        if journalfile.available():
            t0 = time.time()
            jf = journalfile.write_journal(os.path.join(tmp, "kernel.journal"), lines)
            sys.stderr.write("journal file of %d entries written in %.1f s (%d bytes)\n" % (n, time.time() - t0, os.path.getsize(jf)))
            jconf = {"source": "journal", "journal_file": jf, "state_file": os.path.join(tmp, "journal-state.json")}
            check(jconf, boot="bench")
            rows.append(("journal file, saved cursor (health check)", timed(lambda: check(jconf, boot="bench"), runs)))
            jwhole = dict(jconf, state_file=os.path.join(tmp, "none2.json"))
            rows.append(("journal file, whole log each time", timed(lambda: check(jwhole, boot="bench", dry_run=True), runs)))
            raw = ["journalctl", "--file", jf, "-o", "json", "--no-pager", "-q"]
            rows.append(("journalctl --file -o json alone, whole log",
                         timed(lambda: subprocess.run(raw, check=True, stdout=subprocess.DEVNULL), runs)))
        else:
            sys.stderr.write("systemd-journal-remote not installed: journal rows skipped\n")
    print("%d-line backlog, %d runs each (ms)" % (n, runs))
    print("| read | median | min | max |")
    print("|---|---|---|---|")
    for name, (med, lo, hi) in rows:
        print("| %s | %.1f | %.1f | %.1f |" % (name, med, lo, hi))


if __name__ == "__main__":
    main()
