#!/usr/bin/env bats
# NXmx images read (issue 49, formats/nxmx_read.c): nb's own files, in each
# compression (none, gzip, bitshuffle+LZ4), and an Eiger's layout (a master
# whose /entry/data/data_000001 ... are external links to data files of
# 16-bit frames, a pixel_mask) give dxtbx's counts and mask frame by frame;
# nb-convert --import takes every frame of one, nb-fit --observed FILE.nxs
# fits as the CBFs of the same counts do; what cannot be read is refused
# with the file, the data set and why.  Skipped with a reason without
# libhdf5 in the build, h5py or DIALS.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}
STILLS="-cell 34 52 53 90 90 90 -lambda 1 -distance 100 -pixel 0.4 -detpixels 96 -round_xtal -N 12 -fluence 1e27
 -default_F 100 -nframes 3 -stills -misset_seed 7"

setup_file() {
    export DATA="$BATS_FILE_TMPDIR/data"
    mkdir -p "$DATA"
    cd "$DATA" || return 1
    PATH="$NB_BIN:$PATH"
    # shellcheck disable=SC2086
    nb-geom $STILLS -q -o plan.nbs
    nb-sim -q plan.nbs | nb-noise -q -seed 3 -o noisy.nbs
    nb-convert -q -o shot_#.cbf noisy.nbs
    for c in none gzip bslz4; do nb-convert -q --compression $c -o $c.nxs noisy.nbs 2>nxs.err || true; done
}

need_h5py() {
    [ -s "$DATA/gzip.nxs" ] || skip "this build or system has no libhdf5: $(cat "$DATA/nxs.err")"
    "$PY" -c 'import h5py, hdf5plugin, numpy' 2>/dev/null || skip "h5py, hdf5plugin and numpy are not importable by $PY"
}

need_dials() {
    need_h5py
    "$PY" -c 'import dxtbx' 2>/dev/null || skip "dxtbx is not importable by $PY"
}

# An Eiger's layout made from nb's file: a master (NAME.h5) whose frames are
# data_000001 ... external links to NAME_data_00000K.h5 of the frames SPLIT
# (e.g. "0:2 2:3"), 16-bit, gzip, and a pixel_mask with 193 pixels set
eiger_master() { # NAME SPLIT
    "$PY" - "$DATA/none.nxs" "$@" <<'PY'
import shutil, sys
import h5py, numpy as np
src, name, split = sys.argv[1], sys.argv[2], sys.argv[3].split()
shutil.copy(src, name + ".h5")
with h5py.File(name + ".h5", "r+") as f:
    data = f["/entry/data/data"][()]
    del f["/entry/data/data"]
    for k, part in enumerate(split):
        a, b = (int(x) for x in part.split(":"))
        part_name = "%s_data_%06d.h5" % (name, k + 1)
        with h5py.File(part_name, "w") as g:
            g.create_dataset("/entry/data/data", data=data[a:b].astype(np.uint16), chunks=(1,) + data.shape[1:],
                             compression="gzip")
        f["/entry/data/data_%06d" % (k + 1)] = h5py.ExternalLink(part_name, "/entry/data/data")
    del f["/entry/instrument/detector/pixel_mask"]
    mask = np.zeros(data.shape[1:], dtype=np.uint32)
    mask[5, 7] = 1
    mask[40:42, :] = 2
    f["/entry/instrument/detector/pixel_mask"] = mask
PY
}

@test "nxmx read: nb's own files (none, gzip, bitshuffle+LZ4) and an Eiger's master give dxtbx's counts and mask, frame by frame" {
    need_dials
    cd "$DATA"
    eiger_master eiger "0:3"
    PYTHONPATH="$NB_ROOT/python" "$PY" - <<'PY'
import os, warnings
warnings.simplefilter("ignore")
import numpy as np
import nb
from dxtbx.model.experiment_list import ExperimentListFactory as F
r = nb.Renderer(stream=open("plan.nbs", "rb").read())
# bitshuffle+LZ4 where nb-convert could write it (HDF5's filter plugin installed)
for name in [n for n in ("none.nxs", "gzip.nxs", "bslz4.nxs", "eiger.h5") if n != "bslz4.nxs" or os.path.exists(n)]:
    iset = F.from_filenames([name]).imagesets()[0]
    assert len(iset) == 3, (name, len(iset))
    for k in range(3):
        im = nb.read_image(name, r, frame=k)
        raw = iset.get_raw_data(k)[0].as_numpy_array()
        good = iset.get_mask(k)[0].as_numpy_array()
        assert im.is_counts and (im.data.reshape(raw.shape) == raw).all(), (name, k)
        untrusted = np.zeros(raw.shape, bool) if im.untrusted is None else im.untrusted.reshape(raw.shape) != 0
        assert (untrusted == ~good).all(), (name, k, int(untrusted.sum()), int((~good).sum()))
    assert (~good).sum() == (193 if name == "eiger.h5" else 0), name
PY
}

