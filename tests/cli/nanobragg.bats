#!/usr/bin/env bats
# pipelines/nanobragg: the drop-in that takes nanoBragg's whole command line
# and writes the reference's files by composing the nb stages.

load helper

# a fresh, empty TMPDIR, to check that the drop-in cleans up after itself
use_private_tmpdir() {
    mkdir "$NB_TMP/.tmp"
    export TMPDIR="$NB_TMP/.tmp"
}

tmpdir_is_empty() {
    [ -z "$(ls -A "$NB_TMP/.tmp")" ] || { echo "left in TMPDIR: $(ls -A "$NB_TMP/.tmp")"; return 1; }
}

@test "nanobragg --help exits 0 and describes the drop-in" {
    run "$NANOBRAGG" --help
    expect_status 0
    expect_has "nanobragg"
    expect_has "floatimage.bin"
    # the whole of the script's opening comment, to its last line
    expect_has "Exit status: that of the first stage"
    expect_has "beside the script itself (an installation), or on PATH."
    expect_has "  -cell A B C AL BE GA"
}

@test "nanobragg: a small case writes floatimage.bin in the working directory" {
    mkdir run
    cd run
    run_nb "$NANOBRAGG" $SMALL
    expect_status 0
    [ "$(stat -c %s floatimage.bin)" -eq $((32 * 32 * 4)) ]
    [ ! -s stdout.bin ] || { echo "the drop-in wrote to stdout"; return 1; }
    # no Fdump.bin without -hkl
    [ ! -e Fdump.bin ]
}

@test "nanobragg: the image is the one the stages make" {
    mkdir run
    cd run
    "$NANOBRAGG" $SMALL 2>/dev/null
    nb-geom $SMALL | nb-sim -q | nb-convert -o ../stages.bin
    cmp floatimage.bin ../stages.bin
}

@test "nanobragg: the resolved geometry and the statistics go to stderr" {
    mkdir run
    cd run
    run_nb "$NANOBRAGG" $SMALL
    expect_status 0
    expect_has "mosflm convention selected."
    expect_has "  DIRECTION_OF_DETECTOR_X-AXIS= 0 0 1"
    expect_has "max_I = "
    expect_has "mean= "
}

@test "nanobragg: -floatfile NAME is honoured" {
    mkdir run
    cd run
    run_nb "$NANOBRAGG" $SMALL -floatfile mine.bin
    expect_status 0
    [ "$(stat -c %s mine.bin)" -eq 4096 ]
    [ ! -e floatimage.bin ]
    "$NANOBRAGG" $SMALL -floatimage other.bin 2>/dev/null
    cmp mine.bin other.bin
}

@test "nanobragg: with -hkl it writes Fdump.bin; a second run without -hkl reads it and warns" {
    mkdir run
    cd run
    local geo="-cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 32"
    run_nb "$NANOBRAGG" $geo -hkl "$NB_INPUTS/small.hkl" -floatfile first.bin
    expect_status 0
    [ -f Fdump.bin ]
    [ "$(head -1 Fdump.bin)" = "-1 2 -1 2 0 1" ]
    run_nb "$NANOBRAGG" $geo -floatfile second.bin
    expect_status 0
    expect_has "warning: no -hkl: reading structure factors from 'Fdump.bin'"
    cmp first.bin second.bin
}

@test "nanobragg: -dump names the cache" {
    mkdir run
    cd run
    "$NANOBRAGG" $SMALL -hkl "$NB_INPUTS/small.hkl" -dump cache.bin 2>/dev/null
    [ -f cache.bin ]
    [ ! -e Fdump.bin ]
}

@test "nanobragg: a stale Fdump.bin is used even with -default_F, as the reference does" {
    mkdir run
    cd run
    "$NANOBRAGG" $SMALL -hkl "$NB_INPUTS/small.hkl" -floatfile with-hkl.bin 2>/dev/null
    run_nb "$NANOBRAGG" $SMALL -floatfile stale.bin
    expect_status 0
    expect_has "Fdump.bin"
    cmp with-hkl.bin stale.bin
}

