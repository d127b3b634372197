#!/usr/bin/env bats
# NeXus/NXmx output (nb-convert -o x.nxs, formats/nxmx.c): a 30-frame rotation
# sweep (dials.bats's) as one file is 30 int32 frames, one per chunk, holding
# the CBF's counts; dials.import reads it as one sweep with the geometry of
# model.expt, and find_spots + index recover the cell within 0.5 %; a tiled
# detector of four panels comes back from it within 1e-3 mm; shards' files
# joined by --nxmx-join read as the whole sweep; --photons writes float32
# photons; bad paths and names are clear errors.  Skipped with a reason
# without libhdf5 in the build, h5py or DIALS.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}
SWEEP="-cell 78 78 37 90 90 90 -misset 10 20 30 -detpixels 512 -pixel 0.172 -distance 150 -lambda 1 -N 10
 -default_F 100 -osc 1 -phisteps 4 -mosaic 0.2 -mosaic_domains 5 -nframes 30"

setup_file() {
    export SWEEP_DIR="$BATS_FILE_TMPDIR/sweep"
    mkdir -p "$SWEEP_DIR"
    cd "$SWEEP_DIR" || return 1
    PATH="$NB_BIN:$PATH"
    # shellcheck disable=SC2086
    nb-geom $SWEEP -q -o plan.nbs
    nb-sim -q plan.nbs | nb-noise -q -seed 1 -o sweep.nbs
    nb-convert -q -o sweep_###.cbf -o model.expt sweep.nbs
    nb-convert -q -o sweep.nxs sweep.nbs 2>nxs.err || true
}

need_h5py() {
    [ -s "$SWEEP_DIR/sweep.nxs" ] || skip "this build or system has no libhdf5: $(cat "$SWEEP_DIR/nxs.err")"
    "$PY" -c 'import h5py, hdf5plugin' 2>/dev/null || skip "h5py and hdf5plugin are not importable by $PY"
}

need_dials() {
    need_h5py
    command -v dials.import >/dev/null 2>&1 || skip "DIALS is not installed (dials.import)"
    "$PY" -c 'import dxtbx' 2>/dev/null || skip "dxtbx is not importable by $PY"
}

@test "nxmx: the 30-frame sweep is one file of 30 int32 frames, one per chunk, the CBF's counts" {
    need_dials
    cd "$SWEEP_DIR"
    "$PY" - <<'PY'
import h5py, hdf5plugin, numpy
from dxtbx.model.experiment_list import ExperimentListFactory as F
f = h5py.File("sweep.nxs", "r")
d = f["/entry/data/data"]
assert d.shape == (30, 512, 512), d.shape
assert d.dtype == numpy.int32, d.dtype
assert d.chunks == (1, 512, 512), d.chunks
assert f["/entry/definition"][()] == b"NXmx"
import datetime
start = f["/entry/start_time"][()].decode()
assert datetime.datetime.strptime(start, "%Y-%m-%dT%H:%M:%SZ").year >= 2024, start
om = f["/entry/sample/transformations/omega"][()]
assert numpy.allclose(om, numpy.arange(30.0)), om
assert list(f["/entry/nb/frame"][()]) == list(range(30))
assert f["/entry/nb/command_line"][()].startswith(b"nb-geom")
cbf = F.from_filenames(["sweep_004.cbf"])[0].imageset.get_raw_data(0)[0].as_numpy_array()
assert numpy.array_equal(d[3], cbf), "frame 4 differs from sweep_004.cbf"
assert d[3].max() > 100, d[3].max()
print("compression", dict(d._filters))
PY
}

