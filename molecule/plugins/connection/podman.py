# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only connection plugin: containers.podman.podman with pipelining, for the molecule scenarios.

Why it exists: the stock containers.podman.podman connection (v1.18) sets ``has_pipelining = False``
because its exec_command runs ``podman exec`` without ``--interactive``, so a module cannot arrive
on stdin. Every module run then costs 4-5 podman invocations (mkdir of the remote tmp, ``podman cp``
of the module, + ``podman exec chown`` when ansible_user is set as in molecule/site, chmod, the
python run with its rm), plus a ``podman mount`` for every task, and one invocation costs ~0.7 s
wall on the 2-core CI machine: the container scenarios spent most of their time there.

What it changes, nothing else:
- ``has_pipelining = True`` and ``podman exec --interactive`` when there is stdin data, so Ansible's
  pipelining (``pipelining: true`` in every molecule.yml) sends the module on stdin: one
  ``podman exec`` per module, with or without become (sudo as molecule/site does).
- no ``podman mount`` on connect; put_file/fetch_file are one ``podman exec`` each (``cat`` in or
  out, as ansible_user, the way scp does it), instead of mount/``podman cp``/chown.

It is not part of the collection (it lives under molecule/, not plugins/) and real fleets never see
it: they connect over ssh, with pipelining as ansible.cfg sets. It is named ``podman`` because the
molecule podman driver writes ``ansible_connection: podman`` into every container scenario's
inventory; molecule/base.yml puts this directory on ANSIBLE_CONNECTION_PLUGINS, and Ansible resolves
an unqualified name from those directories before the builtin redirect to containers.podman.podman.
storage_vm (ssh to a QEMU guest) and testinfra's ``podman://`` backend do not use it.
tests/unit/molecule/test_podman_connection.py checks it against a throwaway container.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = """
    author: dlrack.node contributors (@dlrack)
    name: podman
    short_description: containers.podman.podman with pipelining (molecule scenarios only)
    description:
      - Runs modules in an existing podman container with one C(podman exec --interactive) each.
    options:
      remote_addr:
        description: The ID of the container you want to access.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
          - name: ansible_podman_host
      remote_user:
        description: User (name or UID) that runs commands inside the container.
        ini:
          - section: defaults
            key: remote_user
        env:
          - name: ANSIBLE_REMOTE_USER
        vars:
          - name: ansible_user
      podman_extra_args:
        description: Extra arguments to pass to the podman command line.
        default: ''
        ini:
          - section: defaults
            key: podman_extra_args
        vars:
          - name: ansible_podman_extra_args
        env:
          - name: ANSIBLE_PODMAN_EXTRA_ARGS
      podman_executable:
        description: Executable for podman command.
        default: podman
        vars:
          - name: ansible_podman_executable
        env:
          - name: ANSIBLE_PODMAN_EXECUTABLE
      pipelining:
        description:
          - Send modules on stdin. Read from the same settings as the ssh connection's, so the
            C([ssh_connection] pipelining) of every molecule.yml applies here too.
        type: boolean
        default: false
        ini:
          - section: defaults
            key: pipelining
          - section: connection
            key: pipelining
          - section: ssh_connection
            key: pipelining
        env:
          - name: ANSIBLE_PIPELINING
        vars:
          - name: ansible_pipelining
"""

import shlex

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.connection import ConnectionBase, ensure_connect
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection


class Connection(PodmanConnection):
    """containers.podman.podman, pipelined: one ``podman exec`` per module or file transfer."""

    has_pipelining = True

    def _exec_args(self, interactive):
        args = ["exec"]
        if interactive:
            args.append("--interactive")
        if self.user:
            args.extend(("--user", self.user))
        return args

    def _connect(self):
        # No `podman mount` (the stock plugin mounts on every task, for its file transfers).
        ConnectionBase._connect(self)
        self._connected = True

    @ensure_connect
    def exec_command(self, cmd, in_data=None, sudoable=False):
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        argv = shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        return self._podman(self._exec_args(in_data is not None), argv, in_data)

    @ensure_connect
    def put_file(self, in_path, out_path):
        ConnectionBase.put_file(self, in_path, out_path)
        with open(to_bytes(in_path, errors="surrogate_or_strict"), "rb") as src:
            data = src.read()
        rc, dummy, stderr = self._podman(self._exec_args(True), ["/bin/sh", "-c", 'cat > "$1"', "sh", out_path], data)
        if rc != 0:
            raise AnsibleError("Failed to copy %s to %s in container %s: %s" % (in_path, out_path, self._container_id, to_native(stderr)))

    @ensure_connect
    def fetch_file(self, in_path, out_path):
        ConnectionBase.fetch_file(self, in_path, out_path)
        rc, stdout, stderr = self._podman(self._exec_args(False), ["cat", "--", in_path])
        if rc != 0:
            raise AnsibleError("Failed to fetch %s from container %s: %s" % (in_path, self._container_id, to_native(stderr)))
        with open(to_bytes(out_path, errors="surrogate_or_strict"), "wb") as dest:
            dest.write(stdout)
