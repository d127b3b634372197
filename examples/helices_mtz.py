#!/usr/bin/env python3
"""helices_mtz.py - writes examples/helices.mtz, the MTZ file of README.md's
"MTZ and mmCIF reflection files" example, from examples/helices.pdb (the
made-up three-helix bundle in P 21 21 21 that helices.py builds), with cctbx
(Debian's dials package; /usr/bin/python3 there).

Its columns, the asymmetric unit of P 21 21 21 to 3 A (2084 reflections):

  FC, PHIFC   F calculated from the model (cctbx's direct summation, no
              solvent), the F of `nb-hkl -model helices.pdb -dmin 3` within
              gemmi's and cctbx's agreement
  FP, SIGFP   a made-up measurement of them: FC times 1 + 0.05 g, g a
              Gaussian deviate of Python's generator seeded with 45, with
              SIGFP = 0.05 FC + 0.5

so that nb-hkl has two amplitude columns to choose from (-column FP).  Run
again it writes the same file but for the columns' creation times (COLSRC).

    /usr/bin/python3 examples/helices_mtz.py examples/helices.pdb examples/helices.mtz
"""
import random
import sys

import iotbx.pdb

DMIN = 3.0
ERROR = 0.05
SEED = 45


def main(pdb_path, mtz_path):
    structure = iotbx.pdb.input(file_name=pdb_path).xray_structure_simple()
    fc = structure.structure_factors(d_min=DMIN, algorithm="direct").f_calc()
    amplitudes = fc.amplitudes()
    rng = random.Random(SEED)
    fp = [max(0.0, f * (1.0 + ERROR * rng.gauss(0.0, 1.0))) for f in amplitudes.data()]
    sigfp = [ERROR * f + 0.5 for f in amplitudes.data()]
    from cctbx.array_family import flex
    measured = amplitudes.customized_copy(data=flex.double(fp), sigmas=flex.double(sigfp))
    measured.set_observation_type_xray_amplitude()
    dataset = measured.as_mtz_dataset(column_root_label="FP")
    dataset.add_miller_array(fc, column_root_label="FC")
    mtz = dataset.mtz_object()
    mtz.set_title("made-up data of examples/helices.pdb (examples/helices_mtz.py)")
    mtz.write(mtz_path)
    print("%s: %d reflections of %s to %g A, columns %s" % (
        mtz_path, fc.size(), fc.space_group_info(), DMIN, " ".join(mtz.column_labels())), file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: helices_mtz.py MODEL.pdb OUT.mtz")
    main(sys.argv[1], sys.argv[2])
