"""test_torch.py - nb.torch: autograd through nb's analytic derivatives.  The gradient of a loss on
rendered images is nb-sim --grad's vector-Jacobian product; torch.autograd.gradcheck passes; several
frames at once; torch.optim recovers a perturbed experiment (examples/torch_refine.py)."""
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed")

import nb  # noqa: E402
import nb.torch  # noqa: E402
from conftest import DISTANCE, ROOT, XTAL, sim_frames  # noqa: E402

NAMES = ["distance", "Xbeam", "Ybeam", "misset_x", "misset_z", "cell_a", "cell_gamma", "mosaic"]


def params_of(renderer, names, dtype):
    return {n: torch.tensor(renderer.get(n), dtype=dtype, requires_grad=True) for n in names}


def test_gradient_of_a_weighted_sum_is_nb_sim_grads_product(tmp_path):
    # float64 parameters: the double path, which nb-sim takes for a plan of -precision double
    flags = XTAL + DISTANCE + ["-detpixels_x", "40", "-detpixels_y", "36", "-precision", "double"]
    r = nb.Renderer(flags)
    _, grads = sim_frames(flags, tmp_path, grad=NAMES)
    w = np.random.default_rng(11).uniform(-1, 1, r.pixels)
    params = params_of(r, NAMES, torch.float64)
    image = nb.torch.render(r, params)
    assert image.dtype == torch.float64 and image.shape == (1, 36, 40)
    (torch.from_numpy(w.reshape(image.shape)) * image).sum().backward()
    for n in NAMES:
        want = float(np.dot(w, grads[n][0].astype(np.float64)))
        assert params[n].grad.dtype == torch.float64
        assert float(params[n].grad) == pytest.approx(want, rel=1e-6), n


def test_float32_parameters_take_the_fast_path_and_its_derivatives():
    r = nb.Renderer(XTAL + DISTANCE + ["-detpixels_x", "40", "-detpixels_y", "36"])
    w = np.random.default_rng(12).uniform(-1, 1, r.pixels).astype(np.float32)
    params = params_of(r, NAMES, torch.float32)
    image = nb.torch.render(r, params)
    assert image.dtype == torch.float32
    (torch.from_numpy(w.reshape(image.shape)) * image).sum().backward()
    # the plan at float32's values (a cell angle read back as 100.0008 is moved by float32's rounding):
    # nb-sim --grad's image and derivatives there, as Renderer.derivatives gives them (test_nb.py); the
    # product of this many names comes from the adjoint sweep, whose sum rounds its terms to float
    # otherwise than the derivative images do (tests/python/test_adjoint.py)
    _, grads = r.derivatives(NAMES)
    assert image.detach().numpy().tobytes() == r.render().tobytes()
    for n in NAMES:
        want = float(np.dot(w.astype(np.float64), grads[n].ravel().astype(np.float64)))
        assert params[n].grad.dtype == torch.float32
        assert float(params[n].grad) == pytest.approx(want, rel=1e-6, abs=2e-5 * np.abs(w * grads[n].ravel()).sum()), n


def test_gradcheck_passes_on_the_double_path():
    r = nb.Renderer(XTAL + DISTANCE + ["-detpixels", "20", "-pixel", "0.5"])
    names = ["distance", "Ybeam", "misset_y", "cell_c", "lambda"]
    params = params_of(r, names, torch.float64)

    def image(*values):
        return nb.torch.render(r, dict(zip(names, values)))

    assert torch.autograd.gradcheck(image, tuple(params.values()), eps=1e-6, atol=1e-5, rtol=1e-4, fast_mode=True)


def test_gradcheck_in_full_on_a_small_image():
    r = nb.Renderer(XTAL + DISTANCE + ["-detpixels", "6", "-pixel", "2"])
    names = ["Xbeam", "misset_x", "cell_b"]
    params = params_of(r, names, torch.float64)
    assert torch.autograd.gradcheck(lambda *v: nb.torch.render(r, dict(zip(names, v))), tuple(params.values()),
                                    eps=1e-6, atol=1e-5, rtol=1e-4)


def test_several_frames_at_once_are_the_frames_one_by_one():
    r = nb.Renderer(XTAL + DISTANCE + ["-detpixels", "24", "-phi", "0", "-osc", "0.5", "-nframes", "3"])
    params = params_of(r, ["distance", "misset_y"], torch.float64)
    images = nb.torch.render(r, params, frames=[0, 1, 2])
    assert images.shape == (3, 1, 24, 24)
    w = torch.from_numpy(np.random.default_rng(2).uniform(size=images.shape))
    (w * images).sum().backward()
    together = {n: float(p.grad) for n, p in params.items()}
    one_by_one = dict.fromkeys(params, 0.0)
    for k in range(3):
        single = params_of(r, list(params), torch.float64)
        image = nb.torch.render(r, single, frames=k)
        assert torch.equal(image, images[k])
        (w[k] * image).sum().backward()
        for n in one_by_one:
            one_by_one[n] += float(single[n].grad)
    for n in params:
        assert together[n] == pytest.approx(one_by_one[n], rel=1e-12)


