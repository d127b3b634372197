"""stills_report.py MODEL.expt TRUTH.jsonl N - the stills gate of
tests/dials/truth-gates.sh: model.expt holds N experiments whose crystals
are truth.jsonl's A (1e-9), and each agrees with dials.index's solution of
its image (indexed_NNN.expt) within 0.2 degrees; beside it, dials.refine
started from the truth (refined_NNN.expt) and the RMSDs of both."""
import json
import os
import sys

from dxtbx.model.experiment_list import ExperimentListFactory

from orientation import misorientation

model = ExperimentListFactory.from_json_file(sys.argv[1], check_format=False)
rows = [json.loads(line) for line in open(sys.argv[2])]
n = int(sys.argv[3])
ok = len(model) == len(rows) == n
print("  model.expt: %d experiments for %d images" % (len(model), n))
for e, o in zip(model, rows):
    A = e.crystal.get_A()
    rel = max(abs(a - b) for a, b in zip(A, o["A"])) / max(abs(b) for b in o["A"])
    ok = ok and rel < 1e-9
print("  model.expt's A against truth.jsonl's: %s" % ("within 1e-9" if ok else "DIFFERENT"))
def rmsd(refl):
    """the positional RMSD (pixels) of the reflections a refinement used"""
    from dials.array_family import flex

    t = flex.reflection_table.from_file(refl)
    t = t.select(t.get_flags(t.flags.used_in_refinement))
    x1, y1, _ = t["xyzobs.px.value"].parts()
    x2, y2, _ = t["xyzcal.px"].parts()
    d2 = (x1 - x2) * (x1 - x2) + (y1 - y2) * (y1 - y2)
    return (flex.mean(d2) ** 0.5) if len(d2) else float("nan")


print("  shot  dials.index: angle  (about x, y, z=beam)  RMSD px   refined from the truth: angle  RMSD px")
worst = 0.0
for k in range(n):
    name = "indexed_%03d.expt" % (k + 1)
    if not os.path.exists(name):
        print("  %4d  not indexed" % (k + 1))
        ok = False
        continue
    d = ExperimentListFactory.from_json_file(name, check_format=False)[0]
    angle, parts = misorientation(d.crystal.get_A(), model[k].crystal.get_A())
    worst = max(worst, angle)
    line = "  %4d  %8.3f  (%6.3f %6.3f %6.3f)  %6.3f" % ((k + 1, angle) + parts + (rmsd("indexed_%03d.refl" % (k + 1)),))
    ref = "refined_%03d.expt" % (k + 1)
    if os.path.exists(ref):
        r = ExperimentListFactory.from_json_file(ref, check_format=False)[0]
        line += "   %8.3f  %6.3f" % (misorientation(r.crystal.get_A(), model[k].crystal.get_A())[0],
                                     rmsd("refined_%03d.refl" % (k + 1)))
    print(line)
print("  worst: %.3f deg (gate 0.2)" % worst)
sys.exit(0 if ok and worst <= 0.2 else 1)
