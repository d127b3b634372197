#!/usr/bin/env bats
# nb-convert and nb-noise on bad input: every failure has the documented exit status
# (1 runtime or data error, 2 usage error), a message naming what went wrong, and leaves
# nothing behind: no output file and no temporary dot-file in the working directory.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}   # the Debian interpreter, with numpy, fabio, PIL, dxtbx

# a rendered 32x32 image (img.nbs) and its plan alone (plan.nbs)
streams() {
    nb-geom $SMALL -o plan.nbs
    nb-sim -q -o img.nbs plan.nbs
}

# a 40 x 24 float image with one non-finite pixel (fast 7, slow 5), imported: bad.nbs
nonfinite_stream() {
    local value=$1
    command -v "$PY" >/dev/null || skip "$PY is not installed"
    "$PY" - "$value" <<'EOF'
import sys, array
a = array.array('f', [3.0] * (40 * 24))
a[5 * 40 + 7] = float(sys.argv[1])
if sys.byteorder != 'little':
    a.byteswap()
open('bad.bin', 'wb').write(a.tobytes())
EOF
    nb-geom -detpixels_f 40 -detpixels_s 24 -cell 100 100 100 90 90 90 -default_F 1 -o plan.nbs
    nb-convert --import bad.bin -o bad.nbs plan.nbs
    rm plan.nbs
}

@test "nb-convert: an unknown extension is a usage error (2) naming the file and the extension; nothing written" {
    streams
    local name
    for name in out.jpg out.JPEG out; do
        run_nb nb-convert -o "$name" img.nbs
        expect_status 2
        expect_has "'$name'"
        expect_has "cannot tell the format"
        expect_has "known: .bin"
        no_files_but plan.nbs img.nbs stdout.bin
    done
}

@test "nb-convert: an output in a missing directory is a runtime error (1) naming the path; nothing left behind" {
    streams
    run_nb nb-convert -o no/such/dir/out.img img.nbs
    expect_status 1
    expect_has "no/such/dir/out.img"
    expect_has "No such file or directory"
    no_files_but plan.nbs img.nbs stdout.bin
}

@test "nb-convert: an output below a regular file (not a directory) fails (1) naming the path; no other -o written" {
    streams
    : > afile
    run_nb nb-convert -o good.img -o afile/out.cbf -o good.bin img.nbs
    expect_status 1
    expect_has "afile/out.cbf"
    expect_has "Not a directory"
    # the files are renamed into place only when all succeeded
    no_files_but plan.nbs img.nbs afile stdout.bin
}

@test "nb-convert: an output in a read-only directory fails (1) naming the path; nothing left there" {
    # root writes into read-only directories: run nb-convert as nobody, owner of ro/
    local as=""
    if [ "$(id -u)" -eq 0 ]; then
        command -v setpriv >/dev/null || skip "running as root without setpriv: a read-only directory is writable"
        as="setpriv --reuid=65534 --regid=65534 --clear-groups"
    fi
    streams
    mkdir ro
    if [ -n "$as" ]; then
        chmod 755 .
        chown 65534:65534 ro
    fi
    chmod 555 ro
    run_nb $as "$NB_BIN/nb-convert" -o ro/out.img img.nbs
    chmod 755 ro
    expect_status 1
    expect_has "ro/out.img"
    expect_has "Permission denied"
    [ -z "$(ls -A ro)" ] || { echo "left in ro/: $(ls -A ro)"; return 1; }
    no_files_but plan.nbs img.nbs ro stdout.bin
}

@test "nb-convert: /dev/full is a runtime error (1): No space left on device" {
    [ -w /dev/full ] || skip "this system has no writable /dev/full"
    streams
    local f
    for f in smv bin cbf pgm; do
        run_nb nb-convert --format $f -o /dev/full img.nbs
        expect_status 1
        expect_has "/dev/full"
        expect_has "No space left on device"
    done
    no_files_but plan.nbs img.nbs stdout.bin
}

@test "nb-convert, nb-noise: a file past the size limit (ulimit -f: as a full disk) is a runtime error (1) naming it: File too large; no file left" {
    streams
    local f
    for f in cbf smv bin; do
        run_nb sh -c "ulimit -f 1 && exec nb-convert -o out.$f img.nbs"
        expect_status 1
        expect_has "nb-convert: cannot write 'out.$f': File too large"
    done
    run sh -c 'ulimit -f 1 && exec nb-noise -seed 1 -o noisy.nbs img.nbs'
    expect_status 1
    expect_has "nb-noise: cannot write 'noisy.nbs': File too large"
    no_files_but plan.nbs img.nbs stdout.bin
}

