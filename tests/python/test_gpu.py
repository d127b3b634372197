"""test_gpu.py - the package rendering on a GPU (issue 51): nb.Renderer(device="cuda") gives
nb-sim --device cuda's image, its derivatives agree with the CPU's as test_grad's gates say
(correlation 0.99999, norms within 1e-4), nb.torch's backward runs there, and "auto" picks the
GPU.  Without a CUDA build or a GPU every test skips, saying which (bench/gpu-session.sh runs
them on a GPU, in tests/gpu-check.sh)."""
import subprocess

import numpy as np
import pytest

import nb
from conftest import BIN, DISTANCE, XTAL, tool

FLAGS = XTAL + DISTANCE + ["-detpixels", "96", "-pixel", "0.4"]
NAMES = ["distance", "Xbeam", "rot_x", "rot_z", "cell_a", "Na", "lambda"]


def _gpu_or_skip():
    version = subprocess.run([BIN + "/nb-sim", "--version"], capture_output=True, text=True).stdout
    if "cuda" not in version:
        pytest.skip("this build has no CUDA backend (no nvcc at build time)")
    try:
        nb.Renderer(["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-detpixels", "8"],
                    device="cuda").render()
    except nb.UnsupportedError as e:
        pytest.skip("no usable CUDA device on this machine: %s" % e)


@pytest.fixture
def gpu():
    _gpu_or_skip()


def _agree(got, want, what):
    got, want = np.asarray(got, np.float64).ravel(), np.asarray(want, np.float64).ravel()
    corr = np.corrcoef(got, want)[0, 1]
    ratio = np.sqrt(np.sum(got * got) / np.sum(want * want))
    assert corr >= 0.99999 and abs(ratio - 1) <= 1e-4, "%s: corr %.9f, norm ratio %.7f" % (what, corr, ratio)


def test_render_on_the_gpu_is_nb_sims_on_the_gpu(gpu, tmp_path):
    stream = tool("nb-sim", "-q", "--device", "cuda", stdin=tool("nb-geom", *FLAGS))
    (tmp_path / "gpu.nbs").write_bytes(stream)
    tool("nb-convert", "-q", "-o", str(tmp_path / "gpu.bin"), str(tmp_path / "gpu.nbs"))
    got = nb.Renderer(FLAGS, device="cuda").render()
    assert got.tobytes() == (tmp_path / "gpu.bin").read_bytes()


def test_render_on_the_gpu_agrees_with_the_cpu_on_both_paths(gpu):
    for precision in ("fast", "double"):
        cpu = nb.Renderer(FLAGS, device="cpu", precision=precision).render()
        cuda = nb.Renderer(FLAGS, device="cuda", precision=precision).render()
        _agree(cuda, cpu, precision)


def test_auto_renders_on_the_gpu_where_there_is_one(gpu):
    auto = nb.Renderer(FLAGS, device="auto").render()
    assert auto.tobytes() == nb.Renderer(FLAGS, device="cuda").render().tobytes()


def test_derivatives_and_vjp_on_the_gpu_agree_with_the_cpus(gpu):
    cpu, cuda = nb.Renderer(FLAGS, device="cpu"), nb.Renderer(FLAGS, device="cuda")
    (icpu, dcpu), (icuda, dcuda) = cpu.derivatives(NAMES), cuda.derivatives(NAMES)
    _agree(icuda, icpu, "the image")
    for name in NAMES:
        _agree(dcuda[name], dcpu[name], "d/d" + name)
    weights = np.random.default_rng(3).standard_normal(icpu.shape)
    vcpu, vcuda = cpu.vjp(weights, NAMES), cuda.vjp(weights, NAMES)
    _agree([vcuda[n] for n in NAMES], [vcpu[n] for n in NAMES], "the vector-Jacobian product")


def test_torch_backward_on_the_gpu_renderer(gpu):
    torch = pytest.importorskip("torch")
    import nb.torch as nbt

    grads = []
    for device in ("cpu", "cuda"):
        r = nb.Renderer(FLAGS, device=device)
        params = {n: torch.tensor(r.get(n), dtype=torch.float64, requires_grad=True) for n in ("distance", "cell_a")}
        image = nbt.render(r, params)
        (image * image).sum().backward()
        grads.append(np.array([params[n].grad.item() for n in ("distance", "cell_a")]))
    assert np.allclose(grads[1], grads[0], rtol=1e-3), grads
