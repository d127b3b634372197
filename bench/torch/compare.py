#!/usr/bin/python3
"""nb.torch against nanobrag_torch (the PyTorch port of nanoBragg, github.com/hoidn/nanoBragg).

    /usr/bin/python3 bench/torch/compare.py --port /path/to/nanoBragg/src \
        --sizes 1024,2048 --threads 2 [--reps 3] [--json out.json]

The port is not part of this repository and this script neither fetches nor builds it:
--port names the directory that holds its package nanobrag_torch (a checkout's src/).
nb is imported from python/ beside this directory (libnb.so as the package finds it).

For each detector size the same plan is rendered by both: a triclinic cell
(70 80 90 85 95 100), a misset (10 20 30 degrees), 5x5x5 cells, default_F 100,
1 Angstrom, 100 mm, 0.1 mm pixels, the beam centre off the middle, the MOSFLM
convention, one sub-pixel (-oversample 1), no mosaic (the port draws its domains with
torch's generator, not nanoBragg's), photons without noise; --phisteps K adds K
crystal orientations a pixel.  Each configuration (who, precision: nb's fast path against
the port in float32, nb's double path against float64; parameter set: 4 names or all 18
gated ones) runs in a fresh process: a warm-up at 64^2, one untimed forward and backward
at the size, then the timed forward and backward of loss = sum(w I), w fixed uniform
random numbers (--calls K: K timed calls, the one of the median total kept: a loop of
renders, as a refinement runs); the repetitions are interleaved across configurations, and one during
which other processes took more than --max-others of the CPUs is run again; the
process's peak RSS is its ru_maxrss.  Then, in double precision, every shared
parameter's derivative image: nb's (its dual-number derivatives, and its fast path's)
and the port's (forward-mode AD, one pass a parameter), compared by 1 - corr over
pixels, and the scalar gradients of the loss.  The port runs eagerly
(NANOBRAGG_DISABLE_COMPILE=1): its torch.compile needs torch 2, Debian has 1.13.

Units: both take mm, degrees and Angstrom for these parameters; the port's beam centre
beam_center_s is nanoBragg's Xbeam and beam_center_f its Ybeam (MOSFLM), each +0.5 pixel
inside the port as nanoBragg does.  Two names mean different things and are bridged or
left out of the gate (bench/README.md, "nb.torch against nanobrag_torch"):
cell_alpha/beta/gamma (the port: the input of nanoBragg's construction of the cell, whose
crystal has slightly other angles and turns with them; nb: the crystal's own angle, its
orientation kept) are compared after nb's derivatives are mapped onto the port's by the
chain rule through both constructions (nb's six cell derivatives and its rot_x/y/z);
Na/Nb/Nc (the port differentiates sin(N pi h)/sin(pi h) in the whole index h, nb at
the nearest lattice point, section 14.2 of docs/physics.md) are reported, not gated.
"""

import argparse
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

CELL = (70.0, 80.0, 90.0, 85.0, 95.0, 100.0)
MISSET = (10.0, 20.0, 30.0)
N_CELLS = 5
LAMBDA = 1.0
DISTANCE = 100.0
PIXEL = 0.1
DEFAULT_F = 100.0
FLUENCE = 125932015286227086360700780544.0  # nanoBragg's default, photons/m^2
XBEAM_OFF, YBEAM_OFF = 0.37, -0.61  # mm from the middle (MOSFLM: (detsize + pixel)/2)
WARMUP = 64
PHI0, OSC = 0.1, 0.5  # with --phisteps K > 1: -phi 0.1 -osc 0.5 -phisteps K (nanoBragg's phi = 0 quirk avoided)
PLAN = {"phisteps": 1}

# nb's name -> (port's object, field); every one in the units nb uses
PORT_FIELD = {
    "distance": ("det", "distance_mm"),
    "Xbeam": ("det", "beam_center_s"),
    "Ybeam": ("det", "beam_center_f"),
    "detector_rotx": ("det", "detector_rotx_deg"),
    "detector_roty": ("det", "detector_roty_deg"),
    "detector_rotz": ("det", "detector_rotz_deg"),
    "twotheta": ("det", "detector_twotheta_deg"),
    "misset_x": ("xtal", "misset0"),
    "misset_y": ("xtal", "misset1"),
    "misset_z": ("xtal", "misset2"),
    "cell_a": ("xtal", "cell_a"),
    "cell_b": ("xtal", "cell_b"),
    "cell_c": ("xtal", "cell_c"),
    "cell_alpha": ("xtal", "cell_alpha"),
    "cell_beta": ("xtal", "cell_beta"),
    "cell_gamma": ("xtal", "cell_gamma"),
    "Na": ("xtal", "N0"),
    "Nb": ("xtal", "N1"),
    "Nc": ("xtal", "N2"),
    "lambda": ("beam", "wavelength_A"),
    "fluence": ("beam", "fluence"),
}
CELL_NAMES = ["cell_a", "cell_b", "cell_c", "cell_alpha", "cell_beta", "cell_gamma"]
ANGLE_NAMES = CELL_NAMES[3:]
ROT_NAMES = ["rot_x", "rot_y", "rot_z"]
UNGATED = {"Na": "different definition (port: d/dN of sin(N pi h)/sin(pi h) in the whole h)",
           "Nb": "different definition", "Nc": "different definition"}
