#!/usr/bin/env bats
# README.md runs as written: its ```sh blocks, in order, in one shell, from a
# stand-in for the clone (bin/ the tools under test, examples/ and pipelines/
# of the checkout) into the new directory beside it that the first block makes.
# The first test runs them all but the DIALS commands (a command starting
# with dials. and its continuation lines), the second all of them and needs
# DIALS.
# ```console blocks (set-up, install) and ```text blocks (output) are not run.

load helper

readme_blocks() { # the ```sh blocks of README.md, one after another
    awk '/^```sh$/ { on = 1; next } /^```/ { on = 0; next } on' "$NB_ROOT/README.md"
}

# The README's blocks (without their DIALS commands with --no-dials) run in
# a stand-in for the clone; "$output" holds what they printed.
run_readme() {
    mkdir clone
    ln -s "$NB_BIN" clone/bin
    ln -s "$NB_ROOT/examples" clone/examples
    ln -s "$NB_ROOT/pipelines" clone/pipelines
    if [ "${1:-}" = --no-dials ]; then
        readme_blocks | awk '/^dials\./ { skip = 1 } !skip { print } { if (!/\\$/) skip = 0 }' > blocks.sh
    else
        readme_blocks > blocks.sh
    fi
    cd clone
    run bash -e -c ". ../blocks.sh"
    cd ..
}

# The README's serial example writes NXmx: a build or machine without libhdf5
# cannot run it as written.
need_nxmx() {
    nb-geom $SMALL -q | nb-sim -q | nb-convert -q -o probe.nxs 2>probe.err ||
        skip "this build or system has no libhdf5 (the README writes NXmx): $(cat probe.err)"
    rm -f probe.nxs probe.err
}

@test "README: every sh block but its DIALS commands runs as written, its files in a directory of their own" {
    need_nxmx
    readme_blocks > all.sh
    [ "$(grep -c '^dials\.' all.sh)" -eq 2 ] || false
    run_readme --no-dials
    [ "$(grep -c '^nb-' blocks.sh)" -ge 8 ] || false
    [ "$(grep -c 'dials\.' blocks.sh)" -eq 0 ] || false
    expect_status 0
    # the clone is left as it was; everything is in ../nb-try
    [ "$(ls -A clone | wc -l)" -eq 3 ] || false
    local f
    for f in frame_0001.cbf frame_0001.img preview.png floatimage.bin plan.nbs rendered.nbs noisy_0002.cbf \
        noisy_0003.cbf sweep_001.cbf sweep_030.cbf XDS.INP sweep.geom model.expt tile_p0_0001.cbf \
        tile_p3_0001.cbf tiles.bin tiles.geom noisy_0007.img still.cbf fitted.nbs intimage.img noiseimage.img \
        part_1.nxs part_4.nxs stills.nxs truth.jsonl; do
        [ -s "nb-try/$f" ] || { echo "README did not write $f"; ls nb-try; return 1; }
    done
    [ ! -e nb-try/sweep_031.cbf ] || false
    [ "$(wc -l < nb-try/truth.jsonl)" -eq 1000 ] || false
    # the fit finds the distance the still was rendered at
    expect_has "distance = 80.00"
}

@test "README: with DIALS, its blocks import, find spots and index the sweep as written" {
    command -v dials.index >/dev/null || skip "DIALS is not installed (dials.index)"
    need_nxmx
    run_readme
    expect_status 0
    [ -s nb-try/imported.expt ] || false
    [ -s nb-try/indexed.expt ] || false
}
