#!/usr/bin/env python3
"""refine_draws.py - examples/torch_refine.py over a draw of cells, start directions and noise
seeds: how often torch.optim (through nb.torch) brings a 512 x 512 still's distance, beam centre,
misset and cell back within 0.01 mm, 0.005 degrees and 0.01 % from starts 1 mm, 0.3 mm, 0.5
degrees and 0.5 % off.  A row per run, then the count; bench/README.md, "nb.torch".

    PYTHONPATH=python python3 bench/torch/refine_draws.py [--runs 12] [--threads 2] [--seed 1] [torch_refine.py's options]

--floor instead prints, for each cell, the floor the noise sets: each parameter's Cramer-Rao
standard deviation (from the inverse of the Poisson likelihood's Fisher information at the truth,
nb's derivatives) as a fraction of its tolerance, and how often an unbiased fit with that
covariance would still miss a tolerance (Monte Carlo of the Gaussian).
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CELLS = ["70 80 90 85 95 100", "60 60 60 90 90 90", "50 90 120 90 100 90", "100 100 100 90 90 90",
         "45 55 65 100 105 110", "80 80 120 90 90 120"]


def floor(threads):
    """Each cell's Cramer-Rao floor: sigma / tolerance a parameter, and the chance of a miss."""
    import nb
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import torch_refine
    names = list(torch_refine.MOVES)
    rng = np.random.default_rng(0)
    print("%-24s %s %s" % ("cell", " ".join("%9s" % n for n in names), "P(a miss)"))
    for cell in CELLS:
        renderer = nb.Renderer(torch_refine.flags(512, cell), threads=threads)
        image, grads = renderer.derivatives(names)
        mu = image.ravel().astype(np.float64) + torch_refine.FLOOR
        jac = np.stack([grads[n].ravel().astype(np.float64) for n in names])
        cov = np.linalg.inv((jac / mu) @ jac.T)
        tol = np.array([tol * renderer.get(n) if frac else tol for n, (_, tol, frac) in torch_refine.MOVES.items()])
        draws = rng.multivariate_normal(np.zeros(len(names)), cov, 200000)
        miss = float(np.mean(np.any(np.abs(draws) > tol, axis=1)))
        print("%-24s %s %9.4f" % (cell, " ".join("%9.2f" % v for v in np.sqrt(np.diag(cov)) / tol), miss))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1, help="the draw's seed")
    parser.add_argument("--floor", action="store_true", help="the noise's floor for each cell instead of runs")
    args, passed_on = parser.parse_known_args()  # the rest: torch_refine.py's own options
    if args.floor:
        return floor(args.threads)
    rng = np.random.default_rng(args.seed)
    passed = 0
    # the signs' and the noise's seeds whole: `torch_refine.py --cell C --signs S --seed N` runs a row again
    print("%-24s %10s %10s %4s %9s %s" % ("cell", "signs", "noise", "ok", "seconds", "worst (error / tolerance)"))
    for run in range(args.runs):
        cell = CELLS[run % len(CELLS)]
        signs, noise = int(rng.integers(1, 1 << 30)), int(rng.integers(1, 1 << 30))
        began = time.time()
        out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "torch_refine.py"), "--cell", cell,
                              "--signs", str(signs), "--seed", str(noise), "--threads", str(args.threads)] + passed_on,
                             capture_output=True, text=True)
        seconds = time.time() - began
        worst, name = 0.0, ""
        for line in out.stdout.splitlines():
            m = re.match(r"(\S+)\s+\S+\s+\S+\s+\S+\s+(\S+)( \(rel\))?\s+(ok|FAILED)", line)
            if m:
                tol = {"distance": 0.01, "Xbeam": 0.01, "Ybeam": 0.01}.get(m.group(1), 1e-4 if m.group(3) else 0.005)
                ratio = abs(float(m.group(2))) / tol
                if ratio > worst:
                    worst, name = ratio, m.group(1)
        ok = out.returncode == 0
        passed += ok
        print("%-24s %10d %10d %4s %9.1f %s %.2f" % (cell, signs, noise, "yes" if ok else "NO",
                                                  seconds, name, worst), flush=True)
    print("%d of %d recovered" % (passed, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
