#!/usr/bin/env bats
# README.md runs as written: its ```sh blocks, in order, in one shell, from a
# stand-in for the clone (bin/ the tools under test, examples/ and pipelines/
# of the checkout) into the new directory beside it that the first block makes.
# The first test runs them all but the DIALS commands (a command starting
# with dials. and its continuation lines) and, without gemmi, the block of
# nb-hkl -model; the second all of them and needs DIALS; the third the first
# block and the -model block and needs gemmi.
# ```console blocks (set-up, install) and ```text blocks (output) are not run.

load helper

# the ```sh blocks of README.md, one after another; with "no-gemmi" those that
# run nb-hkl -model (gemmi's sfcalc) left out, with "gemmi" only the first
# block and those
readme_blocks() {
    awk -v want="${1:-all}" '
        /^```sh$/ { on = 1; n = 0; model = 0; blocks++; next }
        /^```/ && on {
            on = 0
            if (want == "all" || (want == "no-gemmi" && !model) || (want == "gemmi" && (model || blocks == 1)))
                for (i = 1; i <= n; i++) print text[i]
            next
        }
        on { text[++n] = $0; if ($0 ~ /nb-hkl -model /) model = 1 }
    ' "$NB_ROOT/README.md"
}

# whether gemmi (and an nb-hkl that reads its MTZ) computes F from a model
have_gemmi() {
    command -v "${NB_GEMMI:-gemmi}" >/dev/null || return 1
    nb-geom -q -cell 34 52 53 90 90 90 -detpixels 8 | nb-hkl -q -model "$NB_ROOT/examples/helices.pdb" -dmin 20 \
        >/dev/null 2>&1
}

# The README's blocks (without their DIALS commands with --no-dials; with
# --gemmi the first and the -model one, without DIALS commands; without gemmi
# none of -model) run in a stand-in for the clone; "$output" holds what they
# printed.
run_readme() {
    mkdir clone
    ln -s "$NB_BIN" clone/bin
    ln -s "$NB_ROOT/examples" clone/examples
    ln -s "$NB_ROOT/pipelines" clone/pipelines
    local which=all
    have_gemmi || which=no-gemmi
    if [ "${1:-}" = --no-dials ]; then
        readme_blocks "$which" | awk '/^dials\./ { skip = 1 } !skip { print } { if (!/\\$/) skip = 0 }' > blocks.sh
    elif [ "${1:-}" = --gemmi ]; then
        readme_blocks gemmi | awk '/^dials\./ { skip = 1 } !skip { print } { if (!/\\$/) skip = 0 }' > blocks.sh
    else
        readme_blocks "$which" > blocks.sh
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
    [ "$(grep -c '^dials\.' all.sh)" -eq 4 ] || false
    run_readme --no-dials
    [ "$(grep -c '^nb-' blocks.sh)" -ge 8 ] || false
    [ "$(grep -c 'dials\.' blocks.sh)" -eq 0 ] || false
    expect_status 0
    # the clone is left as it was; everything is in ../nb-try
    [ "$(ls -A clone | wc -l)" -eq 3 ] || false
    local f
    for f in frame_0001.cbf frame_0001.img preview.png floatimage.bin plan.nbs rendered.nbs noisy_0002.cbf \
        noisy_0003.cbf sweep_001.cbf sweep_030.cbf XDS.INP sweep.geom model.expt tile_p0_0001.cbf \
        tile_p3_0001.cbf tiles.bin tiles.geom noisy_0007.img still.cbf fitted.nbs shot_3.cbf refined.expt intimage.img noiseimage.img \
        part_1.nxs part_4.nxs stills.nxs truth.jsonl; do
        [ -s "nb-try/$f" ] || { echo "README did not write $f"; ls nb-try; return 1; }
    done
    [ ! -e nb-try/sweep_031.cbf ] || false
    # the -model block ran when gemmi is there (the third test says so when not)
    if have_gemmi; then
        [ -s nb-try/helices.png ] || false
        [ -s nb-try/dataset.nxs ] || false
        [ -s nb-try/dataset_model.expt ] || false
    else
        [ ! -e nb-try/helices.png ] || false
        [ ! -e nb-try/dataset.nxs ] || false
    fi
    [ "$(wc -l < nb-try/truth.jsonl)" -eq 1000 ] || false
    # the fit finds the distance the still was rendered at
    expect_has "distance = 80.00"
    # and the dataset fit every still
    expect_has "3 frames fitted, 0 failed"
}

@test "README: with DIALS, its blocks import, find spots and index the sweep as written" {
    command -v dials.index >/dev/null || skip "DIALS is not installed (dials.index)"
    need_nxmx
    run_readme
    expect_status 0
    [ -s nb-try/imported.expt ] || false
    [ -s nb-try/indexed.expt ] || false
    have_gemmi || skip "gemmi is not installed: the realistic dataset (F from a model) was left out"
    # the realistic dataset: DIALS's default spot finding and indexing over the water and
    # air background recover the cell within 0.5 %
    cd nb-try
    run "${NB_TEST_PYTHON:-/usr/bin/python3}" - <<'PY'
from dxtbx.model.experiment_list import ExperimentListFactory as F
truth = F.from_json_file("dataset_model.expt", check_format=False)[0].crystal.get_unit_cell().parameters()
found = F.from_json_file("dataset_indexed.expt", check_format=False)[0].crystal.get_unit_cell().parameters()
print("truth", " ".join("%.3f" % x for x in truth), "found", " ".join("%.3f" % x for x in found))
for g, w in zip(sorted(found[:3]), sorted(truth[:3])):
    assert abs(g - w) / w < 0.005, ("cell", found)
for a in found[3:]:
    assert abs(a - 90.0) / 90.0 < 0.005, ("angles", found)
PY
    echo "$output" >&3
    expect_status 0
}

@test "README: with gemmi, its model block computes F from examples/helices.pdb and renders them" {
    have_gemmi || skip "gemmi is not installed (Debian: apt-get install gemmi), or this nb-hkl cannot read its MTZ"
    readme_blocks > all.sh
    [ "$(grep -c 'nb-hkl -model ' all.sh)" -eq 2 ] || false
    run_readme --gemmi
    expect_status 0
    [ "$(grep -c 'nb-hkl -model ' blocks.sh)" -eq 2 ] || false
    [ -s nb-try/helices.png ] || false
    # the first block ran before it, and none after it
    [ -s nb-try/frame_0001.cbf ] || false
    [ ! -e nb-try/plan.nbs ] || false
}
