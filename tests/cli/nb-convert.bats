#!/usr/bin/env bats
# nb-convert: writes the IMAGE records of a stream as files.  Only raw float
# (.bin) output is tested here; the other formats get their own tests.

load helper

rendered() { # rendered NAME [nb-geom args]: NAME.nbs = PLAN + IMAGE of the small case
    local name=$1
    shift
    nb-geom $SMALL "$@" | nb-sim -q -o "$name.nbs"
}

@test "nb-convert --help lists -o, --format and -floatfile" {
    run nb-convert --help
    expect_status 0
    expect_has "  -o FILE"
    expect_has "--format NAME"
    expect_has "  -floatfile, -floatimage FILE"
    expect_lacks "  -distance"
}

@test "nb-convert: a 32x32 render gives a .bin of exactly 32*32*4 bytes" {
    rendered img
    run_nb nb-convert -o out.bin img.nbs
    expect_status 0
    [ "$(stat -c %s out.bin)" -eq $((32 * 32 * 4)) ]
    [ ! -s stdout.bin ]
    approx "$(pixels out.bin | sort -g | tail -1)" "$(nb_key img.nbs MAX_I)" 1e-6
}

@test "nb-convert: a rectangular detector is written fast index first" {
    rendered rect -detpixels_f 24 -detpixels_s 16 -Xbeam 0.5 -Ybeam 0.5
    nb-convert -o rect.bin rect.nbs
    [ "$(stat -c %s rect.bin)" -eq $((24 * 16 * 4)) ]
    # the maximum sits where the header says: MAX_I_X/Y are in metres (0.1 mm pixels)
    local fx sy idx
    fx=$(awk -v x="$(nb_key rect.nbs MAX_I_X)" 'BEGIN { printf "%d", x / 1e-4 }')
    sy=$(awk -v y="$(nb_key rect.nbs MAX_I_Y)" 'BEGIN { printf "%d", y / 1e-4 }')
    idx=$((sy * 24 + fx + 1))
    approx "$(pixels rect.bin | sed -n "${idx}p")" "$(nb_key rect.nbs MAX_I)" 1e-6
}

@test "nb-convert: reads standard input" {
    rendered img
    nb-convert -o a.bin < img.nbs
    nb-convert -o b.bin img.nbs
    cmp a.bin b.bin
}

@test "nb-convert: -floatfile names the output; -floatimage is the same" {
    rendered img
    run_nb nb-convert -floatfile f.bin img.nbs
    expect_status 0
    [ "$(stat -c %s f.bin)" -eq 4096 ]
    nb-convert -floatimage g.bin img.nbs
    cmp f.bin g.bin
}

@test "nb-convert: without -o it writes the plan's -floatfile" {
    rendered img -floatfile requested.bin
    run_nb nb-convert img.nbs
    expect_status 0
    [ "$(stat -c %s requested.bin)" -eq 4096 ]
}

@test "nb-convert: -o wins over the plan's -floatfile" {
    rendered img -floatfile requested.bin
    nb-convert -o mine.bin img.nbs
    [ -f mine.bin ]
    [ ! -e requested.bin ]
}

@test "nb-convert: nothing to write is a usage error" {
    rendered img
    run_nb nb-convert img.nbs
    expect_status 2
    expect_has "nb-convert: nothing to write"
}

@test "nb-convert: several -o write the same image" {
    rendered img
    nb-convert -o x.bin -o y.bin img.nbs
    cmp x.bin y.bin
}

@test "nb-convert: the format follows the extension, or --format" {
    rendered img
    run_nb nb-convert -o out.xyz img.nbs
    expect_status 2
    expect_has "nb-convert: "
    expect_has "'out.xyz'"
    run_nb nb-convert -o noext img.nbs
    expect_status 2
    expect_has "'noext'"
    expect_has "--format"
    run_nb nb-convert --format bin -o noext img.nbs
    expect_status 0
    [ "$(stat -c %s noext)" -eq 4096 ]
    run_nb nb-convert -o x.bin --format bin img.nbs
    expect_status 2
    expect_has "nb-convert: --format bin must come before"
    for ext in raw float; do
        nb-convert -o "img.$ext" img.nbs
        [ "$(stat -c %s "img.$ext")" -eq 4096 ]
    done
}

@test "nb-convert: a stream with no IMAGE record fails and writes nothing" {
    nb-geom $SMALL -o plan.nbs
    run_nb nb-convert -o out.bin plan.nbs
    expect_status 1
    expect_has "nb-convert: plan.nbs: the stream holds no IMAGE"
    no_files_but plan.nbs stdout.bin
}

