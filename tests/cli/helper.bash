# Shared set-up for the bats CLI tests (load it with `load helper`).
#
# Every test runs in a fresh temporary directory (its working directory), with
# the build tree's bin/ first on PATH, so the tools under test are the ones
# `make` just built.  Helpers:
#
#   run_nb CMD [ARGS...]   like `run`, but standard output goes to ./stdout.bin
#                          and $output/$lines hold standard error only
#   nb_key FILE KEY [N]    the value of the Nth (default first) KEY= header line
#                          in an nb stream (the PLAN record comes first)
#   plan_key FILE KEY      the value of KEY in the stream's PLAN record
#   geom KEY [ARGS...]     KEY of the plan nb-geom makes from a small experiment
#                          (-cell 100 -detpixels 32) plus ARGS
#   approx GOT WANT [REL]  numbers (or space-separated vectors) equal within REL
#                          (default 1e-9) of the largest |WANT| component
#   expect_status N        fail, showing the output, unless $status is N
#   expect_has STRING      fail unless $output contains STRING
#   expect_lacks STRING    fail if $output contains STRING
#   no_files_but NAME...   fail if the working directory holds any other file
#                          (dot files included: catches left-over temporaries)
#   pixels FILE            the float32 values of a .bin image, one per line
#   deg X [Y...]           degrees to radians, full precision
#   into_closed_pipe CMD [ARGS...]
#                          run CMD with standard output a pipe whose reader is
#                          already gone: its first write meets no reader, for
#                          certain (no race with a reader exiting)
#   ignoring_sigpipe CMD [ARGS...]
#                          run CMD with SIGPIPE ignored, as `trap '' PIPE` or
#                          Python's subprocess leave it (inherited across exec)
#   nb_mpirun N CMD [ARGS...]
#                          CMD as N processes of Open MPI's mpirun on this
#                          machine, as root, within 60 s (a hang fails)
#   need_mpi [PROGRAM]     skip unless mpirun is installed and PROGRAM (default
#                          nb-fit) was built with MPI (links libmpi)
#   have_ccp4              whether the tools were built with CCP4's library
#                          (nb-hkl reads an mmCIF file's space group with it);
#                          when not, NB_CCP4_WHY holds nb-hkl's message
#   need_ccp4              skip unless they were, saying why

# `run !` and `run -N` need bats 1.5 (Debian 12 has 1.8)
bats_require_minimum_version 1.5.0

NB_ROOT="${NB_ROOT:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}"   # tests/gpu-check.sh --stand-in sets it
NB_BIN="${NB_BIN:-$NB_ROOT/bin}"   # make check-asan points it at bin-asan
NB_INPUTS="$NB_ROOT/tests/golden/inputs"
NANOBRAGG="$NB_ROOT/pipelines/nanobragg"
NONBRAGG="$NB_ROOT/pipelines/nonbragg"
PATH="$NB_BIN:$PATH"
export PATH

# The tools of the toolkit that this build has.
NB_TOOLS=""
for _t in nb-geom nb-hkl nb-sim nb-noise nb-convert nb-bench nb-fit nb-math nb-amorphous; do
    [ -x "$NB_BIN/$_t" ] && NB_TOOLS="$NB_TOOLS $_t"
done
unset _t

# A small, fast experiment: 32x32 pixels, one source, no oversampling.
SMALL="-cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 32 -default_F 100"

# Skip unless this nb-convert writes TIFF: it is built with libtiff's
# headers and loads libtiff when a .tif is written, so a build without them,
# or a machine without the library, refuses .tif (README, "Install").  For
# the tests that write a TIFF beside what they check.
# can_write_tiff: the status; need_tiff: skip saying why.
can_write_tiff() {
    local probe status
    probe=$(mktemp -d -p "${BATS_TMPDIR:-/tmp}")
    nb-geom -q -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -detpixels 2 -default_F 100 |
        nb-sim -q --device cpu | nb-convert -q -o "$probe/probe.tif" 2>"$probe/err"
    status=$?
    NB_TIFF_WHY=$(head -1 "$probe/err")
    rm -rf "$probe"
    return "$status"
}
need_tiff() {
    can_write_tiff || skip "this nb-convert cannot write TIFF: $NB_TIFF_WHY"
}

