#!/usr/bin/python3
"""wilson_hkl.py - Wilson-distributed structure factors for a simulated dataset.

Draws one amplitude per reflection of the asymmetric unit to a resolution, in
one of the space groups P 1, P 2, P 21 (monoclinic, unique axis b), P 2 2 2
and P 21 21 21: acentric ones from the acentric Wilson distribution (|F|^2
exponential, |F| Rayleigh) and centric ones (those a rotation of the point
group turns into their Friedel mate: h0l of 2/m, 0kl, h0l, hk0 of mmm) from
the centric one (F a normal deviate's size), both of mean |F|^2 = Sigma(s) =
F_rms^2 exp(-B s^2 / 2) with s = 1/d, and writes them as 'h k l F' text,
expanded to every index that nb-hkl needs: nb-hkl's text reader fills no
symmetry mate itself (as nanoBragg's), so every mate under the Laue group
(-1, 2/m or mmm: the point group's rotations and Friedel's law) is written.
The asymmetric unit: of each reflection's mates the greatest in (l, k, h)
order.  Systematic absences of the screw axes (0k0 with k odd for P 21;
h00, 0k0, 00l with the index odd for P 21 21 21) are written as 0.  With
--flat every F is F_rms: the flat start of a structure-factor refinement, on
the same indices.

Only the standard library and numpy.  Usage:
  wilson_hkl.py --cell 34 52 53 90 90 90 --dmin 2 --space-group P212121 \
      --seed 1 -o F.hkl [--flat-out flat.hkl] [--asu-out F_asu.hkl]
"""
import argparse
import math
import os
import sys

import numpy as np

# each space group: the point group's rotations, as the sign each turns h, k
# and l by (2-fold axes along the cell's edges: b for the monoclinic ones),
# and the cell edges that carry a 2-fold screw axis (their axial reflections
# of odd index absent)
SPACE_GROUPS = {
    "P1": ([(1, 1, 1)], ()),
    "P2": ([(1, 1, 1), (-1, 1, -1)], ()),
    "P21": ([(1, 1, 1), (-1, 1, -1)], (1,)),
    "P222": ([(1, 1, 1), (-1, -1, 1), (-1, 1, -1), (1, -1, -1)], ()),
    "P212121": ([(1, 1, 1), (-1, -1, 1), (-1, 1, -1), (1, -1, -1)], (0, 1, 2)),
}


def laue_signs(space_group):
    """The Laue group's operations on an index: the rotations and their Friedel mates."""
    rotations = SPACE_GROUPS[space_group][0]
    return rotations + [(-x, -y, -z) for x, y, z in rotations]


def metric(cell):
    """G (Angstrom^2): the dot products of a cell a b c alpha beta gamma's edges (Angstrom, degrees)."""
    a, b, c = cell[:3]
    al, be, ga = (math.radians(x) for x in cell[3:])
    return np.array([[a * a, a * b * math.cos(ga), a * c * math.cos(be)],
                     [a * b * math.cos(ga), b * b, b * c * math.cos(al)],
                     [a * c * math.cos(be), b * c * math.cos(al), c * c]])


def reciprocal_metric(cell):
    """G* (1/Angstrom^2) of a cell a b c alpha beta gamma (Angstrom, degrees)."""
    G = metric(cell)
    if np.linalg.det(G) <= 0:
        raise ValueError("the cell has no volume")
    return np.linalg.inv(G)


def asu_indices(cell, dmin, space_group):
    """The asymmetric unit's indices within dmin, and whether each is centric."""
    Gs = reciprocal_metric(cell)
    smax2 = 1.0 / (dmin * dmin)
    # bounds: |h| <= a / dmin suffices for any cell (h = a . s)
    hmax = [int(math.floor(cell[i] / dmin)) + 1 for i in range(3)]
    if max(hmax) >= 500:
        raise ValueError("indices up to %d: a cell edge over dmin of 500 or more is beyond this tool" % max(hmax))
    rng = [np.arange(-m, m + 1) for m in hmax]
    H, K, L = np.meshgrid(*rng, indexing="ij")
    hkl = np.stack([H.ravel(), K.ravel(), L.ravel()], axis=1)
    s2 = np.einsum("ni,ij,nj->n", hkl, Gs, hkl)
    keep = (s2 <= smax2) & (s2 > 0)
    rotations, screws = SPACE_GROUPS[space_group]
    order = hkl[:, 2] * 1000000 + hkl[:, 1] * 1000 + hkl[:, 0]        # (l, k, h), |index| < 500
    best = np.full(len(hkl), np.iinfo(np.int64).min)
    for signs in laue_signs(space_group):
        m = hkl * np.asarray(signs)
        best = np.maximum(best, m[:, 2] * 1000000 + m[:, 1] * 1000 + m[:, 0])
    keep &= order == best
    # centric: a rotation takes the reflection to its Friedel mate
    centric = np.zeros(len(hkl), dtype=bool)
    for signs in rotations[1:]:
        centric |= np.all(hkl * np.asarray(signs) == -hkl, axis=1)
    absent = np.zeros(len(hkl), dtype=bool)
    for axis in screws:
        others = [i for i in range(3) if i != axis]
        absent |= (hkl[:, others[0]] == 0) & (hkl[:, others[1]] == 0) & (hkl[:, axis] % 2 == 1)
    return hkl[keep], s2[keep], centric[keep], absent[keep]