GATED_ALL = ["distance", "Xbeam", "Ybeam", "detector_rotx", "detector_roty", "detector_rotz", "twotheta",
             "misset_x", "misset_y", "misset_z", "cell_a", "cell_b", "cell_c", "cell_alpha", "cell_beta",
             "cell_gamma", "lambda", "fluence"]
SET4 = ["distance", "Xbeam", "Ybeam", "misset_x"]
GATE_SPEED = 20.0
GATE_CORR = 1e-6


def values(n):
    """The plan's value of every parameter (nb's units)."""
    centre = (n * PIXEL + PIXEL) / 2.0
    v = {"distance": DISTANCE, "Xbeam": centre + XBEAM_OFF, "Ybeam": centre + YBEAM_OFF,
         "detector_rotx": 0.0, "detector_roty": 0.0, "detector_rotz": 0.0, "twotheta": 0.0,
         "misset_x": MISSET[0], "misset_y": MISSET[1], "misset_z": MISSET[2],
         "lambda": LAMBDA, "fluence": FLUENCE, "Na": float(N_CELLS), "Nb": float(N_CELLS), "Nc": float(N_CELLS),
         "rot_x": 0.0, "rot_y": 0.0, "rot_z": 0.0}
    v.update(dict(zip(CELL_NAMES, CELL)))
    return v


def nb_flags(n):
    v = values(n)
    f = lambda x: repr(float(x))
    return (["-cell"] + [f(x) for x in CELL] + ["-misset"] + [f(x) for x in MISSET]
            + ["-lambda", f(LAMBDA), "-N", str(N_CELLS), "-distance", f(DISTANCE), "-detpixels", str(n),
               "-pixel", f(PIXEL), "-Xbeam", f(v["Xbeam"]), "-Ybeam", f(v["Ybeam"]), "-default_F", f(DEFAULT_F),
               "-oversample", "1", "-mosflm"]
            + (["-phi", f(PHI0), "-osc", f(OSC), "-phisteps", str(PLAN["phisteps"])] if PLAN["phisteps"] > 1 else []))


def weights(n):
    import numpy as np
    return np.random.default_rng(20251202).random((n, n))


def maxrss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---- the port ------------------------------------------------------------------------

def port_setup(port, threads):
    os.environ["NANOBRAGG_DISABLE_COMPILE"] = "1"  # its torch.compile is torch 2's; eager on 1.13
    sys.path.insert(0, port)
    import torch
    torch.set_num_threads(threads)
    import nanobrag_torch.config as C
    from nanobrag_torch.models import Crystal, Detector
    from nanobrag_torch.simulator import Simulator
    return torch, C, Crystal, Detector, Simulator


def port_render(mods, n, p, dtype):
    """The port's image (slow, fast) of the plan with the values p (floats or tensors)."""
    torch, C, Crystal, Detector, Simulator = mods
    cc = C.CrystalConfig(cell_a=p["cell_a"], cell_b=p["cell_b"], cell_c=p["cell_c"], cell_alpha=p["cell_alpha"],
                         cell_beta=p["cell_beta"], cell_gamma=p["cell_gamma"],
                         misset_deg=(p["misset_x"], p["misset_y"], p["misset_z"]),
                         N_cells=(p["Na"], p["Nb"], p["Nc"]), default_F=DEFAULT_F,
                         **({"phi_start_deg": PHI0, "osc_range_deg": OSC, "phi_steps": PLAN["phisteps"]}
                            if PLAN["phisteps"] > 1 else {}))
    dc = C.DetectorConfig(distance_mm=p["distance"], pixel_size_mm=PIXEL, spixels=n, fpixels=n, oversample=1,
                          beam_center_s=p["Xbeam"], beam_center_f=p["Ybeam"],
                          detector_rotx_deg=p["detector_rotx"], detector_roty_deg=p["detector_roty"],
                          detector_rotz_deg=p["detector_rotz"], detector_twotheta_deg=p["twotheta"],
                          detector_convention=C.DetectorConvention.MOSFLM, detector_pivot=C.DetectorPivot.BEAM)
    bc = C.BeamConfig(wavelength_A=p["lambda"], fluence=p["fluence"])
    sim = Simulator(Crystal(cc, beam_config=bc, dtype=dtype), Detector(dc, dtype=dtype), beam_config=bc,
                    dtype=dtype)
    return sim.run()


