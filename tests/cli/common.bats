#!/usr/bin/env bats
# Conventions every tool follows: standard options, exit codes (0 ok, 1 runtime
# or data error, 2 usage error; killed by SIGPIPE, quietly, when the reader of
# stdout goes away), "tool: message" on stderr, data only on stdout, flags
# owned by another tool named as such, no binary on a terminal.

load helper

@test "common: the tools are built" {
    for t in nb-geom nb-hkl nb-sim nb-convert; do
        [ -x "$NB_BIN/$t" ] || { echo "missing $NB_BIN/$t (run make)"; return 1; }
    done
}

@test "common: --help exits 0 with a usage line, options and exit status" {
    for t in $NB_TOOLS; do
        run "$t" --help
        expect_status 0
        [ "${lines[0]}" != "${lines[0]#Usage: $t }" ] || { echo "$t: first line: ${lines[0]}"; return 1; }
        expect_has "Options:"
        expect_has "--version"
        expect_has "Exit status: 0 success, 1 runtime or data error, 2 usage error."
    done
}

@test "common: every --help ends with where set-up, the GPU backend and the skipped tests are told; nb-sim's names this build's backends" {
    for t in $NB_TOOLS; do
        run "$t" --help
        expect_status 0
        # the last five lines: one shared footer
        local tail5
        tail5=$(printf '%s\n' "${lines[@]}" | tail -5)
        for w in "make demo" "tools/install-deps.sh" "'make" "check' does the same" "each skipped test and its reason" \
            "CUDA backend" "nb-sim --device"; do
            [[ "$tail5" == *"$w"* ]] || { echo "$t --help ends without '$w':"; echo "$tail5"; return 1; }
        done
    done
    run nb-sim --version
    local backends=${lines[1]}
    run nb-sim --help
    expect_has "This build: $backends"
    expect_has "--device cpu|cuda|auto"
    expect_has "default auto: CUDA when this build has it and a"
    # the man pages say the same, without what a build has
    grep -q "^\.SH SET-UP" "$NB_ROOT/man/man1/nb-hkl.1"
    run ! grep -q "This build" "$NB_ROOT/man/man1/nb-sim.1"
}

@test "common: -h is --help" {
    for t in $NB_TOOLS; do
        run "$t" --help
        local long=$output
        run "$t" -h
        expect_status 0
        [ "$output" = "$long" ] || { echo "$t: -h differs from --help"; return 1; }
    done
}

@test "common: --help stops at once, even with other arguments" {
    for t in $NB_TOOLS; do
        run_nb "$t" --help -no_such_flag
        expect_status 0
        head -1 stdout.bin | grep -q "^Usage: $t " || { echo "$t: no usage on stdout"; return 1; }
    done
}

@test "common: --version prints the tool name and the project version" {
    local v
    v=$(cat "$NB_ROOT/VERSION")
    for t in $NB_TOOLS; do
        run "$t" --version
        expect_status 0
        # the first line names the tool and the version; nb-sim and nb-noise add their backends
        [ "${lines[0]}" = "$t (nb toolkit) $v" ] || { echo "$t --version: '$output' (VERSION file: $v)"; return 1; }
        if [ "$t" = nb-sim ]; then
            [[ "${lines[1]}" == "backends: cpu "* ]] || { echo "nb-sim --version: '$output'"; return 1; }
        elif [ "$t" = nb-noise ]; then
            [[ "${lines[1]}" == "backends: cpu"* ]] || { echo "nb-noise --version: '$output'"; return 1; }
        else
            [ "${#lines[@]}" -eq 1 ] || { echo "$t --version: '$output'"; return 1; }
        fi
    done
}

@test "common: --help lists every option once" {
    for t in $NB_TOOLS; do
        run "$t" --help
        local dups
        dups=$(printf '%s\n' "$output" | awk '/^Options:/ { on = 1; next } /^$/ { on = 0 } on' |
            grep -E '^ {2,6}-' | sed -E 's/^ +//; s/ .*//; s/,$//' | sort | uniq -d)
        [ -z "$dups" ] || { echo "$t --help lists more than once: $dups"; return 1; }
    done
}

