#!/usr/bin/env bats
# nb-fit --integrated: the intensities a dataset fit measures, as DIALS's
# integrated reflection table; read back with msgpack, checked against the
# simulation's true photons, and through dials.scale and dials.merge.

load helper

PY=/usr/bin/python3
REST="-lambda 1 -distance 100 -pixel 0.4 -detpixels 192 -round_xtal -N 12 -fluence 1e27 -oversample 2 -nframes 3 -stills -misset_seed 7"
TRUTH="-cell 34 52 53 90 90 90"
OBS="--observed wilson_1.cbf --observed wilson_2.cbf --observed wilson_3.cbf"

# three stills with Wilson F (as fit-dataset.bats), their truth.jsonl, and
# the fit of each frame's scale from the true F with the table written
setup() {
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c 'import numpy' 2>/dev/null || skip "$PY has no numpy (python3-numpy)"
    "$PY" "$NB_ROOT/bench/dataset/wilson_hkl.py" --cell 34 52 53 90 90 90 --dmin 2 --space-group P212121 --seed 2 \
        -o F.hkl 2> /dev/null
    nb-geom -q $TRUTH $REST -hkl F.hkl | nb-hkl -q | tee start.nbs | nb-sim -q | nb-noise -q -seed 4 |
        nb-convert -q -o wilson_#.cbf -o truth.jsonl
}

fit() { nb-fit -q $OBS --refine-frame scale --integrated int.refl -o fit.nbs start.nbs && nb-convert -q -o fit.expt fit.nbs; }

need_msgpack() { "$PY" -c 'import msgpack' 2>/dev/null || skip "$PY has no msgpack (python3-msgpack)"; }
need_dials() {
    command -v dials.scale >/dev/null 2>&1 || skip "DIALS is not installed (dials.scale)"
    command -v dials.merge >/dev/null 2>&1 || skip "DIALS is not installed (dials.merge)"
}

# the table's columns, rows, identifiers and intensities against the truth
# (read with msgpack alone): prints what the checks below test
TABLE_PY='
import json, sys, msgpack, numpy as np
t = msgpack.unpackb(open("int.refl", "rb").read(), raw=False, strict_map_key=False)
assert t[0] == "dials::af::reflection_table" and t[1] == 1
data, n = t[2]["data"], t[2]["nrows"]
print("rows", n)
print("columns", " ".join(sorted(data)))
print("types", data["miller_index"][0], data["id"][0], data["panel"][0], data["flags"][0], data["s1"][0], data["bbox"][0])
print("identifiers", " ".join(t[2]["identifiers"][k] for k in sorted(t[2]["identifiers"])))
col = lambda k, dt, w=1: np.frombuffer(data[k][1][1], dtype=dt).reshape(n, w) if w > 1 else np.frombuffer(data[k][1][1], dtype=dt)
hkl, fid = col("miller_index", "<i4", 3), col("id", "<i4")
isum, vsum = col("intensity.sum.value", "<f8"), col("intensity.sum.variance", "<f8")
iprf, vprf, p = col("intensity.prf.value", "<f8"), col("intensity.prf.variance", "<f8"), col("partiality", "<f8")
print("partiality_in_0_1", int(np.all((p > 0) & (p <= 1))))
truth = {}
for line in open("truth.jsonl"):
    r = json.loads(line)
    for x in r["reflections"]:
        truth[(r["frame"] - 1, x[0], x[1], x[2])] = x[6]
# the reflections with 50 true photons or more: the frame photons measured
# (profile-fitted, partiality taken back out; and summed) in sigmas of the truth
z_prf, z_sum = [], []
for k in range(n):
    t_ = truth.get((int(fid[k]), *map(int, hkl[k])), 0.0)
    if t_ >= 50:
        z_prf.append((iprf[k] * p[k] - t_) / np.sqrt(vprf[k] * p[k] ** 2))
        z_sum.append((isum[k] - t_) / np.sqrt(vsum[k]))
z_prf, z_sum = np.array(z_prf), np.array(z_sum)
print("compared", len(z_prf))
print("prf_z %.3f %.3f" % (np.median(z_prf), np.std(z_prf)))
print("sum_z %.3f %.3f" % (np.median(z_sum), np.std(z_sum)))
'

