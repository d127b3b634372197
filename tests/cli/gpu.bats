#!/usr/bin/env bats
# nb-sim --device cuda against the CPU kernels.  These need a CUDA build and a
# GPU: without either they skip, saying which is missing (CI has no GPU).
# A line that asks whether the GPU did the work ends "# the GPU's own":
# tests/gpu-check.sh --stand-in leaves those out, where the CPU stands in for
# a GPU to prove this file's scripts before a GPU is lent.

load helper

need_gpu() {
    nb-sim --version | grep -q cuda || skip "this build has no CUDA backend (no nvcc at build time)"
    nb-geom -default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -detpixels 8 -o probe.nbs
    nb-sim -q --device cuda -o /dev/null probe.nbs 2>/dev/null || skip "no usable CUDA device on this machine"
}

compare() { # compare A.bin B.bin MIN_CORR MAX_SUM_DIFF
    "$NB_ROOT/${BUILD:-build}/tests/nb-imgcmp" --corr "$3" --sum-tol "$4" "$1" "$2"
}

render_both() { # render_both NAME PRECISION [nb-geom flags]: NAME-cpu.bin and NAME-gpu.bin
    local name=$1 prec=$2
    shift 2
    nb-geom "$@" -o "$name.nbs"
    nb-sim -q --device cpu -precision "$prec" "$name.nbs" | nb-convert -q -o "$name-cpu.bin"
    nb-sim -q --device cuda -precision "$prec" "$name.nbs" | nb-convert -q -o "$name-gpu.bin"
}

@test "gpu: make check-gpu's script fails, saying so, where there is no GPU (it never skips)" {
    nb-geom -default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -detpixels 8 -o probe.nbs
    if nb-sim -q --device cuda -o /dev/null probe.nbs 2>/dev/null; then
        skip "this machine has a GPU: make check-gpu runs the whole check there"
    fi
    run "$NB_ROOT/tests/gpu-check.sh"
    expect_status 1
    expect_has "gpu-check: no usable GPU: nb-sim: --device cuda"
}

@test "gpu: bench/gpu-session.sh stops at once, saying so, where there is no GPU; its usage errors are 2" {
    run -2 "$NB_ROOT/bench/gpu-session.sh" --parts check,nosuch --out gs
    [[ "$output" == *"no part 'nosuch'"* ]] || false
    run -2 "$NB_ROOT/bench/gpu-session.sh" --stills 0 --out gs
    nb-geom -default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -detpixels 8 -o probe.nbs
    if nb-sim -q --device cuda -o /dev/null probe.nbs 2>/dev/null; then
        skip "this machine has a GPU: bench/gpu-session.sh runs the whole check there"
    fi
    run -1 env NB_BIN="$NB_BIN" "$NB_ROOT/bench/gpu-session.sh" --parts check,series --out gs
    [[ "$output" == *"gpu-session: no usable GPU: nb-sim: --device cuda"* ]] || false
    grep -q "no usable GPU" gs/summary.txt || false
}

@test "gpu: nb-fit --device cuda fits a dataset as the CPU does (3 stills: turns, cell, mosaic, scale)" {
    need_gpu
    local py=${NB_TEST_PYTHON:-/usr/bin/python3}
    "$py" -c 'import numpy' 2>/dev/null || skip "$py has no numpy"
    local rest="-lambda 1 -distance 100 -pixel 0.4 -detpixels 192 -round_xtal -N 12 -fluence 1e27 -oversample 2 -default_F 100 -nframes 3 -stills -mosaic_domains 5 -misset_seed 7"
    nb-geom -q -cell 34 52 53 90 90 90 -mosaic 0.4 $rest | nb-sim -q --device cpu | nb-noise -q -seed 3 |
        nb-convert -q -o s_#.cbf -o model.expt
    nb-geom -q $rest -cell 34.102 52.156 53.159 90 90 90 -misset 0.2 -0.15 0.1 -mosaic 0.3 -o start.nbs
    local fit="--observed s_#.cbf --refine cell_a,cell_b,cell_c --refine-frame rot_x,rot_y,rot_z,mosaic,scale"
    nb-fit -q --device cpu $fit start.nbs | nb-convert -q -o cpu.expt
    run -0 nb-fit -v --device cuda $fit -o gpu.nbs start.nbs
    [[ "$output" == *"rendering on"* ]] || false  # the GPU's own
    [[ "$output" == *"3 frames fitted, 0 failed"* ]] || false
    nb-convert -q -o gpu.expt gpu.nbs
    local evaluate="$NB_ROOT/bench/dataset/evaluate.py"
    run -0 "$py" "$evaluate" --json eval.json model.expt gpu.expt
    "$py" -c 'import json,sys; s=json.load(open("eval.json")); sys.exit(not (s["measured"] == 3 and s["orientation_deg"]["max"] < 0.01))'
    run -0 "$py" "$evaluate" --compare cpu.expt gpu.expt --rtol 1e-4
}

