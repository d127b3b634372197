#!/usr/bin/env bats
# A shot's own spectrum (docs/physics.md 16.4): nb-convert -o X.expt writes
# each still's spectrum as a diffBragg .lam file (X_spectra/shot_NNNNNN.lam)
# and their list (X_spectra.txt); nb-geom -expt X.expt -expt_spectra LIST
# reads them back (FRAME_SPECTRA) and renders the stills again; a malformed
# .lam is refused with its file and line; nb-sim --grad follows a shot's
# spectrum; nb-fit fits stills with their spectra and --refine-frame lambda
# moves a frame's spectrum whole, back to the truth's from a start 0.2 % long.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}

# 3 small stills, 5 spikes each of a 0.5 % SASE envelope
SHOTS="-lambda 1 -distance 100 -pixel 0.4 -detpixels 96 -round_xtal -N 12 -fluence 1e27 -oversample 1
       -default_F 100 -nframes 3 -stills -stills_bandwidth 0.5 -stills_spikes 5 -misset_seed 7"
TRUTH="-cell 34 52 53 90 90 90"
# what an experiment list does not say, given again to nb-geom -expt
AGAIN="-N 12 -round_xtal -fluence 1e27 -oversample 1 -default_F 100"

# model.expt, model_spectra.txt and model_spectra/ of the stills (no images)
model() {
    nb-geom -q $TRUTH $SHOTS -o truth.nbs
    nb-convert -q -o model.expt truth.nbs
}

# a .lam list of one line naming $1, for the first experiment of three: the
# other two lines name good files
lam_list() {
    printf '# wavelengths, weights\n1.0,1\n1.01,2\n' > good.lam
    printf '%s\ngood.lam\ngood.lam\n' "$1" > list.txt
}

@test "spectra: nb-convert -o X.expt writes a .lam per still as diffBragg writes them, and their list" {
    model
    [ "$(wc -l < model_spectra.txt)" -eq 3 ] || false
    [ "$(sed -n 2p model_spectra.txt)" = model_spectra/shot_000002.lam ] || false
    [ "$(head -1 model_spectra/shot_000001.lam)" = "# wavelengths, weights" ] || false
    [ "$(grep -c , model_spectra/shot_000003.lam)" -eq 6 ] || false
    # diffBragg's reader: numpy.loadtxt(delimiter=",", skiprows=1), Angstrom
    "$PY" - <<'PY'
import numpy as np
w, g = np.loadtxt("model_spectra/shot_000001.lam", float, delimiter=",", skiprows=1).T
assert len(w) == 5 and (g == 1).all() and abs(w.mean() - 1) < 0.01 and w.std() > 1e-4, (w, g)
PY
}

@test "spectra: nb-geom -expt -expt_spectra renders the stills as the plan of spikes did" {
    model
    nb-geom -q -expt model.expt -expt_spectra model_spectra.txt $AGAIN -o back.nbs
    [ "$(plan_key back.nbs FRAME_SPECTRA)" = 3 ] || false
    nb-sim -q -precision double truth.nbs | nb-convert -q -o truth_#.bin
    nb-sim -q -precision double back.nbs | nb-convert -q -o back_#.bin
    for k in 1 2 3; do
        paste <(pixels truth_$k.bin) <(pixels back_$k.bin) > both.txt
        awk '$1 > 1' both.txt | wc -l | awk '{ exit !($1 > 50) }'
        awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * ($1 > 1 ? $1 : 1)) bad++ } END { exit bad > 0 }' both.txt
    done
    # without the spectra every still renders at one wavelength: other images
    nb-geom -q -expt model.expt $AGAIN | nb-sim -q -precision double | nb-convert -q -o mono_#.bin
    run ! cmp -s <(pixels truth_1.bin) <(pixels mono_1.bin)
}

@test "spectra: diffBragg's 'expt refl spec' lines, blanks or commas, and a weighted spectrum are read" {
    model
    printf 'wavelengths weights\n0.99 0\n1.0 1\n1.01 3\n' > w.lam
    printf '# hopper exp_ref_spec_file\nmodel.expt refl.refl w.lam\na.expt b.refl w.lam\nc d model_spectra/shot_000003.lam\n' > ers.txt
    nb-geom -q -expt model.expt -expt_spectra ers.txt $AGAIN -o w.nbs
    # frame 1's wavelength is the weights' mean, 1.0075 Angstrom
    nb-convert -q -o w.expt w.nbs
    "$PY" -c 'import json; b = json.load(open("w.expt"))["beam"]; print(b[0]["wavelength"])' > lambda.txt
    approx "$(cat lambda.txt)" 1.0075 1e-9
    nb-sim -q w.nbs -o w_img.nbs
}

