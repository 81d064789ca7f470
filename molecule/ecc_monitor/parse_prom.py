"""Parse a Prometheus textfile with prometheus_client's own parser; print the samples as JSON.

Runs on the controller with molecule's Python (the project venv, which has prometheus_client).
Output: {"name{label=value,...}": value} with labels sorted, so a verify task can look values up.
"""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families


def main(path):
    with open(path) as handle:
        text = handle.read()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join("%s=%s" % kv for kv in sorted(sample.labels.items()))
            out["%s{%s}" % (sample.name, labels)] = sample.value
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
