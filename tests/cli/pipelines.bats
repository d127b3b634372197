#!/usr/bin/env bats
# pipelines/: the Makefile workflow (make -j), the GNU parallel script and the
# Slurm job-array script each give, frame for frame and byte for byte, the
# files of one single run; a failing shard fails each with the status and the
# message of the stage that caused it.

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
    [ -s g/img_001.cbf ]
    [ -s g/img_003.cbf ]
    [ ! -e g/img_004.cbf ]
}

@test "pipelines: sweep.mk fails, and leaves no stamp, when a stage fails" {
    run make -s -f "$NB_ROOT/pipelines/sweep.mk" SHARDS=2 FRAMES=3 OUT=bad GEOM="-cell 78 78 37 90 90 90 -osc 1 -detpixels 32 -hkl missing.hkl"
    [ "$status" -ne 0 ]
    [ ! -e bad/.done ]
    [ ! -e bad/.shard-1-of-2 ]
}

@test "pipelines: parallel-sweep with 2 and 3 shards reproduces the single run" {
    command -v parallel >/dev/null || skip "GNU parallel is not installed"
    single_run
    for m in 2 3; do
        "$NB_ROOT/pipelines/parallel-sweep" -s $m plan.nbs par$m -seed 1
        same_as_single par$m
    done
}

# A real single-node Slurm (slurmctld + slurmd on 127.0.0.1, and a munged of
# its own), started for the test in its own directory and stopped after it.
# The daemons run in the foreground as background jobs of the test, each a
# simple command so that $! is its own pid (a daemon that forks away and is
# then not stopped outlives the test), with bats' descriptors closed (3 is its
# TAP channel): a daemon that keeps one open makes bats wait for it forever.
SLURM_PIDS=""

start_slurm() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null ||
        skip "Slurm (slurm-wlm) is not installed"
    command -v munged >/dev/null || skip "munge is not installed"
    [ "$(id -u)" -eq 0 ] || skip "starting slurmd needs root here"
    [ -r /etc/munge/munge.key ] || skip "no munge key (/etc/munge/munge.key)"
    local host port i
    host=$(hostname -s)
    port=$((20000 + RANDOM % 20000))
    SL="$PWD/slurm-run"
    mkdir -p "$SL/state" "$SL/spool" "$SL/log" "$SL/munge"
    chmod 700 "$SL/munge"
    # munged on a socket of the test's own: a system one, or another run's, is
    # neither used nor stopped (with two suites at once, one stopped the munged
    # the other's job array was using)
    munged -F --force --socket="$SL/munge/munge.socket" --pid-file="$SL/munge/munged.pid" \
        --seed-file="$SL/munge/munged.seed" --log-file="$SL/log/munged.log" </dev/null >/dev/null 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
    SLURM_PIDS="$!"
    for i in $(seq 50); do
        [ -S "$SL/munge/munge.socket" ] && break
        sleep 0.2
    done
    [ -S "$SL/munge/munge.socket" ] || { stop_slurm; skip "munged does not start here (see $SL/log)"; }
    cat >"$SL/slurm.conf" <<CONF
ClusterName=nbtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$SL/munge/munge.socket
StateSaveLocation=$SL/state
SlurmdSpoolDir=$SL/spool
SlurmctldPidFile=$SL/slurmctld.pid
SlurmdPidFile=$SL/slurmd.pid
SlurmctldLogFile=$SL/log/slurmctld.log
SlurmdLogFile=$SL/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=nbtest Nodes=ALL Default=YES MaxTime=10 State=UP
CONF
    export SLURM_CONF="$SL/slurm.conf"
    slurmctld -D -c </dev/null >/dev/null 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
    SLURM_PIDS="$SLURM_PIDS $!"
    slurmd -D </dev/null >/dev/null 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
    SLURM_PIDS="$SLURM_PIDS $!"
    # the node registers within seconds; a loaded machine may take longer
    for i in $(seq 150); do
        sinfo -h -o %t 2>/dev/null | grep -q idle && return 0
        sleep 0.2
    done
    stop_slurm
    skip "the Slurm node did not come up (see $SL/log)"
}

# Stop the test's daemons and wait for them (SIGKILL after 10 s).
stop_slurm() {
    local p i alive
    [ -n "$SLURM_PIDS" ] || return 0
    kill $SLURM_PIDS 2>/dev/null
    for i in $(seq 50); do
        alive=""
        for p in $SLURM_PIDS; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ -z "$alive" ] && break
        sleep 0.2
    done
    [ -z "$alive" ] || kill -KILL $SLURM_PIDS 2>/dev/null
    wait $SLURM_PIDS 2>/dev/null || true # their status: killed, as asked
    SLURM_PIDS=""
    return 0
}

@test "pipelines: slurm-sweep.sbatch as a job array under a real single-node Slurm reproduces the single run" {
    single_run
    start_slurm
    run timeout 600 env NB="$NB_BIN" sbatch --wait --array=1-3 --export=ALL --chdir="$PWD" -o "$SL/log/task-%a.log" \
        "$NB_ROOT/pipelines/slurm-sweep.sbatch" plan.nbs slurm -seed 1
    local st=$status out=$output
    stop_slurm
    [ "$st" -eq 0 ] || { echo "$out"; cat "$SL"/log/task-*.log; return 1; }
    same_as_single slurm
}

