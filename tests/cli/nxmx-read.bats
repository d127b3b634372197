#!/usr/bin/env bats
# NXmx images read (issue 49, formats/nxmx_read.c): nb's own files, in each
# compression (none, gzip, bitshuffle+LZ4), and an Eiger's layout (a master
# whose /entry/data/data_000001 ... are external links to data files of
# 16-bit frames, a pixel_mask) give dxtbx's counts and mask frame by frame;
# nb-convert --import takes every frame of one, nb-fit --observed FILE.nxs
# fits as the CBFs of the same counts do; what cannot be read is refused
# with the file, the data set and why.  Several modules (FormatNXmx's
# NXdetector_modules, nb's own file of two panels, frames x modules x slow x
# fast) and a Jungfrau's file (FormatNexusJungfrauHack) give dxtbx's counts
# and mask, each file's class checked; the chunks nb decodes itself
# (bitshuffle+LZ4, gzip, gzip with shuffle, of several types and chunk
# shapes) are read without HDF5's plugin; a corrupt chunk and modules that
# do not fit are refused.  Skipped with a reason without libhdf5 in the
# build, h5py or DIALS.

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

# nb-convert --import FILE refused (status 1) with MESSAGE
import_refused() { # FILE MESSAGE
    run -1 nb-convert --import "$1" plan.nbs
    expect_has "$2"
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
    import_refused broken.h5 "'broken.h5': cannot open /entry/data/data_000002 (a broken external link, or a missing file?)"
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
    import_refused unknown.nxs "'unknown.nxs': /entry/data/data's chunks are compressed with HDF5 filter 32099, which this libhdf5 cannot decode"
    import_refused badmask.nxs "'badmask.nxs': /entry/instrument/detector/pixel_mask is 96 x 95 pixels, not the frames' 96 x 96"
    import_refused nodata.h5 "'nodata.h5': no /entry/data (not an NXmx file?)"
    nb-geom -q -cell 34 52 53 90 90 90 -lambda 1 -distance 100 -pixel 0.4 -detpixels 96 -default_F 100 -o one.nbs
    run -1 nb-fit --observed gzip.nxs --refine scale one.nbs
    expect_has "nb-fit: 'gzip.nxs' holds 3 frames but the plan has 1"
    [ ! -e fit.nbs ] || false
}

