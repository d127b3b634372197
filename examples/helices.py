#!/usr/bin/env python3
"""helices.py - writes examples/helices.pdb, the small model of README.md's
"structure factors from a model" example: a made-up three-helix bundle (not a
deposited structure), with numpy only.

Three copies (chains A, B, C) of one 18-residue alpha helix,
SELEKLEKKLEAMEKKLG, built atom by atom from ideal bond lengths and angles
(Engh & Huber: N-CA 1.458, CA-C 1.525, C-N 1.329, C=O 1.231 A; phi -57.8,
psi -47.0, omega 180 degrees) and common helical rotamers, the leucines and
the methionine of each helix turned towards the bundle's axis, the helices
as close as their atoms allow; 30 waters hydrogen-bonded to polar atoms; B
factors growing from the bundle's middle to its ends and along each side
chain, the side chains of two lysines at occupancy 0.5.  The bundle sits in a
cell of P 21 21 21 where no atom comes closer than 3 A to one of another
copy (the crystal's neighbours included).

    helices.py > helices.pdb                  # the file in examples/
    helices.py --space-group 'P 61' --cell 70 70 80 90 90 120 > other.pdb
    helices.py --search                       # how the example's cell was chosen

Other space groups (P 1, P -1, P 1 21 1, C 1 2 1, P 21 21 21, P 43 21 2,
P 31 2 1, P 61) and cells are for the tests (tests/cli/sf-model.bats): the same
bundle, refused when the cell makes it touch a copy of itself."""
import argparse
import itertools
import sys

import numpy as np

# ---- one helix, atom by atom -------------------------------------------------

PHI, PSI, OMEGA = -57.8, -47.0, 180.0
# side chains: (atom, element, (three atoms it hangs from), bond, angle, torsion)
# with torsions as chi angles (common helical rotamers: m, mt, mtt, mtm ...)
SIDE = {
    "GLY": [],
    "ALA": [],
    "SER": [("OG", "O", ("N", "CA", "CB"), 1.417, 110.8, -65.0)],
    "LEU": [("CG", "C", ("N", "CA", "CB"), 1.530, 116.3, -65.0),
            ("CD1", "C", ("CA", "CB", "CG"), 1.524, 110.7, 175.0),
            ("CD2", "C", ("CA", "CB", "CG"), 1.525, 110.6, -65.0)],
    "GLU": [("CG", "C", ("N", "CA", "CB"), 1.520, 114.1, -65.0),
            ("CD", "C", ("CA", "CB", "CG"), 1.516, 112.6, 180.0),
            ("OE1", "O", ("CB", "CG", "CD"), 1.249, 118.4, -10.0),
            ("OE2", "O", ("CB", "CG", "CD"), 1.249, 118.4, 170.0)],
    "LYS": [("CG", "C", ("N", "CA", "CB"), 1.520, 114.1, -65.0),
            ("CD", "C", ("CA", "CB", "CG"), 1.520, 111.3, 180.0),
            ("CE", "C", ("CB", "CG", "CD"), 1.520, 111.3, 180.0),
            ("NZ", "N", ("CG", "CD", "CE"), 1.489, 111.9, 180.0)],
    "MET": [("CG", "C", ("N", "CA", "CB"), 1.520, 114.1, -65.0),
            ("SD", "S", ("CA", "CB", "CG"), 1.807, 112.7, 180.0),
            ("CE", "C", ("CB", "CG", "SD"), 1.791, 100.9, -70.0)],
}
ONE = {"G": "GLY", "A": "ALA", "S": "SER", "L": "LEU", "E": "GLU", "K": "LYS", "M": "MET"}
SEQUENCE = "SELEKLEKKLEAMEKKLG"
CORE = {2, 5, 9, 12, 16}        # heptad positions a and d: the bundle's inside
HALF = {7, 14}                  # lysines whose side chains are at occupancy 0.5


def place(a, b, c, bond, angle, torsion):
    """The atom d bonded to c with angle b-c-d and torsion a-b-c-d (degrees)."""
    angle, torsion = np.radians(angle), np.radians(torsion)
    bc = c - b
    bc /= np.linalg.norm(bc)
    n = np.cross(b - a, bc)
    n /= np.linalg.norm(n)
    m = np.cross(n, bc)
    d = np.array([-bond * np.cos(angle), bond * np.sin(angle) * np.cos(torsion),
                  bond * np.sin(angle) * np.sin(torsion)])
    return c + d[0] * bc + d[1] * m + d[2] * n


