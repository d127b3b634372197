#!/usr/bin/python3
"""drawn_table.py - the tables of run-drawn.sh: what each seed drew, and how
each start of it was fitted.

Reads, under --work DIR, seed-S/data/draw.json (the drawn parameters, the
rejected draws), seed-S/data/dataset.env (the simulation's counts and
seconds) and, per start kind K, seed-S/K/verdict.json (evaluate.py's or
run-drawn.sh's verdict), run.json (seconds, nb-fit's status),
start-errors.json (the start's own errors against the truth) and, for DIALS
starts, dials.json (which stills DIALS indexed).  Prints two tables: the
datasets, and the fits (per dataset and start: frames recovered / failed /
wrong / not started, the worst frame nb-fit accepted, the median of the
turns' sigmas, the start's median and worst error, nb-fit's status,
seconds); writes DIR/results.table.json with all of it (run-drawn.sh adds the
gates and names it results.json).

Usage: drawn_table.py --work DIR --seeds "1 2 3" --starts "near far dials" [--seconds S] [--cell MODE]
Exit status: 0, 1 when a file cannot be read, 2 usage.  Only the standard library.
"""
import argparse
import json
import os
import sys


def read_json(path, default=None):
    try:
        with open(path) as fp:
            return json.load(fp)
    except FileNotFoundError:
        return default


def read_env(path):
    env = {}
    try:
        with open(path) as fp:
            for line in fp:
                if "=" in line and not line.startswith("#"):
                    k, v = line.rstrip("\n").split("=", 1)
                    env[k] = v.strip('"')
    except FileNotFoundError:
        pass
    return env


def fmt(v, spec, none="-"):
    return none if v is None else spec % v


def dataset_row(seed, d):
    p = d.get("params")
    if not p:
        return "%5s  (no dataset: %s)" % (seed, d.get("error", "see seed-%s/data.log" % seed))
    cell = " ".join("%g" % x for x in p["cell"])
    return ("%5s %4d %-8s %-36s %5d %6.4f %7.2f %6.4f %3d %4s %6s %9.3g %2d %6.3f %5s %6s"
            % (seed, len(d.get("rejected", [])), p["space_group"], cell, p["detpixels"], p["pixel_mm"],
               p["distance_mm"], p["lambda_A"], p["N"], "%g" % p["mosaic_deg"] + ("/%d" % p["mosaic_domains"]
                                                                                  if p["mosaic_deg"] else ""),
               "%g" % p["water_photons"], p.get("fluence", 0), p["oversample"], p["dmin_A"],
               d.get("env", {}).get("FEWEST_SPOTS_OF_10", "-"), d.get("env", {}).get("SIM_SECONDS", "-")))


def fit_row(seed, kind, f):
    v, r, e = f["verdict"], f["run"], f["start_errors"] or {}
    o = e.get("orientation_deg") or {}
    start = "%s/%s" % (fmt(o.get("median"), "%.3f"), fmt(o.get("max"), "%.3f"))
    cells = fmt(None if e.get("cell_rel_max_abs") is None else 100 * e["cell_rel_max_abs"], "%.2f")
    worst_cell = v.get("worst_accepted_cell_rel")
    return ("%5s %-5s %-4s %-4s %3d %4d %4d %4d %4d %4d %5d %10s %9s %9s %8s %15s %6s %4s %7.1f %7.1f"
            % (seed, kind, "PASS" if v.get("pass") else "FAIL",
               "PASS" if v.get("pass_at_floor", v.get("pass")) else "FAIL", v.get("frames", 0), v.get("recovered", 0),
               v.get("floor", 0), v.get("failed", 0), v.get("wrong", 0), v.get("not_started", 0), v.get("unfitted", 0),
               fmt(v.get("worst_accepted_deg"), "%.4f"), fmt(None if worst_cell is None else 100 * worst_cell, "%.3f"),
               fmt(v.get("sigma_deg_median"), "%.4f"), fmt(v.get("distance_mm_max_abs"), "%.3f"), start, cells, fmt(r.get("fit_status"), "%d"),
               r.get("start_seconds") or 0, r.get("fit_seconds") or 0))


