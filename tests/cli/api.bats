#!/usr/bin/env bats
# The library a program ships against (engine/nb.h; issue 47): libnb.so,
# built and installed (make install PREFIX=DIR), exports nb.h's functions and
# nothing else (tests/abi/check-exports.sh); a program of nb 0.1.0's API,
# compiled against that header (tests/abi/nb_v1.h, verbatim) and linked as
# against that library, runs on today's and writes nb-sim's image; and the
# examples of API 2 (share/nb/examples), built with pkg-config against the
# installed tree, write the tools' bytes: a plan from nb-geom's flags, F from
# arrays as nb-hkl's list, counts as nb-noise's, a renderer's options by name.
# (examples/render.c and render.py: tests/cli/library.bats.)

load helper

# a triclinic, misset, mosaic crystal on a 48 x 40 detector, the seed fixed
XTAL="-cell 70 80 90 80 95 100 -misset 10 20 30 -lambda 1 -N 5 -mosaic 0.5 -mosaic_domains 3 -distance 80
      -detpixels_x 48 -detpixels_y 40 -oversample 1 -seed 5"

# The installed tree, once per file (as library.bats makes it); the sanitized
# run's library is the regular build's, which check-asan does not make.
setup_file() {
    [ -n "${NB_SANITIZED:-}" ] && return 0
    export NB_PREFIX="$BATS_FILE_TMPDIR/prefix"
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -s -C "$NB_ROOT" install \
        PREFIX="$NB_PREFIX" > "$BATS_FILE_TMPDIR/install.log" 2>&1 ||
        { cat "$BATS_FILE_TMPDIR/install.log" >&3; return 1; }
}

need_installed() {
    [ -z "${NB_SANITIZED:-}" ] ||
        skip "the installed library is the regular build's (make check runs these; test_api_v2 checks the API sanitized)"
    command -v pkg-config >/dev/null || skip "pkg-config is not installed"
    export PKG_CONFIG_PATH="$NB_PREFIX/lib/pkgconfig"
}

# An installed example (or a test's program) built with pkg-config, warnings as errors.
build_example() { # SOURCE OUTPUT
    # shellcheck disable=SC2046
    cc -std=c11 -Wall -Wextra -Werror "$1" $(pkg-config --cflags --libs nb) -o "$2"
}

# The int32 counts of FILE, one a line; and those of an SMV image's pixels.
int32s() { od -A n -v -t d4 "$1" | tr -s ' ' '\n' | sed '/^$/d'; }
smv_counts() { smv_data "$1" | od -A n -v -t u2 | tr -s ' ' '\n' | sed '/^$/d'; }

@test "api: libnb.so, built and installed, exports nb.h's functions alone, each versioned NB_1 or (API 3) NB_2" {
    need_installed
    run -0 "$NB_ROOT/tests/abi/check-exports.sh" "$NB_ROOT/build/libnb.so" "$NB_ROOT/engine/nb.h"
    # every installed header counts: nb.h is the one
    run -0 ls "$NB_PREFIX/include"
    [ "$output" = "nb.h" ] || false
    run -0 "$NB_ROOT/tests/abi/check-exports.sh" "$NB_PREFIX/lib/libnb.so" "$NB_PREFIX/include/nb.h"
    expect_has "50 symbols"
    run -0 nm -D --defined-only "$NB_PREFIX/lib/libnb.so"
    expect_has "nb_render_frame@@NB_1"
    expect_has "nb_render_frame_vjp@@NB_2"
    expect_has "nb_renderer_set_options@@NB_2"
    expect_lacks "nb_plan_from_record"
}

@test "api: the export gate fails on a library that exports a symbol the header does not declare, or lacks one" {
    printf 'int helper(void) { return 1; }\nconst char *nb_last_error(void) { return ""; }\n' > fake.c
    cc -shared -fPIC fake.c -o libfake.so
    run -1 "$NB_ROOT/tests/abi/check-exports.sh" libfake.so "$NB_ROOT/engine/nb.h"
    expect_has "do not declare"
    expect_has "  helper"
    expect_has "  nb_render_frame"
}

