#!/usr/bin/env bats
# The ABORT record: when a stage of a pipe fails, it says why and leaves an ABORT
# record (TOOL=, STATUS=) on the pipe; the stages after it stop without a word of
# their own, hand the ABORT on, write no output file, and exit with the failing
# stage's status, so that a plain pipe's status is the cause's.  Files never get
# one: a saved stream that ends early is reported as before, and a stream with an
# ABORT saved by tee is reported in one line naming the stage that failed.

load helper

# a plan that asks nb-hkl for a file that is not there
MISSING_HKL="-cell 100 100 100 90 90 90 -detpixels 32 -hkl nope.hkl"

# nb-convert on the saved stream FILE fails (1) saying MESSAGE and writes nothing
convert_refuses() {
    run_nb nb-convert -o x.bin "$1"
    expect_status 1
    expect_has "$2"
    [ ! -e x.bin ] || false
}

@test "abort: nb-geom's usage error through nb-hkl | nb-sim | nb-convert: only its message, status 2 everywhere" {
    run bash -c 'nb-geom -lambda 1 | nb-hkl | nb-sim | nb-convert -o x.bin; s=(${PIPESTATUS[@]}); echo "statuses ${s[*]}"; exit ${s[3]}'
    expect_status 2
    expect_has "nb-geom: no crystal"
    expect_has "Try 'nb-geom --help' for more information."
    expect_has "statuses 2 2 2 2"
    expect_lacks "nb-hkl:"
    expect_lacks "nb-sim:"
    expect_lacks "nb-convert:"
    expect_lacks "stream"
    [ "${#lines[@]}" -eq 3 ] || false
    no_files_but
}

@test "abort: a plain pipe and pipefail both end with the cause's status" {
    run bash -c 'nb-geom -lambda 1 | nb-hkl | nb-sim | nb-convert -o x.bin'
    expect_status 2
    run bash -c 'set -o pipefail; nb-geom -lambda 1 | nb-hkl | nb-sim | nb-convert -o x.bin'
    expect_status 2
    no_files_but
}

@test "abort: nb-hkl's missing -hkl file: only its 'cannot open' line, status 1" {
    run bash -c "nb-geom $MISSING_HKL | nb-hkl | nb-sim | nb-convert -o x.bin"'; s=(${PIPESTATUS[@]}); echo "statuses ${s[*]:1}"; exit ${s[3]}'
    expect_status 1
    expect_has "nb-hkl: cannot open 'nope.hkl': No such file or directory"
    expect_has "statuses 1 1 1"
    expect_lacks "nb-geom:"
    expect_lacks "nb-sim:"
    expect_lacks "nb-convert:"
    [ "${#lines[@]}" -eq 2 ] || false
    no_files_but
}

@test "abort: nb-sim's 'no structure factors': only its message, status 2" {
    run bash -c 'nb-geom -cell 100 100 100 90 90 90 -detpixels 32 -default_F 0 | nb-sim | nb-convert -o x.bin; s=(${PIPESTATUS[@]}); echo "statuses ${s[*]:1}"; exit ${s[2]}'
    expect_status 2
    expect_has "nb-sim: no structure factors"
    expect_has "statuses 2 2"
    expect_lacks "nb-convert:"
    expect_lacks "stream"
    no_files_but
}

@test "abort: four stages with nb-noise: the first stage's usage error, status 2 from each" {
    run bash -c 'nb-geom -lambda 1 | nb-sim | nb-noise -seed 1 | nb-convert -o x.img; s=(${PIPESTATUS[@]}); echo "statuses ${s[*]}"; exit ${s[3]}'
    expect_status 2
    expect_has "nb-geom: no crystal"
    expect_has "statuses 2 2 2 2"
    expect_lacks "nb-sim:"
    expect_lacks "nb-noise:"
    expect_lacks "nb-convert:"
    no_files_but
}

@test "abort: a usage error of nb-noise in the middle: nb-convert stops quietly with its status" {
    run bash -c "nb-geom $SMALL | nb-sim | nb-noise -seed 1 -no_such_flag | nb-convert -o x.img"'; s=(${PIPESTATUS[@]}); echo "statuses ${s[*]:2}"; exit ${s[3]}'
    expect_status 2
    expect_has "nb-noise: unknown option '-no_such_flag'"
    expect_has "statuses 2 2"
    expect_lacks "nb-convert:"
    expect_lacks "nb-sim:"
    no_files_but
}

@test "abort: the -o outputs of the stages after a failure are not created, nor any temporary" {
    run bash -c 'nb-geom -lambda 1 | nb-hkl -o out.nbs'
    expect_status 2
    no_files_but
    run bash -c 'nb-geom -lambda 1 | nb-sim -o out.nbs'
    expect_status 2
    no_files_but
    # nb-hkl passed the PLAN on before it failed: nb-sim has begun its output
    run bash -c "nb-geom $MISSING_HKL | nb-hkl | nb-sim -o out.nbs"
    expect_status 1
    expect_lacks "nb-sim:"
    no_files_but
    run bash -c "nb-geom $MISSING_HKL | nb-hkl | nb-sim | nb-noise -seed 1 -o noisy.nbs"
    expect_status 1
    no_files_but
    run bash -c 'nb-geom -lambda 1 | nb-hkl | nb-sim | nb-noise -seed 1 | nb-convert -o out.img -o out.cbf -o out.nbs'
    expect_status 2
    expect_lacks "nb-convert:"
    no_files_but
}

