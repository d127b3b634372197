#!/usr/bin/env bats
# nb-hkl -model: structure factors computed from an atomic model by gemmi
# sfcalc (tools/nb_hkl_model.c; docs/architecture.md section 14).  The gate:
# the F grid nb-hkl makes (Fdump.bin) from examples/helices.pdb (P 21 21 21)
# and from the same bundle in P 31 2 1, C 1 2 1 and P -1
# (examples/helices.py) equals cctbx's direct summation over the atoms
# (tests/tools/sf_model_check.py, the same IT1992 form factors): correlation
# >= 0.99999, every F above a tenth of the mean within 1 %, every index
# inside d_min there and none beyond.  Then the resolution (the detector's
# edge, the plan's -dmin, nb-hkl's), the bulk solvent, f', and the errors:
# gemmi missing or failing, usage.  Skipped with a reason without gemmi (or,
# for the gate, cctbx: Debian's dials); the usage errors need neither.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}
MODEL="$NB_ROOT/examples/helices.pdb"
HELICES="$NB_ROOT/examples/helices.py"
# the example's cell, 64 x 64 pixels of 1 mm at 50 mm: 1.45 A in the corners
PLAN_ARGS="-cell 34 52 53 90 90 90 -misset 10 20 30 -lambda 1 -N 3 -distance 50 -detpixels 64 -pixel 1"

setup_file() {
    export SFM_DIR="$BATS_FILE_TMPDIR/sfm"
    mkdir -p "$SFM_DIR"
    PATH="$NB_BIN:$PATH"
    # shellcheck disable=SC2086
    nb-geom -q $PLAN_ARGS -o "$SFM_DIR/plan.nbs"
}

setup() {
    NB_TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/nbcli.XXXXXX")"
    cd "$NB_TMP" || return 1
    # nb-hkl's temporary files go here: each test checks that none is left
    mkdir tmp
    export TMPDIR="$NB_TMP/tmp"
}

# gemmi (or $NB_GEMMI) and an nb-hkl that reads MTZ (CCP4's library)
need_gemmi() {
    command -v "${NB_GEMMI:-gemmi}" >/dev/null || skip "gemmi is not installed (Debian: apt-get install gemmi)"
    nb-hkl -model "$MODEL" -dmin 20 "$SFM_DIR/plan.nbs" -o probe.nbs 2>probe.err ||
        skip "this nb-hkl cannot compute F from a model: $(head -1 probe.err)"
    rm -f probe.nbs probe.err
}

need_cctbx() {
    "$PY" -c 'import iotbx.pdb' 2>/dev/null || skip "$PY cannot import iotbx.pdb (cctbx: Debian's dials package)"
}

# no temporary file of nb-hkl's left
no_temporaries() {
    [ -z "$(ls -A tmp)" ] || { echo "left in TMPDIR: $(ls -A tmp)"; return 1; }
}

# F at h k l in an Fdump.bin, "outside" beyond its box
dump_F() {
    "$PY" - "$@" <<'PY'
import struct, sys
path, h, k, l = sys.argv[1], *map(int, sys.argv[2:5])
data = open(path, "rb").read()
head, body = data.split(b"\n\f", 1)
h0, h1, k0, k1, l0, l1 = map(int, head.split())
kr, lr = k1 - k0 + 2, l1 - l0 + 2
if not (h0 <= h <= h1 and k0 <= k <= k1 and l0 <= l <= l1):
    print("outside")
else:
    print(struct.unpack_from("d", body, 8 * (((h - h0) * kr + (k - k0)) * lr + (l - l0)))[0])
PY
}

# the mean F of an Fdump.bin over the indices with d between lo and hi (A) in an orthogonal cell a b c
mean_F() {
    "$PY" - "$@" <<'PY'
import struct, sys
path, a, b, c, lo, hi = sys.argv[1], *map(float, sys.argv[2:7])
data = open(path, "rb").read()
head, body = data.split(b"\n\f", 1)
h0, h1, k0, k1, l0, l1 = map(int, head.split())
kr, lr = k1 - k0 + 2, l1 - l0 + 2
n = s = 0
for h in range(h0, h1 + 1):
    for k in range(k0, k1 + 1):
        for l in range(l0, l1 + 1):
            q = (h / a) ** 2 + (k / b) ** 2 + (l / c) ** 2
            if q > 0 and lo <= q ** -0.5 < hi:
                f = struct.unpack_from("d", body, 8 * (((h - h0) * kr + (k - k0)) * lr + (l - l0)))[0]
                if f:
                    n, s = n + 1, s + f
print(s / n)
PY
}

