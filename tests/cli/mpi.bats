#!/usr/bin/env bats
# nb-fit's parallel layer (tools/nb_par.c) on real processes: par-check
# (tests/tools/par_check.c) run alone and under `mpirun -n 2` and `-n 3` on
# this machine (nb_mpirun, helper.bash): every rank gets the exact sums of
# rank-dependent vectors, every frame one owner in contiguous blocks in rank
# order, rank 0 alone writes standard output (byte for byte through mpirun),
# and one rank's failure reaches every rank with the lowest failing rank's
# message, every rank saying it and exiting, none left waiting.  A build
# without MPI (par-check-single) started by mpirun says so.  Skipped with the
# reason where mpirun is not installed or the build had no mpicc.

load helper

PAR_CHECK="$NB_ROOT/${BUILD:-build}/tests/par-check"
PAR_SINGLE="$NB_ROOT/${BUILD:-build}/tests/par-check-single"

need_par_check() {
    [ -x "$PAR_CHECK" ] || skip "$PAR_CHECK is not built (make check builds it)"
    [ -x "$PAR_SINGLE" ] || skip "$PAR_SINGLE is not built (make check builds it)"
}

@test "mpi: par-check run plainly, as root, is one process (rank 0 of 1) and never meets mpirun's refusal" {
    need_par_check
    run_nb env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM timeout 60 "$PAR_CHECK"
    expect_status 0
    [ "$(cat stdout.bin)" = "rank 0 of 1 ok" ] || false
    [ -z "$output" ] || false
}

@test "mpi: mpirun -n 2: exact sums on both ranks, every frame owned once in rank order, one line out" {
    need_par_check
    need_mpi "$PAR_CHECK"
    run_nb nb_mpirun 2 "$PAR_CHECK"
    expect_status 0
    # rank 1's line went to /dev/null: only rank 0 writes standard output
    [ "$(cat stdout.bin)" = "rank 0 of 2 ok" ] || false
}

@test "mpi: rank 0's standard output passes through mpirun byte for byte, the other rank's nowhere" {
    need_par_check
    need_mpi "$PAR_CHECK"
    "$PAR_CHECK" --bytes 200000 >one.bin
    run_nb nb_mpirun 2 "$PAR_CHECK" --bytes 200000
    expect_status 0
    cmp stdout.bin one.bin
}

@test "mpi: rank 1's failure reaches rank 0 with rank 1's message; both exit 1, neither hangs" {
    need_par_check
    need_mpi "$PAR_CHECK"
    run_nb nb_mpirun 2 "$PAR_CHECK" --fail-rank 1
    expect_status 1
    expect_has "par-check: a deliberate failure on process 1 of 2"
    expect_has "par-check: process 1: a deliberate failure on process 1 of 2"
    [ ! -s stdout.bin ] || false
}

@test "mpi: rank 0's failure reaches rank 1 likewise" {
    need_par_check
    need_mpi "$PAR_CHECK"
    run_nb nb_mpirun 2 "$PAR_CHECK" --fail-rank 0
    expect_status 1
    expect_has "par-check: a deliberate failure on process 0 of 2"
    expect_has "par-check: process 0: a deliberate failure on process 0 of 2"
    [ ! -s stdout.bin ] || false
}

@test "mpi: mpirun -n 3 with ranks 2 and 1 failing: every rank reports the lowest, rank 1" {
    need_par_check
    need_mpi "$PAR_CHECK"
    run_nb nb_mpirun 3 "$PAR_CHECK" --fail-rank 2,1
    expect_status 1
    expect_has "par-check: a deliberate failure on process 1 of 3"
    # ranks 0 and 2 each say rank 1's message, rank 2 not its own
    [ "$(printf '%s\n' "$output" | grep -c '^par-check: process 1: a deliberate failure on process 1 of 3$')" = 2 ] || false
    expect_lacks "process 2 of 3"
}

@test "mpi: a build without MPI started by mpirun says so on every rank; mpirun -n 1 is one process" {
    need_par_check
    command -v mpirun >/dev/null || skip "mpirun is not installed (Debian: openmpi-bin)"
    run_nb nb_mpirun 2 "$PAR_SINGLE"
    expect_status 1
    [ "$(printf '%s\n' "$output" | grep -c '^par-check: started by mpirun (OMPI_COMM_WORLD_SIZE is set) but built without MPI')" = 2 ] || false
    [ ! -s stdout.bin ] || false
    run_nb nb_mpirun 1 "$PAR_SINGLE"
    expect_status 0
    [ "$(cat stdout.bin)" = "rank 0 of 1 ok" ] || false
}

@test "mpi: a build without MPI refuses a launcher's environment (PMIX_RANK, PMI_RANK) without mpirun" {
    need_par_check
    run_nb env PMIX_RANK=0 "$PAR_SINGLE"
    expect_status 1
    expect_has "par-check: started by mpirun (PMIX_RANK is set) but built without MPI"
    run_nb env PMI_RANK=1 PMI_SIZE=2 "$PAR_SINGLE"
    expect_status 1
    expect_has "(PMI_RANK is set)"
    [ ! -s stdout.bin ] || false
}
