#!/usr/bin/env bats
# nb-math: the photons of a stream's images scaled, with other streams'
# added or subtracted frame by frame and panel by panel, in float32; a
# one-frame operand serving every frame; other detectors, counts, missing
# frames and derivatives refused by name; the provenance key MATH.

load helper

# f32 EXPR FILE...: the raw float32 images FILE... as numpy arrays a, b, c
# ...; fails unless the Python expression EXPR is true
f32() {
    local expr=$1
    shift
    "${NB_TEST_PYTHON:-/usr/bin/python3}" - "$expr" "$@" <<'PY'
import sys
import numpy as np
env = {"np": np}
for name, path in zip("abcdefgh", sys.argv[2:]):
    env[name] = np.fromfile(path, dtype="<f4")
if not eval(sys.argv[1], env):
    print("f32: false:", sys.argv[1], file=sys.stderr)
    sys.exit(1)
PY
}

# A Bragg render and a water background (next to no crystal: F 1e-4) of the
# same detector (32 x 32).
renders() {
    nb-geom $SMALL -q "$@" -o bragg-plan.nbs
    nb-geom $SMALL -q -default_F 1e-4 -water 0.05 "$@" -o bg-plan.nbs
    nb-sim -q -o bragg.nbs bragg-plan.nbs
    nb-sim -q -o bg.nbs bg-plan.nbs
}

@test "math: a Bragg render plus a background is their pixel-wise float32 sum; the PLAN passes, MATH says what was added" {
    renders
    nb-math --add bg.nbs bragg.nbs >sum.nbs
    nb-convert -q -o bragg.bin bragg.nbs
    nb-convert -q -o bg.bin bg.nbs
    nb-convert -q -o sum.bin sum.nbs
    f32 "(a > 0).any() and (b > 0).any() and (c != a).any() and (c != b).any()" bragg.bin bg.bin sum.bin
    f32 "np.array_equal(c, a + b)" bragg.bin bg.bin sum.bin
    [ "$(nb_key sum.nbs MATH)" = "--add bg.nbs" ] || false
    [ "$(plan_key sum.nbs COMMAND)" = "$(plan_key bragg.nbs COMMAND)" ] || false
    # the frame's keys kept, the old pixels' statistics dropped
    [ "$(nb_key sum.nbs RENDERED_BY)" = "$(nb_key bragg.nbs RENDERED_BY)" ] || false
    [ -n "$(nb_key bragg.nbs MAX_I)" ] || false
    run ! grep -aq "MAX_I=" sum.nbs
    run ! grep -aq "RMSD=" sum.nbs
    # stdin is the main stream as well as a file
    nb-math --add bg.nbs <bragg.nbs >piped.nbs
    nb-convert -q -o piped.bin piped.nbs
    cmp sum.bin piped.bin
}

@test "math: a background rendered once (one frame) serves every frame of a 3-frame series" {
    nb-geom $SMALL -q -osc 1 -nframes 3 -o series-plan.nbs
    nb-geom $SMALL -q -default_F 1e-4 -water 0.05 -o bg-plan.nbs
    nb-sim -q -o series.nbs series-plan.nbs
    nb-sim -q -o bg.nbs bg-plan.nbs
    nb-math --add bg.nbs -o sum.nbs series.nbs
    nb-convert -q -o s_#.bin series.nbs
    nb-convert -q -o sum_#.bin sum.nbs
    nb-convert -q -o bg.bin bg.nbs
    [ "$(grep -ac '^MATH=--add bg.nbs' sum.nbs)" -eq 3 ] || false
    f32 "np.array_equal(c, a + b)" s_1.bin bg.bin sum_1.bin
    f32 "np.array_equal(c, a + b)" s_2.bin bg.bin sum_2.bin
    f32 "np.array_equal(c, a + b)" s_3.bin bg.bin sum_3.bin
    f32 "not np.array_equal(a, b)" s_1.bin s_3.bin
}

@test "math: a series' operand is matched frame by frame; a frame it lacks is refused" {
    nb-geom $SMALL -q -osc 1 -nframes 3 -o plan.nbs
    nb-sim -q -o all.nbs plan.nbs
    nb-sim -q --frames 1:2 -o part.nbs plan.nbs
    # the frames of another shard's order: 3, then 1 and 2
    nb-sim -q --frames 3:3 -o last.nbs plan.nbs
    cat last.nbs part.nbs >shuffled.nbs
    nb-math --sub shuffled.nbs -o zero.nbs all.nbs
    nb-convert -q -o z_#.bin zero.nbs
    f32 "(a == 0).all() and (b == 0).all() and (c == 0).all()" z_1.bin z_2.bin z_3.bin
    run_nb nb-math --add part.nbs -o out.nbs all.nbs
    expect_status 1
    expect_has "nb-math: part.nbs has no frame 3"
    [ ! -e out.nbs ] || false
}

@test "math: --scale, --sub and --add-scaled in float32 in the order given; MATH of two runs" {
    renders
    nb-math --scale 2 --sub bg.nbs --add-scaled 0.3 bg.nbs -o out.nbs bragg.nbs
    nb-convert -q -o bragg.bin bragg.nbs
    nb-convert -q -o bg.bin bg.nbs
    nb-convert -q -o out.bin out.nbs
    f32 "np.array_equal(c, (np.float32(2) * a - b) + np.float32(0.3) * b)" bragg.bin bg.bin out.bin
    [ "$(nb_key out.nbs MATH)" = "--scale 2 --sub bg.nbs --add-scaled 0.3 bg.nbs" ] || false
    # a difference with itself is 0; a second run's operations follow the first's
    nb-math --sub bragg.nbs bragg.nbs | nb-math --scale 3 -o zero.nbs
    nb-convert -q -o zero.bin zero.nbs
    f32 "(a == 0).all()" zero.bin
    [ "$(nb_key zero.nbs MATH)" = "--sub bragg.nbs; --scale 3" ] || false
}

