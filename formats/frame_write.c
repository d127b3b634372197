/* frame_write.c - one frame of a stream as an image file: the header values
 * a frame gives (nb_frame_meta, nb_frame_smv_meta), the counts as the
 * integer formats hold them (from 0 for CBF and NXmx, or nanoBragg's int
 * image), panel views, and a frame's samples made ready for its format's
 * write_image (nb_frame_write_image; the writers are in their formats'
 * files, named by the registry).  nb-convert decides which frames go to
 * which files (tools/nb_convert_*.c). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dials_expt_write.h"
#include "frame_write.h"
#include "nb_image.h"
#include "nb_tuning.h"
#include "nb_util.h"
#include "registry.h"

void nb_frame_meta(const nb_frame *fr, nb_image_meta *m)
{
    const nb_plan *p = fr->plan;
    memset(m, 0, sizeof *m);
    m->fpixels = fr->width;
    m->spixels = fr->height;
    m->pixel_size = p->panels[0].pixel_size;
    m->distance = p->distance;
    m->close_distance = p->close_distance;
    m->wavelength = nb_frame_wavelength(p, fr->im);
    m->beam_f = p->Fbeam;
    m->beam_s = p->Sbeam;
    double start = fr->im->has.phi_start ? fr->im->phi_start : p->phi0;
    double range = fr->im->has.phi_range ? fr->im->phi_range : p->osc;
    m->osc_start = start * 180.0 / M_PI;
    m->osc_range = range * 180.0 / M_PI;
    m->exposure = p->exposure;
    m->count_cutoff = fr->counts ? (fr->counts_bits == 32 ? 2147483647.0 : 65535.0) : 65535.0;
    nb_stated_sensor sensor;
    nb_stated_sensor_of(p, &sensor);
    m->sensor_thickness = sensor.simulated ? p->panels[0].thick : 0.0;
    m->sensor_material = nb_material_name(sensor.material);
    m->gain = fr->counts && fr->im->has.counts_gain ? fr->im->counts_gain : 1.0;
    m->twotheta = p->twotheta * 180.0 / M_PI;
    m->frame = fr->frame;
    m->polarization = nb_polarization_fraction(p);
    nb_dials_image_geometry(p, m);
    m->command_line = p->command_line;
}

/* A simulated sensor whose attenuation is not the one DIALS will compute
 * from the material a CBF or NXmx file states (silicon's, when no
 * -detector_material named one): said once a run */
void nb_warn_sensor_mu(const char *path, const nb_plan *p)
{
    static int told;
    nb_stated_sensor s;
    nb_stated_sensor_of(p, &s);
    if (told || !s.simulated || (s.mu > 0 && fabs(s.mu - p->panels[0].mu) <= 0.01 * p->panels[0].mu)) return;
    told = 1;
    nb_warn("'%s': the simulated sensor's attenuation (%g /mm) is not %s's at %g A (%g /mm), which DIALS computes "
            "from the file: name the material with nb-geom -detector_material instead of -detector_abs",
            path, p->panels[0].mu * 1e-3, nb_material_name(s.material), p->lambda0 * 1e10, s.mu * 1e-3);
}

/* A CBF holds counts as a PILATUS counts them, from 0: the counts less
 * their ADC offset (dxtbx reads no pedestal from a miniCBF); the -1 of a
 * stacked image's empty columns stays.  A count below its offset (read-out
 * noise) stays negative: DIALS takes such pixels as untrusted, so say so. */
void nb_counts_from_zero(const int32_t *counts, size_t n, double adc, const char *path, int32_t *out)
{
    const int32_t off = (int32_t)lrint(adc);
    size_t below = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t v = counts[i];
        out[i] = v < 0 ? v : v - off;
        below += v >= 0 && v < off;
    }
    if (below)
        nb_warn("'%s': %zu pixels hold fewer counts than the ADC offset %d (read-out noise): negative in the CBF, "
                "where DIALS takes them as untrusted; an SMV image (.img) keeps the offset under the counts",
                path, below, (int)off);
}

/* The reference's noiseless int image as int32 (for CBF and TIFF). */
nb_status nb_frame_int_counts(const nb_frame *fr, int32_t **out)
{
    size_t n = (size_t)fr->width * fr->height;
    nb_status st = nb_alloc_large((void **)out, n, sizeof **out, "the int image");
    if (st) return st;
    const nb_plan *p = fr->plan;
    nb_roi roi = {p->panels[0].roi_xmin, p->panels[0].roi_xmax, p->panels[0].roi_ymin, p->panels[0].roi_ymax};
    nb_int_image(fr->photons, fr->width, fr->height, roi, fr->int_scale, fr->adc, *out);
    return NB_OK;
}

void nb_frame_smv_meta(const nb_frame *fr, int smv_beam, double adc, nb_smv_meta *m)
{
    nb_image_meta meta;
    nb_frame_meta(fr, &meta);
    nb_smv_meta_from_plan(fr->plan, adc, smv_beam, m);
    /* a still's shot: its own wavelength; the counts' gain when not 1 */
    m->wavelength_A = meta.wavelength * 1e10;
    m->gain = meta.gain;
    if (fr->im->has.phi_start) {
        m->phi_deg = m->osc_start_deg = meta.osc_start;
        m->osc_range_deg = meta.osc_range;
    }
}

/* Panel i of a frame of several panels as a one-panel frame pf, whose plan
 * is view (panel i's geometry; the frame's common scales) */
void nb_frame_panel(const nb_frame *fr, int i, nb_plan *view, nb_frame *pf)
{
    size_t off;
    nb_plan_panel_view(fr->plan, i, view);
    nb_plan_panel_dims(fr->plan, i, NULL, NULL, &off);
    *pf = *fr;
    pf->plan = view;
    pf->width = view->panels[0].fpixels, pf->height = view->panels[0].spixels;
    pf->photons = fr->photons + off;
    if (fr->counts) pf->counts = fr->counts + off;
}

nb_status nb_frame_write_image(const nb_format *f, const nb_frame_write_opts *o, const char *path, const char *final,
                               const nb_frame *fr)
{
    if (f->writer != NB_WRITE_FRAME || !f->write_image)
        return nb_error_set(NB_ERR_USAGE, "'%s': format %s cannot be written here", final, f->name);
    nb_frame_image img = {fr, f, path, final, {0}, o->use_counts, NULL, 16, fr->adc, o->smv_beam};
    nb_frame_meta(fr, &img.meta);
    img.meta.name = final;
    int32_t *ints = NULL;
    const int is_int =
        f->samples == NB_SAMPLES_INTEGER || (f->samples == NB_SAMPLES_COUNTS_OR_PHOTONS && o->use_counts);
    if (is_int && o->use_counts) {
        img.counts = fr->counts;
        img.bits = fr->counts_bits;
        img.adc = fr->counts_adc;
    } else if (is_int) {
        nb_status st = nb_frame_int_counts(fr, &ints);
        if (st) return st;
        img.counts = ints;
        nb_info("intfile_scale = %g", fr->int_scale);
    }
    if (is_int && f->bits) img.bits = f->bits;
    nb_info("  %s, %s", f->name, is_int && o->use_counts ? "detector counts" : is_int ? "scaled photons" : "photons");
    nb_status st = f->write_image(&img);
    free(ints);
    return st;
}
