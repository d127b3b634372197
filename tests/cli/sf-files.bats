#!/usr/bin/env bats
# nb-hkl -hkl with the field's structure-factor files (formats/mtz.c by CCP4's
# library, formats/sf_cif.c, formats/sf_expand.c).  The gate: an MTZ and an
# mmCIF file written by cctbx (tests/tools/sf_files.py: P 21 21 21, 5006
# amplitudes exact in float32 and as short decimals), expanded by nb-hkl,
# give the same F grid (Fdump.bin, cmp) and render the same image bit for
# bit (double path, cmp) as the P1 'h k l F' list cctbx expands from the
# same data with its Friedel mates; intensities become amplitudes; an
# anomalous pair keeps F(+) and F(-) apart (cctbx's anomalous P1 list);
# missing reflections are counted and take -default_F; the -column rule's
# errors are usage errors.  Skipped with a reason when /usr/bin/python3
# cannot import iotbx.mtz (Debian's dials) or nb-hkl was built without CCP4.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}
# a cell that puts a few hundred reflections on 64 x 64 pixels of 1 mm
SF_PLAN="-cell 30 34 38 90 90 90 -misset 10 20 30 -lambda 1 -N 2 -distance 50 -detpixels 64 -pixel 1"

setup_file() {
    export SF_DIR="$BATS_FILE_TMPDIR/sf"
    mkdir -p "$SF_DIR"
    cd "$SF_DIR" || return 1
    PATH="$NB_BIN:$PATH"
    if "$PY" -c 'import iotbx.mtz, iotbx.cif' 2>/dev/null; then
        "$PY" "$NB_ROOT/tests/tools/sf_files.py" "$SF_DIR" > gen.log 2>&1 || echo "sf_files.py failed" > gen.err
    else
        echo "$PY cannot import iotbx.mtz (cctbx: Debian's dials package)" > gen.err
    fi
    # shellcheck disable=SC2086
    nb-geom -q $SF_PLAN -o plan.nbs
}

need_files() {
    [ ! -s "$SF_DIR/gen.err" ] || skip "$(cat "$SF_DIR/gen.err")"
    nb-hkl -hkl "$SF_DIR/x.mtz" -column FP "$SF_DIR/plan.nbs" -o probe.nbs 2>probe.err ||
        skip "this nb-hkl does not read MTZ: $(head -1 probe.err)"
    rm -f probe.nbs probe.err
}

# the image the double path renders from structure factors FILE [nb-hkl flags]
render() {
    local out=$1
    shift
    nb-hkl "$@" "$SF_DIR/plan.nbs" | nb-sim -q -precision double | nb-convert -q -o "$out"
}

# F at h k l in an Fdump.bin (the reference's layout)
dump_F() {
    "$PY" - "$@" <<'PY'
import struct, sys
path, h, k, l = sys.argv[1], *map(int, sys.argv[2:5])
data = open(path, "rb").read()
head, body = data.split(b"\n\f", 1)
h0, h1, k0, k1, l0, l1 = map(int, head.split())
kr, lr = k1 - k0 + 2, l1 - l0 + 2
print(struct.unpack_from("d", body, 8 * (((h - h0) * kr + (k - k0)) * lr + (l - l0)))[0])
PY
}

@test "sf-files gate: cctbx's MTZ expanded by nb-hkl is cctbx's P1 list, grid and image bit for bit" {
    need_files
    run_nb nb-hkl -hkl "$SF_DIR/x.mtz" -column FP -dump mtz.bin "$SF_DIR/plan.nbs" -o mtz.nbs
    expect_status 0
    nb-hkl -hkl "$SF_DIR/p1.hkl" -dump text.bin "$SF_DIR/plan.nbs" -o text.nbs
    cmp mtz.bin text.bin
    [ "$(nb_key mtz.nbs HKLS)" = "$(wc -l < "$SF_DIR/p1.hkl")" ]
    render mtz.img -hkl "$SF_DIR/x.mtz" -column FP
    render text.img -hkl "$SF_DIR/p1.hkl"
    cmp mtz.img text.img
    # and the image holds spots that the values decide: FC renders another
    render fc.img -hkl "$SF_DIR/x.mtz" -column FC
    run ! cmp -s mtz.img fc.img
    render fc_text.img -hkl "$SF_DIR/p1_fc.hkl"
    cmp fc.img fc_text.img
    [ "$(pixels mtz.img | awk '$1 > 1 { n++ } END { print n + 0 }')" -gt 100 ]
}