@test "nxmx: dials.import reads one sweep with model.expt's geometry; find_spots and index recover the cell within 0.5 %" {
    need_dials
    skip_dials_processing_if_sanitized
    cd "$SWEEP_DIR"
    dials.import sweep.nxs output.experiments=imported.expt >import.log 2>&1 || { tail -20 import.log; return 1; }
    "$PY" - <<'PY'
from dxtbx.model.experiment_list import ExperimentListFactory as F
el = F.from_json_file("imported.expt")
assert len(el.imagesets()) == 1 and len(el) == 1, len(el.imagesets())
a, b = el[0], F.from_json_file("model.expt", check_format=False)[0]
assert a.imageset.get_format_class().__name__ == "FormatNXmx", a.imageset.get_format_class()
assert a.scan.get_image_range() == (1, 30), a.scan.get_image_range()
assert max(abs(x - y) for x, y in zip(a.scan.get_oscillation(), b.scan.get_oscillation())) < 1e-9
assert abs(a.beam.get_wavelength() - b.beam.get_wavelength()) < 1e-9
pa, pb = a.detector[0], b.detector[0]
for x, y in ((pa.get_origin(), pb.get_origin()), (pa.get_fast_axis(), pb.get_fast_axis()),
             (pa.get_slow_axis(), pb.get_slow_axis()), (a.goniometer.get_rotation_axis(), b.goniometer.get_rotation_axis())):
    assert max(abs(p - q) for p, q in zip(x, y)) < 1e-6, (x, y)
ca, cb = pa.get_beam_centre(a.beam.get_s0()), pb.get_beam_centre(b.beam.get_s0())
assert max(abs(p - q) for p, q in zip(ca, cb)) < 1e-6, (ca, cb)
assert abs(pa.get_distance() - 150.0) < 1e-6, pa.get_distance()
# counts from 0 as in the CBF: the 16-bit counter's top less the ADC offset (40)
assert pa.get_trusted_range() == (-1.0, 65495.0), pa.get_trusted_range()
print("beam centre", ca, "distance", pa.get_distance())
PY
    dials.find_spots imported.expt nproc=2 spotfinder.threshold.dispersion.global_threshold=20 >find.log 2>&1 ||
        { tail -20 find.log; return 1; }
    dials.index imported.expt strong.refl >index.log 2>&1 || { tail -30 index.log; return 1; }
    "$PY" - <<'PY'
from dxtbx.model.experiment_list import ExperimentListFactory
p = ExperimentListFactory.from_json_file("indexed.expt", check_format=False)[0].crystal.get_unit_cell().parameters()
for g, w in zip(sorted(p[:3]), [37.0, 78.0, 78.0]):
    assert abs(g - w) / w < 0.005, ("cell", p)
for a in p[3:]:
    assert abs(a - 90.0) / 90.0 < 0.005, ("angles", p)
print("indexed cell", " ".join("%.3f" % x for x in p))
PY
}

@test "nxmx: the beam's polarization is the simulation's (a Stokes vector; dxtbx 3.12 reads none from NXmx)" {
    need_h5py
    nb-geom $SMALL -polar 0.6 -q | nb-sim -q | nb-convert -q -o pol.nxs
    "$PY" - <<'PY'
import h5py, math
s = h5py.File("pol.nxs", "r")["/entry/instrument/beam/incident_polarisation_stokes"][()]
frac = 0.5 * (1 + math.hypot(s[1], s[2]) / s[0])
assert abs(frac - 0.8) < 1e-12, (s, frac)
PY
}

@test "nxmx: a tiled detector of four panels round-trips through dials.import within 1e-3 mm" {
    need_dials
    # examples/tiles.geom with tile 2's axes made exactly perpendicular (dxtbx's panel
    # hierarchy refuses others; nb-convert warns of them)
    sed 's|^q2/ss = .*|q2/ss = -0.0871557x +0.9961947y|' "$NB_ROOT/examples/tiles.geom" > tiles.geom
    nb-geom -q -panels tiles.geom -cell 78 78 37 90 90 90 -lambda 1 -N 10 -default_F 100 -oversample 1 -o tiles.nbs
    nb-sim -q tiles.nbs | nb-convert -q -o tiles.nxs -o model.expt
    nb-geom -q -panels "$NB_ROOT/examples/tiles.geom" -cell 78 78 37 90 90 90 -lambda 1 -N 10 -default_F 100 \
        -oversample 1 | nb-sim -q -o skew.nbs
    run_nb nb-convert -o skew.nxs skew.nbs
    expect_status 0
    expect_has "panel 2's fast and slow axes are not perpendicular"
    dials.import tiles.nxs output.experiments=imported.expt >import.log 2>&1 || { tail -20 import.log; return 1; }
    "$PY" - <<'PY'
from dxtbx.model.experiment_list import ExperimentListFactory as F
a = F.from_json_file("imported.expt")[0].detector
b = F.from_json_file("model.expt", check_format=False)[0].detector
assert len(a) == 4 and len(b) == 4, (len(a), len(b))
worst = 0.0
for pa, pb in zip(a, b):
    assert pa.get_image_size() == pb.get_image_size(), (pa.get_image_size(), pb.get_image_size())
    for x, y in ((pa.get_origin(), pb.get_origin()), (pa.get_fast_axis(), pb.get_fast_axis()),
                 (pa.get_slow_axis(), pb.get_slow_axis())):
        worst = max(worst, max(abs(p - q) for p, q in zip(x, y)))
assert worst < 1e-3, worst
print("largest difference %.3g mm" % worst)
PY
}

