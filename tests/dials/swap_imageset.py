"""swap_imageset.py INDEXED.expt IMPORTED.expt OUT.expt - OUT is the
experiment of IMPORTED (its images, beam, detector, goniometer, scan: what
dxtbx read from the other file) with INDEXED's crystal, so that both files
are integrated with one crystal model (tests/dials/truth-gates.sh)."""
import sys

from dxtbx.model.experiment_list import ExperimentListFactory

indexed = ExperimentListFactory.from_json_file(sys.argv[1], check_format=False)
other = ExperimentListFactory.from_json_file(sys.argv[2], check_format=False)
assert len(indexed) == len(other) == 1, (len(indexed), len(other))
other[0].crystal = indexed[0].crystal
other[0].identifier = indexed[0].identifier
other.as_file(sys.argv[3])
