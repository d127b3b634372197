#!/usr/bin/env bats
# nb-sim: renders each plan into an IMAGE record of float32 photons/pixel.

load helper

@test "nb-sim --help lists its own flags" {
    run nb-sim --help
    expect_status 0
    for f in -precision -printout -printout_pixel -progress -noprogress --threads; do
        expect_has "  $f"
    done
    expect_lacks "  -distance"
    expect_lacks "  -hkl"
}

@test "nb-sim: a small render gives an IMAGE record with its statistics" {
    nb-geom $SMALL -o plan.nbs
    run_nb nb-sim plan.nbs -o img.nbs
    expect_status 0
    [ "$(nb_key img.nbs FPIXELS 2)" = 32 ]
    [ "$(nb_key img.nbs SPIXELS 2)" = 32 ]
    [ "$(nb_key img.nbs UNITS)" = photons ]
    for k in MAX_I MAX_I_X MAX_I_Y MEAN RMS RMSD SOLID_ANGLE RENDERED_BY; do
        [ -n "$(nb_key img.nbs $k)" ] || { echo "no $k"; return 1; }
    done
    [ "$(nb_key img.nbs ARRAY.pixels | cut -d' ' -f1-2)" = "f32 1024" ]
    awk -v m="$(nb_key img.nbs MAX_I)" 'BEGIN { exit !(m > 0) }'
    # the plan goes through ahead of the image
    [ "$(plan_key img.nbs CONVENTION)" = mosflm ]
}

@test "nb-sim: statistics lines on stderr, as the reference prints them" {
    nb-geom $SMALL -o plan.nbs
    run_nb nb-sim plan.nbs -o img.nbs
    expect_status 0
    expect_has "solid angle subtended by detector = "
    expect_has "max_I = "
    expect_has "mean= "
    expect_has " rms= "
    expect_has " rmsd= "
}

@test "nb-sim -q silences the statistics" {
    nb-geom $SMALL -o plan.nbs
    run_nb nb-sim -q plan.nbs -o img.nbs
    expect_status 0
    [ -z "$output" ] || { echo "stderr: $output"; return 1; }
    [ -s img.nbs ]
}

@test "nb-sim: the image maximum in the header is the largest pixel" {
    nb-geom $SMALL -o plan.nbs
    nb-sim -q plan.nbs | nb-convert -o img.bin
    nb-sim -q plan.nbs -o img.nbs
    local got
    got=$(pixels img.bin | sort -g | tail -1)
    approx "$got" "$(nb_key img.nbs MAX_I)" 1e-6
}

@test "nb-sim: --threads 1 and 2 give the same image" {
    # large enough (160^2 pixels x 96 steps) that two threads are used: a
    # render of under 2^21 pixel-steps stays on one
    nb-geom $SMALL -detpixels 160 -mosaic 0.5 -mosaic_domains 3 -phi 10 -osc 0.2 -phisteps 2 \
        -oversample 2 -divergence 0.5 -divsteps 2 -o plan.nbs 2>/dev/null
    nb-sim -q --threads 1 plan.nbs | nb-convert -o t1.bin
    nb-sim -q --threads 2 plan.nbs | nb-convert -o t2.bin
    [ "$(stat -c %s t1.bin)" -eq $((160 * 160 * 4)) ]
    cmp t1.bin t2.bin
}

@test "nb-sim: with -default_F in the plan no nb-hkl is needed" {
    nb-geom $SMALL | nb-sim -q | nb-convert -o a.bin
    nb-geom $SMALL | nb-hkl | nb-sim -q | nb-convert -o b.bin
    cmp a.bin b.bin
}

@test "nb-sim: no structure factors is an error" {
    nb-geom -cell 100 -detpixels 32 -o plan.nbs
    run_nb nb-sim plan.nbs -o img.nbs
    [ "$status" -ne 0 ]
    expect_has "nb-sim: no structure factors"
    no_files_but plan.nbs stdout.bin
}

