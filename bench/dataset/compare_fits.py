#!/usr/bin/python3
"""compare_fits.py - do two dataset fits of the same data agree within their sigmas?

Reads two nb-fit -v standard errors (each frame's 'frame N: NAME = VALUE +- SIGMA ...' line
and the shared 'NAME = VALUE +- SIGMA UNIT' lines): the first is the reference (nb's own spot
finding, say), the second the other (--spots FILE.refl).  For every value both fits give, the
difference over the reference's sigma; prints per kind the count, the rms and the largest
|difference / sigma|, and with --gate judges that every |difference| is at most --max times
the sigma (default 1) and that both fits give the same values of the same frames, neither
reporting a frame failed the other did not.  --json OUT writes the table.  Only the standard
library.  Exit status: 0 pass (or no --gate), 1 fail, 2 usage or unreadable input.

Usage:
  compare_fits.py REFERENCE.log OTHER.log [--max 1] [--gate] [--json OUT]
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evaluate as ev  # noqa: E402
import sigmas  # noqa: E402


def rows(ref, other):
    """[(kind, frame or None, difference / sigma)] of every value in both, and the values in one alone."""
    out, alone = [], []
    (rf, rs, _), (of, os_, _) = ref, other
    for frame in sorted(set(rf) | set(of)):
        a, b = rf.get(frame, {}), of.get(frame, {})
        for name in sorted(set(a) | set(b)):
            if name not in a or name not in b:
                alone.append("frame %d %s" % (frame, name))
                continue
            (va, sa), (vb, _) = a[name], b[name]
            out.append((name, frame, (vb - va) / sa if sa > 0 else math.inf))
    for name in sorted(set(rs) | set(os_)):
        if name not in rs or name not in os_:
            alone.append(name)
            continue
        (va, sa), (vb, _) = rs[name], os_[name]
        out.append((name, None, (vb - va) / sa if sa > 0 else math.inf))
    return out, alone


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("reference")
    p.add_argument("other")
    p.add_argument("--max", type=float, default=1.0, help="the largest |difference| / sigma a pass allows")
    p.add_argument("--gate", action="store_true")
    p.add_argument("--json")
    a = p.parse_args(argv)
    try:
        ref, other = sigmas.read_log(a.reference), sigmas.read_log(a.other)
    except ev.InputError as e:
        print("compare_fits.py: %s" % e, file=sys.stderr)
        return 2
    table, alone = rows(ref, other)
    if not table:
        print("compare_fits.py: no value is in both logs (nb-fit -v's lines)", file=sys.stderr)
        return 2
    kinds = {}
    for kind, _, z in table:
        kinds.setdefault(kind, []).append(z)
    print("%-10s %6s %10s %10s" % ("kind", "values", "rms d/s", "max |d/s|"))
    summary = {}
    for kind, zs in sorted(kinds.items()):
        rms = math.sqrt(sum(z * z for z in zs) / len(zs))
        worst = max(abs(z) for z in zs)
        summary[kind] = {"values": len(zs), "rms": rms, "max_abs": worst}
        print("%-10s %6d %10.3g %10.3g" % (kind, len(zs), rms, worst))
    worst = max(abs(z) for _, _, z in table)
    failed_differ = sorted(ref[2] ^ other[2])
    print("largest |difference| / sigma %.3g over %d values; in one log alone: %s; failed in one alone: %s"
          % (worst, len(table), ", ".join(alone) or "none", failed_differ or "none"))
    verdict = worst <= a.max and not alone and not failed_differ
    if a.json:
        with open(a.json, "w") as fp:
            json.dump({"kinds": summary, "max_abs": worst, "values": len(table), "alone": alone,
                       "failed_differ": failed_differ, "max_allowed": a.max, "pass": verdict}, fp, indent=1)
    if a.gate:
        print("gate: %s" % ("PASS" if verdict else "FAIL"))
        return 0 if verdict else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
