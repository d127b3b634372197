/* nb_record.c - a record of the nb stream in memory: its type, its header
 * of KEY=value lines (found, set and read with every check), and the named
 * payload arrays it carries (added, found and checked against their dtype
 * and size).  Its bytes on the wire: nb_record_wire.c. */
#include "nb_stream_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "nb_tuning.h"
#include "nb_util.h"

void nb_record_init(nb_record *rec, const char *type)
{
    memset(rec, 0, sizeof *rec);
    snprintf(rec->type, sizeof rec->type, "%s", type ? type : "");
    /* a leading newline puts the first KEY=VALUE on a line of its own, after
     * the binary preamble, so that grep '^KEY=' finds every key */
    rec->header = nb_xstrdup("\n");
    rec->header_len = 1;
}

void nb_record_free(nb_record *rec)
{
    free(rec->header);
    free(rec->payload);
    memset(rec, 0, sizeof *rec);
}

int nb_record_is(const nb_record *rec, const char *type) { return strcmp(rec->type, type) == 0; }

/* Locate "KEY=" at the start of a line; returns the line start or NULL. */
static const char *find_line(const char *hdr, const char *key)
{
    size_t klen = strlen(key);
    const char *p = hdr;
    while (p && *p) {
        if (strncmp(p, key, klen) == 0 && p[klen] == '=') return p;
        p = strchr(p, '\n');
        if (p) p++;
    }
    return NULL;
}

const char *nb_hdr_find(const nb_record *rec, const char *key, size_t *len)
{
    const char *line = rec->header ? find_line(rec->header, key) : NULL;
    if (!line) return NULL;
    const char *v = line + strlen(key) + 1;
    const char *e = strchr(v, '\n');
    if (len) *len = e ? (size_t)(e - v) : strlen(v);
    return v;
}

int nb_hdr_has(const nb_record *rec, const char *key) { return nb_hdr_find(rec, key, NULL) != NULL; }

void nb_hdr_set(nb_record *rec, const char *key, const char *value)
{
    nb_strbuf sb;
    const char *line = find_line(rec->header, key);
    nb_strbuf_init(&sb);
    if (line) {
        const char *end = strchr(line, '\n');
        nb_strbuf_appendn(&sb, rec->header, (size_t)(line - rec->header));
        nb_strbuf_printf(&sb, "%s=%s\n", key, value);
        if (end) nb_strbuf_append(&sb, end + 1);
    } else {
        nb_strbuf_append(&sb, rec->header);
        nb_strbuf_printf(&sb, "%s=%s\n", key, value);
    }
    free(rec->header);
    rec->header_len = sb.len;
    rec->header = nb_strbuf_take(&sb);
}

void nb_hdr_setf(nb_record *rec, const char *key, const char *fmt, ...)
{
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    nb_hdr_set(rec, key, buf);
}

void nb_hdr_set_double(nb_record *rec, const char *key, double v)
{
    char b[64];
    nb_format_double(v, b, sizeof b);
    nb_hdr_set(rec, key, b);
}

void nb_hdr_set_long(nb_record *rec, const char *key, long v) { nb_hdr_setf(rec, key, "%ld", v); }

void nb_hdr_set_vec3(nb_record *rec, const char *key, const double v[3])
{
    char a[64], b[64], c[64];
    nb_format_double(v[0], a, sizeof a);
    nb_format_double(v[1], b, sizeof b);
    nb_format_double(v[2], c, sizeof c);
    nb_hdr_setf(rec, key, "%s %s %s", a, b, c);
}

nb_status nb_hdr_get_str(const nb_record *rec, const char *key, char **out)
{
    size_t len;
    const char *v = nb_hdr_find(rec, key, &len);
    *out = NULL;
    if (!v) return nb_error_set(NB_ERR_DATA, "%s record: missing key %s", rec->type, key);
    char *s = malloc(len + 1);
    if (!s) return nb_error_set(NB_ERR_NOMEM, "out of memory");
    memcpy(s, v, len);
    s[len] = '\0';
    *out = s;
    return NB_OK;
}

