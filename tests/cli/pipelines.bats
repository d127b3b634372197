#!/usr/bin/env bats
# pipelines/: the Makefile workflow (make -j), the GNU parallel script and the
# Slurm job-array script each give, frame for frame and byte for byte, the
# files of one single run.

load helper

GEOM="-cell 78 78 37 90 90 90 -lambda 1 -N 5 -distance 150 -detpixels 64 -pixel 0.172 -default_F 100 -osc 1 -phisteps 2"
FRAMES=7

single_run() { # the reference files: one nb-sim for every frame
    mkdir -p single
    nb-geom $GEOM -nframes $FRAMES -q | nb-hkl -q -o plan.nbs
    nb-sim -q plan.nbs | nb-noise -q -seed 1 | (cd single && nb-convert -q -o 'img_###.cbf')
    [ "$(ls single | wc -l)" -eq $FRAMES ]
}

same_as_single() { # same_as_single DIR
    [ "$(ls "$1"/img_*.cbf | wc -l)" -eq $FRAMES ] || { ls -a "$1"; return 1; }
    for f in single/img_*.cbf; do cmp "$f" "$1/$(basename "$f")" || return 1; done
}

@test "pipelines: sweep.mk with make -j2 (2 shards) and -j3 (3 shards) reproduces the single run" {
    single_run
    for m in 2 3; do
        make -s -f "$NB_ROOT/pipelines/sweep.mk" -j$m SHARDS=$m PLAN=plan.nbs OUT=mk$m >/dev/null
        same_as_single mk$m
        [ -e mk$m/.shard-$m-of-$m ]
    done
    # up to date: a second make does nothing
    run make -f "$NB_ROOT/pipelines/sweep.mk" SHARDS=3 PLAN=plan.nbs OUT=mk3
    expect_status 0
    expect_has "Nothing to be done"
}

@test "pipelines: sweep.mk from GEOM and FRAMES makes the plan itself" {
    make -s -f "$NB_ROOT/pipelines/sweep.mk" -j2 SHARDS=2 FRAMES=3 OUT=g GEOM="$GEOM" >/dev/null
    [ "$(plan_key g/plan.nbs NFRAMES)" = 3 ]
    [ -s g/img_001.cbf ] && [ -s g/img_003.cbf ] && [ ! -e g/img_004.cbf ]
}

@test "pipelines: sweep.mk fails, and leaves no stamp, when a stage fails" {
    run make -s -f "$NB_ROOT/pipelines/sweep.mk" SHARDS=2 FRAMES=3 OUT=bad GEOM="-cell 78 78 37 90 90 90 -osc 1 -detpixels 32 -hkl missing.hkl"
    [ "$status" -ne 0 ]
    [ ! -e bad/.done ] && [ ! -e bad/.shard-1-of-2 ]
}

@test "pipelines: parallel-sweep with 2 and 3 shards reproduces the single run" {
    command -v parallel >/dev/null || skip "GNU parallel is not installed"
    single_run
    for m in 2 3; do
        "$NB_ROOT/pipelines/parallel-sweep" -s $m plan.nbs par$m -seed 1
        same_as_single par$m
    done
}

@test "pipelines: slurm-sweep.sbatch as a job array reproduces the single run" {
    command -v sbatch >/dev/null && command -v slurmctld >/dev/null ||
        skip "Slurm (slurm-wlm) is not installed; run the array by hand as pipelines/slurm-sweep.sbatch says"
    single_run
    # a job array run as Slurm would: each task with its array variables
    for k in 1 2 3; do
        SLURM_ARRAY_TASK_ID=$k SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=3 NB="$NB_BIN" \
            sh "$NB_ROOT/pipelines/slurm-sweep.sbatch" plan.nbs slurm -seed 1
    done
    same_as_single slurm
}

@test "pipelines: the Slurm script's tasks, run with the array variables Slurm sets, reproduce the single run" {
    single_run
    for k in 4 5 6; do
        SLURM_ARRAY_TASK_ID=$k SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_COUNT=3 NB="$NB_BIN" \
            sh "$NB_ROOT/pipelines/slurm-sweep.sbatch" plan.nbs tasks -seed 1
    done
    same_as_single tasks
}
