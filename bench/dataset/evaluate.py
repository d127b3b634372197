#!/usr/bin/python3
"""evaluate.py - measure a refined dataset against the truth it was simulated from.

Four modes (the gates of dataset refinement, issues 35 and 46; bench/README.md):

  evaluate.py TRUTH.expt FIT.expt [--fit-log LOG] [--fit-status N] [--space-group SG]
              [--frame-map START.expt] [--gate G1|G2|near|far|dials] [--json OUT]
      Experiment by experiment (matched by their frames' numbers when both
      lists state them: nb-convert's nb_frame, or identifiers nb-frame-N as
      dials_start.py writes them, or nb-<crc>-N, a run's (<crc> 8 hex digits); else by position): the orientation error, the
      angle of the rotation U_fit U_truth^T between the crystals' U matrices
      (U from the real-space vectors: M = (a b c) = U O with O the
      orthogonalization of the crystal's own cell, a along x and b in the xy
      plane, so a change of the cell alone changes no U), the smallest over
      the rotations of the point group of --space-group (P1 P2 P21 P222
      P212121; default P 1: the identity alone) applied to the fit's basis
      (DIALS may index a crystal in another of its equivalent settings:
      -a, b, -c of a monoclinic one; a basis of the same lattice outside the
      point group, an indexing's error, is named: setting 'other', the
      matrix in other_basis); the cell's relative error in a, b, c and
      its angles' errors (degrees), in that setting; the detector distance's
      error (mm, panel 0); and, from nb-fit's standard error (--fit-log), the
      frames it reported failed ('nb-fit: frame N failed: ...', N from 1).
      --frame-map START.expt: the fit's experiments and nb-fit's frames are,
      in order, START's, whose identifiers nb-frame-N name the truth's frame
      (a start without the stills DIALS could not index: those are 'not
      started').  From nb-fit -v's log, each frame's turn's sigma, the root
      of the sum of its three turns' squared sigmas (degrees).  Prints a
      table, then a JSON summary; with --gate, judges it (exit 0 pass, 1
      fail).  Gates of issue 46 (a frame is recovered when it is not
      reported failed, within 0.02 degrees, and each of its cell's six numbers
      within 0.1 %):
        near   nb-fit's status 0 and every frame recovered;
        far, dials  no frame wrong (off but not reported failed), nb-fit's
               status 3 when it named a failed frame and 0 otherwise, and at
               least 75 % of the truth's frames recovered (the 90 % over all
               datasets: --overall).

  evaluate.py --overall RESULT.json...
      The gates of issue 46 over datasets: each file a --json summary of one
      dataset's fit (its gate near, far or dials), or a record of the same
      keys a driver wrote for a fit that did not run.  Per gate: near passes
      when every dataset's passes; far and dials when every dataset's passes
      and at least 90 % of all their frames are recovered.  A line per gate,
      PASS or FAIL, with its figures; exit 0 when every gate present passes.

  evaluate.py --F --truth-hkl F.hkl --fit-hkl FIT.hkl --truth-jsonl truth.jsonl
              [--space-group SG] [--min-shots 3] [--gate G3] [--json OUT]
      The structure factors: the reflections of the asymmetric unit that
      truth.jsonl records on at least --min-shots shots (distinct frames, any
      symmetry mate), CC(F refined, F true) over those the refined file has,
      and the CC of Monte-Carlo merging on the same reflections: the square
      root of the mean of the reflection's true photons over its
      observations (every row of truth.jsonl that is one of its mates),
      against F true (reflections made one by --space-group's Laue group,
      default P212121).  Files of 'h k l F ...' lines (nb-fit --F-out writes
      'h k l F sigma multiplicity'); a reflection given more than once
      (mates of the same asymmetric-unit index) takes the mean of its F.

  evaluate.py --compare A.expt B.expt [--rtol 1e-6] [--compare-hkl A.hkl B.hkl] [--gate G4]
      Two refined lists (one process against mpirun -n 2): every crystal's
      real-space vectors and every panel's frame, relative to the vector's
      length, and each F of two .hkl files, relative to its size.

Exit status: 0 pass (or no --gate), 1 fail, 2 usage or unreadable input.
Only the standard library and numpy.
"""
import argparse
import json
import math
import os
import re
import sys

import numpy as np

from wilson_hkl import SPACE_GROUPS, laue_signs

FAILED_LINE = re.compile(r"^nb-fit: frame (\d+) failed:")
# a still's number in its identifier: dials_start.py's nb-frame-N, or a run's nb-<crc>-N (nb-convert; <crc> 8 hex digits)
IDENTIFIER = re.compile(r"^nb-(?:frame|[0-9a-f]{8})-(\d+)$")
# nb-fit -v's last word on a frame: its turns' sigmas (degrees)
SIGMA_LINE = re.compile(r"^frame (\d+): rot_x = \S+ \u00b1 (\S+) rot_y = \S+ \u00b1 (\S+) "
                        r"rot_z = \S+ \u00b1 (\S+)")

# nb-fit's refined cell edges with their sigmas: a frame's (-v) or the shared ones
CELL_NAMES = ("cell_a", "cell_b", "cell_c", "cell_alpha", "cell_beta", "cell_gamma")
CELL_SIGMA = re.compile(r"\b(cell_(?:a|b|c|alpha|beta|gamma)) = (\S+) \u00b1 (\S+)")
SHARED_LINE = re.compile(r"^cell_(?:a|b|c|alpha|beta|gamma) = ")
FRAME_LINE = re.compile(r"^frame (\d+): \w+ = ")

