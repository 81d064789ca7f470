"""dlrack_hw documents shared by several unit tests."""

GOOD = {
    "schema": 1, "source": "declared",
    "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480+", "sockets": 2},
    "memory": {"total_mb": 3145728, "ecc": "multi-bit"},
    "gpus": {"model": "NVIDIA H200", "count": 8},
    "disks": [{"kind": "nvme", "transport": "nvme", "size_bytes": 7681501126656, "count": 8},
              {"kind": "hdd", "transport": "sas", "size_bytes": 22000969973760, "count": 12}],
    "workload": {"kind": "full_finetune", "model_params_b": 34},
}

GATHERED = {
    "schema": 1, "source": "gathered",
    "cpu": {"model": "AMD EPYC 9374F 32-Core Processor", "vendor": "amd", "sockets": 2, "cores": 64,
            "threads": 64, "pcie_lanes": None,
            "numa_nodes": [{"id": 0, "cpus": "0-31", "memory_mb": 193000}, {"id": 1, "cpus": "32-63", "memory_mb": 193000}]},
    "memory": {"total_mb": 386000, "ecc": "multi-bit", "edac": None},
    "gpus": [{"index": i, "uuid": "GPU-%d" % i, "model": "NVIDIA RTX 6000 Ada Generation", "memory_mb": 49140,
              "pci_bus_id": "0000:%02x:00.0" % (i + 1), "numa_node": i // 2, "local_cpus": "0-31",
              "pcie": {"width": 16, "width_max": 16, "gen": 1, "gen_max": 4}, "ecc_enabled": False,
              "nvlink_active": 0} for i in range(4)],
    "disks": [{"name": "nvme%dn1" % i, "kind": "nvme", "transport": "nvme", "size_bytes": 3840755982336,
               "in_use": {"mounted": [], "holders": [], "partitions": [], "signatures": [], "system": i == 0}}
              for i in range(17)],
}
