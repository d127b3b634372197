#!/usr/bin/python3
"""dials_start.py - a dataset fit's start from DIALS's indexing of each still.

Indexes every still as a user of Debian's DIALS would, each on its own as a
one-image sequence (that DIALS lacks the stills indexer's xfel_mono_sim_ext):

  dials.import STILL detector.panel.type=SENSOR_PAD
  dials.find_spots imported.expt nproc=1
  dials.index imported.expt strong.refl indexing.method=real_space_grid_search
      indexing.known_symmetry.unit_cell=A,B,C,AL,BE,GA indexing.known_symmetry.space_group=SG
      refinement.parameterisation.detector.fix=all refinement.parameterisation.beam.fix=all

(detector.panel.type: dxtbx reads a full CBF's panels as SENSOR_UNKNOWN and
then wants spots of 6 pixels or more; nb's CBF states a pixel-array detector,
README "DIALS notes".  The detector and beam fixed: one still does not fix
the distance, and one plan has one detector), and writes the indexed stills'
crystals, in the order given, as one experiment list (-o) that nb-geom -expt
reads: one experiment per still, no scan or goniometer (a still), the first
still's detector shared, each still's own beam and crystal (DIALS's setting
and space group), its image, and the identifier nb-frame-N, N the still's
place among those given (from 1).  A still DIALS cannot index is left out
and said so: on standard error and in --record (JSON: per still, indexed or
not, the stage that failed and DIALS's last words, spots found, reflections
indexed, RMSDs, seconds).  DIALS's files go into --work (default a temporary
folder, removed).  --only N,M... indexes those stills alone (their places
among those given, from 1; the numbers kept), e.g. to index some again.

Usage:
  dials_start.py --cell "A B C AL BE GA" --space-group SG [--jobs 2] [--work DIR]
                 [--record start.json] -o start.expt STILL...
Exit status: 0 at least one still indexed, 1 none (no start to write) or
DIALS missing or failing to run, 2 usage.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SPACE_GROUPS = ("P1", "P2", "P21", "P222", "P212121")
SPOTS_LINE = re.compile(r"^Saved (\d+) reflections to")
RMSD_ROW = re.compile(r"^\|\s*0\s*\|\s*(\d+)\s*\|\s*([0-9.]+)\s*\|\s*([0-9.]+)\s*\|")


class UsageError(Exception):
    pass


def run_stage(cmd, cwd, log_name):
    """Run one DIALS command; (ok, its last meaningful line)."""
    with open(os.path.join(cwd, log_name), "w") as log:
        rc = subprocess.call(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    with open(os.path.join(cwd, log_name), errors="replace") as fp:
        lines = [ln.strip() for ln in fp if ln.strip()]
    last = next((ln for ln in reversed(lines) if ln.startswith("Sorry") or "Error" in ln), lines[-1] if lines else "")
    return rc == 0, last, lines


def index_one(number, still, cell, space_group, work):
    """DIALS on one still, in work/still_NNN; its record."""
    d = os.path.join(work, "still_%03d" % number)
    os.makedirs(d, exist_ok=True)
    rec = {"still": number, "image": still, "indexed": False}
    t0 = time.time()
    stages = [
        ("dials.import", ["dials.import", still, "detector.panel.type=SENSOR_PAD",
                          "output.experiments=imported.expt", "output.log=dials.import.log"]),
        ("dials.find_spots", ["dials.find_spots", "imported.expt", "nproc=1", "output.reflections=strong.refl",
                              "output.log=dials.find_spots.log"]),
        ("dials.index", ["dials.index", "imported.expt", "strong.refl", "indexing.method=real_space_grid_search",
                         "indexing.known_symmetry.unit_cell=" + ",".join("%g" % x for x in cell),
                         "indexing.known_symmetry.space_group=" + space_group,
                         "refinement.parameterisation.detector.fix=all",
                         "refinement.parameterisation.beam.fix=all",
                         "output.experiments=indexed.expt", "output.reflections=indexed.refl",
                         "output.log=dials.index.log"]),
    ]
    for name, cmd in stages:
        ok, last, lines = run_stage(cmd, d, name + ".out")
        if name == "dials.find_spots":
            rec["spots"] = next((int(m.group(1)) for m in map(SPOTS_LINE.match, lines) if m), None)
        if not ok:
            rec.update(failed_stage=name, why=last)
            break
        if name == "dials.index":
            rows = [m for m in map(RMSD_ROW.match, lines) if m]
            if rows:
                rec.update(indexed_reflections=int(rows[-1].group(1)), rmsd_px=[float(rows[-1].group(2)),
                                                                                 float(rows[-1].group(3))])
            rec["indexed"] = os.path.exists(os.path.join(d, "indexed.expt"))
            if not rec["indexed"]:
                rec.update(failed_stage=name, why="no indexed.expt written")
    rec["seconds"] = round(time.time() - t0, 2)
    return rec, os.path.join(d, "indexed.expt")


def combine(indexed, out_path):
    """One experiment list of the indexed stills: [(still number, image, indexed.expt)]."""
    out = {"__id__": "ExperimentList", "experiment": [], "imageset": [], "beam": [], "detector": [],
           "goniometer": [], "scan": [], "crystal": [], "profile": [], "scaling_model": []}
    for number, image, path in indexed:
        with open(path) as fp:
            el = json.load(fp)
        exps = el.get("experiment", [])
        if len(exps) != 1:
            raise RuntimeError("'%s' holds %d experiments, not one (one lattice a still)" % (path, len(exps)))
        e = exps[0]
        try:
            beam, det, xtal = el["beam"][e["beam"]], el["detector"][e["detector"]], el["crystal"][e["crystal"]]
        except (KeyError, IndexError, TypeError):
            raise RuntimeError("'%s': its experiment has no beam, detector or crystal" % path)
        if not out["detector"]:
            out["detector"].append(det)
        elif json.dumps(det, sort_keys=True) != json.dumps(out["detector"][0], sort_keys=True):
            raise RuntimeError("still %d's detector is not the first still's (dials.index was to keep it fixed)"
                               % number)
        k = len(out["experiment"])
        out["beam"].append(beam)
        out["crystal"].append(xtal)
        out["imageset"].append({"__id__": "ImageSet", "images": [os.path.abspath(image)], "mask": None,
                                "gain": None, "pedestal": None, "dx": None, "dy": None,
                                "params": {"dynamic_shadowing": "Auto", "multi_panel": False}})
        out["experiment"].append({"__id__": "Experiment", "identifier": "nb-frame-%d" % number, "beam": k,
                                  "detector": 0, "imageset": k, "crystal": k})
    tmp = out_path + ".tmp"
    with open(tmp, "w") as fp:
        json.dump(out, fp, indent=1)
        fp.write("\n")
    os.replace(tmp, out_path)


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stills", nargs="+", help="the still images, in the dataset's order")
    ap.add_argument("--cell", required=True, help="the known cell: 'A B C ALPHA BETA GAMMA' (Angstrom, degrees)")
    ap.add_argument("--space-group", required=True, choices=SPACE_GROUPS, help="the known space group")
    ap.add_argument("-o", required=True, help="the experiment list to write (start.expt)")
    ap.add_argument("--record", help="also write what DIALS did with each still as JSON")
    ap.add_argument("--jobs", type=int, default=1, help="stills indexed at a time (default 1)")
    ap.add_argument("--work", help="keep DIALS's files here (default: a temporary folder, removed)")
    ap.add_argument("--only", help="index only these stills: their places among those given, comma-separated")
    args = ap.parse_args(argv)
    if args.only is not None:
        try:
            args.only = sorted({int(x) for x in args.only.split(",")})
        except ValueError:
            args.only = [0]
        if not args.only or not all(1 <= n <= len(args.stills) for n in args.only):
            ap.error("--only takes places among the %d stills given (1 to %d), comma-separated"
                     % (len(args.stills), len(args.stills)))
    try:
        cell = [float(x) for x in args.cell.replace(",", " ").split()]
    except ValueError:
        cell = []
    if len(cell) != 6 or not all(x > 0 for x in cell) or not all(x < 180 for x in cell[3:]):
        ap.error("--cell takes six positive numbers, 'A B C ALPHA BETA GAMMA' (angles under 180), not '%s'"
                 % args.cell)
    if args.jobs < 1:
        ap.error("--jobs must be 1 or more")
    args.cell = cell
    return args


def main(argv=None):
    args = parse(argv)
    for s in args.stills:
        if not os.path.isfile(s):
            print("dials_start.py: cannot read '%s': no such file" % s, file=sys.stderr)
            return 1
    for tool in ("dials.import", "dials.find_spots", "dials.index"):
        if shutil.which(tool) is None:
            print("dials_start.py: %s is not installed (DIALS: apt-get install dials)" % tool, file=sys.stderr)
            return 1
    work = args.work or tempfile.mkdtemp(prefix="dials_start.")
    os.makedirs(work, exist_ok=True)
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            jobs = [pool.submit(index_one, i + 1, os.path.abspath(s), args.cell, args.space_group, work)
                    for i, s in enumerate(args.stills) if args.only is None or i + 1 in args.only]
            results = [j.result() for j in jobs]
        records = [r for r, _ in results]
        for r in records:
            if not r["indexed"]:
                print("dials_start.py: still %d (%s) not indexed: %s: %s" % (r["still"], r["image"],
                                                                            r.get("failed_stage"), r.get("why")),
                      file=sys.stderr)
        indexed = [(r["still"], r["image"], path) for r, path in results if r["indexed"]]
        if indexed:
            combine(indexed, args.o)
    except (OSError, ValueError, RuntimeError) as e:
        print("dials_start.py: %s" % e, file=sys.stderr)
        return 1
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    if args.record:
        with open(args.record + ".tmp", "w") as fp:
            json.dump({"cell": args.cell, "space_group": args.space_group, "start": args.o if indexed else None,
                       "indexed": [r["still"] for r in records if r["indexed"]],
                       "not_indexed": [r["still"] for r in records if not r["indexed"]], "stills": records},
                      fp, indent=1)
            fp.write("\n")
        os.replace(args.record + ".tmp", args.record)
    print("dials_start.py: %d of %d stills indexed%s" % (len(indexed), len(records),
                                                          " -> %s" % args.o if indexed else ": no start written"),
          file=sys.stderr)
    return 0 if indexed else 1


if __name__ == "__main__":
    sys.exit(main())
