# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which packages are installed, decided read-only with the package database's own query tool
(dpkg-query on Debian/Ubuntu, rpm on the RHEL family): no python3-apt / dnf bindings needed, so
check mode works with any interpreter (a venv, a conda env) and nothing is ever installed here.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dlrack.node.plugins.module_utils.system.command import (
    RC_TIMED_OUT, RC_TRUNCATED, Runner, problem)

DPKG_FORMAT = "${Package}\\t${Architecture}\\t${Status}\\t${Version}\\n"


class PackageQueryError(Exception):
    pass


def choose_manager(which):
    """'dpkg' or 'rpm' for this host, from the query tools it has. `which(name)` returns a path or
    None (AnsibleModule.get_bin_path). dpkg wins where both exist (Debian ships an rpm package)."""
    if which("dpkg-query") and (which("apt-get") or which("dpkg")):
        return "dpkg"
    if which("rpm"):
        return "rpm"
    raise PackageQueryError("neither dpkg-query nor rpm is installed: dlrack.node.packages_missing supports "
                            "Debian/Ubuntu (dpkg) and RHEL-family (rpm) hosts")


def split_dpkg_name(spec):
    """apt's NAME[:ARCH][=VERSION] -> (name, arch or None, version or None)."""
    name, dummy, version = spec.partition("=")
    name, dummy, arch = name.partition(":")
    return name, arch or None, version or None


def dpkg_argv(spec):
    name, arch, dummy = split_dpkg_name(spec)
    return ["dpkg-query", "-W", "-f=" + DPKG_FORMAT, name + (":" + arch if arch else "")]


def dpkg_installed(spec, rc, stdout):
    """Whether dpkg-query's answer for `spec` means installed: a line whose status is
    'install ok installed' (not 'deinstall ok config-files', 'unknown ok not-installed'...), of the
    asked architecture and version when the spec names them. rc 1 = dpkg does not know it."""
    if rc not in (0, 1):
        raise PackageQueryError("dpkg-query failed for %s (rc %d)" % (spec, rc))
    dummy, arch, version = split_dpkg_name(spec)
    for line in stdout.splitlines():
        fields = line.split("\t")
        if len(fields) < 4:
            continue
        status = fields[2].split()
        if len(status) != 3 or status[2] != "installed":
            continue
        if arch and fields[1] not in (arch, "all"):
            continue
        if version and fields[3] != version:
            continue
        return True
    return False


def rpm_argv(spec):
    # --whatprovides: a package name is one of its own provides, and dnf accepts capabilities too.
    return ["rpm", "-q", "--whatprovides", spec]


def rpm_installed(spec, rc, stdout):
    """rpm -q exits 0 when something installed provides `spec`, 1 when nothing does."""
    if rc == 0:
        return True
    if rc == 1 and ("no package provides" in stdout or "is not installed" in stdout):
        return False
    raise PackageQueryError("rpm -q --whatprovides %s failed (rc %d): %s" % (spec, rc, stdout.strip()[:200]))


QUERY_TIMEOUT_S = 60              # one dpkg-query / rpm -q (a stale rpmdb lock makes rpm wait)
QUERY_OUTPUT_LIMIT = 1024 * 1024  # bytes per stream; one package's line is well under 1 KiB


def query_runner():
    """The bounded runner (system/command.py) for the queries: QUERY_TIMEOUT_S, QUERY_OUTPUT_LIMIT,
    LC_ALL=C (the messages parsed are the untranslated ones)."""
    return Runner(timeout=QUERY_TIMEOUT_S, output_limit=QUERY_OUTPUT_LIMIT)


def missing_packages(specs, manager, run=None):
    """The specs that are not installed, in order, without duplicates. `run(argv)` returns
    (rc, stdout, stderr) (default: query_runner()). A query that breaks its time or output limit
    raises PackageQueryError naming the command and the limit."""
    run = run or query_runner()
    argv, installed = (dpkg_argv, dpkg_installed) if manager == "dpkg" else (rpm_argv, rpm_installed)
    out = []
    for spec in specs:
        if spec in out:
            continue
        res = run(argv(spec))
        why = problem(res)
        if why and res[0] in (RC_TIMED_OUT, RC_TRUNCATED):
            raise PackageQueryError(why)
        rc, stdout = res[0], res[1]
        if not installed(spec, rc, stdout):
            out.append(spec)
    return out
