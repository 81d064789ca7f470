"""molecule/plugins/connection/podman.py (the molecule scenarios' pipelined podman connection)
against a throwaway container of the scenarios' image, beside the stock containers.podman.podman.

One playbook runs through each connection, with podman replaced by a wrapper that logs every
invocation (the connections' podman_executable option). Between the tasks a `raw` marker is one
`podman exec ... echo MARK-<task>`, so the log says what each task cost. Checked: the pipelined
connection runs every module with exactly one `podman exec` (with and without become, as
ansible_user dlrack with sudo like molecule/site, in check mode, and for the modules that transfer
files: copy, template, fetch, the collection's node_code), never `podman cp`/`mount`; and every
task's result equals the stock connection's. Needs root, podman and the image (make test-deps).
"""
import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest

from testpaths import COLLECTIONS, ROOT, needs_checkout

IMAGE = "localhost/dlrack-systemd:bookworm"
PLUGIN_DIR = os.path.join(ROOT, "molecule", "plugins", "connection")
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
STOCK = "containers.podman.podman"
PIPELINED = "podman"   # the name molecule's podman driver writes; resolved from PLUGIN_DIR first


def _have_image():
    if os.geteuid() != 0 or shutil.which("podman") is None or not os.path.exists(PLAYBOOK_BIN):
        return False
    return subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode == 0


pytestmark = [needs_checkout(".venv's ansible-playbook drives a podman container"),
              pytest.mark.skipif(not _have_image(), reason="needs root, podman, ansible-playbook and %s (make test-deps)" % IMAGE)]

PLAY = """
- hosts: all
  gather_facts: false
  vars:
    work: /tmp/dlrack-conn
  tasks:
    - {name: ping, ansible.builtin.ping: {}, register: r_ping}
    - {name: command, ansible.builtin.command: {argv: [id, -un]}, register: r_command, changed_when: false}
    - {name: become_command, ansible.builtin.command: {argv: [id, -un]}, become: true, register: r_become_command, changed_when: false}
    - {name: become_dir, ansible.builtin.file: {path: "{{ work }}", state: directory, owner: dlrack, mode: "0755"}, become: true, register: r_become_dir}
    - {name: copy, ansible.builtin.copy: {src: "{{ playbook_dir }}/payload.bin", dest: "{{ work }}/payload.bin", mode: "0644"}, register: r_copy}
    - {name: copy_again, ansible.builtin.copy: {src: "{{ playbook_dir }}/payload.bin", dest: "{{ work }}/payload.bin", mode: "0644"}, register: r_copy_again}
    - {name: become_template, ansible.builtin.template: {src: "{{ playbook_dir }}/t.j2", dest: /etc/dlrack-conn.conf, mode: "0644"},
        become: true, register: r_become_template}
    - {name: check_template, ansible.builtin.template: {src: "{{ playbook_dir }}/t.j2", dest: "{{ work }}/new.conf", mode: "0644"},
        check_mode: true, register: r_check_template}
    - {name: fetch, ansible.builtin.fetch: {src: "{{ work }}/payload.bin", dest: "{{ playbook_dir }}/fetched/", flat: true}, register: r_fetch}
    - {name: become_fetch, ansible.builtin.fetch: {src: /etc/dlrack-conn.conf, dest: "{{ playbook_dir }}/fetched/", flat: true},
        become: true, register: r_become_fetch}
    - {name: become_check_node_code, dlrack.node.node_code: {files: [hw/cpulist.py], lib_dir: /opt/dlrack-conn},
        become: true, check_mode: true, register: r_become_check_node_code}
    - {name: become_node_code, dlrack.node.node_code: {files: [hw/cpulist.py], lib_dir: /opt/dlrack-conn}, become: true, register: r_become_node_code}
"""

# What each task costs through the pipelined connection, all `podman exec`: (module runs, podman
# invocations). A module run is one `exec --interactive ... python3` (become: the same, through
# sudo); the rest is Ansible's own remote-tmp handling for an action that transfers a file (echo ~,
# mkdir, chmod u+rwx after the transfer, rm) and the transfer itself (put/fetch_file: one exec).
EXPECTED = {
    "ping": (1, 1), "command": (1, 1), "become_command": (1, 1), "become_dir": (1, 1),
    "copy": (2, 7),                 # stat, copy; + echo ~, mkdir, put_file, chmod, rm
    "copy_again": (2, 5),           # stat, file (unchanged: nothing sent); + echo ~, mkdir, rm
    "become_template": (2, 7),      # as copy
    "check_template": (1, 4),       # stat only: check mode sends nothing
    "fetch": (1, 2),                # stat; + fetch_file
    "become_fetch": (1, 1),         # become: slurp reads the file
    "become_check_node_code": (1, 1), "become_node_code": (1, 1),
}

VOLATILE = ("start", "end", "delta", "invocation", "checksum_src", "src", "diff", "_ansible_no_log")


def _wrapper(tmp_path):
    log = tmp_path / "podman.log"
    wrapper = tmp_path / "podman-wrapper"
    wrapper.write_text("#!/bin/sh\nprintf '%%s\\n' \"$*\" >> %s\nexec %s \"$@\"\n" % (log, shutil.which("podman")))
    wrapper.chmod(0o755)
    return wrapper, log


