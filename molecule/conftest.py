# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the scenarios' pytest-testinfra files (molecule/<name>/tests/test_node.py) share. pytest
loads this file for every test below molecule/ (the repository's pytest.ini makes the checkout the
rootdir); `make test` never collects molecule/, the scenarios' verify.yml run these files."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest


def read_node_sections(host, commands):
    """Run every (name, shell command) of ``commands`` in ONE ``host.run`` (one ``podman exec``,
    ~0.7 s here, instead of one per command): ({name: its stdout lines}, stderr). A section a
    command printed nothing for is an empty list; a name that never shows up is missing."""
    script = "\n".join("echo '@@ %s'; %s" % (name, cmd) for name, cmd in commands)
    res = host.run(script)
    out, name = {}, None
    for line in res.stdout.splitlines():
        if line.startswith("@@ "):
            name = line[3:]
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return out, res.stderr


def stat_table(lines):
    """{path: (type, owner, group, mode)} from `stat -c '%n|%F|%U|%G|%a'` lines (a read_sections section)."""
    return dict((fields[0], tuple(fields[1:])) for fields in (line.split("|") for line in lines))


@pytest.fixture(scope="session")
def read_sections():
    """read_node_sections, for a test file's module-scoped fixture that reads the node once."""
    return read_node_sections


@pytest.fixture(scope="session")
def stat_lines():
    """stat_table, for the tests that compare installed files' owner and mode."""
    return stat_table
