# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The platform around the GPUs, judged hop by hop (controller side; the rules in rules.py call
these and only word the findings).

Input is ``dlrack_hw.pcie`` (module_utils/hw/pcie_tree.py: gathered from sysfs or lspci, or
declared): a list of devices, each naming its parent bridge and host bridge.

- ``Tree(pcie)``: the devices by address, each device's chain of bridges (root port first).
- ``distance(tree, a, b)``: the ``nvidia-smi topo -m`` legend between two functions, computed from
  the tree: PIX (at most one PCIe switch, or the same root port), PXB (more than one switch, not
  through the host bridge), PHB (the same host bridge), NODE (host bridges of one NUMA node),
  SYS (across NUMA nodes); None across host bridges whose NUMA nodes are unknown. A switch is an upstream port with its downstream ports: one bridge in
  nvidia-smi's sense (DGX H100: a GPU and its NIC under one switch are PIX).
- ``path_problems``, ``acs_problems``, ``switch_oversubscription``, ``lane_budget``,
  ``bar1_problems``, ``nearest_nics``: the per-path checks.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dlrack.node.plugins.module_utils.system.command import human_bytes
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_hw

LEGEND = ("PIX", "PXB", "PHB", "NODE", "SYS")
LEGEND_RANK = dict((name, i) for i, name in enumerate(LEGEND))
ACS_P2P_BLOCKING = ("ReqRedir", "CmpltRedir", "EgressCtrl")
ENDPOINTS = ("gpu", "nic", "nvme", "storage")
# GT/s per lane of each generation (PCIe base spec): the bandwidth of a hop is width x rate
GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


_NORM = {}


def _norm(bdf):
    """'18:00.0' / '00000000:18:00.0' / '0000:18:00.0' -> '0000:18:00.0' (None for a non-string);
    memoised: the checks ask for the same few hundred addresses many times."""
    if not isinstance(bdf, str):
        return None
    out = _NORM.get(bdf)
    if out is None:
        out = bdf.strip().lower()
        parts = out.split(":")
        if len(parts) == 2:
            out = "0000:" + out
        elif len(parts) == 3 and len(parts[0]) > 4:
            out = parts[0][-4:] + ":" + ":".join(parts[1:])   # nvidia-smi's 00000000:18:00.0
        if len(_NORM) < 65536:
            _NORM[bdf] = out
    return out


class Tree(object):
    """The devices of ``dlrack_hw.pcie`` by address, with their chains (computed once per tree)."""

    def __init__(self, pcie):
        pcie = pcie if isinstance(pcie, dict) else {}
        self.source = pcie.get("source")
        self.iommu = pcie.get("iommu") if isinstance(pcie.get("iommu"), dict) else None
        self.devices = [d for d in pcie.get("devices") or [] if isinstance(d, dict) and _norm(d.get("bdf"))]
        self.by_bdf = dict((_norm(d["bdf"]), d) for d in self.devices)
        self._parent = dict((b, _norm(d.get("parent"))) for b, d in self.by_bdf.items())
        self._chains = {}
        self._distances = {}

    def get(self, bdf):
        return self.by_bdf.get(_norm(bdf))

    def chain(self, bdf):
        """Bridges from the root port down to the device's parent (addresses)."""
        bdf = _norm(bdf)
        found = self._chains.get(bdf)
        if found is not None:
            return found
        out, cur, seen = [], bdf, 0
        while self._parent.get(cur) in self.by_bdf and seen < 64:
            cur, seen = self._parent[cur], seen + 1
            out.append(cur)
        out.reverse()
        self._chains[bdf] = out
        return out

    def of_kind(self, *kinds):
        return [d for d in self.devices if d.get("kind") in kinds]

    def host_bridge(self, bdf):
        dev = self.get(bdf) or {}
        return dev.get("host_bridge") or (_norm(bdf) or "")[:7]

    def numa(self, bdf):
        dev = self.get(bdf) or {}
        node = dev.get("numa_node")
        for anc in reversed(self.chain(bdf)):
            if node is not None:
                break
            node = (self.by_bdf.get(anc) or {}).get("numa_node")
        return node

    def port(self, bdf):
        return (self.by_bdf.get(bdf) or self.get(bdf) or {}).get("port")

    def rdma_nics(self):
        """NICs that do RDMA: those with InfiniBand devices (sysfs), or whose RDMA is unknown (lspci)."""
        return [d for d in self.of_kind("nic") if d.get("rdma") is None or d.get("rdma")]

    def flat(self):
        """True for a tree without bridges above its GPUs (a VM's root bus): the physical path is
        the hypervisor's and cannot be seen here."""
        gpus = self.of_kind("gpu")
        return bool(gpus) and all(not self.chain(g["bdf"]) for g in gpus)


def distance(tree, a, b):
    """The nvidia-smi topo legend between functions ``a`` and ``b`` (None when either is unknown)."""
    a, b = _norm(a), _norm(b)
    key = (a, b) if (a or "") <= (b or "") else (b, a)
    if key not in tree._distances:
        tree._distances[key] = _distance(tree, a, b)
    return tree._distances[key]


def _distance(tree, a, b):
    if tree.get(a) is None or tree.get(b) is None:
        return None
    ca, cb = tree.chain(a), tree.chain(b)
    common = 0
    while common < min(len(ca), len(cb)) and ca[common] == cb[common]:
        common += 1
    if common == 0:
        if tree.host_bridge(a) == tree.host_bridge(b):
            return "PHB"
        na, nb = tree.numa(a), tree.numa(b)
        if na is None or nb is None:
            return None         # different host bridges of unknown NUMA nodes: NODE or SYS, the tree does not say
        return "NODE" if na == nb else "SYS"
    lowest = ca[common - 1]
    below = ca[common:] + cb[common:]
    if tree.port(lowest) == "upstream":
        # the downstream ports right below the lowest common upstream port are the same switch
        below = ca[common + 1:] + cb[common + 1:]
    return "PIX" if not below else "PXB"


def _link_text(link):
    if not link or link.get("width") is None:
        return "unknown"
    return "Gen%s x%s" % (link.get("gen") or "?", link.get("width"))


def _lower(a, b):
    vals = [v for v in (a, b) if v is not None]
    return min(vals) if vals else None


