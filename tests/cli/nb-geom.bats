#!/usr/bin/env bats
# nb-geom: nanoBragg's experiment flags -> one PLAN record.  Values in the plan
# are SI (metres, radians); expected values follow docs/physics.md sections 1-8.

load helper

# ---- help and usage ---------------------------------------------------------

@test "nb-geom --help lists its own flags" {
    run nb-geom --help
    expect_status 0
    for f in -distance -close_distance -cell -mat -mosflm -xds -adxv -denzo -dials -detpixels -pixel \
        -Xbeam -Ybeam -ORGX -ORGY -twotheta -lambda -energy -dispersion -divergence -sourcefile \
        -mosaic -mosaic_domains -phi -osc -phisteps -N -xtalsize -round_xtal -oversample -roi -mask \
        -img -water -dmin -polar -nopolar -fluence -detector_thick -detector_material -interpolate -misset -misset_seed \
        -hkl -default_F -floatfile -seed -precision --reference-defaults; do
        expect_has "  $f"
    done
}

@test "nb-geom: a fractional cell count is kept (an nb extension), a whole one as before" {
    [ "$(geom NA -N 2.5)" = "2.5" ] || false
    [ "$(geom NC -N 2.5 -Nc 7)" = "7" ] || false
    [ "$(geom NB -Nb 0.5)" = "1" ] || false
}

@test "nb-geom: a non-numeric value is a usage error naming the option" {
    run_nb nb-geom -cell 100 -distance abc
    expect_status 2
    [ "${lines[0]}" = "nb-geom: option -distance: 'abc' is not a number" ]
    run_nb nb-geom -cell 100 -detpixels 3x
    expect_status 2
    expect_has "nb-geom: option -detpixels: '3x' is not an integer"
    run_nb nb-geom -cell 100 -N 2.5x
    expect_status 2
    expect_has "option -N"
    run_nb nb-geom -cell 100 abc
    expect_status 2
    expect_has "option -cell: 'abc' is not a number"
    run_nb nb-geom -cell 100 -fdet_vector 1 x 0
    expect_status 2
    expect_has "option -fdet_vector: 'x' is not a number"
    run_nb nb-geom -cell 100 -distance inf
    expect_status 2
    expect_has "option -distance"
}

@test "nb-geom: bad words are usage errors (-pivot, -precision, -misset)" {
    run_nb nb-geom -cell 100 -pivot middle
    expect_status 2
    expect_has "nb-geom: option -pivot: expected 'beam' or 'sample', got 'middle'"
    run_nb nb-geom -cell 100 -precision quad
    expect_status 2
    expect_has "option -precision"
    run_nb nb-geom -cell 100 -misset 1 2
    expect_status 2
    expect_has "option -misset needs three angles or 'random'"
}

@test "nb-geom: a stray positional argument is a usage error" {
    run_nb nb-geom -cell 100 100 100 90 90 90 stray -detpixels 32
    expect_status 2
    [ "${lines[0]}" = "nb-geom: unexpected argument 'stray'" ]
    [ ! -s stdout.bin ]
}

@test "nb-geom: no crystal is a usage error" {
    run_nb nb-geom -detpixels 32
    expect_status 2
    expect_has "nb-geom: no crystal: give -cell"
    run_nb nb-geom -detpixels 32 -cell 0
    expect_status 2
}

@test "nb-geom: nonsense values that the reference would render are refused" {
    run_nb nb-geom -cell 100 -detpixels 32 -energy 0
    expect_status 2
    expect_has "nb-geom: option -energy"
    run_nb nb-geom -cell 100 -detpixels 32 -lambda -1
    expect_status 2
    expect_has "nb-geom: option -lambda"
    run_nb nb-geom -cell 100 -detpixels 32 -pixel 0
    expect_status 2
    expect_has "pixel size"
    run_nb nb-geom -cell 100 -detpixels -5
    expect_status 2
    run_nb nb-geom -cell 100 -detpixels 32 -N 2000000
    expect_status 2
    expect_has "absurd crystal"
    run_nb nb-geom -cell 100 -detpixels 32 -osc 1 -phistep 0.0000001
    expect_status 2
    expect_has "absurd sampling"
}

@test "nb-geom: negative numbers are values, not flags" {
    approx "$(geom PHI0 -phi -10)" "$(deg -10)"
    approx "$(geom DETECTOR_ROTX -detector_rotx -5)" "$(deg -5)"
    approx "$(geom MISSET -misset -10 5 -3)" "$(deg -10 5 -3)"
}

# ---- missing and bad input files: runtime errors naming the file ------------

@test "nb-geom: missing input files are runtime errors (1) naming the file" {
    while read -r flag file; do
        run_nb nb-geom -cell 100 -detpixels 32 "$flag" "$file"
        expect_status 1
        [ "${lines[0]}" = "nb-geom: cannot open '$file': No such file or directory" ] ||
            { echo "$flag: ${lines[0]}"; return 1; }
        [ ! -s stdout.bin ]
    done <<'EOF'
-mat nope.mat
-matrix nope.mat
-img nope.img
-mask nope.img
-sourcefile nope.txt
-stol nope
-4stol nope
-Q nope
EOF
    run_nb nb-geom -mat nope.mat -detpixels 32
    expect_status 1
    expect_has "'nope.mat'"
}

@test "nb-geom: malformed input files are runtime errors naming the file" {
    printf '1 2 3\n4 5\n' > bad.mat
    run_nb nb-geom -mat bad.mat -detpixels 32
    expect_status 1
    expect_has "nb-geom: 'bad.mat': expected 9 numbers"
    echo "not an image" > bad.img
    run_nb nb-geom -cell 100 -img bad.img
    expect_status 1
    expect_has "nb-geom: 'bad.img'"
    printf -- '-10 0 x\n' > bad.txt
    run_nb nb-geom -cell 100 -detpixels 32 -sourcefile bad.txt
    expect_status 1
    expect_has "nb-geom: 'bad.txt' line 1: column 3 is not a number"
    : > empty.txt
    run_nb nb-geom -cell 100 -detpixels 32 -sourcefile empty.txt
    expect_status 1
    expect_has "'empty.txt': no sources"
    run_nb nb-geom -cell 100 -detpixels 32 -stol empty.txt
    expect_status 1
    expect_has "'empty.txt': no data"
}

@test "nb-geom: -hkl is only recorded; the file is nb-hkl's business" {
    run_nb nb-geom -cell 100 -detpixels 32 -hkl not-yet.hkl -o plan.nbs
    expect_status 0
    [ "$(plan_key plan.nbs HKL_FILE)" = not-yet.hkl ]
}

# ---- nothing written on failure ---------------------------------------------

@test "nb-geom: a usage error leaves no output file" {
    run_nb nb-geom -o plan.nbs -cell 100 100 100 90 90 90 -distance abc
    expect_status 2
    no_files_but stdout.bin
}

@test "nb-geom: a runtime error leaves no output file and no temporary" {
    run_nb nb-geom -o plan.nbs -mat nope.mat -detpixels 32
    expect_status 1
    no_files_but stdout.bin
    run_nb nb-geom -o plan.nbs -cell 100 -detpixels 32 -sourcefile nope.txt
    expect_status 1
    no_files_but stdout.bin
}

