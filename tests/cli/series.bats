#!/usr/bin/env bats
# Rotation series (nb-geom -nframes), frame selection and sharding (nb-sim
# --frames, --shard), per-frame noise seeds and numbered files.

load helper

SERIES="-cell 78 78 37 90 90 90 -lambda 1 -N 5 -distance 150 -detpixels 48 -pixel 0.172 -default_F 100 -osc 1 -phisteps 2"

@test "series: -nframes N gives N IMAGE records, FRAME 0..N-1, PHI_START phi0 + i osc" {
    nb-geom $SERIES -phi 10 -nframes 4 -o plan.nbs
    [ "$(plan_key plan.nbs NFRAMES)" = 4 ]
    nb-sim -q -o all.nbs plan.nbs
    [ "$(grep -a -c '^FRAME=' all.nbs)" -eq 4 ]
    for i in 0 1 2 3; do
        [ "$(nb_key all.nbs FRAME $((i + 1)))" = "$i" ]
        approx "$(nb_key all.nbs PHI_START $((i + 1)))" "$(deg $((10 + i)))" 1e-12
        approx "$(nb_key all.nbs PHI_RANGE $((i + 1)))" "$(deg 1)" 1e-12
    done
}

@test "series: frame i is the single image rendered with -phi phi0 + i osc" {
    nb-geom $SERIES -phi 10 -nframes 3 | nb-sim -q | nb-convert -q -o s_#.bin
    nb-geom $SERIES -phi 12 | nb-sim -q | nb-convert -q -o one.bin
    cmp s_3.bin one.bin
    run ! cmp -s s_1.bin s_3.bin
}

@test "series: -nframes needs -osc, and a sane count" {
    run_nb nb-geom -cell 78 78 37 90 90 90 -default_F 1 -nframes 3
    expect_status 2
    expect_has "-nframes 3 needs an oscillation per frame"
    run_nb nb-geom $SERIES -nframes 0
    expect_status 2
    expect_has "option -nframes"
}