def hops(tree, bdf):
    """The links from the device up to its root port: [{"below": bdf, "above": bdf or None,
    "width", "gen", "width_limit", "gen_limit"}]. A link joins a device or switch upstream port
    (below) to a root port or switch downstream port (above); the port's own link registers describe
    that same link, seen from above. Its limit is the lower of the two ends' capabilities (a Gen4
    NIC in a Gen5 port runs Gen4 by design, not downgraded)."""
    out = []
    for cur in [_norm(bdf)] + list(reversed(tree.chain(bdf))):
        if tree.port(cur) in ("root", "downstream") and cur != _norm(bdf):
            continue
        above = _norm((tree.get(cur) or {}).get("parent"))
        link = (tree.get(cur) or {}).get("link") or {}
        up = ((tree.get(above) or {}).get("link") or {}) if above else {}
        out.append({"below": cur, "above": above if tree.get(above) else None,
                    "width": link.get("width") if link.get("width") is not None else up.get("width"),
                    "gen": link.get("gen") if link.get("gen") is not None else up.get("gen"),
                    "width_limit": _lower(link.get("width_max"), up.get("width_max")),
                    # a speed is judged only where both ends' capabilities are known (a Gen4 device
                    # under a port of unknown generation is not "downgraded"); a width against what is known
                    "gen_limit": (_lower(link.get("gen_max"), up.get("gen_max")) if above else link.get("gen_max"))
                    if link.get("gen_max") is not None and (up.get("gen_max") is not None or not above) else None})
    return out


def path_problems(tree, dev):
    """Problems of one endpoint's path: [(what, hop address, text)], and the unknown hops.

    A hop's width below its limit is a fault; its speed below the limit too, except the GPU's own
    link (GPUs drop to 2.5 GT/s when idle). The narrowest hop's capability below the device's own
    width is a design limit of the path (an x16 GPU behind an x8 switch uplink)."""
    problems, unknown = [], []
    path = hops(tree, dev["bdf"])
    own_width = (dev.get("link") or {}).get("width_max")
    for i, hop in enumerate(path):
        where = hop["below"] if hop["above"] is None else "%s -> %s" % (hop["below"], hop["above"])
        if hop["width"] is None or hop["width_limit"] is None:
            if not (hop["width"] is None and (tree.get(hop["below"]) or {}).get("kind") == "bridge"):
                unknown.append(where)
            continue
        if hop["width"] < hop["width_limit"]:
            problems.append(("width", where, "link %s runs x%d of x%d (the lower of both ends)"
                             % (where, hop["width"], hop["width_limit"])))
        idle_ok = i == 0 and dev.get("kind") == "gpu"
        if not idle_ok and hop["gen"] is not None and hop["gen_limit"] is not None and hop["gen"] < hop["gen_limit"]:
            problems.append(("speed", where, "link %s runs Gen%d of Gen%d (the lower of both ends)"
                             % (where, hop["gen"], hop["gen_limit"])))
    caps = [h["width_limit"] for h in path[1:] if h["width_limit"] is not None]
    if own_width and caps and min(caps) < own_width:
        narrow = [h for h in path[1:] if h["width_limit"] == min(caps)][0]
        problems.append(("narrow", narrow["below"], "x%d device behind an x%d hop at %s -> %s"
                         % (own_width, min(caps), narrow["below"], narrow["above"] or "host bridge")))
    return problems, unknown


def acs_problems(tree, pairs):
    """ACS on the peer-to-peer path of each (a, b) pair that stays below the host bridge (PIX/PXB):
    ([(a, b, port, controls)], [(a, b, port)] unreadable, judged pair count). Root ports are not
    judged: traffic between root ports goes through the root complex whatever ACS says."""
    bad, unreadable, judged = [], [], 0
    for a, b in pairs:
        ca, cb = tree.chain(a), tree.chain(b)
        if not ca or not cb or ca[0] != cb[0]:
            continue            # not under one root port: PHB or farther, through the root complex
        legend = distance(tree, a, b)
        if legend not in ("PIX", "PXB"):
            continue
        judged += 1
        ports = []
        for port in ca + cb:
            if port not in ports and tree.port(port) != "root":
                ports.append(port)
        for port in ports:
            dev = tree.get(port) or {}
            acs = dev.get("acs")
            if not dev.get("acs_readable") or not isinstance(acs, dict):
                unreadable.append((a, b, port))
                continue
            on = [c for c in acs.get("ctl") or [] if c in ACS_P2P_BLOCKING]
            if on:
                bad.append((a, b, port, on))
    return bad, unreadable, judged


def switches(tree):
    """{upstream port: [downstream ports with kept devices below]}."""
    out = {}
    for dev in tree.devices:
        parent = _norm(dev.get("parent"))
        if dev.get("kind") == "bridge" and tree.port(dev["bdf"]) == "downstream" and tree.port(parent) == "upstream":
            out.setdefault(parent, []).append(_norm(dev["bdf"]))
    return out


def _width(dev):
    link = (dev or {}).get("link") or {}
    return link.get("width_max") or link.get("width")


def switch_oversubscription(tree):
    """[(upstream port, downstream, uplink, unit)] per switch whose ports are known: in lanes (a
    downstream port counts the lower of its width and its device's; the uplink is the upstream
    port's link), or in GB/s where only the links' bandwidth is known (an hwloc export)."""
    children = {}
    for dev in tree.devices:
        children.setdefault(_norm(dev.get("parent")), []).append(dev)
    out = []
    for usp, dsps in sorted(switches(tree).items()):
        for unit, value in (("lanes", _width), ("GB/s", lambda d: (d or {}).get("link_gbs"))):
            uplink = value(tree.get(usp))
            total, known = 0, bool(uplink)
            for dsp in dsps:
                below = [value(c) for c in children.get(dsp, [])]
                width = _lower(value(tree.get(dsp)), max([w for w in below if w] or [0]) or None)
                if width is None:
                    known = False
                    break
                total += width
            if known:
                out.append((usp, total, uplink, unit))
                break
    return out


def lane_budget(tree):
    """{NUMA node (or None): (CPU lanes taken by root ports with GPUs/NICs/NVMe below, {kind: count},
    root ports of unknown width)}; a root port counts its link width (its capability, else the
    negotiated one, else its first device's)."""
    out = {}
    seen = set()
    for dev in tree.of_kind(*ENDPOINTS):
        chain = tree.chain(dev["bdf"])
        if not chain:
            continue
        rp = chain[0]
        node = tree.numa(rp)
        entry = out.setdefault(node, [0, {}, 0])
        entry[1][dev["kind"]] = entry[1].get(dev["kind"], 0) + 1
        if rp in seen:
            continue
        seen.add(rp)
        link = (tree.get(rp) or {}).get("link") or {}
        first = (tree.get(chain[1]) if len(chain) > 1 else dev) or {}
        width = _lower(link.get("width_max"), (first.get("link") or {}).get("width_max")) or link.get("width") \
            or (first.get("link") or {}).get("width_max")
        entry[0] += width or 0
        entry[2] += 0 if width else 1
    return dict((k, tuple(v)) for k, v in out.items())


