"""Console text (issue 18.8): control characters from host names and node strings are shown as
escapes; ordinary text, non-ASCII included, is untouched."""
import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import console, setting_error


@pytest.mark.parametrize("raw, shown", [
    ("\x1b]52;c;cm0gLXJmIH4=\x07", "\\x1b]52;c;cm0gLXJmIH4=\\x07"),      # OSC 52: write the clipboard
    ("gpu-a01\nPASS  gpu-a02", "gpu-a01\\nPASS  gpu-a02"),               # a forged summary line
    ("ok\rFAIL", "ok\\rFAIL"), ("a\tb", "a\\tb"), ("\x00\x7f", "\\x00\\x7f"),
    ("\x9b2J\x85", "\\x9b2J\\x85"),                                      # C1: 8-bit CSI, NEL
    ("abc\u202edcba", "abc\\u202edcba"), ("l\u2028m", "l\\u2028m"),      # bidi override, line separator
])
def test_controls_are_escaped(raw, shown):
    assert console(raw) == shown


@pytest.mark.parametrize("text", ["NVIDIA H100 80GB HBM3", "Intel(R) Xeon(R) Platinum 8480+", "Gr\u00f6\u00dfe \u2013 \u65e5\u672c",
                                  "back\\slash", ""])
def test_ordinary_text_is_untouched(text):
    assert console(text) is text or console(text) == text


def test_non_strings_are_shown_as_text():
    assert console(5) == "5" and console(None) == "None"


def test_settings_strings_with_controls_name_the_variable():
    assert setting_error("dlrack_external_archive", "nfs://archive/ds") is None
    assert setting_error("dlrack_external_archive", 5) is None
    msg = setting_error("dlrack_external_archive", "nfs://a\x1b[2J")
    assert msg.startswith("dlrack_external_archive holds a control character (nfs://a\\x1b[2J)") and "\x1b" not in msg
