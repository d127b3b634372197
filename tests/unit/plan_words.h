/* plan_words.h - the unit tests' plans: nb-geom's words resolved, with the
 * command recorded as nb-geom records it (the derivatives resolve it again)
 * and the seeds fixed at -1 (no clock). */
#ifndef NB_TEST_PLAN_WORDS_H
#define NB_TEST_PLAN_WORDS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_args.h"
#include "nb_geometry.h"
#include "nb_plan.h"

static __attribute__((unused)) nb_status build_plan(const char *args, nb_plan *plan)
{
    nb_request rq;
    char *line = malloc(strlen(args) + 16);
    sprintf(line, "nb-geom %s", args);
    int argc = 0;
    char **argv = NULL;
    nb_status st = nb_split_args(line, &argc, &argv);
    nb_request_defaults(&rq);
    rq.seed = -1;
    rq.misset_seed = -1;
    if (!st) st = nb_request_apply_args(&rq, argc - 1, argv + 1, NULL);
    rq.command_line = line; /* the request's to free */
    nb_strbuf log;
    nb_strbuf_init(&log);
    if (!st) st = nb_resolve(&rq, plan, &log);
    nb_strbuf_free(&log);
    nb_request_free(&rq);
    nb_free_args(argc, argv);
    return st;
}

#endif