@test "nb-geom: a failing run does not clobber an existing output" {
    nb-geom -cell 100 -detpixels 32 -o plan.nbs
    cp plan.nbs before.nbs
    run_nb nb-geom -o plan.nbs -cell 100 -detpixels 48 -mat nope.mat
    expect_status 1
    cmp plan.nbs before.nbs
    no_files_but stdout.bin plan.nbs before.nbs
}

# ---- the plan: detector size ------------------------------------------------

@test "nb-geom: default plan is MOSFLM, beam pivot, 100 mm, 1 A" {
    nb-geom -cell 100 -detpixels 32 -o plan.nbs
    [ "$(plan_key plan.nbs CONVENTION)" = mosflm ]
    [ "$(plan_key plan.nbs PIVOT)" = beam ]
    approx "$(plan_key plan.nbs DISTANCE)" 0.1
    approx "$(plan_key plan.nbs LAMBDA0)" 1e-10
    approx "$(plan_key plan.nbs PIXEL_SIZE)" 1e-4
    [ "$(plan_key plan.nbs SOURCES)" = 1 ]
    [ "$(plan_key plan.nbs MOSAIC_DOMAINS)" = 1 ]
    [ "$(plan_key plan.nbs PHISTEPS)" = 1 ]
    [ "$(plan_key plan.nbs SHAPE)" = square ]
    [ "$(plan_key plan.nbs UNIT_CELL)" = "100 100 100 90 90 90" ]
    approx "$(plan_key plan.nbs FLUENCE)" 1.2593201528622709e+29 1e-6
}

@test "nb-geom: -detpixels, -detpixels_f/_s (and _x/_y)" {
    [ "$(geom FPIXELS -detpixels 48)" = 48 ]
    [ "$(geom SPIXELS -detpixels 48)" = 48 ]
    approx "$(geom DETSIZE_F -detpixels 48)" 0.0048
    [ "$(geom FPIXELS -detpixels_f 40 -detpixels_s 24)" = 40 ]
    [ "$(geom SPIXELS -detpixels_f 40 -detpixels_s 24)" = 24 ]
    [ "$(geom FPIXELS -detpixels_x 20 -detpixels_y 10)" = 20 ]
    [ "$(geom SPIXELS -detpixels_x 20 -detpixels_y 10)" = 10 ]
}

@test "nb-geom: -detsize and -pixel; pixel counts win over -detsize" {
    nb-geom -cell 100 -detsize 5 -o plan.nbs
    [ "$(plan_key plan.nbs FPIXELS)" = 50 ]
    [ "$(plan_key plan.nbs SPIXELS)" = 50 ]
    nb-geom -cell 100 -detsize_f 4 -detsize_s 3 -o plan.nbs
    [ "$(plan_key plan.nbs FPIXELS)" = 40 ]
    [ "$(plan_key plan.nbs SPIXELS)" = 30 ]
    nb-geom -cell 100 -detsize 5 -pixel 0.2 -o plan.nbs
    [ "$(plan_key plan.nbs FPIXELS)" = 25 ]
    approx "$(plan_key plan.nbs PIXEL_SIZE)" 2e-4
    [ "$(geom FPIXELS -detsize 5 -detpixels 10)" = 10 ]
    approx "$(geom DETSIZE_F -pixel 0.2 -detpixels 10)" 0.002
}

@test "nb-geom: the reference's default detector is 1024 x 1024" {
    nb-geom -cell 100 -o plan.nbs
    [ "$(plan_key plan.nbs FPIXELS)" = 1024 ]
    [ "$(plan_key plan.nbs SPIXELS)" = 1024 ]
}

# ---- distance ----------------------------------------------------------------

@test "nb-geom: -distance sets the distance and a beam pivot" {
    approx "$(geom DISTANCE -distance 50)" 0.05
    approx "$(geom CLOSE_DISTANCE -distance 50)" 0.05
    [ "$(geom PIVOT -distance 50)" = beam ]
    approx "$(geom PIX0 -distance 50)" "0.05 0.0017 -0.0017"
}

@test "nb-geom: -close_distance under MOSFLM: forced beam pivot, with a warning" {
    run_nb nb-geom -cell 100 -detpixels 32 -close_distance 70 -o plan.nbs
    expect_status 0
    expect_has "nb-geom: warning: the mosflm convention pivots the detector about the direct-beam spot"
    approx "$(plan_key plan.nbs CLOSE_DISTANCE)" 0.07
    [ "$(plan_key plan.nbs PIVOT)" = beam ]
}

@test "nb-geom: -close_distance under XDS: sample pivot, no warning" {
    run_nb nb-geom -cell 100 -detpixels 32 -xds -close_distance 70 -o plan.nbs
    expect_status 0
    [ -z "$output" ] || { echo "stderr: $output"; return 1; }
    approx "$(plan_key plan.nbs CLOSE_DISTANCE)" 0.07
    approx "$(plan_key plan.nbs DISTANCE)" 0.07
    [ "$(plan_key plan.nbs PIVOT)" = sample ]
}

# ---- conventions and pivots ---------------------------------------------------

@test "nb-geom: each named convention sets CONVENTION and its forced PIVOT" {
    while read -r conv pivot fdet sdet beam spindle; do
        nb-geom -cell 100 -detpixels 32 "-$conv" -o plan.nbs 2>err.txt
        [ "$(plan_key plan.nbs CONVENTION)" = "$conv" ] || { echo "$conv: CONVENTION"; return 1; }
        [ "$(plan_key plan.nbs PIVOT)" = "$pivot" ] || { echo "$conv: PIVOT $(plan_key plan.nbs PIVOT)"; return 1; }
        approx "$(plan_key plan.nbs FDET)" "${fdet//,/ }"
        approx "$(plan_key plan.nbs SDET)" "${sdet//,/ }"
        approx "$(plan_key plan.nbs BEAM)" "${beam//,/ }"
        approx "$(plan_key plan.nbs SPINDLE)" "${spindle//,/ }"
        # the convention alone asks for nothing it then overrides
        [ ! -s err.txt ] || { echo "-$conv warned:"; cat err.txt; return 1; }
    done <<'EOF'
mosflm beam 0,0,1 0,-1,0 1,0,0 0,0,1
denzo beam 0,0,1 0,-1,0 1,0,0 0,0,1
adxv beam 1,0,0 0,-1,0 0,0,1 1,0,0
xds sample 1,0,0 0,1,0 0,0,1 1,0,0
dials sample 1,0,0 0,1,0 0,0,1 0,1,0
EOF
}

@test "nb-geom: a -pivot a named convention overrides is honoured as the reference does, with a warning" {
    run_nb nb-geom -cell 100 -detpixels 32 -xds -pivot beam -o plan.nbs
    expect_status 0
    expect_has "warning: the xds convention pivots the detector about the sample"
    [ "$(plan_key plan.nbs PIVOT)" = sample ]
    run_nb nb-geom -cell 100 -detpixels 32 -dials -pivot beam -o plan.nbs
    expect_has "warning: the dials convention pivots the detector about the sample"
    run_nb nb-geom -cell 100 -detpixels 32 -mosflm -pivot sample -o plan.nbs
    expect_has "warning: the mosflm convention pivots the detector about the direct-beam spot"
    [ "$(plan_key plan.nbs PIVOT)" = beam ]
    run_nb nb-geom -cell 100 -detpixels 32 -xds -pivot sample -o plan.nbs
    [ -z "$output" ]
}

