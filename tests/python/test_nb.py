"""test_nb.py - the nb package against the tools: renders, derivatives, noise, files and the fit
give the bytes nb-sim, nb-sim --grad, nb-noise and nb-convert give; every bad argument says which."""
import os
import threading

import numpy as np
import pytest

import nb
from conftest import DISTANCE, ROOT, XTAL, sim_frames, tool


def test_the_package_and_library_are_the_expected_ones():
    prefix = os.environ.get("NB_EXPECT_PREFIX")
    if prefix:  # tests/cli/python.bats: the installed tree, nothing from the build tree
        assert os.path.realpath(nb.__file__).startswith(os.path.realpath(prefix))
        assert os.path.realpath(nb._lib.lib._name).startswith(os.path.realpath(prefix))
    assert nb.library_version() == open(os.path.join(ROOT, "VERSION")).read().strip()


def test_render_equals_nb_sim_on_a_triclinic_misset_mosaic_two_panel_plan(tmp_path, two_panels):
    flags = XTAL + ["-panels", str(two_panels)]
    r = nb.Renderer(flags, device="cpu")
    want, _ = sim_frames(flags, tmp_path)
    assert r.panels == 2 and r.shape is None  # panels of 64 and 40 pixels: a flat frame
    assert r.panel_shapes == [(48, 64), (48, 40)]
    got = r.render()
    assert got.dtype == np.float32 and got.shape == (64 * 48 + 40 * 48,)
    assert got.tobytes() == want[0].tobytes()
    assert r.render_panel(1).tobytes() == want[0][64 * 48:].tobytes()


def test_render_of_a_series_gives_each_frame_and_writes_into_out(tmp_path):
    flags = XTAL + DISTANCE + ["-detpixels_x", "48", "-detpixels_y", "40", "-phi", "0", "-osc", "0.5", "-nframes", "3"]
    r = nb.Renderer(flags, threads=2)
    want, _ = sim_frames(flags, tmp_path)
    assert r.frames == 3 and r.shape == (1, 40, 48)
    out = np.zeros(r.shape, dtype=np.float32)
    for k in range(3):
        assert r.render(k, out=out) is out
        assert out.tobytes() == want[k].tobytes()


def test_double_render_is_the_double_path_before_rounding(tmp_path):
    flags = XTAL + DISTANCE + ["-detpixels", "32", "-precision", "double"]
    r = nb.Renderer(flags)
    want, _ = sim_frames(flags, tmp_path)
    wide = r.render(dtype=np.float64)
    assert wide.dtype == np.float64
    assert wide.astype(np.float32).tobytes() == want[0].tobytes()
    assert not np.array_equal(wide, wide.astype(np.float32).astype(np.float64))  # more than float's bits


@pytest.mark.parametrize("made_with", ["expt", "panels"])
def test_derivatives_of_plans_from_expt_and_panels_equal_nb_sim_grad(tmp_path, two_panels, made_with):
    names = ["distance", "Xbeam", "Ybeam", "misset_x", "cell_a", "mosaic"]
    if made_with == "expt":
        tool("nb-convert", "-q", "-o", str(tmp_path / "model.expt"),
             stdin=tool("nb-geom", "-q", *XTAL, *DISTANCE, "-detpixels", "40", "-default_F", "100", "-phi", "0", "-osc", "0.5",
                        "-nframes", "2"))
        flags = ["-expt", str(tmp_path / "model.expt"), "-default_F", "100", "-N", "5", "-oversample", "1",
                 "-mosaic", "0.5", "-mosaic_domains", "3", "-seed", "5"]
        r = nb.Renderer.from_expt(tmp_path / "model.expt", *flags[2:])
    else:
        flags = XTAL + ["-panels", str(two_panels), "-default_F", "100"]
        r = nb.Renderer(flags)
    want, want_grads = sim_frames(flags, tmp_path, grad=names)
    for frame in range(r.frames):
        image, grads = r.derivatives(names, frame)
        assert image.tobytes() == want[frame].tobytes()
        for n in names:
            assert grads[n].tobytes() == want_grads[n][frame].tobytes(), n


