#!/usr/bin/env python3
"""merge_cc.py - G3's intensities out: nb-fit --integrated's table through
dials.scale and dials.merge, against the truth.

  merge_cc.py --merged merged.mtz --truth-hkl F.hkl --truth-jsonl truth.jsonl
              [--fit-hkl F_fit.hkl] [--space-group SG] [--min-shots 3] [--json OUT]

The reflections of the asymmetric unit that truth.jsonl records on at least
--min-shots shots (as evaluate.py --F selects them) and dials.merge's MTZ
has (its IMEAN): CC(IMEAN, F true^2); on the same reflections the CC of
Monte-Carlo merging (the mean of the reflection's true photons over its
observations, every row of truth.jsonl that is one of its mates) with
F true^2; and, given --fit-hkl (nb-fit --refine-F's --F-out), CC(F refined^2,
F true^2) on them too.  Reflections are made one by --space-group's Laue
group (default P212121).  The MTZ is read with cctbx (iotbx.mtz), as DIALS's
own python has it.  Exit 0 when the merge's CC is at least Monte-Carlo
merging's, 1 when it is not, 2 on unreadable input.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from evaluate import InputError, asu_key, pearson, read_hkl, read_truth_photons  # noqa: E402


def read_merged(path, space_group, column):
    """{asu key: I} of dials.merge's MTZ (column IMEAN, or the one named)."""
    try:
        import iotbx.mtz
    except ImportError:
        raise InputError("no cctbx (iotbx.mtz) in this python to read '%s': run it with DIALS's python" % path)
    try:
        m = iotbx.mtz.object(path)
    except (RuntimeError, OSError) as e:
        raise InputError("cannot read '%s': %s" % (path, e))
    arrays = {a.info().label_string(): a for a in m.as_miller_arrays()}
    want = [k for k in arrays if k.split(",")[0] == column]
    if not want:
        raise InputError("'%s' has no column %s (it has %s)" % (path, column, ", ".join(sorted(arrays))))
    a = arrays[want[0]]
    out = {}
    for (h, k, l), v in zip(a.indices(), a.data()):
        out[asu_key(h, k, l, space_group)] = float(v)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--merged", required=True, help="dials.merge's MTZ")
    ap.add_argument("--column", default="IMEAN", help="its intensity column (default IMEAN)")
    ap.add_argument("--truth-hkl", required=True, help="the true F (the simulation's F.hkl)")
    ap.add_argument("--truth-jsonl", required=True, help="the truth's reflections per shot (truth.jsonl)")
    ap.add_argument("--fit-hkl", help="nb-fit --refine-F's F (--F-out), compared on the same reflections")
    ap.add_argument("--space-group", default="P212121")
    ap.add_argument("--min-shots", type=int, default=3)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    try:
        sg = args.space_group
        F_true, _ = read_hkl(args.truth_hkl, sg, "the true F")
        obs, shots = read_truth_photons(args.truth_jsonl, sg)
        merged = read_merged(args.merged, sg, args.column)
        F_fit = read_hkl(args.fit_hkl, sg, "the refined F")[0] if args.fit_hkl else None
    except InputError as e:
        print("merge_cc.py: %s" % e, file=sys.stderr)
        return 2
    selected = sorted(k for k, (fr, _) in obs.items() if len(fr) >= args.min_shots and F_true.get(k, 0.0) > 0)
    present = [k for k in selected if k in merged]
    I_true = [F_true[k] ** 2 for k in present]
    s = {
        "space_group": sg,
        "shots": shots,
        "min_shots": args.min_shots,
        "reflections_selected": len(selected),
        "reflections_merged": len(present),
        "coverage": len(present) / len(selected) if selected else 0.0,
        "cc_merged_I": pearson([merged[k] for k in present], I_true),
        "cc_monte_carlo_I": pearson([sum(obs[k][1]) / len(obs[k][1]) for k in present], I_true),
        "cc_merged_I_missing_as_zero": pearson([merged.get(k, 0.0) for k in selected],
                                               [F_true[k] ** 2 for k in selected]),
    }
    if F_fit is not None:
        both = [k for k in present if k in F_fit]
        s["reflections_in_fit_and_merged"] = len(both)
        s["cc_refine_F_I"] = pearson([F_fit[k] ** 2 for k in both], [F_true[k] ** 2 for k in both])
        s["cc_merged_I_on_those"] = pearson([merged[k] for k in both], [F_true[k] ** 2 for k in both])
    print("intensities out: %d shots, %d asymmetric-unit reflections on >= %d shots, %d of them merged"
          % (shots, len(selected), args.min_shots, len(present)))
    print("  CC(dials.merge I, F true^2)        = %.5f" % s["cc_merged_I"])
    print("  CC(Monte-Carlo merge, F true^2)    = %.5f (the same reflections)" % s["cc_monte_carlo_I"])
    if F_fit is not None:
        print("  CC(--refine-F F^2, F true^2)       = %.5f over the %d of them --refine-F has (merge: %.5f)"
              % (s["cc_refine_F_I"], s["reflections_in_fit_and_merged"], s["cc_merged_I_on_those"]))
    if args.json:
        with open(args.json, "w") as fp:
            json.dump(s, fp, sort_keys=True)
    ok = s["cc_merged_I"] >= s["cc_monte_carlo_I"] if not math.isnan(s["cc_merged_I"]) else False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
