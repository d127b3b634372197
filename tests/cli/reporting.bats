#!/usr/bin/env bats
# What the tools report on stderr, and what they refuse of the environment:
# an unknown NB_SIMD, -q (errors only), the seed nb-noise was not given, the
# solid angle, a series' per-frame lines and summary; and the PNG preview of
# the counts.  (issue 17, the friction list)

load helper

SERIES="-cell 78 78 37 90 90 90 -lambda 1 -N 5 -distance 150 -detpixels 48 -pixel 0.172 -default_F 100 -osc 1 -phisteps 2"

lines() { printf '%s\n' "$output" | grep -c "$1" || true; }

@test "NB_SIMD: an unknown value is a usage error that names the allowed values, in every tool" {
    for t in $NB_TOOLS; do
        NB_SIMD=bogus run_nb "$t" --version
        expect_status 0
        NB_SIMD=bogus run_nb "$t" -q
        expect_status 2
        expect_has "$t: NB_SIMD='bogus': expected generic, avx2 or avx512"
    done
}

@test "NB_SIMD: generic, avx2, avx512 and empty are taken" {
    nb-geom $SMALL -seed 1 -o plan.nbs
    for v in generic avx2 avx512 ""; do
        NB_SIMD=$v run_nb nb-sim -q plan.nbs -o img.nbs
        expect_status 0
        [ -s img.nbs ]
    done
}

@test "-q: errors only, in every tool that reports (statistics, photons, seed, summaries)" {
    run nb-sim --help
    expect_has "quiet: errors only"
    nb-geom $SERIES -nframes 2 -o plan.nbs
    run_nb nb-sim -q plan.nbs -o img.nbs
    expect_status 0
    [ -z "$output" ] || { echo "nb-sim -q said: $output"; return 1; }
    run_nb nb-noise -q img.nbs -o noisy.nbs
    expect_status 0
    [ -z "$output" ] || { echo "nb-noise -q said: $output"; return 1; }
    # the statistics stay in the stream
    [ -n "$(nb_key img.nbs MAX_I)" ]
    # and errors are still reported
    run_nb nb-sim -q missing.nbs
    expect_status 1
    expect_has "nb-sim: cannot open 'missing.nbs'"
}

@test "nb-noise logs the seed nb-geom drew from the clock, and -seed with it draws the same noise" {
    nb-geom $SMALL -o plan.nbs
    nb-sim -q plan.nbs -o img.nbs
    run_nb nb-noise img.nbs -o a.nbs
    expect_status 0
    expect_has "drawn from the clock by nb-geom"
    local seed
    seed=$(printf '%s\n' "$output" | sed -n 's/^nb-noise: noise seed \([0-9]*\), drawn from the clock.*/\1/p')
    [ -n "$seed" ] || { echo "no seed in: $output"; return 1; }
    mkdir a b
    (cd a && nb-convert -q -o x.cbf ../a.nbs)
    nb-noise -q -seed "$seed" img.nbs | (cd b && nb-convert -q -o x.cbf)
    cmp a/x.cbf b/x.cbf
}

@test "nb-noise says nothing of a seed it was given, or nb-geom was" {
    nb-geom $SMALL -o plan.nbs
    nb-sim -q plan.nbs -o img.nbs
    run_nb nb-noise -seed 3 img.nbs -o a.nbs
    expect_status 0
    expect_lacks "noise seed"
    expect_has "photons on noise image"
    nb-geom $SMALL -seed 5 | nb-sim -q -o img5.nbs
    run_nb nb-noise img5.nbs -o b.nbs
    expect_status 0
    expect_lacks "noise seed"
}

@test "nb-sim: the solid-angle line is the reference's figure; -v gives the detector's and the divisor" {
    nb-geom $SMALL -phi 0 -osc 1 -phisteps 4 -seed 1 -o plan.nbs
    run_nb nb-sim -v plan.nbs -o img.nbs
    expect_status 0
    local ref det
    ref=$(printf '%s\n' "$output" | sed -n 's/^solid angle subtended by detector = \([^ ]*\) steradian.*/\1/p')
    det=$(printf '%s\n' "$output" | sed -n 's/^the detector subtends \([^ ]*\) steradian.*/\1/p')
    [ -n "$ref" ] || { echo "$output"; return 1; }
    [ -n "$det" ] || { echo "$output"; return 1; }
    approx "$det" "$(awk -v r="$ref" 'BEGIN { print 4 * r }')" 1e-5
    expect_has "divided by sources x phi steps x mosaic domains / sensor layers = 4"
    # 32 pixels of 0.1 mm at 100 mm: (3.2 / 100)^2 sr, near enough
    approx "$det" 0.001024 0.01
    approx "$(nb_key img.nbs SOLID_ANGLE)" "$ref" 1e-5
}

@test "nb-sim: one image prints the reference's three lines, nothing about frames" {
    nb-geom $SMALL -seed 1 -o plan.nbs
    run_nb nb-sim plan.nbs -o img.nbs
    expect_status 0
    [ "$(printf '%s\n' "$output" | wc -l)" -eq 3 ]
    expect_lacks "frame"
}

@test "nb-sim: a series prints one line per frame, frame i/N, and a summary; -v the reference's lines under each" {
    nb-geom $SERIES -nframes 3 -seed 1 -o plan.nbs
    run_nb nb-sim plan.nbs -o img.nbs
    expect_status 0
    [ "$(printf '%s\n' "$output" | wc -l)" -eq 4 ]
    expect_has "frame 1/3: max_I = "
    expect_has "frame 3/3: max_I = "
    expect_has "3 of 3 frames rendered in "
    expect_has "the detector subtends "
    expect_lacks "solid angle subtended by detector"
    run_nb nb-sim -v plan.nbs -o img.nbs
    expect_status 0
    [ "$(lines '^solid angle subtended by detector = ')" -eq 3 ]
    [ "$(lines '^frame [123]/3$')" -eq 3 ]
    expect_has "3 of 3 frames rendered in "
    run_nb nb-sim --frames 2:3 plan.nbs -o part.nbs
    expect_lacks "frame 1/3"
    expect_has "2 of 3 frames rendered in "
}

@test "nb-noise: a series prints one summary line; -v a line per frame" {
    nb-geom $SERIES -nframes 3 -seed 1 | nb-sim -q -o img.nbs
    run_nb nb-noise img.nbs -o noisy.nbs
    expect_status 0
    [ "$(printf '%s\n' "$output" | wc -l)" -eq 1 ]
    expect_has "3 of 3 frames: "
    expect_has " photons on noise images (0 overloads)"
    run_nb nb-noise -v img.nbs -o noisy.nbs
    expect_status 0
    [ "$(lines '^frame [123]/3: .* photons on noise image ')" -eq 3 ]
}

@test "nb-convert: the PNG preview shows the counts when the stream has them, --photons the photons" {
    nb-geom $SMALL -seed 1 | nb-sim -q -o img.nbs
    nb-convert -q -o photons.png img.nbs
    nb-noise -q -seed 1 img.nbs -o n1.nbs
    nb-noise -q -seed 2 img.nbs -o n2.nbs
    nb-convert -q -o c1.png -o p1.png n1.nbs
    nb-convert -q --photons -o p1.png n1.nbs
    nb-convert -q -o c2.png n2.nbs
    nb-convert -q --photons -o p2.png n2.nbs
    # other noise, another preview: it shows the counts
    run ! cmp -s c1.png c2.png
    # --photons: the same as the noiseless stream's, whatever the noise
    cmp p1.png photons.png
    cmp p2.png photons.png
    run nb-convert --help
    expect_has "--photons"
}
