#!/usr/bin/env bats
# A detector of several panels (nb-geom -panels FILE): a 2x2 tiled detector of
# tilted panels from a CrystFEL .geom renders, writes one CBF per panel and a
# .geom of all of them, and every panel is, bit for bit, the one-panel render
# of that panel alone; nb-noise and nb-convert handle the panels; beside
# XDS.INP the CBF/SMV frames are one stacked image with a SEGMENT per panel;
# the usage errors.  With DIALS: an image written as CBF, dials.import'ed, renders again
# from the .expt (correlation >= 0.9999), and the same detector split into two
# coplanar panels gives the same pixels (>= 0.999999).

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}
XTAL="-cell 78 78 37 90 90 90 -misset 10 20 30 -lambda 1 -N 10 -default_F 100 -oversample 1"
PANEL_PIXELS=3072 # 64 x 48, every tile

# Four 64 x 48 tiles of 0.2 mm around the beam at 80 mm, three of them tilted
# by 5 degrees (about the slow axis, the fast axis, or in plane with a tilt)
# and one 2 mm further back.
write_tiles() {
    cat > tiles.geom <<'EOF'
; a 2x2 tiled detector
res = 5000
clen = 0.08
coffset = 0
q0/min_fs = 0
q0/max_fs = 63
q0/min_ss = 0
q0/max_ss = 47
q0/corner_x = -66
q0/corner_y = -50
q0/fs = +0.9961947x +0.0y +0.0871557z
q0/ss = +0.0x +1.0y +0.0z
q1/min_fs = 0
q1/max_fs = 63
q1/min_ss = 48
q1/max_ss = 95
q1/corner_x = 2
q1/corner_y = -50
q1/fs = +1.0x
q1/ss = +0.0x +0.9961947y -0.0871557z
q2/min_fs = 0
q2/max_fs = 63
q2/min_ss = 96
q2/max_ss = 143
q2/corner_x = -66
q2/corner_y = 2
q2/fs = +0.9961947x +0.0871557y
q2/ss = -0.0868241x +0.9961947y +0.0075961z
q3/min_fs = 0
q3/max_fs = 63
q3/min_ss = 144
q3/max_ss = 191
q3/corner_x = 2
q3/corner_y = 2
q3/clen = 0.082
q3/fs = +1.0x
q3/ss = +1.0y
EOF
}

# bytes of panel K (0-based) of a raw float file of equal panels
panel_slice() {
    tail -c +$(($2 * PANEL_PIXELS * 4 + 1)) "$1" | head -c $((PANEL_PIXELS * 4))
}

@test "panels: a 2x2 tiled detector of tilted panels renders; every panel is the one-panel render of it alone" {
    write_tiles
    nb-geom -q -panels tiles.geom $XTAL -o tiles.nbs
    [ "$(plan_key tiles.nbs PANELS)" = 4 ] || false
    nb-sim -q tiles.nbs | nb-convert -q -o tile.cbf -o all.bin -o all.geom
    [ "$(stat -c %s all.bin)" -eq $((4 * PANEL_PIXELS * 4)) ] || false
    for k in 0 1 2 3; do
        [ -s "tile-p$k.cbf" ] || false
        { grep -v '^q' tiles.geom; grep "^q$k/" tiles.geom; } > "one$k.geom"
        nb-geom -q -panels "one$k.geom" $XTAL | nb-sim -q | nb-convert -q -o "one$k.bin"
        panel_slice all.bin "$k" > "slice$k.bin"
        cmp "slice$k.bin" "one$k.bin"
    done
    [ ! -e tile.cbf ] || false
    # the panels are not all alike: the tilts matter
    run ! cmp slice0.bin slice3.bin
}

@test "panels: the .geom written for the panels describes all four and renders the same image again" {
    write_tiles
    nb-geom -q -panels tiles.geom $XTAL | nb-sim -q | nb-convert -q -o all.bin -o all.geom
    [ "$(grep -c '/min_fs' all.geom)" -eq 4 ] || false
    grep -qx 'p3/min_ss = 144' all.geom
    grep -qx 'p3/max_ss = 191' all.geom
    nb-geom -q -panels all.geom $XTAL | nb-sim -q | nb-convert -q -o back.bin
    # the .geom holds 6 to 8 decimals: the same pixels to 1e-5 of the maximum
    paste <(pixels all.bin) <(pixels back.bin) | awk '
        { d = $1 - $2; if (d < 0) d = -d; if (d > dmax) dmax = d; if ($1 > m) m = $1 }
        END { if (!(m > 0) || dmax > 1e-5 * m) { print "max diff " dmax " of " m; exit 1 } }'
}

