"""compare_integration.py PLAN.nbs A.expt A.refl B.expt B.refl - the
integration gates of tests/dials/truth-gates.sh: the reflections A and B
both integrated (by Miller index), their corrected intensities I lp / qe
(DIALS's own corrections, as dials.scale applies them) summed per
resolution bin; B / A within 0.5 % in every bin, for the summation and the
profile-fitted intensities.  With a sensor in the plan (DETECTOR_THICK > 0)
also: what dxtbx read of it from B's file (NXmx) and A's (the CBF), the
simulated thickness and mu within 1 %.
--report ...: the same, reported only (exit 0).
--sensor-effect A.expt A.refl B.expt B.refl: the same table, reported only
(no sensor against a sensor: how well DIALS's correction undoes nb's
absorption)."""
import sys

from dials.array_family import flex
from dxtbx.model.experiment_list import ExperimentListFactory


def plan_key(path, key):
    with open(path, "rb") as f:
        text = f.read(1 << 20).decode("latin-1")
    for line in text.split("\n"):
        if line.startswith(key + "="):
            return line.split("=", 1)[1]
    return None


def corrected(expt, refl, kind):
    el = ExperimentListFactory.from_json_file(expt, check_format=False)
    t = flex.reflection_table.from_file(refl)
    t = t.select(t.get_flags(t.flags.integrated_sum if kind == "sum" else t.flags.integrated_prf))
    I = t["intensity.%s.value" % kind] * t["lp"]
    if "qe" in t:
        I = I / t["qe"]
    d = el[0].crystal.get_unit_cell().d(t["miller_index"])
    out = {}
    for h, i, dd in zip(t["miller_index"], I, d):
        out[h] = (i, dd)
    return out


def table(a, b, label):
    common = sorted(set(a) & set(b), key=lambda h: a[h][1], reverse=True)
    nbins = 8
    worst = 0.0
    print("  %s: %d reflections in both" % (label, len(common)))
    print("    d range (A)        n   sum B / sum A")
    for k in range(nbins):
        part = common[k * len(common) // nbins:(k + 1) * len(common) // nbins]
        sa = sum(a[h][0] for h in part)
        sb = sum(b[h][0] for h in part)
        ratio = sb / sa
        worst = max(worst, abs(ratio - 1))
        print("    %6.2f - %6.2f  %5d   %.5f" % (a[part[0]][1], a[part[-1]][1], len(part), ratio))
    return worst


report_only = sys.argv[1] == "--report"
if report_only:
    del sys.argv[1]
if sys.argv[1] == "--sensor-effect":
    _, _, ea, ra, eb, rb = sys.argv
    print("truth-gates: a 450 um silicon sensor against none, both NXmx, after DIALS's correction (reported only):")
    table(corrected(ea, ra, "sum"), corrected(eb, rb, "sum"), "summation")
    sys.exit(0)

plan, ea, ra, eb, rb = sys.argv[1:6]
ok = True
thick = float(plan_key(plan, "DETECTOR_THICK") or 0)
if thick > 0:
    mu = float(plan_key(plan, "DETECTOR_MU")) * 1e-3
    for name, expt in (("NXmx", eb), ("CBF", ea)):
        p = ExperimentListFactory.from_json_file(expt, check_format=False)[0].detector[0]
        good = abs(p.get_thickness() - thick * 1e3) < 0.01 * thick * 1e3 and abs(p.get_mu() - mu) < 0.01 * mu
        ok = ok and good
        print("  %s: dxtbx reads %s %.4f mm, mu %.5f /mm (simulated %.4f mm, %.5f /mm) %s"
              % (name, p.get_material(), p.get_thickness(), p.get_mu(), thick * 1e3, mu, "" if good else "WRONG"))
for kind in ("sum", "prf"):
    worst = table(corrected(ea, ra, kind), corrected(eb, rb, kind), "%s intensities, NXmx (B) against CBF (A)" % kind)
    print("    worst: %.3f %%%s" % (100 * worst, "" if report_only else " (gate 0.5 %)"))
    ok = ok and worst <= 0.005
sys.exit(0 if ok or report_only else 1)
