#!/usr/bin/env bats
# make demo: what a new user runs first renders an image and a picture of it,
# and says where they are.

load helper

@test "make demo-built renders floatimage.bin and a 1024 x 1024 PNG preview, and names them" {
    # -o all: the tools under test ($NB_BIN) are built already; only the recipe runs
    run make -C "$NB_ROOT" --no-print-directory -o all demo-built BIN="$NB_BIN" DEMO="$NB_TMP/demo"
    expect_status 0
    expect_has "demo: wrote $NB_TMP/demo/floatimage.bin"
    expect_has "demo: wrote $NB_TMP/demo/preview.png, a picture of it: open $NB_TMP/demo/preview.png"
    [ "$(stat -c %s demo/floatimage.bin)" -eq $((1024 * 1024 * 4)) ]
    # PNG signature, then the IHDR chunk: width and height 1024 (big-endian)
    [ "$(od -A n -t x1 -N 8 demo/preview.png | tr -d ' ')" = 89504e470d0a1a0a ]
    [ "$(od -A n -t x1 -j 16 -N 8 demo/preview.png | tr -d ' ')" = 0000040000000400 ]
}