@test "nb-geom: a custom vector flag selects the custom convention; -pivot is honoured there" {
    [ "$(geom CONVENTION -fdet_vector 0 0 1)" = custom ]
    [ "$(geom CONVENTION -beam_vector 1 0 0)" = custom ]
    [ "$(geom CONVENTION -spindle_axis 0 0 1)" = custom ]
    [ "$(geom CONVENTION -polar_vector 0 0 1)" = custom ]
    [ "$(geom PIVOT -fdet_vector 0 0 1)" = beam ]
    [ "$(geom PIVOT -fdet_vector 0 0 1 -pivot sample)" = sample ]
    [ "$(geom PIVOT -fdet_vector 0 0 1 -close_distance 100)" = sample ]
    approx "$(geom SPINDLE -spindle_axis 0 2 0)" "0 1 0"
    # a named convention after the vector wins, as in the reference
    [ "$(geom CONVENTION -fdet_vector 0 0 1 -mosflm)" = mosflm ]
    # -dials then a vector: custom with the parse-time pivot of -dials (beam)
    [ "$(geom PIVOT -dials -fdet_vector 1 0 0)" = beam ]
}

@test "nb-geom: the golden custom-vector case resolves" {
    nb-geom -default_F 100 -cell 90 90 90 90 90 90 -lambda 1.5 -N 4 -distance 150 -detpixels 256 -pixel 0.2 \
        -beam_vector 0 0 1 -fdet_vector 1 0 0 -sdet_vector 0 -1 0 -odet_vector 0 0 1 -polar_vector 0 1 0 \
        -spindle_axis 1 0 0 -pivot sample -close_distance 150 -ORGX 128 -ORGY 120 -twotheta 8 \
        -twotheta_axis 0 1 0 -o plan.nbs 2>/dev/null
    [ "$(plan_key plan.nbs CONVENTION)" = custom ]
    [ "$(plan_key plan.nbs PIVOT)" = sample ]
    approx "$(plan_key plan.nbs TWOTHETA)" 0
}

# ---- beam centre -------------------------------------------------------------

@test "nb-geom: MOSFLM default beam centre is detsize/2 plus a pixel (docs/physics.md 2.2)" {
    nb-geom -cell 100 -detpixels 64 -o plan.nbs
    approx "$(plan_key plan.nbs XBEAM)" 0.00325
    approx "$(plan_key plan.nbs FBEAM)" 0.0033
    approx "$(plan_key plan.nbs SBEAM)" 0.0033
}

@test "nb-geom: -Xbeam/-Ybeam under MOSFLM: Fbeam = Ybeam + half a pixel, Sbeam = Xbeam + half" {
    nb-geom -cell 100 -detpixels 32 -Xbeam 2 -Ybeam 1 -o plan.nbs
    approx "$(plan_key plan.nbs XBEAM)" 0.002
    approx "$(plan_key plan.nbs YBEAM)" 0.001
    approx "$(plan_key plan.nbs FBEAM)" 0.00105
    approx "$(plan_key plan.nbs SBEAM)" 0.00205
    approx "$(plan_key plan.nbs PIX0)" "0.1 0.00205 -0.00105"
}

@test "nb-geom: AT-GEO-001: MOSFLM, 0.1 mm pixels, 100 mm, beam at 51.2 mm" {
    nb-geom -cell 100 -detpixels 1024 -distance 100 -Xbeam 51.2 -Ybeam 51.2 -o plan.nbs
    approx "$(plan_key plan.nbs PIX0)" "0.1 0.05125 -0.05125"
}

@test "nb-geom: DENZO has no half-pixel shift; ADXV flips the slow axis" {
    nb-geom -cell 100 -detpixels 32 -denzo -Xbeam 2 -Ybeam 1 -o plan.nbs
    approx "$(plan_key plan.nbs FBEAM)" 0.001
    approx "$(plan_key plan.nbs SBEAM)" 0.002
    nb-geom -cell 100 -detpixels 32 -adxv -Xbeam 2 -Ybeam 1 -o plan.nbs
    approx "$(plan_key plan.nbs FBEAM)" 0.002
    approx "$(plan_key plan.nbs SBEAM)" 0.0022
    nb-geom -cell 100 -detpixels 32 -adxv -o plan.nbs
    approx "$(plan_key plan.nbs XBEAM)" 0.00165
    approx "$(plan_key plan.nbs YBEAM)" 0.00155
}

@test "nb-geom: under XDS -Xbeam does not move the detector, -ORGX/-ORGY do" {
    local plain moved
    plain=$(geom PIX0 -xds)
    approx "$plain" "-0.0016 -0.0016 0.1"
    moved=$(geom PIX0 -xds -Xbeam 1 -Ybeam 1 2>/dev/null)
    approx "$moved" "$plain"
    nb-geom -cell 100 -detpixels 32 -xds -ORGX 10 -ORGY 20 -o plan.nbs
    approx "$(plan_key plan.nbs ORGX)" 10
    approx "$(plan_key plan.nbs ORGY)" 20
    approx "$(plan_key plan.nbs FCLOSE)" 0.00095
    approx "$(plan_key plan.nbs SCLOSE)" 0.00195
    approx "$(plan_key plan.nbs PIX0)" "-0.00095 -0.00195 0.1"
}

@test "nb-geom: -ORGX/-ORGY under DIALS" {
    nb-geom -cell 100 -detpixels 256 -pixel 0.2 -dials -ORGX 120 -ORGY 130 -distance 110 -o plan.nbs 2>/dev/null
    approx "$(plan_key plan.nbs ORGX)" 120
    approx "$(plan_key plan.nbs ORGY)" 130
    [ "$(plan_key plan.nbs PIVOT)" = sample ]
}

# ---- rotations ---------------------------------------------------------------

@test "nb-geom: detector rotations and -twotheta move pix0 and the axes" {
    local plain
    plain=$(geom PIX0)
    approx "$plain" "0.1 0.0017 -0.0017"
    local moved
    for moved in "-detector_rotx 5" "-detector_roty 5" "-detector_rotz 5" "-twotheta 10"; do
        run ! approx "$(geom PIX0 $moved)" "$plain"
    done
    approx "$(geom TWOTHETA -twotheta 10)" "$(deg 10)"
    approx "$(geom DETECTOR_ROTY -detector_roty 90)" "$(deg 90)"
    approx "$(geom FDET -detector_roty 90)" "1 0 0"
}

@test "nb-geom: -twotheta under MOSFLM reports the perpendicular distance (docs/physics.md 2.3)" {
    nb-geom -cell 100 -detpixels 64 -twotheta 10 -o plan.nbs 2>/dev/null
    approx "$(plan_key plan.nbs DISTANCE)" 0.0984808 1e-6
    approx "$(plan_key plan.nbs SBEAM)" 0.0035638 1e-5
    approx "$(plan_key plan.nbs FBEAM)" 0.0033
}

