"""The acceptance action's console lines (issue 18.8): a host name with control characters is
shown escaped; the action runs for real on a stand-in task (no connection is needed)."""
from unittest import mock

from ansible.playbook.play_context import PlayContext

from ansible_collections.dlrack.node.plugins.action.acceptance_report import ActionModule


def test_acceptance_lines_escape_control_characters():
    host = "gpu\x1b]52;c;eA==\x07\nPASS  forged"
    task = mock.MagicMock(args={"hosts": [host]}, async_val=0, check_mode=False, diff=False)
    action = ActionModule(task, mock.MagicMock(), PlayContext(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    result = action.run(task_vars={"hostvars": {host: {}}})
    assert result["lines"] and all("\x1b" not in line and "\n" not in line and "\x07" not in line for line in result["lines"])
    assert any("gpu\\x1b]52;c;eA==\\x07\\nPASS  forged" in line for line in result["lines"])
    assert not [line for line in result["text"].splitlines() if line.startswith("PASS")]