@test "common: an unknown option is a usage error (2) naming the tool, nothing on stdout" {
    for t in $NB_TOOLS; do
        run_nb "$t" -no_such_option_xyz
        expect_status 2
        [ "${lines[0]}" = "$t: unknown option '-no_such_option_xyz'" ] || { echo "$t: ${lines[0]}"; return 1; }
        expect_has "Try '$t --help'"
        [ ! -s stdout.bin ] || { echo "$t wrote to stdout"; return 1; }
    done
}

@test "common: an unknown long option is a usage error" {
    for t in $NB_TOOLS; do
        run_nb "$t" --no-such-option
        expect_status 2
        [ "${lines[0]#"$t: "}" != "${lines[0]}" ] || { echo "$t: ${lines[0]}"; return 1; }
    done
}

@test "common: -o without a file name is a usage error" {
    for t in $NB_TOOLS; do
        run_nb "$t" -o
        expect_status 2
        expect_has "$t: option -o needs a file name"
    done
}

@test "common: --threads needs a sensible number" {
    for t in $NB_TOOLS; do
        run_nb "$t" --threads
        expect_status 2
        expect_has "$t: option --threads"
        run_nb "$t" --threads 0
        expect_status 2
        run_nb "$t" --threads lots
        expect_status 2
        expect_has "$t: option --threads"
    done
}

@test "common: flags owned by another tool name their owner" {
    # tool flag owner
    while read -r t flag owner; do
        [ -x "$NB_BIN/$t" ] || continue
        run_nb "$t" "$flag" 1
        expect_status 2
        [ "${lines[0]}" = "$t: option '$flag' belongs to $owner, not $t" ] ||
            { echo "$t $flag: ${lines[0]}"; return 1; }
    done <<'EOF'
nb-sim -seed nb-noise
nb-sim -hkl nb-hkl
nb-sim -distance nb-geom
nb-sim -floatfile nb-convert
nb-sim -default_F nb-hkl
nb-sim -mosaic nb-geom
nb-hkl -seed nb-noise
nb-hkl -distance nb-geom
nb-hkl -floatfile nb-convert
nb-hkl -precision nb-sim or nb-fit
nb-hkl -cell nb-geom
nb-convert -seed nb-noise
nb-convert -hkl nb-hkl
nb-convert -distance nb-geom
nb-convert -precision nb-sim or nb-fit
nb-convert -dump nb-hkl
EOF
}

@test "common: a misspelt flag gets a suggestion" {
    while read -r t typo want; do
        [ -x "$NB_BIN/$t" ] || continue
        run_nb "$t" "$typo" 1
        expect_status 2
        expect_has "$t: unknown option '$typo' (did you mean $want?)"
    done <<'EOF'
nb-geom -distanse -distance
nb-geom -detpixel -detpixels
nb-geom -lamda -lambda
nb-geom -mosflmm -mosflm
nb-hkl -dumpfle -dumpfile
nb-hkl -default_f -default_F
nb-sim -printout_pixl -printout_pixel
nb-sim -precison -precision
nb-convert -flotfile -floatfile
EOF
}

@test "common: a flag missing its value is a usage error naming the option" {
    while read -r t flag; do
        run_nb "$t" "$flag"
        expect_status 2
        expect_has "$t: option $flag needs"
    done <<'EOF'
nb-geom -distance
nb-geom -cell
nb-geom -roi
nb-geom -fdet_vector
nb-hkl -hkl
nb-hkl -default_F
nb-hkl -dump
nb-sim -precision
nb-sim -printout_pixel
nb-convert -floatfile
EOF
}

@test "common: tools that read a stream fail (1) on a missing stream file, naming it" {
    for t in $NB_TOOLS; do
        case $t in nb-geom | nb-bench) continue ;; esac
        local extra=""
        [ "$t" = nb-convert ] && extra="-o out.bin"
        [ "$t" = nb-math ] && extra="--scale 1"
        [ "$t" = nb-amorphous ] && extra="--table t.stol"
        run_nb "$t" $extra no-such-stream.nbs
        expect_status 1
        expect_has "$t: cannot open 'no-such-stream.nbs': No such file or directory"
        [ ! -e out.bin ] || return 1
    done
}