@test "nb-geom: the golden tilted detector (docs/physics.md 2.3)" {
    nb-geom -cell 100 -distance 100 -detpixels 1024 -Xbeam 61.2 -Ybeam 61.2 -detector_rotx 5 \
        -detector_roty 3 -detector_rotz 2 -twotheta 15 -o plan.nbs 2>/dev/null
    approx "$(plan_key plan.nbs FDET)" "0.0311948 -0.0966502 0.994829" 1e-6
    approx "$(plan_key plan.nbs SDET)" "-0.22854 -0.969636 -0.0870363" 1e-6
    approx "$(plan_key plan.nbs ODET)" "0.973035 -0.224643 -0.052336" 1e-6
    approx "$(plan_key plan.nbs PIX0)" "0.112087 0.0653100 -0.0556023" 1e-5
}

# ---- beam ---------------------------------------------------------------------

@test "nb-geom: -lambda, -wavelength, -energy set LAMBDA0" {
    approx "$(geom LAMBDA0 -lambda 1.5)" 1.5e-10
    approx "$(geom LAMBDA0 -wavelength 2)" 2e-10
    approx "$(geom LAMBDA0 -wave 2.5)" 2.5e-10
    approx "$(geom LAMBDA0 -energy 12398.42)" 1e-10
    approx "$(geom LAMBDA0 -energy 6199.21)" 2e-10
    # last one wins
    approx "$(geom LAMBDA0 -energy 12398.42 -lambda 3)" 3e-10
}

@test "nb-geom: -dispersion/-dispsteps give one source per wavelength" {
    nb-geom -cell 100 -detpixels 32 -dispersion 1 -dispsteps 3 -o plan.nbs
    [ "$(plan_key plan.nbs SOURCES)" = 3 ]
    [ "$(plan_key plan.nbs DISPSTEPS)" = 3 ]
    approx "$(plan_key plan.nbs DISPERSION)" 0.01
}

@test "nb-geom: -divergence/-divsteps: a round grid by default, square with -square_div" {
    [ "$(geom SOURCES -divergence 1 -divsteps 3)" = 5 ]
    [ "$(geom SOURCES -divergence 1 -divsteps 3 -square_div)" = 9 ]
    [ "$(geom SOURCES -divergence 1 -divsteps 3 -dispersion 1 -dispsteps 2)" = 10 ]
    [ "$(geom SOURCES -hdivrange 1 -hdivsteps 3)" = 3 ]
    [ "$(geom HDIVSTEPS -hdivrange 1 -hdivsteps 3)" = 3 ]
    approx "$(geom HDIVRANGE -divergence 2 -divsteps 3)" 0.002
}

@test "nb-geom: -sourcefile: one source per line; comments and blank lines skipped" {
    [ "$(geom SOURCES -sourcefile "$NB_INPUTS/sources.txt")" = 3 ]
    printf '# a comment\n-10 0 0\n\n-10 0.1 0 2 1.1e-10\n' > two.txt
    [ "$(geom SOURCES -sourcefile two.txt)" = 2 ]
}

@test "nb-geom: polarization: -polar, -nopolar (last wins)" {
    approx "$(geom KAHN_FACTOR -polar 0.9)" 0.9
    [ "$(geom NOPOLAR -polar 0.9)" = 0 ]
    [ "$(geom NOPOLAR -nopolar)" = 1 ]
    [ "$(geom NOPOLAR -nopolar -polar 0.5)" = 0 ]
    approx "$(geom KAHN_FACTOR)" 0
}

@test "nb-geom: -fluence; -flux with -exposure and -beamsize" {
    approx "$(geom FLUENCE -fluence 1e24)" 1e24
    approx "$(geom FLUENCE -flux 1e12 -exposure 2 -beamsize 0.1)" 2e20 1e-12
    approx "$(geom FLUX -flux 1e12 -exposure 2 -beamsize 0.1)" 1e12 1e-12
    approx "$(geom EXPOSURE -exposure 3)" 3
    approx "$(geom BEAMSIZE -beamsize 0.2)" 2e-4
}

# ---- crystal -------------------------------------------------------------------

@test "nb-geom: -cell: missing lengths copy a, missing angles are 90" {
    [ "$(geom UNIT_CELL)" = "100 100 100 90 90 90" ]
    # the reference's regeneration bends triclinic angles a little (golden
    # triclinic-misset.log: "Unit Cell: 70 80 90 75.0391 85.0136 95.0081")
    nb-geom -cell 70 80 90 75 85 95 -detpixels 32 -o plan.nbs
    approx "$(plan_key plan.nbs UNIT_CELL)" "70 80 90 75.0391 85.0136 95.0081" 1e-6
    nb-geom -cell 70 80 -detpixels 32 -o plan.nbs
    approx "$(plan_key plan.nbs UNIT_CELL)" "70 80 70 90 90 90" 1e-8
}

@test "nb-geom: -mat reads a MOSFLM matrix" {
    nb-geom -mat "$NB_INPUTS/A.mat" -lambda 1 -detpixels 32 -o plan.nbs
    approx "$(plan_key plan.nbs UNIT_CELL)" "42 47 52 80 95 105" 1e-7
    [ "$(geom CONVENTION -matrix "$NB_INPUTS/A.mat")" = mosflm ]
}

@test "nb-geom: -N, -Na/-Nb/-Nc, -xtalsize" {
    [ "$(geom NA -N 3)" = 3 ]
    [ "$(geom NB -N 3)" = 3 ]
    [ "$(geom NC -N 3)" = 3 ]
    [ "$(geom NA -Na 2 -Nb 3 -Nc 4)" = 2 ]
    [ "$(geom NB -Na 2 -Nb 3 -Nc 4)" = 3 ]
    [ "$(geom NC -Na 2 -Nb 3 -Nc 4)" = 4 ]
    [ "$(geom NA -xtalsize 0.001)" = 100 ]
    [ "$(geom NC -xtalsize 0.001)" = 100 ]
    [ "$(geom NA -xtal_x 0.0005)" = 50 ]
    [ "$(geom NA -N 0)" = 1 ]
}

@test "nb-geom: crystal shapes" {
    [ "$(geom SHAPE)" = square ]
    [ "$(geom SHAPE -round_xtal)" = round ]
    [ "$(geom SHAPE -square_xtal)" = square ]
    [ "$(geom SHAPE -gauss_xtal)" = gauss ]
    [ "$(geom SHAPE -tophat_spots)" = tophat ]
    [ "$(geom SHAPE -binary_spots)" = tophat ]
    [ "$(geom SHAPE -round_xtal -gauss_xtal)" = gauss ]
    approx "$(geom FUDGE -fudge 1.2)" 1.2
}