def helix():
    """One helix: a list of (residue number, residue, atom, element, xyz), and
    its bonds as pairs of indices into that list."""
    atoms, bonds, where = [], [], {}

    def add(i, res, name, el, xyz, parent=None):
        where[(i, name)] = len(atoms)
        atoms.append((i, res, name, el, xyz))
        if parent is not None:
            bonds.append((where[parent], len(atoms) - 1))

    n = np.array([0.0, 0.0, 0.0])
    ca = np.array([1.458, 0.0, 0.0])
    c = place(np.array([0.0, 1.0, 0.0]), n, ca, 1.525, 111.2, -60.0)
    for i, letter in enumerate(SEQUENCE):
        res = ONE[letter]
        add(i, res, "N", "N", n, (i - 1, "C") if i else None)
        add(i, res, "CA", "C", ca, (i, "N"))
        add(i, res, "C", "C", c, (i, "CA"))
        nxt = place(n, ca, c, 1.329, 116.2, PSI)
        add(i, res, "O", "O", place(nxt, ca, c, 1.231, 120.1, 180.0), (i, "C"))
        if res != "GLY":
            add(i, res, "CB", "C", place(n, c, ca, 1.530, 110.1, 122.7), (i, "CA"))
        for name, el, (p1, p2, p3), bond, angle, torsion in SIDE[res]:
            xyz = place(*(atoms[where[(i, p)]][4] for p in (p1, p2, p3)), bond, angle, torsion)
            add(i, res, name, el, xyz, (i, p3))
        if i + 1 == len(SEQUENCE):
            add(i, res, "OXT", "O", place(n, ca, c, 1.250, 117.0, PSI + 180.0), (i, "C"))
        nca = place(ca, c, nxt, 1.458, 121.7, OMEGA)
        nc = place(c, nxt, nca, 1.525, 111.2, PHI)
        n, ca, c = nxt, nca, nc
    return atoms, bonds


def axis_frame(xyz_ca):
    """The helix's axis: a point on it and its direction (the line through
    the centres of successive turns)."""
    centres = np.array([xyz_ca[i:i + 4].mean(axis=0) for i in range(len(xyz_ca) - 3)])
    mid = centres.mean(axis=0)
    _, _, vt = np.linalg.svd(centres - mid)
    u = vt[0]
    if np.dot(u, centres[-1] - centres[0]) < 0:
        u = -u
    return mid, u


def rotation(u, angle):
    """The rotation by angle (radians) about the unit vector u."""
    k = np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def min_distance(a, b):
    """The smallest distance between points of a and points of b."""
    best = np.inf
    for i in range(0, len(a), 256):
        d = np.linalg.norm(a[i:i + 256, None, :] - b[None, :, :], axis=2)
        best = min(best, d.min())
    return best


def bundle():
    """Three helices about the z axis, their cores inwards, as close as 3.4 A
    between atoms of two helices allows; the atoms, their chain letters and
    the bonds of one helix."""
    atoms, bonds = helix()
    xyz = np.array([a[4] for a in atoms])
    ca = np.array([a[4] for a in atoms if a[2] == "CA"])
    mid, u = axis_frame(ca)
    # the helix along z, its middle at the origin
    z = np.array([0.0, 0.0, 1.0])
    v = np.cross(u, z)
    r = rotation(v / np.linalg.norm(v), np.arccos(np.dot(u, z))) if np.linalg.norm(v) > 1e-9 else np.eye(3)
    xyz = (xyz - mid) @ r.T
    # its core (the leucines' and methionine's side chains) towards -x
    core = np.array([p for p, a in zip(xyz, atoms) if a[0] in CORE and a[2] not in ("N", "CA", "C", "O")])
    cx, cy = core[:, 0].mean(), core[:, 1].mean()
    xyz = xyz @ rotation(z, np.pi - np.arctan2(cy, cx)).T
    radius = 5.0
    while True:
        copies = [(xyz + [radius, 0, 0]) @ rotation(z, k * 2 * np.pi / 3).T for k in range(3)]
        if min(min_distance(copies[i], copies[j]) for i, j in ((0, 1), (0, 2), (1, 2))) >= 3.4:
            break
        radius += 0.1
    return atoms, bonds, copies, radius