@test "series: --shard K/M for M = 1, 2, 3 and --frames give the same frames, and cat joins shards" {
    nb-geom $SERIES -nframes 5 -o plan.nbs
    nb-sim -q -o all.nbs plan.nbs
    nb-noise -q -seed 7 all.nbs | nb-convert -q -o ref_##.img
    for m in 1 2 3; do
        rm -f part*.nbs
        for k in $(seq "$m"); do nb-sim -q --shard "$k/$m" -o "part$k.nbs" plan.nbs; done
        mkdir -p "m$m"
        cat part*.nbs | nb-noise -q -seed 7 | (cd "m$m" && nb-convert -q -o ref_##.img)
        for i in 01 02 03 04 05; do cmp "ref_$i.img" "m$m/ref_$i.img"; done
    done
    nb-sim -q --frames 2:4 plan.nbs | nb-noise -q -seed 7 | (mkdir -p fr && cd fr && nb-convert -q -o ref_##.img)
    [ ! -e fr/ref_01.img ]
    [ ! -e fr/ref_05.img ]
    for i in 02 03 04; do cmp "ref_$i.img" "fr/ref_$i.img"; done
}

@test "series: every frame gets its own noise (seed, frame), the same in any shard" {
    nb-geom $SERIES -nframes 2 -o plan.nbs
    nb-sim -q -o all.nbs plan.nbs
    nb-noise -q all.nbs | nb-convert -q -o n_#.img
    nb-convert -q -o p_#.bin all.nbs
    run ! cmp -s n_1.img n_2.img
    # frame 2 alone (a shard) is noised exactly as in the whole series
    nb-sim -q --frames 2:2 plan.nbs | nb-noise -q | nb-convert -q -o s_#.img
    cmp n_2.img s_2.img
}

@test "series: --shard slurm reads the job array; bad --frames/--shard are usage errors" {
    nb-geom $SERIES -nframes 4 -o plan.nbs
    SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=2 SLURM_ARRAY_TASK_COUNT=2 nb-sim -q --shard slurm -o s.nbs plan.nbs
    nb-sim -q --shard 2/2 -o t.nbs plan.nbs
    cmp <(grep -a '^FRAME=' s.nbs) <(grep -a '^FRAME=' t.nbs)
    [ "$(grep -a '^FRAME=' t.nbs | tr '\n' ' ')" = "FRAME=2 FRAME=3 " ]
    run_nb env -u SLURM_ARRAY_TASK_ID nb-sim --shard slurm plan.nbs
    expect_status 2
    expect_has "not in a Slurm job array"
    for bad in 0/3 4/3 x/2 2; do
        run_nb nb-sim --shard "$bad" plan.nbs
        expect_status 2
        expect_has "--shard"
    done
    for bad in 0:2 3:2 1-2 2:9; do
        run_nb nb-sim --frames "$bad" plan.nbs
        expect_status 2
        expect_has "--frames"
    done
}

@test "series: a series streams: nb-sim's memory does not grow with the number of frames" {
    [ -z "${NB_SANITIZED:-}" ] || skip "peak memory is not meaningful under AddressSanitizer (quarantine)"
    nb-geom $SERIES -detpixels 256 -nframes 2 -o p2.nbs
    nb-geom $SERIES -detpixels 256 -nframes 12 -o p12.nbs
    local m2 m12
    m2=$( { /usr/bin/time -f %M nb-sim -q -o /dev/null p2.nbs; } 2>&1 | tail -1)
    m12=$( { /usr/bin/time -f %M nb-sim -q -o /dev/null p12.nbs; } 2>&1 | tail -1)
    [ "$m12" -lt $((m2 + 2048)) ] || { echo "peak RSS $m2 KiB for 2 frames, $m12 KiB for 12"; return 1; }
}

@test "series: frames written several at a time (--threads 3) are those written one by one, with the same -v lines" {
    # frames of over 1 MiB: their payload buffers are given back to the reader for later frames
    nb-geom $SERIES -detpixels 520 -nframes 6 | nb-sim -q -o s.nbs
    nb-convert -v --threads 1 -o a_#.bin -o a_#.img s.nbs 2> one.txt
    nb-convert -v --threads 3 -o b_#.bin -o b_#.img s.nbs 2> pool.txt
    for i in 1 2 3 4 5 6; do
        cmp "a_$i.bin" "b_$i.bin"
        cmp "a_$i.img" "b_$i.img"
    done
    grep -q '^writing the frames 3 at a time$' pool.txt
    run ! grep -q '^writing the frames' one.txt
    grep -v '^writing the frames' pool.txt | sed 's/b_/a_/g' > pool_as_one.txt
    cmp one.txt pool_as_one.txt
    [ "$(grep -c '^writing a_' one.txt)" -eq 12 ]
}

@test "series: a frame that cannot be written fails the series with the first such frame's message at any thread count; no frame is left" {
    nb-geom $SERIES -nframes 8 | nb-sim -q -o s.nbs
    local i
    for i in 3 4 5 6 7 8; do ln -s /dev/full "c_$i.bin"; done
    for threads in 1 3 3 3 3 3 3; do
        run_nb nb-convert --threads "$threads" -o c_#.bin -o c_#.img s.nbs
        expect_status 1
        expect_has "cannot write 'c_3.bin': No space left on device"
        expect_lacks "c_4.bin"
        no_files_but s.nbs c_3.bin c_4.bin c_5.bin c_6.bin c_7.bin c_8.bin stdout.bin
    done
}

@test "series: a non-finite pixel in one frame fails the series naming the frame and pixel at any thread count; no frame is left" {
    nb-geom $SERIES -nframes 6 | nb-sim -q -o s.nbs
    nan_in_frame s.nbs 3
    for threads in 1 3; do
        run_nb nb-convert --threads "$threads" -o d_#.bin -o d_#.img s.nbs
        expect_status 1
        # FRAME=3 is the fourth frame, d_4.bin
        expect_has "IMAGE record of frame 4: pixel 247 (fast 7, slow 5) is not a finite number"
        no_files_but s.nbs stdout.bin
    done
    for rng in reference philox; do
        run_nb nb-noise --rng "$rng" -o n.nbs s.nbs
        expect_status 1
        expect_has "frame 4: the image holds a non-finite value at pixel 247 (fast 7, slow 5)"
        no_files_but s.nbs stdout.bin
    done
}