@test "api: nb.h's NB_VERSION_* are the VERSION file's, nb_version_number's" {
    need_installed
    printf '#include <nb.h>\n#include <stdio.h>\nint main(void) { printf("%%d.%%d.%%d %%d %%d\\n", NB_VERSION_MAJOR, NB_VERSION_MINOR, NB_VERSION_PATCH, NB_VERSION_CHECK(), nb_version_number() == NB_VERSION_NUMBER); return 0; }\n' > v.c
    build_example v.c v
    run -0 ./v
    [ "$output" = "$(cat "$NB_ROOT/VERSION") 1 1" ] || false
}

@test "api: a program of nb 0.1.0's API, compiled against its nb.h, runs on today's libnb.so and writes nb-sim's image" {
    need_installed
    # the header is 0.1.0's, byte for byte
    run -0 sha256sum "$NB_ROOT/tests/abi/nb_v1.h"
    expect_has "70bdaf64cb1335467295eb22f79b6f286acefea601a8e55ec489737da578e666"
    nb-geom -q $XTAL -default_F 100 -o plan.nbs
    nb-sim -q --device cpu plan.nbs | nb-convert -q -o want.bin
    cc -std=c11 -Wall -Wextra -Werror -I"$NB_ROOT/tests/abi" "$NB_ROOT/tests/abi/abi_v1.c" -L"$NB_PREFIX/lib" -lnb \
        -o abi_v1
    LD_LIBRARY_PATH="$NB_PREFIX/lib" ./abi_v1 < plan.nbs > got.bin 2> checks.txt
    run -0 cat checks.txt
    expect_lacks "FAILED"
    expect_has "ok: nb_render_frame_grad"
    cmp got.bin want.bin
}

@test "api: the same program linked against a stand-in of nb 0.1.0's library (17 unversioned symbols) runs on today's" {
    need_installed
    nb-geom -q $XTAL -default_F 100 -o plan.nbs
    nb-sim -q --device cpu plan.nbs | nb-convert -q -o want.bin
    # the old library's symbols, without versions: what a program linked in 0.1.0 asks for
    sed -n 's/^[a-z].*[ *]\(nb_[a-z_]*\)(.*/void \1(void) {}/p' "$NB_ROOT/tests/abi/nb_v1.h" > old.c
    [ "$(grep -c . old.c)" -eq 17 ] || false
    mkdir old
    cc -shared -fPIC -Wl,-soname,libnb.so.0 old.c -o old/libnb.so
    cc -std=c11 -I"$NB_ROOT/tests/abi" "$NB_ROOT/tests/abi/abi_v1.c" -Lold -lnb -o abi_v1
    run -0 objdump -T abi_v1
    expect_has " nb_render_frame"
    expect_lacks "NB_1"
    LD_LIBRARY_PATH="$NB_PREFIX/lib" ./abi_v1 < plan.nbs > got.bin 2> checks.txt
    run -0 cat checks.txt
    expect_lacks "FAILED"
    cmp got.bin want.bin
}

@test "api: nb_plan_stream_from_args writes nb-geom's bytes for the same flags" {
    need_installed
    build_example "$NB_ROOT/tests/abi/plan_stream.c" plan_stream
    # shellcheck disable=SC2086
    ./plan_stream $XTAL -default_F 100 -floatfile 'a b.bin' -hkl P1.hkl > got.nbs
    # shellcheck disable=SC2086
    nb-geom $XTAL -default_F 100 -floatfile 'a b.bin' -hkl P1.hkl > want.nbs
    cmp got.nbs want.nbs
    # a flag nb-geom does not take: usage (1) and nb-geom's message; no bytes
    run -1 ./plan_stream -cell 100 -nope
    expect_has "nb_plan_stream_from_args: unknown option '-nope'"
    # a file that is not there: an I/O error (2) naming it
    run -2 ./plan_stream -cell 100 -panels two.geom
    expect_has "nb_plan_stream_from_args: cannot open 'two.geom'"
}

