#!/usr/bin/python3
"""sigmas.py - are a dataset fit's sigmas honest?  Its errors over its sigmas, by kind.

Reads the truth's experiment list, nb-fit's refined one (nb-fit ... | nb-convert -o fit.expt)
and nb-fit -v's standard error (each frame's 'frame N: NAME = VALUE +- SIGMA ...' line, and
the shared values' 'NAME = VALUE +- SIGMA UNIT' lines), and with --truth-hkl and --fit-hkl
the structure factors (nb-fit --F-out's 'h k l F sigma multiplicity'), and prints for each
kind of value the number of them, the rms of error / sigma, its median and largest |error /
sigma| (issue 46: the rms between 0.5 and 2 for every kind):

  orientation  each frame's turn from the truth (the angle of U_fit U_truth^T, over the
               point group's settings) over sqrt(sigma_x^2 + sigma_y^2 + sigma_z^2) of its
               rot_x, rot_y, rot_z
  cell_a ...   each frame's refined edge less the truth's over its sigma (a shared cell:
               one value, its sigma the shared line's)
  scale        each frame's scale less --true-scale (default 1: simulate.sh's stills have
               the plan's fluence) over its sigma
  F            each reflection's F less the truth's (the asymmetric unit of --space-group)
               over its sigma; with nb-fit --F-prior 0 (the prior pulls F towards its shell)

Frames nb-fit reported failed are left out.  --json OUT writes the table as JSON.  Only the
standard library and numpy.  Exit status: 0 the table written, 1 nothing to measure, 2 usage
or unreadable input.

Usage:
  sigmas.py TRUTH.expt FIT.expt FIT.log [--truth-hkl F.hkl --fit-hkl F_fit.hkl]
            [--space-group P212121] [--true-scale 1] [--frame-map START.expt] [--json OUT]
"""
import argparse
import json
import math
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evaluate as ev  # noqa: E402  (beside this file, as installed)

FRAME_LINE = re.compile(r"^frame (\d+): (\w+ = .*)")
VALUE = re.compile(r"(\w+) = (\S+) \u00b1 (\S+)")
SHARED_LINE = re.compile(r"^(\w+) = (\S+) \u00b1 (\S+)")


