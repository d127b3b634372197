"""orientation.py - comparing crystal orientations across DIALS's basis
choice, for tests/dials/truth-gates.sh: DIALS indexes a lattice in a basis of
its own (A_dials = R A_truth M, M an integer matrix of determinant +-1), so
the truth is first put in that basis, then the rotation R between the two
measured (its angle, and its parts about the laboratory axes)."""
import math

import numpy
from scitbx import matrix


def in_basis_of(A_truth, A_dials):
    """The truth's setting matrix in DIALS's basis: A_truth M"""
    At, Ad = matrix.sqr(A_truth), matrix.sqr(A_dials)
    M = matrix.sqr([round(x) for x in (At.inverse() * Ad).elems])
    if abs(abs(M.determinant()) - 1) > 1e-9:
        raise ValueError("no integer change of basis between the two lattices")
    return At * M


def misorientation(A_dials, A_truth):
    """(angle, (x, y, z)): the rotation taking the truth onto DIALS's setting,
    in degrees, and its rotation vector's components in degrees"""
    Ad = matrix.sqr(A_dials)
    R = numpy.array((Ad * in_basis_of(A_truth, A_dials).inverse()).elems).reshape(3, 3)
    u, _, vt = numpy.linalg.svd(R)  # the nearest rotation: the cells differ a little
    Rr = u @ vt
    angle = math.degrees(math.acos(max(-1.0, min(1.0, (numpy.trace(Rr) - 1) / 2))))
    axis = numpy.array([Rr[2, 1] - Rr[1, 2], Rr[0, 2] - Rr[2, 0], Rr[1, 0] - Rr[0, 1]])
    n = numpy.linalg.norm(axis)
    return angle, tuple(angle * axis / n) if n > 0 else (0.0, 0.0, 0.0)