@test "nb-convert: a missing stream file fails and writes nothing" {
    run_nb nb-convert -o out.bin nope.nbs
    expect_status 1
    expect_has "nb-convert: cannot open 'nope.nbs': No such file or directory"
    no_files_but stdout.bin
}

@test "nb-convert: an image cut short fails and writes nothing" {
    rendered img
    local size
    size=$(stat -c %s img.nbs)
    head -c $((size - 1000)) img.nbs > cut.nbs
    run_nb nb-convert -o out.bin cut.nbs
    expect_status 1
    expect_has "nb-convert: cut.nbs: truncated stream"
    no_files_but img.nbs cut.nbs stdout.bin
}

@test "nb-convert: a stream cut after its image (no END record) fails and writes nothing" {
    rendered img
    local size
    size=$(stat -c %s img.nbs)
    head -c $((size - 20)) img.nbs > cut.nbs
    run_nb nb-convert -o out.bin cut.nbs
    expect_status 1
    expect_has "nb-convert: cut.nbs: truncated stream"
    no_files_but img.nbs cut.nbs stdout.bin
}

@test "nb-convert: an unwritable output is a runtime error naming it" {
    rendered img
    run_nb nb-convert -o no/such/dir/out.bin img.nbs
    expect_status 1
    expect_has "nb-convert: "
    expect_has "no/such/dir/out.bin"
}

@test "nb-convert: a raw float and an SMV file take no space beyond their bytes (space allocated ahead)" {
    # on ext4 their space is allocated when their temporaries are made
    # (nb_preallocate): what the file will hold at least, never more
    nb-geom $SMALL -detpixels 128 | nb-sim -q -o img.nbs
    run_nb nb-convert -o f.bin -o i.img img.nbs
    expect_status 0
    [ "$(stat -c %s f.bin)" -eq $((128 * 128 * 4)) ]
    [ "$(stat -c %s i.img)" -eq $((512 + 128 * 128 * 2)) ]
    # other file systems keep blocks of their own past the end for a while (XFS)
    local fs f size blocks
    fs=$(stat -f -c %T .)
    [ "$fs" = ext2/ext3 ] || skip "space is allocated ahead on ext4 only (here: $fs)"
    for f in f.bin i.img; do
        size=$(stat -c %s "$f")
        blocks=$(stat -c '%b * %B' "$f")
        [ "$((blocks))" -le "$(((size + 4095) / 4096 * 4096))" ] ||
            { echo "$f holds $size bytes in $((blocks)) bytes of blocks"; return 1; }
    done
}

@test "nb-convert: a failing run does not clobber an existing file" {
    rendered img
    echo precious > out.bin
    nb-geom $SMALL -o plan.nbs
    run_nb nb-convert -o out.bin plan.nbs
    expect_status 1
    [ "$(cat out.bin)" = precious ]
}

@test "nb-convert: two images into one -o file do not silently lose one" {
    rendered a
    rendered b -detpixels 16
    cat a.nbs b.nbs > two.nbs
    run_nb nb-convert -o out.bin two.nbs
    # either an error, or both images in the file
    if [ "$status" -eq 0 ]; then
        [ "$(stat -c %s out.bin)" -eq $((32 * 32 * 4 + 16 * 16 * 4)) ] ||
            { echo "exit 0 but out.bin holds $(stat -c %s out.bin) bytes: the first image was overwritten"; return 1; }
    fi
}

@test "nb-convert -v names what it writes" {
    rendered img
    run_nb nb-convert -v -o out.bin img.nbs
    expect_status 0
    expect_has "writing out.bin"
}

@test "nb-convert --import: a raw float image becomes the plan's IMAGE, bit for bit" {
    rendered img
    nb-convert -o a.bin img.nbs
    nb-geom $SMALL -o plan.nbs
    run_nb nb-convert --import a.bin -o in.nbs plan.nbs
    expect_status 0
    nb-convert -o b.bin in.nbs
    cmp a.bin b.bin
    [ "$(nb_key in.nbs IMPORTED_FROM)" = a.bin ]
}

@test "nb-convert --import: 16- and 32-bit SMV counts come back as they were written" {
    rendered img
    for bits in 16 32; do
        nb-noise -q -bits "$bits" -scale 1e4 img.nbs | nb-convert -o "n$bits.img"
        grep -a -q "TYPE=$([ "$bits" = 16 ] && echo unsigned_short || echo long_integer);" "n$bits.img"
        nb-geom $SMALL | nb-convert --import "n$bits.img" | nb-convert -o "back$bits.img"
        cmp "n$bits.img" "back$bits.img"
    done
    [ "$(stat -c %s n32.img)" -eq $((512 + 32 * 32 * 4)) ]
}

