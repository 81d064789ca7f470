"""Node state of the Slurm container after the scheduler converge, checked the way a person would by
hand on it (pytest-testinfra over `podman exec`, no Ansible): munge, slurmctld and slurmd running,
`scontrol show node` as one reads it (slurm01 drained with dlrack's reason and this run's id, the
operator's DOWN ghost01 untouched, no other node drained), the health check the role's health_check
entry point installed (owner, mode, its configuration, the accepted state, the collection code it
runs) and slurmctld running it as HealthCheckProgram, and the health check judging the node by hand.
verify.yml runs this right after converge, before its own cases change the cluster:

    DLRACK_SCHED_RUN_ID=RUN_ID python -m pytest -p no:cacheprovider --hosts=podman://CONTAINER molecule/scheduler/tests/test_node.py

RUN_ID is the run id of the pre-flight report converge applied (fleets/fail-slurm01.yml). The node is
read in ONE `podman exec` (~0.7 s here); the tests parse its sections. The Ansible-side checks
(idempotence, check mode in prepare.yml, the role's results for the resume, DOWN, operator's drain
and cap cases, the health check's drain and resume under slurmd) stay in verify.yml.
"""
import hashlib
import json
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BIN = "/usr/local/sbin/dlrack-health-check"
CONFIG = "/etc/dlrack/health-check.json"
ACCEPTED = "/var/lib/dlrack/health-accepted.json"
MODULE_UTILS = "/usr/local/lib/dlrack/python/ansible_collections/dlrack/node/plugins/module_utils"
# roles/scheduler/vars/main.yml: the collection files dlrack-health-check imports
CODE = ["hw/hostfs.py", "programs/health_check.py", "scheduler/hostlist.py", "scheduler/modes.py", "scheduler/node_guard.py",
        "scheduler/slurm.py", "system/command.py"]
# path -> (type, owner, group, mode) as `stat -c '%F %U %G %a'` prints them
INSTALLED = {
    "/etc/dlrack": ("directory", "root", "root", "755"),
    "/var/lib/dlrack": ("directory", "root", "root", "755"),
    "/var/log/dlrack": ("directory", "root", "root", "750"),
    BIN: ("regular file", "root", "root", "755"),
    CONFIG: ("regular file", "root", "root", "644"),
}
INSTALLED.update((MODULE_UTILS + "/" + path, ("regular file", "root", "root", "644")) for path in CODE)


@pytest.fixture(scope="module")
def node(host, read_sections):
    return read_sections(host, [
        ("active", "systemctl is-active munge slurmctld slurmd slurmd@n01 slurmd@n02 slurmd@n03 slurmd@n04"),
        ("slurm01", "scontrol show node slurm01"),
        ("nodes", "scontrol show node -o"),
        ("config", "scontrol show config | grep ^HealthCheck"),
        ("stat", "stat -c '%%n|%%F|%%U|%%G|%%a' %s" % " ".join(sorted(INSTALLED))),
        ("sha256", "sha256sum " + " ".join(MODULE_UTILS + "/" + p for p in CODE)),
        ("bin", "head -n 12 " + BIN),
        ("conf", "cat " + CONFIG),
        ("accepted", "cat " + ACCEPTED),
        ("dry-run", "%s --dry-run --json; echo rc=$?" % BIN),
    ])


def show_node(lines):
    """`scontrol show node` as one reads it: KEY=VALUE words; Reason= (the last field) runs to the end of its line."""
    props = {}
    for line in lines:
        line = " " + line.strip()
        if " Reason=" in line:
            line, props["Reason"] = line.split(" Reason=", 1)
        for word in line.split():
            if "=" in word:
                key, value = word.split("=", 1)
                props[key] = value
    return props


def test_munge_slurmctld_and_slurmd_run(node):
    assert node[0]["active"] == ["active"] * 7, node[1]


