#!/usr/bin/python3
"""draw.py - a simulated stills dataset whose shape is drawn from a seed.

Draws a dataset's parameters from --seed, keeps the draw only where its spots
can be told apart and seen, and simulates it with simulate.sh into DIR (the
same seed gives the same dataset, on any machine with the same tools):

  detector   pixels 0.05-0.2 mm (uniform), 256^2-2048^2 of them (log-uniform,
             a multiple of 32), 50-300 mm away (uniform)
  beam       wavelength 0.7-1.8 A (uniform)
  crystal    a round crystal of N 5-30 cells a side (uniform), cell edges
             30-150 A (log-uniform each); the space group one of P 1, P 2,
             P 21, P 2 2 2, P 21 21 21 (equally likely): P 1's three angles
             oblique (60-120 degrees, at least 4 from 90, a cell with a
             volume), P 2's and P 21's beta 95-125 degrees (unique axis b);
             mosaic spread 0 or 0.2 degrees (equally likely; 5-10 domains)
  F          Wilson amplitudes in that space group (wilson_hkl.py) to a
             resolution drawn 1.5-3.5 A (no finer than the detector's corner
             sees, and coarse enough for at most --max-indices indices), a
             Wilson B 0-4 dmin^2 (uniform)
  background water (nb-amorphous) of 0.1-5 photons a pixel (log-uniform),
             Poisson noise
  brightness the fluence is not drawn but set: a pilot render of the first
             stills (the same orientations) gives each reflection's photons,
             and the fluence is scaled (photons are linear in it) so that a
             pilot still's 25th brightest reflection has B photons, B drawn
             8-300 (log-uniform)
  sampling   the oversampling nb-geom advises (3 x the crystal's size over
             the reciprocal pixel size, rounded up), at most --max-oversample
             and at most what keeps pixels^2 x oversample^2 x domains within
             --max-samples

A draw is kept when (1) neighbouring spots are at least --min-spacing (5)
pixels apart: distance x wavelength x the shortest reciprocal lattice vector
over the pixel size, the spacing of spots near the beam (farther out they
spread apart); (2) no basis of the lattice but those of the point group's
rotations has a cell within --pseudo-length (3 %) in every edge and
--pseudo-angle (3 degrees) in every angle (bases of entries -1, 0, 1: an
orthorhombic cell with two edges 1 % apart, a monoclinic one with a = c):
an indexing of a still could pick that setting, whose F are others;
(3) every still has at least --min-spots (20) reflections of 10 photons or
more (truth.jsonl: the pilot's stills first, then the whole dataset's), and
(4) at least --min-spots spots of 10 photons are seen in each still's image:
connected pixels standing 5 sigma above their local background (the mean of
the 25 x 25 pixels around, spots left out), 10 photons or more above it
(the spots a spot finder sees, as nb-fit's and DIALS's do: 10 photons of a
small crystal's reflection spread over a hundred pixels of background are
no spot).  A
draw that fails is redrawn from (seed, attempt + 1), so the sequence is the
seed's alone; every rejected draw and why is kept in DIR/draw.json, with the
kept draw's parameters, the simulate.sh command that made it and the
seconds.  --params-only draws and checks (1) and (2) without simulating
anything and prints the JSON.

Usage:
  draw.py --seed 7 [--stills 10] [--threads 2] DIR
  draw.py --seed 7 --params-only
Exit status: 0 a dataset drawn, 1 no draw kept after --max-attempts or a tool
failed, 2 usage.  Only the standard library and numpy (and simulate.sh's tools).
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

from wilson_hkl import metric, reciprocal_metric

HERE = os.path.dirname(os.path.abspath(__file__))
SPACE_GROUPS = ("P1", "P2", "P21", "P222", "P212121")
PILOT_FLUENCE = 1e28          # bright: every reflection that matters is listed (photons are linear in it)
BRIGHT_RANK = 25              # the pilot's reflection whose photons the fluence sets


class Rejected(Exception):
    pass


def log_uniform(rng, lo, hi):
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def draw_cell(rng, space_group):
    """Edges log-uniform over 30-150 A; angles as the lattice allows."""
    edges = [round(log_uniform(rng, 30.0, 150.0), 2) for _ in range(3)]
    if space_group == "P1":
        while True:
            angles = []
            for _ in range(3):
                off = rng.uniform(4.0, 30.0) * (1 if rng.uniform() < 0.5 else -1)
                angles.append(round(90.0 + off, 2))
            if cell_volume(edges + angles) > 0.2 * edges[0] * edges[1] * edges[2]:
                return edges + angles
    if space_group in ("P2", "P21"):
        return edges + [90.0, round(rng.uniform(95.0, 125.0), 2), 90.0]
    return edges + [90.0, 90.0, 90.0]


def cell_volume(cell):
    ca, cb, cg = (math.cos(math.radians(x)) for x in cell[3:])
    v = 1 - ca * ca - cb * cb - cg * cg + 2 * ca * cb * cg
    return cell[0] * cell[1] * cell[2] * math.sqrt(v) if v > 0 else 0.0


def shortest_reciprocal(cell):
    """The length (1/A) of the shortest nonzero reciprocal lattice vector."""
    Gs = reciprocal_metric(cell)
    r = np.arange(-3, 4)
    H = np.array(np.meshgrid(r, r, r, indexing="ij")).reshape(3, -1).T
    H = H[np.any(H != 0, axis=1)]
    return float(np.sqrt(np.min(np.einsum("ni,ij,nj->n", H, Gs, H))))


def unimodular_proper():
    """The 3 x 3 matrices of entries -1, 0, 1 and determinant 1: changes of a cell's basis."""
    r = np.array(np.meshgrid(*[[-1, 0, 1]] * 9, indexing="ij")).reshape(9, -1).T.reshape(-1, 3, 3)
    return r[np.round(np.linalg.det(r)).astype(int) == 1]