# the gates' figures (the issue's text; bench/README.md)
G1_MEDIAN_DEG, G1_WORST_DEG, G1_CELL_REL = 0.005, 0.02, 5e-4
G2_RECOVERED_DEG, G2_UNREPORTED_DEG = 0.02, 0.05
G3_MIN_CC = 0.95
# issue 46: a frame recovered, a dataset's share and all datasets' share
RECOVERED_DEG, RECOVERED_CELL_REL = 0.02, 1e-3
# the data's floor: a frame off by more than those but within FLOOR_SIGMAS of its own sigmas is
# as close as its pixels can tell (a small detector, a low resolution)
FLOOR_SIGMAS = 3.0
DATASET_SHARE, OVERALL_SHARE = 0.75, 0.90
DRAWN_GATES = ("near", "far", "dials")


class InputError(Exception):
    pass


# ---- experiment lists ------------------------------------------------------------

def load_json(path):
    try:
        with open(path) as fp:
            return json.load(fp)
    except (OSError, ValueError) as e:
        raise InputError("cannot read '%s': %s" % (path, e))


def experiments(path):
    """[(frame, crystal dict, detector dict)] of a DIALS experiment list."""
    el = load_json(path)
    if not isinstance(el, dict) or el.get("__id__") != "ExperimentList":
        raise InputError("'%s' is not a DIALS experiment list" % path)
    out = []
    ids = [e.get("identifier", "") for e in el.get("experiment", [])]
    numbered = [e.get("nb_frame") for e in el.get("experiment", [])]
    by_number = numbered and all(isinstance(n, int) for n in numbered)
    by_id = all(IDENTIFIER.match(i or "") for i in ids) and ids
    for pos, e in enumerate(el.get("experiment", [])):
        if by_number:
            frame = e["nb_frame"]
        else:
            frame = int(IDENTIFIER.match(e["identifier"]).group(1)) if by_id else pos + 1
        try:
            xtal = el["crystal"][e["crystal"]]
            det = el["detector"][e["detector"]]
        except (KeyError, IndexError, TypeError):
            raise InputError("'%s': experiment %d has no crystal or detector" % (path, pos))
        out.append((frame, xtal, det))
    if not out:
        raise InputError("'%s' holds no experiment" % path)
    return out, bool(by_number or by_id)


def real_space(xtal):
    """M: the columns a, b, c (Angstrom, laboratory frame)."""
    return np.array([xtal["real_space_a"], xtal["real_space_b"], xtal["real_space_c"]], dtype=float).T


def cell_of(M):
    a, b, c = (np.linalg.norm(M[:, i]) for i in range(3))
    al = math.acos(np.dot(M[:, 1], M[:, 2]) / (b * c))
    be = math.acos(np.dot(M[:, 0], M[:, 2]) / (a * c))
    ga = math.acos(np.dot(M[:, 0], M[:, 1]) / (a * b))
    return a, b, c, al, be, ga


def orthogonalization(a, b, c, al, be, ga):
    """O: the cell's vectors as columns, a along x and b in the xy plane."""
    ca, cb, cg, sg = math.cos(al), math.cos(be), math.cos(ga), math.sin(ga)
    v = math.sqrt(max(0.0, 1 - ca * ca - cb * cb - cg * cg + 2 * ca * cb * cg))
    return np.array([[a, b * cg, c * cb],
                     [0.0, b * sg, c * (ca - cb * cg) / sg],
                     [0.0, 0.0, c * v / sg]])


def orientation(M):
    """U (a proper rotation) of the crystal whose real-space vectors are M's columns."""
    U = M @ np.linalg.inv(orthogonalization(*cell_of(M)))
    W, _, Vt = np.linalg.svd(U)      # the nearest rotation: rounding only
    U = W @ Vt
    if np.linalg.det(U) < 0:
        raise InputError("a crystal's a, b, c are left-handed")
    return U


def rotation_angle_deg(R):
    """The angle of a rotation matrix, accurate for small angles too."""
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    return math.degrees(math.atan2(np.linalg.norm(w) / 2.0, (np.trace(R) - 1.0) / 2.0))


def detector_distance(det):
    """dxtbx's distance of panel 0: its origin along its normal (mm), nb's groups included."""
    p = det["panels"][0]
    f, s = np.asarray(p["fast_axis"], float), np.asarray(p["slow_axis"], float)
    n = np.cross(f, s)
    n /= np.linalg.norm(n)
    o = np.asarray(p["origin"], float)
    for g in walk_groups(det.get("hierarchy", {})):
        if any(c.get("panel") == 0 for c in g.get("children", [])):
            o = o + np.asarray(g["origin"], float)
    return abs(float(np.dot(n, o)))


def walk_groups(node):
    kids = node.get("children", [])
    if node.get("name", "") != "" and any("panel" in c for c in kids):
        yield node
    for c in kids:
        if "children" in c:
            yield from walk_groups(c)


def cell_sigma_rel(line):
    """{cell number (0-5): its sigma over its value} of what a line of nb-fit's states (edges in
    A, angles in degrees), or None."""
    rel = {}
    for name, v, sg in CELL_SIGMA.findall(line):
        try:
            rel[CELL_NAMES.index(name)] = abs(float(sg) / float(v))
        except (ValueError, ZeroDivisionError):
            continue
    return rel or None