@test "api: nb_plan_stream_from_args reads -expt, -panels, -img and -mask files as nb-geom does: its bytes" {
    need_installed
    build_example "$NB_ROOT/tests/abi/plan_stream.c" plan_stream
    # a DIALS experiment list of a sweep, as nb-convert writes it
    nb-geom -q $XTAL -default_F 100 -phi 0 -osc 0.5 -nframes 3 | nb-convert -q -o model.expt
    local added="-N 5 -mosaic 0.5 -mosaic_domains 3 -oversample 1 -seed 5 -default_F 100"
    local g="$NB_ROOT/tests/golden/inputs"
    local -a cases=("-expt model.expt $added"
        "-panels $NB_PREFIX/share/nb/examples/tiles.geom -cell 70 80 90 80 95 100 -lambda 1 -N 5 -oversample 1 -seed 5"
        "-panels model.expt -cell 70 80 90 80 95 100 -lambda 1 -N 5 -oversample 1 -seed 5"
        "-img $g/header.img -default_F 100 -cell 100 100 100 90 90 90 -N 5 -seed 5"
        "-mask $g/mask.img -default_F 100 -cell 100 100 100 90 90 90 -lambda 1.0 -N 5 -seed 5")
    for flags in "${cases[@]}"; do
        # shellcheck disable=SC2086
        ./plan_stream $flags > got.nbs
        # shellcheck disable=SC2086
        nb-geom $flags > want.nbs
        [ -s want.nbs ] || false
        cmp got.nbs want.nbs || { echo "flags '$flags': the bytes differ"; cmp -l got.nbs want.nbs | head -5; false; }
    done
    # a flag that says what the list says: usage (1) and nb-geom's message
    run -1 ./plan_stream -expt model.expt -lambda 2
    expect_has "-lambda"
    # a list that is no list: a data error (3) naming it
    printf '{"nope": 1}\n' > bad.expt
    run -3 ./plan_stream -expt bad.expt -N 5
    expect_has "bad.expt"
}

@test "api: render_flags.c writes nb-geom FLAGS | nb-sim's image; a bad flag is said, never a usage text" {
    need_installed
    build_example "$NB_PREFIX/share/nb/examples/render_flags.c" render_flags
    # shellcheck disable=SC2086
    ./render_flags $XTAL -default_F 100 > got.bin
    # shellcheck disable=SC2086
    nb-geom -q $XTAL -default_F 100 | nb-sim -q --device cpu | nb-convert -q -o want.bin
    cmp got.bin want.bin
    run -2 ./render_flags -cell 100 100 100 90 90 90 -defualt_F 100
    expect_has "render_flags: nb_renderer_from_args: unknown option '-defualt_F' (did you mean -default_F?)"
    expect_lacks "Usage"
    # -img's file read as nb-geom reads it: a file that is not there is said
    run -1 ./render_flags -img x.img
    expect_has "render_flags: nb_renderer_from_args: cannot open 'x.img'"
    # shellcheck disable=SC2086
    ./render_flags -img "$NB_ROOT/tests/golden/inputs/header.img" -default_F 100 -cell 100 100 100 90 90 90 -N 5 \
        > got.bin
    nb-geom -q -img "$NB_ROOT/tests/golden/inputs/header.img" -default_F 100 -cell 100 100 100 90 90 90 -N 5 |
        nb-sim -q --device cpu | nb-convert -q -o want.bin
    cmp got.bin want.bin
    run -1 ./render_flags -cell 100 100 100 90 90 90 -hkl P1.hkl
    expect_has "nb_renderer_set_F"
}

@test "api: render_F.c (F from arrays) writes nb-geom | nb-hkl -hkl LIST | nb-sim's image" {
    need_installed
    build_example "$NB_PREFIX/share/nb/examples/render_F.c" render_F
    # shellcheck disable=SC2086
    ./render_F "$NB_PREFIX/share/nb/examples/P1.hkl" $XTAL > got.bin
    # shellcheck disable=SC2086
    nb-geom -q $XTAL | nb-hkl -q -hkl "$NB_PREFIX/share/nb/examples/P1.hkl" | nb-sim -q --device cpu |
        nb-convert -q -o want.bin
    cmp got.bin want.bin
    # a list of a few, a duplicate (the later wins), the rest -default_F: nb-hkl's grid
    printf '1 2 3 400\n-1 -2 -3 300\n0 0 1 50\n2 0 0 1000\n1 2 3 500\n' > few.hkl
    # shellcheck disable=SC2086
    ./render_F few.hkl $XTAL -default_F 7 > got.bin
    # shellcheck disable=SC2086
    nb-geom -q $XTAL -default_F 7 | nb-hkl -q -hkl few.hkl | nb-sim -q --device cpu | nb-convert -q -o want.bin
    cmp got.bin want.bin
    # not the -default_F image
    # shellcheck disable=SC2086
    nb-geom -q $XTAL -default_F 7 | nb-sim -q --device cpu | nb-convert -q -o plain.bin
    run ! cmp -s got.bin plain.bin
}