@test "nb-geom: -mosaic/-mosaic_domains/-mosaic_seed" {
    run_nb nb-geom -cell 100 -detpixels 32 -mosaic 1 -o plan.nbs
    expect_has "warning: finite mosaicity with only one domain! upping to 10 mosaic domains"
    [ "$(plan_key plan.nbs MOSAIC_DOMAINS)" = 10 ]
    approx "$(plan_key plan.nbs MOSAIC_SPREAD)" "$(deg 1)"
    [ "$(geom MOSAIC_DOMAINS -mosaic 1 -mosaic_domains 5)" = 5 ]
    [ "$(geom MOSAIC_DOMAINS -mosaic_spread 1 -mosaic_dom 4)" = 4 ]
    run_nb nb-geom -cell 100 -detpixels 32 -mosaic_domains 5 -o plan.nbs
    expect_has "warning: no mosaic spread specified"
    [ "$(plan_key plan.nbs MOSAIC_DOMAINS)" = 1 ]
    [ "$(geom MOSAIC_SEED)" = -12345678 ]
    [ "$(geom MOSAIC_SEED -mosaic_seed 42)" = -42 ]
}

@test "nb-geom: -mosaic_seed changes the domains, the same seed gives the same plan payload" {
    # every seed given: the plan records -misset_seed too, whose default is the
    # time-based noise seed, so two runs a second apart would differ by it.  It
    # comes last: followed by two more arguments it would also set a fixed
    # misset (the reference's quirk)
    local base="-cell 100 -detpixels 32 -mosaic 1 -mosaic_domains 3 -seed 1"
    nb-geom $base -mosaic_seed 7 -misset_seed 1 > a.nbs
    nb-geom $base -mosaic_seed 7 -misset_seed 1 > b.nbs
    nb-geom $base -mosaic_seed 8 -misset_seed 1 > c.nbs
    cmp a.nbs b.nbs
    run ! cmp -s a.nbs c.nbs
    [ "$(plan_key a.nbs MISSET)" = "0 0 0" ]
}

@test "nb-geom: -misset angles; -misset random with -misset_seed is reproducible" {
    approx "$(geom MISSET -misset 10 5 3)" "$(deg 10 5 3)"
    local a1 a2 b
    a1=$(geom CELL_A -misset_seed 1 -misset random)
    a2=$(geom CELL_A -misset_seed 1 -misset random)
    b=$(geom CELL_A -misset_seed 2 -misset random)
    [ -n "$a1" ]
    [ "$a1" = "$a2" ]
    [ "$a1" != "$b" ]
    [ "$a1" != "$(geom CELL_A)" ]
    # the seed may come after -misset random too, when it is not followed by
    # two more arguments (that would be the reference's fixed-misset quirk)
    nb-geom -cell 100 100 100 90 90 90 -detpixels 32 -o late.nbs -misset random -misset_seed 1
    [ "$(plan_key late.nbs CELL_A)" = "$a1" ]
    [ "$(geom MISSET_SEED -misset_seed 1)" = -1 ]
}

@test "nb-geom: -misset_seed followed by two more arguments is also a fixed misset (reference quirk), with a warning" {
    run_nb nb-geom -cell 100 -misset_seed 5 -N 3 -detpixels 32 -o plan.nbs
    expect_status 0
    expect_has "warning: -misset_seed also set a fixed misset of 5 0 3 degrees"
    approx "$(plan_key plan.nbs MISSET)" "$(deg 5 0 3)"
}

@test "nb-geom: -water, -dmin" {
    approx "$(geom WATER_SIZE -water 5)" 5e-6
    approx "$(geom DMIN -dmin 2.5)" 2.5e-10
    approx "$(geom DMIN)" 0
}

# ---- sampling ------------------------------------------------------------------

@test "nb-geom: -phi/-osc/-phisteps/-phistep" {
    nb-geom -cell 100 -detpixels 32 -phi 10 -osc 2 -phisteps 4 -o plan.nbs
    [ "$(plan_key plan.nbs PHISTEPS)" = 4 ]
    approx "$(plan_key plan.nbs PHISTEP)" "$(deg 0.5)"
    approx "$(plan_key plan.nbs PHI0)" "$(deg 10)"
    approx "$(plan_key plan.nbs OSC)" "$(deg 2)"
    [ "$(geom PHISTEPS -osc 2)" = 2 ]
    [ "$(geom PHISTEPS -osc 2 -phistep 0.5)" = 4 ]
    [ "$(geom PHISTEPS -phisteps 0)" = 1 ]
}

@test "nb-geom: -oversample, and automatic oversampling from the crystal size" {
    [ "$(geom OVERSAMPLE -oversample 3)" = 3 ]
    [ "$(geom OVERSAMPLE)" = 1 ]
    [ "$(geom OVERSAMPLE -N 50)" = 15 ]
    [ "$(geom OVERSAMPLE -N 50 -lambda 0.5)" = 30 ]
    [ "$(geom OVERSAMPLE -oversample 0 -N 50)" = 15 ]
    run_nb nb-geom -cell 100 -detpixels 32 -N 50 -oversample 1 -o plan.nbs
    expect_has "recommend -oversample 15"
    [ "$(geom OVERSAMPLE_THICK -oversample_thick)" = 1 ]
    [ "$(geom OVERSAMPLE_POLAR -oversample_polar)" = 1 ]
    [ "$(geom OVERSAMPLE_OMEGA -oversample_omega)" = 1 ]
}

@test "nb-geom: -roi" {
    nb-geom -cell 100 -detpixels 32 -roi 1 20 3 25 -o plan.nbs
    [ "$(plan_key plan.nbs ROI_XMIN)" = 1 ]
    [ "$(plan_key plan.nbs ROI_XMAX)" = 20 ]
    [ "$(plan_key plan.nbs ROI_YMIN)" = 3 ]
    [ "$(plan_key plan.nbs ROI_YMAX)" = 25 ]
    [ "$(geom ROI_XMAX)" = 32 ]
    [ "$(geom ROI_YMIN)" = 0 ]
}

@test "nb-geom: -detector_thick/-detector_abs/-thicksteps" {
    nb-geom -cell 100 -detpixels 32 -detector_thick 450 -detector_abs 320 -thicksteps 3 -o plan.nbs
    approx "$(plan_key plan.nbs DETECTOR_THICK)" 4.5e-4
    [ "$(plan_key plan.nbs DETECTOR_THICKSTEPS)" = 3 ]
    approx "$(plan_key plan.nbs DETECTOR_MU)" 3125
    approx "$(geom DETECTOR_MU -detector_absorb 320)" 3125
    [ "$(geom DETECTOR_THICKSTEPS -detector_thick 450 -detector_thicksteps 5)" = 5 ]
    # inf: no absorption, and any thickness given before is dropped
    approx "$(geom DETECTOR_MU -detector_thick 450 -detector_abs inf)" 0
    approx "$(geom DETECTOR_THICK -detector_thick 450 -detector_abs inf)" 0
    run_nb nb-geom -cell 100 -detpixels 32 -detector_thick 100 -o plan.nbs
    expect_has "warning: setting detector attenuation coefficient"
    run_nb nb-geom -cell 100 -detpixels 32 -detector_abs -3
    expect_status 2
}

# ---- the sensor's material: dxtbx's attenuation (docs/physics.md 8.3) -----------