@test "pipelines: the Slurm script's tasks, run with the array variables Slurm sets, reproduce the single run" {
    single_run
    for k in 4 5 6; do
        SLURM_ARRAY_TASK_ID=$k SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_COUNT=3 NB="$NB_BIN" \
            bash "$NB_ROOT/pipelines/slurm-sweep.sbatch" plan.nbs tasks -seed 1
    done
    same_as_single tasks
}

# ---- the root cause of a failing shard -----------------------------------
# A shard whose nb-sim fails (status 3) makes nb-noise and nb-convert fail too
# ("empty stream", 1): the status is nb-sim's.  A shard whose nb-convert fails
# (its output in a missing directory) leaves nb-sim and nb-noise writing to a
# pipe nobody reads: they die of SIGPIPE quietly (the parent ignoring SIGPIPE
# or not), and the status and the only message are nb-convert's.  Frames of
# 1024^2 pixels (8 MiB records) are more than a pipe holds.

fake_failing_sim() { # fake/: the built tools, with an nb-sim that fails
    mkdir -p fake
    for t in "$NB_BIN"/nb-*; do ln -s "$t" "fake/$(basename "$t")"; done
    rm fake/nb-sim
    printf '#!/bin/sh\necho "nb-sim: simulated failure" >&2\nexit 3\n' >fake/nb-sim
    chmod +x fake/nb-sim
}

big_plan() {
    nb-geom $GEOM -detpixels 1024 -nframes 2 -q | nb-hkl -q -o plan.nbs
}

@test "pipelines: sweep.mk fails with the status and message of a failing nb-sim, not of the stages after it" {
    big_plan
    fake_failing_sim
    run make -s -f "$NB_ROOT/pipelines/sweep.mk" SHARDS=1 PLAN=plan.nbs OUT=mk NB="$PWD/fake/"
    expect_status 2
    expect_has "nb-sim: simulated failure"
    expect_has "Error 3"
    expect_lacks "Error 1"
    [ ! -e mk/.shard-1-of-1 ]
}

@test "pipelines: sweep.mk fails with nb-convert's status and message alone when nb-convert fails" {
    big_plan
    for how in "" ignoring_sigpipe; do
        run $how make -s -f "$NB_ROOT/pipelines/sweep.mk" SHARDS=1 PLAN=plan.nbs OUT=mk$how NAME='no/such/img_###.cbf'
        expect_status 2
        expect_has "nb-convert: cannot write 'no/such/img_001.cbf'"
        expect_has "Error 1"
        expect_lacks "nb-sim:"
        expect_lacks "nb-noise:"
    done
}

@test "pipelines: parallel-sweep fails with the status and message of a failing nb-sim, not of the stages after it" {
    command -v parallel >/dev/null || skip "GNU parallel is not installed"
    big_plan
    fake_failing_sim
    run env NB_BIN="$PWD/fake" "$NB_ROOT/pipelines/parallel-sweep" -s 1 plan.nbs par -seed 1
    expect_status 3
    expect_has "nb-sim: simulated failure"
}

@test "pipelines: parallel-sweep fails with nb-convert's status and message alone when nb-convert fails" {
    command -v parallel >/dev/null || skip "GNU parallel is not installed"
    big_plan
    for how in "" ignoring_sigpipe; do
        run $how "$NB_ROOT/pipelines/parallel-sweep" -s 1 -n 'no/such/img_###.cbf' plan.nbs par -seed 1
        expect_status 1
        expect_has "nb-convert: cannot write 'no/such/img_001.cbf'"
        expect_lacks "nb-sim:"
        expect_lacks "nb-noise:"
    done
}

@test "pipelines: the Slurm script fails with the status and message of a failing nb-sim, not of the stages after it" {
    big_plan
    fake_failing_sim
    run env SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=1 NB="$PWD/fake" \
        "$NB_ROOT/pipelines/slurm-sweep.sbatch" plan.nbs tasks -seed 1
    expect_status 3
    expect_has "nb-sim: simulated failure"
}

@test "pipelines: the Slurm script fails with nb-convert's status and message alone when nb-convert fails" {
    big_plan
    for how in "" ignoring_sigpipe; do
        run $how env SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=1 NB="$NB_BIN" \
            NAME='no/such/img_###.cbf' "$NB_ROOT/pipelines/slurm-sweep.sbatch" plan.nbs tasks -seed 1
        expect_status 1
        expect_has "nb-convert: cannot write 'no/such/img_001.cbf'"
        expect_lacks "nb-sim:"
        expect_lacks "nb-noise:"
    done
}

@test "pipelines: sweep.mk gives each shard's nb-sim a share of the cores under make -j, THREADS= sets it" {
    touch plan.nbs
    run make -n -f "$NB_ROOT/pipelines/sweep.mk" -j2 SHARDS=2 NCPU=8 PLAN=plan.nbs OUT=t
    expect_status 0
    expect_has "nb-sim -q --threads 4 --shard 1/2"
    run make -n -f "$NB_ROOT/pipelines/sweep.mk" -j3 SHARDS=3 NCPU=2 PLAN=plan.nbs OUT=t
    expect_has "nb-sim -q --threads 1 --shard 3/3"
    run make -n -f "$NB_ROOT/pipelines/sweep.mk" -j2 SHARDS=2 THREADS=3 PLAN=plan.nbs OUT=t
    expect_has "nb-sim -q --threads 3 --shard 2/2"
    # without -j: all cores, as a single nb-sim would use
    run make -n -f "$NB_ROOT/pipelines/sweep.mk" SHARDS=2 NCPU=8 PLAN=plan.nbs OUT=t
    expect_has "nb-sim -q  --shard 1/2"
    expect_lacks "--threads"
}