@test "nb-convert --import: an SMV it cannot read is an error, not raw floats" {
    nb-geom $SMALL -o plan.nbs
    printf '{\nHEADER_BYTES=512;\nDIM=2;\nSIZE1=32;\nSIZE2=32;\nTYPE=float;\n}\n' >f.img
    truncate -s $((512 + 4096)) f.img
    run_nb nb-convert --import f.img -o in.nbs plan.nbs
    expect_status 1
    expect_has "'f.img': SMV TYPE=float is not supported"
    printf '{\nHEADER_BYTES=512;\nDIM=2;\nSIZE1=32;\nSIZE2=32;\nTYPE=unsigned_short;\n}\n' >t.img
    truncate -s 600 t.img
    run_nb nb-convert --import t.img -o in.nbs plan.nbs
    expect_status 1
    expect_has "truncated SMV image"
    [ ! -e in.nbs ]
}

@test "nb-convert: counts that read-out noise puts below the ADC offset are negative in a CBF, said so; an SMV keeps them" {
    nb-geom -q $SMALL | nb-sim -q | nb-noise -q -seed 3 -readout 3 -o counts.nbs
    run_nb nb-convert -o r.cbf counts.nbs
    expect_status 0
    expect_has "pixels hold fewer counts than the ADC offset 40 (read-out noise): negative in the CBF"
    expect_has "an SMV image (.img) keeps the offset under the counts"
    run_nb nb-convert -o r.img counts.nbs
    expect_status 0
    expect_lacks "fewer counts than the ADC offset"
    # the SMV's pixels are the counts, the offset in them and in its header
    grep -a -q "ADC_OFFSET=40;" r.img || false
    [ "$(smv_data r.img | od -A n -v -t u2 | tr -s ' ' '\n' | sed '/^$/d' | sort -n | head -1)" -gt 0 ] || false
}

@test "nb-convert: XDS.INP and .geom sidecars are written once per run, beside the images" {
    nb-geom $SMALL -osc 1 -nframes 3 | nb-sim -q -o s.nbs
    run_nb nb-convert -o img_##.cbf -o XDS.INP -o det.geom s.nbs
    expect_status 0
    [ -s img_01.cbf ]
    [ -s img_03.cbf ]
    grep -q "^NAME_TEMPLATE_OF_DATA_FRAMES= img_??.cbf$" XDS.INP
    grep -q "^DATA_RANGE= 1 3$" XDS.INP
    grep -q "^p0/max_fs = 31$" det.geom
    # shards joined with cat repeat the plan: still one sidecar
    nb-geom $SMALL -osc 1 -nframes 3 -o plan.nbs
    nb-sim -q --shard 1/2 -o p1.nbs plan.nbs
    nb-sim -q --shard 2/2 -o p2.nbs plan.nbs
    run_nb sh -c 'cat p1.nbs p2.nbs | nb-convert -o c_##.img -o XDS2.INP'
    expect_status 0
    grep -q "^DETECTOR= ADSC" XDS2.INP
    grep -q "^NAME_TEMPLATE_OF_DATA_FRAMES= c_??.img$" XDS2.INP
}

@test "nb-convert: XDS.INP needs a CBF or SMV image name with a '#' run" {
    nb-geom $SMALL -osc 1 -nframes 2 | nb-sim -q -o s.nbs
    run_nb nb-convert -o XDS.INP s.nbs
    expect_status 2
    expect_has "'XDS.INP' needs the images' name"
    run_nb nb-convert -o one.cbf -o XDS.INP s.nbs
    expect_status 2
    [ ! -e XDS.INP ]
    [ ! -e one.cbf ]
}

@test "nb-convert: libtiff is loaded only to write a TIFF (not at start-up)" {
    command -v ldd >/dev/null || skip "ldd is not installed"
    run ldd "$(command -v nb-convert)"
    expect_status 0
    expect_lacks "libtiff"
}

@test "nb-convert: a libtiff that cannot be loaded is an error saying why, and no file is left" {
    local soname
    soname=$(strings "$(command -v nb-convert)" | grep -m1 -E '^libtiff\.so(\.[0-9]+)*$') ||
        skip "this nb-convert was built without libtiff"
    rendered img
    mkdir lib
    printf 'not a shared library\n' >"lib/$soname"
    LD_LIBRARY_PATH=$PWD/lib run_nb nb-convert -o out.tif -o out.bin img.nbs
    expect_status 1
    expect_has "nb-convert: 'out.tif': cannot load libtiff: "
    [ ! -e out.tif ]
    [ ! -e out.bin ]
    # the real one: the same command writes the TIFF
    run_nb nb-convert -o out.tif img.nbs
    expect_status 0
    [ -s out.tif ]
}
