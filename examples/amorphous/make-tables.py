#!/usr/bin/env python3
"""make-tables.py - make the amorphous tables of this folder (water.stol,
ice.stol, air.stol, oil.stol) for nb-amorphous and pipelines/nonbragg.

    python3 examples/amorphous/make-tables.py [OUTDIR]     (default: beside this script)

Needs numpy and xraylib (Debian: apt-get install python3-numpy python3-xraylib).
The model and its sources are in examples/amorphous/README.md and
docs/physics.md section 17.4; in short, for one molecule of the material at
s = sin(theta)/lambda (q = 4 pi s):

    F(s)^2 = sum_ij f_i f_j sin(q r_ij)/(q r_ij)                 (Debye: the molecule, coherent)
           + [sum_i f_i sin(q d_i)/(q d_i)]^2 (S(q) - 1)          (the molecules' arrangement)
           + sum_i S_inc,i(s)                                     (Compton, incoherent)

f_i and S_inc,i are xraylib's FF_Rayl and SF_Compt (the tables of Hubbell et
al. 1975, J. Phys. Chem. Ref. Data 4, 471), r_ij the molecule's interatomic
distances, d_i each atom's distance from the molecule's centre, and S(q) the
Percus-Yevick structure factor of hard spheres (Wertheim 1963, Thiele 1963)
whose packing fraction gives the liquid's S(0) and whose diameter puts the
main peak where the material's measured X-ray structure factor has it (air:
an ideal gas, S = 1).  F is the square root; nonBragg's renderer squares it.
"""
import math
import os
import sys

import numpy as np
import xraylib

# ---- the molecules: atoms (Z) and positions (Angstrom), centre at the origin ----

def water():
    # O-H 0.9572 A, H-O-H 104.52 degrees (the gas-phase geometry), centre on O
    half = math.radians(104.52) / 2
    return [(8, (0.0, 0.0, 0.0)), (1, (0.9572 * math.sin(half), 0.9572 * math.cos(half), 0.0)),
            (1, (-0.9572 * math.sin(half), 0.9572 * math.cos(half), 0.0))]

def diatomic(Z, bond):
    return [(Z, (0.0, 0.0, bond / 2)), (Z, (0.0, 0.0, -bond / 2))]

def ch2():
    # a CH2 unit of a hydrocarbon chain: C-H 1.09 A, H-C-H 107 degrees, centre on C
    half = math.radians(107.0) / 2
    return [(6, (0.0, 0.0, 0.0)), (1, (1.09 * math.sin(half), 1.09 * math.cos(half), 0.0)),
            (1, (-1.09 * math.sin(half), 1.09 * math.cos(half), 0.0))]

# ---- the materials ----------------------------------------------------------------
# species: (fraction of the molecules, atoms); liquid: (S(0), Q of the main peak in 1/A)
# or None for an ideal gas; density (g/cm^3) and molecular weight (g/mol) are the
# values to give nb-amorphous (--density, --mw), recorded in the table's header.
MATERIALS = {
    "water": dict(
        title="liquid water at 25 C",
        species=[(1.0, water())], liquid=(0.0622, 2.00), density=0.997, mw=18.015,
        notes=["S(0) = rho k T kappa_T with kappa_T = 4.52e-10 /Pa (water at 25 C)",
               "main peak of water's X-ray structure factor at Q = 2.00 /A (Hura et al. 2000, "
               "J. Chem. Phys. 113, 9140; Skinner et al. 2013, J. Chem. Phys. 138, 074506)"]),
    "ice": dict(
        title="vitreous (low-density amorphous) ice, as in a vitrified cryo sample",
        species=[(1.0, water())], liquid=(0.025, 1.70), density=0.94, mw=18.015,
        notes=["main peak of low-density amorphous ice at Q = 1.70 /A (Bowron et al. 2006, J. Chem. Phys. 125, "
               "194502)",
               "S(0) = 0.025: a model choice for a glass (its low-Q limit is small), not a measurement"]),
    "air": dict(
        title="dry air at 20 C and 1 atm, an ideal gas",
        species=[(0.78084, diatomic(7, 1.0977)), (0.20946, diatomic(8, 1.2075)), (0.00934, [(18, (0.0, 0.0, 0.0))])],
        liquid=None, density=0.001204, mw=28.96,
        notes=["mole fractions N2 0.78084, O2 0.20946, Ar 0.00934 (CO2 and the rest left out, the fractions "
               "renormalised); bond lengths N2 1.0977 A, O2 1.2075 A",
               "an ideal gas: S(q) = 1, each molecule scatters on its own; F^2 is the mixture's mean"]),
    "oil": dict(
        title="a hydrocarbon cryo-oil (Paratone-N, mineral oil): one CH2 unit of its chains",
        species=[(1.0, ch2())], liquid=(0.09, 1.38), density=0.87, mw=14.027,
        notes=["the amorphous halo of hydrocarbon chains (liquid alkanes, polyethylene melt) at Q = 1.38 /A "
               "(2 theta = 19.6 degrees at Cu K-alpha; d = 4.55 A, the spacing of neighbouring chains)",
               "S(0) = rho k T kappa_T with kappa_T = 6e-10 /Pa (a light mineral oil at room temperature), "
               "per CH2 unit; density 0.87 g/cm^3"]),
}

