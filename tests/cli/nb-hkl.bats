#!/usr/bin/env bats
# nb-hkl: structure factors (HKL text, Fdump.bin cache, -default_F) appended to
# the plan as an HKL record.

load helper

small_plan() {
    nb-geom -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 32 "$@" -o plan.nbs
}

# the HKL record's value of KEY (the HKL record follows the PLAN record)
hkl_key() {
    local file=$1 key=$2
    case $key in
    DEFAULT_F) nb_key "$file" DEFAULT_F 2 ;;
    *) nb_key "$file" "$key" ;;
    esac
}

@test "nb-hkl --help lists its own flags and no others" {
    run nb-hkl --help
    expect_status 0
    expect_has "  -hkl FILE"
    expect_has "  -default_F F"
    expect_has "  -dump, -dumpfile FILE"
    expect_lacks "  -distance"
    expect_lacks "  -cell"
    expect_lacks "  -seed"
}

@test "nb-hkl: -hkl text file gives an HKL record with the count and ranges" {
    small_plan
    run_nb nb-hkl -hkl "$NB_INPUTS/small.hkl" plan.nbs -o hkl.nbs
    expect_status 0
    [ "$(hkl_key hkl.nbs HKLS)" = 9 ]
    [ "$(hkl_key hkl.nbs H_RANGE)" = "-1 2" ]
    [ "$(hkl_key hkl.nbs K_RANGE)" = "-1 2" ]
    [ "$(hkl_key hkl.nbs L_RANGE)" = "0 1" ]
    [ "$(hkl_key hkl.nbs SOURCE)" = "$NB_INPUTS/small.hkl" ]
    # the plan goes through untouched
    [ "$(plan_key hkl.nbs FPIXELS)" = 32 ]
    [ "$(grep -a -c '^FPIXELS=' hkl.nbs)" = 1 ]
}

@test "nb-hkl: HKLS is greppable as a line of its own" {
    # the stream's headers are meant to be greppable KEY=VALUE lines, but the
    # first key of every record follows the binary preamble on the same line
    small_plan
    nb-hkl -hkl "$NB_INPUTS/small.hkl" plan.nbs -o hkl.nbs
    [ "$(grep -a '^HKLS=' hkl.nbs)" = "HKLS=9" ]
}

@test "nb-hkl: -hkl with -dump writes the Fdump.bin cache in the reference's layout" {
    small_plan
    run_nb nb-hkl -hkl "$NB_INPUTS/small.hkl" -dump F.bin plan.nbs -o hkl.nbs
    expect_status 0
    [ -f F.bin ]
    # "h_min h_max k_min k_max l_min l_max\n\f", then (hr+1)(kr+1)(lr+1) doubles
    [ "$(head -1 F.bin)" = "-1 2 -1 2 0 1" ]
    [ "$(stat -c %s F.bin)" -eq $((15 + 8 * 5 * 5 * 3)) ]
}

@test "nb-hkl: only -dump reads the cache back: same grid, same image" {
    small_plan
    nb-hkl -hkl "$NB_INPUTS/small.hkl" -dump F.bin plan.nbs -o text.nbs
    run_nb nb-hkl -dump F.bin plan.nbs -o dump.nbs
    expect_status 0
    for k in H_RANGE K_RANGE L_RANGE DEFAULT_F; do
        [ "$(hkl_key dump.nbs $k)" = "$(hkl_key text.nbs $k)" ] || { echo "$k differs"; return 1; }
    done
    # the reference counts a dump's reflections as h_range*k_range*l_range
    [ "$(hkl_key dump.nbs HKLS)" = 32 ]
    [ "$(hkl_key dump.nbs SOURCE)" = F.bin ]
    # the same F grid renders the same image
    nb-sim -q text.nbs | nb-convert -o text.bin
    nb-sim -q dump.nbs | nb-convert -o dump.bin
    cmp text.bin dump.bin
}

