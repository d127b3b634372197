#!/usr/bin/env python3
"""sf_model_check.py - the structure factors nb-hkl -model put in a grid
(an Fdump.bin, nb-hkl -dump), against cctbx's of the same model: an
independent calculation (cctbx's direct summation over the atoms and the
space group's operators, the same International Tables 1992 form factors as
gemmi's, B factors isotropic or anisotropic, occupancies), expanded to P1
with Friedel mates by cctbx.  tests/cli/sf-model.bats runs it; the figures
of docs/architecture.md section 14 are its output.

Usage: sf_model_check.py [--gates MIN_CC MAX_REL] MODEL FDUMP DMIN [MODEL FDUMP DMIN ...]

Prints one line per model: the reflections compared, the correlation of the two F's,
R = sum |F_nb - F_cctbx| / sum F_cctbx, the largest |F_nb - F_cctbx| over the
largest F, and the largest relative difference |F_nb - F_cctbx| / F_cctbx
among the reflections with F_cctbx above a tenth of the mean.  Every index
inside DMIN (not 0 0 0, not absent by symmetry) must hold cctbx's value to
the gates, every other index of the grid 0.  With --gates: exit 1 when a
model's correlation is below MIN_CC, its largest relative difference above
MAX_REL, or an index is missing or extra; indices within 1e-6 of DMIN may be
in either set."""
import struct
import sys

import iotbx.pdb
from cctbx.array_family import flex


def read_fdump(path):
    data = open(path, "rb").read()
    head, body = data.split(b"\n\f", 1)
    h0, h1, k0, k1, l0, l1 = map(int, head.split())
    dims = (h1 - h0 + 2, k1 - k0 + 2, l1 - l0 + 2)
    values = struct.unpack("<%dd" % (dims[0] * dims[1] * dims[2]), body[:8 * dims[0] * dims[1] * dims[2]])
    grid = {}
    for ih in range(dims[0] - 1):
        for ik in range(dims[1] - 1):
            base = (ih * dims[1] + ik) * dims[2]
            for il in range(dims[2] - 1):
                v = values[base + il]
                if v != 0.0:
                    grid[(h0 + ih, k0 + ik, l0 + il)] = v
    return grid


def check(model, fdump, dmin):
    """The figures of one model, printed; whether its grid is complete and exact."""
    xrs = iotbx.pdb.input(file_name=model).xray_structure_simple()
    xrs.scattering_type_registry(table="it1992")
    fc = xrs.structure_factors(d_min=dmin * (1 - 1e-6), algorithm="direct").f_calc()
    ref = abs(fc).expand_to_p1().generate_bijvoet_mates()
    d = ref.d_spacings().data()
    theirs = dict(zip(ref.indices(), ref.data()))
    edge = {hkl for hkl, dd in zip(ref.indices(), d) if dd < dmin * (1 + 1e-6)}
    ours = read_fdump(fdump)
    missing = [hkl for hkl in theirs if hkl not in ours and hkl not in edge and theirs[hkl] > 1e-3]
    extra = [hkl for hkl in ours if hkl not in theirs]
    both = [hkl for hkl in theirs if hkl in ours]
    a = flex.double([ours[hkl] for hkl in both])
    b = flex.double([theirs[hkl] for hkl in both])
    cc = flex.linear_correlation(a, b).coefficient()
    r = flex.sum(flex.abs(a - b)) / flex.sum(b)
    worst_abs = flex.max(flex.abs(a - b)) / flex.max(b)
    strong = b > 0.1 * flex.mean(b)
    worst_rel = flex.max(flex.abs(a - b).select(strong) / b.select(strong))
    print("%s (%s): %d reflections (P1, d >= %g A): correlation %.8f, R %.2e, max |dF|/max F %.2e, "
          "max |dF|/F %.2e (F > mean/10: %d), %d missing, %d extra"
          % (model, xrs.space_group_info(), len(both), dmin, cc, r, worst_abs, worst_rel, strong.count(True),
             len(missing), len(extra)))
    if missing:
        print("  missing from the grid, e.g. %s F %g" % (missing[0], theirs[missing[0]]))
    if extra:
        print("  in the grid, not in cctbx's set, e.g. %s F %g" % (extra[0], ours[extra[0]]))
    return cc, worst_rel, not missing and not extra


def main():
    args = sys.argv[1:]
    gates = None
    if args[:1] == ["--gates"]:
        gates, args = (float(args[1]), float(args[2])), args[3:]
    if not args or len(args) % 3:
        sys.exit(__doc__)
    ok = True
    for i in range(0, len(args), 3):
        cc, worst_rel, complete = check(args[i], args[i + 1], float(args[i + 2]))
        if gates and (cc < gates[0] or worst_rel > gates[1] or not complete):
            ok = False
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