setup() {
    NB_TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/nbcli.XXXXXX")"
    cd "$NB_TMP" || return 1
}

teardown() {
    cd / && rm -rf "$NB_TMP"
}

_nb_redirect() {
    "$@" 2>&1 >stdout.bin
}

run_nb() {
    run _nb_redirect "$@"
}

nb_key() {
    local file=$1 key=$2 n=${3:-1}
    # a record's first header line follows its binary preamble on the same
    # "line", so match KEY= after a line start or any non-name byte
    LC_ALL=C grep -a -o -E "(^|[^A-Za-z0-9_.])$key=.*" "$file" | sed -n "${n}p" | cut -d= -f2-
}

plan_key() {
    nb_key "$1" "$2" 1
}

geom() {
    local key=$1
    shift
    if ! nb-geom -cell 100 100 100 90 90 90 -detpixels 32 "$@" -o geom.nbs 2>geom.err; then
        echo "nb-geom $* failed:" >&2
        cat geom.err >&2
        return 1
    fi
    plan_key geom.nbs "$key"
}

approx() {
    awk -v g="$1" -v w="$2" -v r="${3:-1e-9}" 'BEGIN {
        ng = split(g, G, " "); nw = split(w, W, " ")
        bad = (ng != nw || nw == 0)
        m = 0
        for (i = 1; i <= nw; i++) { a = W[i] < 0 ? -W[i] : W[i]; if (a > m) m = a }
        if (m == 0) m = 1e-300
        for (i = 1; i <= nw && !bad; i++) {
            d = G[i] - W[i]; if (d < 0) d = -d
            if (d > r * m) bad = 1
        }
        if (bad) { printf "approx: got \"%s\", want \"%s\" (rel %s)\n", g, w, r > "/dev/stderr"; exit 1 }
    }'
}

expect_status() {
    if [ "$status" -ne "$1" ]; then
        echo "expected exit status $1, got $status; output:"
        printf '%s\n' "$output"
        return 1
    fi
}

expect_has() {
    case "$output" in
    *"$1"*) return 0 ;;
    esac
    echo "expected the output to contain: $1"
    echo "output was:"
    printf '%s\n' "$output"
    return 1
}

expect_lacks() {
    case "$output" in
    *"$1"*)
        echo "expected the output not to contain: $1"
        echo "output was:"
        printf '%s\n' "$output"
        return 1 ;;
    esac
    return 0
}

no_files_but() {
    local f extra=""
    for f in .* *; do
        case "$f" in . | .. | '*' | '.*') continue ;; esac
        local ok=0 want
        for want in "$@"; do [ "$f" = "$want" ] && ok=1; done
        [ "$ok" = 1 ] || extra="$extra $f"
    done
    if [ -n "$extra" ]; then
        echo "unexpected files left behind:$extra"
        return 1
    fi
}

pixels() {
    od -A n -v -t f4 "$1" | tr -s ' ' '\n' | sed '/^$/d'
}

deg() {
    awk -v s="$*" 'BEGIN {
        n = split(s, a, " ")
        for (i = 1; i <= n; i++) printf "%s%.17g", (i > 1 ? " " : ""), a[i] * atan2(0, -1) / 180
        print ""
    }'
}

into_closed_pipe() {
    local r w st
    rm -f closed.fifo
    mkfifo closed.fifo
    # Linux opens a FIFO read-write without waiting; that end is the only
    # reader, so the write end opens at once, and closing the reader leaves a
    # pipe nobody will ever read
    exec {r}<>closed.fifo {w}>closed.fifo
    exec {r}<&-
    rm -f closed.fifo
    "$@" >&$w
    st=$?
    exec {w}>&-
    return $st
}

ignoring_sigpipe() (
    trap '' PIPE
    "$@"
)

# an SMV file's pixel bytes (after its HEADER_BYTES)
smv_data() {
    local hb
    hb=$(head -c 128 "$1" | tr -d '\0' | sed -n 's/^HEADER_BYTES= *\([0-9]*\);/\1/p')
    [ -n "$hb" ] || return 1
    tail -c +$((hb + 1)) "$1"
}

