"""The README's ansible-runner example leaves a `runner/` folder in the clone (its artifacts, the
fact cache, the extra vars): git ignores it, so `make sanity` (which copies what git would
commit) never sees it, and `ansible-galaxy collection build` run in the clone itself leaves it out
(build_ignore in galaxy.yml), so a tarball never ships another run's facts (issue 30.4)."""
import os
import subprocess
import tarfile

from testpaths import ROOT, tracked_copy
from user_install import clean_env, run


def test_runner_folder_is_ignored_by_git_and_left_out_of_the_tarball(tmp_path):
    proc = subprocess.run(["git", "check-ignore", "runner/artifacts/1/fact_cache/gpu-a01", "runner/env/extravars"], stdout=subprocess.PIPE,
                          cwd=ROOT, check=False)
    assert proc.returncode == 0 and proc.stdout.split() == [b"runner/artifacts/1/fact_cache/gpu-a01", b"runner/env/extravars"]
    src = tracked_copy(str(tmp_path / "clone"))
    for rel in ("runner/env/extravars", "runner/artifacts/1/fact_cache/gpu-a01", "runner/artifacts/1/stdout"):
        os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
        with open(os.path.join(src, rel), "w") as fh:
            fh.write('{"dlrack_report_dir": "/tmp/secret"}\n')
    env = clean_env(str(tmp_path))
    proc = run(["ansible-galaxy", "collection", "build", "--output-path", str(tmp_path / "dist")], cwd=src, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tarball = os.path.join(str(tmp_path / "dist"), os.listdir(str(tmp_path / "dist"))[0])
    with tarfile.open(tarball) as tf:
        names = tf.getnames()
    assert "playbooks/preflight.yml" in names
    assert not [n for n in names if n == "runner" or n.startswith("runner/")], [n for n in names if "runner" in n]