@test "nxmx: the NXmx files of two shards joined by --nxmx-join read as the whole sweep" {
    need_dials
    nb-sim -q --frames 16:30 "$SWEEP_DIR/plan.nbs" | nb-noise -q -seed 1 | nb-convert -q -o b.nxs
    nb-sim -q --frames 1:15 "$SWEEP_DIR/plan.nbs" | nb-noise -q -seed 1 | nb-convert -q -o a.nxs
    nb-convert -q -o master.nxs --nxmx-join 'b.nxs' --nxmx-join '[a]*.nxs'
    "$PY" - "$SWEEP_DIR/sweep.nxs" <<'PY'
import h5py, hdf5plugin, numpy, sys
whole, m = h5py.File(sys.argv[1], "r"), h5py.File("master.nxs", "r")
assert m["/entry/data/data"].shape == (30, 512, 512), m["/entry/data/data"].shape
assert numpy.array_equal(m["/entry/data/data"][()], whole["/entry/data/data"][()])
for k in ("/entry/sample/transformations/omega", "/entry/sample/transformations/omega_end", "/entry/nb/frame"):
    assert numpy.array_equal(m[k][()], whole[k][()]), k
PY
    dials.import master.nxs output.experiments=joined.expt >import.log 2>&1 || { tail -20 import.log; return 1; }
    "$PY" -c 'from dxtbx.model.experiment_list import ExperimentListFactory as F; s = F.from_json_file("joined.expt")[0].scan; assert s.get_image_range() == (1, 30) and s.get_oscillation() == (0.0, 1.0), s'
    run_nb nb-convert -o bad.nxs --nxmx-join a.nxs --nxmx-join a.nxs
    expect_status 1
    expect_has "nb-convert: 'a.nxs' and 'a.nxs' overlap: both hold frame 1"
    run_nb nb-convert -o bad.nxs --nxmx-join 'none_*.nxs'
    expect_status 2
    expect_has "nb-convert: --nxmx-join 'none_*.nxs': no file matches the pattern"
}

@test "nxmx: --photons writes float32 photons; gzip and bitshuffle-LZ4 both read back" {
    need_h5py
    nb-geom $SMALL -nframes 2 -osc 1 -q | nb-sim -q | nb-noise -q -o s.nbs
    nb-convert -q -o 'photons_#.bin' s.nbs
    nb-convert -q --photons -o p.nxs s.nbs
    nb-convert -q --compression gzip -o g.nxs s.nbs
    nb-convert -q --compression none -o n.nxs s.nbs
    "$PY" - <<'PY'
import h5py, hdf5plugin, numpy
p = h5py.File("p.nxs", "r")["/entry/data/data"]
assert p.dtype == numpy.float32 and p.shape == (2, 32, 32), (p.dtype, p.shape)
want = numpy.fromfile("photons_2.bin", dtype="<f4").reshape(32, 32)
assert numpy.array_equal(p[1], want)
g, n = h5py.File("g.nxs", "r")["/entry/data/data"], h5py.File("n.nxs", "r")["/entry/data/data"]
assert g.compression == "gzip" and n.compression is None, (g.compression, n.compression)
assert numpy.array_equal(g[()], n[()]) and g[()].max() > 0
PY
}

@test "nxmx: bitshuffle+LZ4 chunks made by nb-convert decode to the counts and photons (1001 x 999: a partial block and a tail), alike on the SIMD and portable paths and any thread count" {
    need_h5py
    "$PY" -c 'import h5py, sys; sys.exit("32008" not in h5py.File(sys.argv[1], "r")["/entry/data/data"]._filters)' \
        "$SWEEP_DIR/sweep.nxs" || skip "the bitshuffle HDF5 filter plugin is not installed (Debian: bitshuffle)"
    nb-geom -cell 100 100 100 90 90 90 -lambda 1 -N 5 -distance 100 -detpixels_f 1001 -detpixels_s 999 \
        -default_F 100 -nframes 2 -osc 1 -q | nb-sim -q | nb-noise -q -seed 3 -o s.nbs
    nb-convert -q -o c.nxs s.nbs
    nb-convert -q --compression none -o n.nxs s.nbs
    nb-convert -q --photons -o p.nxs -o 'photons_#.bin' s.nbs
    nb-convert -q --threads 3 -o c_3.nxs s.nbs
    NB_SIMD=generic nb-convert -q --threads 1 -o c_generic.nxs s.nbs
    "$PY" - <<'PY'
import h5py, hdf5plugin, numpy
c, n = h5py.File("c.nxs", "r")["/entry/data/data"], h5py.File("n.nxs", "r")["/entry/data/data"]
# filter 32008 as the plugin declares it: its version, then 4-byte elements, the default block, LZ4
assert c._filters["32008"][2:] == (4, 0, 2), c._filters
assert c.shape == (2, 999, 1001) and n.compression is None, (c.shape, n.compression)
assert numpy.array_equal(c[()], n[()]) and c[()].max() > 10, "the counts differ from the uncompressed file's"
p = h5py.File("p.nxs", "r")["/entry/data/data"]
assert p.dtype == numpy.float32 and "32008" in p._filters, (p.dtype, p._filters)
for i in range(2):
    want = numpy.fromfile("photons_%d.bin" % (i + 1), dtype="<f4").reshape(999, 1001)
    assert numpy.array_equal(p[i], want), "photons of frame %d differ" % (i + 1)
# the chunks' bytes: the same on 3 threads, and on one with the portable bit shuffle
for other in ("c_3.nxs", "c_generic.nxs"):
    o = h5py.File(other, "r")["/entry/data/data"]
    for i in range(2):
        assert o.id.read_direct_chunk((i, 0, 0)) == c.id.read_direct_chunk((i, 0, 0)), (other, i)
PY
}

