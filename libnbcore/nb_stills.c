/* nb_stills.c - the shots of a series of stills (nb-geom -stills): each
 * frame's orientation, crystal size, fluence and spectrum drawn from the
 * plan's MISSET_SEED and the frame number alone, so that a shard renders the
 * frame the whole run would; and the PLAN keys of the stills' settings.
 * The rules are in nb_stills.h and docs/physics.md 16. */
#include "nb_stills.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_spectra.h"
#include "nb_util.h"
#include "nb_vec.h"

/* the generator's streams: one per quantity, so that adding a quantity never
 * changes another's draws */
enum { STREAM_ORIENTATION = 1, STREAM_SIZE = 2, STREAM_FLUENCE = 3, STREAM_SPECTRUM = 4 };

/* splitmix64's finaliser: a bijection of 64-bit words that mixes every bit */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double nb_still_uniform(int64_t seed, long frame, unsigned stream, unsigned k)
{
    uint64_t z = mix64((uint64_t)seed + 0x9E3779B97F4A7C15ull);
    z = mix64(z ^ ((uint64_t)frame * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull));
    z = mix64(z ^ (((uint64_t)stream << 32 | k) * 0xD1B54A32D192ED03ull));
    /* 53 bits, centred in their interval: never 0 or 1 */
    return ((double)(z >> 11) + 0.5) * 0x1.0p-53;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Shoemake's uniform unit quaternion (w, x, y, z) from three uniforms, as a
 * rotation matrix: uniform on SO(3) (Haar measure). */
static void uniform_rotation(const double u[3], double U[9])
{
    double s1 = sqrt(1.0 - u[0]), s2 = sqrt(u[0]);
    double w = s1 * sin(2 * M_PI * u[1]), x = s1 * cos(2 * M_PI * u[1]);
    double y = s2 * sin(2 * M_PI * u[2]), z = s2 * cos(2 * M_PI * u[2]);
    U[0] = 1 - 2 * (y * y + z * z), U[1] = 2 * (x * y - z * w), U[2] = 2 * (x * z + y * w);
    U[3] = 2 * (x * y + z * w), U[4] = 1 - 2 * (x * x + z * z), U[5] = 2 * (y * z - x * w);
    U[6] = 2 * (x * z - y * w), U[7] = 2 * (y * z + x * w), U[8] = 1 - 2 * (x * x + y * y);
}

void nb_still_draw(const nb_plan *p, long frame, nb_still_shot *shot)
{
    const nb_stills *s = &p->stills;
    const int64_t seed = p->misset_seed;
    double u[3];
    for (unsigned k = 0; k < 3; k++) u[k] = nb_still_uniform(seed, frame, STREAM_ORIENTATION, k);
    uniform_rotation(u, shot->U);
    shot->Na = p->Na, shot->Nb = p->Nb, shot->Nc = p->Nc;
    if (s->N_max > 0) {
        int span = s->N_max - s->N_min + 1;
        int n = s->N_min + (int)floor(nb_still_uniform(seed, frame, STREAM_SIZE, 0) * span);
        if (n > s->N_max) n = s->N_max;
        shot->Na = shot->Nb = shot->Nc = n;
    }
    shot->fluence = p->fluence;
    if (s->fluence_max > 0)
        shot->fluence = s->fluence_min + nb_still_uniform(seed, frame, STREAM_FLUENCE, 0) *
                                             (s->fluence_max - s->fluence_min);
    shot->spikes = s->spikes > NB_STILLS_MAX_SPIKES ? NB_STILLS_MAX_SPIKES : s->spikes;
    /* Box-Muller on pairs of uniforms: the envelope's FWHM is 2 sqrt(2 ln 2) sigma */
    double sigma = s->bandwidth / (2.0 * sqrt(2.0 * log(2.0)));
    for (int k = 0; k < shot->spikes; k++) {
        double r = sqrt(-2.0 * log(nb_still_uniform(seed, frame, STREAM_SPECTRUM, 2u * (unsigned)k)));
        double t = 2 * M_PI * nb_still_uniform(seed, frame, STREAM_SPECTRUM, 2u * (unsigned)k + 1);
        shot->spike[k] = sigma * r * cos(t);
    }
    qsort(shot->spike, (size_t)shot->spikes, sizeof shot->spike[0], cmp_double);
}

void nb_still_apply(const nb_still_shot *shot, nb_plan *view)
{
    double *vecs[6] = {view->cell_a, view->cell_b, view->cell_c, view->recip_a, view->recip_b, view->recip_c};
    for (int i = 0; i < 6; i++) nb_rotate_umat(vecs[i], vecs[i], shot->U);
    view->Na = shot->Na, view->Nb = shot->Nb, view->Nc = shot->Nc;
    view->fluence = shot->fluence;
}

/* A frame crystal's spectrum: the plan's sources scaled by lambda /
 * LAMBDA0 (none when the wavelength is the plan's); with a spectrum of its
 * own (FRAME_SPECTRA), each of them at every channel's wavelength relative
 * to the spectrum's mean (nb_spectra.h) */
static nb_status frame_crystal_sources(const nb_plan *series, long frame, nb_source **sources, int *n)
{
    const nb_frame_crystal *fc = &series->frame_crystals[frame];
    const double *pairs;
    const int channels = nb_plan_frame_spectrum(series, frame, &pairs);
    if (!channels && !(fabs(fc->lambda - series->lambda0) > 1e-15 * series->lambda0)) return NB_OK;
    const double scale = fc->lambda / series->lambda0;
    double one = 1.0, *rel = &one;
    int m = 1;
    nb_status st = NB_OK;
    if (channels && !(st = nb_calloc((void **)&rel, (size_t)channels, sizeof *rel, "the frame's spectrum")))
        st = nb_spectrum_channels(pairs, channels, rel, &m);
    if (!st) st = nb_calloc((void **)sources, (size_t)series->nsources * (size_t)m, sizeof **sources,
                            "the frame's spectrum");
    for (int i = 0; !st && i < series->nsources; i++)
        for (int k = 0; k < m; k++) {
            nb_source *q = &(*sources)[(size_t)i * m + k];
            *q = series->sources[i];
            q->lambda = series->sources[i].lambda * scale * rel[k];
        }
    if (!st) *n = series->nsources * m;
    if (rel != &one) free(rel);
    return st;
}

nb_status nb_plan_frame_sources(const nb_plan *series, long frame, nb_source **sources, int *n)
{
    *sources = NULL;
    *n = 0;
    if (series->frame_crystals && frame >= 0 && frame < series->nframes)
        return frame_crystal_sources(series, frame, sources, n);
    if (!series->stills.on || series->stills.spikes <= 0) return NB_OK;
    nb_still_shot shot;
    nb_still_draw(series, frame, &shot);
    size_t count = (size_t)series->nsources * (size_t)shot.spikes;
    if (count > 100000000)
        return nb_error_set(NB_ERR_DATA, "%d sources x %d spikes are too many", series->nsources, shot.spikes);
    nb_status st = nb_calloc((void **)sources, count, sizeof **sources, "the shot's spectrum");
    if (st) return st;
    for (int i = 0; i < series->nsources; i++)
        for (int k = 0; k < shot.spikes; k++) {
            nb_source *q = &(*sources)[(size_t)i * shot.spikes + k];
            *q = series->sources[i];
            q->lambda = series->sources[i].lambda * (1.0 + shot.spike[k]);
        }
    *n = (int)count;
    return NB_OK;
}

/* ---- PLAN keys ---------------------------------------------------------------- */

void nb_stills_to_record(const nb_stills *s, nb_record *rec)
{
    nb_hdr_set_long(rec, "STILLS", 1);
    nb_hdr_set_double(rec, "STILLS_BANDWIDTH", s->bandwidth);
    nb_hdr_set_long(rec, "STILLS_SPIKES", s->spikes);
    nb_hdr_setf(rec, "STILLS_N", "%d %d", s->N_min, s->N_max);
    char a[32], b[32];
    nb_format_double(s->fluence_min, a, sizeof a);
    nb_format_double(s->fluence_max, b, sizeof b);
    nb_hdr_setf(rec, "STILLS_FLUENCE", "%s %s", a, b);
}

/* "X Y": two numbers of a key */
static nb_status get_pair(const nb_record *rec, const char *key, double v[2])
{
    size_t len;
    const char *text = nb_hdr_find(rec, key, &len);
    char buf[128], *end;
    if (!text) return nb_error_set(NB_ERR_DATA, "PLAN record: missing key %s", key);
    if (len >= sizeof buf) return nb_error_set(NB_ERR_DATA, "PLAN record: %s is too long", key);
    memcpy(buf, text, len);
    buf[len] = '\0';
    v[0] = strtod(buf, &end);
    char *q = end;
    v[1] = strtod(q, &end);
    if (q == buf || end == q || *end || !isfinite(v[0]) || !isfinite(v[1]))
        return nb_error_set(NB_ERR_DATA, "PLAN record: %s is not two finite numbers", key);
    return NB_OK;
}

nb_status nb_stills_from_record(const nb_record *rec, nb_stills *s)
{
    nb_status st;
    double N[2], F[2];
    memset(s, 0, sizeof *s);
    if (!nb_hdr_has(rec, "STILLS")) return NB_OK;
    if ((st = nb_hdr_get_int(rec, "STILLS", &s->on))) return st;
    if (s->on != 1) return nb_error_set(NB_ERR_DATA, "PLAN record: STILLS must be 1 when present");
    if ((st = nb_hdr_get_double(rec, "STILLS_BANDWIDTH", &s->bandwidth))) return st;
    if ((st = nb_hdr_get_int(rec, "STILLS_SPIKES", &s->spikes))) return st;
    if ((st = get_pair(rec, "STILLS_N", N)) || (st = get_pair(rec, "STILLS_FLUENCE", F))) return st;
    if (N[0] != floor(N[0]) || N[1] != floor(N[1]) || fabs(N[0]) > 1e6 || fabs(N[1]) > 1e6)
        return nb_error_set(NB_ERR_DATA, "PLAN record: STILLS_N is not two whole numbers up to 1000000");
    s->N_min = (int)N[0], s->N_max = (int)N[1];
    s->fluence_min = F[0], s->fluence_max = F[1];
    return nb_stills_check(s, NB_ERR_DATA, "PLAN record");
}

nb_status nb_stills_check(const nb_stills *s, nb_status code, const char *who)
{
    if (!(s->bandwidth >= 0) || s->bandwidth >= 1)
        return nb_error_set(code, "%s: the stills' bandwidth must be 0 .. 100 %%", who);
    if (s->spikes < 0 || s->spikes > NB_STILLS_MAX_SPIKES)
        return nb_error_set(code, "%s: the stills' spikes must be 0 .. %d", who, NB_STILLS_MAX_SPIKES);
    if ((s->spikes > 0) != (s->bandwidth > 0))
        return nb_error_set(code, "%s: the stills' spectrum needs both a bandwidth and spikes", who);
    if ((s->N_min != 0 || s->N_max != 0) && !(s->N_min >= 1 && s->N_max >= s->N_min))
        return nb_error_set(code, "%s: the stills' N range must be A:B with 1 <= A <= B", who);
    if ((s->fluence_min != 0 || s->fluence_max != 0) && !(s->fluence_min > 0 && s->fluence_max >= s->fluence_min))
        return nb_error_set(code, "%s: the stills' fluence range must be A:B with 0 < A <= B", who);
    return NB_OK;
}
