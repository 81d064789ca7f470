"""Package presence from real dpkg-query / rpm outputs (tests/data/packages/SOURCES.md)."""
import os

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.system.packages import (
    PackageQueryError, choose_manager, dpkg_argv, dpkg_installed, missing_packages, rpm_argv, rpm_installed)

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "data", "packages")


def _read(name):
    with open(os.path.join(DATA, name)) as fh:
        return fh.read()


def test_dpkg_installed_from_real_output():
    assert dpkg_installed("mdadm", 0, _read("dpkg-query.mdadm.out"))
    assert dpkg_installed("libc6:amd64", 0, _read("dpkg-query.libc6.out"))
    assert not dpkg_installed("libc6:i386", 0, _read("dpkg-query.libc6.out"))       # other architecture
    assert dpkg_installed("mdadm=4.2-5", 0, _read("dpkg-query.mdadm.out"))
    assert not dpkg_installed("mdadm=4.3-1", 0, _read("dpkg-query.mdadm.out"))      # other version
    assert not dpkg_installed("rasdaemon", 1, "")                                   # stderr: no packages found


def test_dpkg_removed_but_configured_is_missing():
    line = _read("dpkg-query.mdadm.out").replace("install ok installed", "deinstall ok config-files")
    assert not dpkg_installed("mdadm", 0, line)
    assert not dpkg_installed("mdadm", 0, line.replace("deinstall ok config-files", "unknown ok not-installed"))


def test_dpkg_query_asks_without_the_version_pin():
    argv = dpkg_argv("mdadm:amd64=4.2-5")
    assert argv[:2] == ["dpkg-query", "-W"] and argv[-1] == "mdadm:amd64"
    assert argv[2] == "-f=${Package}\\t${Architecture}\\t${Status}\\t${Version}\\n"
    with pytest.raises(PackageQueryError):
        dpkg_installed("mdadm", 2, "")                                             # dpkg-query itself broke


def test_rpm_from_real_output():
    assert rpm_argv("numactl") == ["rpm", "-q", "--whatprovides", "numactl"]
    assert rpm_installed("dlrack-probe", 0, _read("rpm.dlrack-probe.out"))
    assert not rpm_installed("numactl", 1, _read("rpm.numactl.missing"))
    assert not rpm_installed("numactl", 1, "package numactl is not installed\n")
    with pytest.raises(PackageQueryError):
        rpm_installed("numactl", 1, "error: rpmdb: BDB0113 Thread/process failed\n")


def test_missing_packages_keeps_order_and_asks_once_per_name():
    answers = {"mdadm": (0, _read("dpkg-query.mdadm.out"), ""),
               "rasdaemon": (1, "", _read("dpkg-query.rasdaemon.err")),
               "edac-utils": (1, "", "dpkg-query: no packages found matching edac-utils\n")}
    asked = []

    def run(argv):
        asked.append(argv[-1])
        return answers[argv[-1]]
    assert missing_packages(["rasdaemon", "mdadm", "edac-utils", "rasdaemon"], "dpkg", run) == ["rasdaemon", "edac-utils"]
    assert asked == ["rasdaemon", "mdadm", "edac-utils"]


def test_choose_manager():
    assert choose_manager({"dpkg-query": "/usr/bin/dpkg-query", "apt-get": "/usr/bin/apt-get", "rpm": "/usr/bin/rpm"}.get) == "dpkg"
    assert choose_manager({"rpm": "/usr/bin/rpm"}.get) == "rpm"
    with pytest.raises(PackageQueryError, match="Debian/Ubuntu"):
        choose_manager({}.get)


def test_a_query_that_hangs_is_a_clear_failure_in_bounded_time(tmp_path, monkeypatch):
    # issue 18.3: rpm waiting on a stale rpmdb lock; the query runner kills it at its limit
    import time
    from ansible_collections.dlrack.node.plugins.module_utils.system import packages
    rpm = tmp_path / "rpm"
    rpm.write_text("#!/bin/sh\nsleep 600\n")
    rpm.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ.get("PATH", "")))
    monkeypatch.setattr(packages, "QUERY_TIMEOUT_S", 1)
    started = time.monotonic()
    with pytest.raises(packages.PackageQueryError) as err:
        packages.missing_packages(["numactl"], "rpm")
    assert time.monotonic() - started < 4
    assert str(err.value) == "rpm -q --whatprovides numactl did not answer within 1 s and was killed"