@test "math: another detector is refused naming what differs: the pixel count, the distance, the pixel size" {
    renders
    nb-geom $SMALL -q -default_F 1e-4 -water 0.05 -detpixels 48 | nb-sim -q -o bg48.nbs
    run_nb nb-math --add bg48.nbs -o out.nbs bragg.nbs
    expect_status 1
    expect_has "nb-math: bg48.nbs: not the main stream's detector: 48 x 48 pixels (the main stream's: 32 x 32)"
    nb-geom $SMALL -q -default_F 1e-4 -water 0.05 -distance 120 | nb-sim -q -o far.nbs
    run_nb nb-math --add far.nbs -o out.nbs bragg.nbs
    expect_status 1
    expect_has "nb-math: far.nbs: not the main stream's detector: its plan's PIX0 is 0.12 "
    nb-geom $SMALL -q -default_F 1e-4 -water 0.05 -pixel 0.11 -detsize 3.52 -detpixels 32 | nb-sim -q -o coarse.nbs
    run_nb nb-math --add coarse.nbs -o out.nbs bragg.nbs
    expect_status 1
    expect_has "its plan's PIXEL_SIZE is 0.00011 (the main stream's: 0.0001)"
    [ ! -e out.nbs ] || false
    # the ROI is what was rendered, not the detector: a smaller one adds
    nb-geom $SMALL -q -default_F 1e-4 -water 0.05 -roi 0 15 0 15 | nb-sim -q -o roi.nbs
    nb-math -q --add roi.nbs -o out.nbs bragg.nbs
    [ -s out.nbs ] || false
}

@test "math: a detector of several panels adds panel by panel; another panel count or a moved panel is refused by name" {
    local x="-cell 100 100 100 90 90 90 -lambda 6.2 -N 5"
    nb-geom -q -panels "$NB_ROOT/examples/tiles.geom" $x -default_F 100 | nb-sim -q -o tiles.nbs
    nb-geom -q -panels "$NB_ROOT/examples/tiles.geom" $x -default_F 1e-4 -water 0.05 | nb-sim -q -o water.nbs
    nb-math --add water.nbs -o sum.nbs tiles.nbs
    nb-convert -q -o tiles.bin tiles.nbs
    nb-convert -q -o water.bin water.nbs
    nb-convert -q -o sum.bin sum.nbs
    f32 "a.size == 4 * 64 * 48 and (b > 0).all() and np.array_equal(c, a + b)" tiles.bin water.bin sum.bin
    # tile 3 moved by 1 mm
    sed 's/^q3\/corner_x = 2$/q3\/corner_x = 12/' "$NB_ROOT/examples/tiles.geom" >moved.geom
    run ! cmp -s moved.geom "$NB_ROOT/examples/tiles.geom"
    nb-geom -q -panels moved.geom $x -default_F 1e-4 -water 0.05 | nb-sim -q -o moved.nbs
    run_nb nb-math --add moved.nbs -o out.nbs tiles.nbs
    expect_status 1
    expect_has "nb-math: moved.nbs: not the main stream's detector: its plan's PANEL3.PIX0 is "
    nb-geom $SMALL -q | nb-sim -q -o one.nbs
    run_nb nb-math --add water.nbs -o out.nbs one.nbs
    expect_status 1
    expect_has "nb-math: water.nbs: not the main stream's detector: 4 panels (the main stream's: 1)"
    [ ! -e out.nbs ] || false
}

@test "math: images holding counts (after nb-noise) are refused, in the main stream or an operand" {
    renders -seed 3
    nb-noise -q -o noisy.nbs bragg.nbs
    run_nb nb-math --add bg.nbs -o out.nbs noisy.nbs
    expect_status 1
    expect_has "nb-math: noisy.nbs: frame 1 holds detector counts (nb-noise has run)"
    run_nb nb-math --add noisy.nbs -o out.nbs bragg.nbs
    expect_status 1
    expect_has "nb-math: noisy.nbs: frame 1 holds detector counts"
    [ ! -e out.nbs ] || false
}

@test "math: derivatives (nb-sim --grad) are summed as the images are, or refused when an operand lacks them" {
    renders
    nb-sim -q --grad distance -o bragg-g.nbs bragg-plan.nbs
    nb-sim -q --grad distance -o bg-g.nbs bg-plan.nbs
    nb-math --add bg-g.nbs -o sum-g.nbs bragg-g.nbs
    nb-convert -q --grad distance -o ga.bin bragg-g.nbs
    nb-convert -q --grad distance -o gb.bin bg-g.nbs
    nb-convert -q --grad distance -o gs.bin sum-g.nbs
    f32 "(a != 0).any() and (b != 0).any() and np.array_equal(c, a + b)" ga.bin gb.bin gs.bin
    [ "$(grep -ac '^MATH=--add bg-g.nbs' sum-g.nbs)" -eq 2 ] || false
    run_nb nb-math --add bg.nbs -o out.nbs bragg-g.nbs
    expect_status 1
    expect_has "nb-math: bg.nbs has no derivative by distance for frame 1"
    [ ! -e out.nbs ] || false
}

@test "math: a failing nb-math stops the stages after it with its status, its message the only one" {
    renders
    run bash -c "nb-math --add none.nbs bragg.nbs | nb-convert -q -o x.bin; echo \"statuses \${PIPESTATUS[*]}\""
    expect_has "nb-math: cannot open 'none.nbs': No such file or directory"
    expect_lacks "nb-convert"
    [ "${lines[-1]}" = "statuses 1 1" ] || false
    [ ! -e x.bin ] || false
}