@test "api: render_noise.c writes nb-noise's counts for the frame (seed, read-out noise, an ROI)" {
    need_installed
    build_example "$NB_PREFIX/share/nb/examples/render_noise.c" render_noise
    # shellcheck disable=SC2086
    ./render_noise 7 3 $XTAL -default_F 100 -roi 3 40 5 34 > got.i32
    # shellcheck disable=SC2086
    nb-geom -q $XTAL -default_F 100 -roi 3 40 5 34 | nb-sim -q --device cpu | nb-noise -q -seed 7 -readout 3 |
        nb-convert -q -o want.img
    int32s got.i32 > got.txt
    smv_counts want.img > want.txt
    [ "$(wc -l < got.txt)" -eq $((48 * 40)) ] || false
    cmp got.txt want.txt
    # counts, not a constant: the ROI's 0 and the counted pixels differ
    [ "$(sort -u got.txt | wc -l)" -gt 10 ] || false
    # another seed, other counts
    # shellcheck disable=SC2086
    ./render_noise 8 3 $XTAL -default_F 100 -roi 3 40 5 34 > other.i32
    run ! cmp -s got.i32 other.i32
    run -2 ./render_noise seven 3 -cell 100
    expect_has "seed is an integer, not 'seven'"
}

@test "api: render_options.c: precision=double writes nb-sim -precision double's image; unknown names are refused, listed" {
    need_installed
    build_example "$NB_PREFIX/share/nb/examples/render_options.c" render_options
    nb-geom -q $XTAL -default_F 100 -o plan.nbs
    ./render_options precision=double threads=2 device=cpu < plan.nbs > got.bin
    nb-sim -q --device cpu -precision double plan.nbs | nb-convert -q -o want.bin
    cmp got.bin want.bin
    nb-sim -q --device cpu plan.nbs | nb-convert -q -o fast.bin
    run ! cmp -s got.bin fast.bin
    run -2 ./render_options colour=red < plan.nbs
    expect_has "no render option 'colour' (this library's: device, precision, threads)"
    run -2 ./render_options threads=many < plan.nbs
    expect_has "threads is an integer, not 'many'"
    run -2 ./render_options precision=quad < plan.nbs
    expect_has "precision is plan, fast or double, not 'quad'"
}

@test "api: render_params.c: a parameter set by name moves the plan as nb-geom's flag does, and its derivative follows" {
    need_installed
    build_example "$NB_PREFIX/share/nb/examples/render_params.c" render_params
    nb-geom -q $XTAL -default_F 100 -distance 60 -o at60.nbs
    nb-geom -q $XTAL -default_F 100 -distance 80 -o at80.nbs
    ./render_params distance=80 < at60.nbs > got.bin 2> got.err
    grep -q "distance: 60 -> 80 mm" got.err
    # the image (the first half) is that of the plan made at 80 mm, to rounding
    local half=$(($(stat -c %s got.bin) / 2))
    head -c "$half" got.bin > image.bin
    nb-sim -q --device cpu at80.nbs | nb-convert -q -o want.bin
    "$NB_ROOT/${BUILD:-build}/tests/nb-imgcmp" --corr 0.9999999 --max-rel 1e-5 image.bin want.bin
    # and the derivative (the second half) nb-sim --grad's of that plan
    tail -c "$half" got.bin > grad.bin
    nb-sim -q --device cpu --grad distance at80.nbs | nb-convert -q --grad distance -o dwant.bin
    "$NB_ROOT/${BUILD:-build}/tests/nb-imgcmp" --corr 0.99999 --max-rel 1e-3 grad.bin dwant.bin
    run -2 ./render_params panel1_shift_fast=0.1 < at60.nbs
    expect_has "the detector has 1 panel"
    run -2 ./render_params wavelength=1 < at60.nbs
    expect_has "unknown parameter 'wavelength'"
}