@test "nb-hkl: -dumpfile is -dump" {
    small_plan
    nb-hkl -hkl "$NB_INPUTS/small.hkl" -dumpfile G.bin plan.nbs -o hkl.nbs
    [ -f G.bin ]
    run_nb nb-hkl -dumpfile G.bin plan.nbs -o again.nbs
    expect_status 0
    [ "$(hkl_key again.nbs H_RANGE)" = "-1 2" ]
}

@test "nb-hkl: -default_F alone gives HKLS=0 and the constant" {
    small_plan
    run_nb nb-hkl -default_F 10 plan.nbs -o hkl.nbs
    expect_status 0
    [ "$(hkl_key hkl.nbs HKLS)" = 0 ]
    approx "$(hkl_key hkl.nbs DEFAULT_F)" 10
}

@test "nb-hkl: the plan's requests are used when nb-hkl is given none" {
    small_plan -hkl "$NB_INPUTS/small.hkl" -default_F 3
    run_nb nb-hkl plan.nbs -o hkl.nbs
    expect_status 0
    [ "$(hkl_key hkl.nbs HKLS)" = 9 ]
    approx "$(hkl_key hkl.nbs DEFAULT_F)" 3
    small_plan -default_F 5
    nb-hkl < plan.nbs > hkl.nbs
    [ "$(hkl_key hkl.nbs HKLS)" = 0 ]
    approx "$(hkl_key hkl.nbs DEFAULT_F)" 5
}

@test "nb-hkl: flags on its command line override the plan's" {
    small_plan -hkl missing.hkl -default_F 5
    run_nb nb-hkl -hkl "$NB_INPUTS/small.hkl" -default_F 7 plan.nbs -o hkl.nbs
    expect_status 0
    [ "$(hkl_key hkl.nbs HKLS)" = 9 ]
    approx "$(hkl_key hkl.nbs DEFAULT_F)" 7
    small_plan -default_F 5
    nb-hkl -default_F 8 plan.nbs -o hkl.nbs
    approx "$(hkl_key hkl.nbs DEFAULT_F)" 8
}

@test "nb-hkl: comment lines, blank lines and extra columns are accepted" {
    printf '# h k l F\n0 0 0 100 extra 1\n\n1 0 0 50 9\n  # indented comment\n0 1 0 30\n' > c.hkl
    small_plan
    run_nb nb-hkl -hkl c.hkl plan.nbs -o hkl.nbs
    expect_status 0
    [ "$(hkl_key hkl.nbs HKLS)" = 3 ]
    [ "$(hkl_key hkl.nbs H_RANGE)" = "0 1" ]
    [ "$(hkl_key hkl.nbs K_RANGE)" = "0 1" ]
    [ "$(hkl_key hkl.nbs L_RANGE)" = "0 0" ]
}

@test "nb-hkl: a missing -hkl file is a runtime error naming it" {
    small_plan
    run_nb nb-hkl -hkl nope.hkl plan.nbs
    expect_status 1
    [ "${lines[0]}" = "nb-hkl: cannot open 'nope.hkl': No such file or directory" ]
    [ ! -s stdout.bin ] || [ "$(grep -a -c RENDERED_BY stdout.bin)" = 0 ]
}

@test "nb-hkl: an explicit -dump without -hkl must exist" {
    small_plan -default_F 10
    run_nb nb-hkl -dump nope.bin plan.nbs -o hkl.nbs
    expect_status 1
    expect_has "nb-hkl: cannot open 'nope.bin': No such file or directory"
    [ ! -e hkl.nbs ]
}

@test "nb-hkl: the plan's -hkl file missing, with -o: no output, no temporary" {
    small_plan -hkl nope.hkl
    run_nb nb-hkl plan.nbs -o hkl.nbs
    expect_status 1
    expect_has "nb-hkl: cannot open 'nope.hkl'"
    no_files_but plan.nbs stdout.bin
}

