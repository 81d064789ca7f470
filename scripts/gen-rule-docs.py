"""Write the rules and profiles tables of README.md and docs/dlrack_hw.md from the rule registry.

The registry is plugins/plugin_utils/rules.py: each ``@rule(id, title, severity, doc=...)`` gives
a row of the rules table (``{threshold}`` in ``doc`` is that threshold's default), ``PROFILES``
the rows of the profiles table. The tables sit between marker comments
(``<!-- generated: rules ... -->`` ... ``<!-- /generated: rules -->``); everything outside them
is left as it is.

    .venv/bin/python scripts/gen-rule-docs.py          # rewrite the tables
    .venv/bin/python scripts/gen-rule-docs.py --check  # exit 1 when a table is stale (a unit test runs this)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# file: the tables it holds
FILES = {"README.md": ("rules",), os.path.join("docs", "dlrack_hw.md"): ("rules", "profiles")}
_LEVELS = ("error", "warning", "info", "off")


def _importable():
    """This checkout as ansible_collections.dlrack.node: .collections (scripts/bootstrap.sh) or a
    copy already under ansible_collections/dlrack/node."""
    linked = os.path.join(ROOT, ".collections")
    parts = ROOT.split(os.sep)
    if os.path.isdir(os.path.join(linked, "ansible_collections", "dlrack", "node")):
        sys.path.insert(0, linked)
    elif parts[-3:-2] == ["ansible_collections"]:
        sys.path.insert(0, os.sep.join(parts[:-3]))
    from ansible_collections.dlrack.node.plugins.plugin_utils import rules  # pylint: disable=import-outside-toplevel
    return rules


def _g(value):
    return "%g" % value if isinstance(value, (int, float)) else str(value)


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def _and(items):
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def rules_table(rules):
    defaults = dict((k, _g(v)) for k, v in rules.DEFAULT_THRESHOLDS.items())
    lines = ["| id | rule | default severity (profile `training`) |", "|---|---|---|"]
    for r in rules.registry():
        severity = r.severity + (" (shadow: a warning until enforced)" if getattr(r, "shadow", False) and r.severity == "error" else "")
        lines.append("| `%s` | %s | %s |" % (r.id, _cell(r.doc.format(**defaults)), severity))
    return lines


def _profile_cell(rules, profile):
    sev, th = profile["severity"], profile["thresholds"]
    parts = []
    for level in _LEVELS:
        ids = ["`%s`" % rid for rid in rules.RULE_IDS if sev.get(rid) == level]
        if ids:
            parts.append("%s %s" % (_and(ids), level))
    for key in sorted(th):
        parts.append("`%s` %s (training %s)" % (key, _g(th[key]), _g(rules.DEFAULT_THRESHOLDS[key])))
    return "; ".join(parts) or "—"


def profiles_table(rules):
    lines = ["| profile | differs from `training` |", "|---|---|"]
    for name in ["training"] + sorted(p for p in rules.PROFILES if p != "training"):
        label = "`%s`%s" % (name, " (default)" if name == "training" else "")
        lines.append("| %s | %s |" % (label, _cell(_profile_cell(rules, rules.PROFILES[name]))))
    return lines


def render(text, tables):
    """``text`` with every marked table replaced; a marker pair that is missing is an error."""
    for name, lines in tables.items():
        pattern = re.compile(r"(<!-- generated: %s [^\n]*-->\n)(.*?)(<!-- /generated: %s -->)" % (name, name), re.S)
        if not pattern.search(text):
            raise ValueError("no <!-- generated: %s ... --> ... <!-- /generated: %s --> markers" % (name, name))
        text = pattern.sub(lambda m: m.group(1) + "\n".join(lines) + "\n" + m.group(3), text)
    return text


def main(argv):
    rules = _importable()
    tables = {"rules": rules_table(rules), "profiles": profiles_table(rules)}
    stale = []
    for rel, names in sorted(FILES.items()):
        path = os.path.join(ROOT, rel)
        with open(path) as fh:
            current = fh.read()
        try:
            new = render(current, dict((n, tables[n]) for n in names))
        except ValueError as exc:
            sys.stderr.write("%s: %s\n" % (rel, exc))
            return 1
        if new == current:
            continue
        stale.append(rel)
        if "--check" not in argv:
            with open(path, "w") as fh:
                fh.write(new)
    if stale and "--check" in argv:
        sys.stderr.write("stale rule tables in %s: run .venv/bin/python scripts/gen-rule-docs.py\n" % ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
