#!/usr/bin/python3
"""perturb.py - a refinement's start model from a DIALS experiment list.

Reads an experiment list (.expt, JSON, as nb-convert -o model.expt writes it:
formats/dials_expt_write.c) and writes it back with
  - each crystal turned by --angle degrees about an axis of its own, drawn
    uniformly on the sphere from --seed (the turn is about the laboratory's
    origin, the sample: every real-space vector a, b, c is rotated),
  - each crystal's cell scaled by --cell-scale (the real-space vectors times
    the factor: 1.003 makes the cell 0.3 % too long, the orientation kept),
  - with --distance D, the detector moved D mm along its normal, away from
    the sample for D > 0: every panel's origin (a detector of panels in
    groups, as nb writes several panels: every group's origin that holds a
    panel, the panels' own origins being relative to it).
Everything else is kept as it was.  --record FILE writes what was done (each
crystal's axis and angle) as JSON.

Only the standard library and numpy.  Usage:
  perturb.py --angle 0.3 --cell-scale 1.003 [--distance 10] --seed 5 model.expt -o start.expt
"""
import argparse
import json
import math
import os
import sys

import numpy as np


def rotation(axis, angle_deg):
    """The rotation matrix of angle_deg about the unit vector axis (Rodrigues)."""
    k = np.asarray(axis, dtype=float)
    k = k / np.linalg.norm(k)
    t = math.radians(angle_deg)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(t) * K + (1 - math.cos(t)) * (K @ K)


def random_axis(rng):
    """A direction uniform on the sphere."""
    while True:
        v = rng.normal(size=3)
        n = np.linalg.norm(v)
        if n > 1e-6:
            return v / n


def turn_crystals(expt, angle, scale, rng):
    done = []
    for i, xtal in enumerate(expt.get("crystal", [])):
        axis = random_axis(rng)
        R = rotation(axis, angle)
        for key in ("real_space_a", "real_space_b", "real_space_c"):
            if key not in xtal:
                raise ValueError("crystal %d has no %s" % (i, key))
            v = np.asarray(xtal[key], dtype=float)
            xtal[key] = (scale * (R @ v)).tolist()
        done.append({"crystal": i, "axis": axis.tolist(), "angle_deg": angle, "cell_scale": scale})
    return done


def panel_normal(panel):
    f = np.asarray(panel["fast_axis"], dtype=float)
    s = np.asarray(panel["slow_axis"], dtype=float)
    n = np.cross(f, s)
    return n / np.linalg.norm(n)


def away(n, origin):
    """n turned to point away from the sample (the side the origin lies on)."""
    return n if float(np.dot(n, origin)) >= 0 else -n


def group_nodes(node, out):
    """The hierarchy's group nodes whose children include a panel."""
    kids = node.get("children", [])
    if any("panel" in c for c in kids) and node.get("name", "") != "" and "origin" in node:
        out.append(node)
    for c in kids:
        if "children" in c:
            group_nodes(c, out)
    return out


def move_detectors(expt, shift_mm):
    done = []
    for d, det in enumerate(expt.get("detector", [])):
        panels = det.get("panels", [])
        if not panels:
            raise ValueError("detector %d has no panels" % d)
        groups = group_nodes(det.get("hierarchy", {}), [])
        if groups:
            # nb's several panels: each in a group at the panel's origin, the
            # panel's own origin 0 within it
            for g in groups:
                pid = [c["panel"] for c in g["children"] if "panel" in c][0]
                o = np.asarray(g["origin"], dtype=float)
                n = away(panel_normal(panels[pid]), o)
                g["origin"] = (o + shift_mm * n).tolist()
        else:
            for p in panels:
                o = np.asarray(p["origin"], dtype=float)
                n = away(panel_normal(p), o)
                p["origin"] = (o + shift_mm * n).tolist()
        done.append({"detector": d, "distance_shift_mm": shift_mm, "moved": "groups" if groups else "panels"})
    return done


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("expt", help="the experiment list to start from (e.g. the truth's model.expt)")
    ap.add_argument("-o", required=True, help="the start model to write (e.g. start.expt)")
    ap.add_argument("--angle", type=float, default=0.0, help="turn of each crystal, degrees (default 0)")
    ap.add_argument("--cell-scale", type=float, default=1.0, help="factor on every cell edge (default 1)")
    ap.add_argument("--distance", type=float, default=0.0,
                    help="move the detector this many mm along its normal, + away from the sample (default 0)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the axes (default 1)")
    ap.add_argument("--record", help="write what was done as JSON to this file")
    args = ap.parse_args(argv)
    if not args.cell_scale > 0:
        ap.error("--cell-scale must be positive")
    try:
        with open(args.expt) as fp:
            expt = json.load(fp)
    except (OSError, ValueError) as e:
        print("perturb.py: cannot read '%s': %s" % (args.expt, e), file=sys.stderr)
        return 1
    if not isinstance(expt, dict) or expt.get("__id__") != "ExperimentList":
        print("perturb.py: '%s' is not a DIALS experiment list" % args.expt, file=sys.stderr)
        return 1
    rng = np.random.default_rng(args.seed)
    try:
        record = {"source": args.expt, "seed": args.seed, "crystals": turn_crystals(expt, args.angle,
                                                                                   args.cell_scale, rng)}
        if args.distance != 0.0:
            record["detectors"] = move_detectors(expt, args.distance)
    except (ValueError, KeyError, IndexError) as e:
        print("perturb.py: '%s': %s" % (args.expt, e), file=sys.stderr)
        return 1
    try:
        for path, what in ((args.o, expt), (args.record, record)):
            if path:
                with open(path + ".tmp", "w") as fp:
                    json.dump(what, fp, indent=2)
                    fp.write("\n")
                os.replace(path + ".tmp", path)
    except OSError as e:
        print("perturb.py: cannot write '%s': %s" % (str(e.filename).removesuffix(".tmp"), e.strerror),
              file=sys.stderr)
        return 1
    print("perturb.py: %d crystals turned by %g degrees, cells x %g%s -> %s" %
          (len(record["crystals"]), args.angle, args.cell_scale,
           ", detector %+g mm" % args.distance if args.distance else "", args.o), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
