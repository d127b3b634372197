#!/usr/bin/env bats
# nb-fit --spots FILE.refl: the spots dials.find_spots found, tied to the
# plan's frames by their experiments' identifiers, in place of nb's own
# spot finding; the identifiers kept through the fit; tables refused with a
# reason.

load helper

PY=/usr/bin/python3
# three stills of a P 21 21 21 crystal, as fit-dataset.bats makes them
REST="-lambda 1 -distance 100 -pixel 0.4 -detpixels 192 -round_xtal -N 12 -fluence 1e27 -oversample 2 -default_F 100 -nframes 3 -stills -misset_seed 7"
XTAL="-N 12 -round_xtal -fluence 1e27 -oversample 2 -default_F 100"
FIT="--refine cell_a,cell_b,cell_c --refine-frame rot_x,rot_y,rot_z,scale --threads 2"

have_dials() {
    command -v dials.find_spots >/dev/null 2>&1 && "$PY" -c 'import dxtbx, dials.array_family.flex' 2>/dev/null
}
need_dials() {
    have_dials || skip "DIALS is not installed (dials.find_spots, its Python)"
}

# The stills, the truth's list, a start turned 0.3 degrees whose
# experiments DIALS's way are named by UUIDs (as dials.index's indexed.expt),
# its plan, and dials.find_spots' table of the stills for that list
setup_file() {
    cd "$BATS_FILE_TMPDIR"
    nb-geom -q -cell 34 52 53 90 90 90 $REST | nb-sim -q | nb-noise -q -seed 3 | nb-convert -q -o still_#.cbf -o model.expt
    "$PY" "$NB_ROOT/bench/dataset/perturb.py" --angle 0.3 --cell-scale 1.003 --seed 4 -o perturbed.expt model.expt
    "$PY" - perturbed.expt indexed.expt <<'EOF'
import json, sys
l = json.load(open(sys.argv[1]))
for i, e in enumerate(l["experiment"]):
    e["identifier"] = "5e1f0c2a-77aa-4b2e-9d00-00000000000%d" % (i + 1)
json.dump(l, open(sys.argv[2], "w"), indent=1)
EOF
    nb-geom -q -expt indexed.expt $XTAL -o start.nbs
    if have_dials; then
        dials.find_spots indexed.expt nproc=2 output.reflections=strong.refl output.log=find.log >/dev/null 2>&1
    fi
}

setup() {
    cd "$BATS_FILE_TMPDIR"
}

# the table strong.refl changed by Python lines (t: the table, flex imported) into $1
table_edit() {
    local out=$1 code=$2
    "$PY" - "$out" <<EOF
import sys
from dials.array_family import flex
t = flex.reflection_table.from_file("strong.refl")
$code
t.as_file(sys.argv[1])
EOF
}

# frame $1's verdict line in $output (nb-fit -v)
verdict() {
    grep "^frame $1: deviance ratio" <<< "$output"
}

# "NAME VALUE SIGMA" for every frame's and shared value nb-fit -v printed in file $1
values() {
    awk '$1 == "frame" && $4 == "=" { for (i = 3; i + 4 <= NF; i += 5) if ($(i + 1) == "=") print $2 $i, $(i + 2), $(i + 4) }
         $2 == "=" && NF >= 5 { print $1, $3, $5 }' "$1"
}

@test "fit-spots: with dials.find_spots' table the fit equals nb's own spots' within its sigmas" {
    need_dials
    skip_dials_processing_if_sanitized
    run -0 nb-fit -v $FIT --observed still_#.cbf -o own.nbs start.nbs
    echo "$output" > own.err
    run -0 nb-fit -v $FIT --observed still_#.cbf --spots strong.refl -o spots.nbs start.nbs
    echo "$output" > spots.err
    [[ "$output" == *"'strong.refl': "*" spots: "*" on the plan's 3 frames, 0 of no experiment"* ]] || false
    [[ "$output" == *"3 frames fitted, 0 failed"* ]] || false
    values own.err > own.txt
    values spots.err > spots.txt
    cat own.txt
    [ "$(wc -l < own.txt)" -eq 15 ] || false
    # each value of one fit within the other's sigma
    join <(sort own.txt) <(sort spots.txt) > both.txt
    [ "$(wc -l < both.txt)" -eq 15 ] || false
    awk '{ d = $2 - $4; if (d < 0) d = -d; if (!(d <= $3)) { print "off:", $0; bad = 1 } } END { exit bad }' both.txt
}

@test "fit-spots: the table's identifiers are kept in the refined list, and DIALS compares it with the truth" {
    need_dials
    skip_dials_processing_if_sanitized
    nb-fit -q $FIT --observed still_#.cbf --spots strong.refl start.nbs | nb-convert -q -o fit.expt
    run -0 "$PY" - indexed.expt fit.expt <<'EOF'
import json, sys
ids = [[e["identifier"] for e in json.load(open(p))["experiment"]] for p in sys.argv[1:]]
print(ids)
sys.exit(not (ids[0] == ids[1] and len(set(ids[0])) == 3))
EOF
    run -0 dials.compare_orientation_matrices model.expt fit.expt
    [[ "$output" == *"Rotation matrix"* ]] || false
}

@test "fit-spots: rows of no experiment (id -1) are left out and counted" {
    need_dials
    table_edit some-unindexed.refl 'ids = t["id"]
ids[0] = -1
ids[5] = -1
t["id"] = ids'
    run -0 nb-fit -v $FIT --iterations 1 --global off --observed still_#.cbf --spots some-unindexed.refl -o /dev/null start.nbs
    [[ "$output" == *"on the plan's 3 frames, 2 of no experiment (not indexed), 0 of other experiments"* ]] || false
}