def bar1(dev):
    """The GPU's largest memory BAR (NVIDIA's BAR1, the framebuffer window) and the most its
    Resizable BAR capability allows: (size, max) in bytes, None when unknown."""
    bars = [b.get("size") for b in dev.get("bars") or [] if isinstance(b, dict) and isinstance(b.get("size"), int)]
    size = max(bars) if bars else None
    rebar = [r.get("max") for r in dev.get("rebar") or [] if isinstance(r, dict) and isinstance(r.get("max"), int)]
    return size, (max(rebar) if rebar else None)


def nearest_nics(tree, gpus=None):
    """[{gpu, nic, legend, nics, unknown}] for each GPU of the tree (``gpus``: addresses, default all):
    its nearest RDMA NIC(s) by the legend; ``nic`` None when the host has none or none of known
    distance; ``unknown``: the NICs whose distance the tree does not give (NUMA node unknown)."""
    nics = tree.rdma_nics()
    out = []
    for bdf in gpus or [g["bdf"] for g in tree.of_kind("gpu")]:
        best, names, unknown = None, [], 0
        for nic in nics:
            legend = distance(tree, bdf, nic["bdf"])
            if legend is None:
                unknown += 1
                continue
            if best is None or LEGEND_RANK[legend] < LEGEND_RANK[best]:
                best, names = legend, [_norm(nic["bdf"])]
            elif legend == best:
                names.append(_norm(nic["bdf"]))
        out.append({"gpu": _norm(bdf), "nic": names[0] if names else None, "legend": best, "nics": names,
                    "unknown": unknown})
    return out


def matrix(tree):
    """The GPU x (GPU + RDMA NIC) legend matrix, as nvidia-smi topo -m orders it (by address)."""
    gpus = sorted(_norm(g["bdf"]) for g in tree.of_kind("gpu"))
    nics = sorted(_norm(n["bdf"]) for n in tree.rdma_nics())
    cols = gpus + nics
    rows = []
    for a in gpus:
        rows.append([("X" if a == b else distance(tree, a, b)) for b in cols])
    return {"gpus": gpus, "nics": nics, "rows": rows}


def rail_alignment(tree):
    """For a rail-optimized node: each GPU needs its own RDMA NIC at PXB or closer. Returns
    (aligned [(gpu, nic, legend)], problems [(gpu, text)])."""
    near = nearest_nics(tree)
    taken, aligned, problems = {}, [], []
    for entry in near:
        gpu = entry["gpu"]
        if entry["nic"] is None:
            # a NIC of unknown distance is behind another host bridge: not PXB or closer either
            problems.append((gpu, "no RDMA NIC at PXB or closer" if entry["unknown"] else "no RDMA NIC"))
            continue
        if LEGEND_RANK[entry["legend"]] > LEGEND_RANK["PXB"]:
            problems.append((gpu, "nearest RDMA NIC %s is %s (needs PXB or closer)" % (entry["nic"], entry["legend"])))
            continue
        free = [n for n in entry["nics"] if n not in taken]
        if not free:
            problems.append((gpu, "shares its nearest NIC %s with GPU %s" % (entry["nic"], taken[entry["nic"]])))
            continue
        taken[free[0]] = gpu
        aligned.append((gpu, free[0], entry["legend"]))
    return aligned, problems


# --------------------------------------------------------------------------------------------
# The checks of rules.py (each gets the rule's ctx: ctx.report / ctx.skip, ctx.hw, ctx.th)

def _labels(hw, tree):
    """{address: "GPU<index> <address>" / "NIC <ib names> <address>" / "<kind> <address>"}."""
    out = {}
    for g in hw.get("gpus") or []:
        bdf = _norm(g.get("pci_bus_id"))
        if bdf:
            out[bdf] = "GPU%s %s" % (g.get("index"), bdf)
    for dev in tree.devices:
        bdf = _norm(dev["bdf"])
        if bdf in out:
            continue
        if dev.get("kind") == "nic" and dev.get("rdma"):
            out[bdf] = "NIC %s %s" % ("/".join(str(n) for n in dev["rdma"][:2]), bdf)
        else:
            out[bdf] = "%s %s" % ({"gpu": "GPU", "nic": "NIC", "nvme": "NVMe"}.get(dev.get("kind"), dev.get("kind")), bdf)
    return out


def host_tree(ctx):
    """The Tree of ``ctx.hw["pcie"]``, built once per evaluated host and shared by its rules."""
    pcie = ctx.hw.get("pcie")
    cached = getattr(ctx, "_pcie_tree", None)
    if cached is not None and cached[0] is pcie:
        return cached[1]
    tree = Tree(pcie)
    ctx._pcie_tree = (pcie, tree)
    return tree


def declared_doc(ctx):
    """The host's declaration (``ctx.declared``) validated as inventory.matches_declared validates it
    (hwschema.check_hw, strict): a field of the wrong shape there (``width_max: "x16"``, ``ports: 5``)
    is None here and that rule's finding names it, never a traceback that leaves the fleet without a
    report. {} when there is no declaration; computed once per evaluated host."""
    cached = getattr(ctx, "_platform_declared", None)
    if cached is not None and cached[0] is ctx.declared:
        return cached[1]
    clean = None
    if isinstance(ctx.declared, dict):
        clean, dummy = check_hw(ctx.declared, strict=True)
    clean = clean if isinstance(clean, dict) else {}
    ctx._platform_declared = (ctx.declared, clean)
    return clean


def _tree_or_skip(ctx):
    """The tree, or None. A document without ``pcie`` (declared racks, facts from before issue 32)
    gets no outcome of these rules at all, as before they existed; an empty tree is a skip."""
    if ctx.hw.get("pcie") is None:
        return None
    tree = host_tree(ctx)
    if not tree.devices:
        ctx.skip("no PCIe tree in dlrack_hw.pcie (gather with hw_facts, or declare the rack's topology)")
        return None
    return tree


def _is_vm(ctx, tree):
    virt = (ctx.hw.get("host") or {}).get("virtualization") if isinstance(ctx.hw.get("host"), dict) else None
    return tree.flat() or (virt not in (None, "none") and not str(virt).startswith(("docker", "podman", "container")))


def _flat_warning(ctx, tree, what):
    gpus = [g["bdf"] for g in tree.of_kind("gpu") if not tree.chain(g["bdf"])]
    ctx.report("warn", "GPU %s on the root bus" % ", ".join(gpus), what,
               "cannot verify %s: GPU %s sits on the virtual machine's root bus, so its physical PCIe path "
               "(root port, switches, their links and ACS) is the hypervisor's and not visible here" % (what, ", ".join(gpus)),
               "run the check on the hypervisor host (bare metal), or declare the physical topology in dlrack_hw.pcie")


