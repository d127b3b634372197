/* XDS.INP: the input file of XDS for a rotation series written by
 * nb-convert, from the plan alone (the images' name template and the
 * detector kind come from the caller).
 *
 * XDS accepts any right-handed laboratory frame as long as every vector is
 * given in it; this file uses nanoBragg's (the beam along +x), so the
 * vectors are the plan's own: the incident beam, the spindle, the fast and
 * slow detector axes.  ORGX/ORGY are the pixel coordinates of the foot of
 * the perpendicular from the crystal to the detector plane (the plan's
 * ORGX/ORGY, nanoBragg's XDS convention), and DETECTOR_DISTANCE is the signed
 * distance along X x Y, the detector's normal.
 *
 * A detector of several panels is one image to XDS: the panels one after
 * another along the slow axis, each from column 0 (nb_xds_stack_row), in an
 * image as wide as the widest.  The detector's frame is panel 0's (its axes,
 * ORGX/ORGY, distance), and each panel is a SEGMENT= region of the image with
 * the same values as a one-panel XDS.INP would give it, but expressed in that
 * frame: XDS puts pixel (IX, IY) of a segment at
 *   ED . (QX (IX - SEGMENT_ORGX) EDS1 + QY (IY - SEGMENT_ORGY) EDS2 + SEGMENT_DISTANCE EDS3)
 * from the crystal, ED the detector's axes (X, Y, X x Y) and EDS the
 * segment's in ED's coordinates; SEGMENT_ORGX/ORGY count the whole image's
 * pixels, so the panel's ORGY moves down by its first row. */
#include "xds_inp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame_write.h"
#include "image_meta.h"
#include "nb_util.h"