@test "nb-geom: -detector_material sets DETECTOR_MU to the material's at the wavelength, and DETECTOR_MATERIAL" {
    nb-geom -cell 100 -detpixels 32 -detector_thick 450 -detector_material Si -o plan.nbs
    [ "$(plan_key plan.nbs DETECTOR_MATERIAL)" = Si ] || false
    approx "$(plan_key plan.nbs DETECTOR_THICK)" 4.5e-4
    # cctbx: ac.get_table('Si').mu_at_angstrom(1.0) = 42.07985875566818 /cm
    approx "$(plan_key plan.nbs DETECTOR_MU)" 4207.985875566818
    # the same sensor given by its attenuation depth (cctbx's lambda_at_angstrom,
    # 1/mu = 237.6434... um): the same DETECTOR_MU
    depth=$(awk 'BEGIN { printf "%.17g", 1e4 / 42.07985875566818 }')
    approx "$(geom DETECTOR_MU -detector_thick 450 -detector_abs "$depth")" "$(plan_key plan.nbs DETECTOR_MU)"
    # NXmx's spelling is Si, written as dxtbx spells it
    [ "$(geom DETECTOR_MATERIAL -detector_thick 450 -detector_material Silicon)" = Si ] || false
    [ "$(geom DETECTOR_MATERIAL -detector_thick 450 -detector_material CdTe)" = CdTe ] || false
    [ "$(geom DETECTOR_MATERIAL -detector_thick 450 -detector_material GaAs)" = GaAs ] || false
    # the beam's wavelength, on each side of CdTe's Cd K edge (26.711 keV):
    # cctbx 182.39605929702464 and 61.017141040210255 /cm
    approx "$(geom DETECTOR_MU -detector_thick 450 -detector_material CdTe -lambda 0.4641)" 18239.605929702464
    approx "$(geom DETECTOR_MU -detector_thick 450 -detector_material CdTe -lambda 0.4643)" 6101.7141040210255
    # no material named: no key, and no warning about the material
    nb-geom -cell 100 -detpixels 32 -detector_thick 450 -detector_abs 320 -o abs.nbs
    run ! grep -aq DETECTOR_MATERIAL abs.nbs
    # -v logs it beside the sensor's thickness, with no 1/thickness warning
    run_nb nb-geom -cell 100 -detpixels 32 -detector_thick 450 -detector_material Si -v
    expect_status 0
    expect_has "  sensor is 0.00045 m thick in 2 layers with mu= 4207.99"
    expect_has "  sensor material is Si: mu= 4207.99 /m at 1e-10 m, as dxtbx computes it"
    expect_lacks "warning"
}

@test "nb-geom: -detector_material's usage errors" {
    run_nb nb-geom -cell 100 -detector_thick 450 -detector_material Ge
    expect_status 2
    expect_has "nb-geom: option -detector_material: expected Si (or Silicon), CdTe or GaAs, got 'Ge'"
    run_nb nb-geom -cell 100 -detector_thick 450 -detector_material si
    expect_status 2
    expect_has "got 'si'"
    run_nb nb-geom -cell 100 -detector_material Si
    expect_status 2
    expect_has "nb-geom: -detector_material Si needs the sensor's thickness: give -detector_thick UM (> 0)"
    run_nb nb-geom -cell 100 -detector_thick 0 -detector_material CdTe
    expect_status 2
    expect_has "-detector_material CdTe needs the sensor's thickness"
    run_nb nb-geom -cell 100 -detector_thick 450 -detector_material Si -detector_abs 300
    expect_status 2
    expect_has "nb-geom: -detector_material and -detector_abs cannot be given together"
    run_nb nb-geom -cell 100 -detector_abs inf -detector_thick 450 -detector_material Si
    expect_status 2
    expect_has "-detector_material and -detector_abs cannot be given together"
    # outside cctbx's table (1 keV up to 20 MeV): an error, not an extrapolation
    run_nb nb-geom -cell 100 -detector_thick 450 -detector_material GaAs -lambda 13
    expect_status 2
    expect_has "nb-geom: -detector_material GaAs: GaAs has no attenuation coefficient at 13 A"
    run_nb nb-geom -cell 100 -detector_thick 450 -detector_material
    expect_status 2
    expect_has "option -detector_material needs a value"
}

@test "nb-geom: -detector_material's DETECTOR_MU is cctbx's mu_at_angstrom (as dxtbx takes it)" {
    local py=${NB_TEST_PYTHON:-/usr/bin/python3}
    "$py" -c 'from cctbx.eltbx import attenuation_coefficient' 2>/dev/null ||
        skip "cctbx is not installed ($py -c 'from cctbx.eltbx import attenuation_coefficient' fails)"
    # 5 wavelengths, none at an edge: 1/m
    "$py" -c '
from cctbx.eltbx import attenuation_coefficient as ac
for m in ("Si", "CdTe", "GaAs"):
    for l in ("0.5", "0.9795", "1.2", "1.5418", "2.5"):
        print(m, l, repr(ac.get_table(m).mu_at_angstrom(float(l)) * 100))
' >want.txt
    [ "$(wc -l <want.txt)" -eq 15 ] || false
    while read -r m l want; do
        approx "$(geom DETECTOR_MU -detector_thick 320 -detector_material "$m" -lambda "$l")" "$want"
    done <want.txt
    # -energy: the wavelength it gives (12398.42 / E A), as dxtbx would see it
    want=$("$py" -c 'from cctbx.eltbx import attenuation_coefficient as ac; print(repr(ac.get_table("CdTe").mu_at_angstrom(12398.42 / 20000) * 100))')
    approx "$(geom DETECTOR_MU -detector_thick 320 -detector_material CdTe -energy 20000)" "$want"
}

@test "nb-geom: -detector_material with -panels: every panel's sensor is the material's" {
    nb-geom -q -panels "$NB_ROOT/examples/tiles.geom" -cell 78 -detector_thick 450 -detector_material GaAs -o plan.nbs
    [ "$(plan_key plan.nbs DETECTOR_MATERIAL)" = GaAs ] || false
    # cctbx: ac.get_table('GaAs').mu_at_angstrom(1.0) = 800.7998629661656 /cm
    approx "$(plan_key plan.nbs DETECTOR_MU)" 80079.98629661656
    for i in 1 2 3; do
        approx "$(plan_key plan.nbs "PANEL$i.DETECTOR_MU")" 80079.98629661656
        approx "$(plan_key plan.nbs "PANEL$i.DETECTOR_THICK")" 4.5e-4
    done
}

# ---- -v with -panels: every panel's geometry ------------------------------------

# the numbers after "KEY= " in panel I's block of an nb-geom -v log
panel_log() {
    awk -v p="  panel $2:" -v k="    $3= " '
        index($0, "  panel ") == 1 { on = index($0, p) == 1 }
        on && index($0, k) == 1 { print substr($0, length(k) + 1) }' "$1"
}