@test "gpu: the fast path on the GPU matches the CPU's (seed case, 512^2)" {
    need_gpu
    render_both seed single -default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 512
    compare seed-cpu.bin seed-gpu.bin 0.9999999 1e-5
}

@test "gpu: the double path on the GPU matches the CPU's to rounding" {
    need_gpu
    render_both dbl double -default_F 100 -cell 70 80 90 75 85 95 -misset 10 5 3 -lambda 1 -N 7 -distance 100 \
        -detpixels 256 -pixel 0.4
    compare dbl-cpu.bin dbl-gpu.bin 0.99999999 1e-9
}

@test "gpu: mosaic domains, sources and phi steps on the GPU" {
    need_gpu
    render_both heavy single -default_F 100 -cell 70 80 90 75 85 95 -lambda 1 -N 5 -distance 100 -detpixels 256 \
        -pixel 0.4 -divergence 0.3 -divsteps 3 -dispersion 0.5 -dispsteps 3 -mosaic 0.5 -mosaic_domains 5 -osc 1 \
        -phisteps 2
    compare heavy-cpu.bin heavy-gpu.bin 0.9999999 1e-5
}

@test "gpu: the fast kernel's Miller index by offset and in double both match the CPU (mosaic, sources, tricubic)" {
    need_gpu
    # small reach (0.1 mm pixels at 100-300 mm): -v says the index is taken by offset
    nb-geom -default_F 100 -cell 100 100 100 90 90 90 -lambda 1 -N 5 -distance 100 -detpixels 384 \
        -divergence 0.3 -divsteps 3 -dispersion 0.5 -dispsteps 3 -mosaic 0.5 -mosaic_domains 6 -o heavy.nbs
    nb-geom -hkl "$NB_ROOT/tests/golden/inputs/P1.hkl" -cell 70 80 90 75 85 95 -misset 10 5 3 -lambda 1.0 -N 2 \
        -distance 300 -detpixels 256 -pixel 0.1 -interpolate -mosaic 0.3 -mosaic_domains 4 | nb-hkl -o tric.nbs
    for name in heavy tric; do
        nb-sim -q --device cpu "$name.nbs" | nb-convert -q -o "$name-cpu.bin"
        run nb-sim -v --device cuda -o "$name-auto.nbs" "$name.nbs"
        expect_status 0
        expect_has "Miller index by offset"  # the GPU's own
        nb-convert -q -o "$name-offset.bin" "$name-auto.nbs"
        NB_CUDA_INDEX=double nb-sim -q --device cuda "$name.nbs" | nb-convert -q -o "$name-double.bin"
        compare "$name-cpu.bin" "$name-offset.bin" 0.9999999 1e-5
        compare "$name-cpu.bin" "$name-double.bin" 0.9999999 1e-5
    done
    # a large crystal (N 300) takes the index in double
    nb-geom -default_F 100 -cell 100 100 100 90 90 90 -lambda 1 -N 300 -distance 100 -detpixels 64 \
        -mosaic 0.01 -mosaic_domains 3 -o big.nbs
    run nb-sim -v --device cuda -o /dev/null big.nbs
    expect_status 0
    expect_has "Miller index in double"  # the GPU's own
}

@test "gpu: the IMAGE record says the GPU rendered it, and -v how long CUDA took to start" {
    need_gpu
    nb-sim -q --device cuda -o g.nbs probe.nbs
    [[ "$(nb_key g.nbs RENDER_PATH)" == cuda-* ]] || false  # the GPU's own
    run nb-sim -v --device cuda -o /dev/null probe.nbs
    [ "$status" -eq 0 ]
    [[ "$output" =~ "CUDA started in "[0-9]+" ms" ]]  # the GPU's own
}