@test "api: fit_arrays.c: nb_fit_renderer on arrays gives nb-fit's values, and split over two processes by the caller's sum the same" {
    need_installed
    build_example "$NB_PREFIX/share/nb/examples/fit_arrays.c" fit_arrays
    local truth="-cell 40 50 60 88 95 91 -misset 10 20 30 -distance 80 -Xbeam 19.4 -Ybeam 19.4"
    local start="-cell 40.08 50 60 88 95 91 -misset 10.07 19.95 30.1 -distance 81 -Xbeam 19.55 -Ybeam 19.2"
    local rest="-lambda 1 -N 6 -default_F 100 -pixel 0.4 -detpixels 96 -oversample 1 -osc 0.5 -nframes 2"
    # photons with Poisson noise, frame after frame (no ADC offset: counts are photons)
    nb-geom -q $truth $rest | nb-sim -q | nb-noise -q -seed 4 -adc 0 | nb-convert -q -o obs_#.bin
    cat obs_1.bin obs_2.bin > obs.bin
    nb-geom -q $start $rest -o start.nbs
    ./fit_arrays obs.bin distance Xbeam Ybeam misset_z scale < start.nbs > api.txt
    cat api.txt
    [ "$(wc -l < api.txt)" -eq 5 ] || false
    # the renderer's model is the plan's (the fast path): nb-fit -precision single's, to every digit printed
    nb-fit -precision single --observed obs_1.bin --observed obs_2.bin \
        --refine distance,Xbeam,Ybeam,misset_z,scale -o /dev/null start.nbs 2> cli.txt
    diff cli.txt api.txt
    # recovered: the start was 1 mm, 0.15 mm and 0.1 degree off
    awk '$1 == "distance" { d = $3 - 80 } END { exit !(d * d < 0.05 * 0.05) }' api.txt
    awk '$1 == "misset_z" { d = $3 - 30 } END { exit !(d * d < 0.02 * 0.02) }' api.txt
    # a frame each in two processes, their sums through a pipe: the same
    # values (the sums' order differs: to 1e-8 of each sigma)
    ./fit_arrays --processes 2 obs.bin distance Xbeam Ybeam misset_z scale < start.nbs > two.txt
    [ "$(wc -l < two.txt)" -eq 5 ] || false
    awk 'NR == FNR { v[$1] = $3; s[$1] = $5; next }
         { d = $3 - v[$1]; if (d < 0) d = -d; if (!($1 in v) || !(d <= 1e-8 * s[$1])) bad++ }
         END { exit bad > 0 }' api.txt two.txt
    run -2 ./fit_arrays obs.bin distance wavelength < start.nbs
    expect_has "unknown parameter 'wavelength'"
    run -2 ./fit_arrays obs.bin distance distance < start.nbs
    expect_has "'distance' is named twice"
}

@test "api: fit_dataset.c: nb_fit_dataset_renderer on stills in memory gives nb-fit's shared and per-frame values" {
    need_installed
    build_example "$NB_PREFIX/share/nb/examples/fit_dataset.c" fit_dataset
    local rest="-lambda 1 -distance 100 -pixel 0.4 -detpixels 192 -round_xtal -N 12 -fluence 1e27 -oversample 2
                -default_F 100 -nframes 3 -stills -misset_seed 7"
    nb-geom -q -cell 34 52 53 90 90 90 $rest | nb-sim -q | nb-noise -q -seed 3 -adc 0 | nb-convert -q -o still_#.bin
    cat still_1.bin still_2.bin still_3.bin > stills.bin
    nb-geom -q $rest -cell 34.102 52.156 53.159 90 90 90 -misset 0.2 -0.15 0.1 -o start.nbs
    ./fit_dataset stills.bin cell_a,cell_b,cell_c rot_x,rot_y,rot_z,scale < start.nbs > api.txt
    cat api.txt
    [ "$(grep -c '^frame [0-9]*: rot_x = ' api.txt)" -eq 3 ] || false
    nb-fit -v --observed still_1.bin --observed still_2.bin --observed still_3.bin --refine cell_a,cell_b,cell_c \
        --refine-frame rot_x,rot_y,rot_z,scale -o /dev/null start.nbs 2> cli.err
    grep -E '^(cell_. = |frame [0-9]+: rot_x = )' cli.err | sed 's/ (.*//' > cli.txt
    diff cli.txt api.txt
    awk '$1 == "cell_a" { d = $3 - 34 } END { exit !(d * d < 0.02 * 0.02) }' api.txt
    run -2 ./fit_dataset stills.bin cell_a misset_x < start.nbs
    expect_has "misset_x"
}