def check_path_link(ctx):
    tree = _tree_or_skip(ctx)
    if tree is None:
        return
    ends = tree.of_kind("gpu", "nic", "nvme")
    if not ends:
        ctx.skip("no GPU, NIC or NVMe device in the PCIe tree")
        return
    labels = _labels(ctx.hw, tree)
    declared = tree.source == "declared" or ctx.hw.get("source") == "declared"
    flat = tree.flat()
    bad, unknown, ok = [], [], 0
    for dev in ends:
        problems, unk = path_problems(tree, dev)
        if declared:
            problems = [p for p in problems if p[0] == "narrow"]
        for kind, where, text in problems:
            bad.append("%s: %s" % (labels.get(_norm(dev["bdf"])), text))
        if unk and not declared and not (flat and not tree.chain(dev["bdf"])):
            # on a VM's root bus (flat): the hypervisor's path, said once by _flat_warning, not per virtual device
            unknown.append(labels.get(_norm(dev["bdf"])))
        if not problems and not unk:
            ok += 1
    if tree.flat():
        _flat_warning(ctx, tree, "the links above the GPU")
    if bad:
        ctx.report("fail", "; ".join(bad[:12]) + (" (+%d)" % (len(bad) - 12) if len(bad) > 12 else ""),
                   "every hop at the lower of its two ends' width and speed; no narrower hop above a device",
                   "%d PCIe path problem(s) on GPU/NIC/NVMe paths: %s" % (len(bad), "; ".join(bad[:12])),
                   "reseat the card or riser at the named link, check the slot's bifurcation and link speed settings "
                   "in the BIOS, move an x16 device off a switch whose uplink is narrower (an idle GPU's own link "
                   "at 2.5 GT/s is normal and not reported)")
    if unknown:
        ctx.report("warn", "unknown for %s" % ", ".join(unknown[:12]), "link width at every hop",
                   "cannot verify the links of %s: the width of a hop on their path is unknown" % ", ".join(unknown[:12]),
                   "run hw_facts on the host (sysfs current/max_link_width), or declare the links in dlrack_hw.pcie")
    if not bad and not unknown and not tree.flat():
        ctx.report("pass", "%d paths" % ok, "every hop at the lower of both ends",
                   "all %d GPU/NIC/NVMe paths run every hop at its capability" % ok)


def check_acs(ctx):
    tree = _tree_or_skip(ctx)
    if tree is None:
        return
    gpus = sorted(_norm(g["bdf"]) for g in tree.of_kind("gpu"))
    if not gpus:
        ctx.skip("no GPU in the PCIe tree")
        return
    nics = sorted(_norm(n["bdf"]) for n in tree.rdma_nics())
    pairs = [(a, b) for i, a in enumerate(gpus) for b in gpus[i + 1:]] + [(g, n) for g in gpus for n in nics]
    if not pairs:
        ctx.skip("one GPU and no RDMA NIC: no peer-to-peer path to judge")
        return
    labels = _labels(ctx.hw, tree)
    bad, unreadable, judged = acs_problems(tree, pairs)
    if tree.flat():
        _flat_warning(ctx, tree, "ACS on the GPU's peer-to-peer paths")
        return
    if bad:
        shown = ["%s <-> %s: %s on port %s" % (labels.get(a), labels.get(b), "+".join(on), port) for a, b, port, on in bad]
        ctx.report("fail", "; ".join(shown[:8]) + (" (+%d)" % (len(shown) - 8) if len(shown) > 8 else ""),
                   "no ACS request/completion redirect or egress control on a GPU-GPU or GPU-NIC path",
                   "ACS redirects peer-to-peer traffic up to the root complex on %d path(s): %s (NCCL slows down "
                   "or hangs, GPUDirect RDMA loses its direct path)" % (len(bad), "; ".join(shown[:8])),
                   "turn ACS off on the named switch ports (BIOS 'PCIe ACS' / 'ACS control' disabled, or clear the "
                   "port's ACS control register at boot: setpci -s <port> ECAP_ACS+0x6.w=0000) unless the host "
                   "passes these devices to separate VMs")
    ports = sorted(set(p for dummy, dummy2, p in unreadable))
    if ports:
        ctx.report("warn", "unreadable on %s" % ", ".join(ports[:8]), "ACS control readable",
                   "cannot verify ACS on %d switch port(s) of GPU peer paths (%s): their extended config space was "
                   "not readable" % (len(ports), ", ".join(ports[:8])),
                   "run hw_facts with become: true (the kernel shows the extended config space to root only)")
    if not bad and not ports:
        ctx.report("pass", "%d pair(s) under a switch" % judged if judged else "no pair under a switch",
                   "no ACS redirect on GPU-GPU / GPU-NIC paths",
                   ("no ACS redirect on the %d GPU-GPU/GPU-NIC path(s) that stay below the host bridge" % judged) if judged
                   else "no GPU-GPU or GPU-NIC pair shares a PCIe switch: their traffic crosses the host bridge, "
                        "where ACS does not change the route")


def check_switches(ctx):
    tree = _tree_or_skip(ctx)
    if tree is None:
        return
    found = switch_oversubscription(tree)
    if not switches(tree):
        ctx.skip("no PCIe switch on a GPU/NIC/NVMe path")
        return
    limit = ctx.th["pcie_switch_oversubscription_max"]
    gpus_below = {}
    for gpu in tree.of_kind("gpu"):
        for anc in tree.chain(gpu["bdf"]):
            gpus_below[anc] = gpus_below.get(anc, 0) + 1

    def text(usp, down, up, unit):
        line = _ratio_text(usp, down, up, unit)
        if unit == "lanes" and gpus_below.get(usp):
            line = line[:-1] + ", %g lanes per GPU to the host)" % (float(up) / gpus_below[usp])
        return line
    over = [(usp, down, up, unit) for usp, down, up, unit in found if up and float(down) / up > limit]
    if over:
        shown = [text(u, d, w, unit) for u, d, w, unit in over]
        ctx.report("fail", "; ".join(shown), "<= %g:1" % limit,
                   "PCIe switch(es) oversubscribed: %s; host-to-device copies of the devices below share the uplink"
                   % "; ".join(shown),
                   "spread GPUs/NVMe over more switches or root ports, or use a platform whose switch uplinks are "
                   "x16 per x16 device (raise pcie_switch_oversubscription_max where the design accepts it)")
    elif len(found) < len(switches(tree)):
        ctx.report("warn", "unknown", "<= %g:1" % limit,
                   "cannot verify %d PCIe switch(es): a port width is unknown" % (len(switches(tree)) - len(found)),
                   "run hw_facts on the host, or declare the switch ports' links in dlrack_hw.pcie")
    else:
        ctx.report("pass", "; ".join(text(u, d, w, unit) for u, d, w, unit in found), "<= %g:1" % limit,
                   "%d PCIe switch(es) within %g:1 downstream to uplink lanes" % (len(found), limit))