@test "sf-files gate: cctbx's mmCIF expanded by nb-hkl is the same P1 list, grid and image" {
    need_files
    run_nb nb-hkl -v -hkl "$SF_DIR/x.cif" -dump cif.bin "$SF_DIR/plan.nbs" -o cif.nbs
    expect_status 0
    expect_has "reading mmCIF $SF_DIR/x.cif, item _refln.f_meas (amplitudes)"
    expect_has "space group P 21 21 21 (4 operators)"
    nb-hkl -hkl "$SF_DIR/p1.hkl" -dump text.bin "$SF_DIR/plan.nbs" -o text.nbs
    cmp cif.bin text.bin
    render cif.img -hkl "$SF_DIR/x.cif"
    render text.img -hkl "$SF_DIR/p1.hkl"
    cmp cif.img text.img
    # -column names the item, with or without its category, in any case
    nb-hkl -hkl "$SF_DIR/x.cif" -column _refln.F_meas -dump named.bin "$SF_DIR/plan.nbs" -o named.nbs
    cmp named.bin text.bin
}

@test "sf-files: other space groups (C 2, P 61 2 2, R 3 :H, I 41/a, F 2 3, P -1): cctbx's P1 lists, and nothing missing" {
    need_files
    local tag symbol
    while read -r tag symbol; do
        nb-hkl -hkl "$SF_DIR/sg_${tag}_f.hkl" -dump text.bin "$SF_DIR/plan.nbs" -o t.nbs
        run_nb nb-hkl -v -hkl "$SF_DIR/sg_${tag}_f.mtz" -dump mtz.bin "$SF_DIR/plan.nbs" -o m.nbs
        expect_status 0
        expect_has " 0 indices inside its resolution missing from the file"
        cmp mtz.bin text.bin || { echo "$symbol: the MTZ's grid differs"; return 1; }
        run_nb nb-hkl -v -hkl "$SF_DIR/sg_${tag}_f.cif" -dump cif.bin "$SF_DIR/plan.nbs" -o c.nbs
        expect_status 0
        expect_has "space group ${symbol//_/ }"
        expect_has " 0 indices inside its resolution missing from the file"
        cmp cif.bin text.bin || { echo "$symbol: the mmCIF's grid differs"; return 1; }
        nb-hkl -hkl "$SF_DIR/sg_${tag}_a.hkl" -dump text.bin "$SF_DIR/plan.nbs" -o t.nbs
        nb-hkl -hkl "$SF_DIR/sg_${tag}_a.mtz" -column F -dump anom.bin "$SF_DIR/plan.nbs" -o a.nbs
        cmp anom.bin text.bin || { echo "$symbol: the anomalous MTZ's grid differs"; return 1; }
    done < "$SF_DIR/SPACE_GROUPS"
}

@test "sf-files: two amplitude columns and no -column is a usage error listing the candidates" {
    need_files
    run_nb nb-hkl -hkl "$SF_DIR/x.mtz" "$SF_DIR/plan.nbs" -o h.nbs
    expect_status 2
    expect_has "nb-hkl: '$SF_DIR/x.mtz' has more than one amplitude column (type F): choose with -column LABEL"
    expect_has "FP (F), FC (F), I (J), FA(+),FA(-) (G pair), IA(+),IA(-) (K pair)"
    [ ! -e h.nbs ]
}

@test "sf-files: a label the file lacks is a usage error naming it" {
    need_files
    run_nb nb-hkl -hkl "$SF_DIR/x.mtz" -column FOBS "$SF_DIR/plan.nbs"
    expect_status 2
    expect_has "nb-hkl: -column FOBS: '$SF_DIR/x.mtz' has no such column (its columns: FP (F), FC (F)"
    [ ! -s stdout.bin ] || [ "$(grep -a -c '^HKLS=' stdout.bin)" = 0 ]
    run_nb nb-hkl -hkl "$SF_DIR/x.cif" -column intensity_meas "$SF_DIR/plan.nbs" -o h.nbs
    expect_status 2
    expect_has "has no such column (its columns: f_meas (F))"
    run_nb nb-hkl -hkl "$SF_DIR/x.mtz" -column "FP,FC" "$SF_DIR/plan.nbs" -o h.nbs
    expect_status 2
    expect_has "a pair is two anomalous columns of one type"
}