@test "nb-geom -v with -panels logs each panel: size, vectors, pix0, distance, beam centre, sensor, DIALS origin" {
    nb-geom -panels "$NB_ROOT/examples/tiles.geom" -cell 78 78 37 90 90 90 -lambda 1 -N 10 \
        -detector_thick 450 -detector_material Si -v -o plan.nbs 2>log.txt
    grep -q "^  detector: 4 panels from -panels$" log.txt
    [ "$(grep -c '^  panel [0-3]: 64x48 pixels of 0.0002 m$' log.txt)" -eq 4 ] || false
    [ "$(grep -c '^    sensor is 0.00045 m thick in 2 layers with mu= 4207.99$' log.txt)" -eq 4 ] || false
    # the flags' one-panel stand-in is not logged as the detector
    run ! grep -q "DIRECTION_OF_DETECTOR_X-AXIS" log.txt
    run ! grep -q "^  pix0_vector=" log.txt
    for i in 0 1 2 3; do
        local pre=""
        [ "$i" -eq 0 ] || pre="PANEL$i."
        approx "$(panel_log log.txt "$i" fdet)" "$(plan_key plan.nbs "${pre}FDET")" 1e-5
        approx "$(panel_log log.txt "$i" sdet)" "$(plan_key plan.nbs "${pre}SDET")" 1e-5
        approx "$(panel_log log.txt "$i" odet)" "$(plan_key plan.nbs "${pre}ODET")" 1e-5
        approx "$(panel_log log.txt "$i" pix0_vector)" "$(plan_key plan.nbs "${pre}PIX0")" 1e-9
    done
    # tile 1's fast axis is the file's x (the plan's z), its slow axis the
    # file's y tilted by 5 degrees; tile 3 sits 2 mm further back, untilted
    [ "$(panel_log log.txt 1 fdet)" = "0 0 1" ] || false
    [ "$(panel_log log.txt 1 sdet)" = "-0.0871557 -0.996195 0" ] || false
    [ "$(panel_log log.txt 3 pix0_vector)" = "0.082 -0.0004 0.0004" ] || false
    grep -q "^    distance=82 close_distance=82 (mm)$" log.txt
    grep -q "^    Fbeam=-0.0004 Sbeam=-0.0004 (pixel -2 -2, off the panel)$" log.txt
    grep -q "^    dials origin= 0.4 -0.4 -82$" log.txt
}

@test "nb-geom -v with a one-panel file logs its panel, the beam centre on it" {
    cat >one.geom <<'GEOM'
res = 5000
clen = 0.08
p0/min_fs = 0
p0/max_fs = 63
p0/min_ss = 0
p0/max_ss = 47
p0/corner_x = -32
p0/corner_y = -24
p0/fs = +1.0x
p0/ss = +1.0y
GEOM
    run_nb nb-geom -panels one.geom -cell 78 -v
    expect_status 0
    expect_has "  detector: 1 panel from -panels"
    expect_has "  panel 0: 64x48 pixels of 0.0002 m"
    expect_has "    pix0_vector= 0.08 0.0048 -0.0064"
    expect_has "    distance=80 close_distance=80 (mm)"
    expect_has "    Fbeam=0.0064 Sbeam=0.0048 (pixel 32 24, on the panel)"
    expect_has "    Fclose=0.0064 Sclose=0.0048 ORGX=32.5 ORGY=24.5"
    expect_has "    dials origin= -6.4 4.8 -80"
    expect_lacks "panel 1:"
}

@test "nb-geom: -interpolate/-nointerpolate and the automatic choice" {
    [ "$(geom INTERPOLATE -interpolate -N 10)" = 1 ]
    [ "$(geom INTERPOLATE -nointerpolate)" = 0 ]
    [ "$(geom INTERPOLATE -N 5)" = 0 ]
    [ "$(geom INTERPOLATE -N 2)" = 1 ]
    [ "$(geom INTERPOLATE -Na 5 -Nb 5 -Nc 2)" = 1 ]
}

@test "nb-geom: -curved_det and -point_pixel" {
    [ "$(geom CURVED_DETECTOR)" = 0 ]
    [ "$(geom CURVED_DETECTOR -curved_det 1)" = 1 ]
    [ "$(geom CURVED_DETECTOR -curved_det -point_pixel)" = 1 ]
    [ "$(geom POINT_PIXEL -curved_det -point_pixel)" = 1 ]
}

# ---- SMV headers: -img and -mask -------------------------------------------------

@test "nb-geom: -img takes the detector from an SMV header; later flags override it" {
    nb-geom -cell 100 -img "$NB_INPUTS/header.img" -o plan.nbs
    [ "$(plan_key plan.nbs FPIXELS)" = 192 ]
    [ "$(plan_key plan.nbs SPIXELS)" = 160 ]
    approx "$(plan_key plan.nbs PIXEL_SIZE)" 1.5e-4
    approx "$(plan_key plan.nbs DISTANCE)" 0.12
    approx "$(plan_key plan.nbs LAMBDA0)" 1.3e-10
    approx "$(plan_key plan.nbs XBEAM)" 0.013
    approx "$(plan_key plan.nbs YBEAM)" 0.011
    approx "$(plan_key plan.nbs PHI0)" "$(deg 5)"
    nb-geom -cell 100 -distance 80 -img "$NB_INPUTS/header.img" -lambda 2 -o plan.nbs
    approx "$(plan_key plan.nbs DISTANCE)" 0.08
    approx "$(plan_key plan.nbs LAMBDA0)" 2e-10
    [ "$(plan_key plan.nbs FPIXELS)" = 192 ]
}

@test "nb-geom: -mask records the mask and its header geometry" {
    nb-geom -cell 100 -mask "$NB_INPUTS/mask.img" -o plan.nbs
    [ "$(plan_key plan.nbs FPIXELS)" = 256 ]
    [ "$(plan_key plan.nbs SPIXELS)" = 256 ]
    [ "$(plan_key plan.nbs ARRAY.mask | cut -d' ' -f1-2)" = "u8 65536" ]
}

@test "nb-geom: a mask that does not fit the detector is a usage error; -img beats -mask" {
    run_nb nb-geom -cell 100 -mask "$NB_INPUTS/mask.img" -detpixels 32
    expect_status 2
    expect_has "is 256 x 256 pixels but the detector is 32 x 32"
    # the -img header is read after the -mask header, whatever the order
    run_nb nb-geom -cell 100 -img "$NB_INPUTS/header.img" -mask "$NB_INPUTS/mask.img"
    expect_status 2
    expect_has "but the detector is 192 x 160"
}

# ---- requests for later stages ----------------------------------------------------

@test "nb-geom: output and noise requests are recorded in the plan" {
    [ "$(geom FLOATFILE -floatfile f.bin)" = f.bin ]
    [ "$(geom FLOATFILE -floatimage g.bin)" = g.bin ]
    [ "$(geom INTFILE -intfile i.img)" = i.img ]
    [ "$(geom PGMFILE -pgmfile p.pgm)" = p.pgm ]
    [ "$(geom SEED -seed 7)" = -7 ]
    approx "$(geom ADC -adc 10)" 10
    [ "$(geom WRITE_PGM -nopgm)" = 0 ]
    [ "$(geom CALCULATE_NOISE -nonoise)" = 0 ]
    approx "$(geom PGM_SCALE -pgmscale 3)" 3
    [ -z "$(geom FLOATFILE)" ]
}

@test "nb-geom: structure-factor requests are recorded in the plan" {
    [ "$(geom HKL_FILE -hkl x.hkl)" = x.hkl ]
    approx "$(geom DEFAULT_F -default_F 3)" 3
    [ "$(geom DUMP_FILE -dump y.bin)" = y.bin ]
    [ "$(geom DUMP_FILE -dumpfile z.bin)" = z.bin ]
    [ "$(geom DUMP_IMPLICIT -dump y.bin)" = 0 ]
}