# Files of the layouts dxtbx reads besides nb's own, made from nb's counts
# (none.nxs) or drawn: NXdetector_modules (name, data_origin, data_size) in
# place of module_0, its axes copied; see each below
make_layouts() {
    "$PY" - <<'PY'
import shutil
import h5py, hdf5plugin, numpy as np

def base(name):
    shutil.copy("none.nxs", name)
    f = h5py.File(name, "r+")
    data = f["/entry/data/data"][()]
    del f["/entry/data/data"], f["/entry/instrument/detector/data"]
    return f, data

def modules(f, det, specs):
    m0 = f[det + "/module_0"]
    axes = {k: (m0[k][()], dict(m0[k].attrs)) for k in ("module_offset", "fast_pixel_direction", "slow_pixel_direction")}
    del f[det + "/module_0"]
    for name, origin, size in specs:
        g = f.create_group(det + "/" + name)
        g.attrs["NX_class"] = np.string_("NXdetector_module")
        g["data_origin"], g["data_size"] = np.array(origin), np.array(size)
        for k, (v, attrs) in axes.items():
            g[k] = v
            for a, x in attrs.items():
                g[k].attrs[a] = np.string_(g.name + "/module_offset") if a == "depends_on" and k != "module_offset" else x

# two modules of a frame's rows; uint16 bitshuffle+LZ4 in chunks of part of a frame, past its edges; a mask
f, data = base("mod2.nxs")
f.create_dataset("/entry/data/data", data=data.astype(np.uint16), chunks=(1, 40, 50), **hdf5plugin.Bitshuffle())
modules(f, "/entry/instrument/detector", [("module_a", [0, 0], [40, 96]), ("module_b", [40, 0], [56, 96])])
del f["/entry/instrument/detector/pixel_mask"]
mask = np.zeros((96, 96), np.uint32)
mask[5, 7], mask[50:52, :] = 1, 4
f["/entry/instrument/detector/pixel_mask"] = mask
f.close()
# modules of part of the width with gaps between them (dxtbx cuts no mask so), uint32 gzip; float32 photons
for name, dtype in (("modgap.nxs", np.uint32), ("modfloat.nxs", np.float32)):
    f, data = base(name)
    f.create_dataset("/entry/data/data", data=data.astype(dtype), chunks=(1, 96, 96), compression="gzip")
    modules(f, "/entry/instrument/detector", [("module_0", [0, 3], [40, 90]), ("module_1", [50, 0], [46, 60])])
    del f["/entry/instrument/detector/pixel_mask"]
    f.close()
# frames x modules x slow x fast, int32 gzip and shuffle, a chunk a module
f, data = base("mod4d.nxs")
f.create_dataset("/entry/data/data", data=data.reshape(3, 2, 48, 96).astype(np.int32), chunks=(1, 1, 48, 96),
                 compression="gzip", shuffle=True)
modules(f, "/entry/instrument/detector", [("module_0", [0, 0, 0], [1, 48, 96]), ("module_1", [1, 0, 0], [1, 48, 96])])
del f["/entry/instrument/detector/pixel_mask"]
f.close()
# a Jungfrau's file as FormatNexusJungfrauHack reads it: /entry/instrument/JF1M, frames of 1064 x 1030
# whole, uint16 gzip in chunks of part of a frame (the last past its edge), the pixel mask applied;
# the hack's needs: a sensor_material array, detector_distance, goniometer/omega, only frames in /entry/data
f, data = base("jf.nxs")
f.move("/entry/instrument/detector", "/entry/instrument/JF1M")
jf = np.random.default_rng(5).poisson(3.0, size=(3, 1064, 1030)).astype(np.uint16)
f.create_dataset("/entry/data/data", data=jf, chunks=(1, 256, 1030), compression="gzip")
modules(f, "/entry/instrument/JF1M", [("module_0", [0, 0], [1064, 1030])])
det = f["/entry/instrument/JF1M"]
del det["pixel_mask"], det["pixel_mask_applied"], det["sensor_material"]
mask = np.zeros((1064, 1030), np.uint32)
mask[255:260, 100:300], mask[:, 513] = 1, 8
det["pixel_mask"], det["pixel_mask_applied"] = mask, 1
det["sensor_material"], det["detector_distance"] = np.array([b"Si"]), 0.1
for k in ("data_scale_factor", "data_scaling_factor"):
    del f["/entry/data/" + k]
f["/entry/sample/goniometer/omega"] = np.arange(3.0)
f.close()
PY
}

# The frames of FILE by dxtbx (CLASS: the format class to read it with,
# else the one dxtbx picks) against nb's, all modules one after another
# and the mask: "FILE CLASS" pairs
same_as_dxtbx() {
    PYTHONPATH="$NB_ROOT/python" "$PY" - "$@" <<'PY'
import sys, warnings
warnings.simplefilter("ignore")
import numpy as np
import dxtbx, nb
from dxtbx.model.experiment_list import ExperimentListFactory as F
from dxtbx.format.FormatNexusJungfrauHack import FormatNexusJungfrauHack
for name, cls in zip(sys.argv[1::2], sys.argv[2::2]):
    if cls == "FormatNexusJungfrauHack":
        iset = FormatNexusJungfrauHack.get_imageset([name])
    else:
        iset = F.from_filenames([name]).imagesets()[0]
        assert dxtbx.load(name).__class__.__name__ == cls, (name, dxtbx.load(name).__class__.__name__)
    assert iset.get_format_class().__name__ == cls, (name, iset.get_format_class().__name__)
    assert len(iset) == 3, (name, len(iset))
    for k in range(3):
        raw = np.concatenate([a.as_numpy_array().ravel() for a in iset.get_raw_data(k)])
        good = np.concatenate([a.as_numpy_array().ravel() for a in iset.get_mask(k)])
        im = nb.read_image(name, frame=k)
        assert im.data.size == raw.size and (im.data.ravel() == raw).all(), (name, k)
        untrusted = np.zeros(raw.shape, bool) if im.untrusted is None else im.untrusted.ravel() != 0
        assert (untrusted == ~good).all(), (name, k, int(untrusted.sum()), int((~good).sum()))
        print(name, k, raw.size, int((~good).sum()))
PY
}

