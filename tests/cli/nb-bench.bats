#!/usr/bin/env bats
# nb-bench: the benchmark tool.  Only fast checks here: no timing is asserted,
# and the reference binary is never needed (make bench runs the real thing).

load helper

@test "nb-bench --help describes its own options and the method" {
    run nb-bench --help
    expect_status 0
    for f in --ref --reps --config --threads --json --list --device; do
        expect_has "      $f"
    done
    expect_has "-roi 0 0 0 0"
    expect_has "bench/README.md"
}

@test "nb-bench --list prints every configuration with its flags" {
    run nb-bench --list
    expect_status 0
    for c in seed-256 seed-512 seed-1024 seed-2048 seed-4096 mosaic sources oversample tricubic deriv-image \
        deriv-image-double deriv-1 deriv-3 deriv-8 deriv-double-1 deriv-double-3 deriv-double-8; do
        expect_has "$c "
    done
    expect_has "| nb-sim -precision single --grad distance,Xbeam,Ybeam,misset_x,misset_y,misset_z,cell_a,mosaic"
    expect_has "| nb-sim -precision double --grad distance,Xbeam,Ybeam,misset_x,misset_y,misset_z,cell_a,mosaic"
    expect_has "-detpixels 4096"
    expect_has "-mosaic 0.5 -mosaic_domains 20 -phi 0.1 -osc 1 -phisteps 5"
    expect_has "-divsteps 5 -dispersion 0.5 -dispsteps 5"
    expect_has "-oversample 3 -detector_thick 450 -detector_abs 320 -thicksteps 3"
    expect_has "tests/golden/inputs/P1.hkl"
    expect_has "-interpolate"
    [ "${#lines[@]}" -eq 17 ]
}

@test "nb-bench: the sources configuration has 65 sources" {
    flags=$(nb-bench --list | awk '$1 == "sources" { $1 = ""; print }')
    run nb-geom $flags -v -o plan.nbs
    expect_status 0
    expect_has "created a total of 65 sources"
}

@test "nb-bench: usage errors exit 2" {
    run nb-bench --config no-such-config
    expect_status 2
    expect_has "unknown configuration 'no-such-config'"
    run nb-bench --reps 0
    expect_status 2
    run nb-bench --threads 1,x
    expect_status 2
    run nb-bench --threads
    expect_status 2
    expect_has "needs a value"
    run nb-bench --no-such-option
    expect_status 2
    expect_has "unknown option"
    run nb-bench stray
    expect_status 2
    run nb-bench --device gpu
    expect_status 2
    expect_has "option --device: expected cpu or cuda, got 'gpu'"
    no_files_but
}

@test "nb-bench: a missing reference binary is a clear usage error" {
    run nb-bench --ref ./no-such-nanoBragg --config seed-256 --reps 1
    expect_status 2
    expect_has "option --ref: cannot use './no-such-nanoBragg'"
    run nb-bench --ref . --config seed-256 --reps 1
    expect_status 2
    expect_has "not an executable file"
}

@test "nb-bench: a failing reference run exits 1 with its command and standard error" {
    printf '#!/bin/sh\necho "reference trouble" >&2\nexit 3\n' > fake-ref
    chmod +x fake-ref
    run nb-bench --ref ./fake-ref --config seed-256 --reps 1 --json out.json
    expect_status 1
    expect_has "run failed: reference exited with status 3"
    expect_has "-nonoise -nopgm -floatfile float.bin -intfile int.img"
    expect_has "reference trouble"
    no_files_but fake-ref
}

@test "nb-bench: a tiny run prints the table and writes JSON with the expected keys" {
    run nb-bench --config seed-256 --reps 1 --threads 1 --json out.json
    expect_status 0
    expect_has "config"
    expect_has "seed-256"
    expect_has "ours"
    no_files_but out.json
    command -v python3 >/dev/null || skip "python3 is not installed (needed to check the JSON)"
    python3 - out.json <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tool"] == "nb-bench" and d["reps"] == 1 and d["ref"] is None, d
assert "ref_render" in d["method"], d["method"]
(r,) = d["results"]
assert r["config"] == "seed-256" and r["threads"] == 1 and r["pixels"] == 256 * 256, r
o = r["ours"]
for k in ("whole_s", "render_s"):
    s = o[k]
    assert 0 < s["min"] <= s["median"] <= s["max"], (k, s)
assert o["render_s"]["median"] <= o["whole_s"]["median"], o
assert o["mpixel_per_s"] > 0 and o["peak_rss_kib"] > 0, o
assert o["peak_rss_stage"] in ("nb-geom", "nb-hkl", "nb-sim", "nb-convert"), o
assert o["render_path"], o
assert "ref" not in r and "ratio_ref_over_ours" not in r, r
EOF
}

@test "nb-bench --device cpu renders on the CPU, and the JSON says so" {
    run nb-bench --device cpu --config seed-256 --reps 1 --threads 1 --json out.json
    expect_status 0
    expect_lacks "GPU:"
    command -v python3 >/dev/null || skip "python3 is not installed (needed to check the JSON)"
    python3 - out.json <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["device"] == "cpu" and "gpu" not in d, d
(r,) = d["results"]
assert "nb-sim --threads 1 -v --device cpu |" in r["ours"]["command"], r
assert not r["ours"]["render_path"].startswith("cuda"), r
assert "gpu_kernel_s" not in r["ours"], r
EOF
}