def read_fit_log(log_path):
    """The frames nb-fit reported failed, {frame: its turn's sigma (degrees)} where -v gave them, and
    {frame: {cell number: its relative sigma}} (a shared cell's under the key None)."""
    frames, sigmas, cells = [], {}, {}
    try:
        with open(log_path, encoding="utf-8", errors="replace") as fp:
            for line in fp:
                m = FAILED_LINE.match(line)
                if m:
                    frames.append(int(m.group(1)))
                m = SIGMA_LINE.match(line)
                if m:
                    try:
                        sigmas[int(m.group(1))] = math.sqrt(sum(float(m.group(i)) ** 2 for i in (2, 3, 4)))
                    except ValueError:
                        pass
                rel = cell_sigma_rel(line)
                if rel is not None:
                    m = FRAME_LINE.match(line)
                    if m:
                        cells[int(m.group(1))] = rel
                    elif SHARED_LINE.match(line):
                        cells.setdefault(None, {}).update(rel)
    except OSError as e:
        raise InputError("cannot read '%s': %s" % (log_path, e))
    return sorted(set(frames)), sigmas, cells


def point_group(space_group):
    """The point group's rotations of a space group, as matrices on the basis (a b c)."""
    if space_group is None:
        return [np.eye(3)]
    return [np.diag(np.asarray(signs, dtype=float)) for signs in SPACE_GROUPS[space_group][0]]


def setting_name(op):
    return ",".join(("" if x > 0 else "-") + "abc"[i] for i, x in enumerate(np.diag(op)))


def frame_map(path):
    """The truth's frame of each of START's experiments, in order (nb_frame, or identifiers nb-frame-N)."""
    el = load_json(path)
    numbered = [e.get("nb_frame") for e in el.get("experiment", [])] if isinstance(el, dict) else []
    if numbered and all(isinstance(n, int) for n in numbered):
        return numbered  # nb-convert's list: its frames' numbers
    ids = [e.get("identifier", "") for e in el.get("experiment", [])] if isinstance(el, dict) else []
    frames = [IDENTIFIER.match(i or "") for i in ids]
    if not ids or not all(frames):
        raise InputError("--frame-map '%s': every experiment must have an identifier nb-frame-N" % path)
    return [int(m.group(1)) for m in frames]


def compare_crystals(xt, xf, ops):
    """The orientation error over the point group's settings of the fit, and the cell's in that setting."""
    Mt, Mf = real_space(xt), real_space(xf)
    Ut = orientation(Mt)
    best = None
    for op in ops:
        Mo = Mf @ op
        angle = rotation_angle_deg(orientation(Mo) @ Ut.T)
        if best is None or angle < best[0]:
            best = (angle, op, Mo)
    angle, op, Mo = best
    ct, cf = cell_of(Mt), cell_of(Mo)
    # the same lattice in another basis, outside the point group's: an indexing's error
    # (the spots where they are, their indices others), not a turn
    R = np.linalg.solve(Mt, Mf)
    Ri = np.round(R)
    other_basis = (np.max(np.abs(R - Ri)) < 0.1 and abs(round(np.linalg.det(Ri))) == 1
                   and not any(np.array_equal(Ri, o) for o in ops))
    return {"orientation_deg": angle, "setting": "other" if other_basis else setting_name(op),
            "other_basis": Ri.astype(int).tolist() if other_basis else None,
            "cell_rel": [cf[i] / ct[i] - 1.0 for i in range(3)],
            "cell_angle_deg": [math.degrees(cf[i] - ct[i]) for i in range(3, 6)],
            # the cell's error: the largest relative error of its six numbers
            "cell_rel_all": [cf[i] / ct[i] - 1.0 for i in range(6)],
            "cell_worst_rel": max(abs(cf[i] / ct[i] - 1.0) for i in range(6))}


def measure_orientations(truth_path, fit_path, log_path, ops=None, map_path=None):
    truth, truth_ids = experiments(truth_path)
    fit, fit_ids = experiments(fit_path)
    ops = ops or [np.eye(3)]
    started = None
    failed, sigmas, cells = read_fit_log(log_path) if log_path else ([], {}, {})
    if map_path:
        started = frame_map(map_path)
        if len(fit) != len(started):
            raise InputError("'%s' holds %d experiments, the start '%s' %d" % (fit_path, len(fit), map_path,
                                                                              len(started)))
        fit = [(started[pos],) + f[1:] for pos, f in enumerate(fit)]
        sigmas = {started[n - 1]: v for n, v in sigmas.items() if 1 <= n <= len(started)}
        cells = {(started[n - 1] if n is not None else None): v for n, v in cells.items()
                 if n is None or 1 <= n <= len(started)}
        # nb-fit's frame n is the start's n-th experiment; a number beyond them is stray
        beyond = [n for n in failed if not 1 <= n <= len(started)]
        failed = sorted(started[n - 1] for n in failed if 1 <= n <= len(started))
    elif not (truth_ids and fit_ids):
        if len(truth) != len(fit):
            raise InputError("'%s' holds %d experiments, '%s' %d (and no frame numbers to match them)"
                             % (truth_path, len(truth), fit_path, len(fit)))
        fit = [(t[0],) + f[1:] for t, f in zip(truth, fit)]
    fit_by_frame = {f[0]: f for f in fit}
    rows = []
    for frame, xt, dt in truth:
        row = {"frame": frame, "reported_failed": frame in failed,
               "started": started is None or frame in started}
        f = fit_by_frame.get(frame)
        if f is None:
            row.update(orientation_deg=None, cell_rel=None, cell_angle_deg=None, cell_worst_rel=None,
                       cell_rel_all=None, distance_mm=None, setting=None, other_basis=None, sigma_deg=None,
                       cell_sigma_rel=None)
        else:
            row.update(compare_crystals(xt, f[1], ops))
            row["distance_mm"] = detector_distance(f[2]) - detector_distance(dt)
            row["sigma_deg"] = sigmas.get(frame)
            own, shared = cells.get(frame, {}), cells.get(None, {})
            row["cell_sigma_rel"] = [own.get(i, shared.get(i)) for i in range(6)]
        rows.append(row)
    known = {r["frame"] for r in rows}
    stray = [n for n in failed if n not in known] + (["start's %d" % n for n in beyond] if map_path else [])
    return rows, failed, stray, sorted(set(fit_by_frame) - known)