/* Parse up to n whitespace-separated doubles from a header value. */
static nb_status get_doubles(const nb_record *rec, const char *key, double *out, int n)
{
    size_t len;
    const char *v = nb_hdr_find(rec, key, &len);
    if (!v) return nb_error_set(NB_ERR_DATA, "%s record: missing key %s", rec->type, key);
    char buf[512];
    if (len >= sizeof buf) return nb_error_set(NB_ERR_DATA, "%s record: value of %s is too long", rec->type, key);
    memcpy(buf, v, len);
    buf[len] = '\0';
    char *p = buf;
    for (int i = 0; i < n; i++) {
        char *end;
        errno = 0;
        out[i] = strtod(p, &end);
        if (end == p) return nb_error_set(NB_ERR_DATA, "%s record: bad value '%s' for %s", rec->type, buf, key);
        p = end;
    }
    while (*p == ' ' || *p == '\t') p++;
    if (*p) return nb_error_set(NB_ERR_DATA, "%s record: bad value '%s' for %s", rec->type, buf, key);
    return NB_OK;
}

nb_status nb_hdr_get_double(const nb_record *rec, const char *key, double *out)
{
    return get_doubles(rec, key, out, 1);
}

nb_status nb_hdr_get_vec3(const nb_record *rec, const char *key, double out[3])
{
    return get_doubles(rec, key, out, 3);
}

