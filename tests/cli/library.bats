#!/usr/bin/env bats
# The engine as a library (engine/nb.h): `make install PREFIX=DIR` installs
# libnb (shared and static), nb.h and nb.pc; examples/render.c built with
# pkg-config against DIR and examples/render.py (ctypes and numpy) with the
# installed library write, byte for byte, nb-sim's image of the first frame
# (nb-sim --device cpu | nb-convert -o x.bin) on a triclinic, misset, mosaic
# plan of two tilted panels; and the installed tree is complete.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}
# triclinic, misset, mosaic (three domains), dispersion (two sources)
XTAL="-cell 70 80 90 80 95 100 -misset 10 20 30 -lambda 1 -dispersion 1 -dispsteps 2 -N 5 -mosaic 0.5
      -mosaic_domains 3 -default_F 100 -oversample 1"

# two 40 x 30 panels of 0.2 mm at 80 mm, the second tilted by 5 degrees
write_two_panels() {
    cat > two.geom <<'GEOM'
; two panels
res = 5000
clen = 0.08
coffset = 0
p0/min_fs = 0
p0/max_fs = 39
p0/min_ss = 0
p0/max_ss = 29
p0/corner_x = -42
p0/corner_y = -15
p0/fs = +1.0x
p0/ss = +1.0y
p1/min_fs = 0
p1/max_fs = 39
p1/min_ss = 30
p1/max_ss = 59
p1/corner_x = 2
p1/corner_y = -15
p1/fs = +0.9961947x +0.0y +0.0871557z
p1/ss = +1.0y
GEOM
}

# The installed tree (once per file: make install of an up-to-date build
# copies files).  The sanitized run's tools are another build: the installed
# library is the regular build's, which check-asan does not make.
setup_file() {
    [ -n "${NB_SANITIZED:-}" ] && return 0
    export NB_PREFIX="$BATS_FILE_TMPDIR/prefix"
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -s -C "$NB_ROOT" install \
        PREFIX="$NB_PREFIX" > "$BATS_FILE_TMPDIR/install.log" 2>&1 ||
        { cat "$BATS_FILE_TMPDIR/install.log" >&3; return 1; }
}

need_installed() {
    [ -z "${NB_SANITIZED:-}" ] ||
        skip "the installed library is the regular build's (make check runs these; test_api checks the API sanitized)"
    command -v pkg-config >/dev/null || skip "pkg-config is not installed"
}

@test "library: make install installs the library, its header, nb.pc, man pages, examples, pipelines, nb-bench's inputs and the amorphous tables" {
    need_installed
    for f in lib/libnb.a lib/libnb.so lib/pkgconfig/nb.pc include/nb.h share/nb/examples/render.c \
        share/nb/examples/render_flags.c share/nb/examples/render_F.c share/nb/examples/render_noise.c \
        share/nb/examples/render_options.c share/nb/examples/render_params.c share/nb/examples/render_expt.c \
        share/nb/examples/image_files.c \
        share/nb/examples/render.py share/nb/examples/P1.hkl share/nb/examples/helices.pdb \
        share/nb/examples/helices.py share/nb/examples/helices.mtz share/nb/examples/helices_mtz.py share/nb/pipelines/sweep.mk \
        share/nb/pipelines/parallel-sweep share/nb/pipelines/slurm-sweep.sbatch \
        share/nb/pipelines/slurm-fit.sbatch share/nb/bench/P1.hkl \
        share/nb/amorphous/water.stol share/nb/amorphous/ice.stol share/nb/amorphous/air.stol \
        share/nb/amorphous/oil.stol share/nb/amorphous/README.md share/nb/amorphous/make-tables.py; do
        [ -s "$NB_PREFIX/$f" ] || { echo "missing $f"; false; }
    done
    for t in $NB_TOOLS nanobragg nonbragg; do
        [ -x "$NB_PREFIX/bin/$t" ] || { echo "missing bin/$t"; false; }
        [ -s "$NB_PREFIX/share/man/man1/$t.1" ] || { echo "missing man page $t.1"; false; }
    done
    run env PKG_CONFIG_PATH="$NB_PREFIX/lib/pkgconfig" pkg-config --modversion nb
    expect_status 0
    [ "$output" = "$(cat "$NB_ROOT/VERSION")" ] || false
    # nb.pc names this install's prefix (not an earlier install's)
    run env PKG_CONFIG_PATH="$NB_PREFIX/lib/pkgconfig" pkg-config --variable=includedir nb
    [ "$output" = "$NB_PREFIX/include" ] || false
}

@test "library: render.c built with pkg-config against the installed tree writes nb-sim's image, two panels" {
    need_installed
    write_two_panels
    nb-geom -q -panels two.geom $XTAL -o plan.nbs
    nb-sim -q --device cpu plan.nbs | nb-convert -q -o want.bin
    [ "$(stat -c %s want.bin)" -eq $((2 * 40 * 30 * 4)) ] || false
    export PKG_CONFIG_PATH="$NB_PREFIX/lib/pkgconfig"
    # shellcheck disable=SC2046
    cc -std=c11 -Wall -Wextra -Werror "$NB_PREFIX/share/nb/examples/render.c" $(pkg-config --cflags --libs nb) -o render
    ./render < plan.nbs > got.bin
    cmp got.bin want.bin
    # the image is not empty: there are spots on both panels
    run "$PY" -c 'import numpy as n, sys; a = n.fromfile("got.bin", n.float32).reshape(2, -1); sys.exit(0 if (a.max(1) > 10 * a.mean(1)).all() else 1)'
    expect_status 0
}

