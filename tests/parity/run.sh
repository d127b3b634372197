#!/usr/bin/env bash
# Parity against the reference's golden outputs (tests/golden: the reference
# program's own images for 40 cases, cases.tsv).  For every case of cases.tsv, run through the drop-in
# pipelines/nanobragg, TAP lines for:
#   float/double  -precision double: corr >= 0.999999, |sum ratio - 1| <= 1e-6,
#                 max |diff| <= 1e-5 x image max (over the ROI when the case sets one)
#   float/fast    the default single-precision path: corr >= 0.9999, |sum ratio - 1| <= 1e-3
#   int, pgm      the drop-in's intimage.img and image.pgm: the reference's header keys
#                 with the same printed values, >= 99.9 % of pixels identical
#   noise         (cases with -seed) noiseimage.img, the same gate
#   geometry      every line the reference logged about the resolved geometry
#                 (conventions, pivot, cell, Fbeam/Sbeam, Fclose/Sclose, detector
#                 vectors, DIALS origin, sources, mosaic, oversampling ...) appears,
#                 identical, in nb-geom -v; ORGX/ORGY, DISTANCE, CLOSE_DISTANCE and
#                 DIALS_ORIGIN equal the reference's SMV header to its printed precision
# Environment: CASES="id1 id2" to run a subset.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
golden=$top/tests/golden
cmp=$top/${BUILD:-build}/tests/nb-imgcmp
smvcmp=$top/${BUILD:-build}/tests/nb-smvcmp
drop=$top/pipelines/nanobragg
geom=${NB_BIN:-$top/bin}/nb-geom
n=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

tap() { # status description [diagnostic...]
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
    shift 2
    local line
    for line in "$@"; do printf "%s\n" "$line" | sed "s/^/#   /"; done
}

header_value() { # file.gz key
    zcat "$1" | head -c 512 | tr -d '\f' | grep -a "^$2=" | head -1 | sed "s/^$2=//; s/;\$//"
}

# golden log lines that describe the run rather than the geometry
runtime_lines='^(nanoBragg nanocrystal|  seed: |reading |mmap\(|counting entries|re-reading|writing |initializing to|done initializing|  [0-9]+ initialized hkls|solid angle|max_I|mean=|intfile_scale|pgm_scale|.* photons on noise image|WARNING|         |[0-9]+% done|$)'

while IFS=$'\t' read -r id args; do
    [[ -z "$id" || "$id" == \#* ]] && continue
    [ -n "${CASES:-}" ] && [[ " $CASES " != *" $id "* ]] && continue
    d=$work/$id
    mkdir -p "$d"
    ln -s "$golden/inputs" "$d/inputs"

    # ---- float image, double precision ----
    (cd "$d" && eval "\"$drop\" $args -precision double -floatfile out.bin" > run.log 2>&1)
    rc=$?
    width=$(header_value "$golden/out/$id.int.img.gz" SIZE1)
    roi=$(printf '%s\n' "$args" | grep -oE -- '-roi [0-9]+ [0-9]+ [0-9]+ [0-9]+' | cut -d' ' -f2-)
    ropt=()
    [ -n "$roi" ] && ropt=(--width "$width" --roi $roi)
    if [ $rc -eq 0 ] && [ -f "$d/out.bin" ]; then
        res=$("$cmp" "${ropt[@]}" --corr 0.999999 --sum-tol 1e-6 --max-rel 1e-5 "$golden/out/$id.float.gz" "$d/out.bin")
        tap $? "$id float/double: $res"
    else
        tap 1 "$id float/double: the pipeline failed (status $rc)" "$(tail -5 "$d/run.log")"
    fi

    # ---- float image, the default fast path ----
    (cd "$d" && eval "\"$drop\" $args -precision single -floatfile fast.bin -nonoise -nopgm -intfile /dev/null" > fast.log 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && [ -f "$d/fast.bin" ]; then
        res=$("$cmp" "${ropt[@]}" --corr 0.9999 --sum-tol 1e-3 "$golden/out/$id.float.gz" "$d/fast.bin")
        tap $? "$id float/fast: $res"
    else
        tap 1 "$id float/fast: the pipeline failed (status $rc)" "$(tail -5 "$d/fast.log")"
    fi

    # ---- the derived images: int, PGM, noise ----
    for kind in int pgm noise; do
        ref=$golden/out/$id.$kind.img.gz file=$d/intimage.img opt=()
        [ $kind = pgm ] && ref=$golden/out/$id.pgm.gz file=$d/image.pgm opt=(--pgm)
        [ $kind = noise ] && file=$d/noiseimage.img
        [ -f "$ref" ] || continue
        if [ -f "$file" ]; then
            res=$("$smvcmp" "${opt[@]}" --min-identical 0.999 "$ref" "$file")
            tap $? "$id $kind image: $res"
        else
            tap 1 "$id $kind image: not written" "$(tail -3 "$d/run.log")"
        fi
    done

    # ---- geometry as logged ----
    (cd "$d" && eval "\"$geom\" -v --reference-defaults $args" 2> geom.log > /dev/null)
    missing=$(grep -avE "$runtime_lines" "$golden/out/$id.log" | while IFS= read -r line; do
        grep -qxF -- "$line" "$d/geom.log" || printf '%s\n' "$line"
    done)
    hdr_fail=""
    g=$golden/out/$id.int.img.gz
    orgx=$(header_value "$g" XDS_ORGX) orgy=$(header_value "$g" XDS_ORGY)
    grep -qxF "  ORGX=$orgx ORGY=$orgy" "$d/geom.log" || hdr_fail+="ORGX/ORGY $orgx $orgy; "
    dist=$(header_value "$g" DISTANCE) close=$(header_value "$g" CLOSE_DISTANCE)
    grep -qxF "  distance=$dist close_distance=$close (mm)" "$d/geom.log" || hdr_fail+="DISTANCE/CLOSE_DISTANCE $dist $close; "
    dials=$(header_value "$g" DIALS_ORIGIN | tr ',' ' ')
    grep -qxF "  dials origin= $dials" "$d/geom.log" || hdr_fail+="DIALS_ORIGIN $dials; "
    if [ -z "$missing" ] && [ -z "$hdr_fail" ]; then
        tap 0 "$id geometry: $(grep -avcE "$runtime_lines" "$golden/out/$id.log") logged lines and the header geometry agree"
    else
        tap 1 "$id geometry differs from the reference's log" "missing or different: $missing" "$hdr_fail"
    fi
    rm -rf "$d"
done < "$golden/cases.tsv"
echo "1..$n"