@test "nb-geom: --reference-defaults requests the reference's files" {
    nb-geom --reference-defaults -cell 100 -detpixels 32 -o plan.nbs
    [ "$(plan_key plan.nbs FLOATFILE)" = floatimage.bin ]
    [ "$(plan_key plan.nbs INTFILE)" = intimage.img ]
    [ "$(plan_key plan.nbs NOISEFILE)" = noiseimage.img ]
    [ "$(plan_key plan.nbs PGMFILE)" = image.pgm ]
    [ "$(plan_key plan.nbs DUMP_FILE)" = Fdump.bin ]
    [ "$(plan_key plan.nbs DUMP_IMPLICIT)" = 1 ]
    nb-geom --reference-defaults -cell 100 -detpixels 32 -floatfile mine.bin -o plan.nbs
    [ "$(plan_key plan.nbs FLOATFILE)" = mine.bin ]
}

@test "nb-geom: -precision and the kernel requests" {
    [ "$(geom PRECISION_DOUBLE -precision double)" = 1 ]
    [ "$(geom PRECISION_DOUBLE -precision single)" = 0 ]
    [ "$(geom PRINTOUT -printout)" = 1 ]
    [ "$(geom PRINTOUT_FPIXEL -printout_pixel 3 4)" = 3 ]
    [ "$(geom PRINTOUT_SPIXEL -printout_pixel 3 4)" = 4 ]
    [ "$(geom PROGRESS -noprogress)" = 0 ]
}

@test "nb-geom: the command line is recorded" {
    nb-geom -cell 100 -detpixels 32 -o plan.nbs
    [ "$(plan_key plan.nbs COMMAND)" = "nb-geom -cell 100 -detpixels 32 -o plan.nbs" ]
}

# ---- warnings the reference would not give -----------------------------------------

@test "nb-geom: -twotheta_axis overriding an earlier -twotheta warns" {
    run_nb nb-geom -cell 100 -detpixels 32 -twotheta 8 -twotheta_axis 0 1 0 -o plan.nbs
    expect_status 0
    expect_has "nb-geom: warning: -twotheta_axis also sets the two-theta angle to 0 degrees"
    approx "$(plan_key plan.nbs TWOTHETA)" 0
    [ "$(plan_key plan.nbs CONVENTION)" = custom ]
    run_nb nb-geom -cell 100 -detpixels 32 -twotheta_axis 1 0 0 -o plan.nbs
    expect_has "also sets the two-theta angle to 1 degrees"
    approx "$(plan_key plan.nbs TWOTHETA)" "$(deg 1)"
}

@test "nb-geom: -twotheta after -twotheta_axis chooses the angle, silently" {
    run_nb nb-geom -cell 100 -detpixels 32 -twotheta_axis 0 1 0 -twotheta 8 -o plan.nbs
    expect_status 0
    [ -z "$output" ] || { echo "stderr: $output"; return 1; }
    approx "$(plan_key plan.nbs TWOTHETA)" "$(deg 8)"
    approx "$(plan_key plan.nbs TWOTHETA_AXIS)" "0 1 0"
}

@test "nb-geom: -pix0_vector warns that its values are ignored" {
    run_nb nb-geom -cell 100 -detpixels 32 -pix0_vector 1 2 3 -o plan.nbs
    expect_status 0
    expect_has "nb-geom: warning: -pix0_vector selects the custom convention but its values are ignored"
    [ "$(plan_key plan.nbs CONVENTION)" = custom ]
    run_nb nb-geom -cell 100 -detpixels 32 -pix0_vector_mm 1 2 3 -o plan.nbs
    expect_has "-pix0_vector_mm selects the custom convention"
}

@test "nb-geom: -curved_det as the last argument is ignored with a warning" {
    run_nb nb-geom -cell 100 -detpixels 32 -o plan.nbs -curved_det
    expect_status 0
    expect_has "nb-geom: warning: -curved_det as the last argument is ignored"
    [ "$(plan_key plan.nbs CURVED_DETECTOR)" = 0 ]
    run_nb nb-geom -cell 100 -detpixels 32 -curved_det 1 -o plan.nbs
    [ -z "$output" ]
}

@test "nb-geom: flags without effect say so" {
    for a in "-density 1" "-MW 1" "-coherent" "-stolout x.txt"; do
        run_nb nb-geom -cell 100 -detpixels 32 $a -o plan.nbs
        expect_status 0
        expect_has "nb-geom: warning: ${a%% *}"
    done
    printf '0.1 1\n0.2 2\n' > stol.txt
    run_nb nb-geom -cell 100 -detpixels 32 -stol stol.txt -o plan.nbs
    expect_status 0
    expect_has "warning: 'stol.txt' is read but not used"
}

@test "nb-geom: a non-unit -odet_vector is regenerated with a warning" {
    run_nb nb-geom -cell 100 -detpixels 32 -odet_vector 1 1 0 -o plan.nbs
    expect_status 0
    expect_has "warning: auto-generating odet_vector"
}

# ---- -v ------------------------------------------------------------------------------

@test "nb-geom -v prints the reference's log on stderr and only the stream on stdout" {
    run_nb nb-geom -v -cell 100 -detpixels 32
    expect_status 0
    [ "${lines[0]}" = "mosflm convention selected." ]
    expect_has "pivoting detector around direct beam spot"
    expect_has "  DIRECTION_OF_DETECTOR_X-AXIS= 0 0 1"
    expect_has "  DIRECTION_OF_DETECTOR_Y-AXIS= 0 -1 0"
    expect_has "  DIRECTION_OF_DETECTOR_Z-AXIS= 1 0 0"
    expect_has "  INCIDENT_BEAM_DIRECTION= 1 0 0"
    expect_has "Unit Cell: 100 100 100 90 90 90"
    expect_has "  created a total of 1 sources:"
    expect_has "  distance=0.1 detsize=0.0032x0.0032  pixel=0.0001 meters (32x32 pixels)"
    expect_has "  Xbeam=0.00165 Ybeam=0.00165"
    # stdout: an nb stream from its first byte, no log text in it
    [ "$(head -c 4 stdout.bin | tail -c 3)" = NBS ]
    run ! grep -a -q 'convention selected' stdout.bin
    [ "$(plan_key stdout.bin FPIXELS)" = 32 ]
}

@test "nb-geom -v under XDS logs the sample pivot and its axes" {
    run_nb nb-geom -v -xds -cell 100 -detpixels 32
    expect_status 0
    expect_has "xds convention selected."
    expect_has "pivoting detector around sample"
    expect_has "  DIRECTION_OF_DETECTOR_X-AXIS= 1 0 0"
    expect_has "  INCIDENT_BEAM_DIRECTION= 0 0 1"
}

@test "nb-geom -v logs the automatic choices" {
    run_nb nb-geom -v -cell 100 -detpixels 32 -N 50 -dispersion 1 -dispsteps 3
    expect_status 0
    expect_has "auto-selected 15-fold oversampling"
    expect_has "auto-selected no interpolation"
    expect_has "  created a total of 3 sources:"
}

@test "nb-geom without -v is silent on success" {
    run_nb nb-geom -cell 100 -detpixels 32
    expect_status 0
    [ -z "$output" ]
    [ -s stdout.bin ]
}