# the binary section of a CBF (from its start marker on): the counts
cbf_data() {
    local off
    off=$(LC_ALL=C grep -obaP '\x0c\x1a\x04\xd5' "$1" | head -1 | cut -d: -f1)
    [ -n "$off" ] || return 1
    tail -c +$((off + 1)) "$1"
}

@test "panels: nb-noise counts every panel; panel 0 gets the counts a one-panel detector would" {
    write_tiles
    local tif=()
    if can_write_tiff; then tif=(-o n.tif); fi
    nb-geom -q -panels tiles.geom $XTAL -seed 5 | nb-sim -q | nb-noise -q | nb-convert -q -o n_####.cbf "${tif[@]}"
    { grep -v '^q' tiles.geom; grep "^q0/" tiles.geom; } > one0.geom
    nb-geom -q -panels one0.geom $XTAL -seed 5 | nb-sim -q | nb-noise -q | nb-convert -q -o single_####.cbf
    for k in 0 1 2 3; do [ -s "n_p${k}_0001.cbf" ] || false; done
    if [ ${#tif[@]} -gt 0 ]; then for k in 0 1 2 3; do [ -s "n-p$k.tif" ] || false; done; fi
    cbf_data n_p0_0001.cbf > multi0.dat
    cbf_data single_0001.cbf > single0.dat
    [ -s single0.dat ] || false
    cmp multi0.dat single0.dat
    run ! cmp n_p1_0001.cbf n_p2_0001.cbf
}

@test "panels: a non-finite pixel in panel 2 fails nb-noise and nb-convert naming its frame, panel and place in the panel" {
    write_tiles
    nb-geom -q -panels tiles.geom $XTAL -seed 5 | nb-sim -q -o img.nbs
    # row 100 of the stacked panels of 48 rows is panel 2's row 4
    nan_in_frame img.nbs 0 100
    run_nb nb-noise -o n.nbs img.nbs
    expect_status 1
    expect_has "frame 1, panel 2: the image holds a non-finite value at pixel 263 (fast 7, slow 4)"
    [ ! -e n.nbs ]
    run_nb nb-convert -o c.cbf img.nbs
    expect_status 1
    expect_has "IMAGE record of frame 1, panel 2: pixel 263 (fast 7, slow 4) is not a finite number"
    no_files_but tiles.geom img.nbs stdout.bin
}

@test "panels: a one-panel plan has no panel keys, and its stream is unchanged by the panel code" {
    nb-geom $SMALL -q -o plan.nbs
    run ! grep -a -q 'PANELS=' plan.nbs
    nb-sim -q plan.nbs -o img.nbs
    run ! grep -a -q 'PANEL_PIXELS=' img.nbs
    [ "$(nb_key img.nbs PANEL)" = 0 ] || false
}

@test "panels: flags that place the one-panel detector are usage errors beside -panels" {
    write_tiles
    run_nb nb-geom -panels tiles.geom $XTAL -distance 100
    expect_status 2
    expect_has "nb-geom: -distance cannot be used with -panels: the detector comes from 'tiles.geom'"
    run_nb nb-geom -panels tiles.geom $XTAL -detpixels 64
    expect_status 2
    expect_has "-detpixels cannot be used with -panels"
    run_nb nb-geom -panels tiles.geom $XTAL -Xbeam 3
    expect_status 2
}

@test "panels: unreadable, unknown and malformed detector files are clear errors" {
    run_nb nb-geom -panels missing.expt $XTAL
    expect_status 1
    expect_has "nb-geom: cannot open 'missing.expt': No such file or directory"
    : > det.txt
    run_nb nb-geom -panels det.txt $XTAL
    expect_status 2
    expect_has "name a DIALS experiment list (.expt, .json) or a CrystFEL geometry (.geom)"
    printf '{"detector": [ {"panels": [ }\n' > bad.expt
    run_nb nb-geom -panels bad.expt $XTAL
    expect_status 1
    expect_has "nb-geom: 'bad.expt': JSON error at line 1"
    # a good 10 x 10 panel, then one line CrystFEL-wise wrong for us
    local extra
    for extra in 'bad_gap/min_x = 3|bad regions (bad_gap) are not supported' \
        "p0/wibble = 3|the key 'wibble' is not supported" \
        "clen = /LCLS/detector_1/EncoderValue|a camera length read from the data is not supported" \
        "p0/corner_x = 0|panel 0's plane passes through the sample" \
        "p$(printf '%070d' 0)/res = 5000|is longer than 63 characters"; do
        printf 'p0/min_fs = 0\np0/max_fs = 9\np0/min_ss = 0\np0/max_ss = 9\np0/res = 5000\n%s\n' "${extra%%|*}" > odd.geom
        run_nb nb-geom -panels odd.geom $XTAL
        expect_status 1
        expect_has "${extra#*|}"
    done
    no_files_but det.txt bad.expt odd.geom stdout.bin
}

@test "panels: --import of raw floats that are not all the panels' pixels is refused, writing nothing" {
    write_tiles
    nb-geom -q -panels tiles.geom $XTAL -o plan.nbs
    head -c 400 /dev/zero > flat.bin
    run_nb nb-convert --import flat.bin plan.nbs
    expect_status 1
    expect_has "'flat.bin' has 400 bytes; 12288 float32 pixels need 49152"
    no_files_but tiles.geom plan.nbs flat.bin stdout.bin
}

# KEY of XDS.INP's SEGMENT block N (1-based), e.g. xds_seg 2 SEGMENT
xds_seg() {
    awk -v n="$1" -v k="$2=" '$1 == "SEGMENT=" { s++ }
        s == n { for (i = 1; i <= NF; i++) if ($i == k) {
            v = ""; for (j = i + 1; j <= NF && $j !~ /=$/; j++) v = v (v == "" ? "" : " ") $j
            print v; exit } }' XDS.INP
}

@test "panels: beside XDS.INP the CBF/SMV frames stack the panels, one SEGMENT per panel, the per-panel pixels" {
    write_tiles
    nb-geom -q -panels tiles.geom $XTAL -o plan.nbs
    nb-sim -q plan.nbs -o img.nbs
    nb-convert -q -o img_###.cbf -o s_###.img -o XDS.INP img.nbs
    # one file per frame, not one per panel
    [ -s img_001.cbf ] || false
    [ -s s_001.img ] || false
    [ ! -e img_p0_001.cbf ] || false
    grep -qx 'NAME_TEMPLATE_OF_DATA_FRAMES= img_???.cbf' XDS.INP
    grep -q '^NX= 64 NY= 192 QX= 0.200000 QY= 0.200000$' XDS.INP
    grep -q '^X-Binary-Size-Fastest-Dimension: 64' img_001.cbf
    grep -q '^X-Binary-Size-Second-Dimension: 192' img_001.cbf
    [ "$(grep -c '^SEGMENT= ' XDS.INP)" -eq 4 ] || false
    [ "$(grep -c '^SEGMENT_DISTANCE= ' XDS.INP)" -eq 4 ] || false
    # the regions tile the image: panel k is rows 48k+1 .. 48k+48, all columns
    for k in 0 1 2 3; do
        [ "$(xds_seg $((k + 1)) SEGMENT)" = "1 64 $((48 * k + 1)) $((48 * k + 48))" ] || false
    done
    # panel 0 is the detector's frame; panel 3 (2 mm back, tilted 5 degrees) is not
    [ "$(xds_seg 1 DIRECTION_OF_SEGMENT_X-AXIS)" = "1.00000000 0.00000000 0.00000000" ] || false
    [ "$(xds_seg 1 SEGMENT_ORGX)" = "$(sed -n 's/^ORGX= \([^ ]*\) .*/\1/p' XDS.INP)" ] || false
    [ "$(xds_seg 4 SEGMENT_DISTANCE)" != "$(xds_seg 1 SEGMENT_DISTANCE)" ] || false
    # each segment's pixels are the one-panel file's of that panel
    nb-convert -q -o pp_###.img img.nbs
    for k in 0 1 2 3; do smv_data "pp_p${k}_001.img"; done > panels.dat
    smv_data s_001.img > stacked.dat
    [ "$(stat -c %s stacked.dat)" -eq $((4 * PANEL_PIXELS * 2)) ] || false
    cmp panels.dat stacked.dat
    # the CBF too: panel 0's byte-offset data opens the stacked image's
    nb-convert -q -o pc_###.cbf img.nbs
    cbf_data pc_p0_001.cbf > p0.dat
    cbf_data img_001.cbf > all.dat
    n=$(sed -n 's/^X-Binary-Size: *\([0-9]*\).*/\1/p' pc_p0_001.cbf | tr -d '\r')
    [ "$n" -gt 0 ] || false
    cmp <(head -c $((n + 4)) p0.dat) <(head -c $((n + 4)) all.dat)
}

@test "panels: the stacked frames take nb-noise's counts; the one-panel XDS.INP has no SEGMENT" {
    write_tiles
    nb-geom -q -panels tiles.geom $XTAL -seed 3 | nb-sim -q | nb-noise -q -o noisy.nbs
    nb-convert -q -o n_###.img -o XDS.INP noisy.nbs
    grep -q '^DETECTOR= ADSC' XDS.INP
    nb-convert -q -o q_###.img noisy.nbs
    for k in 0 1 2 3; do smv_data "q_p${k}_001.img"; done > panels.dat
    smv_data n_001.img > stacked.dat
    cmp panels.dat stacked.dat
    nb-geom $SMALL -q | nb-sim -q | nb-convert -q -o one_###.cbf -o one.INP
    run ! grep -q 'SEGMENT' one.INP
}

@test "panels: XDS reads the stacked frames and their SEGMENT blocks (with XDS)" {
    command -v xds >/dev/null 2>&1 || skip "XDS is not installed (xds)"
    write_tiles
    nb-geom -q -panels tiles.geom $XTAL | nb-sim -q | nb-convert -q -o img_###.cbf -o XDS.INP
    sed -i 's/^JOB=.*/JOB= XYCORR INIT/' XDS.INP
    xds >xds.log 2>&1 || { tail -20 xds.log; false; }
    run ! grep -q '!!! ERROR' xds.log
    [ -s INIT.LP ] || false
}

need_dials() {
    command -v dials.import >/dev/null 2>&1 || skip "DIALS is not installed (dials.import)"
    "$PY" -c 'import dxtbx, numpy' 2>/dev/null || skip "dxtbx and numpy are not importable by $PY"
}

# correlation of two raw float files, and whether it reaches $3
correlation_at_least() {
    "$PY" - "$1" "$2" "$3" <<'PY'
import sys
import numpy as np
a = np.fromfile(sys.argv[1], "<f4").astype(float)
b = np.fromfile(sys.argv[2], "<f4").astype(float)
assert a.size == b.size, (a.size, b.size)
c = np.corrcoef(a, b)[0, 1]
print("correlation %.12f (gate %s)" % (c, sys.argv[3]))
sys.exit(0 if c >= float(sys.argv[3]) else 1)
PY
}

@test "panels: DIALS round trip: a CBF through dials.import, its .expt renders the same image" {
    need_dials
    F="-detpixels 256 -pixel 0.172 -distance 150 -Xbeam 20 -Ybeam 25"
    nb-geom -q $XTAL $F | nb-sim -q | nb-convert -q -o orig.bin -o img_0001.cbf
    dials.import img_0001.cbf output.experiments=imported.expt >import.log 2>&1 || { tail -20 import.log; false; }
    nb-geom -q -panels imported.expt $XTAL | nb-sim -q | nb-convert -q -o back.bin
    run correlation_at_least orig.bin back.bin 0.9999
    echo "$output" >&3
    expect_status 0
}

@test "panels: DIALS: the imported detector split into two coplanar panels renders the same pixels" {
    need_dials
    nb-geom -q $XTAL -detpixels 256 -pixel 0.172 -distance 150 -Xbeam 20 -Ybeam 25 | nb-sim -q \
        | nb-convert -q -o img_0001.cbf
    dials.import img_0001.cbf output.experiments=imported.expt >import.log 2>&1 || { tail -20 import.log; false; }
    # rows 0..99 and 100..255 as two panels (the hierarchy's frames are local)
    "$PY" - <<'PY'
import json
from dxtbx.model.experiment_list import ExperimentListFactory
el = ExperimentListFactory.from_json_file("imported.expt", check_format=False)
p = el[0].detector[0]
d = json.load(open("imported.expt"))
det = d["detector"][0]
det.pop("hierarchy", None)
top = dict(det["panels"][0])
W, H = p.get_image_size()
px = p.get_pixel_size()[1]
s = p.get_slow_axis()
o = p.get_origin()
top.update(fast_axis=list(p.get_fast_axis()), slow_axis=list(s), origin=list(o), image_size=[W, 100])
bottom = dict(top)
bottom.update(origin=[o[k] + 100 * px * s[k] for k in range(3)], image_size=[W, H - 100])
det["panels"] = [top, bottom]
json.dump(d, open("split.expt", "w"))
PY
    nb-geom -q -panels split.expt $XTAL -o split.nbs
    [ "$(plan_key split.nbs PANELS)" = 2 ] || false
    nb-sim -q split.nbs | nb-convert -q -o split.bin
    nb-geom -q -panels imported.expt $XTAL | nb-sim -q | nb-convert -q -o whole.bin
    run correlation_at_least whole.bin split.bin 0.999999
    echo "$output" >&3
    expect_status 0
}

@test "panels: nb-sim --grad on a detector of panels: each panel's derivative is that of the panel alone" {
    write_tiles
    nb-geom -q -panels tiles.geom $XTAL | nb-sim -q --grad misset_x,lambda | nb-convert -q --grad lambda -o all.bin
    [ "$(stat -c %s all.bin)" -eq $((4 * PANEL_PIXELS * 4)) ] || false
    for k in 0 3; do
        { grep -v '^q' tiles.geom; grep "^q$k/" tiles.geom; } > "one$k.geom"
        # the same names as the whole detector's pass: a pass of one tangent is another
        # instantiation, equal to the last bit in the product's build but not in every build
        nb-geom -q -panels "one$k.geom" $XTAL | nb-sim -q --grad misset_x,lambda | nb-convert -q --grad lambda -o "one$k.bin"
        panel_slice all.bin "$k" > "slice$k.bin"
        cmp "slice$k.bin" "one$k.bin"
    done
    run ! cmp slice0.bin slice3.bin
    # the detector's and each panel's parameters move the panels themselves
    nb-geom -q -panels tiles.geom $XTAL -o tiles.nbs
    nb-sim -q --grad distance,panel3_shift_fast,panel3_rot_normal tiles.nbs | nb-convert -q --grad panel3_shift_fast -o shift.bin
    panel_slice shift.bin 3 > moved.bin
    panel_slice shift.bin 0 > still.bin
    run ! cmp moved.bin still.bin
    # another panel's is nothing (to the float path's last bits)
    "$PY" -c "import sys, array; f = lambda n: sum(abs(x) for x in array.array('f', open(n, 'rb').read()))
sys.exit(not f('moved.bin') > 0 or f('still.bin') > 1e-9 * f('moved.bin'))"
}

@test "panels: the fast path's derivatives on a detector of panels: each panel's is that of the panel alone" {
    write_tiles
    nb-geom -q -panels tiles.geom $XTAL | nb-sim -q -precision single --grad misset_x,lambda |
        nb-convert -q --grad lambda -o all.bin
    for k in 0 3; do
        { grep -v '^q' tiles.geom; grep "^q$k/" tiles.geom; } > "one$k.geom"
        nb-geom -q -panels "one$k.geom" $XTAL | nb-sim -q -precision single --grad misset_x,lambda |
            nb-convert -q --grad lambda -o "one$k.bin"
        panel_slice all.bin "$k" > "slice$k.bin"
        cmp "slice$k.bin" "one$k.bin"
    done
    run ! cmp slice0.bin slice3.bin
}

@test "panels: nb-fit refines the crystal against an observed detector of panels (an nb stream, or raw float of all panels)" {
    write_tiles
    nb-geom -q -panels tiles.geom $XTAL | nb-sim -q -precision double | nb-noise -q -seed 2 | nb-convert -q -o obs.nbs -o obs.cbf
    START="-cell 78.1 78 37 90 90 90 -misset 10.05 19.96 30.05 -lambda 1 -N 10 -default_F 100 -oversample 1"
    nb-geom -q -panels tiles.geom $START -o start.nbs
    nb-fit --observed obs.nbs --refine misset_x,misset_y,misset_z,cell_a,scale start.nbs 2>fit.err >fit.nbs
    cat fit.err
    for want in "misset_x 10" "misset_y 20" "misset_z 30" "cell_a 78"; do
        set -- $want
        awk -v n="$1" -v t="$2" '$1 == n { e = $3 - t; if (e < 0) e = -e; ok = e <= 3 * $5 && e < 0.01 } END { exit !ok }' fit.err
    done
    [ "$(plan_key fit.nbs PANELS)" = 4 ] || false
    run_nb nb-fit --observed obs-p0.cbf --refine misset_x start.nbs
    expect_status 1
    expect_has "a detector of 4 panels is observed as an nb stream (.nbs), NXmx or raw float of all its panels"
}
