"""Acceptance's command runner (node.run_command) is the bounded one (issue 18.3): a hung
nvidia-smi / dcgmi is an error naming the command and the limit, in bounded time."""
import time

from ansible_collections.dlrack.node.plugins.module_utils.acceptance import health
from ansible_collections.dlrack.node.plugins.module_utils.acceptance.node import run_command


def _tool(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_hung_nvidia_smi_is_a_health_error_naming_the_limit(tmp_path):
    smi = _tool(tmp_path, "nvidia-smi", "sleep 600\n")
    started = time.monotonic()
    doc = health.gpu_health(smi, lambda argv, timeout: run_command(argv, 1))
    assert time.monotonic() - started < 4
    assert doc["status"] == "error"
    assert doc["reason"] == ("nvidia-smi -q -x exited 124: nvidia-smi -q -x did not answer within 1 s "
                             "and was killed")


def test_endless_dcgmi_output_is_bounded(tmp_path):
    dcgmi = _tool(tmp_path, "dcgmi", "head -c 314572800 /dev/zero | tr '\\0' '{'\n")
    doc = health.dcgm_diag(dcgmi, lambda argv, timeout: run_command(argv, timeout, output_limit=1 << 20), 1)
    assert doc["status"] == "error"
    assert "dcgmi diag -r 1 -j printed more than 1 MiB on stdout and was stopped" in doc["reason"]


def test_ordinary_commands_are_unchanged(tmp_path):
    tool = _tool(tmp_path, "fio", 'echo "{}"; echo warn >&2; exit 0\n')
    assert tuple(run_command([tool, "--version"], 10)) == (0, "{}\n", "warn\n")
    assert run_command([str(tmp_path / "missing")], 10)[0] == 127