@test "spectra: a malformed or empty .lam is refused, naming the file and the line" {
    model
    lam_list bad.lam
    printf '# wavelengths, weights\n1.0,1\n1.0;1\n' > bad.lam
    run nb-geom -expt model.expt -expt_spectra list.txt $AGAIN -o x.nbs
    expect_status 1
    expect_has "nb-geom: 'bad.lam' line 3: not a channel"
    printf '# h\n1.0,1\n-1.0,1\n' > bad.lam
    run nb-geom -expt model.expt -expt_spectra list.txt $AGAIN -o x.nbs
    expect_has "'bad.lam' line 3: the wavelength must be positive"
    printf '# h\n1.0,-1\n' > bad.lam
    run nb-geom -expt model.expt -expt_spectra list.txt $AGAIN -o x.nbs
    expect_has "'bad.lam' line 2: the weight must be 0 or more"
    printf '# h\n1.0,0\n1.1,0\n' > bad.lam
    run nb-geom -expt model.expt -expt_spectra list.txt $AGAIN -o x.nbs
    expect_has "'bad.lam' line 3: every weight up to here is 0"
    printf '# wavelengths, weights\n' > bad.lam
    run nb-geom -expt model.expt -expt_spectra list.txt $AGAIN -o x.nbs
    expect_has "'bad.lam' line 2: the file ends with no channel"
    awk 'BEGIN { print "# h"; for (k = 0; k < 1001; k++) printf "%.6f,1\n", 1 + k * 1e-5 }' > bad.lam
    run nb-geom -expt model.expt -expt_spectra list.txt $AGAIN -o x.nbs
    expect_has "'bad.lam' line 1002: more than 1000 channels"
    run nb-geom -expt model.expt -expt_spectra list.txt $AGAIN -o x.nbs
    [ ! -e x.nbs ] || false
}

@test "spectra: a missing .lam, a list of the wrong length, or -expt_spectra without -expt is refused" {
    model
    lam_list gone.lam
    run nb-geom -expt model.expt -expt_spectra list.txt $AGAIN -o x.nbs
    expect_status 1
    expect_has "nb-geom: cannot open 'gone.lam': No such file or directory"
    printf 'good.lam\n' > short.txt
    run nb-geom -expt model.expt -expt_spectra short.txt $AGAIN -o x.nbs
    expect_has "'short.txt' names 1 spectra, the experiment list has 3 experiments"
    run nb-geom $TRUTH -lambda 1 -expt_spectra short.txt -o x.nbs
    expect_status 2
    expect_has "-expt_spectra"
    [ ! -e x.nbs ] || false
}

@test "spectra: nb-sim --grad of a still with a shot's spectrum is the central difference" {
    # the Gaussian shape: the round one's lattice factor jumps where the
    # nearest Miller index changes, a step the difference sees and the
    # derivative (rightly) does not.  0.99: a still without spikes reaches
    # 0.97 on this check (rotation plans 0.999, tests/cli/grad.bats)
    local at="${SHOTS/-distance 100/}"
    at="${at/-round_xtal/-gauss_xtal}"
    nb-geom -q $TRUTH $at -distance 100 | nb-sim -q -precision double --grad distance --frames 2:2 |
        nb-convert -q --grad distance -o d.bin
    nb-geom -q $TRUTH $at -distance 100.01 | nb-sim -q -precision double --frames 2:2 | nb-convert -q -o plus.bin
    nb-geom -q $TRUTH $at -distance 99.99 | nb-sim -q -precision double --frames 2:2 | nb-convert -q -o minus.bin
    paste <(pixels d.bin) <(paste <(pixels plus.bin) <(pixels minus.bin) | awk '{ print ($1 - $2) / 0.02 }') > both.txt
    [ "$(awk '$1 != 0' both.txt | wc -l)" -gt 50 ] || false
    awk '{ n++; a += $1; b += $2; aa += $1 * $1; bb += $2 * $2; ab += $1 * $2 }
        END { c = (ab - a * b / n) / sqrt((aa - a * a / n) * (bb - b * b / n)); print c; exit !(c > 0.99) }' both.txt
}

