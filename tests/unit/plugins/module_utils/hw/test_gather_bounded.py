"""gather() through the bounded runner (system/command.py, issue 18.3/18.9a): a stand-in
nvidia-smi that answers from a real capture gives the same document as the injected stand-in; one
that hangs or prints 300 MB costs bounded time and memory and is named, with its limit, in
``errors`` and ``command_failures``; the GPUs stay listed from sysfs."""
import stat
import time

from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather
from ansible_collections.dlrack.node.plugins.module_utils.system.command import Runner

from realdata import real
from testpaths import sysfs_tree

DUAL = sysfs_tree("dual-2070-x8")                             # 2x RTX 2070 at x8
XML = real("nvidia-smi-q-xml", "telegraf-dual_2070-v13.xml")
NVLINK = real("nvidia-smi-nvlink", "utkuozdemir-rtx2080super-desktop-drv595.txt")


def stand_in(tmp_path, body):
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def answering(tmp_path):
    return stand_in(tmp_path, 'case "$1" in -q) cat "%s";; nvlink) cat "%s"; sed "s/GPU 0:/GPU 1:/" "%s";; '
                    '*) exit 2;; esac\n' % (XML, NVLINK, NVLINK))


def test_real_capture_through_the_runner_is_unchanged(tmp_path):
    smi = answering(tmp_path)
    with open(XML) as fh:
        xml = fh.read()
    with open(NVLINK) as fh:
        nvl = fh.read()

    def injected(argv):
        return (0, xml, "") if argv[1:] == ["-q", "-x"] else (0, nvl + nvl.replace("GPU 0:", "GPU 1:"), "")

    broke = []
    bounded = gather(root=DUAL, is_root=False, nvidia_smi=smi, command_failures=broke)
    plain = gather(root=DUAL, run_command=injected, is_root=False, nvidia_smi=smi)
    assert broke == [] and bounded["errors"] == []
    bounded.pop("uptime_s")
    plain.pop("uptime_s")
    assert bounded == plain
    assert [g["model"] for g in bounded["gpus"]] == ["NVIDIA GeForce RTX 2070"] * 2


def test_hanging_nvidia_smi_is_named_with_its_limit(tmp_path):
    smi = stand_in(tmp_path, "sleep 600\n")
    broke = []
    started = time.monotonic()
    doc = gather(root=DUAL, is_root=False, nvidia_smi=smi, command_failures=broke,
                 run_command=Runner(timeout=1, timeout_hint="the hw_facts option command_timeout"))
    assert time.monotonic() - started < 1 + 3
    why = ("nvidia-smi -q -x did not answer within 1 s and was killed "
           "(the limit is the hw_facts option command_timeout)")
    assert broke == [why] and why in doc["errors"]
    # the GPUs are still there, from sysfs
    assert len(doc["gpus"]) == 2
    assert all(g["uuid"] is None for g in doc["gpus"])


def test_endless_nvidia_smi_output_is_bounded(tmp_path):
    smi = stand_in(tmp_path, "head -c 314572800 /dev/zero | tr '\\0' '<'\n")
    broke = []
    started = time.monotonic()
    doc = gather(root=DUAL, is_root=False, nvidia_smi=smi, command_failures=broke,
                 run_command=Runner(timeout=60, output_limit=1 << 20))
    assert time.monotonic() - started < 15
    assert broke == ["nvidia-smi -q -x printed more than 1 MiB on stdout and was stopped"]
    assert broke[0] in doc["errors"] and len(doc["gpus"]) == 2


def test_an_ordinary_failure_is_not_a_broken_limit(tmp_path):
    smi = stand_in(tmp_path, "echo 'NVIDIA-SMI has failed because it couldn'\"'\"'t communicate with the NVIDIA driver.'; exit 9\n")
    broke = []
    doc = gather(root=DUAL, is_root=False, nvidia_smi=smi, command_failures=broke)
    assert broke == []
    assert doc["errors"] == ["nvidia-smi -q -x failed (rc=9): NVIDIA-SMI has failed because it couldn't "
                             "communicate with the NVIDIA driver."]