POINT_GROUP_ORDER = {"P1": 1, "P2": 2, "P21": 2, "P222": 4, "P212121": 4}


def pseudo_settings(cell, length_tol, angle_tol):
    """How many bases of the lattice (the identity among them) have the cell within the tolerances."""
    G = metric(cell)
    R = unimodular_proper().astype(float)
    Gp = np.einsum("nji,jk,nkl->nil", R, G, R)
    lengths = np.sqrt(np.einsum("nii->ni", Gp))
    ok = np.all(np.abs(lengths / np.array(cell[:3]) - 1) <= length_tol, axis=1)
    pairs = ((1, 2), (0, 2), (0, 1))
    for k, (i, j) in enumerate(pairs):
        ang = np.degrees(np.arccos(np.clip(Gp[:, i, j] / (lengths[:, i] * lengths[:, j]), -1, 1)))
        ok &= np.abs(ang - cell[3 + k]) <= angle_tol
    return int(ok.sum())


def check_lattice(p, limits):
    """No setting of the lattice but the point group's has (nearly) the same cell: indexing could pick it."""
    n = pseudo_settings(p["cell"], limits.pseudo_length, limits.pseudo_angle)
    if n > POINT_GROUP_ORDER[p["space_group"]]:
        raise Rejected("%d settings of the lattice have a cell within %g %% and %g degrees of this one, %d in %s: "
                       "an indexing could pick another" % (n, 100 * limits.pseudo_length, limits.pseudo_angle,
                                                          POINT_GROUP_ORDER[p["space_group"]], p["space_group"]))


def corner_resolution(p):
    """d (A) at the detector's corner (the beam at its centre)."""
    half_diag = p["pixel_mm"] * p["detpixels"] / math.sqrt(2.0)
    theta = 0.5 * math.atan2(half_diag, p["distance_mm"])
    return p["lambda_A"] / (2.0 * math.sin(theta))


