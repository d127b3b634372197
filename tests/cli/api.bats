#!/usr/bin/env bats
# The library a program ships against (engine/nb.h; issue 47): libnb.so,
# built and installed (make install PREFIX=DIR), exports nb.h's functions and
# nothing else (tests/abi/check-exports.sh), and says its version as nb.h
# does.  (examples/render.c and render.py: tests/cli/library.bats.)

load helper

# The installed tree, once per file (as library.bats makes it); the sanitized
# run's library is the regular build's, which check-asan does not make.
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
    export PKG_CONFIG_PATH="$NB_PREFIX/lib/pkgconfig"
}

# A program built with pkg-config against the installed tree, warnings as errors.
build_example() { # SOURCE OUTPUT
    # shellcheck disable=SC2046
    cc -std=c11 -Wall -Wextra -Werror "$1" $(pkg-config --cflags --libs nb) -o "$2"
}

@test "api: libnb.so, built and installed, exports nb.h's functions alone, each versioned NB_1" {
    need_installed
    run -0 "$NB_ROOT/tests/abi/check-exports.sh" "$NB_ROOT/build/libnb.so" "$NB_ROOT/engine/nb.h"
    # every installed header counts: nb.h is the one
    run -0 ls "$NB_PREFIX/include"
    [ "$output" = "nb.h" ] || false
    run -0 "$NB_ROOT/tests/abi/check-exports.sh" "$NB_PREFIX/lib/libnb.so" "$NB_PREFIX/include/nb.h"
    expect_has "18 symbols"
    run -0 nm -D --defined-only "$NB_PREFIX/lib/libnb.so"
    expect_has "nb_render_frame@@NB_1"
    expect_lacks "nb_plan_from_record"
}

@test "api: the export gate fails on a library that exports a symbol the header does not declare, or lacks one" {
    printf 'int helper(void) { return 1; }\nconst char *nb_last_error(void) { return ""; }\n' > fake.c
    cc -shared -fPIC fake.c -o libfake.so
    run -1 "$NB_ROOT/tests/abi/check-exports.sh" libfake.so "$NB_ROOT/engine/nb.h"
    expect_has "do not declare"
    expect_has "  helper"
    expect_has "  nb_render_frame"
}

@test "api: nb.h's NB_VERSION_* are the VERSION file's, nb_version_number's" {
    need_installed
    printf '#include <nb.h>\n#include <stdio.h>\nint main(void) { printf("%%d.%%d.%%d %%d %%d\\n", NB_VERSION_MAJOR, NB_VERSION_MINOR, NB_VERSION_PATCH, NB_VERSION_CHECK(), nb_version_number() == NB_VERSION_NUMBER); return 0; }\n' > v.c
    build_example v.c v
    run -0 ./v
    [ "$output" = "$(cat "$NB_ROOT/VERSION") 1 1" ] || false
}
