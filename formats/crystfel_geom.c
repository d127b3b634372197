/* A CrystFEL geometry file for images written by nb-convert: the plan's
 * detector as one panel.
 *
 * CrystFEL's laboratory frame has z along the beam and x, y across it.  Here
 * z is the plan's beam, x the polarization (E) direction made perpendicular
 * to the beam (horizontal at a synchrotron), y = z cross x: a rotation of
 * nanoBragg's frame, so the panel's corner and its fast and slow directions
 * are the plan's pix0, fdet and sdet in that basis.  corner_x/y are in
 * pixels, clen is the corner's z in metres, and fs/ss keep their z parts
 * for a tilted detector. */
#include "crystfel_geom.h"

#include <math.h>
#include <stdio.h>

#include "nb_util.h"

static double dot(const double a[3], const double b[3]) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

static void unit(double a[3])
{
    double n = sqrt(dot(a, a));
    if (n > 0)
        for (int i = 0; i < 3; i++) a[i] /= n;
}

nb_status nb_crystfel_geom_write(const char *path, const nb_plan *p, int max_adu)
{
    double ez[3] = {p->beam[0], p->beam[1], p->beam[2]}, ex[3], ey[3];
    unit(ez);
    double along = dot(p->polar_vector, ez);
    for (int i = 0; i < 3; i++) ex[i] = p->polar_vector[i] - along * ez[i];
    if (dot(ex, ex) < 1e-20) { /* a polarization along the beam: any perpendicular */
        double t[3] = {fabs(ez[0]) < 0.9 ? 1.0 : 0.0, fabs(ez[0]) < 0.9 ? 0.0 : 1.0, 0.0};
        along = dot(t, ez);
        for (int i = 0; i < 3; i++) ex[i] = t[i] - along * ez[i];
    }
    unit(ex);
    ey[0] = ez[1] * ex[2] - ez[2] * ex[1];
    ey[1] = ez[2] * ex[0] - ez[0] * ex[2];
    ey[2] = ez[0] * ex[1] - ez[1] * ex[0];
    const double px = p->pixel_size;

    nb_strbuf sb;
    nb_strbuf_init(&sb);
    nb_strbuf_printf(&sb, "; CrystFEL geometry for images written by nb-convert (nb toolkit %s)\n", NB_VERSION);
    if (p->command_line) nb_strbuf_printf(&sb, "; plan: %s\n", p->command_line);
    nb_strbuf_printf(&sb, "; laboratory frame: z along the beam, x along the polarization\n\n");
    nb_strbuf_printf(&sb, "photon_energy = %.6f\n", 12398.419843320026 / (p->lambda0 * 1e10));
    nb_strbuf_printf(&sb, "adu_per_photon = 1\n");
    nb_strbuf_printf(&sb, "res = %.6f\n", 1.0 / px);
    nb_strbuf_printf(&sb, "\np0/min_fs = 0\np0/max_fs = %d\np0/min_ss = 0\np0/max_ss = %d\n", p->fpixels - 1,
                     p->spixels - 1);
    nb_strbuf_printf(&sb, "p0/corner_x = %.6f\n", dot(p->pix0, ex) / px);
    nb_strbuf_printf(&sb, "p0/corner_y = %.6f\n", dot(p->pix0, ey) / px);
    nb_strbuf_printf(&sb, "p0/clen = %.9f\n", dot(p->pix0, ez));
    nb_strbuf_printf(&sb, "p0/coffset = 0.0\n");
    nb_strbuf_printf(&sb, "p0/fs = %+.8fx %+.8fy %+.8fz\n", dot(p->fdet, ex), dot(p->fdet, ey), dot(p->fdet, ez));
    nb_strbuf_printf(&sb, "p0/ss = %+.8fx %+.8fy %+.8fz\n", dot(p->sdet, ex), dot(p->sdet, ey), dot(p->sdet, ez));
    nb_strbuf_printf(&sb, "p0/max_adu = %d\n", max_adu);

    nb_status st = nb_write_text_file(path, sb.data, sb.len);
    nb_strbuf_free(&sb);
    return st;
}
