#!/usr/bin/python3
"""panels.py - the panel-geometry gate's detector (issue 50): a 2x2 detector
of flat panels as a CrystFEL .geom, the same panels moved, and the refined
panels measured against the moved ones.

  panels.py make --nominal NOMINAL.geom --moved MOVED.geom [--record MOVES.json]
                 [--pixels 512] [--pixel 0.1] [--distance 100] [--gap 1] [--seed 3]
                 [--shift 0.2] [--normal 0.2] [--turn 0.1] [--tilt 0.2] [--turns A,B,C,D]
      Four square panels of --pixels (--pixel mm) around the beam at
      --distance mm, --gap mm apart (NOMINAL), and each of them moved
      (MOVED): --shift mm in its plane in a direction drawn from --seed,
      --normal mm along its normal (sign drawn), turned --turn degrees about
      its normal through its centre and --tilt degrees about an axis in its
      plane (direction drawn).  The turns about the normals are two of +turn
      and two of -turn (the order drawn): their mean is 0, because a turn of
      the whole detector about the beam is, with every crystal turned the
      same, the same image, and the fit holds the panels' mean turn about
      the beam at the start's (docs/physics.md 15.3).  --turns gives the four
      turns instead, in panel order (all one way: the gauge's floor).

  panels.py compare TRUTH.expt FIT.expt [--json OUT] [--gate] [--less-common-turn]
      Each panel of FIT against TRUTH's (DIALS experiment lists, read with
      dxtbx; the first experiment's detector): its centre's error in the
      truth panel's plane and along its normal (mm), and the rotation taking
      the truth's axes to the fit's: its part about the normal and its tilt
      (the in-plane part), in degrees.  --gate: within 0.01 mm in plane,
      0.02 mm along the normal, 0.005 degrees about the normal and 0.05
      degrees of tilt, every panel (exit 0 pass, 1 fail).  --less-common-turn:
      the fit's detector first turned about the beam by its panels' mean turn
      against the truth's (the part the pixels cannot measure, 15.3).
"""
import argparse
import json
import math
import sys

import numpy as np

from perturb import rotation  # beside this script: the rotation of angle_deg about an axis


def nominal_panels(pixels, pixel_mm, distance_mm, gap_mm):
    """Four panels: (corner, fast, slow) in mm, CrystFEL's frame (z along the beam)."""
    size = pixels * pixel_mm
    out = []
    for iy in range(2):
        for ix in range(2):
            x0 = -size - gap_mm / 2 if ix == 0 else gap_mm / 2
            y0 = -size - gap_mm / 2 if iy == 0 else gap_mm / 2
            out.append((np.array([x0, y0, distance_mm]), np.array([1.0, 0, 0]), np.array([0, 1.0, 0])))
    return out


def move(panel, pixels, pixel_mm, shift, normal, turn, tilt, phi, psi):
    """The panel turned about its normal and tilted about an in-plane axis
    (through its centre), then shifted in plane (direction phi) and along
    its normal."""
    corner, fs, ss = panel
    n = np.cross(fs, ss)
    centre = corner + 0.5 * pixels * pixel_mm * (fs + ss)
    R = rotation(math.cos(psi) * fs + math.sin(psi) * ss, tilt) @ rotation(n, turn)
    corner2 = centre + R @ (corner - centre)
    corner2 = corner2 + shift * (math.cos(phi) * fs + math.sin(phi) * ss) + normal * n
    return corner2, R @ fs, R @ ss


def write_geom(path, panels, pixels, pixel_mm):
    res = 1000.0 / pixel_mm  # pixels per m
    lines = ["; a 2x2 detector of %d^2 panels of %g mm (bench/dataset/panels.py)" % (pixels, pixel_mm),
             "res = %.10g" % res, "clen = %.10g" % (panels[0][0][2] * 1e-3), "coffset = 0"]
    for i, (corner, fs, ss) in enumerate(panels):
        p = "p%d" % i
        lines += ["%s/min_fs = 0" % p, "%s/max_fs = %d" % (p, pixels - 1),
                  "%s/min_ss = %d" % (p, i * pixels), "%s/max_ss = %d" % (p, (i + 1) * pixels - 1),
                  "%s/corner_x = %.10f" % (p, corner[0] / pixel_mm), "%s/corner_y = %.10f" % (p, corner[1] / pixel_mm),
                  "%s/clen = %.12g" % (p, corner[2] * 1e-3),
                  "%s/fs = %+.12fx %+.12fy %+.12fz" % (p, fs[0], fs[1], fs[2]),
                  "%s/ss = %+.12fx %+.12fy %+.12fz" % (p, ss[0], ss[1], ss[2])]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def make(a):
    rng = np.random.default_rng(a.seed)
    nominal = nominal_panels(a.pixels, a.pixel, a.distance, a.gap)
    turns = [a.turn, a.turn, -a.turn, -a.turn]
    rng.shuffle(turns)
    if a.turns:
        turns = [float(t) for t in a.turns.split(",")]
        if len(turns) != 4:
            sys.exit("panels.py: --turns takes four numbers, one a panel")
    moved, record = [], []
    for i, p in enumerate(nominal):
        phi, psi = rng.uniform(0, 2 * math.pi), rng.uniform(0, 2 * math.pi)
        normal = a.normal * (1 if rng.uniform() < 0.5 else -1)
        moved.append(move(p, a.pixels, a.pixel, a.shift, normal, turns[i], a.tilt, phi, psi))
        record.append({"panel": i, "shift_mm": a.shift, "shift_direction_deg": math.degrees(phi),
                       "normal_mm": normal, "turn_deg": turns[i], "tilt_deg": a.tilt,
                       "tilt_axis_deg": math.degrees(psi)})
    write_geom(a.nominal, nominal, a.pixels, a.pixel)
    write_geom(a.moved, moved, a.pixels, a.pixel)
    if a.record:
        with open(a.record, "w") as f:
            json.dump(record, f, indent=1)