def print_table(rows, out=sys.stdout):
    print("%6s %12s %9s %10s %10s %10s %9s %11s %8s  %s" % ("frame", "orient_deg", "sigma_deg", "da_%", "db_%",
                                                              "dc_%", "dang_deg", "ddist_mm", "setting", "nb-fit"),
          file=out)
    for r in rows:
        st = "FAILED" if r["reported_failed"] else "ok"
        if r["orientation_deg"] is None:
            why = "not in the fit" if r["started"] else "not in the start (not indexed)"
            print("%6d %12s %9s %10s %10s %10s %9s %11s %8s  %s (%s)" % (r["frame"], "-", "-", "-", "-", "-", "-",
                                                                          "-", "-", st, why), file=out)
            continue
        c = [100 * x for x in r["cell_rel"]]
        sig = "-" if r["sigma_deg"] is None else "%.5f" % r["sigma_deg"]
        print("%6d %12.6f %9s %10.5f %10.5f %10.5f %9.4f %11.5f %8s  %s"
              % (r["frame"], r["orientation_deg"], sig, c[0], c[1], c[2], max(abs(x) for x in r["cell_angle_deg"]),
                 r["distance_mm"], r["setting"], st), file=out)


def summarize(rows, failed, stray, extra, fit_status):
    errs = [r["orientation_deg"] for r in rows if r["orientation_deg"] is not None]
    cells = [abs(x) for r in rows if r["cell_rel"] is not None for x in r["cell_rel"]]
    return {
        "frames": len(rows),
        "measured": len(errs),
        "orientation_deg": {"median": float(np.median(errs)) if errs else None,
                            "max": max(errs) if errs else None,
                            "mean": float(np.mean(errs)) if errs else None},
        "cell_rel_max_abs": max(cells) if cells else None,
        "cell_angle_deg_max_abs": max((abs(x) for r in rows if r["cell_angle_deg"] is not None
                                       for x in r["cell_angle_deg"]), default=None),
        "not_started_frames": [r["frame"] for r in rows if not r["started"]],
        "sigma_deg_median": (float(np.median([r["sigma_deg"] for r in rows if r["sigma_deg"] is not None]))
                             if any(r["sigma_deg"] is not None for r in rows) else None),
        "distance_mm_max_abs": max((abs(r["distance_mm"]) for r in rows if r["distance_mm"] is not None),
                                   default=None),
        "reported_failed": failed,
        "reported_failed_unknown": stray,
        "fit_frames_not_in_truth": extra,
        "fit_status": fit_status,
    }


def exited_zero(s, must):
    """The reasons a fit that must exit 0 (must: why) did not, or named a frame failed."""
    why = []
    if s["fit_status"] is None:
        why.append("no --fit-status: nb-fit's exit status is part of the gate")
    elif s["fit_status"] != 0:
        why.append("nb-fit exited %d (%s)" % (s["fit_status"], must))
    if s["reported_failed"]:
        why.append("frames reported failed: %s" % " ".join(map(str, s["reported_failed"])))
    return why


def judge_g1(rows, s):
    why = exited_zero(s, "every frame's status must be 0")
    missing = [r["frame"] for r in rows if r["orientation_deg"] is None]
    if missing:
        why.append("frames not in the fit: %s" % " ".join(map(str, missing)))
    o = s["orientation_deg"]
    if o["median"] is not None and o["median"] > G1_MEDIAN_DEG:
        why.append("median orientation error %.6f deg > %g" % (o["median"], G1_MEDIAN_DEG))
    if o["max"] is not None and o["max"] > G1_WORST_DEG:
        worst = max((r for r in rows if r["orientation_deg"] is not None), key=lambda r: r["orientation_deg"])
        why.append("worst orientation error %.6f deg (frame %d) > %g" % (o["max"], worst["frame"], G1_WORST_DEG))
    if s["cell_rel_max_abs"] is not None and s["cell_rel_max_abs"] > G1_CELL_REL:
        why.append("cell off by %.4f %% > %g %%" % (100 * s["cell_rel_max_abs"], 100 * G1_CELL_REL))
    return why


def judge_g2(rows, s):
    why = []
    failed = set(s["reported_failed"])
    if s["fit_status"] is None:
        why.append("no --fit-status: nb-fit's exit status is part of the gate")
    elif failed and s["fit_status"] != 3:
        why.append("frames reported failed but nb-fit exited %d, not 3" % s["fit_status"])
    elif not failed and s["fit_status"] != 0:
        why.append("nb-fit exited %d without naming a failed frame" % s["fit_status"])
    if s["reported_failed_unknown"]:
        why.append("failed frames that do not exist: %s" % " ".join(map(str, s["reported_failed_unknown"])))
    recovered = 0
    for r in rows:
        e = r["orientation_deg"]
        if r["frame"] in failed:
            continue
        if e is None:
            why.append("frame %d is not in the fit and was not reported failed" % r["frame"])
        elif e > G2_UNREPORTED_DEG:
            why.append("frame %d is %.4f deg off (> %g) and was not reported failed"
                       % (r["frame"], e, G2_UNREPORTED_DEG))
        elif e > G2_RECOVERED_DEG:
            why.append("frame %d is %.4f deg off (> %g: not recovered) and was not reported failed"
                       % (r["frame"], e, G2_RECOVERED_DEG))
        else:
            recovered += 1
    s["recovered"] = recovered
    if 2 * recovered < len(rows):
        why.append("%d of %d frames recovered (at least half must be)" % (recovered, len(rows)))
    return why


