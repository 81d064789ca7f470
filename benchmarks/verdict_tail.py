"""The verdict's cost (issue 19.5): the tail of drift.yml / acceptance.yml before and after the
fail-once change, on N local hosts that all fail (the report action's result stood in by a
run_once set_fact; nothing else runs). Before: one failing task per host; after: the verdict kept
on the controller and one task on one host. Prints ansible-playbook's wall and CPU time for each.
  python benchmarks/verdict_tail.py [N]      (ANSIBLE_CONFIG / ANSIBLE_COLLECTIONS_PATH as for the tests)"""
import json
import os
import subprocess
import sys
import tempfile
import time

STANDIN = """---
- name: Report stand-in
  hosts: all
  gather_facts: false
  tasks:
    - name: The report action's result
      ansible.builtin.set_fact:
        __r: {failed_hosts: "{{ ansible_play_hosts_all }}", verdict_host: ["h0000"], verdict_msg: "drift failed for all"}
      run_once: true
"""
BEFORE = STANDIN + """    - name: Fail the hosts that drifted (drift.yml before 19.5)
      ansible.builtin.fail:
        msg: "{{ (inventory_hostname ~ ': could not be checked (status error); see drift.html') | dlrack.node.console_text }}"
      when: inventory_hostname in __r.failed_hosts
"""
AFTER = STANDIN + """    - name: Keep the verdict on the controller for the verdict play
      ansible.builtin.set_fact:
        __v_host: "{{ __r.verdict_host }}"
        __v_msg: "{{ __r.verdict_msg }}"
      run_once: true
      delegate_to: localhost
      delegate_facts: true
- name: Verdict
  hosts: "{{ hostvars['localhost'].__v_host | default([]) }}"
  gather_facts: false
  tasks:
    - name: Fail once
      ansible.builtin.fail:
        msg: "{{ hostvars['localhost'].__v_msg }}"
"""


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    work = tempfile.mkdtemp(prefix="dlrack-verdict-")   # left for a look at the playbooks
    inv = os.path.join(work, "inventory.json")
    with open(inv, "w") as f:
        json.dump({"all": {"hosts": {"h%04d" % i: {"ansible_connection": "local"} for i in range(n)}}}, f)
    for name, text in (("before", BEFORE), ("after", AFTER)):
        book = os.path.join(work, name + ".yml")
        with open(book, "w") as f:
            f.write(text)
        start, cpu = time.time(), os.times()
        proc = subprocess.run(["ansible-playbook", "-i", inv, book], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              check=False)
        end = os.times()
        print("%-6s %d hosts: exit %d, %.2f s wall, %.2f s CPU" % (
            name, n, proc.returncode, time.time() - start, (end.children_user - cpu.children_user) + (end.children_system - cpu.children_system)))


if __name__ == "__main__":
    main()