@test "nanobragg: a usage error (no cell) fails and writes no files" {
    use_private_tmpdir
    mkdir run
    cd run
    run "$NANOBRAGG" -lambda 6.2 -N 5 -default_F 100 -detpixels 32
    expect_status 2
    expect_has "nb-geom: no crystal"
    [ -z "$(ls -A)" ] || { echo "files written: $(ls -A)"; return 1; }
    tmpdir_is_empty
}

@test "nanobragg: an unknown flag fails and writes no files" {
    mkdir run
    cd run
    run "$NANOBRAGG" $SMALL -no_such_flag
    expect_status 2
    expect_has "nb-geom: unknown option '-no_such_flag'"
    [ -z "$(ls -A)" ]
}

@test "nanobragg: no structure factors (AT-CLI-009) fails and writes no files" {
    mkdir run
    cd run
    run "$NANOBRAGG" -cell 100 100 100 90 90 90 -detpixels 32
    [ "$status" -ne 0 ]
    expect_has "no structure factors"
    [ -z "$(ls -A)" ]
}

@test "nanobragg: a missing -hkl file fails (1) and writes no files" {
    mkdir run
    cd run
    run "$NANOBRAGG" $SMALL -hkl nope.hkl
    expect_status 1
    expect_has "nb-hkl: cannot open 'nope.hkl'"
    [ -z "$(ls -A)" ]
}

@test "nanobragg: a failing last stage's status is the exit status" {
    mkdir run
    cd run
    run "$NANOBRAGG" $SMALL -floatfile no/such/dir/x.bin
    expect_status 1
    expect_has "no/such/dir/x.bin"
}

# nb-convert fails at once on its output; nb-sim, still writing a 4 MiB image
# into the pipe, is killed by SIGPIPE (or had finished): never the cause,
# whatever the timing, and quiet, whether the caller ignores SIGPIPE or not.
# (-nonoise keeps nb-noise out of the pipe; the stages that are in it say nothing.)
@test "nanobragg: nb-convert's failure is the status (1) and the only error, in 20 runs, SIGPIPE ignored or not" {
    mkdir run
    cd run
    local geo="-cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -default_F 100 -detpixels 1024"
    local how i
    for how in ":" "trap '' PIPE"; do
        for i in $(seq 20); do
            run bash -c "$how; \"\$0\" $geo -nonoise -floatfile no/such/dir/x.bin" "$NANOBRAGG"
            expect_status 1
            expect_has "nb-convert: cannot write 'no/such/dir/x.bin'"
            expect_lacks "nb-sim:"
            expect_lacks "nb-noise:"
            expect_lacks "the reader closed the pipe"
        done
    done
    no_files_but
}

# stand-ins for stages that must not run: a bin/ of links to the real tools,
# with the named ones replaced by a script that fails saying so
fake_bin() {
    mkdir -p fake
    local t
    for t in "$NB_BIN"/nb-*; do ln -s "$t" "fake/$(basename "$t")"; done
    for t in "$@"; do
        rm "fake/$t"
        printf '#!/bin/sh\ncat > /dev/null\necho "%s: ran" >&2\nexit 3\n' "$t" > "fake/$t"
        chmod +x "fake/$t"
    done
}

@test "nanobragg: nb-noise runs only without -nonoise" {
    fake_bin nb-noise
    mkdir run
    cd run
    run env NB_BIN="$NB_TMP/fake" "$NANOBRAGG" $SMALL -nonoise
    expect_status 0
    expect_lacks "nb-noise: ran"
    [ -s floatimage.bin ]
    [ ! -e noiseimage.img ]
    run env NB_BIN="$NB_TMP/fake" "$NANOBRAGG" $SMALL -floatfile second.bin
    expect_status 3
    expect_has "nb-noise: ran"
    [ ! -e second.bin ]
}