def draw_params(seed, attempt, stills, limits):
    """One draw, from (seed, attempt) alone."""
    rng = np.random.default_rng([seed, attempt])
    p = {"seed": seed, "attempt": attempt, "stills": stills}
    p["space_group"] = SPACE_GROUPS[int(rng.integers(len(SPACE_GROUPS)))]
    p["cell"] = draw_cell(rng, p["space_group"])
    p["pixel_mm"] = round(float(rng.uniform(0.05, 0.2)), 4)
    p["detpixels"] = int(32 * round(log_uniform(rng, 256, 2048) / 32))
    p["distance_mm"] = round(float(rng.uniform(50, 300)), 2)
    p["lambda_A"] = round(float(rng.uniform(0.7, 1.8)), 4)
    p["N"] = int(rng.integers(5, 31))
    mosaic = rng.uniform() < 0.5
    p["mosaic_deg"] = 0.2 if mosaic else 0.0
    p["mosaic_domains"] = int(rng.integers(5, 11)) if mosaic else 1
    p["water_photons"] = round(log_uniform(rng, 0.1, 5.0), 3)
    p["brightness"] = round(log_uniform(rng, 8.0, 300.0), 2)
    d_drawn = float(rng.uniform(1.5, 3.5))
    bfactor_share = float(rng.uniform(0.0, 1.0))
    # the resolution of F: no finer than the corner sees, and few enough indices
    volume = cell_volume(p["cell"])
    d_cap = (4.0 / 3.0 * math.pi * volume / limits.max_indices) ** (1.0 / 3.0)
    p["dmin_A"] = round(max(d_drawn, 0.95 * corner_resolution(p), d_cap), 3)
    p["bfactor"] = round(bfactor_share * 4.0 * p["dmin_A"] ** 2, 2)
    # the oversampling nb-geom advises, capped
    xtal = p["N"] * max(p["cell"][:3])
    reciprocal_pixel = p["lambda_A"] * p["distance_mm"] / p["pixel_mm"]
    p["oversample_advised"] = max(1, int(math.ceil(3.0 * xtal / reciprocal_pixel)))
    by_cost = int(math.floor(math.sqrt(limits.max_samples / (p["detpixels"] ** 2 * p["mosaic_domains"]))))
    p["oversample"] = max(1, min(p["oversample_advised"], limits.max_oversample, by_cost))
    p["spot_spacing_px"] = round(p["distance_mm"] * p["lambda_A"] * shortest_reciprocal(p["cell"]) / p["pixel_mm"],
                                 3)
    return p


def check_spacing(p, limits):
    if p["spot_spacing_px"] < limits.min_spacing:
        raise Rejected("neighbouring spots %.2f pixels apart (< %g)" % (p["spot_spacing_px"], limits.min_spacing))


def simulate_args(p, fluence, threads, stills, truth_only):
    args = [os.path.join(HERE, "simulate.sh"), "--cell", " ".join("%g" % x for x in p["cell"]),
            "--space-group", p["space_group"], "--stills", str(stills), "--detpixels", str(p["detpixels"]),
            "--pixel", "%g" % p["pixel_mm"], "--distance", "%g" % p["distance_mm"], "--lambda", "%g" % p["lambda_A"],
            "--dmin", "%g" % p["dmin_A"], "--bfactor", "%g" % p["bfactor"], "--N", str(p["N"]),
            "--fluence", "%.6g" % fluence, "--oversample", str(p["oversample"]), "--seed", str(p["seed"])]
    if p["mosaic_deg"] > 0:
        args += ["--mosaic", "%g" % p["mosaic_deg"], "--mosaic-domains", str(p["mosaic_domains"])]
    if truth_only:
        args.append("--truth-only")
    else:
        args += ["--water", "%g" % p["water_photons"]]
    if threads:
        args += ["--threads", str(threads)]
    return args


