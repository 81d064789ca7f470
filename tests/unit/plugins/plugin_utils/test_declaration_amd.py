"""declare.yml on an AMD node (issue 21): the RAS counters are volatile like NVIDIA's ECC counters,
the RAS state and the interconnect are kept."""
from ansible_collections.dlrack.node.plugins.plugin_utils.declaration import declaration_from_gathered
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_hw


def test_amd_ras_counters_are_not_declared():
    gathered = {"schema": 1, "source": "gathered", "cpu": {"sockets": 1}, "memory": {"total_mb": 1024},
                "gpus": [{"index": 0, "vendor": "amd", "model": "AMD Instinct MI300X", "memory_mb": 196608,
                          "ecc_enabled": True, "interconnect": {"kind": "xgmi", "links_active": 7},
                          "ras": {"features": 16383, "blocks": {"umc": {"ue": 0, "ce": 5}}},
                          "ecc_errors": {"volatile_corrected": 5}, "retired_pages": {"retired": 1}}]}
    decl = declaration_from_gathered(gathered)
    g = decl["gpus"][0]
    assert "ras" not in g and "ecc_errors" not in g and "retired_pages" not in g
    assert g["interconnect"] == {"kind": "xgmi", "links_active": 7} and g["vendor"] == "amd"
    assert check_hw(decl, strict=True)[1] == []
