#!/usr/bin/env python3
"""image_figures.py - whether detector images are ones a crystallographer
would keep (tests/cli/readme.bats runs it on every image README.md's blocks
write): CBF and SMV files read with fabio, NeXus/NXmx files (.nxs, .h5) with
h5py, frame by frame; of each image's pixels (outside panel gaps and masked
pixels: an NXmx file's pixel_mask)

  overloaded  the % at or above the overload: a CBF's
              _array_intensities.overload (its Count_cutoff), an SMV's
              65535 - ADC_OFFSET (the trusted range dxtbx's SMV reader
              gives), an NXmx file's saturation_value
  negative    the % below 0 as stored (a CBF or NXmx file counts from 0, so
              read-out noise below the ADC offset is negative there, and
              DIALS takes a pixel below its trusted range's -1 as untrusted)
  strong      how many stand well above the background: above the median of
              their 32 x 32 tile by 10 times the larger of its spread (1.4826
              MAD) and the Poisson spread of the median's photons (less an
              SMV's ADC offset), and by 10 counts at least: a Bragg image's
              spots

Prints one line per file (a series: its frames' worst figures); exits 1 when
an image has more than 1 % of its pixels overloaded or more than 1 % negative,
or fewer than --min-strong strong pixels (default 10; 0 for an image of no
crystal: --min-strong applies to the files after it).

Usage: image_figures.py [--min-strong N] FILE... [--min-strong N FILE...]
"""
import sys

import numpy as np

LIMIT_PERCENT = 1.0
TILE = 32


def strong_pixels(data, offset):
    """pixels above their tile's background by 10 of its spreads (data: NaN
    where masked)"""
    ny, nx = data.shape
    ty, tx = -(-ny // TILE), -(-nx // TILE)
    padded = np.full((ty * TILE, tx * TILE), np.nan)
    padded[:ny, :nx] = data
    tiles = padded.reshape(ty, TILE, tx, TILE).swapaxes(1, 2).reshape(ty * tx, TILE * TILE)
    gaps = np.isnan(tiles)
    median_of = np.nanmedian if gaps.any() else np.median   # the plain one is much the faster
    tiles = tiles[~gaps.all(axis=1)]
    median = median_of(tiles, axis=1)[:, None]
    spread = 1.4826 * median_of(np.abs(tiles - median), axis=1)[:, None]
    noise = np.maximum(spread, np.sqrt(np.maximum(median - offset, 1.0)))
    with np.errstate(invalid="ignore"):
        return int(np.count_nonzero(tiles > median + np.maximum(10.0 * noise, 10.0)))


def figures(data, overload, offset, masked=None):
    """(overloaded %, negative %, strong pixels, median) of one image"""
    data = data.astype(np.float64)
    if masked is not None:
        data[masked] = np.nan
    used = data[~np.isnan(data)]
    n = max(used.size, 1)
    return (100.0 * np.count_nonzero(used >= overload) / n, 100.0 * np.count_nonzero(used < 0) / n,
            strong_pixels(data, offset), float(np.median(used)) if used.size else 0.0)


def header_value(header, key, default):
    return header.get(key, default).strip().rstrip(";")


def images(path):
    """(overload, offset, masked, frames) of a file: a CBF, SMV or NXmx file"""
    if path.endswith((".nxs", ".h5")):
        import h5py
        try:
            import hdf5plugin  # noqa: F401 (bitshuffle+LZ4 frames)
        except ImportError:
            pass
        f = h5py.File(path, "r")
        detector = f["/entry/instrument/detector"]
        overload = float(detector["saturation_value"][()])
        masked = detector["pixel_mask"][()] != 0 if "pixel_mask" in detector else None
        data = f["/entry/data/data"]
        return overload, 0.0, masked, (data[i] for i in range(data.shape[0]))
    import fabio
    image = fabio.open(path)
    header = image.header
    if "_array_intensities.overload" in header:
        return float(header["_array_intensities.overload"]), 0.0, None, [image.data]
    if "SIZE1" in header:
        offset = float(header_value(header, "ADC_OFFSET", "0"))
        top = 65535.0 if header_value(header, "TYPE", "unsigned_short") == "unsigned_short" else 4294967295.0
        return top - offset, offset, None, [image.data]
    raise SystemExit("image_figures.py: %s is not a CBF, SMV or NXmx file" % path)


def check(path, min_strong):
    """one line of the file's (worst) figures; whether they pass"""
    overload, offset, masked, frames = images(path)
    worst_over = worst_negative = 0.0
    fewest, median, n = None, 0.0, 0
    for data in frames:
        over, negative, strong, med = figures(data, overload, offset, masked)
        worst_over, worst_negative = max(worst_over, over), max(worst_negative, negative)
        if fewest is None or strong < fewest:
            fewest, median = strong, med
        n += 1
    verdict = []
    if worst_over > LIMIT_PERCENT:
        verdict.append("over %g %% overloaded" % LIMIT_PERCENT)
    if worst_negative > LIMIT_PERCENT:
        verdict.append("over %g %% negative" % LIMIT_PERCENT)
    if fewest < min_strong:
        verdict.append("fewer than %d strong pixels" % min_strong)
    what = "" if n == 1 else "%d frames, at worst " % n
    print("%s: %s%.3f %% overloaded, %.3f %% negative, %d strong pixels (background %g)%s"
          % (path, what, worst_over, worst_negative, fewest, median, ": " + ", ".join(verdict) if verdict else ""))
    return not verdict


def main(argv):
    min_strong, bad, files = 10, 0, 0
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--min-strong":
            min_strong = int(args.pop(0))
            continue
        files += 1
        bad += not check(arg, min_strong)
    if files == 0:
        raise SystemExit("usage: " + __doc__.split("Usage: ")[1].strip())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