static void cross(const double a[3], const double b[3], double out[3])
{
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

static double dot(const double a[3], const double b[3]) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

static void unit(const double a[3], double out[3])
{
    double n = sqrt(dot(a, a));
    for (int i = 0; i < 3; i++) out[i] = n > 0 ? a[i] / n : 0.0;
}

int nb_xds_stack_row(const nb_plan *p, int i)
{
    int row = 0, s;
    for (int k = 0; k < i && k < nb_plan_npanels(p); k++) {
        nb_plan_panel_dims(p, k, NULL, &s, NULL);
        row += s;
    }
    return row;
}

nb_status nb_xds_stack_dims(const nb_plan *p, int *nx, int *ny)
{
    *nx = 0;
    for (int i = 0; i < nb_plan_npanels(p); i++) {
        nb_plan v;
        nb_plan_panel_view(p, i, &v);
        /* XDS has one QX and QY for the image */
        if (v.panels[0].pixel_size != p->panels[0].pixel_size)
            return nb_error_set(NB_ERR_UNSUPPORTED, "panel %d's pixels are %g mm, panel 0's %g mm: XDS.INP needs one "
                                                    "pixel size",
                                i, v.panels[0].pixel_size * 1e3, p->panels[0].pixel_size * 1e3);
        if (v.panels[0].fpixels > *nx) *nx = v.panels[0].fpixels;
    }
    *ny = nb_xds_stack_row(p, nb_plan_npanels(p));
    return NB_OK;
}

/* The SEGMENT= blocks of a detector of several panels (see the top) */
static void put_segments(nb_strbuf *sb, const nb_plan *p)
{
    double ed3[3];
    cross(p->panels[0].fdet, p->panels[0].sdet, ed3);
    for (int i = 0; i < nb_plan_npanels(p); i++) {
        nb_plan v;
        double n[3];
        nb_plan_panel_view(p, i, &v);
        cross(v.panels[0].fdet, v.panels[0].sdet, n);
        int row = nb_xds_stack_row(p, i);
        nb_strbuf_printf(sb, "!\n! SEGMENT %d: panel %d\n!\n", i + 1, i);
        nb_strbuf_printf(sb, "SEGMENT= 1 %d %d %d\n", v.panels[0].fpixels, row + 1, row + v.panels[0].spixels);
        nb_strbuf_printf(sb, "DIRECTION_OF_SEGMENT_X-AXIS= %.8f %.8f %.8f\n", dot(v.panels[0].fdet, p->panels[0].fdet),
                         dot(v.panels[0].fdet, p->panels[0].sdet), dot(v.panels[0].fdet, ed3));
        nb_strbuf_printf(sb, "DIRECTION_OF_SEGMENT_Y-AXIS= %.8f %.8f %.8f\n", dot(v.panels[0].sdet, p->panels[0].fdet),
                         dot(v.panels[0].sdet, p->panels[0].sdet), dot(v.panels[0].sdet, ed3));
        nb_strbuf_printf(sb, "SEGMENT_ORGX= %.4f SEGMENT_ORGY= %.4f\n", v.ORGX, v.ORGY + row);
        nb_strbuf_printf(sb, "SEGMENT_DISTANCE= %.6f\n", dot(v.panels[0].pix0, n) * 1e3);
    }
}

nb_status nb_xds_inp_write(const char *path, const nb_plan *p, const char *template_q, int detector_kind,
                           int overload)
{
    const double RTD = 180.0 / M_PI;
    double normal[3], beam[3], pol[3], pnormal[3];
    cross(p->panels[0].fdet, p->panels[0].sdet, normal);
    unit(p->beam, beam);
    unit(p->polar_vector, pol);
    cross(beam, pol, pnormal);
    unit(pnormal, pnormal);
    /* distance from the crystal (the origin) to the detector plane, along its normal */
    double dist_mm = dot(p->panels[0].pix0, normal) * 1e3;
    int first = 1, last = p->nframes, nx = p->panels[0].fpixels, ny = p->panels[0].spixels;
    nb_status st = nb_plan_npanels(p) > 1 ? nb_xds_stack_dims(p, &nx, &ny) : NB_OK;
    if (st) return nb_error_prefix(st, "'%s'", path);

    nb_strbuf sb;
    nb_strbuf_init(&sb);
    nb_strbuf_printf(&sb, "! XDS.INP for images written by nb-convert (nb toolkit %s)\n", NB_VERSION);
    if (p->command_line) nb_strbuf_printf(&sb, "! plan: %s\n", p->command_line);
    nb_strbuf_printf(&sb, "JOB= XYCORR INIT COLSPOT IDXREF DEFPIX INTEGRATE CORRECT\n");
    nb_strbuf_printf(&sb, "NAME_TEMPLATE_OF_DATA_FRAMES= %s\n", template_q);
    nb_strbuf_printf(&sb, "DATA_RANGE= %d %d\n", first, last);
    nb_strbuf_printf(&sb, "SPOT_RANGE= %d %d\n", first, last);
    nb_strbuf_printf(&sb, "BACKGROUND_RANGE= %d %d\n", first, last < first + 4 ? last : first + 4);
    nb_strbuf_printf(&sb, "STARTING_FRAME= %d\n", first);
    nb_strbuf_printf(&sb, "STARTING_ANGLE= %.6f\n", p->phi0 * RTD);
    nb_strbuf_printf(&sb, "OSCILLATION_RANGE= %.6f\n", p->osc * RTD);
    nb_strbuf_printf(&sb, "ROTATION_AXIS= %.8f %.8f %.8f\n", p->spindle[0], p->spindle[1], p->spindle[2]);
    nb_strbuf_printf(&sb, "X-RAY_WAVELENGTH= %.8f\n", p->lambda0 * 1e10);
    nb_strbuf_printf(&sb, "INCIDENT_BEAM_DIRECTION= %.8f %.8f %.8f\n", beam[0], beam[1], beam[2]);
    nb_strbuf_printf(&sb, "FRACTION_OF_POLARIZATION= %.4f\n", nb_polarization_fraction(p));
    nb_strbuf_printf(&sb, "POLARIZATION_PLANE_NORMAL= %.8f %.8f %.8f\n", pnormal[0], pnormal[1], pnormal[2]);
    nb_strbuf_printf(&sb, "DETECTOR= %s MINIMUM_VALID_PIXEL_VALUE= 0 OVERLOAD= %d\n",
                     detector_kind == NB_XDS_PILATUS ? "PILATUS" : "ADSC", overload);
    /* the sensor as simulated: its thickness and attenuation (XDS's SILICON=,
     * 1/mm, whatever the material), which XDS would otherwise take as
     * silicon's at the wavelength */
    if (detector_kind == NB_XDS_PILATUS && p->panels[0].thick > 0.0 && p->panels[0].mu > 0.0)
        nb_strbuf_printf(&sb, "SENSOR_THICKNESS= %.4f\nSILICON= %.6g\n", p->panels[0].thick * 1e3,
                         p->panels[0].mu * 1e-3);
    nb_strbuf_printf(&sb, "NX= %d NY= %d QX= %.6f QY= %.6f\n", nx, ny, p->panels[0].pixel_size * 1e3,
                     p->panels[0].pixel_size * 1e3);
    nb_strbuf_printf(&sb, "ORGX= %.4f ORGY= %.4f\n", p->ORGX, p->ORGY);
    nb_strbuf_printf(&sb, "DETECTOR_DISTANCE= %.6f\n", dist_mm);
    nb_strbuf_printf(&sb, "DIRECTION_OF_DETECTOR_X-AXIS= %.8f %.8f %.8f\n", p->panels[0].fdet[0], p->panels[0].fdet[1],
                     p->panels[0].fdet[2]);
    nb_strbuf_printf(&sb, "DIRECTION_OF_DETECTOR_Y-AXIS= %.8f %.8f %.8f\n", p->panels[0].sdet[0], p->panels[0].sdet[1],
                     p->panels[0].sdet[2]);
    nb_strbuf_printf(&sb, "TRUSTED_REGION= 0.0 1.42\n");
    nb_strbuf_printf(&sb, "INCLUDE_RESOLUTION_RANGE= 50.0 0.0\n");
    nb_strbuf_printf(&sb, "FRIEDEL'S_LAW= TRUE\n");
    nb_strbuf_printf(&sb, "SPACE_GROUP_NUMBER= 0\n");
    if (!nb_plan_has_crystal(p)) {
        nb_strbuf_printf(&sb, "! no crystal was simulated (nb-geom --nonbragg: an amorphous sample)\n");
    } else {
        nb_strbuf_printf(&sb, "! the simulated crystal (uncomment with its space group to fix the cell):\n");
        nb_strbuf_printf(&sb, "!UNIT_CELL_CONSTANTS= %.4f %.4f %.4f %.4f %.4f %.4f\n", p->unit_cell[0],
                         p->unit_cell[1], p->unit_cell[2], p->unit_cell[3], p->unit_cell[4], p->unit_cell[5]);
    }
    /* last: each segment's keys follow its SEGMENT= line */
    if (nb_plan_npanels(p) > 1) put_segments(&sb, p);

    st = nb_write_text_file(path, sb.data, sb.len);
    nb_strbuf_free(&sb);
    return st;
}

/* ---- the registry's sidecar writer ------------------------------------------- */

/* XDS.INP for the frame's plan, naming the images of the same command
 * (o->images: a file per frame, a '#' run becoming '?'): a PILATUS's when
 * they count from 0 (a CBF's, whose overload is lower by the offset), else
 * an ADSC's (an SMV's) */
nb_status nb_xds_inp_write_sidecar(const char *path, const nb_frame *fr, const nb_write_opts *o)
{
    int overload = fr->counts && fr->counts_bits == 32 ? 2147483647 : 65535;
    if (!o->images)
        return nb_error_set(NB_ERR_USAGE, "'%s' needs the images' name: write them in the same command as CBF "
                                          "or SMV (e.g. -o img_###.cbf -o %s)",
                            path, path);
    if (!strchr(o->images, '#') && fr->plan->nframes > 1)
        return nb_error_set(NB_ERR_USAGE, "'%s': name the images with a '#' run for the frame number (e.g. "
                                          "img_###.cbf)",
                            o->images);
    char tmpl[NB_PATH_MAX], *target = NULL;
    snprintf(tmpl, sizeof tmpl, "%s", o->images);
    for (char *c = tmpl; *c; c++)
        if (*c == '#') *c = '?';
    nb_status st = o->claim(path, 0, &target);
    if (st) return st;
    nb_info("writing %s", path);
    const int from_zero = o->images_format->counts_from_zero;
    if (from_zero) overload -= (int)lrint(fr->counts ? fr->counts_adc : fr->adc);
    st = nb_xds_inp_write(target, fr->plan, tmpl, from_zero ? NB_XDS_PILATUS : NB_XDS_ADSC, overload);
    free(target);
    return st;
}
