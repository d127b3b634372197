#!/usr/bin/env bats
# README.md runs as written: its ```sh blocks, in order, in one shell, from a
# stand-in for the clone (bin/ the tools under test, examples/ and pipelines/
# of the checkout) into the new directory beside it that the first block makes.
# Without DIALS the dials.* commands are stubs that say they were skipped.
# ```console blocks (set-up, install) and ```text blocks (output) are not run.

load helper

readme_blocks() { # the ```sh blocks of README.md, one after another
    awk '/^```sh$/ { on = 1; next } /^```/ { on = 0; next } on' "$NB_ROOT/README.md"
}

@test "README: every sh block runs as written, its files in a directory of their own" {
    mkdir clone
    ln -s "$NB_BIN" clone/bin
    ln -s "$NB_ROOT/examples" clone/examples
    ln -s "$NB_ROOT/pipelines" clone/pipelines
    readme_blocks > blocks.sh
    [ "$(grep -c '^nb-' blocks.sh)" -ge 8 ]
    local stubs=""
    if ! command -v dials.index >/dev/null; then
        stubs='for c in dials.import dials.find_spots dials.index; do eval "$c() { echo \"$c: skipped (no DIALS)\"; }"; done'
    fi
    cd clone
    run bash -e -c "$stubs
. ../blocks.sh"
    cd ..
    expect_status 0
    # the clone is left as it was; everything is in ../nb-try
    [ "$(ls -A clone | wc -l)" -eq 3 ]
    local f
    for f in frame_0001.cbf frame_0001.img preview.png floatimage.bin plan.nbs rendered.nbs noisy_0002.cbf \
        noisy_0003.cbf sweep_001.cbf sweep_030.cbf XDS.INP sweep.geom model.expt tile_p0_0001.cbf \
        tile_p3_0001.cbf tiles.bin tiles.geom noisy_0007.img still.cbf fitted.nbs intimage.img noiseimage.img; do
        [ -s "nb-try/$f" ] || { echo "README did not write $f"; ls nb-try; return 1; }
    done
    [ ! -e nb-try/sweep_031.cbf ]
    # the fit finds the distance the still was rendered at
    expect_has "distance = 80.00"
    if command -v dials.index >/dev/null; then
        [ -s nb-try/indexed.expt ]
    else
        expect_has "dials.index: skipped (no DIALS)"
    fi
}
