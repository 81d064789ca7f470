"""Generate docs/roles.md (the variables of every role) from roles/*/meta/argument_specs.yml.

    .venv/bin/python scripts/gen-role-docs.py          # rewrite docs/roles.md
    .venv/bin/python scripts/gen-role-docs.py --check  # exit 1 when docs/roles.md is stale (a unit test runs this)
"""
import os
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "roles.md")


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def render():
    lines = ["# Role variables", "",
             "Generated from each role's `meta/argument_specs.yml` by `scripts/gen-role-docs.py`; do not edit.", ""]
    for role in sorted(os.listdir(os.path.join(ROOT, "roles"))):
        path = os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml")
        if not os.path.exists(path):
            continue
        with open(path) as fh:
            spec = yaml.safe_load(fh)["argument_specs"]["main"]
        defaults = {}
        dpath = os.path.join(ROOT, "roles", role, "defaults", "main.yml")
        if os.path.exists(dpath):
            with open(dpath) as fh:
                defaults = yaml.safe_load(fh) or {}
        lines += ["## %s" % role, "", _cell(spec.get("short_description", "")), ""]
        desc = spec.get("description") or []
        for d in desc if isinstance(desc, list) else [desc]:
            lines += [_cell(d), ""]
        lines += ["| variable | type | default | description |", "|---|---|---|---|"]
        for name, opt in sorted((spec.get("options") or {}).items()):
            default = opt.get("default", defaults.get(name, ""))
            if isinstance(default, (dict, list)) or default is None:
                default = yaml.safe_dump(default, default_flow_style=True).strip()
            typ = opt.get("type", "str")
            if opt.get("choices"):
                typ += " (%s)" % ", ".join(str(c) for c in opt["choices"])
            d = opt.get("description", "")
            d = " ".join(d) if isinstance(d, list) else d
            lines.append("| `%s` | %s | `%s` | %s |" % (name, _cell(typ), _cell(default), _cell(d)))
        lines.append("")
    return "\n".join(lines)


def main():
    text = render()
    if "--check" in sys.argv:
        current = open(OUT).read() if os.path.exists(OUT) else ""
        if current != text:
            sys.stderr.write("docs/roles.md is stale: run .venv/bin/python scripts/gen-role-docs.py\n")
            return 1
        return 0
    with open(OUT, "w") as fh:
        fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
