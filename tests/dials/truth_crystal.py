"""truth_crystal.py MODEL.expt N INDEXED.expt OUT.expt - OUT is INDEXED with
its crystal replaced by image N's (1-based) of MODEL.expt, in DIALS's basis:
the start for refining from the truth (tests/dials/truth-gates.sh)."""
import sys

from dxtbx.model import Crystal
from dxtbx.model.experiment_list import ExperimentListFactory

from orientation import in_basis_of

truth = ExperimentListFactory.from_json_file(sys.argv[1], check_format=False)
el = ExperimentListFactory.from_json_file(sys.argv[3], check_format=False)
A = in_basis_of(truth[int(sys.argv[2]) - 1].crystal.get_A(), el[0].crystal.get_A())
real = A.inverse()
el[0].crystal = Crystal(real[0:3], real[3:6], real[6:9], space_group_symbol="P1")
el.as_file(sys.argv[4])