def run_simulate(args, out_dir, log_path):
    with open(log_path, "w") as log:
        rc = subprocess.call(args + [out_dir], stdout=log, stderr=subprocess.STDOUT)
    if rc != 0:
        with open(log_path, errors="replace") as fp:
            tail = fp.read().strip().splitlines()[-3:]
        raise RuntimeError("simulate.sh failed (exit %d): %s" % (rc, " / ".join(tail)))


def photons_per_still(path):
    """Each still's reflections' photons, brightest first."""
    out = []
    with open(path) as fp:
        for line in fp:
            if line.strip():
                out.append(sorted((r[6] for r in json.loads(line)["reflections"]), reverse=True))
    return out


def check_spots(stills_photons, scale, limits, what):
    for i, ph in enumerate(stills_photons):
        n = sum(1 for x in ph if x * scale >= 10.0)
        if n < limits.min_spots:
            raise Rejected("%s still %d has %d reflections of 10 photons or more (< %d)" % (what, i + 1, n,
                                                                                            limits.min_spots))


def cbf_counts(path):
    """The counts of a miniCBF of byte-offset compression (nb-convert's), as a 2-D array: the deltas
    are bytes, with an escape (0x80) to 16 and then 32 bits, decoded a run of plain bytes at a time."""
    with open(path, "rb") as fp:
        raw = fp.read()
    start = raw.find(b"\x0c\x1a\x04\xd5")
    head = raw[:max(start, 0)].decode("latin-1")
    size = {}
    for key in ("X-Binary-Size-Fastest-Dimension", "X-Binary-Size-Second-Dimension", "X-Binary-Size"):
        m = re.search(re.escape(key) + r":\s*(\d+)", head)
        if start < 0 or not m:
            raise RuntimeError("'%s' is not a byte-offset CBF (no %s)" % (path, key))
        size[key] = int(m.group(1))
    nf, ns = size["X-Binary-Size-Fastest-Dimension"], size["X-Binary-Size-Second-Dimension"]
    b = np.frombuffer(raw, dtype=np.int8, count=size["X-Binary-Size"], offset=start + 4)
    escapes = np.flatnonzero(b == -128)
    parts, i, e = [], 0, 0
    while i < len(b):
        while e < len(escapes) and escapes[e] < i:
            e += 1
        stop = escapes[e] if e < len(escapes) else len(b)
        parts.append(b[i:stop].astype(np.int64))
        if stop == len(b):
            break
        d = int.from_bytes(b[stop + 1:stop + 3].tobytes(), "little", signed=True)
        i = stop + 3
        if d == -32768:
            d = int.from_bytes(b[i:i + 4].tobytes(), "little", signed=True)
            i += 4
        parts.append(np.array([d], dtype=np.int64))
    deltas = np.concatenate(parts)[:nf * ns]
    if deltas.size != nf * ns:
        raise RuntimeError("'%s' holds %d pixels, not %d x %d" % (path, deltas.size, nf, ns))
    return np.cumsum(deltas).reshape(ns, nf)


def box_mean(y, w, r):
    """The mean of y where w over the (2r+1)^2 box around each pixel."""
    def box(a):
        c = np.cumsum(np.cumsum(np.pad(a, ((r + 1, r), (r + 1, r))), axis=0), axis=1)
        return c[2 * r + 1:, 2 * r + 1:] - c[:-2 * r - 1, 2 * r + 1:] - c[2 * r + 1:, :-2 * r - 1] + c[:-2 * r - 1, :-2 * r - 1]
    n = box(w.astype(float))
    return np.where(n > 0, box(np.where(w, y, 0.0)) / np.maximum(n, 1), 0.0)