def _play(marks):
    """PLAY (with a raw marker task before each task and one at the end, if marks), then a task
    writing every task's registered result to results.json on the controller."""
    lines = []
    for line in PLAY.strip("\n").splitlines():
        if marks and line.startswith("    - {name: "):
            name = line.split("name: ", 1)[1].split(",", 1)[0]
            lines.append("    - {name: mark %s, ansible.builtin.raw: echo MARK-%s, changed_when: false}" % (name, name))
        lines.append(line)
    if marks:
        lines.append("    - {name: mark end, ansible.builtin.raw: echo MARK-end, changed_when: false}")
    names = list(EXPECTED)
    lines.append("    - name: results")
    lines.append("      ansible.builtin.copy:")
    lines.append("        dest: \"{{ playbook_dir }}/results.json\"")
    lines.append("        content: \"{{ {%s} | to_json }}\"" % ", ".join("'%s': r_%s" % (n, n) for n in names))
    lines.append("        mode: \"0644\"")
    lines.append("      delegate_to: localhost")
    return "\n".join(lines) + "\n"


def _per_task(log_text):
    """{task: [podman argv strings]} from the wrapper's log, split at the MARK-<task> lines."""
    costs, current = {}, None
    for line in log_text.splitlines():
        marker = [w for w in line.split() if w.startswith("MARK-")]
        if marker:
            current = marker[0][len("MARK-"):]
            costs[current] = []
        elif current is not None:
            costs[current].append(line)
    costs.pop("end", None)
    return costs


def _normal(result):
    if isinstance(result, dict):
        return {k: _normal(v) for k, v in result.items() if k not in VOLATILE}
    if isinstance(result, list):
        return [_normal(v) for v in result]
    return result


@pytest.fixture(scope="module")
def container():
    name = "dlrack-conn-test-%s" % uuid.uuid4().hex[:8]
    subprocess.run(["podman", "run", "-d", "--rm", "--name", name, "--entrypoint", "sleep", IMAGE, "infinity"],
                   check=True, stdout=subprocess.DEVNULL)
    try:
        yield name
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _run(tmp_path, container, connection):
    tmp_path.mkdir()
    (tmp_path / "payload.bin").write_bytes(bytes(range(256)) * 64 + b"\x00end")
    (tmp_path / "t.j2").write_text("host={{ inventory_hostname }}\nuser={{ ansible_user }}\n")
    # the stock connection's run needs no markers (only its results and its total count)
    (tmp_path / "play.yml").write_text(_play(marks=connection == PIPELINED))
    wrapper, log = _wrapper(tmp_path)
    # pipelining as every molecule.yml sets it (molecule writes it into the scenario's ansible.cfg)
    (tmp_path / "ansible.cfg").write_text("[defaults]\ninterpreter_python = /usr/bin/python3\n[ssh_connection]\npipelining = True\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONNECTION_PLUGINS=PLUGIN_DIR, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
               ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0")
    cmd = [PLAYBOOK_BIN, "-i", "%s," % container, "-c", connection, "-e", "ansible_user=dlrack",
           "-e", "ansible_podman_executable=%s" % wrapper, str(tmp_path / "play.yml")]
    proc = subprocess.run(cmd, cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    assert proc.returncode == 0, proc.stdout.decode()[-4000:]
    fetched = {p.name: p.read_bytes() for p in (tmp_path / "fetched").iterdir()}
    # the results name the run's own folder (fetch's dest): the same RUN in both
    results = json.loads((tmp_path / "results.json").read_text().replace(str(tmp_path), "RUN"))
    return log.read_text(), results, fetched


@pytest.fixture(scope="module")
def runs(container, tmp_path_factory):
    base = tmp_path_factory.mktemp("conn")
    out = {}
    for connection in (STOCK, PIPELINED):
        subprocess.run(["podman", "exec", container, "rm", "-rf", "/tmp/dlrack-conn", "/etc/dlrack-conn.conf", "/opt/dlrack-conn"], check=True)
        out[connection] = _run(base / connection.replace(".", "_"), container, connection)
    return out


def test_one_podman_exec_per_module(runs):
    costs = _per_task(runs[PIPELINED][0])
    assert sorted(costs) == sorted(EXPECTED)
    for task, calls in costs.items():
        assert all(c.startswith("exec ") for c in calls), (task, calls)
        # the module arrives on stdin: no AnsiballZ file is ever written into the container
        # (sudo ... 'echo BECOME-SUCCESS-x ; /usr/bin/python3' with become)
        modules = [c for c in calls if c.endswith(" /bin/sh -c /usr/bin/python3 && sleep 0") or c.endswith("; /usr/bin/python3' && sleep 0")]
        assert all(c.startswith("exec --interactive --user dlrack ") for c in modules), (task, modules)
        assert (len(modules), len(calls)) == EXPECTED[task], (task, calls)
        assert not any("AnsiballZ" in c for c in calls), (task, calls)


def test_stock_connection_costs_more(runs):
    stock = runs[STOCK][0].splitlines()
    pipelined = [c for c in runs[PIPELINED][0].splitlines() if "MARK-" not in c]
    assert len(pipelined) == sum(total for dummy, total in EXPECTED.values())
    # the stock connection: a `podman mount` per task and ~7 invocations per module (cp, chown...)
    assert len(stock) > 3 * len(pipelined), (len(stock), len(pipelined))
    assert any(c.startswith("cp ") for c in stock) and any(c.startswith("mount ") for c in stock)


def test_results_equal_the_stock_connections(runs, container):
    stock, pipelined = runs[STOCK], runs[PIPELINED]
    assert _normal(pipelined[1]) == _normal(stock[1])
    assert pipelined[1]["command"]["stdout"] == "dlrack"
    assert pipelined[1]["become_command"]["stdout"] == "root"
    assert pipelined[1]["copy"]["changed"] and not pipelined[1]["copy_again"]["changed"]
    assert pipelined[1]["check_template"]["changed"]
    assert pipelined[2] == stock[2]
    assert pipelined[2]["payload.bin"] == bytes(range(256)) * 64 + b"\x00end"
    assert pipelined[2]["dlrack-conn.conf"] == ("host=%s\nuser=dlrack\n" % container).encode()