def test_vjp_is_the_weighted_sum_of_the_derivatives_on_either_path():
    r = nb.Renderer(XTAL + DISTANCE + ["-detpixels", "32", "-default_F", "100"])
    names = ["distance", "misset_y", "cell_b"]
    w = np.random.default_rng(7).normal(size=r.pixels)
    _, g32 = r.derivatives(names)
    _, g64 = r.derivatives(names, dtype=np.float64)
    v32, v64 = r.vjp(w, names, dtype=np.float32), r.vjp(w.reshape(r.shape), names)
    for n in names:
        assert v32[n] == pytest.approx(float(np.dot(w, g32[n].ravel().astype(np.float64))), rel=1e-12)
        assert v64[n] == pytest.approx(float(np.dot(w, g64[n].ravel())), rel=1e-12)
        assert v64[n] == pytest.approx(v32[n], rel=1e-3)  # the two paths agree as paths do


def test_parameters_by_name_move_the_plan():
    r = nb.Renderer(XTAL + DISTANCE + ["-detpixels", "32", "-default_F", "100"])
    assert r["distance"] == 80.0
    params = r.parameters()
    assert params["cell_a"] == pytest.approx(70.0) and params["mosaic"] == pytest.approx(0.5)
    assert "panel0_shift_fast" in params and "twotheta" in params
    before = r.render()
    r["distance"] = 90.0
    assert r.get("distance") == pytest.approx(90.0)
    moved = nb.Renderer(XTAL + ["-distance", "90", "-detpixels", "32", "-default_F", "100"]).render()
    assert r.render().tobytes() == moved.tobytes() and not np.array_equal(before, moved)
    assert nb.parameter_unit("distance") == "mm" and nb.parameter_unit("misset_x") == "degree"
    assert "cell_gamma" in nb.parameter_names()


def test_threads_and_precision_can_be_changed_without_changing_the_image():
    r = nb.Renderer(XTAL + DISTANCE + ["-detpixels", "32", "-default_F", "100"], threads=1)
    one = r.render()
    r.threads = 2
    assert r.threads == 2 and r.render().tobytes() == one.tobytes()
    r.precision = "double"
    assert not np.array_equal(r.render(), one)  # the double path's floats differ from the fast path's
    r.precision = "plan"
    assert r.render().tobytes() == one.tobytes()


def test_two_renderers_render_at_once_in_threads_as_alone():
    flags = XTAL + DISTANCE + ["-detpixels", "48", "-default_F", "100"]
    renderers = [nb.Renderer(flags, threads=1) for _ in range(2)]
    want = renderers[0].render()
    results = [None, None]

    def work(i):
        results[i] = renderers[i].render()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(res.tobytes() == want.tobytes() for res in results)


def test_noise_is_nb_noises(tmp_path):
    flags = XTAL + DISTANCE + ["-detpixels", "32", "-default_F", "100"]
    r = nb.Renderer(flags)
    counts = r.noise(r.render(), seed=3)
    stream = tool("nb-noise", "-q", "-seed", "3", stdin=tool("nb-sim", "-q", "--device", "cpu",
                                                             stdin=tool("nb-geom", "-q", *flags)))
    (tmp_path / "n.nbs").write_bytes(stream)
    tool("nb-convert", "-q", "-o", str(tmp_path / "n.img"), str(tmp_path / "n.nbs"))
    back = nb.read_image(tmp_path / "n.img", r)
    assert back.is_counts and back.format == "smv"
    assert np.array_equal(back.data.ravel(), counts.ravel().astype(np.float64))
    image = nb.noise_image(np.full((8, 6), 100.0, dtype=np.float32), seed=1)
    assert image.shape == (8, 6) and image.dtype == np.int32 and 0 < image.mean() < 400