@test "nb-sim: a plan that asks for an HKL file needs nb-hkl first" {
    nb-geom -cell 100 -detpixels 32 -hkl "$NB_INPUTS/small.hkl" -o plan.nbs
    run_nb nb-sim plan.nbs -o img.nbs
    [ "$status" -ne 0 ]
    expect_has "put nb-hkl before nb-sim"
    nb-hkl plan.nbs | nb-sim -q -o img.nbs
    [ "$(nb_key img.nbs UNITS)" = photons ]
}

@test "nb-sim: an empty file is a clear error" {
    : > empty.nbs
    run_nb nb-sim empty.nbs
    expect_status 1
    [ "${lines[0]}" = "nb-sim: empty.nbs: empty stream (no records)" ]
    run_nb sh -c 'nb-sim < empty.nbs'
    expect_status 1
    expect_has "nb-sim: standard input: empty stream"
}

@test "nb-sim: a truncated stream is a clear error wherever it is cut" {
    nb-geom $SMALL -o plan.nbs
    local size n
    size=$(stat -c %s plan.nbs)
    for n in 10 40 100 1000 $((size - 200)) $((size - 40)) $((size - 36)) $((size - 20)) $((size - 1)); do
        head -c "$n" plan.nbs > cut.nbs
        run_nb nb-sim cut.nbs
        expect_status 1
        expect_has "nb-sim: cut.nbs: truncated stream" || { echo "cut at $n of $size"; return 1; }
    done
}

@test "nb-sim: garbage is a clear error" {
    echo "hello, world" > text.nbs
    run_nb nb-sim text.nbs
    expect_status 1
    expect_has "nb-sim: text.nbs: not an nb stream"
    head -c 4096 /dev/urandom > random.nbs
    run_nb nb-sim random.nbs
    expect_status 1
    expect_has "nb-sim: random.nbs: not an nb stream"
}

@test "nb-sim: a corrupted byte fails the CRC" {
    nb-geom $SMALL -o plan.nbs
    cp plan.nbs bad.nbs
    printf 'X' | dd of=bad.nbs bs=1 seek=300 conv=notrunc 2>/dev/null
    run_nb nb-sim bad.nbs
    expect_status 1
    expect_has "nb-sim: bad.nbs: corrupt stream"
    expect_has "CRC"
}

@test "nb-sim: a failing run leaves no output and no temporary" {
    nb-geom $SMALL -o plan.nbs
    head -c 1000 plan.nbs > cut.nbs
    run_nb nb-sim cut.nbs -o img.nbs
    expect_status 1
    no_files_but plan.nbs cut.nbs stdout.bin
}

@test "nb-sim: -precision is checked" {
    nb-geom $SMALL -o plan.nbs
    run_nb nb-sim -precision quad plan.nbs
    expect_status 2
    expect_has "nb-sim: option -precision: expected 'single' or 'double', got 'quad'"
    run_nb nb-sim -q -precision double plan.nbs -o img.nbs
    expect_status 0
    [ "$(nb_key img.nbs PRECISION)" = double ]
}

@test "nb-sim -printout_pixel prints one pixel's diagnostics" {
    nb-geom $SMALL -o plan.nbs
    run_nb nb-sim -printout_pixel 5 7 plan.nbs -o img.nbs
    expect_status 0
    expect_has "   5    7 : stol = "
    expect_has "hkl= "
    [ "$(printf '%s\n' "$output" | grep -c ' : stol = ')" -eq 1 ]
}

@test "nb-sim: only the ROI is rendered" {
    nb-geom $SMALL -roi 8 15 4 11 | nb-sim -q | nb-convert -o roi.bin
    local nonzero
    nonzero=$(pixels roi.bin | awk '$1 != 0' | wc -l)
    [ "$nonzero" -gt 0 ]
    [ "$nonzero" -le 64 ]
    # pixel (f=0, s=0) and (f=31, s=31) lie outside
    [ "$(pixels roi.bin | sed -n 1p)" = 0 ]
    [ "$(pixels roi.bin | sed -n 1024p)" = 0 ]
}