@test "nxmx read: several modules (FormatNXmx's: two of a frame, with gaps, float) and a Jungfrau's frame (FormatNexusJungfrauHack) give dxtbx's counts and mask" {
    need_dials
    cd "$DATA"
    make_layouts
    run -0 same_as_dxtbx mod2.nxs FormatNXmx modgap.nxs FormatNXmx modfloat.nxs FormatNXmx \
        jf.nxs FormatNexusJungfrauHack jf.nxs FormatNXmx
    [[ "$output" == *"mod2.nxs 2 9216 193"* ]] || false
    [[ "$output" == *"modgap.nxs 2 6360 0"* ]] || false
    [[ "$output" == *"jf.nxs 2 1095920 2064"* ]] || false
}

@test "nxmx read: frames x modules x slow x fast give each module's part as h5py slices it" {
    need_h5py
    cd "$DATA"
    make_layouts
    # (dxtbx 3.12's FormatNXmx asserts on a data_size of three values)
    PYTHONPATH="$NB_ROOT/python" "$PY" - <<'PY'
import h5py, numpy as np, nb
data = h5py.File("mod4d.nxs")["/entry/data/data"][()]
for k in range(3):
    im = nb.read_image("mod4d.nxs", frame=k)
    assert im.data.shape == (1, 2 * 48 * 96) and (im.data.ravel() == data[k].ravel()).all(), k
PY
}

@test "nxmx read: nb's own file of two panels gives dxtbx's counts; --import takes both panels" {
    need_dials
    cd "$DATA"
    # two panels of 64 x 48 and 64 x 30 pixels, one below the other: panel, first and last row, corner
    printf 'res = 5000\nclen = 0.08\n' > two.geom
    for p in "0 0 47 -66 -50" "1 48 77 2 2"; do
        read -r n s0 s1 cx cy <<<"$p"
        printf 'p%s/min_fs = 0\np%s/max_fs = 63\np%s/min_ss = %s\np%s/max_ss = %s\np%s/corner_x = %s\np%s/corner_y = %s\np%s/fs = +1.0x\np%s/ss = +1.0y\n' \
            "$n" "$n" "$n" "$s0" "$n" "$s1" "$n" "$cx" "$n" "$cy" "$n" "$n" >> two.geom
    done
    nb-geom -q -panels two.geom -cell 78 78 37 90 90 90 -lambda 1 -N 10 -default_F 100 -nframes 3 -stills \
        -misset_seed 3 -fluence 1e27 -o two.nbs
    nb-sim -q two.nbs | nb-noise -q -seed 4 -o twonoisy.nbs
    nb-convert -q -o two.nxs twonoisy.nbs
    run -0 same_as_dxtbx two.nxs FormatNXmx
    [[ "$output" == *"two.nxs 2 4992 0"* ]] || false
    nb-convert -q --import two.nxs two.nbs -o twoimp.nbs
    PYTHONPATH="$NB_ROOT/python" "$PY" - <<'PY'
import nb
r = nb.Renderer(stream=open("two.nbs", "rb").read())
for k in range(3):
    a, b = nb.read_image("two.nxs", r, frame=k), nb.read_image("twoimp.nbs", r, frame=k)
    assert a.data.size == 4992 and (a.data.ravel() == b.data.ravel()).all(), k
PY
    import_refused two.nxs "'two.nxs' holds 2 modules (NXdetector_module) but the plan has 1 panel"
}

