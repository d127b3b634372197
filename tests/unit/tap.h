/* tap.h - a tiny TAP producer for the C unit tests.
 *   ok(cond, "what %d", x);   ... return tap_done();
 * tests/run-all.sh counts the "ok" / "not ok" lines. */
#ifndef NB_TAP_H
#define NB_TAP_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

static int tap_count, tap_failed;

__attribute__((format(printf, 4, 5), unused)) static int tap_ok(int pass, const char *file, int line,
                                                                 const char *fmt, ...)
{
    va_list ap;
    printf("%sok %d - ", pass ? "" : "not ", ++tap_count);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!pass) {
        printf("#   failed at %s:%d\n", file, line);
        tap_failed++;
    }
    fflush(stdout);
    return pass;
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
/* |a - b| <= tol * max(1, |b|) */
#define near(a, b, tol, ...) ok(fabs((double)(a) - (double)(b)) <= (tol) * fmax(1.0, fabs((double)(b))), __VA_ARGS__)
#define skip(reason, ...)                                                   \
    do {                                                                    \
        printf("ok %d - ", ++tap_count);                                    \
        printf(__VA_ARGS__);                                                \
        printf(" # SKIP %s\n", reason);                                     \
    } while (0)

__attribute__((unused)) static int tap_done(void)
{
    printf("1..%d\n", tap_count);
    return tap_failed ? 1 : 0;
}

#endif