def waters(protein, polar, count=30):
    """Waters 2.8 A from polar atoms, each at least 3.1 A from every other
    protein atom and 2.8 A from the other waters; the first `count` found, in
    a fixed order (the polar atoms' order, six directions each)."""
    out = []
    dirs = [np.array(d, float) for d in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1))]
    for p, away in polar:
        for d in sorted(dirs, key=lambda d: -np.dot(d, away)):
            if np.dot(d, away) < 0.3:
                continue
            w = p + 2.8 * d
            dist = np.linalg.norm(protein - w, axis=1)
            if dist.min() < 2.79 or np.sort(dist)[1] < 3.1:
                continue
            if out and min(np.linalg.norm(q - w) for q in out) < 2.8:
                continue
            out.append(w)
            break
        if len(out) == count:
            break
    return out


# ---- the crystal -------------------------------------------------------------

# the example's cell, orientation and position: what --search 200 prints
CELL = [34.0, 52.0, 53.0, 90.0, 90.0, 90.0]
TURN = [2.3, 312.5, 178.4]
AT = [0.111, 0.242, 0.286]

OPS = {
    "P 1": ["x,y,z"],
    "P -1": ["x,y,z", "-x,-y,-z"],
    "P 1 21 1": ["x,y,z", "-x,y+1/2,-z"],
    "C 1 2 1": ["x,y,z", "-x,y,-z", "x+1/2,y+1/2,z", "-x+1/2,y+1/2,-z"],
    "P 21 21 21": ["x,y,z", "-x+1/2,-y,z+1/2", "-x,y+1/2,-z+1/2", "x+1/2,-y+1/2,-z"],
    "P 43 21 2": ["x,y,z", "-x,-y,z+1/2", "-y+1/2,x+1/2,z+3/4", "y+1/2,-x+1/2,z+1/4",
                  "-x+1/2,y+1/2,-z+3/4", "x+1/2,-y+1/2,-z+1/4", "y,x,-z", "-y,-x,-z+1/2"],
    "P 31 2 1": ["x,y,z", "-y,x-y,z+1/3", "-x+y,-x,z+2/3", "y,x,-z", "x-y,-y,-z+2/3", "-x,-x+y,-z+1/3"],
    "P 61": ["x,y,z", "x-y,x,z+1/6", "-y,x-y,z+1/3", "-x,-y,z+1/2", "-x+y,-x,z+2/3", "y,-x+y,z+5/6"],
}


def parse_op(text):
    """x' = R x + t from an operator such as '-x+1/2,y,z+1/2'."""
    r, t = np.zeros((3, 3)), np.zeros(3)
    for row, part in enumerate(text.split(",")):
        for term in part.replace("-", "+-").split("+"):
            if not term:
                continue
            sign = -1.0 if term.startswith("-") else 1.0
            term = term.lstrip("-")
            if term in "xyz":
                r[row, "xyz".index(term)] = sign
            else:
                num, den = term.split("/")
                t[row] = sign * float(num) / float(den)
    return r, t


def orthogonalization(cell):
    """The PDB's orthogonalization matrix (a along x, b in the xy plane)."""
    a, b, c = cell[:3]
    al, be, ga = np.radians(cell[3:])
    v = np.sqrt(1 - np.cos(al) ** 2 - np.cos(be) ** 2 - np.cos(ga) ** 2 + 2 * np.cos(al) * np.cos(be) * np.cos(ga))
    return np.array([[a, b * np.cos(ga), c * np.cos(be)],
                     [0, b * np.sin(ga), c * (np.cos(al) - np.cos(be) * np.cos(ga)) / np.sin(ga)],
                     [0, 0, c * v / np.sin(ga)]])


def contact(xyz, cell, ops):
    """The closest approach (A) of the model to its copies in the crystal:
    every operator and lattice translation but the identity."""
    o = orthogonalization(cell)
    frac = xyz @ np.linalg.inv(o).T
    lo, hi = xyz.min(axis=0), xyz.max(axis=0)
    best = np.inf
    for r, t in (parse_op(op) for op in ops):
        f = frac @ r.T + t
        for shift in itertools.product((-2, -1, 0, 1, 2), repeat=3):
            if not shift[0] and not shift[1] and not shift[2] and np.allclose(r, np.eye(3)) and not t.any():
                continue
            copy = (f + shift) @ o.T
            clo, chi = copy.min(axis=0), copy.max(axis=0)
            if (clo > hi + best).any() or (chi < lo - best).any():
                continue
            best = min(best, min_distance(xyz, copy))
    return best