@test "nxmx read: chunks decoded here (bitshuffle+LZ4, gzip, gzip with shuffle; 16, 32-bit, float; chunks of a frame, of part of one, of two, past the edges) give dxtbx's counts without HDF5's plugin" {
    need_dials
    cd "$DATA"
    "$PY" - <<'PY'
import shutil
import h5py, hdf5plugin, numpy as np
bs = hdf5plugin.Bitshuffle()
kinds = {"bs_u16": (np.uint16, (1, 96, 96), bs), "bs_u32": (np.uint32, (1, 40, 50), bs),
         "bs_i32": (np.int32, (2, 96, 96), bs), "bs_f32": (np.float32, (1, 96, 96), bs),
         "bs_odd": (np.uint16, (1, 5, 7), bs), "gz_u16": (np.uint16, (1, 96, 96), {"compression": "gzip"}),
         "gz_f32": (np.float32, (1, 33, 96), {"compression": "gzip", "shuffle": True})}
for name, (dtype, chunks, filt) in kinds.items():
    shutil.copy("none.nxs", name + ".nxs")
    with h5py.File(name + ".nxs", "r+") as f:
        data = f["/entry/data/data"][()]
        del f["/entry/data/data"], f["/entry/instrument/detector/data"]
        f.create_dataset("/entry/data/data", data=data.astype(dtype), chunks=chunks, **filt)
PY
    for f in bs_u16 bs_u32 bs_i32 bs_f32 bs_odd gz_u16 gz_f32; do
        HDF5_PLUGIN_PATH=/nonexistent nb-convert -q --import "$f.nxs" plan.nbs -o "$f.nbs"
    done
    run -0 same_as_dxtbx bs_u16.nxs FormatNXmx bs_u32.nxs FormatNXmx bs_i32.nxs FormatNXmx bs_f32.nxs FormatNXmx \
        bs_odd.nxs FormatNXmx gz_u16.nxs FormatNXmx gz_f32.nxs FormatNXmx
    PYTHONPATH="$NB_ROOT/python" "$PY" - <<'PY'
import nb
r = nb.Renderer(stream=open("plan.nbs", "rb").read())
for name in ("bs_u16", "bs_u32", "bs_i32", "bs_f32", "bs_odd", "gz_u16", "gz_f32"):
    for k in range(3):
        a, b = nb.read_image(name + ".nxs", r, frame=k), nb.read_image(name + ".nbs", r, frame=k)
        assert (a.data == b.data).all(), (name, k)
PY
}

@test "nxmx read: refused with the file, the data set and why: a corrupt chunk, modules the plan has not, a module outside the frames" {
    need_h5py
    cd "$DATA"
    make_layouts
    "$PY" - <<'PY'
import shutil
import h5py, hdf5plugin, numpy as np
shutil.copy("none.nxs", "corrupt.nxs")
with h5py.File("corrupt.nxs", "r+") as f:
    data = f["/entry/data/data"][()]
    del f["/entry/data/data"], f["/entry/instrument/detector/data"]
    d = f.create_dataset("/entry/data/data", data=data.astype(np.uint16), chunks=(1, 40, 50), **hdf5plugin.Bitshuffle())
    # the header of a chunk of 40 x 50 16-bit values, then a block claiming more bytes than there are
    d.id.write_direct_chunk((0, 40, 50), (4000).to_bytes(8, "big") + (8192).to_bytes(4, "big") + (999).to_bytes(4, "big") + bytes(20))
shutil.copy("mod2.nxs", "outside.nxs")
with h5py.File("outside.nxs", "r+") as f:
    del f["/entry/instrument/detector/module_b/data_origin"]
    f["/entry/instrument/detector/module_b/data_origin"] = np.array([41, 0])
PY
    import_refused corrupt.nxs "'corrupt.nxs': /entry/data/data's chunk at (0, 40, 50) is corrupt: bitshuffle+LZ4 block 1 claims 999 bytes, 20 are left"
    import_refused mod2.nxs "'mod2.nxs' holds 2 modules (NXdetector_module) but the plan has 1 panel"
    import_refused outside.nxs "'outside.nxs': /entry/instrument/detector/module_b: data_origin and data_size leave the frames' 96 x 96 pixels"
}