def port_cell_bridge(mods):
    """Coefficients that map nb's cell and rot derivatives onto the port's cell inputs.

    The port (as nanoBragg) builds the crystal A (columns a, b, c) from its six inputs and
    the misset.  nb's cell parameters are the crystal's own (a, b, c and the angles
    between them) with U = A S^-1 kept (S the standard cell, a along x, b in xy), and
    rot_x/y/z turn the crystal about the lab's axes.  dA/dp_in = sum_j c_j dA/dm_j +
    sum_k c_k dA/drot_k, solved for c: the port's dI/dp_in = the same sum of nb's images.
    """
    torch = mods[0]
    import numpy as np
    cr_mod = mods[2]
    C = mods[1]

    def A_of(x):
        cc = C.CrystalConfig(cell_a=x[0], cell_b=x[1], cell_c=x[2], cell_alpha=x[3], cell_beta=x[4],
                             cell_gamma=x[5], misset_deg=tuple(torch.tensor(m, dtype=torch.float64) for m in MISSET),
                             N_cells=(N_CELLS,) * 3, default_F=DEFAULT_F)
        t = cr_mod(cc, dtype=torch.float64).compute_cell_tensors()
        return torch.stack([t["a"], t["b"], t["c"]], 1)

    x0 = torch.tensor(CELL, dtype=torch.float64)
    A0 = A_of(x0).detach().numpy()
    J_in = torch.autograd.functional.jacobian(A_of, x0).numpy()  # (3, 3, 6)

    def S_of(m):
        d = math.pi / 180.0
        ca, cb, cg, sg = torch.cos(m[3] * d), torch.cos(m[4] * d), torch.cos(m[5] * d), torch.sin(m[5] * d)
        cy = (ca - cb * cg) / sg
        z = torch.zeros((), dtype=m.dtype)
        return torch.stack([torch.stack([m[0], m[1] * cg, m[2] * cb]),
                            torch.stack([z, m[1] * sg, m[2] * cy]),
                            torch.stack([z, z, m[2] * torch.sqrt(1 - cb * cb - cy * cy)])])

    e = [A0[:, i] for i in range(3)]
    m0 = [float(np.linalg.norm(x)) for x in e]
    for i in range(3):
        u, w = e[(i + 1) % 3], e[(i + 2) % 3]
        m0.append(math.degrees(math.atan2(np.linalg.norm(np.cross(u, w)), float(np.dot(u, w)))))
    m0t = torch.tensor(m0, dtype=torch.float64)
    U = A0 @ np.linalg.inv(S_of(m0t).numpy())
    J_nb = np.einsum("ij,jkl->ikl", U, torch.autograd.functional.jacobian(S_of, m0t).numpy())  # (3, 3, 6)
    G = [np.array([[0, 0, 0], [0, 0, -1], [0, 1, 0.]]), np.array([[0, 0, 1], [0, 0, 0], [-1, 0, 0.]]),
         np.array([[0, -1, 0], [1, 0, 0], [0, 0, 0.]])]
    cols = [J_nb[:, :, j].ravel() for j in range(6)] + [(g @ A0).ravel() * math.pi / 180 for g in G]
    M = np.stack(cols, 1)  # (9, 9)
    coef = {}
    for j, name in enumerate(CELL_NAMES):
        c, *_ = np.linalg.lstsq(M, J_in[:, :, j].ravel(), rcond=None)
        resid = float(np.linalg.norm(M @ c - J_in[:, :, j].ravel()) / np.linalg.norm(J_in[:, :, j].ravel()))
        coef[name] = {"coef": dict(zip(CELL_NAMES + ROT_NAMES, [float(x) for x in c])), "residual": resid}
    return {"measured_cell": m0, "U_orthogonality": float(np.abs(U @ U.T - np.eye(3)).max()), "bridge": coef}


# ---- the workers: one configuration a process -----------------------------------------