@test "sf-files: intensities become amplitudes, F = sqrt(max(I, 0))" {
    need_files
    # I = FP^2 (exact in float32): the grid of FP, bit for bit
    run_nb nb-hkl -v -hkl "$SF_DIR/x.mtz" -column I -dump i.bin "$SF_DIR/plan.nbs" -o i.nbs
    expect_status 0
    expect_has "column I (J, intensities: F = sqrt(max(I, 0)))"
    nb-hkl -hkl "$SF_DIR/x.mtz" -column FP -dump f.bin "$SF_DIR/plan.nbs" -o f.nbs
    cmp i.bin f.bin
}

@test "sf-files: an anomalous pair keeps F(+) and F(-) apart: cctbx's anomalous P1 list" {
    need_files
    run_nb nb-hkl -v -hkl "$SF_DIR/x.mtz" -column FA -dump fa.bin "$SF_DIR/plan.nbs" -o fa.nbs
    expect_status 0
    expect_has "columns FA(+),FA(-) (G, anomalous amplitudes F(+),F(-))"
    expect_has "F(+) at h and its equivalents, F(-) at -h and its (anomalous)"
    nb-hkl -hkl "$SF_DIR/p1_anom.hkl" -dump text.bin "$SF_DIR/plan.nbs" -o text.nbs
    cmp fa.bin text.bin
    # F(+)(1 2 3) and F(-)(1 2 3), at -1 -2 -3: the file's two values
    [ "$(dump_F fa.bin 1 2 3)" = "$(awk '$1 == 1 && $2 == 2 && $3 == 3 { print $4 }' "$SF_DIR/p1_anom.hkl")" ]
    [ "$(dump_F fa.bin -1 -2 -3)" = "$(awk '$1 == -1 && $2 == -2 && $3 == -3 { print $4 }' "$SF_DIR/p1_anom.hkl")" ]
    [ "$(dump_F fa.bin 1 2 3)" != "$(dump_F fa.bin -1 -2 -3)" ]
    # either label, the stem or PLUS,MINUS; I(+),I(-) squared: the same grid
    for c in "FA(+)" "FA(-)" "FA(+),FA(-)" IA "IA(-)"; do
        nb-hkl -hkl "$SF_DIR/x.mtz" -column "$c" -dump c.bin "$SF_DIR/plan.nbs" -o c.nbs
        cmp c.bin fa.bin || { echo "-column $c differs"; return 1; }
    done
    render fa.img -hkl "$SF_DIR/x.mtz" -column FA
    render text.img -hkl "$SF_DIR/p1_anom.hkl"
    cmp fa.img text.img
}

@test "sf-files: missing reflections are counted and take -default_F" {
    need_files
    # the file without its first 20 reflections (low resolution, inside its range)
    awk '/^ *-?[0-9]+ +-?[0-9]+ +-?[0-9]+ +[0-9.]+ *$/ { if (++n <= 20) next } { print }' "$SF_DIR/x.cif" > cut.cif
    [ "$(grep -c '^ *0 *0 *2 ' cut.cif)" = 0 ]
    run_nb nb-hkl -v -hkl "$SF_DIR/x.cif" "$SF_DIR/plan.nbs" -o full.nbs
    expect_has " 0 indices inside its resolution missing from the file"
    run_nb nb-hkl -v -hkl cut.cif -default_F 7 -dump cut.bin "$SF_DIR/plan.nbs" -o cut.nbs
    expect_status 0
    local full cut
    full=$(nb_key full.nbs HKLS)
    cut=$(nb_key cut.nbs HKLS)
    [ "$cut" -lt "$full" ]
    expect_has " $((full - cut)) indices inside its resolution missing from the file (not 0 0 0, not absent by symmetry): F = 7"
    [ "$(dump_F cut.bin 0 0 2)" = 7.0 ]
    [ "$(dump_F cut.bin 0 0 -2)" = 7.0 ]
    # 0 0 1 is absent in P 21 21 21: never counted, yet -default_F
    [ "$(dump_F cut.bin 0 0 1)" = 7.0 ]
}

