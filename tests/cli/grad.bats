#!/usr/bin/env bats
# nb-sim --grad: derivative records after each image (GRAD_OF, UNITS), what
# nb-noise and nb-convert do with them, and the refusals.  The derivatives'
# accuracy on many configurations is tests/unit/test_grad.c's; here one check
# end to end against rendered images.

load helper

XTAL="-cell 40 50 60 88 95 91 -misset 10 20 30 -lambda 1 -N 4 -default_F 100 -pixel 1.2 -detpixels 20 -oversample 1"

# correlation of two files of numbers, one per line
corr() {
    paste "$1" "$2" | awk '{ n++; a += $1; b += $2; aa += $1 * $1; bb += $2 * $2; ab += $1 * $2 }
        END { va = aa - a * a / n; vb = bb - b * b / n; printf "%.9f\n", (ab - a * b / n) / sqrt(va * vb) }'
}

@test "grad: one IMAGE record per name after each image, GRAD_OF and UNITS in its header" {
    nb-geom $XTAL -distance 60 -osc 0.5 -nframes 2 -o plan.nbs
    nb-sim -q --grad distance,Na,cell_alpha -o out.nbs plan.nbs
    [ "$(grep -a -c '^GRAD_OF=' out.nbs)" -eq 6 ] || false
    [ "$(nb_key out.nbs GRAD_OF 1)" = distance ] || false
    [ "$(nb_key out.nbs GRAD_OF 2)" = Na ] || false
    [ "$(nb_key out.nbs GRAD_OF 3)" = cell_alpha ] || false
    [ "$(nb_key out.nbs GRAD_OF 4)" = distance ] || false
    [ "$(nb_key out.nbs UNITS 1)" = photons ] || false
    [ "$(nb_key out.nbs UNITS 2)" = photons/mm ] || false
    [ "$(nb_key out.nbs UNITS 3)" = photons/cell ] || false
    [ "$(nb_key out.nbs UNITS 4)" = photons/degree ] || false
    [ "$(nb_key out.nbs FRAME 5)" = 1 ] || false
}

@test "grad: with -precision double the image is the double path's, bit for bit, and nb-convert passes the derivatives over" {
    nb-geom $XTAL -distance 60 -o plan.nbs
    nb-sim -q -precision double --grad distance,twotheta,lambda plan.nbs | nb-convert -q -o with.bin
    nb-sim -q -precision double plan.nbs | nb-convert -q -o plain.bin
    cmp with.bin plain.bin
}

# d/ddistance of the path PRECISION renders against the central difference of
# its images at distance 60 +- 0.01 (a check: the last command's status)
distance_derivative_agrees() {
    nb-geom $XTAL -distance 60 | nb-sim -q -precision "$1" --grad distance | nb-convert -q --grad distance -o d.bin
    nb-geom $XTAL -distance 60.01 | nb-sim -q -precision "$1" | nb-convert -q -o plus.bin
    nb-geom $XTAL -distance 59.99 | nb-sim -q -precision "$1" | nb-convert -q -o minus.bin
    pixels d.bin > d.txt
    paste <(pixels plus.bin) <(pixels minus.bin) | awk '{ printf "%.9g\n", ($1 - $2) / 0.02 }' > fd.txt
    [ "$(awk '$1 != 0' d.txt | wc -l)" -gt 100 ] || return 1
    c=$(corr d.txt fd.txt)
    echo "correlation $c"
    awk -v c="$c" 'BEGIN { exit !(c >= 0.999) }'
}

@test "grad: d/ddistance is the central difference of images rendered at distance +- h" {
    distance_derivative_agrees double
}

@test "grad: nb-noise passes the derivative records through, after their image" {
    nb-geom $XTAL -distance 60 | nb-sim -q --grad Xbeam > grads.nbs
    nb-noise -q -seed 3 grads.nbs > noisy.nbs
    [ "$(grep -a -c '^GRAD_OF=Xbeam' noisy.nbs)" -eq 1 ] || false
    nb-convert -q --grad Xbeam -o before.bin grads.nbs
    nb-convert -q --grad Xbeam -o after.bin noisy.nbs
    cmp before.bin after.bin
}