def read_log(path):
    """{frame: {name: (value, sigma)}}, {name: (value, sigma)} of the shared values, failed frames."""
    frames, shared = {}, {}
    try:
        failed, _, _ = ev.read_fit_log(path)
        with open(path, encoding="utf-8", errors="replace") as fp:
            for line in fp:
                m = FRAME_LINE.match(line)
                if m and "\u00b1" in line:
                    frames[int(m.group(1))] = {k: (float(v), float(s)) for k, v, s in VALUE.findall(m.group(2))}
                    continue
                m = SHARED_LINE.match(line)
                if m:
                    shared[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    except (OSError, ValueError) as e:
        raise ev.InputError("cannot read '%s': %s" % (path, e))
    return frames, shared, set(failed)


def orientation_rows(truth, fit, frames, shared, failed, ops, true_scale, started=None):
    rows = {"orientation": [], "cell_a": [], "cell_b": [], "cell_c": [], "scale": []}
    T, _ = ev.experiments(truth)
    X, _ = ev.experiments(fit)
    if started:  # the fit's frame n is the start's n-th experiment, the truth's still started[n - 1]
        if len(X) != len(started):
            raise ev.InputError("'%s' holds %d experiments, the start %d" % (fit, len(X), len(started)))
        frames = {started[n - 1]: v for n, v in frames.items() if 1 <= n <= len(started)}
        failed = {started[n - 1] for n in failed if 1 <= n <= len(started)}
        X = [(started[pos],) + x[1:] for pos, x in enumerate(X)]
    tmap = {f: x for f, x, _ in T}
    for f, x, _ in X:
        if f in failed or f not in tmap or f not in frames:
            continue
        v = frames[f]
        c = ev.compare_crystals(tmap[f], x, ops)
        turns = [v[k][1] for k in ("rot_x", "rot_y", "rot_z") if k in v]
        if len(turns) == 3 and math.sqrt(sum(s * s for s in turns)) > 0:
            rows["orientation"].append(c["orientation_deg"] / math.sqrt(sum(s * s for s in turns)))
        ct = ev.cell_of(ev.real_space(tmap[f]))
        for i, k in enumerate(("cell_a", "cell_b", "cell_c")):
            if k in v and v[k][1] > 0:
                rows[k].append((v[k][0] - ct[i]) / v[k][1])
        if "scale" in v and v["scale"][1] > 0:
            rows["scale"].append((v["scale"][0] - true_scale) / v["scale"][1])
    # a shared cell: one value against the truth's (the first frame's: one crystal form)
    if T:
        ct = ev.cell_of(ev.real_space(T[0][1]))
        for i, k in enumerate(("cell_a", "cell_b", "cell_c")):
            if k in shared and shared[k][1] > 0:
                rows[k].append((shared[k][0] - ct[i]) / shared[k][1])
    return rows


def F_rows(truth_hkl, fit_hkl, space_group):
    true_F, _ = ev.read_hkl(truth_hkl, space_group, "--truth-hkl")
    out = []
    try:
        with open(fit_hkl) as fp:
            for n, line in enumerate(fp, 1):
                p = line.split()
                if not p or line.startswith("#"):
                    continue
                if len(p) < 5:
                    raise ev.InputError("'%s' line %d: not 'h k l F sigma ...'" % (fit_hkl, n))
                key = ev.asu_key(int(p[0]), int(p[1]), int(p[2]), space_group)
                F, s = float(p[3]), float(p[4])
                if key in true_F and s > 0:
                    out.append((F - true_F[key]) / s)
    except (OSError, ValueError) as e:
        raise ev.InputError("cannot read '%s': %s" % (fit_hkl, e))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description="A dataset fit's errors over its sigmas, by kind.")
    ap.add_argument("truth", help="the truth's experiment list")
    ap.add_argument("fit", help="nb-fit's refined experiment list")
    ap.add_argument("log", help="nb-fit -v's standard error")
    ap.add_argument("--truth-hkl", help="the true F ('h k l F' lines)")
    ap.add_argument("--fit-hkl", help="nb-fit --F-out's F ('h k l F sigma multiplicity')")
    ap.add_argument("--space-group", default="P1", choices=ev.SPACE_GROUPS, help="the F's asymmetric unit (default P1)")
    ap.add_argument("--true-scale", type=float, default=1.0, help="the frames' true scale (default 1)")
    ap.add_argument("--frame-map", help="the start whose experiments the fit's frames are (identifiers nb-frame-N: "
                                        "a DIALS start without the stills it did not index)")
    ap.add_argument("--json", help="also write the table as JSON")
    args = ap.parse_args(argv)
    if bool(args.truth_hkl) != bool(args.fit_hkl):
        ap.error("--truth-hkl and --fit-hkl go together")
    try:
        frames, shared, failed = read_log(args.log)
        started = ev.frame_map(args.frame_map) if args.frame_map else None
        rows = orientation_rows(args.truth, args.fit, frames, shared, failed, ev.point_group(args.space_group),
                                args.true_scale, started)
        if args.truth_hkl:
            rows["F"] = F_rows(args.truth_hkl, args.fit_hkl, args.space_group)
    except ev.InputError as e:
        print("sigmas.py: %s" % e, file=sys.stderr)
        return 2
    table = {}
    for kind, v in rows.items():
        if not v:
            continue
        a = np.abs(np.array(v))
        table[kind] = {"n": len(v), "rms": float(math.sqrt(np.mean(a * a))), "median_abs": float(np.median(a)),
                       "max_abs": float(a.max())}
        print("%-12s n %6d  rms(error/sigma) %6.3f  median |error/sigma| %6.3f  largest %7.2f"
              % (kind, len(v), table[kind]["rms"], table[kind]["median_abs"], table[kind]["max_abs"]))
    if not table:
        print("sigmas.py: no value with a sigma to measure (nb-fit's log without -v?)", file=sys.stderr)
        return 1
    if args.json:
        tmp = args.json + ".tmp%d" % os.getpid()
        with open(tmp, "w") as fp:
            json.dump(table, fp, indent=1, sort_keys=True)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