@test "nxmx: a file past the size limit (ulimit -f: as a full disk) is a clear error (1) in the metadata or the frames, with every compression, and leaves no file" {
    [ -s "$SWEEP_DIR/sweep.nxs" ] || skip "this build or system has no libhdf5: $(cat "$SWEEP_DIR/nxs.err")"
    nb-geom -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 512 -default_F 100 -nframes 2 \
        -osc 1 -q | nb-sim -q | nb-noise -q -seed 1 -o s.nbs
    local kb c
    # 4 KiB: within the metadata; 64 KiB: within the frames (each more than 64 KiB, however compressed)
    for kb in 4 64; do
        for c in auto gzip none; do
            run_nb sh -c "ulimit -f $kb && exec nb-convert --compression $c -o x.nxs s.nbs"
            expect_status 1
            expect_has "nb-convert: cannot write 'x.nxs': File too large"
        done
        run_nb sh -c "ulimit -f $kb && exec nb-convert --photons -o x.nxs s.nbs"
        expect_status 1
        expect_has "nb-convert: cannot write 'x.nxs': File too large"
    done
    no_files_but s.nbs stdout.bin
}

@test "nxmx: a bad path, a '#' in the name and standard output are clear errors, and leave no file" {
    need_h5py
    nb-geom $SMALL -q | nb-sim -q -o one.nbs
    run_nb nb-convert -o nodir/x.nxs one.nbs
    expect_status 1
    expect_has "nb-convert: cannot write 'nodir/x.nxs': No such file or directory"
    run_nb nb-convert -o 'x_###.nxs' one.nbs
    expect_status 2
    expect_has "one NXmx file holds every frame; no '#' run in its name"
    run_nb nb-convert --format nxmx -o - one.nbs
    expect_status 2
    expect_has "an NXmx (HDF5) file must be a regular file"
    run_nb nb-convert -o x.nxs --nxmx-join one.nbs
    expect_status 1
    expect_has "cannot read 'one.nbs'"
    no_files_but one.nbs stdout.bin
}

@test "nxmx: twelve panels are module_00 .. module_11, so dxtbx takes them in the panels' order" {
    need_dials
    printf 'res = 5000\nclen = 0.08\ncoffset = 0\n' > twelve.geom
    for i in $(seq 0 11); do
        printf 'p%d/min_fs = 0\np%d/max_fs = 15\np%d/min_ss = %d\np%d/max_ss = %d\n' $i $i $i $((16 * i)) $i $((16 * i + 15))
        printf 'p%d/corner_x = %d\np%d/corner_y = -8\np%d/fs = +1.0x\np%d/ss = +1.0y\n' $i $((20 * i - 120)) $i $i $i
    done >> twelve.geom
    nb-geom -q -panels twelve.geom -cell 78 78 37 90 90 90 -lambda 1 -N 10 -default_F 100 -oversample 1 |
        nb-sim -q | nb-convert -q -o twelve.nxs -o model.expt
    "$PY" - <<'PY'
import h5py
from dxtbx.model.experiment_list import ExperimentListFactory as F
import dxtbx
names = sorted(k for k in h5py.File("twelve.nxs", "r")["/entry/instrument/detector"] if k.startswith("module_"))
assert names == ["module_%02d" % i for i in range(12)], names
a = dxtbx.load("twelve.nxs").get_detector()
b = F.from_json_file("model.expt", check_format=False)[0].detector
assert len(a) == 12 and len(b) == 12, (len(a), len(b))
worst = max(abs(p - q) for pa, pb in zip(a, b) for p, q in zip(pa.get_origin(), pb.get_origin()))
assert worst < 1e-3, worst
PY
}
