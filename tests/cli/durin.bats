#!/usr/bin/env bats
# Our NXmx files as XDS reads them: through its LIB= plugin for HDF5, DLS's
# durin (github.com/DiamondLightSource/durin; XDS itself is not free to
# install here).  tests/tools/xds_plugin_read.c calls the plugin as XDS does
# (plugin_open with the master file XDS derives from NAME_TEMPLATE_OF_DATA_FRAMES
# "x_??????.h5", plugin_get_header, plugin_get_data from frame 1, on several
# threads, plugin_close) and compares every frame with the CBF nb-convert
# writes from the same stream: a 64x48 series with each compression, the
# plan's masked pixels (-2 from pixel_mask bit 1), two panels of different
# widths (-1 right of the narrower, as in the CBF beside XDS.INP), a
# polychromatic series (whose spectrum is an NXdata) and shards joined by
# --nxmx-join, read from another directory.
#
# Needs NB_DURIN_PLUGIN, the path of a durin-plugin.so, else every test is
# skipped with that reason.  Checked with durin bec44c8 built outside this
# tree against Debian 12's libhdf5: `make plugin` compiles its objects with
# h5cc but fails to link (it links the static libhdf5.a, not built -fPIC
# there), so link them as `cc -shared -o build/durin-plugin.so build/plugin.o
# build/file.o build/err.o build/filters.o build/bslz4.a
# -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5_hl -lhdf5`.  What this
# checks and what durin cannot read: docs/architecture.md, the .nxs row.

load helper

READER="$NB_ROOT/${BUILD:-build}/tests/xds-plugin-read"
XTAL="-cell 100 100 100 90 90 90 -lambda 1 -N 5 -default_F 100 -osc 1"
SERIES="$XTAL -distance 100 -detpixels_f 64 -detpixels_s 48 -pixel 0.172"

need_durin() {
    [ -n "${NB_DURIN_PLUGIN:-}" ] ||
        skip "NB_DURIN_PLUGIN is not set (the path of a durin-plugin.so, XDS's HDF5 plugin from github.com/DiamondLightSource/durin)"
    [ -r "$NB_DURIN_PLUGIN" ] || { echo "NB_DURIN_PLUGIN='$NB_DURIN_PLUGIN' is not a readable file"; return 1; }
    [ -x "$READER" ] || skip "$READER is not built (make check builds it)"
    nb-geom $SMALL -q | nb-sim -q | nb-convert -q -o probe.nxs 2>probe.err ||
        skip "this build or system has no libhdf5: $(cat probe.err)"
    rm -f probe.nxs probe.err
}

# an SMV mask for nb-geom -mask: FILE NX NY X0 X1 Y0 Y1, 0 (masked) in the
# block of columns X0..X1 and rows Y0..Y1, 1 elsewhere
mask_smv() {
    local out=$1 nx=$2 ny=$3 x y header
    header=$(printf '{\nHEADER_BYTES=512;\nDIM=2;\nBYTE_ORDER=little_endian;\nTYPE=unsigned_short;\nSIZE1=%d;\nSIZE2=%d;\nPIXEL_SIZE=0.172;\nDISTANCE=100;\n}\f' "$nx" "$ny")
    {
        LC_ALL=C printf '%-512s' "$header"
        for ((y = 0; y < ny; y++)); do
            for ((x = 0; x < nx; x++)); do
                if ((x >= $4 && x <= $5 && y >= $6 && y <= $7)); then printf '\0\0'; else printf '\1\0'; fi
            done
        done
    } >"$out"
}

# the reader's lines for frame K of $output: its summary, then its comparison
frame_line() { printf '%s\n' "$output" | grep "^frame $1 sum=" || echo "no summary line for frame $1"; }
cbf_line() { printf '%s\n' "$output" | grep "^frame $1 cbf=" || echo "no comparison line for frame $1"; }

# FILE.h5 read as XDS would (template x_??????.h5 for x_master.h5) against the
# CBFs; every frame holds counts (max > 0) and equals its CBF
read_series() {
    local compression=$1 k
    nb-geom $SERIES -nframes 3 -q | nb-sim -q | nb-noise -q -seed 1 -o s.nbs
    nb-convert -q -o 's_###.cbf' s.nbs
    nb-convert -q --compression "$compression" -o x_master.h5 s.nbs
    run "$READER" --threads 3 "$NB_DURIN_PLUGIN" 'x_??????.h5' s_001.cbf s_002.cbf s_003.cbf
    expect_status 0
    expect_has "header nx=64 ny=48 nbytes=4 qx=0.000172 qy=0.000172 frames=3 vendor=1"
    for k in 1 2 3; do
        [ "$(cbf_line $k)" = "frame $k cbf=s_00$k.cbf equal=3072 masked=0 differ=0" ] || false
        [ "$(frame_line $k | sed 's/.* max=\([0-9-]*\) .*/\1/')" -gt 0 ] || false
    done
}

@test "durin: a 3-frame 64x48 series, gzip: header (pixel size in m) and every frame the CBF's counts" {
    need_durin
    read_series gzip
}