def spots_seen(path):
    """The spots of 10 photons a spot finder sees in a still (criterion 4)."""
    y = cbf_counts(path).astype(float)
    use = y >= 0
    back = box_mean(y, use, 12)
    back = box_mean(y, use & (y <= back + 3 * np.sqrt(back + 1)), 12)
    mark = use & (y >= back + 5 * np.sqrt(back + 1))
    seen = np.zeros(mark.shape, dtype=bool)
    spots = 0
    for s0, f0 in zip(*np.nonzero(mark)):
        if seen[s0, f0]:
            continue
        stack, total = [(s0, f0)], 0.0
        seen[s0, f0] = True
        while stack:
            s, f = stack.pop()
            total += y[s, f] - back[s, f]
            for ds, df in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                t, g = s + ds, f + df
                if 0 <= t < mark.shape[0] and 0 <= g < mark.shape[1] and mark[t, g] and not seen[t, g]:
                    seen[t, g] = True
                    stack.append((t, g))
        spots += total >= 10.0
    return spots


def check_seen(directory, limits):
    stills = sorted(n for n in os.listdir(directory) if n.startswith("still_") and n.endswith(".cbf"))
    for i, name in enumerate(stills):
        n = spots_seen(os.path.join(directory, name))
        if n < limits.min_spots:
            raise Rejected("still %d shows %d spots of 10 photons above its background (< %d)" % (i + 1, n,
                                                                                              limits.min_spots))


def pilot_fluence(p, work, threads, limits):
    """The fluence that gives a pilot still's BRIGHT_RANK-th reflection p['brightness'] photons."""
    pilot = os.path.join(work, "pilot")
    shutil.rmtree(pilot, ignore_errors=True)
    try:
        run_simulate(simulate_args(p, PILOT_FLUENCE, threads, min(2, p["stills"]), True), pilot, pilot + ".log")
        photons = photons_per_still(os.path.join(pilot, "truth.jsonl"))
    finally:
        shutil.rmtree(pilot, ignore_errors=True)
        if os.path.exists(pilot + ".log"):
            os.remove(pilot + ".log")
    ranked = [ph[BRIGHT_RANK - 1] if len(ph) >= BRIGHT_RANK else 0.0 for ph in photons]
    level = float(np.median(ranked))
    if not level > 0:
        raise Rejected("the pilot stills hold fewer than %d reflections" % BRIGHT_RANK)
    fluence = float("%.4g" % (PILOT_FLUENCE * p["brightness"] / level))
    check_spots(photons, fluence / PILOT_FLUENCE, limits, "pilot")
    return fluence


def clear_dataset(d):
    """A rejected draw's files gone (simulate.sh's outputs): only a kept draw leaves a dataset."""
    if not d or not os.path.isdir(d):
        return
    for name in os.listdir(d):
        if name.startswith("still_") or name in ("model.expt", "truth.jsonl", "dataset.env", "F.hkl", "F_asu.hkl",
                                                 "flat.hkl", "simulate.log", "draw.json"):
            os.remove(os.path.join(d, name))


