#!/usr/bin/env bats
# nb-fit: refining a plan against an observed image (maximum likelihood on
# nb-sim --grad's derivatives).

load helper

# the experiment the observed still is rendered from, and the start model:
# 1 mm off in distance, 0.15 and 0.2 mm in the beam centre, 0.05-0.1 degrees
# in each misset angle, 0.2 % in cell a
TRUTH="-cell 40 50 60 88 95 91 -misset 10 20 30 -distance 80 -Xbeam 19.4 -Ybeam 19.4"
START="-cell 40.08 50 60 88 95 91 -misset 10.07 19.95 30.1 -distance 81 -Xbeam 19.55 -Ybeam 19.2"
REST="-lambda 1 -N 6 -default_F 100 -pixel 0.4 -detpixels 96 -oversample 1"

observe() {
    nb-geom -q $TRUTH $REST | nb-sim -q -precision double | nb-noise -q -seed 1 | nb-convert -q "$@"
}

# the value and sigma nb-fit printed for NAME
value() { awk -v n="$1" '$1 == n && $2 == "=" { print $3 }' fit.err; }
sigma() { awk -v n="$1" '$1 == n && $2 == "=" { print $5 }' fit.err; }

# |value - truth| <= tol and <= 3 sigma
recovered() {
    local v s
    v=$(value "$1")
    s=$(sigma "$1")
    awk -v v="$v" -v t="$2" -v tol="$3" -v s="$s" -v n="$1" 'BEGIN {
        e = v - t; if (e < 0) e = -e
        printf "%s = %s (truth %s): error %.3g, sigma %s, gate %s\n", n, v, t, e, s, tol
        exit !(v != "" && e <= tol && e <= 3 * s)
    }'
}

# the issue's fit from START against the noisy still, nb-fit given "$@"
# more; every value within its gate (a check: the last command's status)
fit_within_gates() {
    observe -o obs.cbf
    nb-geom -q $START $REST | nb-fit "$@" --observed obs.cbf \
        --refine distance,Xbeam,Ybeam,misset_x,misset_y,misset_z,cell_a,scale -o fit.nbs 2>fit.err
    cat fit.err
    recovered distance 80 0.05 || return 1
    recovered Xbeam 19.4 0.01 || return 1
    recovered Ybeam 19.4 0.01 || return 1
    recovered misset_x 10 0.02 || return 1
    recovered misset_y 20 0.02 || return 1
    recovered misset_z 30 0.02 || return 1
    recovered cell_a 40 0.02
}

@test "fit: from a noisy still, distance, beam centre, misset and a cell edge recovered within the gates, sigmas covering the errors" {
    fit_within_gates
    grep -q "^distance = .* ± .* mm$" fit.err
    grep -q "^misset_z = .* ± .* degree$" fit.err
}

@test "fit: -precision single fits with the fast path's model and derivatives, within the same gates" {
    fit_within_gates -precision single
}

@test "fit: the refined plan renders the fit (nb-fit | nb-sim), and its residual is noise" {
    observe -o obs.cbf -o obs.bin
    nb-geom -q $START $REST | nb-fit --observed obs.cbf --refine distance,Xbeam,Ybeam,misset_x,misset_y,misset_z,cell_a \
        --residual res.bin 2>fit.err | nb-sim -q -precision double | nb-convert -q -o fit.bin
    nb-geom -q $START $REST | nb-sim -q -precision double | nb-convert -q -o start.bin
    # the start misses the spots, the fit finds them: sum of squared residuals
    ssr() { paste <(pixels obs.bin) <(pixels "$1") | awk '{ d = $1 - $2; s += d * d } END { printf "%.6g\n", s }'; }
    echo "start $(ssr start.bin), fit $(ssr fit.bin)"
    awk -v a="$(ssr fit.bin)" -v b="$(ssr start.bin)" 'BEGIN { exit !(a < b / 20) }'
    [ "$(stat -c %s res.bin)" -eq $((96 * 96 * 4)) ] || false
}