@test "api: fit_dataset.c with dials.find_spots' table gives nb-fit --spots's values" {
    need_installed
    command -v dials.find_spots >/dev/null 2>&1 || skip "DIALS is not installed (dials.find_spots)"
    skip_dials_processing_if_sanitized
    build_example "$NB_PREFIX/share/nb/examples/fit_dataset.c" fit_dataset
    local rest="-lambda 1 -distance 100 -pixel 0.4 -detpixels 192 -round_xtal -N 12 -fluence 1e27 -oversample 2
                -default_F 100 -nframes 3 -stills -misset_seed 7"
    nb-geom -q -cell 34 52 53 90 90 90 $rest | nb-sim -q | nb-noise -q -seed 3 -adc 0 |
        nb-convert -q -o still_#.bin -o still_#.cbf -o model.expt
    cat still_1.bin still_2.bin still_3.bin > stills.bin
    /usr/bin/python3 "$NB_ROOT/bench/dataset/perturb.py" --angle 0.2 --seed 4 -o start.expt model.expt
    nb-geom -q -expt start.expt -N 12 -round_xtal -fluence 1e27 -oversample 2 -default_F 100 -o start.nbs
    dials.find_spots start.expt nproc=2 output.reflections=strong.refl output.log=find.log >/dev/null 2>&1
    ./fit_dataset stills.bin "" rot_x,rot_y,rot_z,scale strong.refl < start.nbs > api.txt
    cat api.txt
    [ "$(grep -c '^frame [0-9]*: rot_x = ' api.txt)" -eq 3 ] || false
    nb-fit -v --observed still_#.bin --refine-frame rot_x,rot_y,rot_z,scale --spots strong.refl -o /dev/null \
        start.nbs 2> cli.err
    grep -q "'strong.refl': .* spots: .* on the plan's 3 frames" cli.err
    grep -E '^frame [0-9]+: rot_x = ' cli.err | sed 's/ (.*//' > cli.txt
    diff cli.txt api.txt
    run -1 ./fit_dataset stills.bin "" scale no-such.refl < start.nbs
    expect_has "cannot open 'no-such.refl'"
}

@test "api: render_expt.c renders a DIALS experiment list's frames as nb-geom -expt | nb-sim | nb-convert writes them" {
    need_installed
    build_example "$NB_PREFIX/share/nb/examples/render_expt.c" render_expt
    local added="-N 5 -mosaic 0.5 -mosaic_domains 3 -oversample 1 -seed 5 -default_F 100"
    # a sweep of three frames
    nb-geom -q $XTAL -default_F 100 -phi 0 -osc 0.5 -nframes 3 | nb-convert -q -o sweep.expt
    mkdir got want
    # shellcheck disable=SC2086
    ./render_expt sweep.expt 'got/sweep_##.cbf' $added 2> got.err
    grep -q "sweep.expt: 3 frames, 1 panels, 1920 pixels a frame" got.err
    # shellcheck disable=SC2086
    nb-geom -expt sweep.expt $added | nb-sim -q --device cpu | nb-convert -q -o 'want/sweep_##.cbf'
    for i in 01 02 03; do cmp "got/sweep_$i.cbf" "want/sweep_$i.cbf"; done
    # the frames differ (the sweep turns the crystal)
    run ! cmp -s got/sweep_01.cbf got/sweep_03.cbf
    # three stills, a crystal and a wavelength each
    nb-geom -q -stills -cell 70 80 90 90 95 90 -misset random -misset_seed 7 -lambda 1 -distance 80 -detpixels 40 \
        -pixel 0.2 -oversample 1 -nframes 3 -N 4 -default_F 100 -stills_N 4:6 | nb-sim -q | nb-convert -q -o stills.expt
    ./render_expt stills.expt 'got/still_#.img' -N 4 -default_F 100 -oversample 1 -seed 3
    nb-geom -expt stills.expt -N 4 -default_F 100 -oversample 1 -seed 3 | nb-sim -q --device cpu |
        nb-convert -q -o 'want/still_#.img'
    for i in 1 2 3; do cmp "got/still_$i.img" "want/still_$i.img"; done
    # the list's flags are the list's: refused beside it, by name
    run -2 ./render_expt sweep.expt x.cbf -lambda 2
    expect_has "-lambda"
    run -1 ./render_expt missing.expt x.cbf -N 5
    expect_has "cannot open 'missing.expt'"
}