@test "nxmx read: an Eiger's master of two data files reads each frame from its file, the counts nb wrote" {
    need_h5py
    cd "$DATA"
    eiger_master split "0:2 2:3"
    PYTHONPATH="$NB_ROOT/python" "$PY" - <<'PY'
import nb
r = nb.Renderer(stream=open("plan.nbs", "rb").read())
for k in range(3):
    assert (nb.read_image("split.h5", r, frame=k).data == nb.read_image("none.nxs", r, frame=k).data).all(), k
PY
}

@test "nxmx read: --import takes every frame, the CBFs' counts; nb-fit --observed FILE.nxs fits as the CBFs do" {
    need_h5py
    cd "$DATA"
    nb-convert -q --import gzip.nxs plan.nbs -o imported.nbs
    nb-convert -q -o imported_#.cbf imported.nbs
    for k in 1 2 3; do
        nb-convert -q --import "shot_$k.cbf" plan.nbs -o one.nbs
        nb-convert -q -o "cbf_$k.cbf" one.nbs
        # the same counts: the binary sections alike (the headers name the imported file)
        cmp <(sed -n '/--CIF-BINARY-FORMAT-SECTION--/,$p' "imported_$k.cbf") \
            <(sed -n '/--CIF-BINARY-FORMAT-SECTION--/,$p' "cbf_$k.cbf")
    done
    nb-geom -q -cell 34.1 52.1 53.1 90 90 90 -misset 0.1 -0.1 0.1 -lambda 1 -distance 100 -pixel 0.4 -detpixels 96 \
        -round_xtal -N 12 -fluence 1e27 -default_F 100 -nframes 3 -stills -misset_seed 7 -o start.nbs
    nb-fit -q --observed 'shot_#.cbf' --refine cell_a --refine-frame scale -o fit_cbf.nbs start.nbs
    nb-fit -q --observed gzip.nxs --refine cell_a --refine-frame scale -o fit_nxs.nbs start.nbs
    cmp fit_cbf.nbs fit_nxs.nbs
    run -0 nb-fit --observed gzip.nxs --frames 2:3 --refine-frame scale -o f23.nbs start.nbs
    [[ "$output" == *"2 frames fitted, 0 failed"* ]] || false
}

@test "nxmx read: refused with the file, the data set and why: a broken link, a mask of another shape, another frame count, no /entry/data, a filter without its plugin" {
    need_h5py
    cd "$DATA"
    eiger_master broken "0:1 1:3"
    rm broken_data_000002.h5
    run -1 nb-convert --import broken.h5 plan.nbs
    expect_has "'broken.h5': cannot open /entry/data/data_000002 (a broken external link, or a missing file?)"
    "$PY" - <<'PY'
import shutil
import h5py, numpy as np
shutil.copy("none.nxs", "badmask.nxs")
with h5py.File("badmask.nxs", "r+") as f:
    del f["/entry/instrument/detector/pixel_mask"]
    f["/entry/instrument/detector/pixel_mask"] = np.zeros((96, 95), dtype=np.uint32)
with h5py.File("nodata.h5", "w") as f:
    f.create_group("/entry/instrument")
# chunks of a filter no plugin decodes (HDF5 filter 32099), stored as they are
shutil.copy("none.nxs", "unknown.nxs")
with h5py.File("unknown.nxs", "r+") as f:
    data = f["/entry/data/data"][()]
    del f["/entry/data/data"]
    d = f.create_dataset("/entry/data/data", shape=data.shape, dtype=data.dtype, chunks=(1,) + data.shape[1:],
                         compression=32099, allow_unknown_filter=True)
    for k in range(data.shape[0]):
        d.id.write_direct_chunk((k, 0, 0), data[k].tobytes())
PY
    run -1 nb-convert --import unknown.nxs plan.nbs
    expect_has "'unknown.nxs': /entry/data/data's chunks are compressed with HDF5 filter 32099, which this libhdf5 cannot decode"
    run -1 nb-convert --import badmask.nxs plan.nbs
    expect_has "'badmask.nxs': /entry/instrument/detector/pixel_mask is not the frames' 96 x 96 pixels"
    run -1 nb-convert --import nodata.h5 plan.nbs
    expect_has "'nodata.h5': no /entry/data (not an NXmx file?)"
    nb-geom -q -cell 34 52 53 90 90 90 -lambda 1 -distance 100 -pixel 0.4 -detpixels 96 -default_F 100 -o one.nbs
    run -1 nb-fit --observed gzip.nxs --refine scale one.nbs
    expect_has "nb-fit: 'gzip.nxs' holds 3 frames but the plan has 1"
    [ ! -e fit.nbs ] || false
}
