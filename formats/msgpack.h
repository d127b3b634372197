/* msgpack.h - a reader of MessagePack (msgpack.org's spec), as DIALS writes
 * its reflection tables (.refl): one item at a time from a buffer, every
 * length checked against what is left of it, so that a truncated or hostile
 * file is an error and never a read beyond its end (msgpack.c); and a
 * writer of the items a table is made of, onto a stream (msgpack.c too). */
#ifndef NB_FORMAT_MSGPACK_H
#define NB_FORMAT_MSGPACK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum nb_mp_type {
    NB_MP_NIL, NB_MP_BOOL, NB_MP_INT, NB_MP_FLOAT, NB_MP_STR, NB_MP_BIN, NB_MP_ARRAY, NB_MP_MAP, NB_MP_EXT
} nb_mp_type;

/* One item's head.  INT: the value in i (a uint64 above INT64_MAX is
 * refused: no table needs one); BOOL: 0 or 1 in i; FLOAT: f; STR, BIN, EXT:
 * the bytes (in the buffer, not NUL-ended) and their length n; ARRAY, MAP:
 * the count n of items (of pairs), which follow. */
typedef struct nb_mp_item {
    nb_mp_type type;
    int64_t i;
    double f;
    const unsigned char *bytes;
    size_t n;
} nb_mp_item;

/* The buffer being read: p the next item, end one past its last byte. */
typedef struct nb_mp {
    const unsigned char *p, *end;
} nb_mp;

/* The next item's head into *it (a STR's, BIN's or EXT's bytes passed
 * over; an ARRAY's or MAP's items left to come): 0, or -1 when the buffer
 * ends inside it or its first byte is none of msgpack's (0xc1). */
int nb_mp_next(nb_mp *m, nb_mp_item *it);

/* The next item passed over whole (an ARRAY's or MAP's items with it, at
 * most NB_MP_MAX_DEPTH deep): 0, or -1 as nb_mp_next, or when nested deeper. */
#define NB_MP_MAX_DEPTH 32
int nb_mp_skip(nb_mp *m);

/* Is the item the string s? */
int nb_mp_is_str(const nb_mp_item *it, const char *s);

/* ---- writing: each item in its shortest form, as msgpack-c (DIALS's
 * writer) chooses it; a failed write shows in ferror(fp), which the
 * caller's nb_outfile_commit checks once at the end ---- */
void nb_mp_put_array(FILE *fp, size_t n);
void nb_mp_put_map(FILE *fp, size_t n);
void nb_mp_put_int(FILE *fp, int64_t v);
void nb_mp_put_str(FILE *fp, const char *s);
void nb_mp_put_bin(FILE *fp, const void *bytes, size_t n);

#endif
