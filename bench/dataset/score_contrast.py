#!/usr/bin/python3
"""score_contrast.py - how well a spot-lattice score tells a still's true crystal from chance.

The global stage of nb-fit's dataset fit (docs/physics.md 15.1) scores a crystal by how
close the observed spots' scattering vectors are to its lattice points.  On dense patterns
(large cells, many spots), on small crystals' fringes and on spots split by noise, such a
score loses contrast: random orientations match spots by chance.  This measures it, per
still, for two scores:

  fractional  the score nb-fit had before issue 46: every observed spot (connected pixels
              5 sigma above the panel's median, 10 photons or more), sum of
              exp(-|h - round h|^2 / 2 s^2), s = 0.05 in every index
  whitened    nb-fit's now: the 200 strongest spots above a local background (pieces 2.5
              pixels apart merged), the residual split along the diffracted beam (the
              reflection's width, 1/(N a), and mosaic) and across it (a pixel)

Each still's contrast is (S(truth) - mean) / sd, the mean and sd of S over --random
orientations of the true cell (uniform on the sphere): how many standard deviations of
chance the truth stands out by.  Prints a line per still and the medians.  Reads the
simulated dataset of simulate.sh or draw.py: DIR/model.expt (the truth), DIR/still_*.cbf,
DIR/dataset.env (N, mosaic; the detector from model.expt).  Only the standard library and
numpy.

Usage:
  score_contrast.py DIR [--random 64] [--seed 1] [--json OUT]
Exit status: 0, 1 nothing measured, 2 usage or unreadable input.
"""
import argparse
import json
import math
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import draw  # noqa: E402  (cbf_counts, box_mean)
import evaluate as ev  # noqa: E402


def components(mark, y, back):
    """Connected marked pixels (4-neighbours): [(photons above back, f, s centroid)]."""
    seen = np.zeros(mark.shape, dtype=bool)
    out = []
    for s0, f0 in zip(*np.nonzero(mark)):
        if seen[s0, f0]:
            continue
        stack, w, wf, ws = [(s0, f0)], 0.0, 0.0, 0.0
        seen[s0, f0] = True
        while stack:
            s, f = stack.pop()
            v = y[s, f] - back[s, f]
            w, wf, ws = w + v, wf + v * (f + 0.5), ws + v * (s + 0.5)
            for ds, df in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                t, g = s + ds, f + df
                if 0 <= t < mark.shape[0] and 0 <= g < mark.shape[1] and mark[t, g] and not seen[t, g]:
                    seen[t, g] = True
                    stack.append((t, g))
        if w >= 10.0:
            out.append((w, wf / w, ws / w))
    return out


def merged(spots, radius=2.5):
    """Pieces of one spot (centroids within radius) as one, weighted."""
    spots = sorted(spots, key=lambda x: -x[0])
    kept = []
    for w, f, s in spots:
        for k in kept:
            if (k[1] - f) ** 2 + (k[2] - s) ** 2 <= radius * radius:
                t = k[0] + w
                k[1], k[2], k[0] = (k[1] * k[0] + f * w) / t, (k[2] * k[0] + s * w) / t, t
                break
        else:
            kept.append([w, f, s])
    return [tuple(k) for k in kept]


def find_spots(path, local):
    y = draw.cbf_counts(path).astype(float)
    use = y >= 0
    if local:
        back = draw.box_mean(y, use, 12)
        back = draw.box_mean(y, use & (y <= back + 3 * np.sqrt(back + 1)), 12)
    else:
        back = np.full(y.shape, float(np.median(y[use])))
    return components(use & (y >= back + 5 * np.sqrt(back + 1)), y, back)


def detector(expt_path):
    el = ev.load_json(expt_path)
    p = el["detector"][0]["panels"][0]
    origin = np.asarray(p["origin"], float)
    for g in ev.walk_groups(el["detector"][0].get("hierarchy", {})):
        if any(c.get("panel") == 0 for c in g.get("children", [])):
            origin = origin + np.asarray(g["origin"], float)
    beam = el["beam"][0]
    s0 = -np.asarray(beam["direction"], float)  # DIALS's beam direction points to the source
    return (origin, np.asarray(p["fast_axis"], float), np.asarray(p["slow_axis"], float), float(p["pixel_size"][0]),
            s0 / np.linalg.norm(s0), float(beam["wavelength"]))


def scattering(spots, det):
    origin, fast, slow, px, s0, lam = det
    q, s1 = [], []
    for _, f, s in spots:
        pos = origin + f * px * fast + s * px * slow
        u = pos / np.linalg.norm(pos)
        s1.append(u)
        q.append((u - s0) / lam)
    return np.array(q), np.array(s1)