@test "fit: SMV, CBF, TIFF, raw float and nb stream observations are read, the ADC offset taken off" {
    # TIFF where this nb-convert writes it (built with libtiff)
    local f obs=(obs.img obs.nbs obs.cbf) clean=(clean.bin) tif=()
    if can_write_tiff; then obs+=(obs.tif) clean+=(clean.tif) tif=(--format tif-float -o clean.tif); fi
    observe $(printf -- '-o %s ' "${obs[@]}")
    nb-geom -q $TRUTH $REST -o truth.nbs
    for f in "${obs[@]}"; do
        nb-fit --observed "$f" --refine scale truth.nbs 2>fit.err >/dev/null
        cat fit.err
        # the noise is Poisson around the truth: the scale is 1 within its sigma's few times
        awk -v v="$(value scale)" -v s="$(sigma scale)" 'BEGIN { e = v - 1; if (e < 0) e = -e; exit !(e <= 4 * s) }'
    done
    # raw float: photons as they are, no ADC (the noise-free image: scale 1 to rounding)
    nb-geom -q $TRUTH $REST | nb-sim -q -precision double | nb-convert -q -o clean.bin "${tif[@]}"
    for f in "${clean[@]}"; do
        nb-fit --observed "$f" --refine scale truth.nbs 2>fit.err >/dev/null
        awk -v v="$(value scale)" 'BEGIN { e = v - 1; if (e < 0) e = -e; exit !(e < 1e-5) }'
    done
}

@test "fit: -v prints the likelihood of every iteration" {
    observe -o obs.cbf
    nb-geom -q $START $REST -o start.nbs
    run_nb nb-fit -v --observed obs.cbf --refine distance start.nbs
    expect_status 0
    expect_has "Poisson iteration 0: -log L = "
    expect_has "least-squares iteration 0: RSS/2 = "
}

@test "fit: what cannot be fitted is an error that says why" {
    observe -o obs.cbf
    nb-geom -q $START $REST -o start.nbs
    run_nb nb-fit --refine distance start.nbs
    expect_status 2
    expect_has "nb-fit: no observed image: give --observed FILE"
    run_nb nb-fit --observed obs.cbf start.nbs
    expect_status 2
    expect_has "nothing to refine"
    run_nb nb-fit --observed obs.cbf --refine distance,nonsense start.nbs
    expect_status 2
    expect_has "unknown parameter 'nonsense'"
    run_nb nb-fit --observed obs.cbf --refine scale,fluence start.nbs
    expect_status 2
    expect_has "'scale' and 'fluence' are one parameter"
    run_nb nb-fit --observed obs.cbf --observed obs.cbf --refine distance start.nbs
    expect_status 2
    expect_has "the plan has 1 frame but 2 observed images were given"
    nb-geom -q $START -lambda 1 -N 6 -default_F 100 -pixel 0.4 -detpixels 64 -o small.nbs
    run_nb nb-fit --observed obs.cbf --refine distance small.nbs
    expect_status 1
    expect_has "'obs.cbf' is 96 x 96 pixels but the plan says 64 x 64"
    run_nb nb-fit --observed missing.cbf --refine distance start.nbs
    expect_status 1
    expect_has "missing.cbf"
    run_nb nb-fit --observed obs.cbf --refine mosaic start.nbs
    expect_status 2
    expect_has "no mosaic spread"
    [ ! -s stdout.bin ] || false
}

@test "fit: the frames of a series are fitted jointly, one observed image each" {
    nb-geom -q $TRUTH $REST -osc 0.5 -nframes 2 | nb-sim -q -precision double | nb-noise -q -seed 4 \
        | nb-convert -q -o series_#.cbf
    nb-geom -q $START $REST -osc 0.5 -nframes 2 | nb-fit --observed series_1.cbf --observed series_2.cbf \
        --refine distance,Xbeam,Ybeam,misset_x,misset_y,misset_z,cell_a -o fit.nbs 2>fit.err
    cat fit.err
    recovered distance 80 0.05
    recovered misset_z 30 0.02
    [ "$(plan_key fit.nbs NFRAMES)" = 2 ] || false
}