@test "common: tools that read a stream reject an empty, a foreign and a truncated stream" {
    nb-geom $SMALL -o plan.nbs
    : > empty.nbs
    echo "this is not an nb stream" > text.nbs
    head -c 100 plan.nbs > cut.nbs
    for t in $NB_TOOLS; do
        case $t in nb-geom | nb-bench) continue ;; esac
        local extra=""
        [ "$t" = nb-math ] && extra="--scale 1"
        [ "$t" = nb-amorphous ] && extra="--table t.stol"
        run_nb "$t" $extra empty.nbs
        expect_status 1
        expect_has "$t: empty.nbs: empty stream"
        run_nb "$t" $extra text.nbs
        expect_status 1
        expect_has "$t: text.nbs: not an nb stream"
        run_nb "$t" $extra cut.nbs
        expect_status 1
        expect_has "$t: cut.nbs: truncated stream"
    done
}

@test "common: a second input stream is a usage error" {
    nb-geom $SMALL -o plan.nbs
    for t in nb-hkl nb-sim nb-convert; do
        run_nb "$t" plan.nbs plan.nbs
        expect_status 2
        expect_has "$t: only one input stream"
    done
}

@test "common: tools refuse to write a binary stream to a terminal" {
    command -v script >/dev/null || skip "script(1) is not installed"
    nb-geom $SMALL -o plan.nbs
    run script -qec "nb-geom $SMALL" /dev/null
    expect_status 2
    expect_has "nb-geom: refusing to write binary data to a terminal"
    run script -qec "nb-hkl plan.nbs" /dev/null
    expect_status 2
    expect_has "nb-hkl: refusing to write binary data to a terminal"
    run script -qec "nb-sim plan.nbs" /dev/null
    expect_status 2
    expect_has "nb-sim: refusing to write binary data to a terminal"
}

@test "common: -o writes the file and nothing to stdout; -o - is stdout" {
    run_nb nb-geom $SMALL -o plan.nbs
    expect_status 0
    [ -s plan.nbs ]
    [ ! -s stdout.bin ]
    run_nb nb-geom $SMALL -o -
    expect_status 0
    [ -s stdout.bin ]
    [ "$(head -c 4 stdout.bin | tail -c 3)" = NBS ]
}

@test "common: a stream goes through stdin and stdout" {
    nb-geom $SMALL | nb-hkl | nb-sim -q | nb-convert -o img.bin
    [ "$(stat -c %s img.bin)" -eq $((32 * 32 * 4)) ]
}

@test "common: -o into a missing directory is a runtime error (1) naming the file" {
    run_nb nb-geom $SMALL -o no/such/dir/plan.nbs
    expect_status 1
    expect_has "nb-geom: "
    expect_has "no/such/dir/plan.nbs"
    nb-geom $SMALL -o plan.nbs
    run_nb nb-hkl plan.nbs -o no/such/dir/h.nbs
    expect_status 1
    expect_has "no/such/dir/h.nbs"
    run_nb nb-sim -q plan.nbs -o no/such/dir/s.nbs
    expect_status 1
    expect_has "no/such/dir/s.nbs"
}

