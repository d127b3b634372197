#!/usr/bin/env bats
# The GPU check made ready on a machine without a GPU (issue 51): the table
# of the kernels' registers and spills (bench/ptxas-table.sh), the set of
# tools and libraries carried to the GPU machine (bench/gpu-carry.sh) and its
# dry run, which hides this machine's copies of what the set carries and
# must stop only for want of a GPU, after gpu.bats has passed with the CPU
# standing in for the GPU.  Apart from gpu.bats, which the dry run runs.

load helper

# a log as nvcc -Xptxas -v writes it: a kernel that spills, one that does not
ptxas_log() {
    cat <<'EOF'
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z6k_gradI8nb_fdual10nb_fparams8nb_fgradEvT0_T1_iPfPdPi' for 'sm_90'
ptxas info    : Function properties for _Z6k_gradI8nb_fdual10nb_fparams8nb_fgradEvT0_T1_iPfPdPi
    144 bytes stack frame, 88 bytes spill stores, 116 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 144 bytes cumulative stack size, 32 bytes smem
ptxas info    : Function properties for _Z11nb_fpx_termPK10nb_fparams
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z8k_double10nb_kparamsPfPdPi' for 'sm_80'
ptxas info    : Function properties for _Z8k_double10nb_kparamsPfPdPi
    40 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 164 registers, used 1 barriers, 40 bytes cumulative stack size, 32 bytes smem
EOF
}

@test "gpu-prep: ptxas-table.sh makes one line a kernel and architecture, and fails where a named kernel spills" {
    ptxas_log > ptxas.txt
    run -0 "$NB_ROOT/bench/ptxas-table.sh" ptxas.txt
    [ "${#lines[@]}" -eq 3 ] || false
    [[ "${lines[1]}" == *"sm_80"*"164"*"k_double"* ]] || false
    [[ "${lines[2]}" == *"sm_90"*"255"*"144"*"88"*"116"* ]] || false
    run -0 "$NB_ROOT/bench/ptxas-table.sh" --no-spills k_double ptxas.txt
    run -1 "$NB_ROOT/bench/ptxas-table.sh" --no-spills k_grad ptxas.txt
    [[ "$output" == *"kernels named 'k_grad' spill"* ]] || false
    run -1 "$NB_ROOT/bench/ptxas-table.sh" --no-spills k_nosuch ptxas.txt
    [[ "$output" == *"no kernel named 'k_nosuch'"* ]] || false
    : > empty.txt
    run -1 "$NB_ROOT/bench/ptxas-table.sh" empty.txt
    [[ "$output" == *"no kernel in"* ]] || false
    run -2 "$NB_ROOT/bench/ptxas-table.sh" --bogus ptxas.txt
}

@test "gpu-prep: gpu-carry.sh and gpu-session.sh refuse what they cannot use (status 2)" {
    run -2 "$NB_ROOT/bench/gpu-carry.sh" --bogus
    run -2 "$NB_ROOT/bench/gpu-carry.sh" --ref-cuda ./nothing-here
    [[ "$output" == *"--ref-cuda './nothing-here' is not an executable"* ]] || false
    run -2 "$NB_ROOT/bench/gpu-carry.sh" --dir "$NB_ROOT"
    [[ "$output" == *"would empty the checkout"* ]] || false
    mkdir empty
    run -2 "$NB_ROOT/bench/gpu-session.sh" --carry empty --out gs
    [[ "$output" == *"holds no bin/nb-sim"* ]] || false
    run -2 "$NB_ROOT/bench/gpu-session.sh" --carry
    run -2 "$NB_ROOT/tests/gpu-check.sh" --bogus
}

@test "gpu-prep: the carried set holds what the tools load, and its dry run stops only for want of a GPU" {
    [ -z "${NB_SANITIZED:-}" ] || skip "the set carries the plain build's tools (bin/), not the sanitizers'"
    "$NB_ROOT/bin/nb-sim" --version | grep -q cuda || skip "this build has no CUDA backend (no nvcc at build time)"
    [ "$(id -u)" = 0 ] || skip "the dry run hides this machine's libraries in a mount namespace: it needs root"
    unshare -m true 2>/dev/null || skip "unshare -m is refused here (a container without CAP_SYS_ADMIN)"
    nb-geom -default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -detpixels 8 -o probe.nbs
    if nb-sim -q --device cuda -o /dev/null probe.nbs 2>/dev/null; then
        skip "this machine has a GPU: bench/gpu-session.sh runs the whole check here"
    fi
    run -0 "$NB_ROOT/bench/gpu-carry.sh" --no-build --no-ptxas --dir carry --dry-run
    [[ "$output" == *"stopped only for want of a GPU"* ]] || false
    # what the GPU machine lacks travels: every library the tools link, bats, the tests' tools
    for t in carry/bin/nb-*; do
        ldd "$t" | awk '$2 == "=>" { print $1 }' | while read -r so; do
            case $so in libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|ld-linux*) ;;
                *) [ -e "carry/lib/$so" ] || { echo "$t: $so is not carried"; exit 1; } ;;
            esac
        done
    done
    [ -x carry/bats/bin/bats ] || false
    [ -x carry/build/tests/nb-imgcmp ] || false
    [ -e carry/lib/libnb.so ] || false
    grep -q "^commit: " carry/MANIFEST.txt || false
    grep -q "the CPU standing in for the GPU: [1-9][0-9]* passed, 0 failed" carry/dry-run/summary.txt || false
    # a set older than the checkout's sources is refused
    sed -i '1s/^[0-9a-f]*/0000000000000000000000000000000000000000000000000000000000000000/' carry/sources.sha256
    run -1 "$NB_ROOT/bench/gpu-session.sh" --carry carry --out gs2 --parts build
    [[ "$output" == *"build: FAILED"* ]] || false
    run -0 tar -xzOf gs2/results.tgz ./build.log
    [[ "$output" == *"built from other sources than this checkout's"* ]] || false
}

@test "gpu-prep: the fast derivative kernels compile without spills on sm_80 and sm_90 (make ptxas, no GPU needed)" {
    [ -z "${NB_SANITIZED:-}" ] || skip "the CUDA code is the plain build's: make check checks it"
    "$NB_ROOT/bin/nb-sim" --version | grep -q cuda || skip "this build has no CUDA backend (no nvcc at build time)"
    # the registers are at the cap (255): a value more kept alive spills again
    make -s -C "$NB_ROOT" ptxas BUILD="$PWD/ptxas-build" \
        CUDA_ARCH='-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90' > ptxas.txt 2>&1 || false
    run -0 "$NB_ROOT/bench/ptxas-table.sh" --no-spills 'k_grad<nb_fdual' ptxas.txt
    [[ "$output" == *"sm_80"*"k_grad<nb_fdual"* ]] || false
    [[ "$output" == *"sm_90"*"k_grad<nb_fdual"* ]] || false
}
