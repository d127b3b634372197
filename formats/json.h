/* json.h - a small JSON reader and writer for DIALS experiment lists (.expt):
 * the detector files nb-geom -panels takes, the lists nb-convert --join
 * joins.  The whole text is parsed into a tree of values, looked up by key
 * and index.  Numbers are doubles; strings are UTF-8 with every escape
 * decoded (\u0000 and lone surrogates are refused). */
#ifndef NB_JSON_H
#define NB_JSON_H

#include <stddef.h>

#include "nb_error.h"
#include "nb_util.h"

typedef enum nb_json_type { NB_JSON_NULL, NB_JSON_BOOL, NB_JSON_NUMBER, NB_JSON_STRING, NB_JSON_ARRAY, NB_JSON_OBJECT } nb_json_type;

typedef struct nb_json {
    nb_json_type type;
    double number;          /* NUMBER; BOOL: 0 or 1 */
    char *string;           /* STRING */
    size_t count;           /* ARRAY, OBJECT: members */
    struct nb_json *items;  /* ARRAY, OBJECT: the values */
    char **keys;            /* OBJECT: the keys */
} nb_json;

/* Parse text (len bytes) into *out; `name` names the file in messages
 * ("'x.expt': JSON error at line 3: expected ':'"). */
nb_status nb_json_parse(const char *text, size_t len, const char *name, nb_json *out);
void nb_json_free(nb_json *v);

/* The member of an object with that key, or NULL (also when v is not an object). */
const nb_json *nb_json_get(const nb_json *v, const char *key);
/* Element i of an array, or NULL. */
const nb_json *nb_json_at(const nb_json *v, size_t i);
/* An array of n numbers into out: 0 on success, -1 when v is not one. */
int nb_json_numbers(const nb_json *v, double *out, size_t n);

/* v as JSON text (numbers with 17 significant digits, which read back to
 * the same doubles), appended to sb; a string alone, escaped. */
void nb_json_write(nb_strbuf *sb, const nb_json *v);
void nb_json_write_string(nb_strbuf *sb, const char *s);

#endif
