#!/usr/bin/env bats
# nb-fit --integrated: the intensities a dataset fit measures, as DIALS's
# integrated reflection table; read back with msgpack, checked against the
# simulation's true photons, and through dials.scale and dials.merge.  And
# --integrated-mtz: the same rows as an unmerged MTZ, read back with iotbx
# (cctbx), gemmi and pointless where they are installed.

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

# the fit with both files (a build without CCP4's library refuses MTZ: skipped)
fit_mtz() {
    run nb-fit -q $OBS --refine-frame scale --integrated int.refl --integrated-mtz int.mtz --space-group P212121 \
        -o fit.nbs start.nbs
    [[ "$output" != *"built without CCP4's library"* ]] || skip "this nb was built without CCP4's library"
    [ "$status" -eq 0 ] || false
}
need_iotbx() { "$PY" -c 'import iotbx.mtz, msgpack' 2>/dev/null || skip "$PY has no iotbx (cctbx) or msgpack"; }

# the MTZ against the table of the same fit (iotbx reads the MTZ; msgpack
# the table): prints what the checks below test
MTZ_PY='
import math, sys, msgpack, numpy as np
from iotbx import mtz
from cctbx import miller, crystal, uctbx, sgtbx
from cctbx.array_family import flex
t = msgpack.unpackb(open("int.refl", "rb").read(), raw=False, strict_map_key=False)
data, n = t[2]["data"], t[2]["nrows"]
col = lambda k, dt, w=1: np.frombuffer(data[k][1][1], dtype=dt).reshape(n, w) if w > 1 else np.frombuffer(data[k][1][1], dtype=dt)
hkl, fid = col("miller_index", "<i4", 3), col("id", "<i4")
iprf, vprf, isum, part = col("intensity.prf.value", "<f8"), col("intensity.prf.variance", "<f8"), col("intensity.sum.value", "<f8"), col("partiality", "<f8")
s1 = col("s1", "<f8", 3)
m = mtz.object("int.mtz")
print("space_group", m.space_group_info().type().lookup_symbol().replace(" ", ""))
print("columns", " ".join(m.column_labels()))
print("rows", m.n_reflections(), "table", n)
b = np.array(m.get_column("BATCH").extract_values(), dtype=int)
print("batch_rows", " ".join(str(x) for x in sorted(set(b))))
print("batch_headers", " ".join(str(x.num()) for x in m.batches()))
print("batch_is_frame", int(np.array_equal(b, fid + 1)))
orig = np.array(m.extract_original_index_miller_indices(), dtype=int)
print("original_equal", int(np.array_equal(orig, hkl)))
H = np.array([m.get_column(c).extract_values() for c in "HKL"]).T.astype(int)
asu = miller.set(crystal.symmetry(m.crystals()[1].unit_cell(), space_group_info=m.space_group_info()), flex.miller_index([tuple(map(int, x)) for x in hkl]), anomalous_flag=True).map_to_asu()
print("asu_is_cctbx", int(np.array_equal(np.abs(np.array(asu.indices())), H)))
I = np.array(m.get_column("I").extract_values()); S = np.array(m.get_column("SIGI").extract_values())
print("I_equal", int(np.allclose(I, iprf, rtol=1e-6, atol=1e-3)))
print("SIGI_equal", int(np.allclose(S, np.sqrt(vprf), rtol=1e-6, atol=1e-6)))
print("ISUM_equal", int(np.allclose(np.array(m.get_column("ISUM").extract_values()), isum, rtol=1e-6, atol=1e-3)))
print("FRACTIONCALC_equal", int(np.allclose(np.array(m.get_column("FRACTIONCALC").extract_values()), part, rtol=1e-6)))
arrs = {a.info().label_string(): a for a in m.as_miller_arrays(merge_equivalents=False)}
ia = [a for k, a in arrs.items() if k.startswith("I,SIGI")][0]
print("unmerged", int(ia.is_xray_intensity_array() and ia.size() == n and not ia.is_unique_set_under_symmetry()))
# merged by hand: the rows of the MTZ and of the table, each by its asymmetric-unit index
def merged(idx, v, s):
    acc = {}
    for h, x, e in zip(idx, v, s):
        w = 1.0 / e ** 2
        a = acc.setdefault(h, [0.0, 0.0]); a[0] += w * x; a[1] += w
    return {h: a[0] / a[1] for h, a in acc.items()}
sg = m.space_group()
a1 = merged([tuple(x) for x in np.abs(np.array(ia.indices()))], ia.data(), ia.sigmas())
ms = asu.customized_copy(anomalous_flag=False).map_to_asu()
a2 = merged([tuple(x) for x in np.array(ms.indices())], iprf, np.sqrt(vprf))
truth = {}
for line in open("F.hkl"):
    p = line.split()
    try: truth[(int(p[0]), int(p[1]), int(p[2]))] = float(p[3]) ** 2
    except (ValueError, IndexError): pass
def cc(mm):
    k = [h for h in mm if h in truth]
    return np.corrcoef([mm[h] for h in k], [truth[h] for h in k])[0, 1], len(k)
