# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""AMD (vendor 0x1002) and Hygon (0x1d94) PCI device ids -> what the device is: the data of
hw/gpu/amd.py.

Source of every row: pciutils' pci.ids, github.com/pciutils/pciids ``pci.ids`` @
c1c12547d626ebf05fd0223144ad87fab5e95d06 (2026-08-22), the lines under vendor ``1002`` quoted in
the comments. The tools' names are a fallback only: on real machines they print board names
(``AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2``, ``Aldebaran``) that no catalogue knows.

``MODELS``: device id -> the catalogue model (plugin_utils/data/gpus.yml), or a tuple of the models
one device id is sold as (``740c`` is an MI250X or an MI250: a name from the tools picks one; else
the model stays unknown). ``GCDS``: graphics compute dies the kernel lists as PCI devices per
package, where more than one (the MI200 OAM parts). ``APUS``: the integrated GPUs of Ryzen/EPYC
processors; never counted as accelerators.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

MODELS = {
    "0x738c": "AMD Instinct MI100",                        # 738c  Arcturus GL-XL [Instinct MI100]
    "0x738e": "AMD Instinct MI100",                        # 738e  Arcturus GL-XL [Instinct MI100]
    "0x66a1": ("AMD Radeon Pro VII", "AMD Radeon Instinct MI50"),   # 66a1  Vega 20 [Radeon Pro VII/Radeon Instinct MI50]
    "0x7408": "AMD Instinct MI250X",                       # 7408  Aldebaran/MI200 [Instinct MI250X]
    "0x740c": ("AMD Instinct MI250X", "AMD Instinct MI250"),  # 740c  Aldebaran/MI200 [Instinct MI250X/MI250]
    "0x740f": "AMD Instinct MI210",                        # 740f  Aldebaran/MI200 [Instinct MI210]
    "0x74a0": "AMD Instinct MI300A",                       # 74a0  Aqua Vanjaram [Instinct MI300A]
    "0x74a1": "AMD Instinct MI300X",                       # 74a1  Aqua Vanjaram [Instinct MI300X]
    "0x74a2": "AMD Instinct MI308X",                       # 74a2  Aqua Vanjaram [Instinct MI308X]
    "0x74a5": "AMD Instinct MI325X",                       # 74a5  Aqua Vanjaram [Instinct MI325X]
    "0x74a9": "AMD Instinct MI300X",                       # 74a9  Aqua Vanjaram [Instinct MI300X HF]
    "0x74bd": "AMD Instinct MI300X",                       # 74bd  Aqua Vanjaram [Instinct MI300X HF]
    "0x75a0": "AMD Instinct MI350X",                       # 75a0  Aqua Vanjaram [Instinct MI350X]
    "0x75a3": "AMD Instinct MI355X",                       # 75a3  Aqua Vanjaram [Instinct MI355X]
}

GCDS = {"0x7408": 2, "0x740c": 2}

APUS = frozenset((
    "0x1114",   # Krackan [Radeon 840M / 860M Graphics]
    "0x1304", "0x130f", "0x1313", "0x131c",  # Kaveri [Radeon R7 Graphics]
    "0x13c0",   # Granite Ridge [Radeon Graphics]
    "0x1506",   # Mendocino [Radeon 610M]
    "0x150e",   # Strix [Radeon 880M / 890M]
    "0x1586",   # Strix Halo [Radeon Graphics / Radeon 8050S Graphics / Radeon 8060S Graphics]
    "0x15bf",   # Phoenix1
    "0x15c8",   # Phoenix2
    "0x15d8",   # Picasso/Raven 2 [Radeon Vega Series / Radeon Vega Mobile Series]
    "0x15dd",   # Raven Ridge [Radeon Vega Series / Radeon Vega Mobile Series]
    "0x15e7",   # Barcelo
    "0x1636",   # Renoir [Radeon Vega Series / Radeon Vega Mobile Series]
    "0x1638",   # Cezanne [Radeon Vega Series / Radeon Vega Mobile Series]
    "0x163f",   # VanGogh [AMD Custom GPU 0405]
    "0x164c",   # Lucienne
    "0x164d",   # Rembrandt
    "0x164e",   # Raphael
    "0x164f",   # Phoenix
    "0x1681",   # Rembrandt [Radeon 680M]
    "0x1900",   # HawkPoint1
    "0x1901",   # HawkPoint2
    "0x9874",   # Wani [Radeon R5/R6/R7 Graphics]
    "0x98e4",   # Stoney [Radeon R2/R3/R4/R5 Graphics]
))


def model_of(device_id, *names):
    """The model of a device id; where the id is sold as several models, the one that a tool's
    or the board's name names (its last word token equal: 'MI250' is not 'MI250X'); else None."""
    want = MODELS.get(str(device_id or "").lower())
    if want is None or isinstance(want, str):
        return want
    for name in names:
        words = set(str(name or "").upper().replace("[", " ").replace("]", " ").replace("/", " ").split())
        hits = [m for m in want if m.upper().split()[-1] in words]
        if len(hits) == 1:
            return hits[0]
    return None
