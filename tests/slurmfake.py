"""A stand-in for slurmctld behind `scontrol show node -o` / `scontrol update`, for tests that
cannot run Slurm (molecule/scheduler runs the real one). It answers with lines of real
`scontrol show node -o` output of Slurm 22.05.8 (tests/data/slurm, README there) and applies updates
the way that slurmctld did in those captures: State=DRAIN adds the DRAIN flag and a
`Reason=... [root@time]`, State=RESUME removes both; a batch naming an unknown node is refused
("Invalid node name specified"), unknown names in `show` print "Node X not found".

As a program (tests that run ansible-playbook): `python3 slurmfake.py STATE.json ARGS...` keeps
the lines in STATE.json between calls; calls at the same time (node programs run by slurmd on every
node at once) take turns on STATE.json.lock, as slurmctld serialises its node table.
"""
import fcntl
import json
import re
import sys


class FakeSlurmctld(object):
    """Answers `scontrol show node -o` / `update` like slurmctld 22.05 did in the captures."""

    def __init__(self, text):
        self.lines = dict((n, line) for line in text.splitlines() if line.startswith("NodeName=")
                          for n in [line.split()[0][len("NodeName="):]])
        self.calls = []
        self.ticks = None   # set to an int: each update is stamped one second later than the last

    def stamp(self):
        """slurmctld's [user@time] for an update: 17:00:00, or one second later each (ticks)."""
        if self.ticks is None:
            return "2026-12-01T17:00:00"
        self.ticks += 1
        return "2026-12-01T17:%02d:%02d" % (self.ticks // 60 % 60, self.ticks % 60)

    def _expand(self, expr):
        out = []
        for m in re.finditer(r"([^,\[]+)(?:\[([^\]]+)\])?", expr):
            prefix, ranges = m.group(1), m.group(2)
            if not ranges:
                out.append(prefix)
                continue
            for part in ranges.split(","):
                lo, dummy, hi = part.partition("-")
                for i in range(int(lo), int(hi or lo) + 1):
                    out.append("%s%0*d" % (prefix, len(lo), i))
        return out

    def __call__(self, argv):
        self.calls.append(argv)
        if argv[1] == "show":
            out, err = [], []
            if len(argv) < 5:   # `scontrol show node -o`: every node
                return (0, "\n".join(self.lines[n] for n in sorted(self.lines)) + "\n", "")
            for name in self._expand(argv[4]):
                (out if name in self.lines else err).append(self.lines.get(name) or "Node %s not found" % name)
            return (1 if err else 0, "\n".join(out) + "\n", "\n".join(err))
        names = self._expand(argv[2][len("NodeName="):])
        if any(n not in self.lines for n in names):
            return (1, "", "slurm_update error: Invalid node name specified")
        state = argv[3][len("State="):]
        for n in names:
            line = re.sub(r" Reason=.*$", "", self.lines[n])
            base = re.search(r"State=([^ ]*)", line).group(1).split("+")
            flags = [f for f in base[1:] if f != "DRAIN"]
            if state == "DRAIN":
                new = "+".join([base[0], "DRAIN"] + flags)
                line = line.replace("State=" + "+".join(base), "State=" + new) + " Reason=%s [root@%s]" % (argv[4][7:], self.stamp())
            else:
                line = line.replace("State=" + "+".join(base), "State=" + "+".join([base[0]] + flags))
            self.lines[n] = line
        return (0, "", "")


def main(argv):
    state = argv[1]
    with open(state + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(state) as f:
            fake = FakeSlurmctld("")
            fake.lines = json.load(f)
        rc, out, err = fake(["scontrol"] + argv[2:])
        if argv[2:3] == ["update"]:
            with open(state, "w") as f:
                json.dump(fake.lines, f)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