def draw(s2, centric, absent, f_rms, bfactor, rng):
    """Wilson amplitudes: <|F|^2> = f_rms^2 exp(-B s^2 / 2)."""
    sigma = f_rms * f_rms * np.exp(-bfactor * s2 / 2.0)
    x = rng.normal(size=len(s2))
    y = rng.normal(size=len(s2))
    # acentric: |F|^2 = Sigma (x^2 + y^2) / 2, exponential of mean Sigma;
    # centric: F = sqrt(Sigma) x, normal of variance Sigma
    F = np.where(centric, np.sqrt(sigma) * np.abs(x), np.sqrt(sigma * (x * x + y * y) / 2.0))
    return np.where(absent, 0.0, F)


def expand(hkl, F, space_group):
    """Every index nb-hkl needs: the Laue group's mates (-1, 2/m or mmm)."""
    seen = {}
    for (h, k, l), f in zip(hkl.tolist(), F.tolist()):
        for sh, sk, sl in laue_signs(space_group):
            seen.setdefault((sh * h, sk * k, sl * l), f)
    return sorted(seen.items())


def write_hkl(path, rows, header):
    """The file written whole under a temporary name, then renamed."""
    with open(path + ".tmp", "w") as fp:
        for line in header:
            fp.write("# " + line + "\n")
        for (h, k, l), f in rows:
            fp.write("%d %d %d %.6f\n" % (h, k, l, f))
    os.replace(path + ".tmp", path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cell", nargs=6, type=float, required=True, metavar=("A", "B", "C", "AL", "BE", "GA"))
    ap.add_argument("--dmin", type=float, required=True, help="resolution limit (Angstrom)")
    ap.add_argument("--space-group", default="P212121", choices=sorted(SPACE_GROUPS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--f-rms", type=float, default=100.0, help="sqrt of <|F|^2> at s = 0 (default 100)")
    ap.add_argument("--B", type=float, default=0.0, dest="bfactor",
                    help="Wilson B (Angstrom^2): <|F|^2> falls as exp(-B s^2 / 2) (default 0)")
    ap.add_argument("-o", required=True, help="the P1-expanded 'h k l F' file")
    ap.add_argument("--flat-out", help="also write every index with F = the rms F of the drawn set")
    ap.add_argument("--asu-out", help="also write the asymmetric unit alone")
    args = ap.parse_args(argv)
    if args.dmin <= 0 or args.f_rms <= 0:
        ap.error("--dmin and --f-rms must be positive")
    try:
        hkl, s2, centric, absent = asu_indices(args.cell, args.dmin, args.space_group)
    except ValueError as e:
        print("wilson_hkl.py: %s" % e, file=sys.stderr)
        return 1
    rng = np.random.default_rng(args.seed)
    F = draw(s2, centric, absent, args.f_rms, args.bfactor, rng)
    header = ["Wilson F: cell %s, dmin %g, %s, seed %d, F_rms %g, B %g" %
              (" ".join("%g" % x for x in args.cell), args.dmin, args.space_group, args.seed,
               args.f_rms, args.bfactor),
              "%d reflections in the asymmetric unit, %d centric, %d absent" %
              (len(hkl), int(centric.sum()), int(absent.sum()))]
    rows = expand(hkl, F, args.space_group)
    present = F[~absent]
    rms = float(np.sqrt(np.mean(present * present))) if len(present) else args.f_rms
    try:
        write_hkl(args.o, rows, header + ["expanded to %d indices (%s)" % (len(rows), args.space_group)])
        if args.flat_out:
            write_hkl(args.flat_out, [(i, rms if f > 0 else 0.0) for i, f in rows],
                      ["flat start: F = %g (the rms of %s) on its indices" % (rms, args.o)])
        if args.asu_out:
            write_hkl(args.asu_out, list(zip(map(tuple, hkl.tolist()), F.tolist())), header)
    except OSError as e:
        print("wilson_hkl.py: cannot write '%s': %s" % (str(e.filename).removesuffix(".tmp"), e.strerror),
              file=sys.stderr)
        return 1
    print("wilson_hkl.py: %d asymmetric-unit reflections (%d centric, %d absent) to %g A, %d indices, rms F %.4g"
          % (len(hkl), int(centric.sum()), int(absent.sum()), args.dmin, len(rows), rms), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