def classify(r):
    """A frame's class in issue 46's gates: recovered, failed, wrong or not_started; or floor: off by
    more than the figures, but within FLOOR_SIGMAS of the sigmas nb-fit gave it (its turn's, and its
    cell edges' where they were refined): as close as the data can tell."""
    if r["reported_failed"]:
        return "failed"
    if r["orientation_deg"] is None:
        return "wrong" if r["started"] else "not_started"
    within = r["orientation_deg"] <= RECOVERED_DEG and r["cell_worst_rel"] <= RECOVERED_CELL_REL
    if within:
        return "recovered"
    sigma, cell_sigma = r.get("sigma_deg"), r.get("cell_sigma_rel") or [None] * 6
    turn_ok = r["orientation_deg"] <= RECOVERED_DEG or (sigma is not None and
                                                        r["orientation_deg"] <= FLOOR_SIGMAS * sigma)
    cell_ok = all(abs(e) <= max(RECOVERED_CELL_REL, FLOOR_SIGMAS * s if s is not None else 0.0)
                  for e, s in zip(r["cell_rel_all"], cell_sigma))
    return "floor" if turn_ok and cell_ok else "wrong"


def count_classes(rows, s):
    """Each frame's class into its row, the counts and the worst accepted frame into the summary."""
    for r in rows:
        r["class"] = classify(r)
    for c in ("recovered", "floor", "failed", "wrong", "not_started"):
        s[c] = sum(1 for r in rows if r["class"] == c)
    s["unfitted"] = 0      # a driver's record of a fit that did not run counts its frames here
    accepted = [r for r in rows if r["class"] in ("recovered", "floor", "wrong") and r["orientation_deg"] is not None]
    s["worst_accepted_deg"] = max((r["orientation_deg"] for r in accepted), default=None)
    s["worst_accepted_cell_rel"] = max((r["cell_worst_rel"] for r in accepted), default=None)
    # a frame without a start (DIALS did not index it) is no fit's to recover: the shares are of
    # the frames started
    started = len(rows) - s["not_started"]
    s["frames_started"] = started
    s["share_recovered"] = s["recovered"] / started if started else 0.0
    s["share_recovered_at_floor"] = (s["recovered"] + s["floor"]) / started if started else 0.0


def describe_wrong(r):
    if r["orientation_deg"] is None:
        return "frame %d was started but is not in the fit, and not reported failed" % r["frame"]
    return ("frame %d is %.4f deg and its cell %.4f %% off (recovered: <= %g deg and %g %%%s) and was not reported "
            "failed" % (r["frame"], r["orientation_deg"], 100 * r["cell_worst_rel"], RECOVERED_DEG,
                        100 * RECOVERED_CELL_REL,
                        "; within %g of its sigmas: the data's floor" % FLOOR_SIGMAS if r["class"] == "floor" else ""))


def off(r, at_floor):
    """Is the frame accepted but off: wrong, or (the gate's own figures) at the data's floor?"""
    return r["class"] == "wrong" or (r["class"] == "floor" and not at_floor)


def judge_near(rows, s, at_floor=False):
    why = exited_zero(s, "a near start must exit 0")
    why += [describe_wrong(r) for r in rows if off(r, at_floor)]
    if s["not_started_frames"]:
        why.append("frames not in the start: %s" % " ".join(map(str, s["not_started_frames"])))
    return why


def judge_recover(rows, s, at_floor=False):
    why = []
    if s["fit_status"] is None:
        why.append("no --fit-status: nb-fit's exit status is part of the gate")
    elif s["reported_failed"] and s["fit_status"] != 3:
        why.append("frames reported failed but nb-fit exited %d, not 3" % s["fit_status"])
    elif not s["reported_failed"] and s["fit_status"] != 0:
        why.append("nb-fit exited %d without naming a failed frame" % s["fit_status"])
    if s["reported_failed_unknown"]:
        why.append("failed frames that do not exist: %s" % " ".join(map(str, s["reported_failed_unknown"])))
    why += [describe_wrong(r) for r in rows if off(r, at_floor)]
    share = s["share_recovered_at_floor"] if at_floor else s["share_recovered"]
    # no frame started (DIALS indexed none of the stills): nothing for a fit to recover, nothing judged
    if s["frames_started"] and share < DATASET_SHARE:
        why.append("%d of the %d frames started recovered (%.0f %% < %.0f %%; %d at the data's floor, %d failed, %d "
                   "wrong; %d not started)" % (s["recovered"] + (s["floor"] if at_floor else 0), s["frames_started"],
                                               100 * share, 100 * DATASET_SHARE, s["floor"], s["failed"], s["wrong"],
                                               s["not_started"]))
    return why


def run_orientation(args):
    if args.gate in ("G2", "far", "dials") and not args.fit_log:
        raise InputError("--gate %s needs --fit-log: which frames nb-fit reported failed" % args.gate)
    rows, failed, stray, extra = measure_orientations(args.truth, args.fit, args.fit_log,
                                                      point_group(args.space_group), args.frame_map)
    print_table(rows)
    s = summarize(rows, failed, stray, extra, args.fit_status)
    if args.gate in DRAWN_GATES:
        count_classes(rows, s)
    why = []
    if args.gate == "G1":
        why = judge_g1(rows, s)
    elif args.gate == "G2":
        why = judge_g2(rows, s)
    elif args.gate in DRAWN_GATES:
        judge = judge_near if args.gate == "near" else judge_recover
        why = judge(rows, s)
        s["reasons_at_floor"] = judge(rows, s, at_floor=True)
        s["pass_at_floor"] = not s["reasons_at_floor"]
    elif args.gate:
        raise InputError("--gate %s is not a gate of experiment lists (G1, G2, near, far, dials)" % args.gate)
    return finish(args, s, why, {"per_frame": rows})


