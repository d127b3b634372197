#!/usr/bin/env bats
# README.md runs as written: its ```sh blocks, in order, in one shell, from a
# stand-in for the clone (bin/ the tools under test, examples/ and pipelines/
# of the checkout) into the new directory beside it that the first block makes.
# Before each block the runner notes the files there (name, inode, size,
# time), and after it fails if the block changed or removed one of them: no
# block writes over another's files (DIALS's *.log, which every dials.* run
# writes anew, aside).
#
# setup_file runs them all but the DIALS commands (a command starting with
# dials. and its continuation lines), without gemmi the blocks of nb-hkl
# -model and without CCP4's library the block that reads an MTZ file; the
# tests read what that run printed and wrote, among them every CBF, SMV and
# NXmx image through tests/tools/image_figures.py (at most 1 % of the pixels
# overloaded, at most 1 % negative, spots on every image of a crystal).  The
# DIALS test then runs the DIALS commands, block by block under the same
# check, in a copy of that directory (hard links): the files they read are
# those their blocks wrote, and they may write over none of the blocks'.
# ```console blocks (set-up, install) and ```text blocks (output) are not run.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}

# The ```sh blocks of README.md, one after another, each after a line
# "readme_block N" (the runner's check, N its number) and the last followed
# by "readme_block end".  Flags: --no-model leaves out the blocks that run
# nb-hkl -model (gemmi's sfcalc), --no-mtz those that read an MTZ file
# (CCP4's library).
readme_blocks() {
    local no_model=0 no_mtz=0
    while [ $# -gt 0 ]; do
        case $1 in
        --no-model) no_model=1 ;;
        --no-mtz) no_mtz=1 ;;
        esac
        shift
    done
    awk -v no_model="$no_model" -v no_mtz="$no_mtz" '
        /^```sh$/ { on = 1; n = 0; model = 0; mtz = 0; dials = 0; blocks++; next }
        /^```/ && on {
            on = 0
            if ((no_model && model) || (no_mtz && mtz)) next
            print "readme_block " blocks (dials ? " dials" : "")
            for (i = 1; i <= n; i++) print text[i]
            next
        }
        on {
            text[++n] = $0
            if (n == 1 && $0 ~ /^# needs DIALS/) dials = 1
            if ($0 ~ /nb-hkl -model /) model = 1
            if ($0 ~ /\.mtz( |$)/) mtz = 1
        }
        END { print "readme_block end" }
    ' "$NB_ROOT/README.md"
}

# The runner's check before each block (sourced by the blocks' shell): the
# files the blocks before it wrote are as they left them.
readme_runner() {
    cat <<'EOF'
readme_files() { find . -type f ! -name '*.log' -printf '%p %i %s %T@\n' | LC_ALL=C sort; }
readme_block() {
    if [ -n "${readme_done:-}" ]; then
        local changed
        changed=$(LC_ALL=C comm -23 <(printf '%s\n' "$readme_done") <(readme_files) | cut -d' ' -f1)
        if [ -n "$changed" ]; then
            echo "README block $readme_at wrote over or removed what the blocks before it wrote:" $changed >&2
            return 1
        fi
    fi
    readme_at=$1
    readme_done=$(readme_files)
}
EOF
}

# whether gemmi (and an nb-hkl that reads its MTZ) computes F from a model
have_gemmi() {
    command -v "${NB_GEMMI:-gemmi}" >/dev/null || return 1
    nb-geom -q -cell 34 52 53 90 90 90 -detpixels 8 | nb-hkl -q -model "$NB_ROOT/examples/helices.pdb" -dmin 20 \
        >/dev/null 2>&1
}

# The README's blocks but their DIALS commands, in a stand-in for the clone
# made in the working directory, into ./nb-try (without gemmi, or CCP4's
# library, the blocks that need it left out).  all.sh: the blocks whole,
# blocks.sh: what ran, out.txt: what it printed, status: its status.
run_readme() {
    local which=()
    mkdir clone
    ln -s "$NB_BIN" clone/bin
    ln -s "$NB_ROOT/examples" clone/examples
    ln -s "$NB_ROOT/pipelines" clone/pipelines
    have_gemmi || which+=(--no-model)
    have_ccp4 || which+=(--no-mtz)
    { readme_runner; readme_blocks "${which[@]}"; } > all.sh
    # a block that needs DIALS whole ("# needs DIALS" its first line) is left out with the DIALS commands
    awk '/^readme_block / { whole = $3 == "dials" } whole { next }
         /^dials\./ { skip = 1 } !skip { print } { if (!/\\$/) skip = 0 }' all.sh > blocks.sh
    local status=0
    (cd clone && bash -e -c ". ../blocks.sh") > out.txt 2>&1 || status=$?
    echo "$status" > status
}