def euler(angles):
    """The rotation by angles (degrees) about z, then y, then z."""
    a, b, c = np.radians(angles)
    z, y = np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0])
    return rotation(z, c) @ rotation(y, b) @ rotation(z, a)


def assemble():
    """The bundle and its waters, centred on the origin: the atoms of one
    helix, the three helices' coordinates, the waters' and the helices' radius."""
    atoms, bonds, copies, radius = bundle()
    protein = np.concatenate(copies)
    # the polar atoms, each with the direction away from the atom it is bonded to
    polar = []
    parent = {j: i for i, j in bonds}
    for k, xyz in enumerate(copies):
        for i, a in enumerate(atoms):
            if a[3] in "NO" and i in parent:
                away = xyz[i] - xyz[parent[i]]
                polar.append((xyz[i], away / np.linalg.norm(away)))
    water = np.array(waters(protein, polar))
    everything = np.concatenate([protein, water])
    centre = (everything.max(axis=0) + everything.min(axis=0)) / 2
    return atoms, [c - centre for c in copies], water - centre, radius


def model(space_group, cell, turn, at, parts=None):
    """The bundle with its waters turned by the Euler angles `turn` (degrees)
    and centred at fractional position `at`: the PDB file's text, and the
    model's closest contact with its copies."""
    atoms, copies, water, radius = parts or assemble()
    r = euler(turn)
    o = orthogonalization(np.array(cell))
    shift = o @ np.array(at)
    copies = [c @ r.T for c in copies]
    water = water @ r.T
    everything = np.concatenate(copies + [water]) + shift
    closest = contact(everything, np.array(cell), OPS[space_group])
    half = (np.abs(everything[:, 2] - everything[:, 2].mean())).max()

    lines = ["REMARK   1 A MADE-UP THREE-HELIX BUNDLE FOR NB'S README (NOT A DEPOSITED",
             "REMARK   1 STRUCTURE), WRITTEN BY EXAMPLES/HELICES.PY: IDEAL HELICES,",
             "REMARK   1 COMMON ROTAMERS, 30 WATERS; HELIX AXES %.1f A FROM THE BUNDLE'S" % radius,
             "REMARK   1 AXIS; CLOSEST CONTACT WITH A SYMMETRY COPY %.2f A." % closest,
             "CRYST1%9.3f%9.3f%9.3f%7.2f%7.2f%7.2f %-11s%4d" % (*cell, space_group, len(OPS[space_group]))]
    serial = 0
    depth = {"N": 0, "CA": 0, "C": 0, "O": 0, "OXT": 0, "CB": 1, "CG": 2, "OG": 2, "SD": 3, "CD": 3, "CD1": 3,
             "CD2": 3, "CE": 4, "OE1": 4, "OE2": 4, "NZ": 5}
    for k, chain in enumerate("ABC"):
        for i, a in enumerate(atoms):
            num, res, name, el, _ = a
            x, y, z = copies[k][i] + shift
            b = 12.0 + 10.0 * (abs(z - everything[:, 2].mean()) / half) ** 2 + 3.0 * depth[name] + 2.0 * k
            occ = 0.5 if num in HALF and depth[name] >= 2 else 1.0
            serial += 1
            label = name if len(name) == 4 else " " + name
            lines.append("ATOM  %5d %-4s %3s %s%4d    %8.3f%8.3f%8.3f%6.2f%6.2f          %2s" %
                         (serial, label, res, chain, num + 1, x, y, z, occ, b, el))
        serial += 1
        lines.append("TER   %5d      %3s %s%4d" % (serial, atoms[-1][1], chain, atoms[-1][0] + 1))
    for j, w in enumerate(water):
        x, y, z = w + shift
        serial += 1
        lines.append("HETATM%5d  O   HOH W%4d    %8.3f%8.3f%8.3f%6.2f%6.2f           O" %
                     (serial, j + 1, x, y, z, 1.0, 30.0 + (j % 5) * 3.0))
    lines.append("END")
    return "\n".join(lines) + "\n", closest