@test "nb-bench --device cuda: the GPU's kernel and copy times on a GPU, a clear failure without one" {
    nb-geom -default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -detpixels 8 -o probe.nbs
    if ! nb-sim -q --device cuda -o /dev/null probe.nbs 2>/dev/null; then
        run nb-bench --device cuda --config seed-256 --reps 1 --threads 1
        expect_status 1
        expect_has "nb-sim --threads 1 -v --device cuda"
        expect_has "nb-sim: --device cuda"
        return
    fi
    run nb-bench --device cuda --config seed-256 --reps 2 --threads 1 --json out.json
    expect_status 0
    expect_has "GPU: "
    expect_has "kernel ms"
    command -v python3 >/dev/null || skip "python3 is not installed (needed to check the JSON)"
    python3 - out.json <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["device"] == "cuda" and "CUDA runtime" in d["gpu"]["name"] and d["gpu"]["nvidia_driver"], d
(r,) = d["results"]
o = r["ours"]
assert o["render_path"] == "cuda-fast", o
assert 0 < o["gpu_kernel_s"]["median"] <= o["render_s"]["median"], o
assert 0 < o["gpu_copies_s"]["median"] <= o["render_s"]["median"], o
EOF
}

@test "nb-bench: two thread counts add the thread scaling, in the table and the JSON" {
    run nb-bench --config seed-256 --reps 1 --threads 1,2 --json out.json
    expect_status 0
    expect_has "Thread scaling"
    printf "%s\n" "$output" | grep -Eq "^seed-256 +1 +2 +[0-9.]+ +[0-9.]+"
    command -v python3 >/dev/null || skip "python3 is not installed (needed to check the JSON)"
    python3 - out.json <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
one, two = d["results"]
assert "scaling" not in one, one
s = two["scaling"]
assert s["from_threads"] == 1, s
for k in ("render", "whole"):
    want = one["ours"][k + "_s"]["median"] / two["ours"][k + "_s"]["median"]
    assert abs(s["ours_" + k] - want) <= 1e-6 * want, (k, s, want)
EOF
}

@test "nb-bench: each repetition runs every thread count in turn (interleaved)" {
    run_nb nb-bench --config seed-256,seed-512 --reps 2 --threads 1,2 -v -o table.txt
    expect_status 0
    order=$(printf "%s\n" "$output" | grep -o "^seed-[0-9]*, [0-9] threads*, repetition [0-9]/2" | tr '\n' ';')
    want="seed-256, 1 thread, repetition 1/2;seed-256, 2 threads, repetition 1/2;"
    want+="seed-256, 1 thread, repetition 2/2;seed-256, 2 threads, repetition 2/2;"
    want+="seed-512, 1 thread, repetition 1/2;seed-512, 2 threads, repetition 1/2;"
    want+="seed-512, 1 thread, repetition 2/2;seed-512, 2 threads, repetition 2/2;"
    [ "$order" = "$want" ] || { echo "order: $order"; false; }
    grep -q "interleaved: each thread count in turn" table.txt
    [ "$(grep -c "^seed-" table.txt)" -ge 4 ]
}

@test "nb-bench: -o writes the table to a file" {
    run_nb nb-bench --config seed-256 --reps 1 -q -o table.txt
    expect_status 0
    [ ! -s stdout.bin ]
    grep -q "^seed-256 .* ours " table.txt
    no_files_but table.txt stdout.bin
}

@test "nb-bench: --json - puts the JSON on standard output and the table on standard error" {
    run_nb nb-bench --config seed-256 --reps 1 --json - -q
    expect_status 0
    expect_has "seed-256"
    grep -q '"results"' stdout.bin
}

@test "nb-bench --dropin times the drop-in with the reference's command line, in --dir, interleaved after ours" {
    mkdir runs
    # a stand-in reference: it records where it ran and writes nothing
    printf '#!/bin/sh\npwd >> "%s/ref-dirs"\n' "$NB_TMP" > fake-ref
    chmod +x fake-ref
    run_nb nb-bench --dropin --ref ./fake-ref --config seed-256 --reps 2 --threads 1 --dir runs -v \
        --json out.json -o table.txt
    expect_status 0
    # the run directories were made in runs/, and removed
    [ "$(grep -c "^$NB_TMP/runs/nb-bench\.[^/]*/run\." ref-dirs)" -eq 4 ]
    [ -z "$(ls -A runs)" ]
    order=$(printf "%s\n" "$output" | grep -oE "^  (ours|drop-in|ref): " | tr -d ' ' | tr '\n' ' ')
    [ "$order" = "ours: drop-in: ref: ref: ours: drop-in: ref: ref: " ] || { echo "order: $order"; false; }
    expect_has "pipelines/nanobragg -nonoise -nopgm -floatfile float.bin -intfile int.img -default_F 100"
    grep -Eq "^ +drop +[0-9.]+ \([0-9.]+-[0-9.]+\)" table.txt
    grep -q "drop = the drop-in" table.txt
    command -v python3 >/dev/null || skip "python3 is not installed (needed to check the JSON)"
    python3 - out.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
(r,) = d["results"]
dr = r["dropin"]
assert dr["command"].split()[0].endswith("nanobragg"), dr
assert "-nonoise -nopgm -floatfile float.bin -intfile int.img" in dr["command"], dr
s = dr["whole_s"]
assert 0 < s["min"] <= s["median"] <= s["max"], s
assert dr["peak_rss_kib"] > 0, dr
want = r["ref"]["whole_s"]["median"] / s["median"]
assert abs(r["ratio_ref_over_ours"]["dropin_whole"] - want) <= 1e-6 * want, r
assert d["method"]["run_directories"].endswith("/runs"), d["method"]
PY
}

@test "nb-bench: --dir must name a directory" {
    run nb-bench --dir no-such-dir --config seed-256 --reps 1
    expect_status 2
    expect_has "option --dir: cannot use 'no-such-dir'"
    touch plain
    run nb-bench --dir plain --config seed-256 --reps 1
    expect_status 2
    expect_has "not a directory"
}
