#!/usr/bin/env python3
"""torch_refine.py - recover a perturbed experiment with torch.optim through nb.torch.

A still of a triclinic crystal on a 512 x 512 detector is rendered at the default fluence and
counted with Poisson noise (nb's noise, no ADC offset); the detector distance, beam centre,
misset angles and cell lengths are then moved off (1 mm, 0.3 mm, 0.5 degrees, 0.5 %) and refined
back on the Poisson likelihood, its gradient nb's analytic vector-Jacobian product (nb.torch), by
torch.optim (Adam's bounded steps first, then LBFGS), coarse to fine in the crystal's size, the
first stage on blurred images.  Prints each parameter's truth, start and end, and exits 1 unless
every one comes back within 0.01 mm, 0.005 degrees and 0.01 %.

    PYTHONPATH=python python3 examples/torch_refine.py [--pixels 512] [--threads 2] [--seed 1]
"""
import argparse
import math
import sys
import time

import numpy as np
import torch

import nb
import nb.torch

# name -> (how far the start is off, the tolerance, whether both are fractions of the value)
MOVES = {
    "distance": (1.0, 0.01, False), "Xbeam": (0.3, 0.01, False), "Ybeam": (-0.3, 0.01, False),
    "misset_x": (0.5, 0.005, False), "misset_y": (-0.5, 0.005, False), "misset_z": (0.5, 0.005, False),
    "cell_a": (0.005, 1e-4, True), "cell_b": (-0.005, 1e-4, True), "cell_c": (0.005, 1e-4, True),
}
# how far the search may go from the start, each way: the optimiser moves x, the parameter is
# start + reach * tanh(x / reach), so no step of a line search leaves the plausible
# (a cell of negative length)
REACH = {"distance": 3.0, "Xbeam": 1.0, "Ybeam": 1.0, "misset_x": 1.5, "misset_y": 1.5, "misset_z": 1.5,
         "cell_a": 1.5, "cell_b": 1.5, "cell_c": 1.5}


# the model's floor, in photons a pixel: a perfect lattice's spots have exact zeros between them, and a
# count that falls where the model passes through one (-log of a vanishing mean) makes the
# likelihood's surface a field of spikes that stall LBFGS short of the optimum (seen: 55 units of
# -log L above the truth's, the cell 6 sigma off); a detector's dark counts, one stray photon in a
# thousand pixels, bound them and move the optimum by far less than its sigma
FLOOR = 1e-3
WIDTH = 51.2  # the detector's width in mm, whatever its pixel count


def flags(pixels, cell):
    return ["-cell"] + cell.split() + ["-misset", "10", "20", "30", "-lambda", "1.0",
            "-N", "8", "-distance", "100", "-detpixels", str(pixels), "-pixel", str(WIDTH / pixels),
            "-default_F", "100", "-oversample", "1", "-seed", "1"]


def sigma_units(renderer, names, values, counts, profile):
    """Each parameter's standard deviation at values (1 / sqrt of the Fisher information's diagonal,
    from nb's derivatives): the optimiser's unit, so that its steps weigh the parameters alike."""
    for n, v in zip(names, values.tolist()):
        renderer.set(n, v)
    image, grads = renderer.derivatives(names)
    mu = image.ravel().astype(np.float64)
    s = float(counts.sum()) / mu.sum() if profile else 1.0
    mu = s * mu + FLOOR
    fisher = [s * s * float(np.sum(grads[n].ravel().astype(np.float64) ** 2 / mu)) for n in names]
    return torch.tensor([1 / math.sqrt(f) if f > 0 else 1.0 for f in fisher], dtype=torch.float64)


class Blur(torch.autograd.Function):
    """A Gaussian blur of a (slow, fast) image, zero beyond its edges: a symmetric kernel with zero
    padding is its own adjoint, so the backward blurs grad_output alike (no graph of the convolution)."""

    @staticmethod
    def forward(ctx, image, kernel):
        ctx.kernel = kernel
        return Blur.apply_kernel(image, kernel)

    @staticmethod
    def backward(ctx, grad_output):
        return Blur.apply_kernel(grad_output, ctx.kernel), None

    @staticmethod
    def apply_kernel(image, kernel):
        r = kernel.numel() // 2
        x = image.reshape((1, 1) + tuple(image.shape)).float()  # torch's float32 convolution is the fast one
        x = torch.nn.functional.conv2d(x, kernel.reshape(1, 1, 1, -1), padding=(0, r))
        x = torch.nn.functional.conv2d(x, kernel.reshape(1, 1, -1, 1), padding=(r, 0))
        return x.reshape(image.shape).to(image.dtype)


def gaussian(sigma):
    t = torch.arange(-int(3 * sigma + 1), int(3 * sigma + 1) + 1, dtype=torch.float32)
    k = torch.exp(-0.5 * (t / sigma) ** 2)
    return k / k.sum()