@test "grad: an unknown or repeated name is a usage error listing the names" {
    nb-geom $XTAL -o plan.nbs
    run_nb nb-sim --grad distance,wavelength plan.nbs
    expect_status 2
    expect_has "unknown parameter 'wavelength'"
    expect_has "lambda"
    expect_has "panel<i>_shift_fast"
    run_nb nb-sim --grad Na,Na plan.nbs
    expect_status 2
    expect_has "'Na' is named twice"
}

@test "grad: a name that does not apply to the plan is an error saying why" {
    nb-geom $XTAL -o plan.nbs
    run_nb nb-sim --grad mosaic plan.nbs
    expect_status 2
    expect_has "no mosaic spread"
    run_nb nb-sim --grad panel1_rot_normal plan.nbs
    expect_status 2
    expect_has "the detector has 1 panel (panel0 .. panel0)"
}

# every name of the table that a one-panel plan without a mosaic spread has
ALL_NAMES="distance,Xbeam,Ybeam,detector_rotx,detector_roty,detector_rotz,twotheta,cell_a,cell_b,cell_c,cell_alpha"
ALL_NAMES+=",cell_beta,cell_gamma,misset_x,misset_y,misset_z,rot_x,rot_y,rot_z,Na,Nb,Nc,lambda,fluence,scale"
ALL_NAMES+=",panel0_shift_fast,panel0_shift_slow,panel0_shift_normal,panel0_rot_fast,panel0_rot_slow,panel0_rot_normal"