@test "sf-model gate: F of examples/helices.pdb and of the bundle in P 31 2 1, C 1 2 1, P -1 equal cctbx's" {
    need_gemmi
    need_cctbx
    run_nb nb-hkl -v -model "$MODEL" -dmin 2.5 -dump helices.bin "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 0
    expect_has "computing F of the model $MODEL with gemmi sfcalc to 2.5 A (-dmin), no bulk solvent"
    expect_has "values in space group P 21 21 21 (4 operators)"
    expect_has " 0 indices inside its resolution missing from the file"
    local check=(helices.pdb helices.bin 2.5) tag sg cell at
    cp "$MODEL" helices.pdb
    while read -r tag sg cell at; do
        # shellcheck disable=SC2086
        "$PY" "$HELICES" --space-group "${sg//_/ }" --cell ${cell//,/ } --turn 0 0 0 --at ${at//,/ } > "$tag.pdb"
        # shellcheck disable=SC2086
        nb-geom -q -cell ${cell//,/ } -lambda 1 -N 3 -distance 50 -detpixels 64 -pixel 1 -o "$tag.nbs"
        run_nb nb-hkl -v -model "$tag.pdb" -dmin 3 -dump "$tag.bin" "$tag.nbs" -o /dev/null
        expect_status 0
        check+=("$tag.pdb" "$tag.bin" 3)
    done <<'EOF'
p3121 P_31_2_1 80,80,80,90,90,120 0.5,0.2,0.25
c2 C_1_2_1 90,50,70,90,105,90 0.25,0.25,0.25
p1bar P_-1 50,55,60,80,95,105 0.25,0.25,0.25
EOF
    run "$PY" "$NB_ROOT/tests/tools/sf_model_check.py" --gates 0.99999 0.01 "${check[@]}"
    echo "$output"
    expect_status 0
    [ "${#lines[@]}" -eq 4 ] || false
    no_temporaries
}

@test "sf-model: the resolution is -dmin, else the plan's -dmin, else the detector's edge" {
    need_gemmi
    # 64 pixels of 1 mm at 50 mm, the beam (along x) 33 mm from the corner
    # PIX0 of pixel 0 0 in both directions and 31 from the others: 1/d at
    # that corner, and half the reciprocal cell's diagonal beyond
    local pix0 want
    pix0=$(plan_key "$SFM_DIR/plan.nbs" PIX0)
    [ "$pix0" = "0.05 0.033 -0.033" ] || false
    want=$(echo "$pix0" | awk '{ r = sqrt($1^2 + $2^2 + $3^2); inv = sqrt(($1 / r - 1)^2 + ($2 / r)^2 + ($3 / r)^2);
                               diag = sqrt(1 / 34^2 + 1 / 52^2 + 1 / 53^2); printf "%.4g %.4g", 1 / (inv + 0.5 * diag), 1 / (inv + 2 * diag) }')
    run_nb nb-hkl -v -model "$MODEL" "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 0
    expect_has "to ${want% *} A (the detector's edge)"
    # with -interpolate two diagonals beyond
    # shellcheck disable=SC2086
    nb-geom -q $PLAN_ARGS -interpolate -o interp.nbs
    run_nb nb-hkl -v -model "$MODEL" interp.nbs -o h.nbs
    expect_status 0
    expect_has "to ${want#* } A (the detector's edge)"
    # the plan's -dmin, and nb-hkl's over it
    # shellcheck disable=SC2086
    nb-geom -q $PLAN_ARGS -dmin 3.5 -o dmin.nbs
    run_nb nb-hkl -v -model "$MODEL" -dump plan.bin dmin.nbs -o h.nbs
    expect_status 0
    expect_has "to 3.5 A (the plan's -dmin)"
    run_nb nb-hkl -v -model "$MODEL" -dmin 5 -dump own.bin dmin.nbs -o h.nbs
    expect_status 0
    expect_has "to 5 A (-dmin)"
    # 2 0 0 (d 17 A) in both (the FFT's grids differ: within 1e-3), 8 0 0
    # (d 4.25 A) only to 3.5 A, 10 0 0 (d 3.4 A) in neither
    approx "$(dump_F plan.bin 2 0 0)" "$(dump_F own.bin 2 0 0)" 1e-3
    [ "$(dump_F plan.bin 8 0 0)" != 0.0 ] || false
    [ "$(dump_F plan.bin 8 0 0)" != outside ] || false
    [ "$(dump_F own.bin 8 0 0)" = outside ] || false
    [ "$(dump_F plan.bin 10 0 0)" = outside ] || false
    no_temporaries
}

@test "sf-model: -ksol 0 is no bulk solvent; -ksol 0.35 -bsol 46 lowers the low-resolution F, not the high" {
    need_gemmi
    nb-hkl -q -model "$MODEL" -dmin 3 -dump plain.bin "$SFM_DIR/plan.nbs" -o h.nbs
    nb-hkl -q -model "$MODEL" -dmin 3 -ksol 0 -dump zero.bin "$SFM_DIR/plan.nbs" -o h.nbs
    cmp plain.bin zero.bin
    run_nb nb-hkl -v -model "$MODEL" -dmin 3 -ksol 0.35 -bsol 46 -dump solvent.bin "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 0
    expect_has "bulk solvent: k_sol 0.35 e/A^3, B_sol 46 A^2"
    run ! cmp -s plain.bin solvent.bin
    # below 10 A the solvent cancels much of the protein's contrast; at 3-3.5 A
    # exp(-B_sol / 4 d^2) leaves it next to nothing
    local low_plain low_solvent high_plain high_solvent
    low_plain=$(mean_F plain.bin 34 52 53 10 100)
    low_solvent=$(mean_F solvent.bin 34 52 53 10 100)
    high_plain=$(mean_F plain.bin 34 52 53 3 3.5)
    high_solvent=$(mean_F solvent.bin 34 52 53 3 3.5)
    echo "mean F beyond 10 A: $low_plain, with solvent $low_solvent; 3-3.5 A: $high_plain, $high_solvent"
    awk -v a="$low_solvent" -v b="$low_plain" 'BEGIN { exit !(a < 0.8 * b) }'
    awk -v a="$high_solvent" -v b="$high_plain" 'BEGIN { d = a / b - 1; exit !(d < 0.05 && d > -0.05) }'
    # -bsol alone: gemmi's k_sol 0.35
    nb-hkl -q -model "$MODEL" -dmin 3 -bsol 46 -dump bsol.bin "$SFM_DIR/plan.nbs" -o h.nbs
    cmp solvent.bin bsol.bin
    no_temporaries
}

@test "sf-model: -fprime adds f' at the plan's wavelength; Friedel mates stay equal" {
    need_gemmi
    # near sulfur's K edge (5.02 A) the methionines' f' is large
    # shellcheck disable=SC2086
    nb-geom -q ${PLAN_ARGS/-lambda 1/-lambda 5.2} -o long.nbs
    nb-hkl -q -model "$MODEL" -dmin 6 -dump none.bin long.nbs -o h.nbs
    run_nb nb-hkl -v -model "$MODEL" -dmin 6 -fprime -dump fp.bin long.nbs -o h.nbs
    expect_status 0
    expect_has "f' of every element at 5.2 A (no f'': F(-h) = F(h))"
    run ! cmp -s none.bin fp.bin
    [ "$(dump_F fp.bin 1 2 3)" = "$(dump_F fp.bin -1 -2 -3)" ] || false
    [ "$(dump_F fp.bin 1 2 3)" != "$(dump_F none.bin 1 2 3)" ] || false
    no_temporaries
}

@test "sf-model: a cell that is not the plan's is warned about; -model overrides the plan's -hkl" {
    need_gemmi
    nb-geom -q -cell 35 52 53 90 90 90 -lambda 1 -N 3 -distance 50 -detpixels 64 -pixel 1 -hkl none.hkl -o other.nbs
    run_nb nb-hkl -v -model "$MODEL" -dmin 4 other.nbs -o h.nbs
    expect_status 0
    expect_has "nb-hkl: warning: the model's cell 34 52 53 90 90 90 is not the plan's 35 52 53 90 90 90"
    expect_has "-model $MODEL in place of the plan's -hkl none.hkl"
    run_nb nb-hkl -v -model "$MODEL" -dmin 4 "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 0
    expect_lacks "warning"
}

@test "sf-model: gemmi missing is a runtime error naming it, nothing written" {
    need_ccp4
    NB_GEMMI=/nonexistent/gemmi run_nb nb-hkl -model "$MODEL" -dmin 4 "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 1
    expect_has "nb-hkl: -model needs gemmi (Debian's package gemmi: apt-get install gemmi), and '/nonexistent/gemmi' cannot be run: No such file or directory"
    [ ! -e h.nbs ] || false
    no_temporaries
}

@test "sf-model: a model gemmi cannot read is a data error with gemmi's words, nothing written" {
    need_gemmi
    printf 'not a model\n' > junk.pdb
    run_nb nb-hkl -model junk.pdb -dmin 4 "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 1
    expect_has "nb-hkl: gemmi sfcalc cannot compute the structure factors of 'junk.pdb' (exit status 1); it said:"
    [ ! -e h.nbs ] || false
    # no CRYST1: no cell, no space group
    grep -v '^CRYST1' "$MODEL" > nocell.pdb
    run_nb nb-hkl -model nocell.pdb -dmin 4 "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 1
    expect_has "gemmi sfcalc cannot compute the structure factors of 'nocell.pdb'"
    [ ! -e h.nbs ] || false
    no_temporaries
}

@test "sf-model: a model that is not there is refused before gemmi runs" {
    NB_GEMMI=/nonexistent/gemmi run_nb nb-hkl -model none.pdb -dmin 4 "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 1
    expect_has "nb-hkl: cannot open 'none.pdb': No such file or directory"
    [ ! -e h.nbs ] || false
}

@test "sf-model: usage errors: -dmin and the solvent without -model, -model with -hkl or -column" {
    run_nb nb-hkl -dmin 2 -hkl x.hkl "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 2
    expect_has "nb-hkl: -dmin is for -model (structure factors computed from a model)"
    run_nb nb-hkl -ksol 0.3 -default_F 1 "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 2
    expect_has "-ksol is for -model"
    run_nb nb-hkl -fprime -default_F 1 "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 2
    expect_has "-fprime is for -model"
    run_nb nb-hkl -model "$MODEL" -hkl x.hkl "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 2
    expect_has "give one source of structure factors"
    run_nb nb-hkl -model "$MODEL" -column FC "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 2
    expect_has "-column FC: -model $MODEL has no columns to choose from"
    run_nb nb-hkl -model "$MODEL" -dmin 0 "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 2
    expect_has "must be positive"
    run_nb nb-hkl -model "$MODEL" -ksol -1 "$SFM_DIR/plan.nbs" -o h.nbs
    expect_status 2
    expect_has "must not be negative"
    [ ! -e h.nbs ] || false
}

@test "sf-model: the README's picture: the example model renders Bragg spots through the pipeline" {
    need_gemmi
    # shellcheck disable=SC2086
    nb-geom -q $PLAN_ARGS | nb-hkl -q -model "$MODEL" -dmin 3 | nb-sim -q | nb-convert -q -o img.bin
    # spots: a few pixels far above the mean
    pixels img.bin | awk '{ s += $1; n++; if ($1 > m) m = $1 } END { exit !(n == 4096 && m > 50 * s / n) }'
    no_temporaries
}

@test "sf-model: examples/helices.py writes examples/helices.pdb as it is committed" {
    "$PY" -c 'import numpy' 2>/dev/null || skip "$PY cannot import numpy"
    "$PY" "$HELICES" > helices.pdb
    cmp helices.pdb "$MODEL"
    # and refuses a cell where the bundle would touch a copy of itself
    run "$PY" "$HELICES" --cell 30 30 30 90 90 90
    [ "$status" -ne 0 ] || false
    [[ "$output" == *"comes"*"from a copy of itself"* ]] || false
}