@test "durin: the same series uncompressed" {
    need_durin
    read_series none
}

@test "durin: the same series with bitshuffle+LZ4 (HDF5's filter plugin reads it: durin's own decoder is for Eiger's data_NNNNNN)" {
    need_durin
    nb-geom $SMALL -q | nb-sim -q | nb-convert -q --compression bslz4 -o probe.nxs 2>probe.err ||
        skip "no bitshuffle filter for HDF5: $(cat probe.err)"
    read_series bslz4
}

@test "durin: the plan's masked pixels read as -2 (pixel_mask bit 1), every other pixel the CBF's" {
    need_durin
    mask_smv mask.img 64 48 10 13 20 22
    nb-geom $SERIES -nframes 2 -mask mask.img -q | nb-sim -q | nb-noise -q -seed 1 -o m.nbs
    nb-convert -q -o 'm_###.cbf' -o m.nxs m.nbs
    run "$READER" "$NB_DURIN_PLUGIN" m.nxs m_001.cbf m_002.cbf
    expect_status 0
    expect_has "header nx=64 ny=48 nbytes=4 qx=0.000172 qy=0.000172 frames=2 vendor=1"
    [ "$(cbf_line 2)" = "frame 2 cbf=m_002.cbf equal=3060 masked=12 differ=0" ] || false
    [ "$(frame_line 2 | grep -o 'minus1=.*')" = "minus1=0 box1=none minus2=12 box2=10,13,20,22" ] || false
}

@test "durin: two panels of different widths read as the CBF beside XDS.INP: one 64x96 image, -1 right of the narrower" {
    need_durin
    # examples/tiles.geom's first two tiles of 64 x 48, the second cut to 40 columns
    grep -v '^q[23]/' "$NB_ROOT/examples/tiles.geom" | sed 's|^q1/max_fs = 63$|q1/max_fs = 39|' >two.geom
    grep -qx 'q1/max_fs = 39' two.geom
    nb-geom -q -panels two.geom $XTAL -nframes 2 | nb-sim -q | nb-noise -q -seed 2 -o t.nbs
    nb-convert -q -o 't_###.cbf' -o XDS.INP -o t.nxs t.nbs
    run "$READER" "$NB_DURIN_PLUGIN" t.nxs t_001.cbf t_002.cbf
    expect_status 0
    expect_has "header nx=64 ny=96 nbytes=4 qx=0.0002 qy=0.0002 frames=2 vendor=1"
    [ "$(cbf_line 1)" = "frame 1 cbf=t_001.cbf equal=6144 masked=0 differ=0" ] || false
    [ "$(frame_line 1 | grep -o 'minus1=.*')" = "minus1=1152 box1=40,63,48,95 minus2=0 box2=none" ] || false
    [ "$(cbf_line 2)" = "frame 2 cbf=t_002.cbf equal=6144 masked=0 differ=0" ] || false
}

@test "durin: a polychromatic series (the beam's spectrum an NXdata) reads its frames through the detector's data link" {
    need_durin
    nb-geom $SERIES -dispersion 1 -dispsteps 3 -nframes 2 -q | nb-sim -q | nb-noise -q -seed 1 -o p.nbs
    nb-convert -q -o 'p_###.cbf' -o p.nxs p.nbs
    run "$READER" "$NB_DURIN_PLUGIN" p.nxs p_001.cbf p_002.cbf
    expect_status 0
    expect_has "header nx=64 ny=48 nbytes=4 qx=0.000172 qy=0.000172 frames=2 vendor=1"
    [ "$(cbf_line 2)" = "frame 2 cbf=p_002.cbf equal=3072 masked=0 differ=0" ] || false
}

@test "durin: shards joined by --nxmx-join read as the whole series (a virtual data set), from another directory" {
    need_durin
    nb-geom $SERIES -nframes 5 -q -o plan.nbs
    nb-sim -q plan.nbs | nb-noise -q -seed 1 | nb-convert -q -o 'w_###.cbf'
    mkdir run
    nb-sim -q --frames 4:5 plan.nbs | nb-noise -q -seed 1 | nb-convert -q -o run/b.nxs
    nb-sim -q --frames 1:3 plan.nbs | nb-noise -q -seed 1 | nb-convert -q -o run/a.nxs
    (cd run && nb-convert -q -o j_master.h5 --nxmx-join 'b.nxs' --nxmx-join 'a.nxs')
    run "$READER" --threads 2 "$NB_DURIN_PLUGIN" 'run/j_??????.h5' w_001.cbf w_002.cbf w_003.cbf w_004.cbf w_005.cbf
    expect_status 0
    expect_has "header nx=64 ny=48 nbytes=4 qx=0.000172 qy=0.000172 frames=5 vendor=1"
    local k
    for k in 1 2 3 4 5; do
        [ "$(cbf_line $k)" = "frame $k cbf=w_00$k.cbf equal=3072 masked=0 differ=0" ] || false
    done
}