@test "gpu: every frame of a rotation series is its own (no stale upload from the frame before)" {
    need_gpu
    # each frame's cells are rotated to its own phi in arrays nb-sim reallocates
    # per frame, often at the same addresses: a device copy kept by address
    # would render frames 2 and 3 at frame 1's phi
    nb-geom -default_F 100 -cell 70 80 90 75 85 95 -lambda 1 -N 5 -distance 100 -detpixels 128 -pixel 0.8 \
        -osc 5 -phisteps 2 -nframes 3 -o series.nbs
    local prec dev i
    for prec in single double; do
        for dev in cpu cuda; do
            nb-sim -q --device "$dev" -precision "$prec" series.nbs | nb-convert -q -o "$prec-$dev-#.bin"
        done
        for i in 1 2 3; do
            compare "$prec-cpu-$i.bin" "$prec-cuda-$i.bin" 0.9999999 1e-5
        done
        run ! cmp -s "$prec-cuda-1.bin" "$prec-cuda-2.bin"
    done
}

@test "gpu: nb-sim -precision double --grad on the GPU gives the CPU's image and derivatives" {
    need_gpu
    nb-geom -default_F 100 -cell 70 80 90 88 95 91 -misset 10 5 3 -lambda 1 -N 6 -distance 100 -detpixels 128 \
        -pixel 0.4 -mosaic 0.3 -mosaic_domains 3 -oversample 2 -o g.nbs
    local names=distance,Xbeam,Ybeam,rot_x,rot_y,rot_z,cell_a,cell_gamma,Na,lambda
    nb-sim -q --device cpu -precision double --grad $names -o cpu.nbs g.nbs
    nb-sim -q --device cuda -precision double --grad $names -o gpu.nbs g.nbs
    [[ "$(nb_key gpu.nbs RENDER_PATH 2)" == cuda-double-dual ]] || false  # the GPU's own
    nb-convert -q -o cpu.bin cpu.nbs
    nb-convert -q -o gpu.bin gpu.nbs
    compare cpu.bin gpu.bin 0.99999999 1e-9
    for n in distance rot_z cell_gamma lambda; do
        nb-convert -q --grad $n -o "cpu-$n.bin" cpu.nbs
        nb-convert -q --grad $n -o "gpu-$n.bin" gpu.nbs
        # a derivative sums to about 0: its gate is the largest difference, not the sum
        "$NB_ROOT/${BUILD:-build}/tests/nb-imgcmp" --corr 0.99999999 --max-rel 1e-6 "cpu-$n.bin" "gpu-$n.bin"
    done
}

@test "gpu: nb-sim --grad -precision single on the GPU agrees with the CPU's fast path" {
    need_gpu
    nb-geom -default_F 100 -cell 70 80 90 88 95 91 -misset 10 5 3 -lambda 1 -N 8 -distance 150 -detpixels 256 \
        -pixel 0.4 -mosaic 0.2 -mosaic_domains 4 -oversample 2 -o g.nbs
    local names=distance,Xbeam,Ybeam,rot_x,rot_y,rot_z,cell_a,cell_gamma,Na,lambda n
    nb-sim -q --device cpu -precision single --grad $names -o cpu.nbs g.nbs
    nb-sim -q --device cuda -precision single --grad $names -o gpu.nbs g.nbs
    [ "$(nb_key gpu.nbs RENDER_PATH 2)" = cuda-fast-dual ] || false  # the GPU's own
    nb-convert -q -o cpu.bin cpu.nbs
    nb-convert -q -o gpu.bin gpu.nbs
    # the same terms and slopes (nb_pixel_fast_grad) as the CPU's lanes
    # chain: test_grad's gates for them on the host (correlation 0.99999,
    # norms within 1e-4), here on the GPU, for the image and every name
    compare cpu.bin gpu.bin 0.99999 1e-4
    "$NB_ROOT/${BUILD:-build}/tests/nb-imgcmp" --corr 0.99999 --norm-tol 1e-4 cpu.bin gpu.bin
    for n in distance Xbeam Ybeam rot_x rot_y rot_z cell_a cell_gamma Na lambda; do
        nb-convert -q --grad $n -o "cpu-$n.bin" cpu.nbs
        nb-convert -q --grad $n -o "gpu-$n.bin" gpu.nbs
        "$NB_ROOT/${BUILD:-build}/tests/nb-imgcmp" --corr 0.99999 --norm-tol 1e-4 "cpu-$n.bin" "gpu-$n.bin"
    done
}

