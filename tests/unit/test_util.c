/* test_util.c - the progress bar's text: one bar, percentage and ETA for a
 * whole run (a series' frames run on from one another), no timing needed. */
#include <stdio.h>
#include <string.h>

#include "nb_util.h"
#include "tap.h"

static void test_duration(void)
{
    char b[32];
    nb_format_duration(0, b, sizeof b);
    ok(!strcmp(b, "0:00"), "0 s: '%s'", b);
    nb_format_duration(0.2, b, sizeof b);
    ok(!strcmp(b, "0:01"), "0.2 s rounds up: '%s'", b);
    nb_format_duration(83, b, sizeof b);
    ok(!strcmp(b, "1:23"), "83 s: '%s'", b);
    nb_format_duration(3599, b, sizeof b);
    ok(!strcmp(b, "59:59"), "3599 s: '%s'", b);
    nb_format_duration(3600 + 61, b, sizeof b);
    ok(!strcmp(b, "1:01:01"), "3661 s: '%s'", b);
    nb_format_duration(-1, b, sizeof b);
    ok(!strcmp(b, "--:--"), "negative: '%s'", b);
    nb_format_duration(1.0 / 0.0, b, sizeof b);
    ok(!strcmp(b, "--:--"), "infinite: '%s'", b);
}

static void test_line(void)
{
    char b[256];
    /* frame 3 of 30 half done: 2.5 of 30 frames, 25 s so far -> 275 s to go */
    nb_progress_line(b, sizeof b, "nb-sim", "rendering frame 3/30", 2.5 / 30, 25.0);
    ok(!strcmp(b, "nb-sim: rendering frame 3/30 [###.....................................]   8% ETA 4:35"),
       "a series' line: the whole run's bar, percentage and ETA: '%s'", b);
    nb_progress_line(b, sizeof b, "nb-sim", "rendering", 0.5, 10.0);
    ok(strstr(b, "[####################....................]  50% ETA 0:10") != NULL, "half way: '%s'", b);
    nb_progress_line(b, sizeof b, "nb-sim", "rendering", 0.0005, 10.0);
    ok(strstr(b, "ETA --:--") != NULL, "no ETA before a thousandth of the run: '%s'", b);
    nb_progress_line(b, sizeof b, "nb-sim", "rendering", 0.5, 0.1);
    ok(strstr(b, "ETA --:--") != NULL, "no ETA before a fifth of a second: '%s'", b);
    nb_progress_line(b, sizeof b, "nb-sim", "rendering", 1.0, 10.0);
    ok(strstr(b, "] 100%") != NULL && strstr(b, "ETA") == NULL, "done: no ETA: '%s'", b);
    nb_progress_line(b, sizeof b, "nb-sim", "rendering", 1.5, 10.0);
    ok(strstr(b, "[########################################] 100%") != NULL, "clamped above 1: '%s'", b);
}

/* off a terminal (this test's stderr need not be one) a bar stays silent; a
 * part of a run keeps its place in it */
static void test_part(void)
{
    nb_progress p;
    nb_progress_start_part(&p, "rendering frame 2/4", 100, 1, 0.0, 0.25, 0.25);
    ok(p.base == 0.25 && p.span == 0.25 && p.total == 100, "a part's share of the run");
    nb_progress_add(&p, 50);
    nb_progress_finish(&p);
    ok(p.enabled == 0, "finished");
    nb_progress_start_part(&p, "x", 100, 0, 0.0, 0.0, 1.0);
    ok(p.enabled == 0, "not allowed: never drawn");
}

int main(void)
{
    test_duration();
    test_line();
    test_part();
    return tap_done();
}