STOL_MAX, STOL_STEP = 1.5, 0.002


def f_coh(Z, s):
    return np.array([float(Z) if x == 0 else xraylib.FF_Rayl(Z, x) for x in s])


def s_inc(Z, s):
    return np.array([0.0 if x == 0 else xraylib.SF_Compt(Z, x) for x in s])


def sinc(x):
    out = np.ones_like(x)
    nz = x != 0
    out[nz] = np.sin(x[nz]) / x[nz]
    return out


def percus_yevick(q, eta, sigma):
    """S(q) of hard spheres of diameter sigma at packing fraction eta (Percus-Yevick)."""
    a = (1 + 2 * eta) ** 2 / (1 - eta) ** 4
    b = -6 * eta * (1 + eta / 2) ** 2 / (1 - eta) ** 4
    g = eta * a / 2
    x = np.asarray(q, float) * sigma
    S = np.full_like(x, 1 / a)  # the limit at q = 0
    big = x > 0.05  # below, the terms cancel in floating point; S is within 1e-4 of S(0) there
    x = x[big]
    si, co = np.sin(x), np.cos(x)
    G = (a / x ** 2 * (si - x * co) + b / x ** 3 * (2 * x * si + (2 - x ** 2) * co - 2)
         + g / x ** 5 * (-x ** 4 * co + 4 * ((3 * x ** 2 - 6) * co + (x ** 3 - 6 * x) * si + 6)))
    S[big] = 1 / (1 + 24 * eta * G / x)
    return S


def packing_for(S0):
    """The packing fraction whose S(0) = (1 - eta)^4 / (1 + 2 eta)^2 is S0 (bisection)."""
    lo, hi = 1e-9, 0.7
    for _ in range(200):
        mid = (lo + hi) / 2
        if (1 - mid) ** 4 / (1 + 2 * mid) ** 2 > S0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def diameter_for(eta, Q_peak):
    """The diameter that puts the main peak of S(q) at Q_peak (1/A)."""
    x = np.linspace(2.0, 12.0, 200001)
    x_peak = x[np.argmax(percus_yevick(x, eta, 1.0))]
    return x_peak / Q_peak


def molecule_terms(atoms, s):
    """<|F|^2> (Debye), <F> about the centre, and the incoherent sum, at s."""
    q = 4 * math.pi * s
    f = [f_coh(Z, s) for Z, _ in atoms]
    F2 = np.zeros_like(s)
    F1 = np.zeros_like(s)
    inc = np.zeros_like(s)
    for i, (Zi, ri) in enumerate(atoms):
        F1 += f[i] * sinc(q * math.dist(ri, (0.0, 0.0, 0.0)))
        inc += s_inc(Zi, s)
        for j, (Zj, rj) in enumerate(atoms):
            F2 += f[i] * f[j] * sinc(q * math.dist(ri, rj))
    return F2, F1, inc


def table(m, s):
    I = np.zeros_like(s)
    q = 4 * math.pi * s
    if m["liquid"]:
        S0, Q_peak = m["liquid"]
        eta = packing_for(S0)
        sigma = diameter_for(eta, Q_peak)
        S = percus_yevick(q, eta, sigma)
    else:
        eta = sigma = None
        S = np.ones_like(s)
    for frac, atoms in m["species"]:
        F2, F1, inc = molecule_terms(atoms, s)
        I += frac / sum(x for x, _ in m["species"]) * (F2 + F1 ** 2 * (S - 1) + inc)
    return np.sqrt(np.maximum(I, 0.0)), eta, sigma


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    s = np.round(np.arange(0.0, STOL_MAX + STOL_STEP / 2, STOL_STEP), 6)
    for name, m in MATERIALS.items():
        F, eta, sigma = table(m, s)
        lines = [
            f"# {name}.stol: F of one molecule against sin(theta)/lambda (1/A) - {m['title']}",
            "# made by examples/amorphous/make-tables.py (nb); the model: examples/amorphous/README.md",
            "# F^2 = Debye sum of the molecule + <F>^2 (S(q) - 1) + Compton; f and S_inc from xraylib "
            "(Hubbell et al. 1975)",
        ]
        if eta is not None:
            lines.append(f"# S(q): Percus-Yevick hard spheres, packing fraction {eta:.4f}, diameter {sigma:.4f} A")
        lines += [f"# {n}" for n in m["notes"]]
        lines.append(f"# nb-amorphous --table {name}.stol --density {m['density']} --mw {m['mw']}")
        lines += [f"{x:.3f} {v:.6f}" for x, v in zip(s, F)]
        with open(os.path.join(out, f"{name}.stol"), "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