@test "gpu: large crystals (N 300 to 1000, cells of 100-200 A) on both GPU paths against the CPU's double path" {
    need_gpu
    # where single precision usually breaks: N pi h of thousands of radians, peaks
    # a fraction of a pixel wide (2x2 sub-pixels: the automatic 50-80 would be slow
    # on the CPU and change nothing of what is checked)
    local name flags
    while read -r name flags; do
        nb-geom -q $flags -detpixels 256 -oversample 2 -o "$name.nbs"
        nb-sim -q --device cpu -precision double "$name.nbs" | nb-convert -q -o "$name-cpu.bin"
        nb-sim -q --device cuda -precision single "$name.nbs" | nb-convert -q -o "$name-fast.bin"
        nb-sim -q --device cuda -precision double "$name.nbs" | nb-convert -q -o "$name-double.bin"
        echo "$name"
        compare "$name-cpu.bin" "$name-fast.bin" 0.9999 1e-3
        "$NB_ROOT/${BUILD:-build}/tests/nb-imgcmp" --corr 0.999999 --sum-tol 1e-6 --max-rel 1e-5 \
            "$name-cpu.bin" "$name-double.bin"
    done <<'CASES'
N300 -default_F 100 -cell 100 100 100 90 90 90 -misset 10 5 3 -lambda 1 -N 300 -distance 200 -pixel 0.1
N500 -default_F 100 -cell 150 160 170 88 95 91 -misset 20 -5 7 -lambda 1 -N 500 -distance 300 -pixel 0.1
N1000 -default_F 100 -cell 200 200 200 90 90 90 -misset 3 4 5 -lambda 1 -N 1000 -distance 400 -pixel 0.05
N400-mosaic -default_F 100 -cell 120 130 140 90 90 90 -misset 5 10 15 -lambda 1.2 -N 400 -distance 250 -pixel 0.1 -mosaic 0.05 -mosaic_domains 10
CASES
}

@test "gpu: nb-noise --device cuda gives the CPU's counts, pixel for pixel, on every path (effects, PSF, ROI, panels, a series)" {
    need_gpu
    nb-noise --version | grep -q cuda || skip "this nb-noise has no CUDA backend"
    # every regime of the Poisson deviate: the series bright (rejection above
    # 12 photons, the normal limit above a million, 16-bit overloads), the
    # ROI's image faint (products of uniforms below 12)
    nb-geom $SMALL -detpixels 256 -fluence 1e33 -seed 8 -osc 1 -nframes 2 -o series.nbs
    nb-sim -q --device cpu -o series-img.nbs series.nbs
    nb-geom $SMALL -detpixels 128 -fluence 1e27 -seed 9 -roi 10 100 20 90 -o roi.nbs
    nb-sim -q --device cpu -o roi-img.nbs roi.nbs
    nb-geom -q -panels "$NB_ROOT/examples/tiles.geom" -cell 100 100 100 90 90 90 -lambda 1 -N 5 -default_F 100 -seed 10 -o panels.nbs
    nb-sim -q --device cpu -o panels-img.nbs panels.nbs
    for img in series-img roi-img panels-img; do
        for flags in "" "-flicker 0.1 -calibration 0.05 -gain 2 -bits 32" "-readout 3" "-psf gauss -readout 1"; do
            nb-noise -q --rng philox $flags --device cpu -o cpu.nbs $img.nbs
            nb-noise -q --rng philox $flags --device cuda -o gpu.nbs $img.nbs
            cmp cpu.nbs gpu.nbs || { echo "$img, flags '$flags': the GPU's counts differ"; false; }
        done
    done
    run_nb nb-noise -v --rng philox --device cuda -o /dev/null roi-img.nbs
    expect_status 0
    expect_has "counting on "  # the GPU's own
    expect_has "CUDA started in "  # the GPU's own
    # the default (--device auto) counts Philox's deviates on the GPU
    run_nb nb-noise -v --rng philox -o default.nbs roi-img.nbs
    expect_status 0
    expect_has "counting on "  # the GPU's own
    expect_lacks "counting on the CPU"  # the GPU's own
    nb-noise -q --rng philox --device cpu -o cpu.nbs roi-img.nbs
    cmp cpu.nbs default.nbs || false
}