# ---- issue 46's gates over datasets ---------------------------------------------------

def run_overall(args):
    by_gate = {}
    for path in args.overall:
        r = load_json(path)
        if not isinstance(r, dict) or r.get("gate") not in DRAWN_GATES:
            raise InputError("'%s' is not a summary of a near, far or dials gate (evaluate.py --json)" % path)
        for key in ("frames", "recovered", "pass"):
            if key not in r:
                raise InputError("'%s' has no '%s'" % (path, key))
        by_gate.setdefault(r["gate"], []).append((path, r))
    if not by_gate:
        raise InputError("--overall: no summary given")
    s = {}
    why = []
    for gate in DRAWN_GATES:
        runs = by_gate.get(gate)
        if not runs:
            continue
        frames = sum(r["frames"] for _, r in runs)
        started = sum(r.get("frames_started", r["frames"] - r.get("not_started", 0)) for _, r in runs)
        recovered = sum(r["recovered"] for _, r in runs)
        failing = [p for p, r in runs if not r["pass"]]
        share = recovered / started if started else 0.0
        g = {"datasets": len(runs), "datasets_failing": failing, "frames": frames, "recovered": recovered,
             "share_recovered": share,
             "failed": sum(r.get("failed", 0) for _, r in runs), "wrong": sum(r.get("wrong", 0) for _, r in runs),
             "not_started": sum(r.get("not_started", 0) for _, r in runs),
             "unfitted": sum(r.get("unfitted", 0) for _, r in runs)}
        g_why = ["%d of %d datasets fail their own gate: %s" % (len(failing), len(runs), " ".join(failing))] \
            if failing else []
        if gate != "near" and started and share < OVERALL_SHARE:
            g_why.append("%d of the %d frames started recovered (%.1f %% < %.0f %%)" % (recovered, started, 100 * share,
                                                                                       100 * OVERALL_SHARE))
        g["pass"] = not g_why
        g["reasons"] = g_why
        # at the data's floor: a frame within 3 of its sigmas counts as recovered
        floor = sum(r.get("floor", 0) for _, r in runs)
        failing_floor = [p for p, r in runs if not r.get("pass_at_floor", r["pass"])]
        share_floor = (recovered + floor) / started if started else 0.0
        g.update(floor=floor, share_recovered_at_floor=share_floor, datasets_failing_at_floor=failing_floor,
                 pass_at_floor=not failing_floor and (gate == "near" or not started or share_floor >= OVERALL_SHARE))
        s[gate] = g
        why += ["%s: %s" % (gate, w) for w in g_why]
        print("%-5s %s  %d datasets, %d of %d frames recovered (%.1f %% of those started), %d failed, %d wrong, "
              "%d not started, %d not fitted; at the data's floor %s, %d more recovered (%.1f %%)"
              % (gate, "PASS" if g["pass"] else "FAIL", len(runs), recovered, frames, 100 * share,
                 g["failed"], g["wrong"] + floor, g["not_started"], g["unfitted"],
                 "PASS" if g["pass_at_floor"] else "FAIL", floor, 100 * share_floor))
    args.gate = "drawn"
    return finish(args, s, why, {})


# ---- structure factors -------------------------------------------------------------

def asu_key(h, k, l, space_group):
    """One index for a reflection and its mates: the greatest of them under the Laue group."""
    return max((sh * h, sk * k, sl * l) for sh, sk, sl in laue_signs(space_group))


def read_hkl(path, space_group, what):
    """{asu key: mean F} of an 'h k l F ...' text file, and the number of keys given more than once."""
    sums, counts = {}, {}
    try:
        with open(path) as fp:
            for n, line in enumerate(fp, 1):
                t = line.split()
                if not t or t[0].startswith(("#", "!")):
                    continue
                if len(t) < 4:
                    raise InputError("'%s' line %d: expected 'h k l F ...'" % (path, n))
                try:
                    h, k, l = int(t[0]), int(t[1]), int(t[2])
                    F = float(t[3])
                except ValueError:
                    raise InputError("'%s' line %d: expected 'h k l F ...'" % (path, n))
                if not math.isfinite(F):
                    raise InputError("'%s' line %d: F is not a number" % (path, n))
                key = asu_key(h, k, l, space_group)
                sums[key] = sums.get(key, 0.0) + F
                counts[key] = counts.get(key, 0) + 1
    except OSError as e:
        raise InputError("cannot read %s '%s': %s" % (what, path, e))
    return {k: sums[k] / counts[k] for k in sums}, sum(1 for c in counts.values() if c > 1)


def read_truth_photons(path, space_group):
    """{asu key: (set of frames, [photons of each observation])} from truth.jsonl."""
    obs = {}
    frames = 0
    try:
        with open(path) as fp:
            for n, line in enumerate(fp, 1):
                if not line.strip():
                    continue
                try:
                    t = json.loads(line)
                    frame = t["frame"]
                    refl = t["reflections"]
                except (ValueError, KeyError) as e:
                    raise InputError("'%s' line %d: not a truth record (%s)" % (path, n, e))
                frames += 1
                for r in refl:
                    key = asu_key(int(r[0]), int(r[1]), int(r[2]), space_group)
                    entry = obs.setdefault(key, (set(), []))
                    entry[0].add(frame)
                    entry[1].append(float(r[6]))
    except OSError as e:
        raise InputError("cannot read '%s': %s" % (path, e))
    return obs, frames