@test "abort: a failing nb-geom leaves no ABORT in a regular file: the plan is empty, as before" {
    run bash -c 'nb-geom -lambda 1 > plan.nbs'
    expect_status 2
    [ -e plan.nbs ] || false
    [ ! -s plan.nbs ] || false
    run_nb nb-sim plan.nbs
    expect_status 1
    expect_has "nb-sim: plan.nbs: empty stream (no records)"
    run bash -c 'nb-sim < plan.nbs > /dev/null'
    expect_status 1
    expect_has "nb-sim: standard input: empty stream (no records)"
}

@test "abort: a failing nb-sim writing a regular file leaves its records there, no ABORT: truncated, as before" {
    nb-geom -cell 100 100 100 90 90 90 -detpixels 32 -default_F 0 -o plan.nbs
    run bash -c 'nb-sim plan.nbs > img.nbs'
    expect_status 2
    expect_has "nb-sim: no structure factors"
    grep -a -q '^COMMAND=' img.nbs
    [ "$(grep -a -c 'ABORT' img.nbs)" -eq 0 ] || false
    [ "$(grep -a -c '^TOOL=' img.nbs)" -eq 0 ] || false
    convert_refuses img.nbs "nb-convert: img.nbs: truncated stream"
}

@test "abort: a stream with an ABORT saved through tee, read from the file: one line naming nb-geom, its status" {
    run bash -c 'nb-geom -lambda 1 | tee saved.nbs | nb-hkl > /dev/null'
    expect_status 2
    grep -a -q '^TOOL=nb-geom$' saved.nbs
    grep -a -q '^STATUS=2$' saved.nbs
    run_nb nb-sim saved.nbs
    expect_status 2
    expect_has "nb-sim: saved.nbs: the stream ends where nb-geom failed (status 2)"
    [ "${#lines[@]}" -eq 1 ] || false
    # into a regular file it hands nothing on
    [ ! -s stdout.bin ] || false
    # from standard input the same line, and the stage after it stops quietly
    run bash -c 'nb-sim < saved.nbs | nb-convert -o x.bin'
    expect_status 2
    expect_has "nb-sim: standard input: the stream ends where nb-geom failed (status 2)"
    expect_lacks "nb-convert:"
    [ "${#lines[@]}" -eq 1 ] || false
    [ ! -e x.bin ] || false
}

# saved.nbs: what `nb-geom -lambda 1 | STAGE` wrote into a pipe, and STAGE's status
forward_through() {
    run bash -c "nb-geom -lambda 1 | $1 | cat > saved.nbs"'; s=(${PIPESTATUS[@]}); echo "status of the stage ${s[1]}"'
    expect_has "status of the stage 2"
    expect_lacks "${1%% *}:"
    grep -a -q '^TOOL=nb-geom$' saved.nbs
    grep -a -q '^STATUS=2$' saved.nbs
    run_nb nb-noise saved.nbs
    expect_status 2
    expect_has "nb-noise: saved.nbs: the stream ends where nb-geom failed (status 2)"
}

@test "abort: nb-hkl hands the ABORT on" {
    forward_through "nb-hkl"
}

@test "abort: nb-sim hands the ABORT on" {
    forward_through "nb-sim"
}

@test "abort: nb-noise hands the ABORT on" {
    forward_through "nb-noise -seed 1"
}

@test "abort: nb-convert --import hands the ABORT on" {
    forward_through "nb-convert --import img.bin"
    [ ! -e img.bin ] || false
}

@test "abort: nb-convert with its copy of the stream on standard output hands the ABORT on; writing files only, none" {
    forward_through "nb-convert -o x.bin --format nbs -o -"
    [ ! -e x.bin ] || false
    run bash -c 'nb-geom -lambda 1 | nb-convert -o x.bin | cat > sink.out; echo "status of the stage ${PIPESTATUS[1]}"'
    expect_has "status of the stage 2"
    expect_lacks "nb-convert:"
    [ -e sink.out ] || false
    [ ! -s sink.out ] || false
    [ ! -e x.bin ] || false
}

@test "abort: the ABORT carries the stage that failed first, through every later one, with the PLAN before it" {
    run bash -c "nb-geom $MISSING_HKL | nb-hkl | nb-sim | nb-noise -seed 1 | cat > saved.nbs"'; s=(${PIPESTATUS[@]}); echo "statuses ${s[*]:1:3}"'
    expect_has "statuses 1 1 1"
    expect_has "nb-hkl: cannot open 'nope.hkl'"
    expect_lacks "nb-sim:"
    expect_lacks "nb-noise:"
    [ "$(grep -a -c '^TOOL=' saved.nbs)" -eq 1 ] || false
    grep -a -q '^TOOL=nb-hkl$' saved.nbs
    grep -a -q '^STATUS=1$' saved.nbs
    grep -a -q '^COMMAND=' saved.nbs
    convert_refuses saved.nbs "nb-convert: saved.nbs: the stream ends where nb-hkl failed (status 1)"
}

@test "abort: a stage that was killed leaves no ABORT: the next one reports the empty stream, status 1" {
    run bash -c "nb-geom $SMALL | sh -c 'kill -KILL \$\$' | nb-sim -o out.nbs"
    expect_status 1
    expect_has "nb-sim: standard input: empty stream (no records)"
    no_files_but
}

@test "abort: the drop-in with no cell prints only nb-geom's message and exits 2" {
    mkdir run
    cd run
    run "$NANOBRAGG" -lambda 6.2 -detpixels 32
    expect_status 2
    expect_has "nb-geom: no crystal"
    expect_lacks "nb-hkl:"
    expect_lacks "nb-sim:"
    expect_lacks "nb-noise:"
    expect_lacks "nb-convert:"
    expect_lacks "stream"
    [ -z "$(ls -A)" ] || false
}
