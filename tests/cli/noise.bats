#!/usr/bin/env bats
# nb-noise's generators: nanoBragg's (the default, its sequence in the
# pixels' order) and Philox4x32-10 (--rng philox: each pixel's deviates a
# function of (seed, frame, pixel) alone, counted on every thread).

load helper

@test "noise: --rng philox gives the same counts at any thread count, marked NOISE_RNG=philox; the default has no mark" {
    # 256^2 pixels: enough to be counted on several threads
    nb-geom $SMALL -detpixels 256 -seed 3 -o plan.nbs
    nb-sim -q -o img.nbs plan.nbs
    nb-noise -q --rng philox --threads 1 -o one.nbs img.nbs
    nb-noise -q --rng philox --threads 3 -o three.nbs img.nbs
    cmp one.nbs three.nbs
    [ "$(nb_key one.nbs NOISE_RNG)" = philox ]
    nb-noise -q -o ref.nbs img.nbs
    run ! grep -aq '^NOISE_RNG=' ref.nbs
    nb-convert -q -o philox.img one.nbs
    nb-convert -q -o ref.img ref.nbs
    run ! cmp -s philox.img ref.img
}

@test "noise: --rng philox counts each frame of a series on its own, a shard's frames as in the whole series" {
    nb-geom $SMALL -seed 5 -osc 1 -nframes 3 -o plan.nbs
    nb-sim -q -o all.nbs plan.nbs
    nb-noise -q --rng philox all.nbs | nb-convert -q -o all_#.img
    nb-sim -q --frames 2:3 plan.nbs | nb-noise -q --rng philox | (mkdir -p part && cd part && nb-convert -q -o all_#.img)
    cmp all_2.img part/all_2.img
    cmp all_3.img part/all_3.img
    run ! cmp -s all_1.img all_2.img
}

@test "noise: counts outside the ROI are 0 and inside are counted, on every path (both generators, with a PSF and read-out noise or without)" {
    # the counts array is not zeroed before the passes write it: each pass
    # must write every pixel (a sanitizer build fills it with a pattern first)
    nb-geom $SMALL -seed 4 -roi 5 20 8 25 -o plan.nbs
    nb-sim -q -o img.nbs plan.nbs
    for flags in "" "--rng philox" "-psf gauss -readout 2" "--rng philox -psf gauss -readout 2"; do
        nb-noise -q $flags -o noisy.nbs img.nbs
        nb-convert -q -o counts.img noisy.nbs
        smv_data counts.img > counts.dat
        od -A n -v -t u2 counts.dat | tr -s ' ' '\n' | sed '/^$/d' > counts.txt
        [ "$(wc -l < counts.txt)" -eq 1024 ] || false
        # pixel i is (i % 32, i / 32); the ROI is x 5-20, y 8-25
        awk '{ i = NR - 1; x = i % 32; y = int(i / 32); inside = x >= 5 && x <= 20 && y >= 8 && y <= 25
               if (!inside && $1 != 0) bad++; if (inside && $1 > 0) counted++ }
             END { print (bad + 0) " " (counted + 0) }' counts.txt > tally.txt
        [ "$(cat tally.txt)" = "0 288" ] || { echo "flags '$flags': outside non-zero, inside counted: $(cat tally.txt)"; false; }
    done
}

@test "noise: --rng takes reference or philox; anything else is a usage error (2)" {
    nb-geom $SMALL -o plan.nbs
    nb-sim -q -o img.nbs plan.nbs
    run_nb nb-noise --rng mt19937 -o out.nbs img.nbs
    expect_status 2
    expect_has "--rng"
    expect_has "'reference' or 'philox'"
    [ ! -e out.nbs ]
    nb-noise -q --rng reference -o explicit.nbs img.nbs
    nb-noise -q -o default.nbs img.nbs
    cmp explicit.nbs default.nbs
}

@test "noise: --device cuda counts with --rng philox only; the reference's generator is a usage error (2)" {
    nb-geom $SMALL -o plan.nbs
    nb-sim -q -o img.nbs plan.nbs
    run_nb nb-noise --device cuda -o out.nbs img.nbs
    expect_status 2
    expect_has "--device cuda counts with --rng philox only"
    [ ! -e out.nbs ]
    run_nb nb-noise --device gpu --rng philox -o out.nbs img.nbs
    expect_status 2
    expect_has "cpu, cuda or auto"
    [ ! -e out.nbs ]
}

@test "noise: --device auto counts as the CPU does, on the GPU or (none here) on the CPU; either generator" {
    nb-geom $SMALL -detpixels 64 -seed 6 -o plan.nbs
    nb-sim -q -o img.nbs plan.nbs
    for flags in "--rng philox" "--rng philox -readout 2 -psf gauss" ""; do
        nb-noise -q $flags --device cpu -o cpu.nbs img.nbs
        nb-noise -q $flags --device auto -o auto.nbs img.nbs
        cmp cpu.nbs auto.nbs || { echo "flags '$flags': --device auto differs from cpu"; false; }
        nb-noise -q $flags -o default.nbs img.nbs
        cmp cpu.nbs default.nbs || { echo "flags '$flags': the default device differs from cpu"; false; }
    done
}

@test "noise: the default device is auto: Philox's counts go to a GPU where one answers, the reference's never" {
    nb-geom $SMALL -detpixels 32 -seed 6 -o plan.nbs
    nb-sim -q -o img.nbs plan.nbs
    run_nb nb-noise -v -o /dev/null img.nbs
    expect_status 0
    expect_lacks "counting on"
    run_nb nb-noise -v --rng philox -o /dev/null img.nbs
    expect_status 0
    if nb-noise -q --rng philox --device cuda -o /dev/null img.nbs 2>/dev/null; then
        expect_has "counting on "
    elif nb-noise --version | grep -q cuda; then
        expect_has "; counting on the CPU"
    else
        expect_lacks "counting on"
    fi
}

@test "noise: --device cuda without a GPU fails, saying why, and leaves no output" {
    nb-geom $SMALL -o plan.nbs
    nb-sim -q -o img.nbs plan.nbs
    if nb-noise -q --rng philox --device cuda -o /dev/null img.nbs 2>/dev/null; then
        skip "this machine counts on a GPU (tests/cli/gpu.bats checks it)"
    fi
    run_nb nb-noise --rng philox --device cuda -o out.nbs img.nbs
    expect_status 1
    expect_has "nb-noise: --device cuda: "
    [ ! -e out.nbs ]
    # -nonoise counts nothing: no device is needed
    nb-noise -q -nonoise --rng philox --device cuda -o pass.nbs img.nbs
}