def pearson(x, y):
    x, y = np.asarray(x, float), np.asarray(y, float)
    # a flat F (all one value, up to the rounding of a mean of mates) has no CC
    if len(x) < 2 or any(np.std(v) <= 1e-9 * np.mean(np.abs(v)) for v in (x, y)):
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def run_F(args):
    for name in ("truth_hkl", "fit_hkl", "truth_jsonl"):
        if not getattr(args, name):
            raise InputError("--F needs --truth-hkl, --fit-hkl and --truth-jsonl")
    sg = args.space_group
    F_true, _ = read_hkl(args.truth_hkl, sg, "the true F")
    F_fit, repeated = read_hkl(args.fit_hkl, sg, "the refined F")
    obs, shots = read_truth_photons(args.truth_jsonl, sg)
    selected = sorted(k for k, (fr, _) in obs.items() if len(fr) >= args.min_shots and F_true.get(k, 0.0) > 0)
    no_truth = sum(1 for k, (fr, _) in obs.items() if len(fr) >= args.min_shots and k not in F_true)
    present = [k for k in selected if k in F_fit]
    ft = [F_true[k] for k in present]
    cc_fit = pearson([F_fit[k] for k in present], ft)
    cc_mc = pearson([math.sqrt(np.mean(obs[k][1])) for k in present], ft)
    cc_mc_all = pearson([math.sqrt(np.mean(obs[k][1])) for k in selected], [F_true[k] for k in selected])
    coverage = len(present) / len(selected) if selected else 0.0
    # the reflections the fit left out counted as F = 0: a fit that keeps
    # only what it measures well cannot look better than it is
    cc_fit_missing_zero = pearson([F_fit.get(k, 0.0) for k in selected], [F_true[k] for k in selected])
    s = {
        "space_group": sg,
        "shots": shots,
        "min_shots": args.min_shots,
        "reflections_observed": len(obs),
        "reflections_selected": len(selected),
        "selected_without_true_F": no_truth,
        "reflections_in_fit": len(present),
        "coverage": coverage,
        "fit_keys_given_more_than_once": repeated,
        "cc_fit": cc_fit,
        "cc_fit_missing_as_zero": cc_fit_missing_zero,
        "cc_monte_carlo": cc_mc,
        "cc_monte_carlo_all_selected": cc_mc_all,
        "mean_observations_per_selected": (float(np.mean([len(obs[k][1]) for k in selected]))
                                           if selected else None),
    }
    print("G3 figures: %d shots, %d asymmetric-unit reflections seen on >= %d shots, %d of them in the fit"
          % (shots, len(selected), args.min_shots, len(present)))
    print("  CC(F refined, F true)       = %.5f" % cc_fit)
    print("  CC(F refined, F true)       = %.5f over all selected, those without F as 0" % cc_fit_missing_zero)
    print("  CC(Monte-Carlo merge, F)    = %.5f (same reflections; %.5f over all selected)" % (cc_mc, cc_mc_all))
    why = []
    if args.gate == "G3":
        if not selected:
            why.append("no reflection is recorded on %d shots" % args.min_shots)
        if coverage < args.min_coverage:
            why.append("the fit has F for %d of the %d selected reflections (coverage %.4f < %g)"
                       % (len(present), len(selected), coverage, args.min_coverage))
        if not cc_fit >= G3_MIN_CC:
            why.append("CC(F refined, F true) %.5f < %g" % (cc_fit, G3_MIN_CC))
        if not cc_fit > cc_mc:
            why.append("CC(F refined, F true) %.5f is not above Monte-Carlo merging's %.5f" % (cc_fit, cc_mc))
        if not (cc_fit_missing_zero >= G3_MIN_CC and cc_fit_missing_zero > cc_mc_all):
            why.append("with the %d reflections the fit has no F for as 0, CC %.5f (< %g, or not above Monte-Carlo "
                       "merging's %.5f over them all)" % (len(selected) - len(present), cc_fit_missing_zero,
                                                           G3_MIN_CC, cc_mc_all))
    elif args.gate:
        raise InputError("--gate %s is not a gate of structure factors (G3)" % args.gate)
    return finish(args, s, why, {})


# ---- two fits against each other ----------------------------------------------------

def rel_diff(u, v):
    u, v = np.asarray(u, float), np.asarray(v, float)
    scale = max(np.linalg.norm(u), np.linalg.norm(v), 1e-300)
    return float(np.linalg.norm(u - v) / scale)


