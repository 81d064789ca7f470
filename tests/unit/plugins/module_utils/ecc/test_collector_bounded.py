"""The ECC collector's nvidia-smi call goes through the bounded runner (issue 18.3): a stand-in
that hangs or prints 300 MB is 'GPU ECC not up' in bounded time; one answering from a real
capture is parsed as before."""
import time

from ansible_collections.dlrack.node.plugins.module_utils.ecc.metrics import gpus_from_nvidia_smi

from realdata import real


def _smi(tmp_path, body):
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_real_capture_through_the_runner(tmp_path):
    smi = _smi(tmp_path, 'cat "%s"\n' % real("nvidia-smi-q-xml", "telegraf-dual_2070-v13.xml"))
    gpus, up = gpus_from_nvidia_smi(command=smi)
    assert up is True and len(gpus) == 2


def test_hanging_nvidia_smi_is_not_up_in_bounded_time(tmp_path):
    smi = _smi(tmp_path, "sleep 600\n")
    started = time.monotonic()
    assert gpus_from_nvidia_smi(command=smi, timeout=1) == ([], False)
    assert time.monotonic() - started < 4


def test_endless_output_is_bounded(tmp_path):
    smi = _smi(tmp_path, "head -c 314572800 /dev/zero | tr '\\0' '<'\n")
    started = time.monotonic()
    assert gpus_from_nvidia_smi(command=smi, output_limit=1 << 20) == ([], False)
    assert time.monotonic() - started < 10