def worker_time(spec):
    """One forward and one backward, timed; the peak RSS."""
    import numpy as np
    n, names, who, prec, threads = spec["n"], spec["names"], spec["who"], spec["precision"], spec["threads"]
    out = {"rss_start_mb": maxrss_mb(), "loadavg_1min_before": os.getloadavg()[0]}
    if who == "port":
        mods = port_setup(spec["port"], threads)
        torch = mods[0]
        dt = torch.float64 if prec == "double" else torch.float32

        def run(size, timed):
            v = values(size)
            w = torch.tensor(weights(size), dtype=dt)
            t0 = time.perf_counter()
            p = {k: torch.tensor(x, dtype=dt, requires_grad=k in names) for k, x in v.items()}
            img = port_render(mods, size, p, dt)
            t1 = time.perf_counter()
            loss = (w * img).sum()
            loss.backward()
            t2 = time.perf_counter()
            return img.detach(), {k: float(p[k].grad) for k in names}, t1 - t0, t2 - t1
    else:
        sys.path.insert(0, os.path.join(REPO, "python"))
        import torch
        import nb
        import nb.torch
        torch.set_num_threads(threads)
        dt = torch.float64 if prec == "double" else torch.float32

        renderers = {}

        def run(size, timed):
            if size not in renderers:  # made once, as a loop of renders would
                renderers[size] = nb.Renderer(nb_flags(size), precision="double" if prec == "double" else "fast",
                                              threads=threads)
            r = renderers[size]
            v = {k: r.get(k) for k in names}  # nb's own values: its cell angles are the crystal's (84.994...)
            w = torch.tensor(weights(size)[None], dtype=dt)
            t0 = time.perf_counter()
            p = {k: torch.tensor(v[k], dtype=dt, requires_grad=True) for k in names}
            img = nb.torch.render(r, p)
            t1 = time.perf_counter()
            loss = (w * img).sum()
            loss.backward()
            t2 = time.perf_counter()
            return img.detach()[0], {k: float(p[k].grad) for k in names}, t1 - t0, t2 - t1
    run(WARMUP, False)
    out["rss_base_mb"] = maxrss_mb()
    img, grads, tf0, tb0 = run(n, False)  # the first at this size: allocations, nb's derivative plans
    # then --calls timed ones, as a loop of renders makes them; the one of the median total
    calls = sorted((run(n, True) for _ in range(spec.get("calls", 1))), key=lambda c: c[2] + c[3])
    img, grads, tf, tb = calls[len(calls) // 2]
    out.update({"forward_s": tf, "backward_s": tb, "first_forward_s": tf0, "first_backward_s": tb0,
                "rss_peak_mb": maxrss_mb(), "grads": grads})
    if spec.get("save"):
        np.save(spec["save"], img.numpy().astype(np.float64))
    return out


def worker_deriv(spec):
    """Every name's derivative image, double precision (nb: and its fast path's)."""
    import numpy as np
    n, names, who, threads, d = spec["n"], spec["names"], spec["who"], spec["threads"], spec["dir"]
    w = weights(n)
    out = {"scalar": {}}
    if who == "port":
        mods = port_setup(spec["port"], threads)
        torch = mods[0]
        import torch.autograd.forward_ad as fwAD
        dt = torch.float64
        base = {k: torch.tensor(x, dtype=dt) for k, x in values(n).items()}
        t0 = time.perf_counter()
        img = port_render(mods, n, base, dt)
        np.save(os.path.join(d, "portd_image.npy"), img.numpy())
        base32 = {k: x.to(torch.float32) for k, x in base.items()}
        np.save(os.path.join(d, "portd32_image.npy"), port_render(mods, n, base32, torch.float32).numpy())
        for k in names:
            with fwAD.dual_level():
                p = dict(base)
                p[k] = fwAD.make_dual(base[k], torch.ones((), dtype=dt))
                tan = fwAD.unpack_dual(port_render(mods, n, p, dt)).tangent
            a = tan.numpy() if tan is not None else np.zeros((n, n))
            np.save(os.path.join(d, "port_d_%s.npy" % k), a)
            out["scalar"][k] = float((w * a).sum())
        out["seconds"] = time.perf_counter() - t0
        out["cell"] = port_cell_bridge(mods)
    else:
        sys.path.insert(0, os.path.join(REPO, "python"))
        import nb
        t0 = time.perf_counter()
        for prec in ("double", "fast"):
            r = nb.Renderer(nb_flags(n), precision=prec, threads=threads)
            img, grads = r.derivatives(list(names), dtype=np.float64 if prec == "double" else np.float32)
            np.save(os.path.join(d, "nbd_%s_image.npy" % prec), np.asarray(img, dtype=np.float64)[0])
            for k in names:
                a = np.asarray(grads[k], dtype=np.float64)[0]
                np.save(os.path.join(d, "nb_%s_d_%s.npy" % (prec, k)), a)
                out["scalar"]["%s:%s" % (prec, k)] = float((w * a).sum())
        out["seconds"] = time.perf_counter() - t0
    out["rss_peak_mb"] = maxrss_mb()
    return out


# ---- the parent -----------------------------------------------------------------------

def wait_quiet(seconds, limit=0.1):
    """Wait (up to seconds) for a second in which other processes take under limit of the CPUs."""
    end = time.time() + seconds
    while True:
        c0 = cpu_clock()
        time.sleep(1.0)
        share = others_share(c0, cpu_clock())
        if share is None or share < limit or time.time() >= end:
            return share


def spawn(spec, args, tmp):
    if args.quiet_wait:
        wait_quiet(args.quiet_wait)
    c0 = cpu_clock()
    path = os.path.join(tmp, "spec-%d.json" % os.getpid())
    res = path + ".out"
    spec = dict(spec, phisteps=PLAN["phisteps"])
    with open(path, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(args.threads))
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", path, "--worker-out", res],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=args.timeout)
    if p.returncode != 0 or not os.path.exists(res):
        tail = (p.stderr.decode(errors="replace") or p.stdout.decode(errors="replace"))[-3000:]
        return {"error": "exit %d: %s" % (p.returncode, tail.strip())}
    with open(res) as f:
        r = json.load(f)
    os.unlink(res)
    r["others_cpu_share"] = others_share(c0, cpu_clock())
    return r


def cpu_clock():
    """(busy CPU seconds of the whole machine, CPU seconds of this process's finished children, wall)."""
    busy = None
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        busy = (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")  # user nice system irq softirq
    except (OSError, ValueError):
        pass
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return busy, ru.ru_utime + ru.ru_stime, time.time()


def others_share(c0, c1):
    """The share of the machine's CPUs that other processes took between c0 and c1."""
    if c0[0] is None or c1[0] is None or c1[2] <= c0[2]:
        return None
    other = (c1[0] - c0[0]) - (c1[1] - c0[1])
    return max(0.0, other) / ((c1[2] - c0[2]) * (os.cpu_count() or 1))


def corr_gap(a, b):
    import numpy as np
    a, b = a.ravel(), b.ravel()
    if not (np.any(a != a.flat[0]) and np.any(b != b.flat[0])):
        return float("nan")
    return float(1.0 - np.corrcoef(a, b)[0, 1])


def summarize(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def machine():
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) // 1024
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_mb": mem, "python": platform.python_version()}


def fmt_range(s, scale=1.0, unit="s"):
    if not s:
        return "failed"
    return "%.3g %s (%.3g-%.3g)" % (s["median"] * scale, unit, s["min"] * scale, s["max"] * scale)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", help="the directory holding nanobrag_torch (the port's src/)")
    ap.add_argument("--sizes", default="1024,2048", help="detector sizes, comma-separated (default 1024,2048)")
    ap.add_argument("--threads", type=int, default=2, help="threads for both (default 2)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions of each timing (default 3)")
    ap.add_argument("--calls", type=int, default=1,
                    help="timed forward and backward calls in each process after the untimed first; the one "
                         "of the median total is kept (default 1)")
    ap.add_argument("--precisions", default="fast,double",
                    help="fast (nb's fast path, the port in float32) and/or double (both float64)")
    ap.add_argument("--phisteps", type=int, default=1,
                    help="K > 1 adds -phi 0.1 -osc 0.5 -phisteps K to the plan: K crystal orientations a pixel")
    ap.add_argument("--no-timing", action="store_true", help="skip the timings (the derivative images only)")
    ap.add_argument("--no-derivs", action="store_true", help="skip the derivative images")
    ap.add_argument("--quiet-wait", type=float, default=0,
                    help="before each process, wait up to this many seconds for the other processes on the machine "
                         "to take under 10%% of its CPUs (default 0: no wait)")
    ap.add_argument("--max-others", type=float, default=0.1,
                    help="a repetition during which other processes took more than this share of the CPUs "
                         "is run again (default 0.1)")
    ap.add_argument("--retries", type=int, default=4, help="how many times (default 4); then it is kept")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds for one worker process")
    ap.add_argument("--json", help="write the results as JSON to this file")
    ap.add_argument("--keep", help="keep the images in this directory")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        with open(args.worker) as f:
            spec = json.load(f)
        PLAN["phisteps"] = spec["phisteps"]
        r = worker_time(spec) if spec["kind"] == "time" else worker_deriv(spec)
        with open(args.worker_out + ".tmp", "w") as f:
            json.dump(r, f)
        os.replace(args.worker_out + ".tmp", args.worker_out)
        return 0

    if not args.port or not os.path.isdir(os.path.join(args.port, "nanobrag_torch")):
        ap.error("--port must name the directory that holds nanobrag_torch (the port's src/)")
    import numpy as np
    import torch

    if args.phisteps < 1:
        ap.error("--phisteps must be at least 1")
    PLAN["phisteps"] = args.phisteps
    sizes = [int(s) for s in args.sizes.split(",") if s]
    precs = [p for p in args.precisions.split(",") if p]
    sets = {"4": SET4, "all": GATED_ALL}
    tmp = tempfile.mkdtemp(prefix="nb-torch-compare-")
    port_rev = None
    try:
        port_rev = subprocess.run(["git", "-C", args.port, "rev-parse", "HEAD"], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL).stdout.decode().strip() or None
    except OSError:
        pass
    result = {"machine": machine(), "torch": torch.__version__, "port": os.path.abspath(args.port),
              "port_commit": port_rev, "threads": args.threads, "reps": args.reps, "calls": args.calls,
              "plan": " ".join(nb_flags(1000)).replace("-detpixels 1000", "-detpixels N").replace(
                  "-Xbeam %r -Ybeam %r" % (values(1000)["Xbeam"], values(1000)["Ybeam"]),
                  "-Xbeam (N*0.1+0.1)/2%+g -Ybeam (N*0.1+0.1)/2%+g" % (XBEAM_OFF, YBEAM_OFF)),
              "phisteps": args.phisteps, "date": time.strftime("%Y-%m-%d"), "sizes": {}}
    try:
        for n in sizes:
            R = result["sizes"][str(n)] = {"timing": {}, "gradients": {}, "derivatives": {}}
            d = os.path.join(args.keep or tmp, str(n))
            os.makedirs(d, exist_ok=True)
            configs = [(who, prec, s) for prec in precs for s in sets for who in ("nb", "port")]
            runs = {c: [] for c in configs}
            discarded = {c: [] for c in configs}
            c0 = cpu_clock()
            for rep in range(0 if args.no_timing else args.reps):
                for (who, prec, s) in configs:
                    spec = {"kind": "time", "n": n, "names": sets[s], "who": who, "precision": prec,
                            "threads": args.threads, "port": os.path.abspath(args.port), "calls": args.calls}
                    if rep == 0 and s == "4":
                        spec["save"] = os.path.join(d, "%s_%s_image.npy" % (who, prec))
                    for attempt in range(args.retries + 1):  # a repetition disturbed by others: again
                        r = spawn(spec, args, tmp)
                        if "error" in r or (r.get("others_cpu_share") or 0) <= args.max_others:
                            break
                        discarded[(who, prec, s)].append(r)
                    runs[(who, prec, s)].append(r)
                    print("size %d rep %d %-4s %-6s set %-3s others %s %s" % (
                        n, rep + 1, who, prec, s, "%.0f%%" % (100 * r["others_cpu_share"])
                        if r.get("others_cpu_share") is not None else "-",
                        r.get("error", "").splitlines()[-1:] if "error" in r else
                        "forward %.3f s backward %.3f s rss %.0f MB" % (r["forward_s"], r["backward_s"],
                                                                          r["rss_peak_mb"])),
                          file=sys.stderr, flush=True)
            if not args.no_timing:
                R["other_processes_cpu_share"] = others_share(c0, cpu_clock())
                for (who, prec, s), rs in runs.items():
                    ok = [r for r in rs if "error" not in r]
                    R["timing"]["%s/%s/%s" % (who, prec, s)] = {
                        "forward_s": summarize([r["forward_s"] for r in ok]),
                        "backward_s": summarize([r["backward_s"] for r in ok]),
                        "total_s": summarize([r["forward_s"] + r["backward_s"] for r in ok]),
                        "first_total_s": summarize([r["first_forward_s"] + r["first_backward_s"] for r in ok]),
                        "rss_peak_mb": max([r["rss_peak_mb"] for r in ok], default=None),
                        "rss_base_mb": max([r["rss_base_mb"] for r in ok], default=None),
                        "errors": [r["error"] for r in rs if "error" in r],
                        "loadavg_1min_before": [r["loadavg_1min_before"] for r in ok],
                        "others_cpu_share": [r["others_cpu_share"] for r in ok],
                        "discarded": [{k: r.get(k) for k in ("forward_s", "backward_s", "others_cpu_share")}
                                      for r in discarded[(who, prec, s)]],
                        "grads": ok[0]["grads"] if ok else None}
                for prec in precs:
                    for s in sets:
                        a, b = R["timing"]["nb/%s/%s" % (prec, s)], R["timing"]["port/%s/%s" % (prec, s)]
                        if a["total_s"] and b["total_s"]:
                            ratio = b["total_s"]["median"] / a["total_s"]["median"]
                            R["timing"]["ratio/%s/%s" % (prec, s)] = {"port_over_nb": ratio,
                                                                      "gate": ratio >= GATE_SPEED}
                    try:
                        ia = np.load(os.path.join(d, "nb_%s_image.npy" % prec))
                        ib = np.load(os.path.join(d, "port_%s_image.npy" % prec))
                        R["image_%s" % prec] = {"one_minus_corr": corr_gap(ia, ib),
                                                "max_abs_diff_over_max": float(np.abs(ia - ib).max()
                                                                               / np.abs(ia).max()),
                                                "sum_nb": float(ia.sum()), "sum_port": float(ib.sum())}
                    except OSError as e:
                        R["image_%s" % prec] = {"error": str(e)}
                # the scalar gradients of the loss, side by side (parameter set "all", plus Na..Nc below)
                for k in GATED_ALL:
                    R["gradients"][k] = {
                        "%s_%s" % (who, prec): (R["timing"]["%s/%s/all" % (who, prec)]["grads"] or {}).get(k)
                        for who in ("nb", "port") for prec in precs}
            if not args.no_derivs:
                names = GATED_ALL + ["Na", "Nb", "Nc"]
                nb_names = list(dict.fromkeys(names + CELL_NAMES + ROT_NAMES))
                rp = spawn({"kind": "deriv", "n": n, "names": names, "who": "port", "threads": args.threads,
                            "dir": d, "port": os.path.abspath(args.port)}, args, tmp)
                rn = spawn({"kind": "deriv", "n": n, "names": nb_names, "who": "nb", "threads": args.threads,
                            "dir": d}, args, tmp)
                R["deriv_runs"] = {"port": {k: v for k, v in rp.items() if k != "scalar"},
                                   "nb": {k: v for k, v in rn.items() if k != "scalar"}}
                if "error" not in rp and "error" not in rn:
                    ib = np.load(os.path.join(d, "portd_image.npy"))
                    for prec in ("double", "fast", "port_float32"):
                        ia = np.load(os.path.join(d, "portd32_image.npy" if prec == "port_float32" else
                                                  "nbd_%s_image.npy" % prec))
                        R["image_derivs_%s_vs_port_float64" % prec] = {
                            "one_minus_corr": corr_gap(ia, ib),
                            "max_abs_diff_over_max": float(np.abs(ia - ib).max() / np.abs(ib).max())}
                    bridge = rp["cell"]["bridge"]
                    for k in names:
                        b = np.load(os.path.join(d, "port_d_%s.npy" % k))
                        row = {"port_scalar": rp["scalar"][k]}
                        for prec in ("double", "fast"):
                            if k in ANGLE_NAMES:
                                co = bridge[k]["coef"]
                                a = sum(c * np.load(os.path.join(d, "nb_%s_d_%s.npy" % (prec, j)))
                                        for j, c in co.items())
                                raw = np.load(os.path.join(d, "nb_%s_d_%s.npy" % (prec, k)))
                                row["%s_raw_one_minus_corr" % prec] = corr_gap(raw, b)
                                row["%s_scalar" % prec] = sum(c * rn["scalar"]["%s:%s" % (prec, j)]
                                                              for j, c in co.items())
                            else:
                                a = np.load(os.path.join(d, "nb_%s_d_%s.npy" % (prec, k)))
                                row["%s_scalar" % prec] = rn["scalar"]["%s:%s" % (prec, k)]
                            row["%s_one_minus_corr" % prec] = corr_gap(a, b)
                            row["%s_norm_ratio" % prec] = float(np.linalg.norm(a) / np.linalg.norm(b))
                        row["bridged"] = k in ANGLE_NAMES
                        row["gated"] = k not in UNGATED
                        row["gate"] = (row["double_one_minus_corr"] <= GATE_CORR) if k not in UNGATED else None
                        R["derivatives"][k] = row
                    R["cell_bridge"] = rp["cell"]
                if not args.keep:
                    shutil.rmtree(d, ignore_errors=True)
            if args.json:  # after every size: a long run keeps what it measured
                write_json(args.json, result)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    report(result)
    return 0


def write_json(path, result):
    with open(path + ".tmp", "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)


def report(result):
    m = result["machine"]
    print("nb.torch against nanobrag_torch: %s, %d cores, %s threads, torch %s, %d repetitions, %d timed calls each"
          % (m["cpu"], m["cores"], result["threads"], result["torch"], result["reps"], result.get("calls", 1)))
    print("plan: %s" % result["plan"])
    for n, R in result["sizes"].items():
        print("\n== %s x %s ==" % (n, n))
        sh = R.get("other_processes_cpu_share")
        if sh is not None:
            print("other processes took %.1f%% of the CPUs during the timings, waits for quiet included" % (100 * sh))
        if R["timing"]:
            print("%-6s %-4s %-5s %-26s %-26s %-26s %-26s %8s %8s %7s" % ("prec", "set", "who", "forward", "backward",
                                                                    "total", "first call's total", "peak MB",
                                                                    "base MB", "others"))
        for key, t in R["timing"].items():
            if key.startswith("ratio/"):
                continue
            who, prec, s = key.split("/")
            sh = [x for x in t.get("others_cpu_share", []) if x is not None]
            print("%-6s %-4s %-5s %-26s %-26s %-26s %-26s %8s %8s %7s" % (
                prec, s, who, fmt_range(t["forward_s"]), fmt_range(t["backward_s"]), fmt_range(t["total_s"]),
                fmt_range(t["first_total_s"]),
                "%.0f" % t["rss_peak_mb"] if t["rss_peak_mb"] else "-",
                "%.0f" % t["rss_base_mb"] if t["rss_base_mb"] else "-",
                "%.0f%%" % (100 * max(sh)) if sh else "-"))
            if t.get("discarded"):
                print("   %d repetition(s) run again: other processes took over the limit of the CPUs"
                      % len(t["discarded"]))
            for e in t["errors"]:
                print("   error: %s" % e.splitlines()[-1] if e else "")
        for key, t in R["timing"].items():
            if key.startswith("ratio/"):
                print("port/nb forward+backward (%s): %.1fx  gate >= %gx: %s" % (
                    key[6:], t["port_over_nb"], GATE_SPEED, "pass" if t["gate"] else "FAIL"))
        for prec in ("fast", "double"):
            im = R.get("image_%s" % prec)
            if im and "error" not in im:
                print("image (%s): 1-corr %.2e, max |diff|/max %.2e" % (prec, im["one_minus_corr"],
                                                                    im["max_abs_diff_over_max"]))
        for prec in ("fast", "double", "port_float32"):
            im = R.get("image_derivs_%s_vs_port_float64" % prec)
            if im:
                print("image (%s, against the port's float64): 1-corr %.2e, max |diff|/max %.2e" % (
                    "the port's float32" if prec == "port_float32" else "nb %s, the derivatives' pass" % prec,
                    im["one_minus_corr"], im["max_abs_diff_over_max"]))
        if R["derivatives"]:
            print("%-14s %-13s %-13s %-10s %-10s %-10s %-10s %s" % ("parameter", "port dL/dp", "nb dL/dp",
                                                                  "1-corr", "nb fast", "norm", "raw", "gate"))
            for k, row in R["derivatives"].items():
                print("%-14s %-13.6g %-13.6g %-10.2e %-10.2e %-10.6f %-10s %s" % (
                    k, row["port_scalar"], row["double_scalar"], row["double_one_minus_corr"],
                    row["fast_one_minus_corr"], row["double_norm_ratio"],
                    "%.2e" % row["double_raw_one_minus_corr"] if row["bridged"] else "",
                    {True: "pass", False: "FAIL", None: "not gated"}[row["gate"]]))
        if R["gradients"]:
            print("scalar gradients of the loss from backward (parameter set all); relative differences from the "
                  "port's float64:")
            print("  %-14s %-15s %-15s %-10s %-11s %-11s" % ("parameter", "port float64", "nb double", "rel diff",
                                                             "nb fast", "port f32"))
            rel = lambda x, ref: "%.1e" % (abs(x - ref) / abs(ref)) if x is not None and ref else "-"
            for k, g in R["gradients"].items():
                ref = g.get("port_double")
                print("  %-14s %-15s %-15s %-10s %-11s %-11s%s" % (
                    k, "%.8g" % ref if ref is not None else "-",
                    "%.8g" % g["nb_double"] if g.get("nb_double") is not None else "-",
                    rel(g.get("nb_double"), ref), rel(g.get("nb_fast"), ref), rel(g.get("port_fast"), ref),
                    "  (nb: the crystal's own angle; bridged in the table above)" if k in ANGLE_NAMES else ""))

if __name__ == "__main__":
    sys.exit(main())