def test_images_written_and_read_back(tmp_path):
    r = nb.Renderer(XTAL + DISTANCE + ["-detpixels", "32", "-default_F", "100"])
    photons = r.render()
    nb.write_image(tmp_path / "p.bin", photons, r)
    assert np.fromfile(tmp_path / "p.bin", dtype=np.float32).tobytes() == photons.tobytes()
    nb.write_image(tmp_path / "p.cbf", photons.reshape(32, 32), r)
    back = nb.read_image(tmp_path / "p.cbf", r)
    assert back.format == "cbf" and back.data.shape == (32, 32) and back.is_counts
    with pytest.raises(nb.UsageError, match="png"):
        nb.read_image(tmp_path / "p.png")
    with pytest.raises(nb.FileError, match="nowhere"):
        nb.read_image(tmp_path / "nowhere.cbf")


def test_fit_on_arrays_recovers_a_moved_distance():
    flags = XTAL + DISTANCE + ["-detpixels", "48", "-default_F", "100", "-mosaic", "0"]
    truth = nb.Renderer(flags)
    observed = truth.render()
    r = nb.Renderer(XTAL + ["-distance", "80.3", "-detpixels", "48", "-default_F", "100", "-mosaic", "0"])
    outcome = r.fit(["distance"], observed, loss="lsq")  # one frame's array, or a list of them
    assert outcome.values["distance"] == pytest.approx(80.0, abs=1e-3)
    assert r["distance"] == pytest.approx(outcome.values["distance"])
    assert outcome.pixels == 48 * 48 and outcome.sigmas["distance"] >= 0


def test_engine_errors_raise_with_the_engines_message():
    with pytest.raises(nb.UsageError, match="-celll"):
        nb.Renderer(["-celll", "100"])
    r = nb.Renderer(XTAL + DISTANCE + ["-detpixels", "16", "-default_F", "100"])
    with pytest.raises(nb.UsageError, match="frame 5"):
        r.render(5)
    with pytest.raises(nb.UsageError, match="nosuch"):
        r.set("nosuch", 1.0)
    with pytest.raises(nb.UsageError, match="nosuch"):
        r.derivatives(["distance", "nosuch"])
    with pytest.raises(nb.UsageError):
        nb.parameter_unit("nosuch")
    with pytest.raises(ValueError):  # a UsageError is a ValueError
        r.get("nosuch")


def test_bad_arguments_say_which():
    r = nb.Renderer(XTAL + DISTANCE + ["-detpixels", "16", "-default_F", "100"])
    with pytest.raises(TypeError, match="out: dtype float64"):
        r.render(out=np.zeros(r.shape))
    with pytest.raises(ValueError, match="out: 100 elements"):
        r.render(out=np.zeros(100, dtype=np.float32))
    with pytest.raises(ValueError, match="out: not C-contiguous"):
        r.render(out=np.zeros((1, 16, 32), dtype=np.float32)[:, :, ::2])
    with pytest.raises(TypeError, match="dtype: int32"):
        r.render(dtype=np.int32)
    with pytest.raises(TypeError, match="frame"):
        r.render(0.5)
    with pytest.raises(ValueError, match="distance: nan is not a finite number"):
        r.set("distance", float("nan"))
    with pytest.raises(ValueError, match="weights: not a finite number"):
        r.vjp(np.full(r.pixels, np.nan), ["distance"])
    with pytest.raises(ValueError, match="names: no parameter"):
        r.derivatives([])
    with pytest.raises(ValueError, match="device"):
        nb.Renderer(XTAL + DISTANCE, device="tpu")
    with pytest.raises(ValueError, match="threads"):
        r.threads = -1
    with pytest.raises(ValueError, match="images: 2, the plan has 1 frames"):
        r.fit(["distance"], [r.render(), r.render()])
    with pytest.raises(TypeError, match="photons: dtype float64"):
        r.noise(np.zeros(r.pixels))
    with pytest.raises(ValueError, match="hkl: shape"):
        r.set_F(np.zeros((3, 2), dtype=int), np.zeros(3))
    r.close()
    with pytest.raises(ValueError, match="closed"):
        r.render()
