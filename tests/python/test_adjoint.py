"""test_adjoint.py - the fast path's vector-Jacobian product by its adjoint sweep
(engine/nb_fast_adjoint.inc, docs/physics.md 14.5) against the tangent passes, on plans drawn across
what the sweep covers: each of the pixel model's rules and terms, many names at once; and the plans it
does not cover (a curved detector, -oversample_* flags), which go through the passes whatever NB_VJP
says."""
import os

import numpy as np
import pytest

import nb

BASE = ["-cell", "64", "77", "91", "83", "97", "104", "-misset", "12", "-25", "31", "-lambda", "1.1", "-N", "4",
        "-default_F", "100", "-distance", "70", "-detpixels_x", "44", "-detpixels_y", "38", "-pixel", "0.5",
        "-Xbeam", "10.3", "-Ybeam", "9.1", "-oversample", "1"]
DETECTOR = ["distance", "Xbeam", "Ybeam", "detector_rotx", "detector_roty", "detector_rotz", "twotheta"]
CRYSTAL = ["cell_a", "cell_b", "cell_c", "cell_alpha", "cell_beta", "cell_gamma", "misset_x", "misset_y",
           "misset_z", "Na", "Nb", "Nc"]
BEAM = ["fluence", "lambda", "scale"]
ALL = DETECTOR + CRYSTAL + BEAM

# what each plan adds to BASE: every rule of nb_pixel.inc and every term's slopes the sweep follows
PLANS = {
    "plain": [],
    "subpixels": ["-oversample", "3"],
    "layers": ["-oversample", "2", "-detector_thick", "0.4", "-detector_abs", "300", "-thicksteps", "3"],
    "mosaic": ["-mosaic", "0.6", "-mosaic_domains", "5", "-seed", "9"],
    "divergence": ["-hdivrange", "0.2", "-vdivrange", "0.15", "-hdivsteps", "2", "-vdivsteps", "3"],
    "dispersion": ["-dispersion", "3", "-dispsteps", "3"],
    "dmin": ["-dmin", "4", "-oversample", "2"],
    "water": ["-water", "30"],
    "kahn": ["-polar", "0.85"],
    "nopolar": ["-nopolar"],
    "round": ["-round_xtal"],
    "gauss": ["-gauss_xtal", "-N", "6"],
    "tophat": ["-tophat_spots"],
    "point_pixel": ["-point_pixel"],
    "roi": ["-roi", "5", "37", "3", "30"],
    "rotation": ["-phi", "5", "-osc", "0.4", "-phisteps", "3"],
    "tricubic": ["-interpolate", "-N", "8"],  # with F from structure_factors()
}


def structure_factors(renderer):
    """F around the origin that varies from point to point, for the tricubic plan's weights' slopes."""
    hkl = np.array([(h, k, l) for h in range(-12, 13) for k in range(-12, 13) for l in range(-12, 13)])
    renderer.set_F(hkl, 20 + 180 * np.random.default_rng(4).random(len(hkl)))


def renderer(plan):
    r = nb.Renderer(BASE + PLANS[plan], precision="fast", threads=2)
    if plan == "tricubic":
        structure_factors(r)
    return r


def product(r, w, names, how):
    """The fast path's product with NB_VJP=how."""
    os.environ["NB_VJP"] = how
    try:
        return r.vjp(w, names, dtype=np.float32)
    finally:
        del os.environ["NB_VJP"]


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_the_sweep_is_the_tangent_passes_product(plan):
    r = renderer(plan)
    names = ALL + (["mosaic"] if plan == "mosaic" else [])
    w = np.random.default_rng(11).standard_normal(r.pixels)
    adjoint, tangents = product(r, w, names, "adjoint"), product(r, w, names, "tangents")
    exact = r.vjp(w, names)  # the double path's, in double
    _, images = r.derivatives(names)
    for n in names:
        size = float(np.abs(w * images[n].ravel().astype(np.float64)).sum())
        assert size > 0.0, n  # every name moves this plan's pixels
        # Both forms round their terms to float.  Where a derivative is far smaller than the parts
        # it is made of (the detector turned about the beam, under a bright water background) those
        # roundings are its error in both: the sweep's within a few times the passes'.
        missed, passes_missed = abs(adjoint[n] - exact[n]), abs(tangents[n] - exact[n])
        assert missed <= 4 * passes_missed + 2e-5 * size, (n, adjoint[n], tangents[n], exact[n], size)


def test_the_sweep_on_two_tilted_panels_follows_each_panels_names(two_panels):
    """Each panel is swept on its own; the panels' shifts and turns move theirs alone."""
    r = nb.Renderer(BASE[:17] + ["-mosaic", "0.5", "-mosaic_domains", "3", "-panels", str(two_panels)],
                    precision="fast", threads=2)
    names = ["distance", "Xbeam", "cell_a", "misset_y", "mosaic", "panel0_shift_fast", "panel1_shift_slow",
             "panel1_rot_normal", "panel0_rot_fast", "lambda"]
    w = np.random.default_rng(2).standard_normal(r.pixels)
    adjoint, tangents, exact = product(r, w, names, "adjoint"), product(r, w, names, "tangents"), r.vjp(w, names)
    _, images = r.derivatives(names)
    for n in names:
        size = float(np.abs(w * images[n].ravel().astype(np.float64)).sum())
        assert size > 0.0, n
        assert abs(adjoint[n] - exact[n]) <= 4 * abs(tangents[n] - exact[n]) + 2e-5 * size, (n, adjoint[n], exact[n])


@pytest.mark.parametrize("extra", [["-curved_det", "1"], ["-oversample", "2", "-oversample_omega"],
                                   ["-oversample", "2", "-oversample_polar"],
                                   ["-detector_thick", "0.4", "-detector_abs", "300", "-oversample_thick"]])
def test_plans_the_sweep_does_not_cover_go_through_the_passes(extra):
    names = ["distance", "Xbeam", "cell_a", "misset_y", "Na", "lambda"]
    r = nb.Renderer(BASE + extra, precision="fast", threads=2)
    w = np.random.default_rng(5).standard_normal(r.pixels)
    assert product(r, w, names, "adjoint") == product(r, w, names, "tangents")  # the same passes: the same bits


def test_the_sweep_is_the_same_on_one_thread_and_two():
    r = renderer("mosaic")
    w = np.random.default_rng(3).standard_normal(r.pixels)
    r.threads = 1
    one = product(r, w, ALL, "adjoint")
    r.threads = 2
    assert product(r, w, ALL, "adjoint") == one


def test_a_bad_nb_vjp_is_an_error():
    r = renderer("plain")
    with pytest.raises(nb.UsageError, match="NB_VJP=reverse: expected adjoint or tangents"):
        product(r, np.ones(r.pixels), ALL, "reverse")