@test "nanobragg: nb-hkl runs only for -hkl, -dump or a Fdump.bin left in the directory" {
    fake_bin nb-hkl
    mkdir run
    cd run
    run env NB_BIN="$NB_TMP/fake" "$NANOBRAGG" $SMALL -nonoise
    expect_status 0
    expect_lacks "nb-hkl: ran"
    # F from the plan's -default_F: the image nb-hkl's HKL record gives
    nb-geom $SMALL 2>/dev/null | nb-hkl | nb-sim -q | nb-convert -o with-hkl.bin
    cmp floatimage.bin with-hkl.bin
    run env NB_BIN="$NB_TMP/fake" "$NANOBRAGG" $SMALL -nonoise -hkl "$NB_INPUTS/small.hkl"
    expect_status 3
    expect_has "nb-hkl: ran"
    run env NB_BIN="$NB_TMP/fake" "$NANOBRAGG" $SMALL -nonoise -dump cache.bin
    expect_status 3
    expect_has "nb-hkl: ran"
    touch Fdump.bin
    run env NB_BIN="$NB_TMP/fake" "$NANOBRAGG" $SMALL -nonoise
    expect_status 3
    expect_has "nb-hkl: ran"
}

@test "nanobragg: a flag value that reads -nonoise (a file named so) skips nb-noise, and nb-convert then fails writing nothing" {
    mkdir run
    cd run
    run "$NANOBRAGG" $SMALL -floatfile -nonoise
    [ "$status" -ne 0 ]
    expect_has "needs detector counts"
    no_files_but
}

@test "nanobragg: a failing middle stage's status is propagated, and nothing is written" {
    # a copy of the drop-in beside a bin/ whose nb-sim fails with status 3
    mkdir -p fake/pipelines fake/bin run
    cp "$NANOBRAGG" fake/pipelines/nanobragg
    for t in "$NB_BIN"/nb-*; do ln -s "$t" "fake/bin/$(basename "$t")"; done
    rm fake/bin/nb-sim
    printf '#!/bin/sh\ncat > /dev/null\necho "nb-sim: simulated failure" >&2\nexit 3\n' > fake/bin/nb-sim
    chmod +x fake/bin/nb-sim
    use_private_tmpdir
    cd run
    run env -u NB_BIN "$NB_TMP/fake/pipelines/nanobragg" $SMALL
    expect_status 3
    expect_has "nb-sim: simulated failure"
    [ ! -e floatimage.bin ]
    tmpdir_is_empty
}

@test "nanobragg: leaves no temporary files behind" {
    use_private_tmpdir
    mkdir run
    cd run
    "$NANOBRAGG" $SMALL 2>/dev/null
    tmpdir_is_empty
    [ -z "$(ls -A | grep -v -x -e floatimage.bin -e intimage.img -e noiseimage.img -e image.pgm)" ] ||
        { echo "unexpected files: $(ls -A)"; return 1; }
}

@test "nanobragg: the reference's golden command lines run (small detector)" {
    mkdir run
    cd run
    run_nb "$NANOBRAGG" -default_F 100 -cell 70 80 90 75 85 95 -misset 10 5 3 -N 5 -lambda 1.0 \
        -distance 100 -detpixels 48 -pixel 1 -mosaic 0.5 -mosaic_dom 3 -mosaic_seed 777 -oversample 1
    expect_status 0
    [ "$(stat -c %s floatimage.bin)" -eq $((48 * 48 * 4)) ]
    run_nb "$NANOBRAGG" -xds -default_F 100 -cell 80 80 80 90 90 90 -lambda 1.0 -N 4 -distance 120 \
        -detpixels 40 -pixel 1 -ORGX 20 -ORGY 18 -floatfile xds.bin -oversample 1
    expect_status 0
    [ "$(stat -c %s xds.bin)" -eq $((40 * 40 * 4)) ]
}