nb_status nb_hdr_get_long(const nb_record *rec, const char *key, long *out)
{
    size_t len;
    const char *v = nb_hdr_find(rec, key, &len);
    if (!v) return nb_error_set(NB_ERR_DATA, "%s record: missing key %s", rec->type, key);
    char buf[64];
    if (len >= sizeof buf || len == 0)
        return nb_error_set(NB_ERR_DATA, "%s record: bad value for %s", rec->type, key);
    memcpy(buf, v, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    long x = strtol(buf, &end, 10);
    if (*end || errno) return nb_error_set(NB_ERR_DATA, "%s record: bad value '%s' for %s", rec->type, buf, key);
    *out = x;
    return NB_OK;
}

nb_status nb_hdr_get_int(const nb_record *rec, const char *key, int *out)
{
    long v;
    nb_status st = nb_hdr_get_long(rec, key, &v);
    if (st) return st;
    if (v < -2147483647L - 1 || v > 2147483647L)
        return nb_error_set(NB_ERR_DATA, "%s record: value of %s out of range", rec->type, key);
    *out = (int)v;
    return NB_OK;
}

/* ---- arrays ------------------------------------------------------------ */

static const char *dtype_names[] = {"f32", "f64", "u8", "u16", "u32", "i32"};
static const size_t dtype_sizes[] = {4, 8, 1, 2, 4, 4};

size_t nb_dtype_size(nb_dtype t) { return dtype_sizes[t]; }
const char *nb_dtype_name(nb_dtype t) { return dtype_names[t]; }

/* Payload room for `need` bytes in all; `exact`: just that (a reservation),
 * else doubled (arrays added one by one); array: the one it is for, named
 * in the error (NULL: a reservation). */
static nb_status payload_room(nb_record *rec, size_t need, int exact, const char *array)
{
    if (need <= rec->payload_cap) return NB_OK;
    size_t cap = rec->payload_cap ? rec->payload_cap : 64;
    if (exact) cap = need;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    /* a fresh big payload (an image) gets huge pages */
    unsigned char *p = rec->payload ? realloc(rec->payload, cap) : nb_malloc_large(cap);
    if (!p) {
        char b[64];
        nb_format_bytes((double)cap, b, sizeof b);
        if (!array) return nb_error_set(NB_ERR_NOMEM, "cannot allocate %s for a record's payload", b);
        return nb_error_set(NB_ERR_NOMEM, "cannot allocate %s for array %s", b, array);
    }
    rec->payload = p;
    rec->payload_cap = cap;
    return NB_OK;
}

nb_status nb_record_reserve(nb_record *rec, size_t bytes)
{
    if (bytes > SIZE_MAX - 64 - rec->payload_len) return nb_error_set(NB_ERR_NOMEM, "a record's payload is too large");
    return payload_room(rec, (size_t)rec->payload_len + bytes, 1, NULL);
}

nb_status nb_record_add_array(nb_record *rec, const char *name, nb_dtype type, size_t count,
                              const void *data, void **stored)
{
    size_t es = nb_dtype_size(type);
    if (count > (SIZE_MAX - 64) / es) return nb_error_set(NB_ERR_NOMEM, "array %s is too large", name);
    size_t offset = (size_t)((rec->payload_len + 7) & ~(uint64_t)7);
    size_t bytes = count * es;
    size_t need = offset + bytes;
    nb_status st = payload_room(rec, need, 0, name);
    if (st) return st;
    memset(rec->payload + rec->payload_len, 0, offset - rec->payload_len);
    if (data == NB_ARRAY_UNINITIALISED) {
        /* the caller fills every element (first touch on its own threads); a
         * sanitizer build fills it first with a pattern, so that an element
         * left unwritten shows in the output (fresh pages would be zeros) */
#if defined(__SANITIZE_ADDRESS__) || defined(NB_POISON_UNINITIALISED)
        memset(rec->payload + offset, 0x7F, bytes); /* floats 3.4e38, ints 2139062143 */
#endif
    } else if (data) {
        memcpy(rec->payload + offset, data, bytes);
    } else {
        memset(rec->payload + offset, 0, bytes);
    }
    rec->payload_len = need;
    char key[256];
    snprintf(key, sizeof key, "ARRAY.%s", name);
    nb_hdr_setf(rec, key, "%s %zu %zu", nb_dtype_name(type), count, offset);
    if (stored) *stored = rec->payload + offset;
    return NB_OK;
}

int nb_record_has_array(const nb_record *rec, const char *name)
{
    char key[256];
    snprintf(key, sizeof key, "ARRAY.%s", name);
    return nb_hdr_has(rec, key);
}

nb_status nb_record_get_array(const nb_record *rec, const char *name, nb_dtype type,
                              const void **data, size_t *count)
{
    uint64_t off;
    nb_status st = nb_record_array_offset(rec, name, type, &off, count);
    if (st) return st;
    if (!rec->payload && rec->payload_len)
        return nb_error_set(NB_ERR_DATA, "%s record: its payload was not kept (array %s)", rec->type, name);
    *data = rec->payload + off;
    return NB_OK;
}

nb_status nb_record_array_offset(const nb_record *rec, const char *name, nb_dtype type, uint64_t *offset,
                                 size_t *count)
{
    char key[256], buf[128], tname[16];
    size_t len;
    unsigned long long n, off;
    snprintf(key, sizeof key, "ARRAY.%s", name);
    const char *v = nb_hdr_find(rec, key, &len);
    if (!v) return nb_error_set(NB_ERR_DATA, "%s record: missing array %s", rec->type, name);
    if (len >= sizeof buf) return nb_error_set(NB_ERR_DATA, "%s record: bad array entry %s", rec->type, key);
    memcpy(buf, v, len);
    buf[len] = '\0';
    char extra;
    if (sscanf(buf, "%15s %llu %llu %c", tname, &n, &off, &extra) != 3)
        return nb_error_set(NB_ERR_DATA, "%s record: bad array entry %s=%s", rec->type, key, buf);
    if (strcmp(tname, nb_dtype_name(type)) != 0)
        return nb_error_set(NB_ERR_DATA, "%s record: array %s is %s, expected %s", rec->type, name, tname,
                            nb_dtype_name(type));
    size_t es = nb_dtype_size(type);
    if (off % 8 != 0 || off > rec->payload_len || n > (rec->payload_len - off) / es)
        return nb_error_set(NB_ERR_DATA, "%s record: array %s (%llu x %s at %llu) lies outside the %llu-byte payload",
                            rec->type, name, n, tname, off, (unsigned long long)rec->payload_len);
    *offset = off;
    if (count) *count = (size_t)n;
    return NB_OK;
}