def refine(renderer, observed, start, stages, rounds, dtype, log, warmup=0, blur=0.0):
    """LBFGS on the Poisson -log L of the counts, coarse to fine: the crystal's size (Na, Nb, Nc) first
    smaller than the plan's, which widens every spot and so the basin the start must fall in, with a
    free scale for the brighter or dimmer spots that makes; then the plan's own.  In the first stage
    the counts and the model are both blurred (a Gaussian, its sigma blur pixels): a start whose spots miss the
    observed ones by a few pixels still overlaps them, and the blurred counts' generalised
    Kullback-Leibler divergence from the blurred model is least where the two agree.  Returns
    {name: value}."""
    names = list(start)
    reach = torch.tensor([REACH[n] for n in names], dtype=torch.float64)
    counts = torch.from_numpy(observed.astype(np.float64).ravel())
    shape = observed.shape[-2:]
    size = renderer.get("Na"), renderer.get("Nb"), renderer.get("Nc")
    values = torch.tensor([start[n] for n in names], dtype=torch.float64)
    for stage, fraction in enumerate(stages):
        for axis, n in zip(("Na", "Nb", "Nc"), size):
            renderer.set(axis, n * fraction)
        # a smaller crystal's spots are dimmer: its images are scaled to the counts' total (the
        # likelihood's best scale for a shape, in closed form)
        profile = fraction != 1
        unit = sigma_units(renderer, names, values, counts, profile)
        kernel = gaussian(blur) if stage == 0 and blur > 0 else None
        seen = Blur.apply_kernel(counts.reshape(shape), kernel).reshape(-1) if kernel is not None else counts
        x = torch.zeros(len(names), dtype=torch.float64, requires_grad=True)

        def at(x, origin=values, unit=unit):
            return origin + reach * torch.tanh(unit * x / reach)

        optimiser = torch.optim.LBFGS([x], lr=1, max_iter=20, history_size=20, line_search_fn="strong_wolfe",
                                      tolerance_grad=1e-9, tolerance_change=1e-12)

        def loss_fn():
            optimiser.zero_grad()
            params = {n: v.to(dtype) for n, v in zip(names, at(x))}
            mu = nb.torch.render(renderer, params).reshape(-1).double()
            if profile:
                mu = mu * (counts.sum() / mu.sum())
            if kernel is not None:
                mu = Blur.apply(mu.reshape(shape), kernel).reshape(-1)
            mu = mu + FLOOR
            loss = (mu - seen * torch.log(mu)).sum()
            loss.backward()
            return loss

        if stage == 0 and warmup:
            # first Adam, whose steps are bounded (lr of the reach each), away from the start: a
            # quasi-Newton line search there can leap to the reach's edge, where tanh holds it
            v = torch.zeros(len(names), dtype=torch.float64, requires_grad=True)
            adam = torch.optim.Adam([v], lr=0.01)
            for _ in range(warmup):
                adam.zero_grad()
                with torch.no_grad():
                    x.copy_(v * reach / unit)
                loss = loss_fn()
                v.grad = x.grad * reach / unit
                adam.step()
            with torch.no_grad():
                x.copy_(v * reach / unit)
            if log:
                print("stage 1: Adam's %d steps: -log L %.6f" % (warmup, float(loss)), file=sys.stderr)
        last = None
        for k in range(rounds):
            loss = float(optimiser.step(loss_fn))
            if log:
                print("stage %d (N x %g), round %d: -log L %.6f" % (stage + 1, fraction, k + 1, loss), file=sys.stderr)
            if loss == last:  # LBFGS made no step: converged
                break
            last = loss
        values = at(x).detach()
        if log:
            print("stage %d ends at %s" % (stage + 1, ", ".join("%s %.5f" % nv for nv in zip(names, values.tolist()))),
                  file=sys.stderr)
    return {n: float(values[i]) for i, n in enumerate(names)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pixels", type=int, default=512)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1, help="the noise's seed")
    parser.add_argument("--cell", default="70 80 90 85 95 100", help="the crystal's cell (-cell's six numbers)")
    parser.add_argument("--signs", type=int, default=0,
                        help="0: the starts off as MOVES says; else a seed for each move's sign")
    parser.add_argument("--rounds", type=int, default=10, help="LBFGS steps (20 evaluations at most) a stage")
    parser.add_argument("--stages", default="0.25,0.5,0.75,1",
                        help="the crystal's size in each stage, as fractions of the plan's")
    parser.add_argument("--warmup", type=int, default=150, help="Adam's steps before the first stage's LBFGS")
    parser.add_argument("--blur", type=float, default=0.2,
                        help="the first stage's Gaussian blur of counts and model, its sigma in mm (0: none)")
    parser.add_argument("--double", action="store_true",
                        help="float64 parameters: the double path (else float32: the fast path; the loss is "
                             "taken in double either way)")
    parser.add_argument("-v", action="store_true", help="each round's -log L on standard error")
    args = parser.parse_args()

    truth_renderer = nb.Renderer(flags(args.pixels, args.cell), threads=args.threads)
    truth = {n: truth_renderer.get(n) for n in MOVES}
    observed = truth_renderer.noise(truth_renderer.render(), seed=args.seed, adc=0.0, bits=32)
    signs = np.random.default_rng(args.signs).choice([-1, 1], len(MOVES)) if args.signs else np.ones(len(MOVES))
    start = {n: truth[n] * (1 + s * off) if frac else truth[n] + s * off
             for s, (n, (off, _, frac)) in zip(signs, MOVES.items())}

    renderer = nb.Renderer(flags(args.pixels, args.cell), threads=args.threads)
    began = time.time()
    end = refine(renderer, observed, start, [float(f) for f in args.stages.split(",")], args.rounds,
                 torch.float64 if args.double else torch.float32, args.v, args.warmup, args.blur / (WIDTH / args.pixels))
    seconds = time.time() - began

    failed = 0
    print("%-9s %14s %14s %14s %12s" % ("parameter", "truth", "start", "refined", "error"))
    for n, (_, tol, frac) in MOVES.items():
        error = (end[n] - truth[n]) / truth[n] if frac else end[n] - truth[n]
        ok = math.isfinite(error) and abs(error) <= tol
        failed += not ok
        print("%-9s %14.6f %14.6f %14.6f %12.3g%s %s" % (n, truth[n], start[n], end[n], error, " (rel)" if frac else "",
                                                        "ok" if ok else "FAILED (tolerance %g)" % tol))
    print("%d photons counted on %d pixels; refined in %.1f s" % (int(observed.sum()), observed.size, seconds))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
