#!/bin/bash
# truth-gates.sh - the gates of "what DIALS reads from nb's files is what was
# simulated" (docs/physics.md 2.6, README "DIALS notes"), measured with DIALS
# itself: too slow for `make check` (about 5 minutes on 2 cores), run by
# `make check-dials`.  Prints each measurement and exits 1 when a gate fails,
# 77 when DIALS is not installed.
#
#   stills      model.expt holds one experiment per image; each crystal's
#               orientation agrees with dials.index's of its image (the known
#               cell, the geometry fixed) within 0.2 degrees after DIALS's own
#               basis choice.  Beside it the floor: dials.refine started from
#               the truth stays near the truth with lower RMSDs than DIALS's
#               own solution (a still fixes its rotation about axes across the
#               beam only to about the width of its reflections).
#   nxmx        a 30-frame sweep without a simulated sensor, integrated from
#               the CBF and from the NXmx frames (one crystal model for both,
#               NXmx imported with polarization_fraction=0.5: dxtbx 3.12
#               ignores the file's Stokes vector): the corrected intensities
#               (I lp / qe) agree within 0.5 % in every resolution bin, with
#               the background model DIALS gives a pixel-array detector (glm),
#               which every file says; with each file's default, reported:
#               dxtbx 3.12 types a full CBF's panels SENSOR_UNKNOWN, for which
#               DIALS picks another (README, DIALS notes).
#   sensor      the same with a 450 um silicon sensor (-detector_material Si):
#               dxtbx reads its thickness and attenuation (1 %) from NXmx and
#               the CBF, and the 0.5 % holds after DIALS's own correction.
#               Reported beside: the sensor's intensities after DIALS's
#               correction against none: nanoBragg's layer model of the
#               sensor (docs/physics.md 8.1, 8.3), which nb renders bit for
#               bit, is not the absorption DIALS corrects for.
#
# Usage: tests/dials/truth-gates.sh [WORKDIR]   (default: a temporary directory)
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PY=${NB_TEST_PYTHON:-/usr/bin/python3}
PATH="$ROOT/bin:$PATH"
command -v dials.index >/dev/null 2>&1 && "$PY" -c 'import dxtbx' 2>/dev/null ||
    { echo "truth-gates: DIALS is not installed (dials.index, dxtbx): nothing measured"; exit 77; }
WORK=${1:-$(mktemp -d)}
mkdir -p "$WORK" && cd "$WORK" || exit 1
echo "truth-gates: working in $WORK"
failed=0
gate() { # NAME STATUS
    if [ "$2" -eq 0 ]; then echo "truth-gates: $1: pass"; else echo "truth-gates: $1: FAIL"; failed=1; fi
}

# ---- stills ------------------------------------------------------------------
# Shot $1 (001 ...) indexed as a one-image sequence (Debian's DIALS lacks the
# stills indexer's xfel_mono_sim_ext), the cell known and the geometry fixed;
# then refined from the truth, the floor beside it
still_shot() {
    local i=$1 fix="refinement.parameterisation.detector.fix=all refinement.parameterisation.beam.fix=all"
    fix="$fix refinement.parameterisation.crystal.fix=cell"
    dials.import shot_$i.cbf output.experiments=imported_$i.expt output.log=import_$i.log >/dev/null 2>&1 &&
        dials.find_spots imported_$i.expt output.reflections=strong_$i.refl output.log=find_$i.log \
            spotfinder.threshold.dispersion.global_threshold=20 >/dev/null 2>&1 &&
        dials.index imported_$i.expt strong_$i.refl indexing.known_symmetry.unit_cell=78,78,37,90,90,90 \
            indexing.known_symmetry.space_group=P1 $fix output.experiments=indexed_$i.expt \
            output.reflections=indexed_$i.refl output.log=index_$i.log >/dev/null 2>&1 || return 0
    "$PY" "$ROOT/tests/dials/truth_crystal.py" model.expt "$i" indexed_$i.expt from_truth_$i.expt 2>/dev/null &&
        dials.refine from_truth_$i.expt indexed_$i.refl $fix output.experiments=refined_$i.expt \
            output.reflections=refined_$i.refl output.log=refine_$i.log >/dev/null 2>&1
    return 0
}