# The README's blocks but DIALS's, once for the tests that read what they
# printed and wrote (README_RUN); without libhdf5 (the serial example writes
# NXmx) nothing is run and README_RUN/skip says why.
setup_file() {
    export README_RUN="$BATS_FILE_TMPDIR/run"
    mkdir -p "$README_RUN"
    cd "$README_RUN" || return 1
    if ! nb-geom $SMALL -q | nb-sim -q | nb-convert -q -o probe.nxs 2>probe.err; then
        echo "this build or system has no libhdf5 (the README writes NXmx): $(cat probe.err)" > skip
        return 0
    fi
    rm -f probe.nxs probe.err
    run_readme
}

need_run() {
    [ ! -e "$README_RUN/skip" ] || skip "$(cat "$README_RUN/skip")"
    output=$(cat "$README_RUN/out.txt")
    status=$(cat "$README_RUN/status")
}

@test "README: every sh block but its DIALS commands runs as written, its files in a directory of their own" {
    need_run
    readme_blocks > all.sh
    [ "$(grep -c '^dials\.' all.sh)" -eq 5 ] || false
    [ "$(grep -c '^readme_block [0-9]* dials$' all.sh)" -eq 1 ] || false
    [ "$(grep -c '^readme_block [0-9]' all.sh)" -ge 15 ] || false
    [ "$(grep -c '^nb-' "$README_RUN/blocks.sh")" -ge 8 ] || false
    [ "$(grep -c 'dials\.' "$README_RUN/blocks.sh")" -eq 0 ] || false
    expect_status 0
    # the clone is left as it was; everything is in ../nb-try
    [ "$(ls -A "$README_RUN/clone" | wc -l)" -eq 3 ] || false
    local f try="$README_RUN/nb-try"
    for f in frame_0001.cbf frame_0001.img preview.png P1.bin plan.nbs rendered.nbs noisy_0002.cbf \
        noisy_0003.img sweep_001.cbf sweep_030.cbf XDS.INP sweep.geom model.expt tile_p0_0001.cbf \
        tile_p3_0001.cbf tiles.bin tiles.geom noisy_0007.img with_water_0004.cbf with_air_0005.cbf still.cbf \
        fitted.nbs shot_3.cbf refined.expt floatimage.bin intimage.img noiseimage.img water.img water_noise.img \
        part_1.nxs part_4.nxs stills.nxs stills.expt truth.jsonl; do
        [ -s "$try/$f" ] || { echo "README did not write $f"; ls "$try"; return 1; }
    done
    [ ! -e "$try/sweep_031.cbf" ] || false
    # the -model blocks ran when gemmi is there (the gemmi test says so when not)
    if have_gemmi; then
        [ -s "$try/helices.png" ] || false
        [ -s "$try/dataset.nxs" ] || false
        [ -s "$try/dataset_model.expt" ] || false
    else
        [ ! -e "$try/helices.png" ] || false
        [ ! -e "$try/dataset.nxs" ] || false
    fi
    [ "$(wc -l < "$try/truth.jsonl")" -eq 1000 ] || false
    # the fit finds the distance the still was rendered at
    expect_has "distance = 80.00"
    # and the dataset fit every still
    expect_has "3 frames fitted, 0 failed"
    # the runner checked each block's files
    expect_lacks "wrote over or removed"
    # the dataset example samples its pixels as nb-geom advises: without -q it advises nothing
    local SERIES
    eval "$(grep '^SERIES=' all.sh)"
    [ -n "$SERIES" ] || false
    run_nb nb-geom $SERIES -cell 34 52 53 90 90 90 -misset_seed 7
    expect_status 0
    expect_lacks "recommend -oversample"
}