def detector_panels(path, beam_out=None):
    from dxtbx.model.experiment_list import ExperimentListFactory
    el = ExperimentListFactory.from_json_file(path, check_format=False)
    if beam_out is not None:
        beam_out[:] = list(el[0].beam.get_unit_s0())
    out = []
    for p in el[0].detector:
        f, s, o = (np.array(v) for v in (p.get_fast_axis(), p.get_slow_axis(), p.get_origin()))
        nf, ns = p.get_image_size()
        ps = p.get_pixel_size()
        out.append((o + 0.5 * nf * ps[0] * f + 0.5 * ns * ps[1] * s, f, s))
    return out


def turned_about_beam(panels, beam, angle_deg):
    """The panels turned rigidly about the beam through the sample."""
    R = rotation(beam, angle_deg)
    return [(R @ c, R @ f, R @ s) for c, f, s in panels]


def common_turn(truth, fit, beam):
    """The fit's panels' mean turn about the beam against the truth's, degrees."""
    turns = []
    for (ct, ft, st), (cf, ff, sf) in zip(truth, fit):
        R = np.column_stack([ff, sf, np.cross(ff, sf)]) @ np.column_stack([ft, st, np.cross(ft, st)]).T
        w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]]) / 2
        turns.append(math.degrees(math.asin(max(-1.0, min(1.0, w @ beam)))))
    return sum(turns) / len(turns)


def compare(a):
    beam = []
    truth, fit = detector_panels(a.truth, beam), detector_panels(a.fit)
    if len(truth) != len(fit):
        sys.exit("panels.py: %s has %d panels, %s %d" % (a.truth, len(truth), a.fit, len(fit)))
    if a.less_common_turn:  # the gauge's part taken out: the rest is what the pixels measure
        turn = common_turn(truth, fit, np.array(beam))
        print("the fit's panels' common turn about the beam: %+.5f deg (taken out)" % turn)
        fit = turned_about_beam(fit, np.array(beam), -turn)
    rows, ok = [], True
    for i, ((ct, ft, st), (cf, ff, sf)) in enumerate(zip(truth, fit)):
        nt = np.cross(ft, st)
        d = cf - ct
        in_plane = math.hypot(d @ ft, d @ st)
        along = d @ nt
        Bt = np.column_stack([ft, st, nt])
        Bf = np.column_stack([ff, sf, np.cross(ff, sf)])
        R = Bf @ Bt.T  # truth axes to the fit's
        w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]]) / 2  # sin(angle) axis
        about_normal = math.degrees(math.asin(max(-1.0, min(1.0, w @ nt))))
        tilt = math.degrees(math.asin(min(1.0, math.hypot(w @ ft, w @ st))))
        row = {"panel": i, "in_plane_mm": in_plane, "normal_mm": along, "about_normal_deg": about_normal,
               "tilt_deg": tilt}
        row["pass"] = in_plane <= 0.01 and abs(along) <= 0.02 and abs(about_normal) <= 0.005 and tilt <= 0.05
        ok &= row["pass"]
        rows.append(row)
        print("panel %d: in plane %.4f mm, along the normal %+.4f mm, about the normal %+.4f deg, tilt %.4f deg %s"
              % (i, in_plane, along, about_normal, tilt, "" if row["pass"] else "(outside the gate)"))
    summary = {"panels": rows, "max_in_plane_mm": max(r["in_plane_mm"] for r in rows),
               "max_normal_mm": max(abs(r["normal_mm"]) for r in rows),
               "max_about_normal_deg": max(abs(r["about_normal_deg"]) for r in rows),
               "max_tilt_deg": max(r["tilt_deg"] for r in rows), "pass": ok}
    print(json.dumps({k: v for k, v in summary.items() if k != "panels"}, sort_keys=True))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    if a.gate:
        sys.exit(0 if ok else 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("make")
    m.add_argument("--nominal", required=True)
    m.add_argument("--moved", required=True)
    m.add_argument("--record")
    m.add_argument("--pixels", type=int, default=512)
    m.add_argument("--pixel", type=float, default=0.1)
    m.add_argument("--distance", type=float, default=100.0)
    m.add_argument("--gap", type=float, default=1.0)
    m.add_argument("--seed", type=int, default=3)
    m.add_argument("--shift", type=float, default=0.2)
    m.add_argument("--normal", type=float, default=0.2)
    m.add_argument("--turn", type=float, default=0.1)
    m.add_argument("--tilt", type=float, default=0.2)
    m.add_argument("--turns")
    c = sub.add_parser("compare")
    c.add_argument("truth")
    c.add_argument("fit")
    c.add_argument("--json")
    c.add_argument("--gate", action="store_true")
    c.add_argument("--less-common-turn", action="store_true",
                   help="first turn the fit's detector about the beam by its panels' mean turn against the truth's")
    a = ap.parse_args()
    make(a) if a.mode == "make" else compare(a)


if __name__ == "__main__":
    main()