# An Eiger's master as DECTRIS writes it (FormatHDF5EigerNearlyNexus: no NXmx
# definition; the mask and the cut-off in detectorSpecific) and its data file,
# 3 frames of an EIGER 1M (1065 x 1030 uint32, bitshuffle+LZ4): NAME_master.h5
eiger_dectris() {
    "$PY" - "$1" <<'PY'
import sys
import h5py, hdf5plugin, numpy as np
name, (nf, ny, nx) = sys.argv[1], (3, 1065, 1030)
data = np.random.default_rng(3).poisson(20, size=(nf, ny, nx)).astype(np.uint32)
data[:, 5, 7] = 4294967295    # a dead pixel's flag
data[1, 9, 9] = 60000         # above the cut-off
mask = np.zeros((ny, nx), np.uint32)
mask[10, 20], mask[:, 30], mask[514:551, :] = 1, 4, 1   # a pixel, a column, the modules' gap
with h5py.File(name + "_data_000001.h5", "w") as f:
    f.create_dataset("entry/data/data", data=data, chunks=(1, ny, nx), **hdf5plugin.Bitshuffle(nelems=0, cname="lz4"))
def group(parent, path, cls):
    g = parent.create_group(path)
    g.attrs["NX_class"] = np.bytes_(cls)
    return g
with h5py.File(name + "_master.h5", "w") as f:
    e = group(f, "entry", "NXentry")
    i = group(e, "instrument", "NXinstrument")
    def value(g, key, v, units):
        g[key] = v
        g[key].attrs["units"] = np.bytes_(units)
    value(group(i, "beam", "NXbeam"), "incident_wavelength", 1.0, "angstrom")
    d = group(i, "detector", "NXdetector")
    d["description"], d["detector_number"] = np.bytes_("Dectris EIGER 1M"), np.bytes_("E-01-0000")
    for key, v in (("x_pixel_size", 75e-6), ("y_pixel_size", 75e-6), ("sensor_thickness", 450e-6)):
        value(d, key, v, "m")
    d["sensor_material"], d["count_time"] = np.bytes_("Si"), 0.1
    d["beam_center_x"], d["beam_center_y"], d["detector_distance"], d["pixel_mask_applied"] = 515.0, 532.0, 0.1, 1
    d.create_group("geometry/orientation")["value"] = np.array([-1.0, 0, 0, 0, -1.0, 0])
    d.create_group("geometry/translation")["distances"] = np.array([0.0386, 0.0399, -0.1])
    ds = d.create_group("detectorSpecific")
    ds["countrate_correction_count_cutoff"], ds["pixel_mask"] = np.uint32(50000), mask
    s = group(e, "sample", "NXsample")
    s.create_group("goniometer")["omega_range_average"] = 0.1
    group(e, "data", "NXdata")["data_000001"] = h5py.ExternalLink(name + "_data_000001.h5", "/entry/data/data")
PY
}

@test "nxmx read: an Eiger's master as DECTRIS writes it (FormatHDF5EigerNearlyNexus) gives dxtbx's counts and mask" {
    need_dials
    cd "$DATA"
    eiger_dectris dectris
    run -0 same_as_dxtbx dectris_master.h5 FormatHDF5EigerNearlyNexus
    # the mask's pixel, column and gap rows, the dead pixel, and on frame 2 the count above the cut-off
    [[ "$output" == *"dectris_master.h5 0 1096950 39140"* ]] || false
    [[ "$output" == *"dectris_master.h5 1 1096950 39141"* ]] || false
    # the cut-off is the file's overload
    PYTHONPATH="$NB_ROOT/python" run -0 "$PY" -c 'import nb; print(nb.read_image("dectris_master.h5", frame=1).overload)'
    [ "$output" = "50000.0" ] || false
}