# A stage whose reader went away is not the cause of a failure: it ends as
# `yes | head` does, whether its parent ignored SIGPIPE or not.
@test "common: every tool writing into a closed pipe dies of SIGPIPE (141) without a word, SIGPIPE ignored or not" {
    nb-geom $SMALL -q -o plan.nbs
    nb-geom $SMALL -detpixels 1024 -q -o big.nbs
    nb-sim -q -o img.nbs plan.nbs
    nb-convert -q -o img.bin img.nbs
    # big.nbs: a 4 MiB image, which nb-sim hands to a pipe with vmsplice
    for how in "" ignoring_sigpipe; do
        # -q: no statistics or noise line either; an error would still print
        for cmd in "nb-geom -q $SMALL" "nb-hkl -q plan.nbs" "nb-sim -q plan.nbs" "nb-sim -q big.nbs" \
            "nb-noise -q img.nbs" "nb-convert -q --import img.bin plan.nbs"; do
            run $how into_closed_pipe $cmd
            [ "$status" -eq 141 ] || { echo "${how:-default}: $cmd: status $status: $output"; return 1; }
            [ -z "$output" ] || { echo "${how:-default}: $cmd printed: $output"; return 1; }
        done
    done
}

@test "common: every tool's --help into a closed pipe dies of SIGPIPE (141) without a word" {
    for t in $NB_TOOLS; do
        run ignoring_sigpipe into_closed_pipe "$t" --help
        [ "$status" -eq 141 ] || { echo "$t: status $status: $output"; return 1; }
        [ -z "$output" ] || { echo "$t printed: $output"; return 1; }
    done
}

@test "common: when the last stage of a pipe fails, it alone reports; nb-sim before it ends by SIGPIPE or had finished" {
    # a 16 MiB image, more than a pipe holds: nb-sim is still writing when
    # nb-convert gives up (or, on a slow reader, has written it all: status 0)
    for how in "" ignoring_sigpipe; do
        run $how bash -c "nb-geom $SMALL -detpixels 2048 -q | nb-sim -q | nb-convert -q -o no/such/dir/x.bin
                          echo \"statuses \${PIPESTATUS[*]}\""
        expect_status 0
        expect_has "nb-convert: cannot write 'no/such/dir/x.bin'"
        expect_lacks "nb-sim"
        [[ "${lines[-1]}" =~ ^statuses\ 0\ (141|0)\ 1$ ]] || { echo "${how:-default}: ${lines[-1]}"; return 1; }
    done
}

@test "common: -q silences warnings, errors still print" {
    run_nb nb-geom -q $SMALL -mosaic 1 -o plan.nbs
    expect_status 0
    [ -z "$output" ] || { echo "stderr: $output"; return 1; }
    run_nb nb-geom -q -cell 100 -distance abc
    expect_status 2
    expect_has "nb-geom: option -distance"
}

@test "common: the man pages in man/ are the tools' --help-man (run 'make man' after changing options)" {
    for t in $NB_TOOLS; do
        [ -f "$NB_ROOT/man/man1/$t.1" ] || { echo "man/man1/$t.1 is missing"; return 1; }
        "$t" --help-man >"$t.1"
        diff -u "$NB_ROOT/man/man1/$t.1" "$t.1" || { echo "man/man1/$t.1 is out of date"; return 1; }
    done
}

@test "common: 'man -M man nb-TOOL' shows each tool's page" {
    command -v man >/dev/null || skip "man (man-db) is not installed"
    # a minimised system (Ubuntu's images) keeps a man that formats nothing
    command -v nroff >/dev/null || skip "nroff (groff-base) is not installed: man cannot format a page"
    for t in $NB_TOOLS; do
        MANPAGER=cat MANWIDTH=80 man -M "$NB_ROOT/man" "$t" >page.txt 2>err.txt || { cat err.txt; return 1; }
        grep -q "^NAME" page.txt && grep -q "$t" page.txt || { echo "$t: no page"; return 1; }
    done
}

@test "common: a long render shows a progress bar on a terminal's stderr, and none otherwise" {
    command -v script >/dev/null || skip "script (util-linux) is not installed"
    nb-geom -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -detpixels 256 -default_F 100 -o plan.nbs
    script -qec "nb-sim -o /dev/null plan.nbs" /dev/null | tr '\r' '\n' >tty.txt
    grep -q "nb-sim: rendering \[" tty.txt || { cat tty.txt; return 1; }
    grep -q "100%" tty.txt
    run_nb nb-sim -o /dev/null plan.nbs
    expect_lacks "rendering ["
    script -qec "nb-sim -noprogress -o /dev/null plan.nbs" /dev/null | tr '\r' '\n' >tty2.txt
    run ! grep -q "rendering \[" tty2.txt
}

