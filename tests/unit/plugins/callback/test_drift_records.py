"""plugins/callback/drift.py: the records file of drift.yml. Every record is in the file before
the next task starts (drift.yml's report task reads it then) and at the end of the run, and the
file is written once per task, not once per result (a rewrite per result was O(results^2))."""
import json

from ansible_collections.dlrack.node.plugins.callback import drift


class _Task(object):
    action = "ansible.builtin.template"
    _role = None

    def get_name(self):
        return "storage_tiers : Write the fstab lines"


class _Host(object):
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


class _Result(object):
    def __init__(self, host, result):
        self._task, self._host, self._result = _Task(), _Host(host), result


def _recorder(tmp_path, monkeypatch):
    writes = []
    real = drift.atomic_write

    def counting(path, text, **kw):
        writes.append(path)
        return real(path, text, **kw)
    monkeypatch.setattr(drift, "atomic_write", counting)
    cb = drift.CallbackModule()
    cb._path = str(tmp_path / "drift-records.json")   # as v2_playbook_on_play_start sets it
    return cb, writes


def test_one_write_per_task_with_every_record(tmp_path, monkeypatch):
    cb, writes = _recorder(tmp_path, monkeypatch)
    for i in range(300):
        host = "gpu-%03d" % i
        cb.v2_runner_on_ok(_Result(host, {"changed": True, "diff": [{"before": "a", "after": "b"}]}))
        cb.v2_runner_on_failed(_Result(host, {"msg": "mdadm failed"}))
        cb.v2_runner_on_unreachable(_Result(host, {"msg": "ssh: connect refused"}))
    assert len(writes) <= 1
    cb.v2_playbook_on_task_start(_Task(), False)     # the next task (drift.yml's report task) reads the file
    assert len(writes) == 1
    doc = json.loads((tmp_path / "drift-records.json").read_text())
    assert len(doc) == 300
    rec = doc["gpu-007"]
    assert rec["unreachable"] is True and [c["task"] for c in rec["changes"]] == ["Write the fstab lines"]
    assert [f["msg"] for f in rec["failures"]] == ["mdadm failed", "ssh: connect refused"]
    cb.v2_playbook_on_task_start(_Task(), False)     # nothing new: no write
    assert len(writes) == 1


def test_the_last_records_are_written_at_the_end_of_the_run_and_of_the_play(tmp_path, monkeypatch):
    cb, writes = _recorder(tmp_path, monkeypatch)
    cb.v2_runner_on_ok(_Result("gpu-a01", {"changed": True}))
    cb.v2_playbook_on_stats(None)
    assert "gpu-a01" in json.loads((tmp_path / "drift-records.json").read_text())
    cb.v2_runner_on_ok(_Result("gpu-a02", {"changed": True}))
    cb.v2_playbook_on_handler_task_start(_Task())
    assert "gpu-a02" in json.loads((tmp_path / "drift-records.json").read_text())
    assert len(writes) == 2