@test "sf-files: -column is a usage error with a text list, or without -hkl" {
    run_nb nb-hkl -hkl "$NB_INPUTS/small.hkl" -column FP "$SF_DIR/plan.nbs" -o h.nbs
    expect_status 2
    expect_has "nb-hkl: -column FP: '$NB_INPUTS/small.hkl' is an 'h k l F' text list, which has no columns"
    run_nb nb-hkl -default_F 1 -column FP "$SF_DIR/plan.nbs" -o h.nbs
    expect_status 2
    expect_has "nb-hkl: -column FP: there is no -hkl file to read it from"
    [ ! -e h.nbs ]
}

@test "sf-files: a missing file, a broken MTZ and a broken mmCIF are runtime errors, stdout no data" {
    run_nb nb-hkl -hkl x.mtz "$SF_DIR/plan.nbs"
    expect_status 1
    [ "${lines[0]}" = "nb-hkl: cannot open 'x.mtz': No such file or directory" ]
    need_ccp4
    # an MTZ's first bytes, then nothing it can read
    printf 'MTZ \001\000\000\000DA\000\000garbage' > cut.mtz
    run_nb nb-hkl -hkl cut.mtz "$SF_DIR/plan.nbs"
    expect_status 1
    expect_has "nb-hkl: 'cut.mtz': CCP4's library cannot read it as an MTZ file"
    expect_lacks "CCP4 library signal"
    [ "$(grep -a -c 'CCP4' stdout.bin)" = 0 ]
    printf 'data_x\nloop_\n_refln.index_h\n_refln.index_k\n_refln.index_l\n_refln.F_meas_au\n1 2 3 4.5\n' > nosg.cif
    run_nb nb-hkl -hkl nosg.cif "$SF_DIR/plan.nbs" -o h.nbs
    expect_status 1
    expect_has "nb-hkl: 'nosg.cif': no space group"
    printf 'data_x\n_symmetry.space_group_name_H-M "Q 9"\nloop_\n_refln.index_h\n_refln.index_k\n_refln.index_l\n_refln.F_meas_au\n1 2 3 4.5\n' > badsg.cif
    run_nb nb-hkl -hkl badsg.cif "$SF_DIR/plan.nbs" -o h.nbs
    expect_status 1
    expect_has "nb-hkl: 'badsg.cif': space group 'Q 9' is not one that CCP4's"
    [ "$(grep -a -c 'SYMINFO' stdout.bin)" = 0 ]
    printf "data_x\n_symmetry.space_group_name_H-M 'P 1'\nloop_\n_refln.index_h\n_refln.index_k\n_refln.index_l\n_refln.F_meas_au\n1 2 3\n" > short.cif
    run_nb nb-hkl -hkl short.cif "$SF_DIR/plan.nbs" -o h.nbs
    expect_status 1
    expect_has "a loop of 4 items holds 3 values"
    [ ! -e h.nbs ]
}

@test "sf-files: a small mmCIF in P 1 by hand: quotes, comments, '?' values, Friedel mates" {
    need_ccp4
    cat > p1.cif <<'CIF'
# a comment
data_hand
_cell.length_a 30
_cell.length_b 34
_cell.length_c 38
_cell.angle_alpha 90
_cell.angle_beta 90
_cell.angle_gamma 90
_symmetry.space_group_name_H-M 'P 1'
loop_
_refln.index_h _refln.index_k _refln.index_l _refln.status _refln.F_meas_au
1 0 0 o 12.5
0 1 0 'f' 3.25(2)
0 0 1 o ?
CIF
    run_nb nb-hkl -v -hkl p1.cif -dump p.bin "$SF_DIR/plan.nbs" -o p.nbs
    expect_status 0
    expect_has "1 values missing in the file (not read)"
    [ "$(nb_key p.nbs HKLS)" = 4 ]
    [ "$(dump_F p.bin -1 0 0)" = 12.5 ]
    [ "$(dump_F p.bin 0 -1 0)" = 3.25 ]
}