@test "nb-sim: masked pixels stay zero" {
    nb-geom -cell 100 -default_F 100 -mask "$NB_INPUTS/mask.img" -oversample 1 | nb-sim -q | nb-convert -o m.bin
    local zeros masked
    zeros=$(pixels m.bin | awk '$1 == 0' | wc -l)
    masked=$(od -A n -v -t u2 -j 512 "$NB_INPUTS/mask.img" | tr -s ' ' '\n' | awk '$1 == "0"' | wc -l)
    [ "$masked" -gt 0 ]
    [ "$zeros" -eq "$masked" ]
}

@test "nb-sim: each plan of a concatenated stream is rendered" {
    nb-geom $SMALL -o a.nbs
    nb-geom $SMALL -detpixels 16 -o b.nbs
    cat a.nbs b.nbs | nb-sim -q -o two.nbs
    [ "$(grep -a -c '^RENDERED_BY=' two.nbs)" -eq 2 ]
}

@test "nb-sim: an image already in the stream is replaced, not doubled" {
    nb-geom $SMALL -o plan.nbs
    nb-sim -q plan.nbs -o once.nbs
    run_nb nb-sim once.nbs -o twice.nbs
    expect_status 0
    expect_has "dropping an IMAGE record already in the stream"
    [ "$(grep -a -c '^RENDERED_BY=' twice.nbs)" -eq 1 ]
}

@test "nb-sim: --version lists the backends; --device cuda without a GPU is an error, auto falls back (said with -v)" {
    run nb-sim --version
    expect_status 0
    [[ "${lines[1]}" == "backends: cpu (fast path: "* ]]
    nb-geom -default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -detpixels 32 > plan.nbs
    if nb-sim --version | grep -q cuda && nb-sim --device cuda -o /dev/null plan.nbs 2>/dev/null; then
        skip "a CUDA device is present: the GPU checks run in tests/cli/gpu.bats"
    fi
    run nb-sim --device cuda -o out.nbs plan.nbs
    [ "$status" -eq 1 ]
    [[ "$output" == *"nb-sim: --device cuda: "* ]]
    [ ! -e out.nbs ]
    run nb-sim --device auto -o out.nbs plan.nbs
    expect_status 0
    [[ "$output" != *"CUDA"* ]] # the fallback is what 'auto' asks for: said only with -v
    run nb-sim -v --device auto -o out.nbs plan.nbs
    expect_status 0
    if nb-sim --version | grep -q cuda; then [[ "$output" == *"rendering on the CPU"* ]]; fi
    run nb-sim --device cpu -q -o out2.nbs plan.nbs
    expect_status 0
    [ -z "$output" ]
    run nb-sim --device gpu plan.nbs
    expect_status 2
}

@test "nb-sim: a series whose writes fail (a full disk) stops with the write's error, exit 1, without hanging" {
    # the frames are written by a thread of their own while the next renders
    nb-geom $SMALL -osc 0.5 -nframes 6 -o series.nbs
    run timeout 60 nb-sim -q -o /dev/full series.nbs
    expect_status 1
    expect_has "No space left on device"
}

@test "nb-sim: a series' frames come out in order, each its own, with --grad after each image" {
    nb-geom $SMALL -osc 0.5 -nframes 4 -o series.nbs
    nb-sim -q --grad distance -o out.nbs series.nbs
    for i in 0 1 2 3; do
        [ "$(nb_key out.nbs FRAME $((2 * i + 1)))" = "$i" ] || false
        [ "$(nb_key out.nbs GRAD_OF $((i + 1)))" = distance ] || false
        [ "$(nb_key out.nbs FRAME $((2 * i + 2)))" = "$i" ] || false
    done
    # frame by frame, the same pixels as frames rendered alone
    nb-sim -q --grad distance --frames 3:3 -o third.nbs series.nbs
    nb-convert -q -o all_#.bin out.nbs
    nb-convert -q -o third.bin third.nbs
    cmp all_3.bin third.bin
}