def _ratio_text(usp, down, up, unit):
    if unit == "lanes":
        return "%s: x%d downstream on an x%d uplink (%.1f:1)" % (usp, down, up, float(down) / up)
    return "%s: %.1f GB/s downstream on a %.1f GB/s uplink (%.1f:1)" % (usp, down, up, float(down) / up)


def check_lane_budget(ctx):
    tree = _tree_or_skip(ctx)
    if tree is None:
        return
    budget = lane_budget(tree)
    if not budget:
        if tree.flat():
            _flat_warning(ctx, tree, "the CPU lanes taken per socket")
        else:
            ctx.skip("no root port above a GPU/NIC/NVMe device")
        return
    lanes, sockets = ctx.hw["cpu"].get("pcie_lanes"), ctx.hw["cpu"].get("sockets")
    used = sum(v[0] for v in budget.values())
    blind = sum(v[2] for v in budget.values())
    counts = {}
    for dummy, kinds, dummy2 in budget.values():
        for kind, num in kinds.items():
            counts[kind] = counts.get(kind, 0) + num
    what = ", ".join("%d %s" % (n, k) for k, n in sorted(counts.items()))
    if lanes is None:
        ctx.report("warn", "%d lanes taken (%s)" % (used, what), "<= the CPU lanes",
                   "cannot verify the lane budget: the CPU's PCIe lanes are unknown",
                   "declare dlrack_hw.cpu.pcie_lanes for this platform, or add the model to the catalogue")
        return
    nodes = [n for n in budget if n is not None]
    numa = ctx.hw["cpu"].get("numa_nodes") or []
    per_socket = sockets and len([n for n in numa if n.get("cpus")]) == sockets and len(nodes) == len(budget)
    over = []
    if per_socket:
        share = lanes // sockets
        for node in sorted(nodes):
            if budget[node][0] > share:
                over.append("NUMA node %d: %d of %d" % (node, budget[node][0], share))
        detail = "; ".join("node %d: %d of %d lanes" % (n, budget[n][0], share) for n in sorted(nodes))
    else:
        if used > lanes:
            over.append("%d of %d" % (used, lanes))
        detail = "%d of %d lanes" % (used, lanes)
    if over:
        ctx.report("fail", "; ".join(over), "root-port lanes <= CPU lanes per socket",
                   "the root ports feeding GPUs, NICs and NVMe (%s) take more lanes than the CPU has: %s"
                   % (what, "; ".join(over)),
                   "move devices to the other socket, use fewer NVMe/NIC slots, or a platform with more lanes")
    elif blind:
        ctx.report("warn", "at least " + detail, "<= CPU lanes per socket",
                   "cannot verify the lane budget fully: root ports feeding %s take at least %s; %d root port(s) "
                   "of unknown width" % (what, detail, blind),
                   "run hw_facts on the host (sysfs link widths of the root ports), or declare them in dlrack_hw.pcie")
    else:
        ctx.report("pass", detail, "<= CPU lanes per socket",
                   "root ports feeding %s take %s" % (what, detail))


def check_bar1(ctx):
    tree = _tree_or_skip(ctx)
    if tree is None:
        return
    gpus = [g for g in ctx.hw.get("gpus") or [] if tree.get(g.get("pci_bus_id"))]
    if not gpus:
        ctx.skip("no GPU of dlrack_hw.gpus in the PCIe tree")
        return
    bad, unknown, ok = [], [], []
    for g in gpus:
        size, most = bar1(tree.get(g["pci_bus_id"]))
        mem = g.get("memory_mb")
        label = "GPU%s %s" % (g.get("index"), _norm(g["pci_bus_id"]))
        if size is None or not mem:
            unknown.append(label)
        elif size < mem * (1 << 20):
            allows = " (Resizable BAR allows %s)" % human_bytes(most) if most and most > size else ""
            bad.append("%s BAR1 %s for %s VRAM%s" % (label, human_bytes(size), human_bytes(mem << 20), allows))
        else:
            ok.append("%s %s" % (label, human_bytes(size)))
    if bad:
        ctx.report("fail", "; ".join(bad), "BAR1 >= GPU memory",
                   "BAR1 smaller than the GPU's memory on %s: GPUDirect RDMA/P2P can map only that window" % "; ".join(bad),
                   "enable Above 4G Decoding and Resizable BAR (Re-Size BAR Support) in the BIOS; on a VM, give the "
                   "guest a 64-bit MMIO window larger than the GPUs' memory")
    if unknown:
        ctx.report("warn", "unknown for %s" % ", ".join(unknown), "BAR1 >= GPU memory",
                   "cannot verify BAR1 of %s (BAR sizes or the GPU memory unknown)" % ", ".join(unknown),
                   "gather with hw_facts (sysfs resource files)")
    if ok and not bad and not unknown:
        ctx.report("pass", "; ".join(ok), "BAR1 >= GPU memory", "BAR1 covers the GPU memory on all %d GPUs" % len(ok))


IOMMU_MEANING = {
    "off": "no DMA translation: GPUDirect RDMA and P2P work directly",
    "passthrough": "identity mapping for host devices: GPUDirect RDMA and P2P work directly",
    "translated": "every DMA is translated: GPUDirect RDMA and P2P need ATS or go through the root complex; "
                  "NVIDIA recommends iommu=pt (passthrough) or the IOMMU off for bare-metal GPU hosts",
    "unknown": "the kernel does not say",
}


def check_iommu(ctx):
    pcie = ctx.hw.get("pcie") if isinstance(ctx.hw.get("pcie"), dict) else {}
    iommu = pcie.get("iommu") if isinstance(pcie.get("iommu"), dict) else None
    if ctx.hw.get("pcie") is None:
        return
    if not ctx.hw.get("gpus"):
        ctx.skip("no GPUs")
        return
    if iommu is None or iommu.get("mode") is None:
        ctx.skip("IOMMU mode not gathered (dlrack_hw.pcie.iommu)")
        return
    mode = iommu["mode"]
    where = " (cmdline: %s)" % " ".join(iommu.get("cmdline") or []) if iommu.get("cmdline") else ""
    tree = host_tree(ctx)
    if mode == "translated":
        ctx.report("fail", mode + where, "off or passthrough",
                   "IOMMU in translated mode: %s" % IOMMU_MEANING[mode],
                   "boot with iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=on iommu=pt), or disable the IOMMU "
                   "where no VM needs it")
    elif mode == "unknown":
        ctx.report("warn", "unknown" + where, "off or passthrough",
                   "cannot verify the IOMMU mode: IOMMU groups exist but their type and the kernel command line do not say",
                   "check /sys/kernel/iommu_groups/*/type (identity = passthrough) on the host")
    elif tree.flat() and mode == "off":
        ctx.report("warn", "off in the guest", "off or passthrough",
                   "cannot verify the IOMMU that matters: the guest shows none, the hypervisor's IOMMU maps the "
                   "passed-through GPU (its mode is not visible here)", "check the hypervisor host's IOMMU mode")
    else:
        ctx.report("pass", mode + where, "off or passthrough", "IOMMU %s: %s" % (mode, IOMMU_MEANING[mode]))


