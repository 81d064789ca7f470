# -*- coding: utf-8 -*-
"""DataLoader-style workers without torch: N spawned processes, each unpickles a
dlrack_affinity.WorkerPinner(split=True) and pins itself. Prints JSON: the interpreter's
sys.prefix, where dlrack_affinity came from, and each worker's CPU set after pinning.
Used by molecule/gpu_affinity (verify) and tests/unit/roles/test_gpu_bind.py.
usage: python split_workers.py N"""
import json
import multiprocessing as mp
import os
import sys

import dlrack_affinity


def work(pinner, worker_id, queue):
    pinner(worker_id)
    queue.put((worker_id, sorted(os.sched_getaffinity(0))))


def main():
    n = int(sys.argv[1])
    ctx = mp.get_context("spawn")      # workers unpickle the pinner: the import must work there
    queue = ctx.Queue()
    pinner = dlrack_affinity.WorkerPinner(split=True, num_workers=n)
    procs = [ctx.Process(target=work, args=(pinner, w, queue)) for w in range(n)]
    for p in procs:
        p.start()
    got = dict(queue.get(timeout=60) for _ in procs)
    for p in procs:
        p.join()
    print(json.dumps({"prefix": sys.prefix, "module": dlrack_affinity.__file__,
                      "workers": [got[w] for w in range(n)]}))


if __name__ == "__main__":
    main()