# the derivative images of a.nbs and b.nbs (nb-sim --grad output) agree for every name of $1
same_grads() {
    local n
    for n in ${1//,/ }; do
        nb-convert -q --grad "$n" -o "a-$n.bin" "$2"
        nb-convert -q --grad "$n" -o "b-$n.bin" "$3"
        "$NB_ROOT/${BUILD:-build}/tests/nb-imgcmp" --corr 0.99999 --max-rel 1e-4 "a-$n.bin" "b-$n.bin" ||
            { echo "d/d$n differs" >&2; return 1; }
    done
}

@test "grad: a plan from a DIALS experiment list has every parameter, each the derivative of the same plan made from flags" {
    # the list's plan is in nanoBragg's lab frame, its detector pivoting about
    # the beam spot: the flags' plan of MOSFLM's convention (whose XBEAM,
    # YBEAM are the slow and fast axes' where the list's are the fast and
    # slow's: those two are compared crosswise)
    nb-geom -q -cell 40 50 60 88 95 91 -lambda 1 -N 4 -default_F 100 -pixel 0.4 -detpixels 48 -distance 60 \
        -oversample 1 -o flags.nbs
    nb-sim -q flags.nbs | nb-convert -q -o model.expt
    nb-geom -q -expt model.expt -N 4 -default_F 100 -oversample 1 -o expt.nbs
    nb-sim -q -precision double --grad "$ALL_NAMES" -o flags-g.nbs flags.nbs
    nb-sim -q -precision double --grad "$ALL_NAMES" -o expt-g.nbs expt.nbs
    [ "$(grep -a -c '^GRAD_OF=' expt-g.nbs)" -eq 31 ] || false
    run same_grads "${ALL_NAMES//Xbeam,Ybeam,/}" flags-g.nbs expt-g.nbs
    echo "$output"
    expect_status 0
    nb-convert -q --grad Xbeam -o a.bin flags-g.nbs
    nb-convert -q --grad Ybeam -o b.bin expt-g.nbs
    "$NB_ROOT/${BUILD:-build}/tests/nb-imgcmp" --corr 0.99999 --max-rel 1e-4 a.bin b.bin
}

@test "grad: plans from -panels and -img have every parameter, each the derivative of the same plan made from flags" {
    nb-geom -q -dials -cell 40 50 60 88 95 91 -lambda 1 -N 4 -default_F 100 -pixel 0.4 -detpixels 48 -distance 60 \
        -oversample 1 -o flags.nbs
    nb-sim -q flags.nbs | nb-convert -q -o image.img -o panel.geom
    nb-geom -q -panels panel.geom -dials -cell 40 50 60 88 95 91 -lambda 1 -N 4 -default_F 100 -oversample 1 \
        -o panels.nbs
    nb-geom -q -img image.img -dials -cell 40 50 60 88 95 91 -N 4 -default_F 100 -oversample 1 -o img.nbs
    nb-sim -q -precision double --grad "$ALL_NAMES" -o flags-g.nbs flags.nbs
    local n
    for n in panels img; do
        nb-sim -q -precision double --grad "$ALL_NAMES" -o "$n-g.nbs" "$n.nbs"
        [ "$(grep -a -c '^GRAD_OF=' "$n-g.nbs")" -eq 31 ] || false
        run same_grads "$ALL_NAMES" flags-g.nbs "$n-g.nbs"
        echo "$output"
        expect_status 0
    done
}

@test "grad: the derivatives are those of the image's path: the fast path by default, the double path with -precision double" {
    nb-geom $XTAL -distance 60 -o plan.nbs
    nb-sim -q --device cpu --grad distance -o fast.nbs plan.nbs
    [[ "$(nb_key fast.nbs RENDER_PATH 2)" == *-dual ]] || false
    [ "$(nb_key fast.nbs RENDER_PATH 2)" != double-dual ] || false
    [ "$(nb_key fast.nbs PRECISION 2)" = single ] || false
    nb-sim -q --device cpu -precision double --grad distance -o dbl.nbs plan.nbs
    [ "$(nb_key dbl.nbs RENDER_PATH 2)" = double-dual ] || false
    [ "$(nb_key dbl.nbs PRECISION 2)" = double ] || false
    # a plan that asks for the double path (nb-geom -precision double) gets its derivatives
    nb-geom $XTAL -distance 60 -precision double -o dplan.nbs
    nb-sim -q --device cpu --grad distance -o planned.nbs dplan.nbs
    [ "$(nb_key planned.nbs RENDER_PATH 2)" = double-dual ] || false
    # and the fast image under --grad is the fast kernel's
    nb-sim -q --device cpu plan.nbs | nb-convert -q -o fast-plain.bin
    nb-convert -q -o fast-with.bin fast.nbs
    "$NB_ROOT/${BUILD:-build}/tests/nb-imgcmp" --corr 0.9999999 --max-rel 1e-6 fast-plain.bin fast-with.bin
}

@test "grad: the fast path's d/ddistance is the central difference of fast images at distance +- h" {
    distance_derivative_agrees single
}

@test "grad: fractional cell counts render, and d/dNa at a whole N is the difference at N +- h" {
    nb-geom $XTAL -Na 4.5 | nb-sim -q -precision double | nb-convert -q -o half.bin
    nb-geom $XTAL -Na 4 | nb-sim -q -precision double | nb-convert -q -o four.bin
    nb-geom $XTAL -Na 5 | nb-sim -q -precision double | nb-convert -q -o five.bin
    run ! cmp -s half.bin four.bin
    run ! cmp -s half.bin five.bin
    nb-geom $XTAL -Na 4 | nb-sim -q -precision double --grad Na | nb-convert -q --grad Na -o dNa.bin
    nb-geom $XTAL -Na 4.001 | nb-sim -q -precision double | nb-convert -q -o plus.bin
    nb-geom $XTAL -Na 3.999 | nb-sim -q -precision double | nb-convert -q -o minus.bin
    pixels dNa.bin > d.txt
    paste <(pixels plus.bin) <(pixels minus.bin) | awk '{ printf "%.9g\n", ($1 - $2) / 0.002 }' > fd.txt
    c=$(corr d.txt fd.txt)
    echo "correlation $c"
    awk -v c="$c" 'BEGIN { exit !(c >= 0.999) }'
}

@test "grad: more names than one pass carries (8): each derivative as when it is asked for alone" {
    nb-geom $XTAL -distance 60 -o plan.nbs
    nb-sim -q -precision double \
        --grad distance,Xbeam,Ybeam,detector_rotx,detector_roty,detector_rotz,cell_a,cell_b,cell_c,lambda \
        -o all.nbs plan.nbs
    [ "$(grep -a -c '^GRAD_OF=' all.nbs)" -eq 10 ] || false
    for n in distance cell_b lambda; do
        nb-convert -q --grad $n -o "many-$n.bin" all.nbs
        nb-sim -q -precision double --grad $n plan.nbs | nb-convert -q --grad $n -o "one-$n.bin"
        cmp "many-$n.bin" "one-$n.bin"
    done
}