def check_nic_affinity(ctx):
    tree = _tree_or_skip(ctx)
    if tree is None:
        return
    if not tree.of_kind("gpu"):
        ctx.skip("no GPU in the PCIe tree")
        return
    if not tree.rdma_nics():
        ctx.skip("no RDMA NIC: single-node training only")
        return
    labels = _labels(ctx.hw, tree)
    near = nearest_nics(tree)
    far = ["%s: nearest %s is %s" % (labels.get(e["gpu"]), labels.get(e["nic"]), e["legend"]) for e in near
           if e["legend"] == "SYS" and not e["unknown"]]
    # a GPU whose every known NIC is across the sockets, or none known, while a NIC's NUMA node is unknown
    unsure = [labels.get(e["gpu"]) for e in near if e["unknown"] and e["legend"] in (None, "SYS")]
    shown = "; ".join("%s -> %s %s" % (labels.get(e["gpu"]), labels.get(e["nic"]), e["legend"]) for e in near if e["nic"])
    if far:
        ctx.report("fail", "; ".join(far), "an RDMA NIC on the GPU's own socket (NODE or closer)",
                   "%d GPU(s) reach every RDMA NIC only across the socket interconnect: %s" % (len(far), "; ".join(far)),
                   "put an RDMA NIC on each socket that holds GPUs (same NUMA node), and bind each rank to its nearest NIC")
    if unsure:
        ctx.report("warn", "NUMA node unknown for %s" % ", ".join(unsure[:8]), "NODE or closer",
                   "cannot verify the NIC affinity of %s: its RDMA NICs sit behind other host bridges and the NUMA node "
                   "of the GPU or the NIC is unknown (sysfs numa_node -1, lspci without NUMA lines)" % ", ".join(unsure[:8]),
                   "gather with hw_facts on the host (sysfs numa_node), or declare numa_node for the devices in dlrack_hw.pcie")
    if not far and not unsure:
        ctx.report("pass", shown, "NODE or closer", "every GPU has an RDMA NIC on its own socket: %s" % shown)


def check_rail_alignment(ctx):
    tree = host_tree(ctx)
    declared = declared_doc(ctx)
    rail = ((ctx.hw.get("fabric") or {}).get("rail_optimized") if isinstance(ctx.hw.get("fabric"), dict) else None)
    if rail is None and isinstance(declared.get("fabric"), dict):
        rail = declared["fabric"].get("rail_optimized")
    if not rail:
        if ctx.hw.get("pcie") is not None:
            ctx.skip("the node is not declared rail-optimized (dlrack_hw.fabric.rail_optimized)")
        return
    if not tree.devices or not tree.of_kind("gpu"):
        ctx.report("warn", "no PCIe tree", "one RDMA NIC per GPU at PXB or closer",
                   "cannot verify rail alignment: no PCIe tree with the GPUs",
                   "gather with hw_facts, or declare the topology in dlrack_hw.pcie")
        return
    if tree.flat():
        _flat_warning(ctx, tree, "rail alignment")
        return
    labels = _labels(ctx.hw, tree)
    aligned, problems = rail_alignment(tree)
    if problems:
        shown = ["%s: %s" % (labels.get(g), text) for g, text in problems]
        ctx.report("fail", "; ".join(shown), "one RDMA NIC per GPU at PXB or closer",
                   "rail-optimized node without a NIC of its own for %d GPU(s): %s" % (len(shown), "; ".join(shown)),
                   "install one RDMA NIC under each GPU's PCIe switch (the HGX/DGX rail layout), or declare the node "
                   "not rail-optimized")
    else:
        ctx.report("pass", "; ".join("%s -> %s %s" % (labels.get(g), labels.get(n), lg) for g, n, lg in aligned),
                   "one RDMA NIC per GPU at PXB or closer", "every GPU has its own RDMA NIC at PXB or closer")


# --------------------------------------------------------------------------------------------
# Power

def _gpu_limits(hw):
    """{pci bus id: limit entry} of dlrack_hw.power.gpus."""
    power = hw.get("power") if isinstance(hw.get("power"), dict) else {}
    out = {}
    for entry in power.get("gpus") or []:
        if isinstance(entry, dict) and _norm(entry.get("pci_bus_id")):
            out[_norm(entry["pci_bus_id"])] = entry
    return out


