#!/usr/bin/env python3
"""sf_files.py - the structure-factor files of tests/cli/sf-files.bats, written
by cctbx (Debian's dials package): an asymmetric unit of P 21 21 21 to 1.65 A
(~5000 reflections) whose values are exact in float32 and as short decimals
(multiples of 1/8), as

  x.mtz        FP, FC (type F), I = FP^2 (J), FA(+),FA(-) (G), IA(+),IA(-) = FA^2 (K)
  x.cif        FP as mmCIF (_refln.F_meas), with _cell and the H-M name
  p1.hkl       FP expanded to P1 by cctbx with its Friedel mates: 'h k l F' lines
  p1_fc.hkl    FC the same way
  p1_anom.hkl  FA(+),FA(-) expanded to P1 by cctbx, the two hands apart

and, for other space groups (centred, screw axes, hexagonal, rhombohedral,
centrosymmetric, cubic), to 3 A: sg_TAG_f.mtz, sg_TAG_f.cif and sg_TAG_f.hkl
(amplitudes F, its P1 list with Friedel mates), sg_TAG_a.mtz and sg_TAG_a.hkl
(an anomalous pair F(+),F(-), its P1 list); TAGs in the file SPACE_GROUPS.

Usage: sf_files.py DIR
"""
import os
import sys

from cctbx import crystal, miller
from cctbx.array_family import flex
import iotbx.cif

out = sys.argv[1]
cs = crystal.symmetry(unit_cell=(30, 34, 38, 90, 90, 90), space_group_symbol="P 21 21 21")
ms = miller.build_set(cs, anomalous_flag=False, d_min=1.65)
n = ms.size()
fp = miller.array(ms, data=flex.double([((i * 37) % 800 + 1) / 8.0 for i in range(n)]))
fp.set_observation_type_xray_amplitude()
fc = fp.customized_copy(data=flex.double([((i * 53) % 640 + 3) / 8.0 for i in range(n)]))
fc.set_observation_type_xray_amplitude()
inten = fp.customized_copy(data=fp.data() * fp.data()).set_observation_type_xray_intensity()

ma = miller.build_set(cs, anomalous_flag=True, d_min=1.65)
idx = ma.indices()
fa = miller.array(ma, data=flex.double([((h * 7 + k * 13 + l * 29 + 4000) % 800 + 1) / 8.0 for h, k, l in idx]))
fa.set_observation_type_xray_amplitude()
ia = fa.customized_copy(data=fa.data() * fa.data()).set_observation_type_xray_intensity()

d = fp.as_mtz_dataset(column_root_label="FP")
d.add_miller_array(fc, column_root_label="FC")
d.add_miller_array(inten, column_root_label="I")
d.add_miller_array(fa, column_root_label="FA")
d.add_miller_array(ia, column_root_label="IA")
d.mtz_object().write(os.path.join(out, "x.mtz"))

block = iotbx.cif.miller_arrays_as_cif_block(fp, array_type="meas", format="mmcif").cif_block
cif = iotbx.cif.model.cif()
cif["x"] = block
with open(os.path.join(out, "x.cif"), "w") as f:
    f.write(str(cif))


def write_p1(array, name):
    with open(os.path.join(out, name), "w") as f:
        for (h, k, l), v in zip(array.indices(), array.data()):
            f.write("%d %d %d %.17g\n" % (h, k, l, v))


write_p1(fp.expand_to_p1().generate_bijvoet_mates(), "p1.hkl")
write_p1(fc.expand_to_p1().generate_bijvoet_mates(), "p1_fc.hkl")
anom = fa.expand_to_p1()
values = dict(zip(anom.indices(), anom.data()))
apart = sum(1 for (h, k, l), v in values.items() if values.get((-h, -k, -l), v) != v)
assert apart > 1000, "the anomalous test data have too few Bijvoet differences: %d" % apart
write_p1(anom, "p1_anom.hkl")
print(n, fa.size(), anom.size())

GROUPS = [("c2", "C 1 2 1", (40, 50, 60, 90, 100, 90)), ("p6122", "P 61 2 2", (50, 50, 90, 90, 90, 120)),
          ("r3", "R 3 :H", (60, 60, 80, 90, 90, 120)), ("i41a", "I 41/a", (50, 50, 70, 90, 90, 90)),
          ("f23", "F 2 3", (90, 90, 90, 90, 90, 90)), ("p1bar", "P -1", (30, 35, 40, 80, 85, 95))]
for tag, symbol, cell in GROUPS:
    s = crystal.symmetry(unit_cell=cell, space_group_symbol=symbol)
    for anomalous in (False, True):
        a = miller.build_set(s, anomalous_flag=anomalous, d_min=3.0)
        a = miller.array(a, data=flex.double([((h * 7 + k * 13 + l * 29 + 4000) % 800 + 1) / 8.0
                                              for h, k, l in a.indices()]))
        a.set_observation_type_xray_amplitude()
        kind = "a" if anomalous else "f"
        name = os.path.join(out, "sg_%s_%s" % (tag, kind))
        a.as_mtz_dataset(column_root_label="F").mtz_object().write(name + ".mtz")
        if anomalous:
            write_p1(a.expand_to_p1(), "sg_%s_a.hkl" % tag)
            continue
        write_p1(a.expand_to_p1().generate_bijvoet_mates(), "sg_%s_f.hkl" % tag)
        c = iotbx.cif.model.cif()
        c["x"] = iotbx.cif.miller_arrays_as_cif_block(a, array_type="meas", format="mmcif").cif_block
        with open(name + ".cif", "w") as f:
            f.write(str(c))
with open(os.path.join(out, "SPACE_GROUPS"), "w") as f:
    f.write("".join("%s %s\n" % (tag, symbol.replace(" ", "_")) for tag, symbol, cell in GROUPS))