@test "library: render.c linked statically (pkg-config --static) writes the same bytes" {
    need_installed
    write_two_panels
    nb-geom -q -panels two.geom $XTAL -o plan.nbs
    nb-sim -q --device cpu plan.nbs | nb-convert -q -o want.bin
    export PKG_CONFIG_PATH="$NB_PREFIX/lib/pkgconfig"
    # shellcheck disable=SC2046
    libs=$(pkg-config --static --libs nb | sed "s|-lnb\\b|$NB_PREFIX/lib/libnb.a|")
    [[ "$libs" == *libnb.a* ]] || false
    # shellcheck disable=SC2086
    cc -std=c11 "$NB_PREFIX/share/nb/examples/render.c" $(pkg-config --cflags nb) $libs -o render-static
    run ldd render-static
    expect_lacks "libnb.so"
    ./render-static < plan.nbs > got.bin
    cmp got.bin want.bin
}

@test "library: render.py (ctypes, numpy) with the installed library writes nb-sim's image, two panels" {
    need_installed
    "$PY" -c 'import numpy' 2>/dev/null || skip "numpy is not installed for $PY"
    write_two_panels
    nb-geom -q -panels two.geom $XTAL -o plan.nbs
    nb-sim -q --device cpu plan.nbs | nb-convert -q -o want.bin
    # the library found through pkg-config's libdir
    PKG_CONFIG_PATH="$NB_PREFIX/lib/pkgconfig" "$PY" "$NB_PREFIX/share/nb/examples/render.py" < plan.nbs > got.bin
    cmp got.bin want.bin
    # or named by NB_LIBRARY
    env -u PKG_CONFIG_PATH NB_LIBRARY="$NB_PREFIX/lib/libnb.so" "$PY" "$NB_PREFIX/share/nb/examples/render.py" \
        < plan.nbs > got2.bin
    cmp got2.bin want.bin
}

@test "library: the installed Python package (PYTHONPATH=PREFIX/lib/python3.X/dist-packages) renders nb-sim's bytes and nb-sim --grad's derivatives" {
    need_installed
    "$PY" -c 'import numpy, pytest' 2>/dev/null || skip "numpy or pytest is not installed for $PY"
    pythondir=$NB_PREFIX/lib/python$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages
    for f in __init__.py _lib.py torch.py _paths.py; do
        [ -s "$pythondir/nb/$f" ] || { echo "missing $pythondir/nb/$f"; false; }
    done
    [ -x "$NB_PREFIX/share/nb/examples/torch_refine.py" ] || false
    # the package and its library the installed ones (NB_EXPECT_PREFIX: tests/python/test_nb.py's
    # first test), none of the build tree's; the gates of tests/python against them
    run env -u NB_LIBRARY NB_EXPECT_PREFIX="$NB_PREFIX" PYTHONPATH="$pythondir" PYTHONDONTWRITEBYTECODE=1 \
        "$PY" -m pytest -q -p no:cacheprovider "$NB_ROOT/tests/python/test_nb.py" \
        -k "expected_ones or equals_nb_sim or derivatives_of_plans or vjp"
    echo "$output"
    expect_status 0
    expect_has "5 passed"
}

@test "library: the examples say why they fail: no PLAN record, not a stream" {
    need_installed
    export PKG_CONFIG_PATH="$NB_PREFIX/lib/pkgconfig"
    # shellcheck disable=SC2046
    cc -std=c11 "$NB_PREFIX/share/nb/examples/render.c" $(pkg-config --cflags --libs nb) -o render
    printf 'not a stream' > junk
    run ./render < junk
    expect_status 1
    expect_has "render: "
    [ ! -s stdout ] || false
    nb-geom -q $SMALL | nb-hkl -q | nb-sim -q | nb-convert -q -o img.bin
    run "$PY" "$NB_PREFIX/share/nb/examples/render.py" < junk
    expect_status 1
    expect_has "render.py: "
}

@test "library: the installed nb-bench runs the tricubic configuration from share/nb, without the source tree" {
    need_installed
    cp -r "$NB_PREFIX" moved
    run moved/bin/nb-bench --config tricubic --reps 1 --threads 2 --dir "$PWD"
    expect_status 0
    expect_has "tricubic"
}

@test "library: the installed dataset tools (share/nb/dataset) simulate, perturb, evaluate and draw with the tools on PATH" {
    need_installed
    "$PY" -c 'import numpy' 2>/dev/null || skip "$PY has no numpy (apt-get install python3-numpy)"
    cp -r "$NB_PREFIX" moved
    local ds=$PWD/moved/share/nb/dataset
    # the tools on PATH alone (no NB_BIN, not in a checkout); the water table from share/nb/amorphous
    run -0 env -u NB_BIN PATH="$PWD/moved/bin:/usr/bin:/bin" "$ds/simulate.sh" --stills 2 --detpixels 64 \
        --pixel 1.6 --water 0.5 --threads 1 data
    [ -s data/still_002.cbf ] || false
    [ "$(grep -c . data/truth.jsonl)" -eq 2 ] || false
    run -0 env -u NB_BIN PATH="$PWD/moved/bin:/usr/bin:/bin" "$ds/perturb.py" --angle 0.3 data/model.expt -o start.expt
    run -1 env -u NB_BIN PATH="$PWD/moved/bin:/usr/bin:/bin" "$ds/evaluate.py" data/model.expt start.expt \
        --fit-status 0 --gate near
    expect_has "frame 1 is 0.3000 deg"
    run -0 env -u NB_BIN PATH="$PWD/moved/bin:/usr/bin:/bin" "$ds/draw.py" --seed 3 --params-only
    expect_has '"space_group": "P212121"'
    # without the tools anywhere: said so
    run -1 env -u NB_BIN PATH=/usr/bin:/bin "$ds/simulate.sh" --stills 2 none
    expect_has "simulate.sh: no nb tools: nb-geom is not on PATH"
}