def check_geometry():
    """The helix's own checks: bonds of 1.2-1.9 A and no two atoms more than
    three bonds apart closer than 2.7 A (a helix's N-H...O=C bond is ~2.9)."""
    atoms, bonds = helix()
    xyz = np.array([a[4] for a in atoms])
    n = len(atoms)
    hops = np.full((n, n), 99)
    np.fill_diagonal(hops, 0)
    for i, j in bonds:
        hops[i, j] = hops[j, i] = 1
        length = np.linalg.norm(xyz[i] - xyz[j])
        if not 1.2 < length < 1.9:
            sys.exit("helices.py: bond %s-%s is %.2f A" % (atoms[i][2], atoms[j][2], length))
    for k in range(n):
        hops = np.minimum(hops, hops[:, k:k + 1] + hops[k:k + 1, :])
    d = np.linalg.norm(xyz[:, None] - xyz[None], axis=2)
    bad = (hops > 3) & (d < 2.7)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        sys.exit("helices.py: %s %d and %s %d are %.2f A apart" % (atoms[i][2], atoms[i][0], atoms[j][2],
                                                                  atoms[j][0], d[i, j]))


def search(count):
    """Random orientations and positions in P 21 21 21 cells, smallest volume
    first, until one keeps every copy 3.2 A away (scipy's k-d tree for
    speed; seeded, so the same answer every time)."""
    from scipy.spatial import cKDTree
    parts = assemble()
    atoms, copies, water, _ = parts
    xyz = np.concatenate(copies + [water])
    ops = [parse_op(op) for op in OPS["P 21 21 21"]][1:]
    rng = np.random.default_rng(1)
    # from 56000 A^3, the volume of four bundles at 50 % solvent
    cells = sorted((e for e in itertools.product(range(30, 56), repeat=3)
                    if e[0] <= e[1] <= e[2] and e[0] * e[1] * e[2] >= 56000),
                   key=lambda e: e[0] * e[1] * e[2])
    for cell in cells:
        o = orthogonalization(np.array(cell + (90, 90, 90), float))
        oi = np.linalg.inv(o)
        for _ in range(count):
            turn = rng.uniform(0, 360, 3)
            at = rng.uniform(0, 1, 3)
            model_xyz = xyz @ euler(turn).T + o @ at
            tree = cKDTree(model_xyz)
            frac = model_xyz @ oi.T
            ok = True
            for r, t in ops:
                f = frac @ r.T + t
                for shift in itertools.product((-1, 0, 1), repeat=3):
                    f0 = f + shift - np.floor(f.mean(axis=0) - at + 0.5)
                    if tree.query(f0 @ o.T, distance_upper_bound=3.2)[0].min() < 3.2:
                        ok = False
                        break
                if not ok:
                    break
            if ok:
                _, closest = model("P 21 21 21", list(cell) + [90, 90, 90], turn, at, parts)
                if closest >= 3.2:
                    print("--cell %d %d %d 90 90 90 --turn %.1f %.1f %.1f --at %.3f %.3f %.3f: closest %.2f A" %
                          (*cell, *turn, *at, closest))
                    return
        print("%d %d %d: none of %d" % (*cell, count), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--space-group", default="P 21 21 21", choices=sorted(OPS))
    p.add_argument("--cell", type=float, nargs=6, default=CELL, metavar=("A", "B", "C", "ALPHA", "BETA", "GAMMA"))
    p.add_argument("--turn", type=float, nargs=3, default=TURN, metavar=("Z1", "Y", "Z2"),
                   help="the bundle's orientation: Euler angles (degrees) about z, y, z")
    p.add_argument("--at", type=float, nargs=3, default=AT, metavar=("X", "Y", "Z"),
                   help="the bundle's centre, fractional")
    p.add_argument("--search", type=int, metavar="N",
                   help="try N orientations and positions in each P 21 21 21 cell, smallest first, and print "
                        "the first cell, --turn and --at that keep the copies 3.2 A apart (needs scipy)")
    args = p.parse_args()
    check_geometry()
    if args.search:
        search(args.search)
        return
    text, closest = model(args.space_group, args.cell, args.turn, args.at)
    if closest < 3.0:
        sys.exit("helices.py: in %s %s the bundle comes %.2f A from a copy of itself" %
                 (args.space_group, " ".join("%g" % v for v in args.cell), closest))
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