@test "README: its runner fails a block that writes over or removes a file of a block before it, naming it" {
    # README.md is the runner's only input: a copy, its first blocks made to clash
    local block
    {
        readme_runner
        printf '%s\n' 'readme_block 1' 'echo 1 > a.txt' 'echo 1 > b.txt' 'readme_block 2' 'echo 2 > c.txt' \
            'readme_block 3' 'echo 3 > b.txt' 'readme_block end'
    } > clash.sh
    run bash -e -c ". ./clash.sh"
    expect_status 1
    expect_has "README block 3 wrote over or removed what the blocks before it wrote: ./b.txt"
    for block in 'rm a.txt' 'mv c.txt d.txt'; do
        rm -f ./*.txt
        { readme_runner; printf '%s\n' 'readme_block 1' 'echo 1 > a.txt; echo 1 > c.txt' 'readme_block 2' "$block" \
            'readme_block end'; } > gone.sh
        run bash -e -c ". ./gone.sh"
        expect_status 1
        expect_has "README block 2 wrote over or removed"
    done
    # and passes blocks that write files of their own
    rm -f ./*.txt
    { readme_runner; printf '%s\n' 'readme_block 1' 'echo 1 > a.txt' 'readme_block 2' 'echo 2 > b.txt' \
        'readme_block end'; } > fine.sh
    run bash -e -c ". ./fine.sh"
    expect_status 0
}

@test "README: every CBF, SMV and NXmx image its blocks write is one to keep (overloads, negative pixels, spots)" {
    need_run
    "$PY" -c 'import fabio, h5py, numpy' 2>/dev/null || skip "$PY cannot import fabio, h5py and numpy (Debian: python3-fabio python3-h5py)"
    expect_status 0
    cd "$README_RUN/nb-try"
    local images=() f
    # stills.nxs is part_1.nxs ... part_4.nxs through links: its frames are theirs
    for f in *.cbf *.img *.nxs; do
        case $f in water.img | water_noise.img | part_*.nxs) ;; *) images+=("$f") ;; esac
    done
    [ "${#images[@]}" -ge 45 ] || false
    # nonBragg's images are of water alone: no spots to show
    run "$PY" "$NB_ROOT/tests/tools/image_figures.py" "${images[@]}" --min-strong 0 water.img water_noise.img
    echo "$output" | grep -v '^sweep_0[0-2]' | sed 's/^/# /' >&3
    expect_status 0
    [ "$(echo "$output" | grep -c ' % overloaded, ')" -eq $((${#images[@]} + 2)) ] || false
    # the read-out noise example keeps the ADC offset under its counts (SMV), so keeps its pixels
    expect_has "noisy_0003.img: 0.000 % overloaded, 0.000 % negative"
}

@test "README: the extremes its text names instead (CBF read-out noise, 50 mm of air, 1 um of water, nonBragg's fluence) fail image_figures.py" {
    need_run
    "$PY" -c 'import fabio, numpy' 2>/dev/null || skip "$PY cannot import fabio and numpy (Debian: python3-fabio)"
    local try="$README_RUN/nb-try"
    # "read-out noise would take half its pixels below 0" in a CBF
    nb-noise -q -seed 3 -readout 3 -psf gauss "$try/rendered.nbs" | nb-convert -q -o readout.cbf
    run "$PY" "$NB_ROOT/tests/tools/image_figures.py" readout.cbf
    expect_status 1
    expect_has "over 1 % negative"
    local negative
    negative=$(echo "$output" | sed -n 's/.*overloaded, \([0-9.]*\) % negative.*/\1/p')
    awk -v n="$negative" 'BEGIN { exit !(n > 40 && n < 60) }' || false
    # "50 mm of air across nb-amorphous's default 0.1 mm would put 10^12 photons in every pixel"
    run -0 nb-amorphous --table "$NB_ROOT/examples/amorphous/air.stol" --thickness 50 --density 0.001204 \
        --mw 28.96 -o air.nbs "$try/plan.nbs"
    awk -v m="$(nb_key air.nbs MEAN)" 'BEGIN { exit !(m > 1e11) }' || false
    nb-math -q --add air.nbs "$try/rendered.nbs" | nb-noise -q -seed 5 | nb-convert -q -o air.cbf
    run "$PY" "$NB_ROOT/tests/tools/image_figures.py" air.cbf
    expect_status 1
    expect_has "air.cbf: 100.000 % overloaded"
    # "1 um would bury them under 40,000"
    nb-geom -q -cell 70 80 90 75 85 95 -N 5 -distance 100 -detpixels 1024 -default_F 1e-4 -water 1 | nb-sim -q -o water.nbs
    awk -v m="$(nb_key water.nbs MEAN)" 'BEGIN { exit !(m > 35000 && m < 45000) }' || false
    nb-math -q --add water.nbs "$try/rendered.nbs" | nb-noise -q -seed 4 | nb-convert -q -o water.cbf
    run "$PY" "$NB_ROOT/tests/tools/image_figures.py" water.cbf
    expect_status 1
    expect_has "0.000 % overloaded, 0.000 % negative, 0 strong pixels"
    # "at nonBragg's default fluence ... every pixel of the noise image would overload"
    "$NONBRAGG" -stol "$NB_ROOT/examples/amorphous/water.stol" -lambda 1 -distance 100 -detsize 51.2 -pixel 0.2 \
        -thickness 0.5 -floatfile w.bin -intfile w.img -noisefile w_noise.img -nopgm 2>/dev/null
    run "$PY" "$NB_ROOT/tests/tools/image_figures.py" --min-strong 0 w_noise.img
    expect_status 1
    expect_has "w_noise.img: 100.000 % overloaded"
}