# Frame FRAME (0-based) of stream FILE with pixel (fast 7, slow ROW, default 5)
# of the whole image made NaN, its record's CRC made again
# (docs/stream-format.md 1)
nan_in_frame() {
    local py=${NB_TEST_PYTHON:-/usr/bin/python3}
    command -v "$py" >/dev/null || skip "$py is not installed"
    "$py" - "$1" "$2" "${3:-5}" <<'PYEOF'
import struct, sys, zlib
path, frame, row = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = bytearray(open(path, 'rb').read())
pos = 0
while pos < len(data):
    hlen, plen = struct.unpack_from('<IQ', data, pos + 20)
    kind = bytes(data[pos + 12:pos + 20]).rstrip(b'\0')
    head = bytes(data[pos + 32:pos + 32 + hlen]).decode()
    end = pos + 32 + hlen + plen
    if kind == b'IMAGE' and '\nFRAME=%s\n' % frame in head:
        width = int([l for l in head.split('\n') if l.startswith('FPIXELS=')][0].split('=')[1])
        array = [l for l in head.split('\n') if l.startswith('ARRAY.pixels=')][0].split('=')[1].split()
        struct.pack_into('<f', data, pos + 32 + hlen + int(array[2]) + 4 * (row * width + 7), float('nan'))
        struct.pack_into('<I', data, end, zlib.crc32(bytes(data[pos:end])) & 0xffffffff)
    pos = end + 4
open(path, 'wb').write(bytes(data))
PYEOF
}

# N processes of CMD under Open MPI's mpirun, on this machine.  The tests run
# as root, which mpirun refuses without OMPI_ALLOW_RUN_AS_ROOT and its
# _CONFIRM; --oversubscribe: more processes than CI's 2 cores (a loaded
# machine gives mpirun fewer free slots); shared memory by copy through a
# buffer, not CMA's process_vm_readv, which containers often deny.  Under
# timeout: a rank waiting for one that has gone fails the test, not CI (the
# limit far above a run's time on a loaded machine: 180 s; sanitized, 600 s,
# where a joint fit with F of two ranks beside another test file once took
# more than 60).  In a sanitized build (make check-asan) the ranks unwind
# every allocation's stack in full, so that tests/lsan.supp knows Open MPI's
# own leaks by its libraries (fast unwinding stops in components
# MPI_Finalize has unloaded).
nb_mpirun() {
    local n=$1 limit=180
    shift
    if [ -n "${NB_SANITIZED:-}" ]; then
        local ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
        export ASAN_OPTIONS
        limit=600
    fi
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
        timeout -k 10 "$limit" mpirun -n "$n" --oversubscribe "$@"
}

# Skip unless mpirun is here and PROGRAM (default nb-fit) was built with MPI:
# the build compiles MPI in only where it found mpicc (Makefile, MPICC)
need_mpi() {
    local prog=${1:-$NB_BIN/nb-fit}
    command -v mpirun >/dev/null || skip "mpirun is not installed (Debian: openmpi-bin)"
    [ -x "$prog" ] || skip "$prog is not built (make check builds it)"
    ldd "$prog" 2>/dev/null | grep -q 'libmpi\.' ||
        skip "$(basename "$prog") was built without MPI (no mpicc when it was built; Debian: libopenmpi-dev)"
}

have_ccp4() {
    local st=0
    printf "data_p\n_symmetry.space_group_name_H-M 'P 1'\nloop_\n_refln.index_h\n_refln.index_k\n_refln.index_l\n_refln.F_meas_au\n1 2 3 4\n" > probe.cif
    nb-geom -q -cell 10 10 10 90 90 90 -detpixels 4 | nb-hkl -hkl probe.cif -o probe.nbs 2>probe.err || st=1
    NB_CCP4_WHY=$(head -1 probe.err)
    rm -f probe.cif probe.nbs probe.err
    return "$st"
}

need_ccp4() {
    have_ccp4 || skip "the tools were built without CCP4's library: $NB_CCP4_WHY"
}

# Skip in the sanitizer build (make check-asan): a test whose time is DIALS's
# own spot finding and indexing of nb's files.  DIALS runs no code of nb's;
# the sanitized suite renders and writes those files in other tests, and
# make check runs these in full.
skip_dials_processing_if_sanitized() {
    [ -z "${NB_SANITIZED:-}" ] ||
        skip "sanitized: DIALS's own spot finding and indexing run no code of nb's (make check runs them)"
}