@test "fit-integrated: a table of DIALS's integrated columns, its experiments those of nb-convert -o fit.expt" {
    need_msgpack
    fit
    run -0 "$PY" -c "$TABLE_PY"
    echo "$output"
    rows=$(awk '$1 == "rows" { print $2 }' <<< "$output")
    [ "$rows" -gt 300 ] || false
    for c in miller_index id panel flags intensity.sum.value intensity.sum.variance intensity.prf.value \
             intensity.prf.variance partiality d s1 xyzcal.px xyzcal.mm xyzobs.px.value bbox qe lp; do
        [[ " $(grep '^columns' <<< "$output") " == *" $c "* ]] || false
    done
    [[ "$output" == *"types cctbx::miller::index<> int std::size_t std::size_t vec3<double> int6"* ]] || false
    [[ "$output" == *"partiality_in_0_1 1"* ]] || false
    ids=$(grep -o '"identifier": "nb-[^"]*"' fit.expt | cut -d'"' -f4 | tr '\n' ' ')
    [ "identifiers ${ids% }" = "$(grep '^identifiers' <<< "$output")" ] || false
}

@test "fit-integrated: the intensities agree with the true photons of each reflection within their sigmas" {
    need_msgpack
    fit
    run -0 "$PY" -c "$TABLE_PY"
    echo "$output"
    read -r _ n <<< "$(grep '^compared' <<< "$output")"
    [ "$n" -gt 100 ] || false
    read -r _ med sd <<< "$(grep '^prf_z' <<< "$output")"
    awk -v m="$med" 'BEGIN { exit !(m > -0.5 && m < 0.5) }'
    awk -v s="$sd" 'BEGIN { exit !(s > 0.5 && s < 2) }'
    read -r _ med sd <<< "$(grep '^sum_z' <<< "$output")"
    awk -v m="$med" 'BEGIN { exit !(m > -0.5 && m < 0.5) }'
    awk -v s="$sd" 'BEGIN { exit !(s > 0.5 && s < 2) }'
}

@test "fit-integrated: dials.scale and dials.merge run on the table and the refined experiments" {
    need_dials
    fit
    run -0 dials.scale fit.expt int.refl intensity_choice=profile cut_data.partiality_cutoff=0 \
        reflection_selection.min_partiality=0 output.html=None
    run -0 dials.merge scaled.expt scaled.refl partiality_threshold=0 output.html=None
    [ -s merged.mtz ] || false
    run -0 "$PY" "$NB_ROOT/bench/dataset/merge_cc.py" --merged merged.mtz --truth-hkl F.hkl --truth-jsonl truth.jsonl \
        --min-shots 1 --json cc.json
    echo "$output"
    "$PY" -c 'import json,sys; s=json.load(open("cc.json")); sys.exit(not (s["cc_merged_I"] > 0.8 and s["cc_merged_I"] > s["cc_monte_carlo_I"] + 0.3 and s["reflections_merged"] > 1000))'
}

@test "fit-integrated: refused outside a dataset fit; an unwritable table is named and no file is left" {
    run -2 nb-fit --observed wilson_1.cbf --refine scale --integrated int.refl start.nbs
    [[ "$output" == *"option --integrated: only in a dataset fit"* ]] || false
    run ! nb-fit -q $OBS --refine-frame scale --integrated /nonexistent/int.refl -o fit.nbs start.nbs
    [[ "$output" == *"nb-fit: --integrated: cannot open '/nonexistent/int.refl'"* ]] || false
    run -0 nb-fit -q $OBS --refine-frame scale --integrated int.refl -o fit.nbs start.nbs
    [ -s int.refl ] || false
    [ -z "$(ls -A | grep '^\.int\.refl')" ] || false
}

@test "fit-integrated: mpirun -n 2 writes the same table as one process" {
    need_mpi
    fit
    nb_mpirun 2 "$NB_BIN/nb-fit" -q $OBS --refine-frame scale --integrated two.refl -o two.nbs start.nbs
    cmp int.refl two.refl
}