@test "fit: only the pixels of the ROI that are not overloaded are compared" {
    observe -o obs.cbf
    nb-geom -q $TRUTH $REST -roi 10 59 20 49 -o roi.nbs
    run_nb nb-fit -v --observed obs.cbf --refine scale roi.nbs
    expect_status 0
    expect_has "Poisson: -log L = "
    expect_has "on 1500 pixels"
    run_nb nb-fit -v --observed obs.cbf --refine scale --overload 60 roi.nbs
    expect_status 0
    expect_lacks "on 1500 pixels"
}

# the line the one image reader (formats/registry.h) logs with -v, without the tool's name
read_line() { grep -o "'$1' read as .*" "$2"; }

@test "fit and import: nb-fit --observed and nb-convert --import read the same files by one rule (offset, overload, untrusted pixels)" {
    # bright enough that the 16-bit counter overloads: 279 pixels at its top
    nb-geom -q $TRUTH $REST -o truth.nbs
    local f files=(obs.cbf obs.img obs.nbs)
    if can_write_tiff; then files+=(obs.tif); fi
    nb-sim -q -precision double truth.nbs | nb-noise -q -seed 1 -scale 300 | nb-convert -q $(printf -- '-o %s ' "${files[@]}")
    for f in "${files[@]}"; do
        nb-fit -v --observed "$f" --refine scale truth.nbs 2>"fit_$f.err" >/dev/null
        nb-convert -v --import "$f" truth.nbs 2>"import_$f.err" >/dev/null
        [ "$(read_line "$f" "fit_$f.err")" = "$(read_line "$f" "import_$f.err")" ] || false
        read_line "$f" "fit_$f.err" | grep -q "untrusted: 0 negative, 279 overloaded pixels"
        # the overloaded pixels left out of the fit
        grep -q "on 8937 pixels" "fit_$f.err"
    done
    # a CBF's overload is the one it states (its counts start at 0, so 65535 less the offset 40)
    grep -a -q "^_array_intensities.overload 65495" obs.cbf
    read_line obs.cbf fit_obs.cbf.err | grep -q "overload 65495 (the file's)"
    read_line obs.img fit_obs.img.err | grep -q "offset 40 (the file's), gain 1, overload 65535 (the counter's top)"
}

@test "fit and import: a write-only format (PGM, PNG) or an unknown suffix is refused by name (2) by both tools; a file that is no HDF5 named .h5 (1)" {
    observe -o obs.pgm -o obs.png
    nb-geom -q $TRUTH $REST -o truth.nbs
    local readable="(readable: CBF (.cbf), SMV (.img .smv), TIFF (.tif .tiff), raw float32 (.bin .raw .float), nb stream (.nbs), NXmx (HDF5) (.nxs .h5))"
    run_nb nb-fit --observed obs.pgm --refine scale truth.nbs
    expect_status 2
    expect_has "nb-fit: cannot read 'obs.pgm': PGM is a write-only format $readable"
    run_nb nb-convert --import obs.pgm truth.nbs
    expect_status 2
    expect_has "nb-convert: --import: cannot read 'obs.pgm': PGM is a write-only format $readable"
    run_nb nb-fit --observed obs.png --refine scale truth.nbs
    expect_status 2
    expect_has "nb-fit: cannot read 'obs.png': PNG is a write-only format"
    printf '\211HDF\r\n\032\n' > obs.h5
    run_nb nb-convert --import obs.h5 truth.nbs
    expect_status 1
    expect_has "cannot open 'obs.h5' as HDF5"
    printf 'not an image' > obs.jpg
    run_nb nb-fit --observed obs.jpg --refine scale truth.nbs
    expect_status 2
    expect_has "nb-fit: cannot read 'obs.jpg': no format has the suffix '.jpg'"
    [ ! -s stdout.bin ] || false
}