@test "nb-hkl: malformed HKL files are runtime errors with the line" {
    small_plan
    printf '0 0 0\n' > short.hkl
    run_nb nb-hkl -hkl short.hkl plan.nbs -o hkl.nbs
    expect_status 1
    expect_has "nb-hkl: 'short.hkl' line 1"
    printf '0 0 0 10\nh k l F\n' > text.hkl
    run_nb nb-hkl -hkl text.hkl plan.nbs -o hkl.nbs
    expect_status 1
    expect_has "nb-hkl: 'text.hkl' line 2"
    : > empty.hkl
    run_nb nb-hkl -hkl empty.hkl plan.nbs -o hkl.nbs
    expect_status 1
    expect_has "nb-hkl: 'empty.hkl': no reflections"
    no_files_but plan.nbs stdout.bin short.hkl text.hkl empty.hkl
}

@test "nb-hkl: a malformed dump file is a runtime error" {
    small_plan
    echo "garbage" > bad.bin
    run_nb nb-hkl -dump bad.bin plan.nbs -o hkl.nbs
    expect_status 1
    expect_has "nb-hkl: "
    expect_has "bad.bin"
    [ ! -e hkl.nbs ]
}

@test "nb-hkl: no structure factors at all is an error" {
    small_plan
    run_nb nb-hkl plan.nbs -o hkl.nbs
    [ "$status" -ne 0 ]
    expect_has "nb-hkl: no structure factors"
    [ ! -e hkl.nbs ]
}

@test "nb-hkl: an unwritable -dump file is an error" {
    small_plan
    run_nb nb-hkl -hkl "$NB_INPUTS/small.hkl" -dump no/such/dir/F.bin plan.nbs -o hkl.nbs
    expect_status 1
    expect_has "no/such/dir/F.bin"
    [ ! -e hkl.nbs ]
}

@test "nb-hkl: the implicit Fdump.bin of --reference-defaults is written, and read back with a warning" {
    nb-geom --reference-defaults -cell 100 -detpixels 32 -hkl "$NB_INPUTS/small.hkl" -o plan1.nbs
    run_nb nb-hkl plan1.nbs -o h1.nbs
    expect_status 0
    [ -f Fdump.bin ]
    nb-geom --reference-defaults -cell 100 -detpixels 32 -o plan2.nbs
    run_nb nb-hkl plan2.nbs -o h2.nbs
    expect_status 0
    expect_has "nb-hkl: warning: no -hkl: reading structure factors from 'Fdump.bin'"
    [ "$(hkl_key h2.nbs H_RANGE)" = "-1 2" ]
}

@test "nb-hkl: without a cache on disk the implicit Fdump.bin falls back to -default_F" {
    nb-geom --reference-defaults -cell 100 -detpixels 32 -default_F 4 -o plan.nbs
    run_nb nb-hkl plan.nbs -o hkl.nbs
    expect_status 0
    [ -z "$output" ]
    [ "$(hkl_key hkl.nbs HKLS)" = 0 ]
}

@test "nb-hkl: an HKL record already in the stream is replaced" {
    small_plan
    nb-hkl -default_F 1 plan.nbs | nb-hkl -default_F 2 > hkl.nbs
    [ "$(grep -a -o "HKLS=" hkl.nbs | wc -l)" -eq 1 ]
    approx "$(hkl_key hkl.nbs DEFAULT_F)" 2
}

@test "nb-hkl: every plan of a concatenated stream gets its HKL record" {
    small_plan
    cat plan.nbs plan.nbs > two.nbs
    nb-hkl -default_F 3 two.nbs -o hkl.nbs
    [ "$(grep -a -o "HKLS=" hkl.nbs | wc -l)" -eq 2 ]
}

@test "nb-hkl -v logs what it reads" {
    small_plan
    run_nb nb-hkl -v -hkl "$NB_INPUTS/small.hkl" plan.nbs
    expect_status 0
    expect_has "counting entries in $NB_INPUTS/small.hkl"
    expect_has "9 reflections"
}