@test "fit-spots: a table of other experiments (dials.import's own identifiers) is refused, naming both" {
    need_dials
    dials.import still_*.cbf output.experiments=imported.expt output.log=import.log >/dev/null 2>&1
    dials.find_spots imported.expt nproc=2 output.reflections=other.refl output.log=other.log >/dev/null 2>&1
    run -1 nb-fit $FIT --observed still_#.cbf --spots other.refl -o out.nbs start.nbs
    [[ "$output" == *"'other.refl': none of its spots is of an experiment of the plan"* ]] || false
    [[ "$output" == *"5e1f0c2a-77aa-4b2e-9d00-000000000001"* ]] || false
    [ ! -e out.nbs ] || false
}

@test "fit-spots: a table without centroids, without identifiers, or with a panel the plan lacks is refused" {
    need_dials
    table_edit no-xyz.refl 'del t["xyzobs.px.value"]'
    run -1 nb-fit $FIT --observed still_#.cbf --spots no-xyz.refl start.nbs
    [[ "$output" == *"'no-xyz.refl': the table has no column 'xyzobs.px.value' (the spots' centroids)"* ]] || false
    table_edit no-ids.refl 'n = flex.reflection_table()
for k in ("id", "panel", "xyzobs.px.value", "bbox"):
    n[k] = t[k]
t = n'
    run -1 nb-fit $FIT --observed still_#.cbf --spots no-ids.refl start.nbs
    [[ "$output" == *"'no-ids.refl': the table names no experiments (no identifiers)"* ]] || false
    table_edit panel4.refl 'p = t["panel"]
p[3] = 4
t["panel"] = p'
    run -1 nb-fit $FIT --observed still_#.cbf --spots panel4.refl start.nbs
    [[ "$output" == *"'panel4.refl': row 4: panel 4, the plan has 1"* ]] || false
}

@test "fit-spots: a file that is no table, a missing one, and --spots outside a dataset fit are refused" {
    run -1 nb-fit $FIT --observed still_#.cbf --spots still_1.cbf start.nbs
    [[ "$output" == *"'still_1.cbf': not a DIALS reflection table"* ]] || false
    run -1 nb-fit $FIT --observed still_#.cbf --spots nothing.refl start.nbs
    [[ "$output" == *"cannot open 'nothing.refl'"* ]] || false
    # a table of dials.find_spots (six rows, the shoeboxes left out) cut short
    head -c 500 "$NB_ROOT/tests/fuzz/corpus/dials_refl/strong-6rows.refl" > cut.refl
    run -1 nb-fit $FIT --observed still_#.cbf --spots cut.refl start.nbs
    [[ "$output" == *"'cut.refl': not a DIALS reflection table (its msgpack ends early or is not msgpack)"* ]] || false
    nb-geom -q -cell 34 52 53 90 90 90 -lambda 1 -distance 100 -pixel 0.4 -detpixels 192 -N 12 -default_F 100 -o one.nbs
    run -2 nb-fit --observed still_1.cbf --refine distance --spots strong.refl one.nbs
    [[ "$output" == *"option --spots: only with --refine-frame or --refine-F"* ]] || false
}

@test "fit-spots: a sweep's spots go to the frames of their images (z); an image past its frames is refused" {
    need_dials
    nb-geom -q -cell 34 52 53 90 90 90 -lambda 1 -distance 100 -pixel 0.4 -detpixels 192 -round_xtal -N 12 \
        -fluence 1e27 -default_F 100 -osc 0.5 -nframes 3 -o sweep.nbs
    nb-sim -q sweep.nbs | nb-noise -q -seed 3 | nb-convert -q -o sweep_#.cbf -o sweep.expt
    dials.find_spots sweep.expt nproc=2 output.reflections=sweep.refl output.log=sweep-find.log >/dev/null 2>&1
    "$PY" - <<'PYEOF'
from dials.array_family import flex
t = flex.reflection_table.from_file("sweep.refl")
x, y, z = t["xyzobs.px.value"].parts()
assert min(z) < 1 and max(z) > 2, (min(z), max(z))
t["xyzobs.px.value"] = flex.vec3_double(x, y, flex.double(len(z), 0.5))
t.as_file("first-image.refl")
t["xyzobs.px.value"] = flex.vec3_double(x, y, z + 1.0)
t.as_file("one-later.refl")
PYEOF
    run -0 nb-fit -v --refine-frame scale --observed sweep_#.cbf --spots sweep.refl -o /dev/null sweep.nbs
    [[ "$output" == *"'sweep.refl': "*" on the plan's 3 frames, 0 of no experiment"* ]] || false
    [[ "$output" != *" 0 of 0 strong observed ones predicted"* ]] || false
    # every spot on the first image: the other two frames have none
    run -0 nb-fit -v --refine-frame scale --observed sweep_#.cbf --spots first-image.refl -o /dev/null sweep.nbs
    [[ "$(verdict 2)" == *" 0 of 0 strong observed ones predicted"* ]] || false
    [[ "$(verdict 3)" == *" 0 of 0 strong observed ones predicted"* ]] || false
    [[ "$(verdict 1)" == *" of "*" strong observed ones predicted"* ]] || false
    [[ "$(verdict 1)" != *" 0 of 0 strong observed ones predicted"* ]] || false
    run -1 nb-fit --refine-frame scale --observed sweep_#.cbf --spots one-later.refl -o /dev/null sweep.nbs
    [[ "$output" == *"'one-later.refl': row "*": image 3."*" is not one of experiment 'nb-"*"''s 3 frames"* ]] || false
}