@test "nb-convert: a stream with no IMAGE record fails (1) saying so; nothing written" {
    streams
    run_nb nb-convert -o out.img -o out.cbf plan.nbs
    expect_status 1
    expect_has "no IMAGE"
    no_files_but plan.nbs img.nbs stdout.bin
}

@test "nb-convert: a truncated stream fails (1); no output file, no temporary left" {
    streams
    local size cut
    size=$(stat -c %s img.nbs)
    local outs=(-o out.img -o out.cbf -o out.png)
    if can_write_tiff; then outs+=(-o out.tif); fi
    for cut in $((size - 1000)) $((size - 10)); do
        head -c "$cut" img.nbs > cut.nbs
        run_nb nb-convert "${outs[@]}" cut.nbs
        expect_status 1
        expect_has "truncated stream"
        no_files_but plan.nbs img.nbs cut.nbs stdout.bin
    done
}

@test "nb-noise: /dev/full (as -o and as standard output) is a runtime error (1): No space left on device" {
    [ -w /dev/full ] || skip "this system has no writable /dev/full"
    streams
    run nb-noise -seed 1 -o /dev/full img.nbs
    expect_status 1
    expect_has "No space left on device"
    run sh -c 'nb-noise -seed 1 img.nbs > /dev/full'
    expect_status 1
    expect_has "No space left on device"
    no_files_but plan.nbs img.nbs
}

@test "nb-noise: an unwritable -o (missing directory, a file as directory) fails (1) naming it; nothing left behind" {
    streams
    : > afile
    local out
    for out in no/such/dir/out.nbs afile/out.nbs; do
        run_nb nb-noise -seed 1 -o "$out" img.nbs
        expect_status 1
        expect_has "$out"
        no_files_but plan.nbs img.nbs afile stdout.bin
    done
}

@test "nb-noise: a truncated stream fails (1); no -o file, no temporary left" {
    streams
    head -c $(($(stat -c %s img.nbs) - 1000)) img.nbs > cut.nbs
    run_nb nb-noise -seed 1 -o out.nbs cut.nbs
    expect_status 1
    expect_has "truncated stream"
    no_files_but plan.nbs img.nbs cut.nbs stdout.bin
}

@test "nb-noise: a stream with no IMAGE record fails (1) saying so, instead of passing the plan through" {
    streams
    run_nb nb-noise -seed 1 -o out.nbs plan.nbs
    expect_status 1
    expect_has "no IMAGE"
    no_files_but plan.nbs img.nbs stdout.bin
}

@test "nb-noise: a NaN pixel is a data error (1) naming it non-finite; no -o file left" {
    nonfinite_stream nan
    run_nb nb-noise -seed 1 -o out.nbs bad.nbs
    expect_status 1
    expect_has "non-finite"
    expect_has "fast 7, slow 5"
    no_files_but bad.bin bad.nbs stdout.bin
}

@test "nb-noise: an infinite pixel is a data error (1) naming it non-finite" {
    nonfinite_stream inf
    run_nb nb-noise -seed 1 -o out.nbs bad.nbs
    expect_status 1
    expect_has "non-finite"
    no_files_but bad.bin bad.nbs stdout.bin
}

@test "nb-noise: -bits 12 is a usage error (2)" {
    streams
    run_nb nb-noise -bits 12 -o out.nbs img.nbs
    expect_status 2
    expect_has "-bits"
    expect_has "12"
    no_files_but plan.nbs img.nbs stdout.bin
}

@test "nb-noise: -psf bogus is a usage error (2)" {
    streams
    run_nb nb-noise -psf bogus -o out.nbs img.nbs
    expect_status 2
    expect_has "-psf"
    expect_has "bogus"
    no_files_but plan.nbs img.nbs stdout.bin
}

@test "nb-noise then nb-convert in a pipe: a NaN pixel fails the pipeline and writes no image file" {
    nonfinite_stream nan
    run bash -c 'set -o pipefail; nb-noise -seed 1 bad.nbs | nb-convert -o out.img -o out.cbf'
    [ "$status" -ne 0 ]
    expect_has "non-finite"
    no_files_but bad.bin bad.nbs
}
