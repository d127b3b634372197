#!/usr/bin/env bats
# The bad-input table: one row per case, across every tool.  Each row runs a
# command that must fail with the given exit status (1 runtime or data error,
# 2 usage error) and a message on stderr that names the tool and the problem,
# and must leave no output file (the -o of the row, if any, is out.*) and no
# temporary behind.  Under `make check-asan` every row also runs on the
# ASan + UBSan build, where a leak or an invalid access fails it.

load helper

S="-cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 32 -default_F 100"

setup() {
    NB_TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/nbbad.XXXXXX")"
    cd "$NB_TMP" || return 1
    mkdir fx
    nb-geom $S -q -o fx/plan.nbs
    nb-sim -q -o fx/img.nbs fx/plan.nbs
    : >fx/empty
    printf '\x00\x01\x02garbage\xff\xfe' >fx/garbage
    printf '1 2 3 100\n' >fx/ok.hkl
    printf '1 2 3 nan\n' >fx/nan.hkl
    printf '1 2 3 inf\n' >fx/inf.hkl
    printf '1 2 3\n' >fx/short.hkl
    printf '1000000000 2 3 10\n' >fx/huge.hkl
    printf '0.01 0 0\n0 0.01 0\n' >fx/short.mat
    printf '0.01 0 0\n0 nan 0\n0 0 0.01\n' >fx/nan.mat
    printf '1 2\n' >fx/short.src
    printf '0 2.5\n0.1 4\n0.2 6\n0.3 4\n' >fx/ok.stol
    printf '0 2.5\n0.1 nan\n' >fx/nan.stol
    head -c 100 fx/img.nbs >fx/trunc-header.nbs
    head -c "$(($(stat -c %s fx/plan.nbs) - 40))" fx/plan.nbs >fx/trunc-payload.nbs
    "${NB_TEST_PYTHON:-/usr/bin/python3}" - <<'PY'
d = bytearray(open("fx/plan.nbs", "rb").read())
f = bytearray(d); f[300] ^= 0x10; open("fx/flipped.nbs", "wb").write(f)
v = bytearray(d); v[8] = 7; open("fx/version.nbs", "wb").write(v)
m = bytearray(d); m[0] = 0x42; open("fx/magic.nbs", "wb").write(m)
import struct
h = bytearray(d); h[24:32] = struct.pack("<Q", 3 << 30); open("fx/hugelen.nbs", "wb").write(h)
PY
}

teardown() {
    cd / && rm -rf "$NB_TMP"
}

# bad STATUS 'message part' CMD [ARGS...]
bad() {
    local want=$1 msg=$2
    shift 2
    local tool=$1
    run_nb "$@"
    expect_status "$want"
    expect_has "$tool: "
    expect_has "$msg"
    # no output and no temporary left: only the fixtures and what run_nb keeps
    local extra
    extra=$(ls -A | grep -v -x -e fx -e stdout.bin || true)
    [ -z "$extra" ] || { echo "left behind: $extra"; return 1; }
}