def test_slurm01_is_drained_with_dlracks_reason_and_this_runs_id(node):
    props = show_node(node[0]["slurm01"])
    run_id = os.environ["DLRACK_SCHED_RUN_ID"]
    assert run_id, "DLRACK_SCHED_RUN_ID is empty"
    assert props["State"] == "IDLE+DRAIN", props
    # slurmd's own health check ran meanwhile (every 5 s) and left a dlrack run's drain alone
    assert props["Reason"].startswith("dlrack: memory.exceeds_vram %s [" % run_id), props["Reason"]


def test_only_slurm01_is_drained_and_the_operators_down_is_kept(node):
    by_name = dict((props["NodeName"], props) for props in map(show_node, ([line] for line in node[0]["nodes"])))
    drained = sorted(name for name, props in by_name.items() if "DRAIN" in props["State"])
    assert drained == ["slurm01"], dict((name, props["State"]) for name, props in by_name.items())
    assert by_name["ghost01"]["State"].startswith("DOWN"), by_name["ghost01"]
    assert by_name["ghost01"]["Reason"].startswith("cable ["), by_name["ghost01"]


def test_slurmctld_runs_the_health_check(node):
    config = dict((line.split("=", 1)[0].strip(), line.split("=", 1)[1].strip()) for line in node[0]["config"])
    assert config["HealthCheckProgram"] == BIN, config
    assert config["HealthCheckInterval"] == "5 sec" and config["HealthCheckNodeState"] == "ANY", config


def test_health_check_files_owner_and_mode(node, stat_lines):
    got = stat_lines(node[0]["stat"])
    assert got == INSTALLED, node[1]


def test_health_check_code_is_the_collections(node):
    want = {}
    for path in CODE:
        with open(os.path.join(ROOT, "plugins", "module_utils", path), "rb") as handle:
            want[MODULE_UTILS + "/" + path] = hashlib.sha256(handle.read()).hexdigest()
    got = dict(reversed(line.split(None, 1)) for line in node[0]["sha256"])
    assert got == want, node[1]
    lines = node[0]["bin"]
    assert lines[0] == "#!/usr/bin/python3 -IS" and 'sys.path.insert(0, "/usr/local/lib/dlrack/python")' in lines, lines


def test_health_check_configuration(node):
    assert json.loads("\n".join(node[0]["conf"])) == {
        "node": "slurm01", "state_file": ACCEPTED,
        "textfile": "/var/lib/node_exporter/textfile_collector/dlrack_ecc.prom", "textfile_max_age_s": 3600,
        "hot_mount": "", "scontrol": "scontrol", "timeout_s": 10, "rule_modes": {}, "rule_modes_groups": {},
        "fail_runs": 2, "fault_persist_s": 900, "pass_runs": 2, "service_drains": 3, "service_window_s": 604800,
        "cap_max_nodes": 2, "cap_max_percent": 100.0, "partitions": [],
        "history_file": "/var/lib/dlrack/health-history-{node}.json", "audit_log": "/var/log/dlrack/health-check-{node}.jsonl",
        "metrics_textfile": "/var/lib/dlrack/metrics-{node}.prom", "return_validation": True, "return_copy": True}


def test_accepted_state_records_no_gpu(node):
    # the first install ran --accept: the container's GPUs (none) are the accepted state
    doc = json.loads("\n".join(node[0]["accepted"]))
    # (scheduler_health_check_no_gpu: without it, accepting no visible GPU is refused)
    assert doc["schema"] == 1 and doc["gpus"] == [] and doc["no_gpu"] is True and doc["accepted_at"] > 1700000000, doc


def test_health_check_by_hand_finds_the_node_healthy(node):
    lines = node[0]["dry-run"]
    assert lines[-1] == "rc=0", lines
    verdict = json.loads(lines[0])
    # no GPU accepted, no uncorrected ECC count (no textfile yet: unknown, not failing), no hot tier configured
    assert verdict["rules"] == [] and verdict["action"] is None, verdict