def test_a_strided_grad_output_weighs_its_own_pixels():
    # the backward copies grad_output into the renderer's kept weights whatever its strides: a
    # transposed view and a broadcast one give the gradients of their contiguous copies
    r = nb.Renderer(XTAL + DISTANCE + ["-detpixels_x", "20", "-detpixels_y", "12"])
    w = torch.from_numpy(np.random.default_rng(5).uniform(size=(20, 12)))

    def grads(loss_of):
        params = params_of(r, ["distance", "Xbeam"], torch.float64)
        loss_of(nb.torch.render(r, params)).backward()
        return [float(p.grad) for p in params.values()]

    transposed = grads(lambda image: (image[0].T * w).sum())
    copied = grads(lambda image: (image[0] * w.T.contiguous()).sum())
    assert transposed == pytest.approx(copied, rel=1e-12)
    # sum's backward hands on its grad expanded: every stride 0
    broadcast = grads(lambda image: image.sum())
    ones = grads(lambda image: (image * torch.ones(1, 12, 20, dtype=torch.float64)).sum())
    assert broadcast == pytest.approx(ones, rel=1e-12)
    assert transposed != pytest.approx(broadcast, rel=1e-3)


def test_parameters_not_wanting_a_gradient_get_none_and_the_image_follows_the_values():
    r = nb.Renderer(XTAL + DISTANCE + ["-detpixels", "16"])
    fixed = torch.tensor(85.0, dtype=torch.float64)
    free = torch.tensor(r.get("Xbeam"), dtype=torch.float64, requires_grad=True)
    image = nb.torch.render(r, {"distance": fixed, "Xbeam": free})
    assert torch.equal(image, torch.from_numpy(nb.Renderer(XTAL + ["-distance", "85", "-detpixels", "16"])
                                               .render(dtype=np.float64)))
    image.sum().backward()
    assert free.grad is not None and fixed.grad is None


def test_bad_parameters_say_which():
    r = nb.Renderer(XTAL + DISTANCE + ["-detpixels", "16"])
    d64, d32 = torch.tensor(80.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float32)
    with pytest.raises(TypeError, match="mixed dtypes"):
        nb.torch.render(r, {"distance": d64, "Xbeam": d32})
    with pytest.raises(ValueError, match=r"params\['distance'\]: 2 elements"):
        nb.torch.render(r, {"distance": torch.zeros(2, dtype=torch.float64)})
    with pytest.raises(ValueError, match="not a finite number"):
        nb.torch.render(r, {"distance": torch.tensor(float("nan"), dtype=torch.float64)})
    with pytest.raises(TypeError, match="dtype torch.int64"):
        nb.torch.render(r, {"distance": torch.tensor(80)})
    with pytest.raises(nb.UsageError, match="nosuch"):
        nb.torch.render(r, {"nosuch": d64})
    with pytest.raises(TypeError, match="params"):
        nb.torch.render(r, {})


def test_a_nan_in_grad_output_gives_nan_gradients_as_torch_does():
    r = nb.Renderer(XTAL + DISTANCE + ["-detpixels", "16"])
    params = params_of(r, ["distance", "Xbeam"], torch.float32)
    image = nb.torch.render(r, params)
    w = torch.ones_like(image)
    w[0, 3, 5] = float("nan")
    (w * image).sum().backward()
    assert torch.isnan(params["distance"].grad) and torch.isnan(params["Xbeam"].grad)
    with pytest.raises(ValueError, match="not a finite number"):  # the plain call refuses one
        r.vjp(w.double().numpy(), ["distance"])


def test_torch_optim_recovers_a_perturbed_experiment():
    # examples/torch_refine.py: a 512 x 512 still, Poisson counts at the default fluence, distance,
    # beam centre, misset and cell lengths started 1 mm, 0.3 mm, 0.5 degrees and 0.5 % off; it
    # exits 1 unless each comes back within 0.01 mm, 0.005 degrees and 0.01 %.  The draw is one the
    # first stage lost before it blurred the images (bench/README.md, "nb.torch: torch.optim")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(nb.__file__))] +
                                                        sys.path))
    run = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "torch_refine.py"),
                          "--cell", "50 90 120 90 100 90", "--signs", "194738958", "--seed", "860361905",
                          "--threads", "2"], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count(" ok") == 9