# ---- nb-geom: parameters
@test "bad: nb-geom -lambda nan"                 { bad 2 "'nan' is not a finite number" nb-geom $S -lambda nan -o out.nbs; }
@test "bad: nb-geom -lambda inf"                 { bad 2 "'inf' is not a finite number" nb-geom $S -lambda inf -o out.nbs; }
@test "bad: nb-geom -lambda -1"                  { bad 2 "must be positive" nb-geom $S -lambda -1 -o out.nbs; }
@test "bad: nb-geom -energy 0"                   { bad 2 "must be positive" nb-geom $S -energy 0 -o out.nbs; }
@test "bad: nb-geom -distance 0"                 { bad 2 "option -distance: must be positive" nb-geom $S -distance 0 -o out.nbs; }
@test "bad: nb-geom -close_distance -5"          { bad 2 "must be positive" nb-geom $S -close_distance -5 -o out.nbs; }
@test "bad: nb-geom -pixel 0"                    { bad 2 "pixel size must be positive" nb-geom $S -pixel 0 -o out.nbs; }
@test "bad: nb-geom -detpixels 10000000 (size)"  { bad 2 "too large" nb-geom $S -detpixels 10000000 -o out.nbs; }
@test "bad: nb-geom -lambda (missing value)"     { bad 2 "option -lambda needs a value" nb-geom $S -lambda; }
@test "bad: nb-geom -distance 1e999"             { bad 2 "not a finite number" nb-geom $S -distance 1e999 -o out.nbs; }
@test "bad: nb-geom -N x"                        { bad 2 "-N" nb-geom $S -N x -o out.nbs; }
@test "bad: nb-geom unknown flag"                { bad 2 "unknown option '-no_such_flag'" nb-geom $S -no_such_flag; }
@test "bad: nb-geom a flag of another tool"      { bad 2 "belongs to" nb-geom $S -readout 3; }
@test "bad: nb-geom -nframes 0"                  { bad 2 "option -nframes" nb-geom $S -osc 1 -nframes 0 -o out.nbs; }
@test "bad: nb-geom -phisteps 2000000 (work)"    { bad 2 "absurd sampling" nb-geom $S -osc 1 -phisteps 2000000 -o out.nbs; }
# ---- nb-geom: files
@test "bad: nb-geom 2222^2 x 4 sources (fuzz: a 20-million-source plan)" { bad 2 "absurd sampling" nb-geom -divsteps 2222 -dispsteps 4 -cell 7 -default_F 1 -o out.nbs; }
@test "bad: nb-geom -mat missing"                { bad 1 "cannot open 'fx/none.mat'" nb-geom -mat fx/none.mat -default_F 1 -o out.nbs; }
@test "bad: nb-geom -mat binary garbage"         { bad 1 "fx/garbage" nb-geom -mat fx/garbage -default_F 1 -o out.nbs; }
@test "bad: nb-geom -mat with 6 numbers"         { bad 1 "expected 9 numbers" nb-geom -mat fx/short.mat -default_F 1 -o out.nbs; }
@test "bad: nb-geom -mat with a NaN"             { bad 1 "fx/nan.mat" nb-geom -mat fx/nan.mat -default_F 1 -o out.nbs; }
@test "bad: nb-geom -sourcefile garbage"         { bad 1 "fx/garbage" nb-geom $S -sourcefile fx/garbage -o out.nbs; }
@test "bad: nb-geom -sourcefile with a zero direction (fuzz: leak on that error)" {
    printf '0 0 0 1 1e-10\n' >fx/zero.src
    bad 1 "zero direction" nb-geom $S -sourcefile fx/zero.src -o out.nbs
}
@test "bad: nb-geom a cell whose angles make no crystal (fuzz: NaN oversampling)" {
    run_nb nb-geom -cell 78 87 987 98 8 -o out.nbs
    [ "$status" -eq 0 ] || [ "$status" -eq 2 ] || { echo "status $status"; return 1; }
    [[ "$output" != *"runtime error"* ]]
}
@test "bad: nb-geom -mask missing"               { bad 1 "cannot open 'fx/none.img'" nb-geom $S -mask fx/none.img -o out.nbs; }
@test "bad: nb-geom -mask not an SMV image"      { bad 1 "does not look like an SMV" nb-geom $S -mask fx/garbage -o out.nbs; }
@test "bad: nb-geom -o in a missing directory"   { bad 1 "none/out.nbs" nb-geom $S -o none/out.nbs; }
@test "bad: nb-geom -o /dev/full"                { bad 1 "No space left on device" nb-geom $S -o /dev/full; }
# ---- nb-hkl
@test "bad: nb-hkl -hkl missing"                 { bad 1 "cannot open 'fx/none.hkl'" nb-hkl -hkl fx/none.hkl -o out.nbs fx/plan.nbs; }
@test "bad: nb-hkl -hkl empty"                   { bad 1 "no reflections" nb-hkl -hkl fx/empty -o out.nbs fx/plan.nbs; }
@test "bad: nb-hkl -hkl binary garbage"          { bad 1 "not a text file" nb-hkl -hkl fx/garbage -o out.nbs fx/plan.nbs; }
@test "bad: nb-hkl -hkl with a NaN F"            { bad 1 "not a finite number" nb-hkl -hkl fx/nan.hkl -o out.nbs fx/plan.nbs; }
@test "bad: nb-hkl -hkl with an infinite F"      { bad 1 "not a finite number" nb-hkl -hkl fx/inf.hkl -o out.nbs fx/plan.nbs; }
@test "bad: nb-hkl -hkl with a missing column"   { bad 1 "fx/short.hkl" nb-hkl -hkl fx/short.hkl -o out.nbs fx/plan.nbs; }
@test "bad: nb-hkl -hkl with a grid over the memory limit" {
    printf '500000 0 0 1\n-500000 9000 9000 1\n' >fx/grid.hkl
    NB_MEMORY_LIMIT=1G bad 1 "more than the 1.0 GiB this machine allows" nb-hkl -hkl fx/grid.hkl -o out.nbs fx/plan.nbs
}
@test "bad: nb-hkl -hkl with an absurd index"    { bad 1 "not a (reasonable) integer" nb-hkl -hkl fx/huge.hkl -o out.nbs fx/plan.nbs; }
@test "bad: nb-hkl on an empty stream"           { bad 1 "empty stream" nb-hkl -hkl fx/ok.hkl -o out.nbs fx/empty; }
@test "bad: nb-hkl -model missing"               { bad 1 "cannot open 'fx/none.pdb'" nb-hkl -model fx/none.pdb -o out.nbs fx/plan.nbs; }
@test "bad: nb-hkl -model a directory"           { bad 1 "cannot read 'fx': Is a directory" nb-hkl -model fx -o out.nbs fx/plan.nbs; }
@test "bad: nb-hkl -model -dmin 0"               { bad 2 "must be positive" nb-hkl -model fx/none.pdb -dmin 0 -o out.nbs fx/plan.nbs; }
@test "bad: nb-hkl -dmin without -model"         { bad 2 "-dmin is for -model" nb-hkl -hkl fx/ok.hkl -dmin 2 -o out.nbs fx/plan.nbs; }
@test "bad: nb-hkl -model with -hkl"             { bad 2 "give one source of structure factors" nb-hkl -model fx/none.pdb -hkl fx/ok.hkl -o out.nbs fx/plan.nbs; }
# ---- streams (nb-sim, nb-noise, nb-convert)
@test "bad: nb-sim on binary garbage"            { bad 1 "not an nb stream" nb-sim -o out.nbs fx/garbage; }
@test "bad: nb-sim on a missing file"            { bad 1 "cannot open 'fx/none.nbs'" nb-sim -o out.nbs fx/none.nbs; }
@test "bad: nb-sim on a stream cut in a header"  { bad 1 "truncated stream" nb-sim -o out.nbs fx/trunc-header.nbs; }
@test "bad: nb-sim on a stream cut in a payload" { bad 1 "truncated" nb-sim -o out.nbs fx/trunc-payload.nbs; }
@test "bad: nb-sim on a record claiming 3 GiB"    { bad 1 "truncated stream: payload" nb-sim -o out.nbs fx/hugelen.nbs; }
@test "bad: nb-sim on it from a pipe"            {
    run_nb sh -c 'cat fx/hugelen.nbs | nb-sim -o out.nbs'
    expect_status 1
    expect_has "nb-sim: standard input: truncated stream: payload of record 1 (PLAN) has"
    [ ! -e out.nbs ]
}
@test "bad: nb-sim on a flipped bit"             { bad 1 "fails its CRC-32 check" nb-sim -o out.nbs fx/flipped.nbs; }
@test "bad: nb-sim on a wrong version"           { bad 1 "stream version 7" nb-sim -o out.nbs fx/version.nbs; }
@test "bad: nb-sim on a bad magic"               { bad 1 "not an nb stream" nb-sim -o out.nbs fx/magic.nbs; }
@test "bad: nb-sim --threads 0"                  { bad 2 "not a sensible thread count" nb-sim --threads 0 fx/plan.nbs; }
@test "bad: nb-sim --frames beyond the series"   { bad 2 "the plan has 1 frame" nb-sim --frames 2:3 -o out.nbs fx/plan.nbs; }
@test "bad: nb-sim -o /dev/full"                 { bad 1 "No space left on device" nb-sim -q -o /dev/full fx/plan.nbs; }
@test "bad: nb-noise -seed x"                    { bad 2 "'x' is not an integer" nb-noise -seed x -o out.nbs fx/img.nbs; }
@test "bad: nb-noise -readout -1"                { bad 2 "must not be negative" nb-noise -readout -1 -o out.nbs fx/img.nbs; }
@test "bad: nb-noise -scale nan"                 { bad 2 "not a finite number" nb-noise -scale nan -o out.nbs fx/img.nbs; }
@test "bad: nb-noise on a flipped bit"           { bad 1 "CRC-32" nb-noise -o out.nbs fx/flipped.nbs; }
@test "bad: nb-convert -scale nan"               { bad 2 "not a finite number" nb-convert -scale nan -o out.bin fx/img.nbs; }
@test "bad: nb-convert on garbage"               { bad 1 "not an nb stream" nb-convert -o out.bin fx/garbage; }
@test "bad: nb-convert --import of a short file" { bad 1 "float32 pixels need 4096" nb-convert --import fx/garbage -o out.nbs fx/plan.nbs; }
@test "bad: nb-convert unknown --format"         { bad 2 "unknown format 'jpeg'" nb-convert --format jpeg -o out.x fx/img.nbs; }
@test "bad: nb-convert CBF to /dev/full"         { bad 1 "No space left on device" nb-convert --format cbf -o /dev/full fx/img.nbs; }
# ---- nb-math
@test "bad: nb-math with nothing to do"          { bad 2 "nothing to do: name an operand" nb-math -o out.nbs fx/img.nbs; }
@test "bad: nb-math --scale nan"                 { bad 2 "not a finite number" nb-math --scale nan -o out.nbs fx/img.nbs; }
@test "bad: nb-math --scale x"                   { bad 2 "option --scale" nb-math --scale x -o out.nbs fx/img.nbs; }
@test "bad: nb-math --add-scaled x"              { bad 2 "option --add-scaled" nb-math --add-scaled x fx/img.nbs -o out.nbs fx/img.nbs; }
@test "bad: nb-math --add (missing value)"       { bad 2 "option --add needs a stream file" nb-math fx/img.nbs --add; }
@test "bad: nb-math --add-scaled 2 (one value)"  { bad 2 "option --add-scaled needs a factor and a stream file" nb-math fx/img.nbs --add-scaled 2; }
@test "bad: nb-math a flag of another tool"      { bad 2 "option '-seed' belongs to nb-noise, not nb-math" nb-math -seed 1 fx/img.nbs; }
@test "bad: nb-math --add - from standard input" { bad 2 "standard input is the main stream's" nb-math --add - -o out.nbs; }
@test "bad: nb-math --add a missing file"        { bad 1 "nb-math: cannot open 'fx/none.nbs': No such file or directory" nb-math --add fx/none.nbs -o out.nbs fx/img.nbs; }
@test "bad: nb-math --add garbage"               { bad 1 "fx/garbage: not an nb stream" nb-math --add fx/garbage -o out.nbs fx/img.nbs; }
@test "bad: nb-math --add a flipped bit"         { bad 1 "CRC-32" nb-math --add fx/flipped.nbs -o out.nbs fx/img.nbs; }
@test "bad: nb-math --add a stream of no image"  { bad 1 "fx/plan.nbs: the stream holds no IMAGE record" nb-math --add fx/plan.nbs -o out.nbs fx/img.nbs; }
@test "bad: nb-math on a plan (no image)"        { bad 1 "the stream holds no IMAGE record" nb-math --add fx/img.nbs -o out.nbs fx/plan.nbs; }
# ---- nb-amorphous
@test "bad: nb-amorphous without --table"         { bad 2 "no table: give --table FILE" nb-amorphous -o out.nbs fx/plan.nbs; }
@test "bad: nb-amorphous --table missing"         { bad 1 "cannot open 'fx/none.stol'" nb-amorphous --table fx/none.stol -o out.nbs fx/plan.nbs; }
@test "bad: nb-amorphous --table of garbage"      { bad 1 "'fx/garbage' line 1" nb-amorphous --table fx/garbage -o out.nbs fx/plan.nbs; }
@test "bad: nb-amorphous --table empty"           { bad 1 "'fx/empty': no data in the table" nb-amorphous --table fx/empty -o out.nbs fx/plan.nbs; }
@test "bad: nb-amorphous --table with nan"        { bad 1 "F 'nan' is not a number" nb-amorphous --table fx/nan.stol -o out.nbs fx/plan.nbs; }
@test "bad: nb-amorphous --table-x 2theta"        { bad 2 "expected stol, 4stol or q" nb-amorphous --table fx/ok.stol --table-x 2theta -o out.nbs fx/plan.nbs; }
@test "bad: nb-amorphous --thickness 0"           { bad 2 "option --thickness: must be positive" nb-amorphous --table fx/ok.stol --thickness 0 -o out.nbs fx/plan.nbs; }
@test "bad: nb-amorphous --mw -18"                { bad 2 "option --mw: must be positive" nb-amorphous --table fx/ok.stol --mw -18 -o out.nbs fx/plan.nbs; }
@test "bad: nb-amorphous --density x"             { bad 2 "option --density" nb-amorphous --table fx/ok.stol --density x -o out.nbs fx/plan.nbs; }
@test "bad: nb-amorphous -stol (nonBragg's)"      { bad 2 "-stol is nonBragg's spelling: here it is --table FILE" nb-amorphous -stol fx/ok.stol fx/plan.nbs; }
@test "bad: nb-amorphous a flag of another tool"  { bad 2 "option '-seed' belongs to nb-noise, not nb-amorphous" nb-amorphous --table fx/ok.stol -seed 1 fx/plan.nbs; }
@test "bad: nb-amorphous on garbage"              { bad 1 "not an nb stream" nb-amorphous --table fx/ok.stol -o out.nbs fx/garbage; }
@test "bad: nb-amorphous on a flipped bit"        { bad 1 "CRC-32" nb-amorphous --table fx/ok.stol -o out.nbs fx/flipped.nbs; }
@test "bad: nb-amorphous -o /dev/full"            { bad 1 "No space left on device" nb-amorphous -q --table fx/ok.stol -o /dev/full fx/plan.nbs; }
# ---- nb-bench
@test "bad: nb-bench --reps x"                   { bad 2 "'x' is not an integer" nb-bench --reps x; }
@test "bad: nb-bench --config none"              { bad 2 "unknown configuration 'none'" nb-bench --config none; }
# ---- a reader that closes the pipe early: the writer stops, no hang
@test "bad: nb-sim into a pipe closed early dies of SIGPIPE, quietly, without hanging (SIGPIPE ignored or not)" {
    # 4 MiB, more than the pipe holds: head exits before nb-sim can finish
    nb-geom $S -detpixels 1024 -q -o big.nbs
    for how in "trap - PIPE" "trap '' PIPE"; do
        run bash -c "$how; timeout 60 nb-sim -q big.nbs | head -c 100 >/dev/null; echo \${PIPESTATUS[0]}"
        [ "$output" = 141 ] || { echo "$how: nb-sim ended with $output"; return 1; }
    done
}