stills() {
    mkdir -p stills && cd stills || return 1
    nb-geom -cell 78 78 37 90 90 90 -detpixels 1024 -pixel 0.172 -distance 150 -lambda 1 -default_F 100 -N 20 \
        -round_xtal -nframes 10 -stills -misset_seed 11 -q -o plan.nbs || return 1
    nb-sim -q plan.nbs | nb-noise -q -seed 3 | nb-convert -q -o shot_###.cbf -o model.expt -o truth.jsonl || return 1
    # two shots at a time
    for i in $(seq -f %03g 1 10); do
        still_shot "$i" &
        [ $((10#$i % 2)) -eq 0 ] && wait
    done
    wait
    "$PY" "$ROOT/tests/dials/stills_report.py" model.expt truth.jsonl 10
}
stills
gate "stills: model.expt = truth.jsonl (1e-9) and dials.index within 0.2 deg" $?
cd "$WORK" || exit 1

# ---- integration: NXmx against CBF, without and with a sensor -----------------
integrate() { # NAME EXTRA_NB_GEOM_FLAGS
    local name=$1
    shift
    mkdir -p "$name" && cd "$name" || return 1
    nb-geom -cell 78 78 37 90 90 90 -misset 10 20 30 -detpixels 512 -pixel 0.172 -distance 150 -lambda 1 -N 10 \
        -default_F 100 -osc 1 -phisteps 4 -mosaic 0.2 -mosaic_domains 5 -nframes 30 "$@" -q -o plan.nbs || return 1
    nb-sim -q plan.nbs | nb-noise -q -seed 1 -o sweep.nbs || return 1
    nb-convert -q -o sweep_###.cbf -o model.expt -o sweep.nxs sweep.nbs || return 1
    dials.import sweep_*.cbf polarization_fraction=0.5 output.experiments=cbf.expt >import_cbf.log 2>&1 &&
        dials.import sweep.nxs polarization_fraction=0.5 output.experiments=nxs.expt >import_nxs.log 2>&1 &&
        dials.find_spots cbf.expt nproc=2 spotfinder.threshold.dispersion.global_threshold=20 >find.log 2>&1 &&
        dials.index cbf.expt strong.refl refinement.parameterisation.detector.fix=all \
            refinement.parameterisation.beam.fix=all >index.log 2>&1 || return 1
    "$PY" "$ROOT/tests/dials/swap_imageset.py" indexed.expt nxs.expt indexed_nxs.expt || return 1
    # DIALS picks its background model by the detector type, which dxtbx 3.12
    # reads as SENSOR_UNKNOWN from a full CBF, SENSOR_PAD from NXmx (and a
    # miniCBF with a sensor line): integrated as DIALS would a pixel-array
    # detector, which every file says (glm), and, reported only, with each
    # file's default
    for bg in glm default; do
        local opt="background.algorithm=glm"
        [ $bg = default ] && opt=""
        dials.integrate indexed.expt indexed.refl nproc=2 $opt output.experiments=${bg}_cbf.expt \
            output.reflections=${bg}_cbf.refl output.log=${bg}_cbf.log >/dev/null 2>&1 &&
            dials.integrate indexed_nxs.expt indexed.refl nproc=2 $opt output.experiments=${bg}_nxs.expt \
                output.reflections=${bg}_nxs.refl output.log=${bg}_nxs.log >/dev/null 2>&1 || return 1
    done
    echo "  with each file's default background model (reported only):"
    "$PY" "$ROOT/tests/dials/compare_integration.py" --report plan.nbs default_cbf.expt default_cbf.refl \
        default_nxs.expt default_nxs.refl
    echo "  with the background model of a pixel-array detector, which every file says:"
    "$PY" "$ROOT/tests/dials/compare_integration.py" plan.nbs glm_cbf.expt glm_cbf.refl glm_nxs.expt glm_nxs.refl
}
integrate nxmx
gate "nxmx: NXmx = CBF integrated intensities within 0.5 % per resolution bin" $?
cd "$WORK" || exit 1
integrate sensor -detector_thick 450 -detector_material Si
gate "sensor: thickness and mu read back (1 %); NXmx = CBF within 0.5 % per bin after DIALS's correction" $?
cd "$WORK" || exit 1
"$PY" "$ROOT/tests/dials/compare_integration.py" --sensor-effect nxmx/glm_nxs.expt nxmx/glm_nxs.refl \
    sensor/glm_nxs.expt sensor/glm_nxs.refl || true
exit $failed