@test "spectra: stills fitted with their spectra recover the crystals; --refine-frame lambda moves a frame's spectrum" {
    need_numpy_here
    nb-geom -q $TRUTH $SHOTS | nb-sim -q | nb-noise -q -seed 3 | nb-convert -q -o still_#.cbf -o model.expt
    "$PY" "$NB_ROOT/bench/dataset/perturb.py" --angle 0.2 --cell-scale 1.002 --seed 4 -o start.expt model.expt
    nb-geom -q -expt start.expt -expt_spectra model_spectra.txt $AGAIN -o start.nbs
    run -0 nb-fit --observed still_1.cbf --observed still_2.cbf --observed still_3.cbf \
        --refine cell_a,cell_b,cell_c --refine-frame rot_x,rot_y,rot_z,scale -o fit.nbs start.nbs
    echo "$output"
    [[ "$output" == *"3 frames fitted, 0 failed"* ]] || false
    nb-convert -q -o fit.expt fit.nbs
    run -0 "$PY" "$NB_ROOT/bench/dataset/evaluate.py" --json eval.json model.expt fit.expt
    echo "$output"
    "$PY" -c 'import json,sys; s=json.load(open("eval.json")); sys.exit(not (s["orientation_deg"]["max"] < 0.01 and s["cell_rel_max_abs"] < 5e-4))'
    # the fit's plan keeps the spectra, and nb-convert writes them again
    [ "$(plan_key fit.nbs FRAME_SPECTRA)" = 3 ] || false
    paste -d, model_spectra/shot_000002.lam fit_spectra/shot_000002.lam | sed 1d |
        awk -F, '{ d = $1 / $3 - 1; if (d < 0) d = -d; if (d > 1e-14 || $2 != $4) bad++; n++ } END { exit !(n == 5 && !bad) }'
    # a frame's wavelength refined: its spectrum scaled whole to it
    run -0 nb-fit --observed still_1.cbf --observed still_2.cbf --observed still_3.cbf \
        --refine-frame rot_x,rot_y,rot_z,scale,lambda -o lam.nbs fit.nbs
    nb-convert -q -o lam.expt lam.nbs
    "$PY" - <<'PY'
import json
import numpy as np
beams = json.load(open("lam.expt"))["beam"]
for k in range(3):
    w, g = np.loadtxt("lam_spectra/shot_%06d.lam" % (k + 1), delimiter=",", skiprows=1).T
    w0, _ = np.loadtxt("model_spectra/shot_%06d.lam" % (k + 1), delimiter=",", skiprows=1).T
    r = w / w0
    assert np.ptp(r) < 1e-12, r                     # scaled whole
    assert abs(w.mean() - beams[k]["wavelength"]) < 1e-12 * w.mean()
    assert abs(r[0] - 1) < 2e-3, r                  # and stays near the truth's
PY
}

@test "spectra: --refine-frame lambda brings back a wavelength 0.2 % long" {
    need_numpy_here
    nb-geom -q $TRUTH $SHOTS | nb-sim -q | nb-noise -q -seed 3 | nb-convert -q -o still_#.cbf -o model.expt
    # the start's spectra every channel x 1.002: nb-geom -expt_spectra takes a
    # frame's wavelength from its .lam (the weights' mean), not from the
    # experiment's beam, so the .lam files are what is made long
    mkdir long
    for f in model_spectra/*.lam; do
        awk -F, 'NR == 1 { print; next } { printf "%.12g,%s\n", $1 * 1.002, $2 }' "$f" > "long/${f##*/}"
    done
    sed 's|^model_spectra/|long/|' model_spectra.txt > long.txt
    nb-geom -q -expt model.expt -expt_spectra long.txt $AGAIN -o start.nbs
    nb-convert -q -o start.expt start.nbs
    run -0 nb-fit --observed still_1.cbf --observed still_2.cbf --observed still_3.cbf \
        --refine-frame rot_x,rot_y,rot_z,scale,lambda -o fit.nbs start.nbs
    echo "$output"
    [[ "$output" == *"3 frames fitted, 0 failed"* ]] || false
    nb-convert -q -o fit.expt fit.nbs
    # each frame's largest relative error of its wavelength: the start's, the fit's
    "$PY" - <<'PY' > off.txt
import json
w = {n: [b["wavelength"] for b in json.load(open(n + ".expt"))["beam"]] for n in ("model", "start", "fit")}
for n in ("start", "fit"):
    print(max(abs(a / t - 1) for a, t in zip(w[n], w["model"])))
PY
    cat off.txt
    awk 'NR == 1 { exit !($1 > 1.9e-3 && $1 < 2.1e-3) }' off.txt
    awk 'NR == 2 { exit !($1 < 2e-4) }' off.txt
}

need_numpy_here() { "$PY" -c 'import numpy' 2>/dev/null || skip "$PY has no numpy (python3-numpy)"; }
