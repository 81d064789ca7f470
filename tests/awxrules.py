"""AWX/AAP's two rules for sliced jobs, reproduced for the tests and benchmarks/slices.py only (never
in the collection: AWX does this itself). From ansible/awx at e21dd0a0933fd544d1fe2513c54fe41203775eb5:

  awx/main/models/inventory.py  Inventory.get_sliced_hosts: the enabled hosts ordered by name, then
                                host_queryset[slice_number - 1::slice_count]
  awx/main/models/workflow.py   WorkflowJob.get_effective_artifacts: artifacts.update(job artifacts)
                                for the jobs ordered by ('finished', 'id'), the last to finish
                                winning per key (a shallow merge)
"""


def awx_sliced_hosts(hosts, slice_number, slice_count):
    """awx/main/models/inventory.py get_sliced_hosts, as written there."""
    if slice_count > 1 and slice_number > 0:
        offset = slice_number - 1
        hosts = hosts[offset::slice_count]
    return hosts


def awx_effective_artifacts(jobs_in_finish_order):
    """awx/main/models/workflow.py get_effective_artifacts: a shallow dict.update per job."""
    artifacts = {}
    for job_artifacts in jobs_in_finish_order:
        artifacts.update(job_artifacts)
    return artifacts