print("cc_mtz %.5f %d" % cc(a1)); print("cc_table %.5f %d" % cc(a2))
# each batch orientation: s0 + U B h along the diffracted beam s1 of the row (Cambridge frame: DIALS x to z, -z to x)
R = np.array([[0, 0, -1], [0, 1, 0], [1, 0, 0]])
worst = 0.0
bat = {x.num(): x for x in m.batches()}
for k in range(n):
    x = bat[int(b[k])]
    U = np.array(x.umat()).reshape(3, 3).T
    uc = uctbx.unit_cell(tuple(x.cell())); rp = uc.reciprocal_parameters(); p = uc.parameters(); d = math.pi / 180
    B = np.array([[rp[0], rp[1] * math.cos(d * rp[5]), rp[2] * math.cos(d * rp[4])],
                  [0, rp[1] * math.sin(d * rp[5]), -rp[2] * math.sin(d * rp[4]) * math.cos(d * p[3])], [0, 0, 1 / p[2]]])
    q = U @ B @ hkl[k] + np.array([1 / x.alambd(), 0, 0])
    v = R @ s1[k]
    worst = max(worst, math.degrees(math.acos(min(1, q @ v / np.linalg.norm(q) / np.linalg.norm(v)))))
print("umat_orthonormal", int(all(np.allclose(np.array(x.umat()).reshape(3, 3) @ np.array(x.umat()).reshape(3, 3).T, np.eye(3), atol=1e-5) for x in m.batches())))
print("s1_angle_max_deg %.4f" % worst)

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

@test "fit-integrated: --integrated-mtz writes the table's rows as an unmerged MTZ that iotbx reads" {
    need_iotbx
    fit_mtz
    run -0 "$PY" -c "$MTZ_PY"
    echo "$output"
    [[ "$output" == *"space_group P212121"* ]] || false
    [[ "$output" == *"columns H K L M_ISYM BATCH I SIGI IPR SIGIPR ISUM SIGISUM FRACTIONCALC BG XDET YDET ROT LP QE"* ]] || false
    read -r _ rows _ table <<< "$(grep '^rows' <<< "$output")"
    [ "$rows" -gt 300 ] || false
    [ "$rows" = "$table" ] || false
    [[ "$output" == *"batch_rows 1 2 3"* ]] || false
    [[ "$output" == *"batch_headers 1 2 3"* ]] || false
    [[ "$output" == *"batch_is_frame 1"* ]] || false
    [[ "$output" == *"original_equal 1"* ]] || false
    [[ "$output" == *"asu_is_cctbx 1"* ]] || false
    [[ "$output" == *"I_equal 1"* ]] || false
    [[ "$output" == *"SIGI_equal 1"* ]] || false
    [[ "$output" == *"ISUM_equal 1"* ]] || false
    [[ "$output" == *"FRACTIONCALC_equal 1"* ]] || false
    [[ "$output" == *"unmerged 1"* ]] || false
    [[ "$output" == *"umat_orthonormal 1"* ]] || false
}

@test "fit-integrated: --integrated-mtz merged by hand agrees with the table merged; each batch's U B h lies along s1" {
    need_iotbx
    fit_mtz
    run -0 "$PY" -c "$MTZ_PY"
    echo "$output"
    read -r _ cc_mtz n_mtz <<< "$(grep '^cc_mtz' <<< "$output")"
    read -r _ cc_table n_table <<< "$(grep '^cc_table' <<< "$output")"
    [ "$n_mtz" -gt 1000 ] || false
    [ "$n_mtz" = "$n_table" ] || false
    awk -v a="$cc_mtz" -v b="$cc_table" 'BEGIN { exit !(a > 0.8 && a - b < 1e-4 && b - a < 1e-4) }'
    read -r _ angle <<< "$(grep '^s1_angle_max_deg' <<< "$output")"
    awk -v a="$angle" 'BEGIN { exit !(a < 1.5) }'
}

@test "fit-integrated: gemmi reads --integrated-mtz's columns and batches" {
    command -v gemmi >/dev/null 2>&1 || skip "gemmi is not installed"
    fit_mtz
    run -0 gemmi mtz int.mtz
    echo "$output"
    [[ "$output" == *"Number of Batches = 3"* ]] || false
    [[ "$output" == *"Space Group: P 21 21 21"* ]] || false
    for c in H K L M/ISYM BATCH I SIGI IPR SIGIPR FRACTIONCALC XDET YDET ROT; do
        grep -Eq "^$c +[A-Z] " <<< "$output" || false
    done
    grep -Eq '^M/ISYM +Y ' <<< "$output" || false
    grep -Eq '^BATCH +B +1 +1 +3$' <<< "$output" || false
    [[ "$output" == *"dataset 1: 1-3"* ]] || false
}

@test "fit-integrated: pointless reads --integrated-mtz as unmerged data" {
    command -v pointless >/dev/null 2>&1 || skip "CCP4's pointless is not installed"
    fit_mtz
    run -0 pointless HKLIN int.mtz HKLOUT sorted.mtz <<< ""
    [ -s sorted.mtz ] || false
}

@test "fit-integrated: --integrated-mtz refused outside a dataset fit; an unwritable file is named and no file is left" {
    run -2 nb-fit --observed wilson_1.cbf --refine scale --integrated-mtz int.mtz start.nbs
    [[ "$output" == *"option --integrated-mtz: only in a dataset fit"* ]] || false
    run ! nb-fit -q $OBS --refine-frame scale --integrated-mtz /nonexistent/int.mtz -o fit.nbs start.nbs
    [[ "$output" != *"built without CCP4's library"* ]] || skip "this nb was built without CCP4's library"
    [[ "$output" == *"nb-fit: --integrated-mtz: cannot write '/nonexistent/int.mtz'"* ]] || false
    run ! nb-fit -q $OBS --refine-frame scale --integrated-mtz int.mtz --space-group 'Q 9' -o fit.nbs start.nbs
    [[ "$output" == *"Q 9"* ]] || false
    [ ! -e int.mtz ] || false
    run -0 nb-fit -q $OBS --refine-frame scale --integrated-mtz int.mtz -o fit.nbs start.nbs
    [ -s int.mtz ] || false
    [ -z "$(ls -A | grep '^int\.mtz\.tmp')" ] || false
}