def collect(work, seeds, kinds):
    out = []
    for seed in seeds:
        base = os.path.join(work, "seed-%s" % seed)
        draw = read_json(os.path.join(base, "data", "draw.json"), {}) or {}
        d = {"seed": int(seed), "params": draw.get("params"), "rejected": draw.get("rejected", []),
             "simulate": draw.get("simulate"), "env": read_env(os.path.join(base, "data", "dataset.env")),
             "fits": {}}
        for kind in kinds:
            k = os.path.join(base, kind)
            verdict = read_json(os.path.join(k, "verdict.json"))
            if verdict is None:
                raise OSError("no verdict in %s" % k)
            d["fits"][kind] = {"verdict": verdict, "run": read_json(os.path.join(k, "run.json"), {}) or {},
                               "start_errors": read_json(os.path.join(k, "start-errors.json")),
                               "dials": read_json(os.path.join(k, "dials.json"))}
        out.append(d)
    return out


def print_tables(datasets, seconds, cell_mode):
    print("# datasets: seed, rejected draws, space group, cell (A, deg), detector pixels, pixel (mm), distance (mm),")
    print("# wavelength (A), N, mosaic (deg/domains), water (photons/pixel), fluence, oversample, F's dmin (A),")
    print("# the fewest reflections of 10 photons on a still, simulation s")
    print("%5s %4s %-8s %-36s %5s %6s %7s %6s %3s %4s %6s %9s %2s %6s %5s %6s"
          % ("seed", "rej", "sg", "cell", "det", "pixel", "dist", "lambda", "N", "mos", "water", "fluence", "os",
             "dmin", "spots", "sim_s"))
    for d in datasets:
        print(dataset_row(d["seed"], d))
    print()
    print("# fits (the cell refined: %s): the gate, and at the data's floor (a frame off by more than the"
          % {"auto": "each frame's from near starts, shared from far and DIALS ones", "shared": "shared",
             "lattice": "each frame's, every number its lattice leaves free", "edges": "each frame's edges"}
          .get(cell_mode, cell_mode))
    print("# figures but within 3 of nb-fit's sigmas for it, floor, counted recovered); frames, recovered, floor,")
    print("# failed (nb-fit said so), wrong (off, not said),")
    print("# not started (DIALS did not index them), not fitted (nb-fit did not finish); the worst frame nb-fit")
    print("# accepted (deg, cell %), the median sigma of the turns (deg), the detector distance's worst error (mm);")
    print("# the start's median/worst error (deg) and worst cell error (%); nb-fit's status; the start's and the")
    print("# fit's seconds")
    print("%5s %-5s %-4s %-4s %3s %4s %4s %4s %4s %4s %5s %10s %9s %9s %8s %15s %6s %4s %7s %7s"
          % ("seed", "start", "gate", "flr", "n", "rec", "flr", "fail", "wrng", "nost", "nofit", "worst_deg", "worst_c%", "sigma",
             "dist_mm", "start_deg", "strt_c", "exit", "start_s", "fit_s"))
    for d in datasets:
        for kind, f in d["fits"].items():
            print(fit_row(d["seed"], kind, f))
    if seconds is not None:
        print("# %.0f s in all" % seconds)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seeds", required=True, help="the seeds, space-separated")
    ap.add_argument("--starts", required=True, help="the start kinds, space-separated")
    ap.add_argument("--seconds", type=float, help="the run's seconds in all")
    ap.add_argument("--cell", default="auto", help="what run-drawn.sh refined of the cell (for the header)")
    args = ap.parse_args(argv)
    try:
        datasets = collect(args.work, args.seeds.split(), args.starts.split())
    except (OSError, ValueError) as e:
        print("drawn_table.py: %s" % e, file=sys.stderr)
        return 1
    print_tables(datasets, args.seconds, args.cell)
    path = os.path.join(args.work, "results.table.json")
    with open(path + ".tmp", "w") as fp:
        json.dump({"datasets": datasets, "seconds": args.seconds, "cell": args.cell}, fp, indent=1, sort_keys=True)
        fp.write("\n")
    os.replace(path + ".tmp", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