def fractional_score(A, q, sigma=0.05):
    h = q @ A.T
    dh = h - np.round(h)
    return float(np.sum(np.exp(-np.sum(dh * dh, axis=1) / (2 * sigma * sigma))))


def whitened_score(A, q, s1, sp, se):
    h = np.round(q @ A.T)
    e = q - h @ np.linalg.inv(A).T
    along = np.sum(e * s1, axis=1)
    perp2 = np.sum(e * e, axis=1) - along * along
    return float(np.sum(np.exp(-0.5 * (perp2 / sp ** 2 + along ** 2 / se ** 2))))


def random_rotation(rng):
    q = rng.normal(size=4)
    a, b, c, d = q / np.linalg.norm(q)
    return np.array([[a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c)],
                     [2 * (b * c + a * d), a * a - b * b + c * c - d * d, 2 * (c * d - a * b)],
                     [2 * (b * d - a * c), 2 * (c * d + a * b), a * a - b * b - c * c + d * d]])


def contrast(score, A, rotations):
    chance = np.array([score(A @ R.T) for R in rotations])
    return (score(A) - chance.mean()) / max(chance.std(), math.sqrt(chance.mean() + 1.0))


def env_value(path, key, default):
    try:
        for line in open(path):
            m = re.match(r"^%s=\"?([^\"]*)\"?$" % key, line.strip())
            if m:
                return m.group(1)
    except OSError:
        pass
    return default


def main(argv=None):
    ap = argparse.ArgumentParser(description="Each still's true crystal against chance, under two spot scores.")
    ap.add_argument("dir", help="a simulated dataset (simulate.sh's or draw.py's)")
    ap.add_argument("--random", type=int, default=64, help="random orientations (default 64)")
    ap.add_argument("--seed", type=int, default=1, help="their seed (default 1)")
    ap.add_argument("--json", help="also write the figures as JSON")
    args = ap.parse_args(argv)
    if args.random < 8:
        ap.error("--random must be 8 or more")
    try:
        truth, _ = ev.experiments(os.path.join(args.dir, "model.expt"))
        det = detector(os.path.join(args.dir, "model.expt"))
    except (ev.InputError, KeyError, IndexError) as e:
        print("score_contrast.py: %s" % e, file=sys.stderr)
        return 2
    xtal = env_value(os.path.join(args.dir, "dataset.env"), "XTAL", "")
    m = re.search(r"-N (\d+)", xtal)
    N = float(m.group(1)) if m else 10.0
    m = re.search(r"-mosaic (\S+)", xtal)
    mosaic = math.radians(float(m.group(1))) if m else 0.0
    rng = np.random.default_rng(args.seed)
    rotations = [random_rotation(rng) for _ in range(args.random)]
    rows = []
    for frame, x, _ in truth:
        path = os.path.join(args.dir, "still_%03d.cbf" % frame)
        if not os.path.exists(path):
            continue
        A = ev.real_space(x).T          # rows a, b, c (A): h = A q
        q_all, s1_all = scattering(find_spots(path, local=False), det)
        strong = sorted(merged(find_spots(path, local=True)), key=lambda t: -t[0])[:200]
        q, s1 = scattering(strong, det)
        if len(q_all) == 0 or len(q) == 0:
            continue
        edge = abs(np.linalg.det(A)) ** (1 / 3)
        qlen = np.linalg.norm(q, axis=1)
        dist = np.linalg.norm(det[0])
        sp = det[3] / (dist * det[5]) + 1e-6
        se = np.sqrt((1.0 / (N * edge)) ** 2 + (mosaic * qlen) ** 2) + 1e-6
        old = contrast(lambda M: fractional_score(M, q_all), A, rotations)
        new = contrast(lambda M: whitened_score(M, q, s1, sp, se), A, rotations)
        rows.append({"frame": frame, "spots_all": len(q_all), "spots_scored": len(q), "fractional": old,
                     "whitened": new})
        print("still %3d: %5d spots, fractional contrast %7.1f; %4d strongest, whitened contrast %7.1f"
              % (frame, len(q_all), old, len(q), new))
    if not rows:
        print("score_contrast.py: no still measured in '%s'" % args.dir, file=sys.stderr)
        return 1
    med = {k: float(np.median([r[k] for r in rows])) for k in ("fractional", "whitened")}
    print("median contrast over %d stills: fractional %.1f, whitened %.1f" % (len(rows), med["fractional"],
                                                                            med["whitened"]))
    if args.json:
        with open(args.json, "w") as fp:
            json.dump({"stills": rows, "median": med}, fp, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