@test "common: a series' progress bar is one bar for the run: frame i/N, its percentage running on from frame to frame" {
    command -v script >/dev/null || skip "script (util-linux) is not installed"
    nb-geom -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -detpixels 256 -default_F 100 -osc 1 -nframes 3 -o plan.nbs
    script -qec "nb-sim --threads 1 -o /dev/null plan.nbs" /dev/null | tr '\r' '\n' >tty.txt
    local i
    for i in 1 2 3; do
        grep -q "nb-sim: rendering frame $i/3 \[" tty.txt || { cat tty.txt; return 1; }
    done
    # frame 2 starts where frame 1 left the run (a third of it), and no line goes back
    [ "$(grep -m1 'frame 2/3 \[' tty.txt | sed 's/.*\] *\([0-9]*\)%.*/\1/')" -ge 33 ]
    grep -o '\] *[0-9]*%' tty.txt | tr -dc '0-9\n' | awk 'NR > 1 && $1 < last { print "back from " last " to " $1; bad = 1 } { last = $1 } END { exit bad }'
    grep -q "ETA" tty.txt
    grep -q "frame 3/3 \[#*\] 100%" tty.txt
    # not on a pipe
    run_nb nb-sim -o /dev/null plan.nbs
    expect_lacks "rendering frame"
}

@test "common: the man pages format without groff warnings and name every option of --help" {
    command -v groff >/dev/null || skip "groff is not installed"
    for t in $NB_TOOLS; do
        groff -man -Tutf8 -ww -z "$NB_ROOT/man/man1/$t.1" 2>warn.txt
        [ ! -s warn.txt ] || { echo "$t:"; cat warn.txt; return 1; }
        groff -man -Tascii "$NB_ROOT/man/man1/$t.1" 2>/dev/null | col -b >page.txt
        grep -q "^NAME" page.txt || { echo "$t: no NAME section"; return 1; }
        # every option the --help lists appears in the page
        "$t" --help | grep -oE '^ +-{1,2}[A-Za-z][A-Za-z0-9_-]*' | sed 's/^ *//' | sort -u >opts.txt
        while read -r o; do
            grep -q -- "$o" page.txt || { echo "$t: $o is in --help but not in the man page"; return 1; }
        done <opts.txt
    done
}

@test "common: a small pipeline is valgrind-clean (no invalid access, no definite leak), every tool" {
    command -v valgrind >/dev/null || skip "valgrind is not installed"
    [ -z "${NB_SANITIZED:-}" ] || skip "the sanitizer build runs under ASan, not valgrind"
    local vg="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite"
    printf '1 2 3 100\n-1 0 2 50\n' >tiny.hkl
    $vg nb-geom -cell 50 50 50 90 90 90 -lambda 1 -N 3 -distance 50 -detpixels 24 -pixel 0.5 -hkl tiny.hkl \
        -osc 1 -nframes 2 -o plan.nbs
    $vg nb-hkl -o hkl.nbs plan.nbs
    OMP_NUM_THREADS=1 $vg nb-sim -q -o img.nbs hkl.nbs
    $vg nb-math -q --add img.nbs --scale 0.5 -o half.nbs img.nbs
    printf '# a table\n0 2.5\n0.1 4\n0.2 6\n0.3 4\n0.4 3\n' >t.stol
    OMP_NUM_THREADS=1 $vg nb-amorphous -q --table t.stol -o bg.nbs plan.nbs
    $vg nb-math -q --add bg.nbs -o sum.nbs img.nbs
    $vg nb-noise -q -o noisy.nbs img.nbs
    local tif=()
    if can_write_tiff; then tif=(-o f_#.tif); fi
    $vg nb-convert -q -o f_#.cbf -o f_#.img -o f_#.bin "${tif[@]}" -o f_#.png -o XDS.INP -o f.geom noisy.nbs
    [ -s f_2.cbf ]
    [ -s XDS.INP ]
}