@test "api: image_files.c reads an image in any format the tools read and writes what nb-convert writes" {
    need_installed
    build_example "$NB_PREFIX/share/nb/examples/image_files.c" image_files
    local flags="$XTAL -default_F 100 -phi 0 -osc 0.5 -nframes 3"
    # shellcheck disable=SC2086
    nb-geom $flags > plan.nbs
    nb-sim -q --device cpu plan.nbs > photons.nbs
    nb-noise -q -seed 7 photons.nbs > counts.nbs
    mkdir got want
    # photons: frame 2 of the stream as nb-convert writes it (the int image for the integer formats)
    nb-convert -q -o 'want/p_#.cbf' -o 'want/p_#.img' -o 'want/p_#.bin' -o 'want/p_#.tif' photons.nbs
    for f in cbf img bin tif; do
        # shellcheck disable=SC2086
        ./image_files photons.nbs "got/p_2.$f" --frame 1 -- $flags 2> err.txt
        grep -q "photons.nbs: nbs, 48 x 40, photons" err.txt
        cmp "got/p_2.$f" "want/p_2.$f"
    done
    # counts (nb-noise's): the same, as nb-convert writes them
    nb-convert -q -o 'want/c_#.cbf' -o 'want/c_#.img' -o 'want/c_#.tif' -o 'want/c_#.png' counts.nbs
    for f in cbf img tif png; do
        # shellcheck disable=SC2086
        ./image_files counts.nbs "got/c_3.$f" --frame 2 -- $flags 2> err.txt
        grep -q "counts.nbs: nbs, 48 x 40, 16-bit counts, offset 40 (the file's), gain 1" err.txt
        cmp "got/c_3.$f" "want/c_3.$f"
    done
    # a file read back as the tools read it: nb-convert's SMV and CBF, their offsets
    # shellcheck disable=SC2086
    ./image_files want/c_3.img got/again.img --as-frame 2 -- $flags 2> err.txt
    grep -q "offset 40 (the file's)" err.txt
    cmp got/again.img want/c_3.img
    # shellcheck disable=SC2086
    ./image_files want/c_3.cbf got/from_cbf.tif --format tif16 -- $flags 2> err.txt
    grep -q "want/c_3.cbf: cbf, 48 x 40, 16-bit counts, offset 0 (the file's), gain 1, overload 65495 (the file's)" \
        err.txt
    # its counts are the SMV's less the offset (the TIFF states none: the plan's ADC, 40, is taken)
    # shellcheck disable=SC2086
    ./image_files got/from_cbf.tif got/zero.img -- $flags 2> err.txt
    grep -q "got/from_cbf.tif: tif, 48 x 40, 16-bit counts, offset 40 (the plan's ADC)" err.txt
    smv_counts got/zero.img > got.txt
    smv_counts want/c_3.img | awk '{ print $1 - 40 }' > want.txt
    [ "$(sort -u want.txt | wc -l)" -gt 5 ] || false
    cmp got.txt want.txt
    # raw float in, raw float out, without a renderer: the photons as they were
    ./image_files want/p_2.bin got/copy.bin
    cmp got/copy.bin want/p_2.bin
    # without flags: a header of nb-geom's defaults for the image's size, read back
    ./image_files want/c_3.img got/defaults.cbf
    ./image_files got/defaults.cbf got/defaults.img 2> err.txt
    grep -q "got/defaults.cbf: cbf, 48 x 40, 16-bit counts, offset 0 (the file's)" err.txt
    # refusals, said and never an exit: a frame a file of one image lacks, a
    # write-only format, a format not written one image at a time, an unknown one
    run -1 ./image_files want/c_3.img x.img --frame 1
    expect_has "nb_image_read: 'want/c_3.img' is SMV, one image: frame 1 is out of range (0)"
    printf 'P5 1 1 255\n0' > x.pgm
    run -1 ./image_files x.pgm x.img
    expect_has "PGM is a write-only format"
    run -1 ./image_files want/c_3.img x.nxs
    expect_has "nb_image_write: 'x.nxs': NXmx (HDF5) is not written one image at a time"
    run -1 ./image_files want/c_3.img x.img --format jpeg
    expect_has "nb_image_write: unknown format 'jpeg'"
    run -1 ./image_files photons.nbs x.img --frame 5
    expect_has "holds no image of frame 6"
}