def draw_dataset(args, limits):
    record = {"seed": args.seed, "stills": args.stills, "limits": vars(limits), "rejected": []}
    for attempt in range(args.max_attempts):
        p = draw_params(args.seed, attempt, args.stills, limits)
        try:
            check_spacing(p, limits)
            check_lattice(p, limits)
            if args.params_only:
                record.update(params=p)
                return record
            os.makedirs(args.dir, exist_ok=True)
            t0 = time.time()
            p["fluence"] = pilot_fluence(p, args.dir, args.threads, limits)
            sim = simulate_args(p, p["fluence"], args.threads, args.stills, False)
            run_simulate(sim, args.dir, os.path.join(args.dir, "simulate.log"))
            check_spots(photons_per_still(os.path.join(args.dir, "truth.jsonl")), 1.0, limits, "dataset")
            check_seen(args.dir, limits)
            record.update(params=p, simulate=sim[1:] + [args.dir], seconds=round(time.time() - t0, 2))
            return record
        except Rejected as e:
            print("draw.py: seed %d attempt %d rejected: %s" % (args.seed, attempt, e), file=sys.stderr)
            clear_dataset(args.dir)
            record["rejected"].append({"attempt": attempt, "reason": str(e), "params": p})
    clear_dataset(args.dir)
    raise RuntimeError("no draw of seed %d kept in %d attempts (the last: %s)"
                       % (args.seed, args.max_attempts, record["rejected"][-1]["reason"]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?", help="where the dataset goes (simulate.sh's files and draw.json)")
    ap.add_argument("--seed", type=int, required=True, help="the draw's seed (0 or more)")
    ap.add_argument("--stills", type=int, default=10, help="stills in the dataset (default 10)")
    ap.add_argument("--threads", type=int, help="threads of every stage (default: all cores)")
    ap.add_argument("--max-attempts", type=int, default=50, help="draws tried before giving up (default 50)")
    ap.add_argument("--min-spacing", type=float, default=5.0, help="spots at least this many pixels apart (default 5)")
    ap.add_argument("--min-spots", type=int, default=20,
                    help="reflections of 10 photons or more every still must hold (default 20)")
    ap.add_argument("--pseudo-length", type=float, default=0.03,
                    help="a setting of the lattice beyond the point group's with every edge within this share "
                         "(default 0.03) ...")
    ap.add_argument("--pseudo-angle", type=float, default=3.0,
                    help="... and every angle within this many degrees (default 3) rejects the draw")
    ap.add_argument("--max-oversample", type=int, default=3, help="the oversampling at most (default 3)")
    ap.add_argument("--max-samples", type=float, default=2048.0 ** 2 * 45,
                    help="pixels^2 x oversample^2 x domains at most (default 2048^2 x 45: a second a still of "
                         "nb-sim on 2 cores)")
    ap.add_argument("--max-indices", type=float, default=2e6,
                    help="indices in F.hkl (the sphere to dmin) at most (default 2e6)")
    ap.add_argument("--params-only", action="store_true", help="draw and check the spacing and the lattice; print "
                                                               "the JSON, simulate nothing")
    args = ap.parse_args(argv)
    if args.seed < 0:
        ap.error("--seed must be 0 or more")
    if args.stills < 1 or args.max_attempts < 1 or args.min_spots < 0 or args.max_oversample < 1:
        ap.error("--stills, --max-attempts and --max-oversample must be 1 or more, --min-spots 0 or more")
    if not (args.min_spacing >= 0 and args.max_samples > 0 and args.max_indices > 0):
        ap.error("--min-spacing must be 0 or more, --max-samples and --max-indices positive")
    if args.threads is not None and args.threads < 1:
        ap.error("--threads must be 1 or more")
    if not args.params_only and not args.dir:
        ap.error("give DIR (where the dataset goes), or --params-only")
    limits = argparse.Namespace(min_spacing=args.min_spacing, min_spots=args.min_spots,
                                max_oversample=args.max_oversample, max_samples=args.max_samples,
                                max_indices=args.max_indices, pseudo_length=args.pseudo_length,
                                pseudo_angle=args.pseudo_angle)
    try:
        record = draw_dataset(args, limits)
    except (RuntimeError, OSError) as e:
        print("draw.py: %s" % e, file=sys.stderr)
        return 1
    text = json.dumps(record, indent=1, sort_keys=True)
    if args.params_only:
        print(text)
        return 0
    tmp = os.path.join(args.dir, "draw.json.tmp")
    with open(tmp, "w") as fp:
        fp.write(text + "\n")
    os.replace(tmp, os.path.join(args.dir, "draw.json"))
    p = record["params"]
    print("draw.py: seed %d (attempt %d, %d rejected): %s %s, %d^2 x %g mm at %g mm, %g A, N %d, mosaic %g, "
          "water %g, fluence %.3g, oversample %d -> %s"
          % (args.seed, p["attempt"], len(record["rejected"]), p["space_group"],
             " ".join("%g" % x for x in p["cell"]), p["detpixels"], p["pixel_mm"], p["distance_mm"], p["lambda_A"],
             p["N"], p["mosaic_deg"], p["water_photons"], p["fluence"], p["oversample"], args.dir), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