def _num(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def check_psu_capacity(ctx):
    power = ctx.hw.get("power")
    if not isinstance(power, dict):
        return
    gpus = ctx.hw.get("gpus") or []
    if not gpus:
        ctx.skip("no GPUs")
        return
    psus = [p for p in power.get("psus") or [] if isinstance(p, dict) and p.get("present") is not False]
    limits = _gpu_limits(ctx.hw)
    gpu_w = [_num((limits.get(_norm(g.get("pci_bus_id"))) or {}).get("limit_w")) for g in gpus]
    spec = ctx.hw.get("_cpu_spec") or {}
    sockets = ctx.hw["cpu"].get("sockets") or 1
    cpu_w = _num(power.get("cpu_tdp_w")) or (_num(spec.get("tdp_w")) * sockets if _num(spec.get("tdp_w")) else None)
    need_known = sum(w for w in gpu_w if w) + (cpu_w or 0)
    unknown = []
    if not psus:
        unknown.append("no power-supply table (SMBIOS type 39) was readable: a VM, an unprivileged run, or a board "
                       "that does not fill it")
    unknown.extend("PSU %s reports %s" % (p.get("location") or p.get("name") or "?", p.get("capacity_text") or "no capacity")
                   for p in psus if not _num(p.get("capacity_w")))
    missing = [("GPU%s" % g.get("index")) for g, w in zip(gpus, gpu_w) if not w]
    if missing:
        unknown.append("no power limit for %s" % ", ".join(missing))
    if cpu_w is None:
        unknown.append("CPU TDP unknown (model %r not in the catalogue)" % ctx.hw["cpu"].get("model"))
    caps = [_num(p.get("capacity_w")) for p in psus if _num(p.get("capacity_w"))]
    redundant = power.get("redundant")
    if redundant is None:
        redundant = len(caps) >= 2
    usable = (sum(caps) - max(caps)) if caps and redundant and len(caps) >= 2 else sum(caps)
    what = "%d W for GPUs (%s) + %s CPU" % (sum(w for w in gpu_w if w), "+".join("%d" % w for w in gpu_w if w) or "none",
                                            "%d W" % cpu_w if cpu_w else "unknown")
    supply = "%d W usable of %d PSU(s)%s" % (usable, len(caps), " (N+1: one may fail)" if redundant and len(caps) >= 2 else "")
    # a fail needs every present PSU's capacity: one reporting Unknown or 0 W may carry the difference
    if caps and len(caps) == len(psus) and need_known > usable:
        ctx.report("fail", "%s > %s" % (what, supply), "GPU power limits + CPU TDP <= usable PSU capacity",
                   "the power supplies cannot carry the GPUs' power limits and the CPUs' TDP: %s needed, %s" % (what, supply),
                   "fit larger or more PSUs (keep N+1 redundancy), or lower the GPUs' power limits (nvidia-smi -pl) "
                   "until they fit; fans, memory, NICs and drives come on top of this")
    elif unknown:
        ctx.report("warn", "; ".join(unknown), "GPU power limits + CPU TDP <= usable PSU capacity",
                   "cannot verify the power budget: %s" % "; ".join(unknown),
                   "run hw_facts as root on the bare-metal host (SMBIOS type 39), or declare dlrack_hw.power.psus "
                   "with each PSU's capacity_w")
    else:
        ctx.report("pass", "%s <= %s" % (what, supply), "GPU power limits + CPU TDP <= usable PSU capacity",
                   "the PSUs carry the GPUs' power limits and the CPUs' TDP: %s, %s" % (what, supply))


def check_power_caps(ctx):
    power = ctx.hw.get("power")
    if not isinstance(power, dict):
        return
    limits = _gpu_limits(ctx.hw)
    gpus = [g for g in ctx.hw.get("gpus") or [] if _norm(g.get("pci_bus_id")) in limits]
    if not gpus:
        ctx.skip("no GPU power limits gathered")
        return
    low, ok = [], []
    for g in gpus:
        entry = limits[_norm(g["pci_bus_id"])]
        limit, default = _num(entry.get("limit_w")), _num(entry.get("default_w"))
        label = "GPU%s %s" % (g.get("index"), _norm(g["pci_bus_id"]))
        if limit and default and limit < default:
            low.append("%s capped at %d W of its default %d W" % (label, limit, default))
        elif limit:
            ok.append("%s %d W" % (label, limit))
    if low:
        ctx.report("fail", "; ".join(low), "power limit = default",
                   "power capped below the default on %s: training runs slower than the card allows" % "; ".join(low),
                   "restore the default limit (nvidia-smi -pl <default> or remove the cap from the node's setup) unless "
                   "the cap is meant for the rack's power budget")
    elif ok:
        ctx.report("pass", "; ".join(ok), "power limit = default", "every GPU runs at its default power limit")
    else:
        ctx.skip("the GPUs' power limits are unknown (N/A)")


# --------------------------------------------------------------------------------------------
# Fabric: InfiniBand / RoCE ports

SICK_COUNTERS = ("symbol_error", "link_downed", "excessive_buffer_overrun_errors")


def _ports(doc):
    fabric = doc.get("fabric") if isinstance(doc, dict) and isinstance(doc.get("fabric"), dict) else {}
    return [p for p in fabric.get("ports") or [] if isinstance(p, dict)]


def _port_name(port):
    return "%s/%s" % (port.get("device"), port.get("port"))


def _declared_port_problems(want, got):
    problems = []
    state = want.get("state") or "ACTIVE"
    if str(got.get("state") or "").upper() != str(state).upper():
        problems.append("state %s (declared %s)" % (got.get("state"), state))
    for key, label in (("rate_gbps", "rate"), ("width", "width"), ("fw", "firmware"), ("link_layer", "link layer")):
        if want.get(key) is not None and str(want.get(key)).lower() != str(got.get(key)).lower() and \
                not (key == "rate_gbps" and _num(want.get(key)) == _num(got.get(key))):
            problems.append("%s %s (declared %s)" % (label, got.get(key), want.get(key)))
    missing = [k for k in want.get("pkeys") or [] if str(k).lower() not in [str(g).lower() for g in got.get("pkeys") or []]]
    if missing:
        problems.append("P_Key %s missing" % ", ".join(str(k) for k in missing))
    return problems


def check_ib_ports(ctx):
    if not isinstance(ctx.hw.get("fabric"), dict) or ctx.hw.get("fabric").get("ports") is None:
        return
    got = dict((_port_name(p), p) for p in _ports(ctx.hw))
    declared = _ports(declared_doc(ctx)) if ctx.hw.get("source") == "gathered" else []
    if not got and not declared:
        ctx.skip("no RDMA (InfiniBand/RoCE) port")
        return
    bad = []
    for want in declared:
        name = _port_name(want)
        if name not in got:
            bad.append("%s: declared, not found" % name)
            continue
        problems = _declared_port_problems(want, got[name])
        if problems:
            bad.append("%s: %s" % (name, ", ".join(problems)))
    if bad:
        ctx.report("fail", "; ".join(bad), "declared ports ACTIVE at the declared rate, width, firmware and P_Keys",
                   "RDMA port(s) differ from the declaration: %s" % "; ".join(bad),
                   "check the cable, the switch port and the subnet manager (ibstat, iblinkinfo); update the firmware "
                   "(mlxfwmanager) or the partition (P_Key) membership, or fix the declaration")
        return
    down = [n for n, p in sorted(got.items()) if str(p.get("state") or "").upper() != "ACTIVE"
            and n not in [_port_name(w) for w in declared]]
    shown = "; ".join("%s %s %s%s" % (n, p.get("state"), ("%g Gb/s" % p["rate_gbps"]) if p.get("rate_gbps") else "?",
                                      " %s" % p.get("link_layer") if p.get("link_layer") else "") for n, p in sorted(got.items()))
    if down:
        ctx.report("warn", shown, "ACTIVE",
                   "RDMA port(s) not ACTIVE and not declared: %s (an uncabled port is fine; a training port is not)"
                   % ", ".join(down),
                   "declare the ports this node must have in dlrack_hw.fabric.ports (state, rate_gbps, width, fw, pkeys) "
                   "so a down port fails, or cable it")
    else:
        ctx.report("pass", shown, "ACTIVE, as declared" if declared else "ACTIVE",
                   "%d RDMA port(s) ACTIVE%s" % (len(got), " and as declared" if declared else ""))


def check_ib_errors(ctx):
    if not isinstance(ctx.hw.get("fabric"), dict) or ctx.hw.get("fabric").get("ports") is None:
        return
    ports = [p for p in _ports(ctx.hw) if isinstance(p.get("counter_rates"), dict)]
    if not ports:
        ctx.skip("no RDMA port counters read twice in this run")
        return
    growing, total = [], []
    for port in ports:
        for name in SICK_COUNTERS:
            rate = port["counter_rates"].get(name)
            if isinstance(rate, dict) and (rate.get("delta") or 0) > 0:
                growing.append("%s %s +%d in %ss (%s/s)"
                               % (_port_name(port), name, rate["delta"], port.get("interval_s"), rate.get("per_s")))
            value = (port.get("counters") or {}).get(name)
            if value:
                total.append("%s %s %d" % (_port_name(port), name, value))
    if growing:
        ctx.report("fail", "; ".join(growing), "no symbol error, link down or buffer overrun during the run",
                   "RDMA link errors are growing now: %s" % "; ".join(growing),
                   "reseat or replace the cable/transceiver of the named port, check the switch side (ibqueryerrors); "
                   "drain the node from multi-node jobs until the counters stop")
    else:
        ctx.report("pass", "; ".join(total) or "0", "no growth during the run",
                   "no RDMA error counter grew during the %ss between the two reads%s"
                   % (ports[0].get("interval_s"), " (earlier totals: %s)" % "; ".join(total) if total else ""))


# --------------------------------------------------------------------------------------------
# The topology picture of the reports (report.topology): switches and RDMA NICs per NUMA node

PICTURE_ROWS = 6     # switch and NIC lines per column; more are summarised


def picture_items(hw):
    """{NUMA node: [line]} for the report's topology drawing: each PCIe switch on a GPU/NIC/NVMe path
    (what sits below it, its downstream-to-uplink ratio) and each RDMA NIC (its link and the GPUs
    nearest to it with the legend). Lines have the drawing's keys: kind, label, right, bad, fill, stroke."""
    pcie = hw.get("pcie") if isinstance(hw, dict) and isinstance(hw.get("pcie"), dict) else None
    if pcie is None:
        return {}
    tree = Tree(pcie)
    if not tree.devices:
        return {}
    labels = _labels(hw, tree)
    ratios = dict((u, (d, w, unit)) for u, d, w, unit in switch_oversubscription(tree))
    below = {}
    for dev in tree.of_kind(*ENDPOINTS):
        for anc in tree.chain(dev["bdf"]):
            below.setdefault(anc, []).append(dev.get("kind"))
    out = {}
    for usp in sorted(switches(tree)):
        kinds = below.get(usp, [])
        if "gpu" not in kinds and "nic" not in kinds:
            continue            # a storage-only switch: its drives are in the disk lines
        what = ", ".join("%d %s" % (kinds.count(k), k.upper() if k != "storage" else k) for k in ENDPOINTS if kinds.count(k))
        ratio = ratios.get(usp)
        right = "%.1f:1" % (float(ratio[0]) / ratio[1]) if ratio and ratio[1] else ""
        over = bool(ratio and ratio[1] and float(ratio[0]) / ratio[1] > 2.0)
        out.setdefault(tree.numa(usp), []).append({
            "kind": "switch", "label": "PCIe switch %s: %s" % (usp, what), "right": right, "bad": over,
            "fill": "#fff1e5", "stroke": "#cf222e" if over else "#bc4c00"})
    near = {}
    for entry in nearest_nics(tree):
        if entry["nic"]:
            near.setdefault(entry["nic"], []).append("%s %s" % (labels.get(entry["gpu"], entry["gpu"]).split(" ")[0], entry["legend"]))
    for nic in tree.rdma_nics():
        bdf = _norm(nic["bdf"])
        link = nic.get("link") or {}
        width = ("x%s" % link.get("width")) if link.get("width") else ""
        out.setdefault(tree.numa(bdf), []).append({
            "kind": "nic", "label": labels.get(bdf, bdf) + (" " + width if width else ""),
            "right": ", ".join(near.get(bdf, [])[:3]), "bad": False, "fill": "#eef6ff", "stroke": "#0969da"})
    for node, items in out.items():
        if len(items) > PICTURE_ROWS:
            more = len(items) - (PICTURE_ROWS - 1)
            out[node] = items[:PICTURE_ROWS - 1] + [{"kind": "more", "label": "+%d more switch/NIC lines" % more, "right": "",
                                                    "bad": False, "fill": "#ffffff", "stroke": "#8c959f"}]
    return out


# --------------------------------------------------------------------------------------------
# A gathered tree against the declared one

def tree_differences(declared, gathered):
    """[(address, what, declared, gathered)] between a declared ``pcie`` and a gathered one: every
    declared GPU, NIC and NVMe must be there with the same kind, the same legend to every other
    declared GPU/NIC (the topology, not the bus numbers of the bridges between them) and link
    capabilities at least those declared."""
    want, got = Tree(declared), Tree(gathered)
    ends = list(want.of_kind("gpu", "nic", "nvme"))
    out = []
    for dev in ends:
        bdf = _norm(dev["bdf"])
        have = got.get(bdf)
        if have is None:
            out.append((bdf, "device", dev.get("kind"), "absent"))
            continue
        if have.get("kind") != dev.get("kind"):
            out.append((bdf, "kind", dev.get("kind"), have.get("kind")))
        wl, gl = dev.get("link") or {}, have.get("link") or {}
        for key in ("width_max", "gen_max"):
            if wl.get(key) is not None and gl.get(key) is not None and gl[key] < wl[key]:
                out.append((bdf, key, wl[key], gl[key]))
    peers = [_norm(d["bdf"]) for d in ends if d.get("kind") in ("gpu", "nic") and got.get(d["bdf"]) is not None]
    for i, a in enumerate(peers):
        for b in peers[i + 1:]:
            dw, dg = distance(want, a, b), distance(got, a, b)
            if dw and dg and dw != dg:
                out.append(("%s <-> %s" % (a, b), "legend", dw, dg))
    return out


def check_matches_declared(ctx):
    declared = declared_doc(ctx) if ctx.hw.get("source") == "gathered" else {}
    if not isinstance(declared.get("pcie"), dict):
        return
    if ctx.hw.get("pcie") is None:
        ctx.report("warn", "not gathered", "the declared topology",
                   "cannot verify the declared PCIe topology: the gathered document has no pcie section",
                   "gather with a hw_facts that reads the PCIe tree (dlrack.node >= the release with issue 32)")
        return
    diffs = tree_differences(declared["pcie"], ctx.hw["pcie"])
    if diffs:
        shown = ["%s %s: declared %s, gathered %s" % d for d in diffs]
        ctx.report("fail", "; ".join(shown[:10]) + (" (+%d)" % (len(shown) - 10) if len(shown) > 10 else ""),
                   "the declared topology", "the PCIe topology differs from the declaration: %s" % "; ".join(shown[:10]),
                   "move the cards to the declared slots (a GPU and its NIC under one switch for GPUDirect RDMA), "
                   "replace the part, or fix the declaration")
    else:
        n = len(list(Tree(declared["pcie"]).of_kind("gpu", "nic", "nvme")))
        ctx.report("pass", "%d devices as declared" % n, "the declared topology",
                   "the %d declared GPU/NIC/NVMe devices sit where declared, with the declared legends between them" % n)