def run_compare(args):
    a_path, b_path = args.compare
    a, _ = experiments(a_path)
    b, _ = experiments(b_path)
    if len(a) != len(b):
        raise InputError("'%s' holds %d experiments, '%s' %d" % (a_path, len(a), b_path, len(b)))
    worst, where = 0.0, None
    for (fa, xa, da), (fb, xb, db) in zip(a, b):
        if fa != fb:
            raise InputError("experiment of frame %d against frame %d" % (fa, fb))
        for key in ("real_space_a", "real_space_b", "real_space_c"):
            d = rel_diff(xa[key], xb[key])
            if d > worst:
                worst, where = d, "frame %d %s" % (fa, key)
        for i, (pa, pb) in enumerate(zip(da["panels"], db["panels"])):
            for key in ("origin", "fast_axis", "slow_axis"):
                d = rel_diff(pa[key], pb[key])
                if d > worst:
                    worst, where = d, "frame %d panel %d %s" % (fa, i, key)
    s = {"experiments": len(a), "max_rel_diff_expt": worst, "where": where, "rtol": args.rtol}
    if args.compare_hkl:
        Fa, _ = read_hkl(args.compare_hkl[0], "P1", "F")
        Fb, _ = read_hkl(args.compare_hkl[1], "P1", "F")
        if set(Fa) != set(Fb):
            raise InputError("'%s' and '%s' hold other reflections" % tuple(args.compare_hkl))
        s["max_rel_diff_F"] = max((abs(Fa[k] - Fb[k]) / max(abs(Fa[k]), abs(Fb[k]), 1e-300) for k in Fa),
                                  default=0.0)
    print("compare: %d experiments, largest relative difference %.3g (%s)%s"
          % (len(a), worst, where or "-", "; F %.3g" % s["max_rel_diff_F"] if "max_rel_diff_F" in s else ""))
    why = []
    if args.gate == "G4":
        if worst > args.rtol:
            why.append("the fits differ by %.3g (relative, %s) > %g" % (worst, where, args.rtol))
        if s.get("max_rel_diff_F", 0.0) > args.rtol:
            why.append("the F differ by %.3g (relative) > %g" % (s["max_rel_diff_F"], args.rtol))
    elif args.gate:
        raise InputError("--gate %s is not a gate of two fits (G4)" % args.gate)
    return finish(args, s, why, {})


# ---- the verdict -----------------------------------------------------------------------

def no_nan(v):
    """JSON has no NaN: a CC that cannot be computed is null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: no_nan(x) for k, x in v.items()}
    if isinstance(v, list):
        return [no_nan(x) for x in v]
    return v


def finish(args, summary, why, details):
    summary = no_nan(dict(summary))
    details = no_nan(details)
    summary["gate"] = args.gate
    summary["pass"] = (not why) if args.gate else None
    summary["reasons"] = why
    text = json.dumps(summary, sort_keys=True)
    print(text)
    if args.json:
        try:
            with open(args.json + ".tmp", "w") as fp:
                json.dump(dict(summary, **details), fp, indent=1, sort_keys=True)
                fp.write("\n")
            os.replace(args.json + ".tmp", args.json)
        except OSError as e:
            raise InputError("cannot write '%s': %s" % (args.json, e.strerror))
    if args.gate:
        for w in why:
            print("evaluate.py: %s FAIL: %s" % (args.gate, w), file=sys.stderr)
        print("evaluate.py: %s %s" % (args.gate, "FAIL" if why else "PASS"), file=sys.stderr)
    return 1 if why else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=None)
    ap.add_argument("truth", nargs="?", help="the truth's experiment list (model.expt)")
    ap.add_argument("fit", nargs="?", help="the refined experiment list (fit.expt)")
    ap.add_argument("--fit-log", help="nb-fit's standard error: the frames it reported failed")
    ap.add_argument("--fit-status", type=int, help="nb-fit's exit status")
    ap.add_argument("--gate", choices=("G1", "G2", "G3", "G4") + DRAWN_GATES,
                    help="judge this gate: exit 0 pass, 1 fail")
    ap.add_argument("--json", help="also write the summary (and the per-frame rows) to this file")
    ap.add_argument("--F", action="store_true", help="measure structure factors (G3)")
    ap.add_argument("--truth-hkl", help="--F: the true F ('h k l F'; simulate.sh's F.hkl)")
    ap.add_argument("--fit-hkl", help="--F: the refined F (nb-fit --F-out: 'h k l F sigma multiplicity')")
    ap.add_argument("--truth-jsonl", help="--F: the truth's reflections per shot (truth.jsonl)")
    ap.add_argument("--space-group", choices=sorted(SPACE_GROUPS),
                    help="the point group whose settings of a crystal are one (default P1), or with --F the "
                         "symmetry that makes reflections one (default P212121)")
    ap.add_argument("--frame-map", metavar="START.expt",
                    help="the fit's experiments are START's, whose identifiers nb-frame-N name the truth's frames")
    ap.add_argument("--overall", nargs="+", metavar="RESULT.json",
                    help="issue 46's gates over datasets: their --json summaries (gates near, far, dials)")
    ap.add_argument("--min-shots", type=int, default=3, help="--F: shots a reflection must be seen on (default 3)")
    ap.add_argument("--min-coverage", type=float, default=0.99,
                    help="--F --gate G3: the share of the selected reflections the fit must hold (default 0.99: "
                         "a reflection whose photons are spread thin, no pixel of it a spot, has no region to be "
                         "measured in; the CC with those as F = 0 must pass too)")
    ap.add_argument("--compare", nargs=2, metavar=("A.expt", "B.expt"), help="two fits against each other (G4)")
    ap.add_argument("--compare-hkl", nargs=2, metavar=("A.hkl", "B.hkl"), help="--compare: their F files too")
    ap.add_argument("--rtol", type=float, default=1e-6, help="--compare: relative tolerance (default 1e-6)")
    args = ap.parse_args(argv)
    try:
        if args.overall:
            if args.truth or args.fit or args.F or args.compare or args.gate:
                ap.error("--overall takes its summaries alone")
            return run_overall(args)
        if args.F:
            args.space_group = args.space_group or "P212121"
            if args.truth or args.fit or args.compare:
                ap.error("--F takes no experiment lists")
            return run_F(args)
        if args.compare:
            if args.truth or args.fit:
                ap.error("--compare takes its two lists as its arguments")
            return run_compare(args)
        if not (args.truth and args.fit):
            ap.error("give TRUTH.expt FIT.expt, or --F, or --compare A.expt B.expt")
        return run_orientation(args)
    except InputError as e:
        print("evaluate.py: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