@test "README: with CCP4's library, its MTZ block reads examples/helices.mtz (made by examples/helices_mtz.py)" {
    need_run
    need_ccp4
    readme_blocks > all.sh
    [ "$(grep -c 'nb-hkl -hkl $NB_SRC/examples/helices.mtz -column FP' all.sh)" -eq 1 ] || false
    [ -s "$README_RUN/nb-try/helices_FP.bin" ] || false
    # its -column is needed: the file has two amplitude columns
    nb-geom -q -cell 34 52 53 90 90 90 -detpixels 8 -o p.nbs
    run -2 nb-hkl -hkl "$NB_ROOT/examples/helices.mtz" p.nbs
    expect_has "more than one amplitude column (type F): choose with -column LABEL among FP (F), FC (F)"
}

@test "README: with DIALS, its dials commands import, find spots and index as written, writing over no block's files" {
    command -v dials.index >/dev/null || skip "DIALS is not installed (dials.index)"
    skip_dials_processing_if_sanitized
    need_run
    expect_status 0
    cp -al "$README_RUN/nb-try" nb-try
    # each block's DIALS commands after its marker, from the blocks setup_file ran
    { readme_runner; awk '/^readme_block / { print; whole = $3 == "dials"; next } whole { print; next }
                          /^dials\./ { keep = 1 } keep { print } { if (!/\\$/) keep = 0 }' "$README_RUN/all.sh"; } > dials.sh
    [ "$(grep -c '^dials\.' dials.sh)" -ge 2 ] || false
    run bash -e -c "cd nb-try && . ../dials.sh"
    expect_status 0
    expect_lacks "wrote over or removed"
    [ -s nb-try/frame_0001.expt ] || false
    [ -s nb-try/imported.expt ] || false
    [ -s nb-try/indexed.expt ] || false
    # the worked example from DIALS's indexing: both stages ran, every still within 0.01 degrees
    [[ "$output" == *"4 frames fitted, 0 failed"* ]] || false
    [ -s nb-try/xtal_F.mtz ] || false
    run -0 "$PY" "$NB_ROOT/bench/dataset/evaluate.py" --space-group P212121 --json xtal.json nb-try/xtal_truth.expt \
        nb-try/xtal_refined.expt
    "$PY" -c 'import json,sys; s=json.load(open("xtal.json")); sys.exit(not (s["measured"] == 4 and s["orientation_deg"]["max"] < 0.01))'
    have_gemmi || skip "gemmi is not installed: the realistic dataset (F from a model) was left out"
    # the realistic dataset: DIALS's default spot finding and indexing over the water and
    # air background recover the cell within 0.5 %
    cd nb-try
    run "$PY" - <<'PY'
from dxtbx.model.experiment_list import ExperimentListFactory as F
truth = F.from_json_file("dataset_model.expt", check_format=False)[0].crystal.get_unit_cell().parameters()
found = F.from_json_file("dataset_indexed.expt", check_format=False)[0].crystal.get_unit_cell().parameters()
print("truth", " ".join("%.3f" % x for x in truth), "found", " ".join("%.3f" % x for x in found))
for g, w in zip(sorted(found[:3]), sorted(truth[:3])):
    assert abs(g - w) / w < 0.005, ("cell", found)
for a in found[3:]:
    assert abs(a - 90.0) / 90.0 < 0.005, ("angles", found)
PY
    echo "# $output" >&3
    expect_status 0
}

@test "README: with gemmi, its model blocks compute F from examples/helices.pdb and render them" {
    have_gemmi || skip "gemmi is not installed (Debian: apt-get install gemmi), or this nb-hkl cannot read its MTZ"
    need_run
    expect_status 0
    [ "$(grep -c 'nb-hkl -model ' "$README_RUN/blocks.sh")" -eq 2 ] || false
    [ -s "$README_RUN/nb-try/helices.png" ] || false
    [ -s "$README_RUN/nb-try/dataset.nxs" ] || false
}
