/* nb_options.c - the flag registry of every tool: each spelling with its
 * owner, its argument count and its help; exact lookup, the "did you mean"
 * message and the one naming the tool that owns a flag; and the one loop
 * that reads a tool's command line through its option table, with the typed
 * handlers that parse, check, convert and store a flag's values (written
 * once here, not once per flag in each tool). */
#include "nb_options.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_util.h"

#define G NB_GEOM
#define H NB_HKL
#define SM NB_SIM
#define NZ NB_NOISE
#define CV NB_CONVERT

/* name, id, min args, max args, owners, metavar, help (NULL = alias of the
 * previous spelling with the same id) */
static const nb_flag table[] = {
    /* inputs and crystal */
    {"-img", FL_IMG, 1, 1, G, "FILE", "take detector size, pixel, distance, wavelength, beam centre, phi from an SMV header"},
    {"-mask", FL_MASK, 1, 1, G, "FILE", "SMV image whose zero pixels are not rendered (its header sets geometry as -img)"},
    {"-panels", FL_PANELS, 1, 1, G, "FILE", "the detector's panels from a DIALS .expt or CrystFEL .geom file (beam and crystal from the flags)"},
    {"-expt", FL_EXPT, 1, 1, G, "FILE", "detector, beam and crystals from a DIALS experiment list: a frame per still, or the sweep's frames"},
    {"-expt_spectra", FL_EXPT_SPECTRA, 1, 1, G, "LIST", "with -expt: a spectrum per still, a diffBragg .lam file per line of LIST (or 'expt refl spec' lines)"},
    {"-mat", FL_MAT, 1, 1, G, "FILE", "MOSFLM orientation matrix (3 lines of reciprocal-vector components, includes lambda)"},
    {"-matrix", FL_MAT, 1, 1, G, "FILE", NULL},
    {"-cell", FL_CELL, 1, 6, G, "A B C AL BE GA", "unit cell in Angstrom and degrees (missing b, c = a; angles default 90)"},
    {"-misset", FL_MISSET, 1, 3, G, "RX RY RZ|random", "crystal missetting rotations about x, y, z (degrees), or a random orientation"},
    {"-misset_seed", FL_MISSET_SEED, 1, 1, G, "N", "seed for -misset random (default: the time-based noise seed)"},
    {"-mosaic_seed", FL_MOSAIC_SEED, 1, 1, G, "N", "seed for the mosaic domain orientations (default 12345678)"},
    {"-Na", FL_NA, 1, 1, G, "N", "unit cells along a (may be fractional: an nb extension)"},
    {"-Nb", FL_NB, 1, 1, G, "N", "unit cells along b"},
    {"-Nc", FL_NC, 1, 1, G, "N", "unit cells along c"},
    {"-N", FL_N, 1, 1, G, "N", "unit cells along a, b and c (may be fractional: an nb extension)"},
    {"-xtalsize", FL_SAMPLE_SIZE, 1, 1, G, "MM", "crystal full width in every direction (sets N from the cell)"},
    {"-xtal_size", FL_SAMPLE_SIZE, 1, 1, G, "MM", NULL},
    {"-samplesize", FL_SAMPLE_SIZE, 1, 1, G, "MM", NULL},
    {"-sample_size", FL_SAMPLE_SIZE, 1, 1, G, "MM", NULL},
    {"-xtal_x", FL_SAMPLE_X, 1, 1, G, "MM", "crystal size along x (sets Na)"},
    {"-xtal_thick", FL_SAMPLE_X, 1, 1, G, "MM", NULL},
    {"-sample_x", FL_SAMPLE_X, 1, 1, G, "MM", NULL},
    {"-sample_thick", FL_SAMPLE_X, 1, 1, G, "MM", NULL},
    {"-xtal_y", FL_SAMPLE_Y, 1, 1, G, "MM", "crystal size along y (sets Nb; clipped to the beam size)"},
    {"-xtal_width", FL_SAMPLE_Y, 1, 1, G, "MM", NULL},
    {"-sample_y", FL_SAMPLE_Y, 1, 1, G, "MM", NULL},
    {"-sample_width", FL_SAMPLE_Y, 1, 1, G, "MM", NULL},
    {"-width", FL_SAMPLE_Y, 1, 1, G, "MM", NULL},
    {"-xtal_z", FL_SAMPLE_Z, 1, 1, G, "MM", "crystal size along z (sets Nc; clipped to the beam size)"},
    {"-xtal_height", FL_SAMPLE_Z, 1, 1, G, "MM", NULL},
    {"-sample_z", FL_SAMPLE_Z, 1, 1, G, "MM", NULL},
    {"-sample_height", FL_SAMPLE_Z, 1, 1, G, "MM", NULL},
    {"-height", FL_SAMPLE_Z, 1, 1, G, "MM", NULL},
    {"-density", FL_DENSITY, 1, 1, G, "G/CM3", "accepted for compatibility; has no effect (as in the reference)"},
    {"-sample_density", FL_DENSITY, 1, 1, G, "G/CM3", NULL},
    {"-MW", FL_MW, 1, 1, G, "G/MOL", "accepted for compatibility; has no effect (as in the reference)"},
    {"-molecular_weight", FL_MW, 1, 1, G, "G/MOL", NULL},
    {"-round_xtal", FL_ROUND_XTAL, 0, 0, G, "", "ellipsoidal crystal (sinc3 spot shape)"},
    {"-square_xtal", FL_SQUARE_XTAL, 0, 0, G, "", "parallelepiped crystal (sincg spot shape, default)"},
    {"-gauss_xtal", FL_GAUSS_XTAL, 0, 0, G, "", "Gaussian spots, no inter-Bragg maxima"},
    {"-tophat_spots", FL_TOPHAT_SPOTS, 0, 0, G, "", "flat-top spots clipped at the FWHM"},
    {"-binary_spots", FL_TOPHAT_SPOTS, 0, 0, G, "", NULL},
    {"-fudge", FL_FUDGE, 1, 1, G, "X", "shape-transform width fudge factor (default 1)"},
    {"-mosaic", FL_MOSAIC, 1, 1, G, "DEG", "isotropic mosaic spread (90 for powder)"},
    {"-mosaic_spread", FL_MOSAIC, 1, 1, G, "DEG", NULL},
    {"-mosaicity", FL_MOSAIC, 1, 1, G, "DEG", NULL},
    {"-mosaic_domains", FL_MOSAIC_DOMAINS, 1, 1, G, "N", "number of mosaic domains (default 10 when a spread is given)"},
    {"-mosaic_dom", FL_MOSAIC_DOMAINS, 1, 1, G, "N", NULL},
    {"-water", FL_WATER, 1, 1, G, "UM", "thickness of water around the crystal, for a background"},
    /* detector */
    {"-pixel", FL_PIXEL, 1, 1, G, "MM", "pixel size (default 0.1)"},
    {"-detpixels", FL_DETPIXELS, 1, 1, G, "N", "detector size in pixels, both axes"},
    {"-detpixels_f", FL_DETPIXELS_F, 1, 1, G, "N", "fast-axis pixel count"},
    {"-detpixels_x", FL_DETPIXELS_F, 1, 1, G, "N", NULL},
    {"-detpixels_s", FL_DETPIXELS_S, 1, 1, G, "N", "slow-axis pixel count"},
    {"-detpixels_y", FL_DETPIXELS_S, 1, 1, G, "N", NULL},
    {"-detsize", FL_DETSIZE, 1, 1, G, "MM", "detector size, both axes (default 102.4; ignored when pixel counts are given)"},
    {"-detsize_f", FL_DETSIZE_F, 1, 1, G, "MM", "fast-axis detector size"},
    {"-detsize_s", FL_DETSIZE_S, 1, 1, G, "MM", "slow-axis detector size"},
    {"-distance", FL_DISTANCE, 1, 1, G, "MM", "sample to beam spot distance (default 100)"},
    {"-close_distance", FL_CLOSE_DISTANCE, 1, 1, G, "MM", "sample to detector-plane (perpendicular) distance"},
    {"-Xbeam", FL_XBEAM, 1, 1, G, "MM", "direct-beam position, image fast/X coordinate"},
    {"-Ybeam", FL_YBEAM, 1, 1, G, "MM", "direct-beam position, image slow/Y coordinate"},
    {"-Xclose", FL_XCLOSE, 1, 1, G, "MM", "near point, fast coordinate (default beam centre in XDS/DIALS/CUSTOM)"},
    {"-Yclose", FL_YCLOSE, 1, 1, G, "MM", "near point, slow coordinate"},
    {"-ORGX", FL_ORGX, 1, 1, G, "PIXELS", "XDS detector origin, fast"},
    {"-ORGY", FL_ORGY, 1, 1, G, "PIXELS", "XDS detector origin, slow"},
    {"-pivot", FL_PIVOT, 1, 1, G, "beam|sample", "detector pivot (only honoured with custom vectors, as in the reference)"},
    {"-mosflm", FL_MOSFLM, 0, 0, G, "", "MOSFLM beam-centre convention (default)"},
    {"-xds", FL_XDS, 0, 0, G, "", "XDS convention"},
    {"-adxv", FL_ADXV, 0, 0, G, "", "ADXV convention"},
    {"-denzo", FL_DENZO, 0, 0, G, "", "DENZO convention"},
    {"-dials", FL_DIALS, 0, 0, G, "", "DIALS convention"},
    {"-fdet_vector", FL_FDET_VECTOR, 3, 3, G, "X Y Z", "fast-axis unit vector (selects the custom convention)"},
    {"-sdet_vector", FL_SDET_VECTOR, 3, 3, G, "X Y Z", "slow-axis unit vector (custom)"},
    {"-odet_vector", FL_ODET_VECTOR, 3, 3, G, "X Y Z", "detector normal (custom)"},
    {"-beam_vector", FL_BEAM_VECTOR, 3, 3, G, "X Y Z", "beam direction (custom)"},
    {"-polar_vector", FL_POLAR_VECTOR, 3, 3, G, "X Y Z", "E-vector of the incident beam (custom)"},
    {"-spindle_axis", FL_SPINDLE_AXIS, 3, 3, G, "X Y Z", "phi rotation axis (custom)"},
    {"-twotheta_axis", FL_TWOTHETA_AXIS, 3, 3, G, "X Y Z", "detector two-theta axis (custom; also sets -twotheta to X degrees, as the reference does)"},
    {"-pix0_vector", FL_PIX0_VECTOR, 3, 3, G, "X Y Z", "accepted for compatibility: selects the custom convention, values ignored (as in the reference)"},
    {"-pix0_vector_mm", FL_PIX0_VECTOR, 3, 3, G, "X Y Z", NULL},
    {"-detector_rotx", FL_ROTX, 1, 1, G, "DEG", "detector rotation about x"},
    {"-detector_roty", FL_ROTY, 1, 1, G, "DEG", "detector rotation about y"},
    {"-detector_rotz", FL_ROTZ, 1, 1, G, "DEG", "detector rotation about z"},
    {"-twotheta", FL_TWOTHETA, 1, 1, G, "DEG", "detector two-theta swing"},
    {"-curved_det", FL_CURVED_DET, 0, 1, G, "", "curved detector: every pixel at the same distance"},
    {"-point_pixel", FL_POINT_PIXEL, 0, 0, G, "", "solid angle 1/R^2, no obliquity"},
    {"-detector_abs", FL_DETECTOR_ABS, 1, 1, G, "UM|inf", "sensor attenuation depth (inf or 0: no absorption)"},
    {"-detector_absorb", FL_DETECTOR_ABS, 1, 1, G, "UM|inf", NULL},
    {"-detector_thick", FL_DETECTOR_THICK, 1, 1, G, "UM", "sensor thickness"},
    {"-detector_material", FL_DETECTOR_MATERIAL, 1, 1, G, "Si|CdTe|GaAs",
     "sensor material: its attenuation at the beam's wavelength, as dxtbx computes it (needs -detector_thick; not with -detector_abs)"},
    {"-detector_thicksteps", FL_THICKSTEPS, 1, 1, G, "N", "sensor layers"},
    {"-thicksteps", FL_THICKSTEPS, 1, 1, G, "N", NULL},
    {"-oversample", FL_OVERSAMPLE, 1, 1, G, "N", "sub-pixels per pixel edge (default: auto from crystal size)"},
    {"-oversample_thick", FL_OVERSAMPLE_THICK, 0, 0, G, "", "recompute absorption per sub-pixel"},
    {"-oversample_polar", FL_OVERSAMPLE_POLAR, 0, 0, G, "", "recompute polarization per sub-pixel"},
    {"-oversample_omega", FL_OVERSAMPLE_OMEGA, 0, 0, G, "", "recompute solid angle per sub-pixel"},
    {"-roi", FL_ROI, 4, 4, G, "XMIN XMAX YMIN YMAX", "render only this pixel rectangle (inclusive)"},
    /* beam */
    {"-lambda", FL_LAMBDA, 1, 1, G, "A", "wavelength (default 1)"},
    {"-wavelength", FL_LAMBDA, 1, 1, G, "A", NULL},
    {"-wave", FL_LAMBDA, 1, 1, G, "A", NULL},
    {"-energy", FL_ENERGY, 1, 1, G, "EV", "photon energy instead of -lambda"},
    {"-dispersion", FL_DISPERSION, 1, 1, G, "PERCENT", "spectral width delta-lambda/lambda"},
    {"-dispsteps", FL_DISPSTEPS, 1, 1, G, "N", "wavelengths across the dispersion"},
    {"-divergence", FL_DIVERGENCE, 1, 1, G, "MRAD", "beam divergence, both directions"},
    {"-hdivrange", FL_HDIVRANGE, 1, 1, G, "MRAD", "horizontal divergence"},
    {"-vdivrange", FL_VDIVRANGE, 1, 1, G, "MRAD", "vertical divergence"},
    {"-hdivstep", FL_HDIVSTEP, 1, 1, G, "MRAD", "horizontal divergence step"},
    {"-vdivstep", FL_VDIVSTEP, 1, 1, G, "MRAD", "vertical divergence step"},
    {"-hdivsteps", FL_HDIVSTEPS, 1, 1, G, "N", "horizontal divergence points"},
    {"-vdivsteps", FL_VDIVSTEPS, 1, 1, G, "N", "vertical divergence points"},
    {"-divsteps", FL_DIVSTEPS, 1, 1, G, "N", "divergence points, both directions"},
    {"-round_div", FL_ROUND_DIV, 0, 0, G, "", "trim the divergence grid to an ellipse (default)"},
    {"-square_div", FL_SQUARE_DIV, 0, 0, G, "", "full rectangular divergence grid"},
    {"-sourcefile", FL_SOURCEFILE, 1, 1, G, "FILE", "sources as text columns X Y Z weight lambda"},
    {"-polar", FL_POLAR, 1, 1, G, "K", "Kahn polarization factor (default 0)"},
    {"-nopolar", FL_NOPOLAR, 0, 0, G, "", "no polarization correction"},
    {"-fluence", FL_FLUENCE, 1, 1, G, "PH/M2", "integrated incident photons per m^2 (default 1.2593e29)"},
    {"-flux", FL_FLUX, 1, 1, G, "PH/S", "flux; with -exposure and -beamsize sets the fluence"},
    {"-exposure", FL_EXPOSURE, 1, 1, G, "S", "exposure time (default 1)"},
    {"-beamsize", FL_BEAMSIZE, 1, 1, G, "MM", "beam size (default 0.1)"},
    {"-coherent", FL_COHERENT, 0, 0, G, "", "accepted for compatibility; has no effect (as in the reference)"},
    /* sampling */
    {"-phi", FL_PHI, 1, 1, G, "DEG", "starting spindle angle"},
    {"-osc", FL_OSC, 1, 1, G, "DEG", "oscillation range"},
    {"-phistep", FL_PHISTEP, 1, 1, G, "DEG", "spindle step"},
    {"-phisteps", FL_PHISTEPS, 1, 1, G, "N", "spindle steps across the oscillation"},
    {"-nframes", FL_NFRAMES, 1, 1, G, "N", "a rotation series: N frames, frame i from phi + i osc to phi + (i+1) osc (nb extension)"},
    {"-stills", FL_STILLS, 0, 0, G, "", "the -nframes frames are stills: each shot a uniformly random orientation from -misset_seed and its frame number, no rotation (nb extension)"},
    {"-stills_bandwidth", FL_STILLS_BANDWIDTH, 1, 1, G, "PCT", "stills: a random SASE spectrum per shot, spikes under a Gaussian envelope of this FWHM (percent)"},
    {"-stills_spikes", FL_STILLS_SPIKES, 1, 1, G, "K", "stills: spikes per shot's spectrum (default 10 with -stills_bandwidth)"},
    {"-stills_N", FL_STILLS_N, 1, 1, G, "A:B", "stills: unit cells per side of each shot's crystal, a whole number drawn from A..B"},
    {"-stills_fluence", FL_STILLS_FLUENCE, 1, 1, G, "A:B", "stills: each shot's fluence (photons/m^2) drawn uniformly from A..B"},
    {"-dmin", FL_DMIN, 1, 1, G | H, "A", "resolution limit (nb-sim: no scattering beyond it; nb-hkl -model: F to it)"},
    {"-interpolate", FL_INTERPOLATE, 0, 0, G, "", "tricubic interpolation of F between Bragg points"},
    {"-nointerpolate", FL_NOINTERPOLATE, 0, 0, G, "", "nearest-neighbour F only"},
    {"-stol", FL_STOL, 1, 1, G, "FILE", "accepted for compatibility: the table is checked, then unused (as in the reference)"},
    {"-4stol", FL_STOL, 1, 1, G, "FILE", NULL},
    {"-Q", FL_STOL, 1, 1, G, "FILE", NULL},
    {"-stolout", FL_STOLOUT, 1, 1, G, "FILE", "accepted for compatibility; nothing is written (as in the reference)"},
    /* structure factors: nb-hkl */
    {"-hkl", FL_HKL, 1, 1, G | H, "FILE", "structure factors: 'h k l F' text lines, MTZ or mmCIF"},
    {"-default_F", FL_DEFAULT_F, 1, 1, G | H, "F", "F for reflections not in the table (default 0)"},
    {"-dump", FL_DUMP, 1, 1, G | H, "FILE", "binary F cache (Fdump.bin layout): written with -hkl, read without"},
    {"-dumpfile", FL_DUMP, 1, 1, G | H, "FILE", NULL},
    /* kernel: nb-sim */
    {"-printout", FL_PRINTOUT, 0, 0, G | SM, "", "print per-pixel diagnostics on stderr"},
    {"-printout_pixel", FL_PRINTOUT_PIXEL, 2, 2, G | SM, "F S", "print diagnostics for this pixel only"},
    {"-progress", FL_PROGRESS, 0, 0, G | SM, "", "progress bar on a terminal (default)"},
    {"-noprogress", FL_NOPROGRESS, 0, 0, G | SM, "", "no progress bar"},
    {"-precision", FL_PRECISION, 1, 1, G | SM | NB_FIT, "single|double", "kernel arithmetic: fast single, or reference-faithful double"},
    /* noise: nb-noise */
    {"-seed", FL_SEED, 1, 1, G | NZ, "N", "noise seed (default: the plan's, from the time)"},
    {"-nonoise", FL_NONOISE, 0, 0, G | NZ, "", "do not make detector counts (nb-noise passes images through)"},
    {"-adc", FL_ADC, 1, 1, G | NZ | CV, "COUNTS", "offset added to integer images (default 40)"},
    {"-flicker", FL_FLICKER, 1, 1, NZ, "FRACTION", "source intensity noise: photons x (1 + F x gaussian)"},
    {"-calibration", FL_CALIBRATION, 1, 1, NZ, "FRACTION", "static per-pixel calibration error (noisify's default is 0.03; here 0)"},
    {"-calib_seed", FL_CALIB_SEED, 1, 1, NZ, "N", "seed of the calibration error (default 123456789; as in noisify, -seed also changes it)"},
    {"-readout", FL_READOUT, 1, 1, NZ, "ADU", "Gaussian read-out noise added after the gain"},
    {"-readnoise", FL_READOUT, 1, 1, NZ, "ADU", NULL},
    {"-gain", FL_GAIN, 1, 1, NZ, "ADU/PHOTON", "detector units per photon (default 1)"},
    {"-psf", FL_PSF, 1, 1, NZ, "gauss|fiber", "point-spread function applied to the Poisson image"},
    {"-psf_fwhm", FL_PSF_FWHM, 1, 1, NZ, "UM", "PSF full width at half maximum (default 46)"},
    {"-psf_size", FL_PSF_FWHM, 1, 1, NZ, "UM", NULL},
    {"-psf_width", FL_PSF_FWHM, 1, 1, NZ, "UM", NULL},
    {"-psf_radius", FL_PSF_RADIUS, 1, 1, NZ, "PIXELS", "PSF rendering radius (default 0: automatic)"},
    {"-bits", FL_BITS, 1, 1, NZ, "16|32", "counter depth: overload at 65535 or 2147483647 (default 16)"},
    {"-scale", FL_PHOTON_SCALE, 1, 1, NZ, "X", "multiply the photons by X before counting (with -fluence: x fluence r_e^2)"},
    {"-fluence", FL_NOISE_FLUENCE, 1, 1, NZ, "PH/M2", "rescale photons from the plan's fluence to this one before counting"},
    /* outputs: nb-convert */
    {"-floatfile", FL_FLOATFILE, 1, 1, G | CV, "FILE", "raw float32 image of photons/pixel"},
    {"-noisefile", FL_NOISEFILE, 1, 1, G | CV, "FILE", "SMV image of the detector counts (nb-noise); noiseimage.img in the drop-in"},
    {"-noiseimage", FL_NOISEFILE, 1, 1, G | CV, "FILE", NULL},
    {"-floatimage", FL_FLOATFILE, 1, 1, G | CV, "FILE", NULL},
    {"-intfile", FL_INTFILE, 1, 1, G | CV, "FILE", "noiseless SMV image"},
    {"-intimage", FL_INTFILE, 1, 1, G | CV, "FILE", NULL},
    {"-pgmfile", FL_PGMFILE, 1, 1, G | CV, "FILE", "8-bit PGM preview"},
    {"-pgmimage", FL_PGMFILE, 1, 1, G | CV, "FILE", NULL},
    {"-pgmscale", FL_PGMSCALE, 1, 1, G | CV, "X", "PGM scale (default: auto)"},
    {"-nopgm", FL_NOPGM, 0, 0, G | CV, "", "do not write the PGM preview"},
    {"-scale", FL_SCALE, 1, 1, G | CV, "X", "int-image scale (default: 55000/max)"},
};

static const int table_len = (int)(sizeof table / sizeof table[0]);

const nb_flag *nb_flag_lookup(const char *arg)
{
    for (int i = 0; i < table_len; i++)
        if (strcmp(arg, table[i].name) == 0) return &table[i];
    return NULL;
}

const nb_flag *nb_flag_lookup_for(const char *arg, unsigned tool)
{
    const nb_flag *any = NULL;
    for (int i = 0; i < table_len; i++)
        if (strcmp(arg, table[i].name) == 0) {
            if (table[i].owners & tool) return &table[i];
            if (!any) any = &table[i];
        }
    return any;
}

const nb_flag *nb_flag_table(int *n)
{
    *n = table_len;
    return table;
}

const char *nb_flag_canonical(int id)
{
    for (int i = 0; i < table_len; i++)
        if (table[i].id == id) return table[i].name;
    return "?";
}

const char *nb_owner_tool(unsigned owner_bit)
{
    switch (owner_bit) {
    case NB_GEOM: return "nb-geom";
    case NB_HKL: return "nb-hkl";
    case NB_SIM: return "nb-sim";
    case NB_NOISE: return "nb-noise";
    case NB_CONVERT: return "nb-convert";
    case NB_BENCH: return "nb-bench";
    case NB_FIT: return "nb-fit";
    case NB_MATH: return "nb-math";
    case NB_AMORPHOUS: return "nb-amorphous";
    }
    return "?";
}

/* Levenshtein distance, for "did you mean" (short strings only). */
static int edit_distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 40 || lb > 40) return 99;
    int d[41][41];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

nb_status nb_flag_reject(const char *arg, unsigned this_tool)
{
    const nb_flag *f = nb_flag_lookup(arg);
    if (f) {
        /* name the downstream owner (nb-geom accepts nearly everything) */
        unsigned owners = 0;
        for (int i = 0; i < table_len; i++)
            if (strcmp(arg, table[i].name) == 0) owners |= table[i].owners;
        owners &= ~(unsigned)this_tool;
        unsigned pick = owners & ~(unsigned)NB_GEOM ? owners & ~(unsigned)NB_GEOM : owners;
        char tools[128] = "";
        for (unsigned bit = 1; bit <= NB_AMORPHOUS; bit <<= 1)
            if (pick & bit) {
                if (tools[0]) strcat(tools, " or ");
                strcat(tools, nb_owner_tool(bit));
            }
        return nb_error_set(NB_ERR_USAGE, "option '%s' belongs to %s, not %s", arg, tools, nb_tool_name());
    }
    return nb_flag_unknown(arg, this_tool);
}

nb_status nb_flag_unknown(const char *arg, unsigned this_tool)
{
    if (arg[0] != '-') return nb_error_set(NB_ERR_USAGE, "unexpected argument '%s'", arg);
    /* suggest the closest spelling this tool accepts */
    const char *best = NULL;
    int bestd = 99;
    for (int i = 0; i < table_len; i++) {
        if (!(table[i].owners & this_tool)) continue;
        int d = edit_distance(arg, table[i].name);
        size_t la = strlen(arg);
        if (strncmp(table[i].name, arg, la) == 0 && la >= 3) d = 1; /* a prefix of a real flag */
        if (d < bestd) {
            bestd = d;
            best = table[i].name;
        }
    }
    if (best && bestd <= 2)
        return nb_error_set(NB_ERR_USAGE, "unknown option '%s' (did you mean %s?)", arg, best);
    return nb_error_set(NB_ERR_USAGE, "unknown option '%s'", arg);
}

static int looks_like_value(const char *s)
{
    /* a following argument is a value unless it is a flag; negative numbers
     * are values */
    if (s[0] != '-') return 1;
    return (s[1] >= '0' && s[1] <= '9') || s[1] == '.';
}

nb_status nb_flag_collect(const nb_flag *f, int argc, char **argv, int i, int *nargs)
{
    int avail = argc - i - 1;
    *nargs = 0;
    switch (f->id) {
    case FL_CELL: {
        /* up to six values, stopping at the next argument starting with '-' */
        int n = 0;
        while (n < 6 && n < avail && argv[i + 1 + n][0] != '-') n++;
        if (n == 0) return nb_error_set(NB_ERR_USAGE, "option %s needs at least one value (A [B C AL BE GA])", f->name);
        *nargs = n;
        return NB_OK;
    }
    case FL_MISSET:
        if (avail >= 1 && strstr(argv[i + 1], "rand")) {
            *nargs = 1;
            return NB_OK;
        }
        if (avail < 3) return nb_error_set(NB_ERR_USAGE, "option %s needs three angles or 'random'", f->name);
        *nargs = 3;
        return NB_OK;
    case FL_CURVED_DET:
        /* the reference wants (and ignores) one following argument */
        if (avail >= 1 && looks_like_value(argv[i + 1])) *nargs = 1;
        return NB_OK;
    default:
        if (avail < f->min_args) {
            if (f->min_args == 1)
                return nb_error_set(NB_ERR_USAGE, "option %s needs a value (%s)", f->name, f->metavar);
            return nb_error_set(NB_ERR_USAGE, "option %s needs %d values (%s)", f->name, f->min_args, f->metavar);
        }
        *nargs = f->min_args;
        return NB_OK;
    }
}

/* ---- option tables: the typed handlers ----------------------------------------- */

const nb_opt *nb_opt_row(const nb_opt_table *t, int id)
{
    for (int i = 0; i < t->nrows; i++)
        if (t->rows[i].id == id) return &t->rows[i];
    return NULL;
}

/* the destination field of NB_AT(...) `at` in `dest` */
static void *field(void *dest, size_t at)
{
    return (char *)dest + (at - 1);
}

nb_status nb_opt_number(const nb_opt *row, const char *name, const char *val, double *x)
{
    char what[80];
    snprintf(what, sizeof what, "option %s", name);
    nb_status st = nb_parse_double(val, x, what);
    if (st) return st;
    /* the reference divides by a distance or a wavelength: zero is no value */
    if (row->check == NB_CHECK_POSITIVE && !(*x > 0.0))
        return nb_error_set(NB_ERR_USAGE, "option %s: must be positive, got %s", name, val);
    if (row->check == NB_CHECK_NONNEG && *x < 0)
        return nb_error_set(NB_ERR_USAGE, "option %s: must not be negative (%s)", name, val);
    return NB_OK;
}

/* An integer value: an int's range, or a long's (the seeds). */
static nb_status parse_int(const char *name, const char *val, long *out, int fits_int)
{
    char what[80];
    snprintf(what, sizeof what, "option %s", name);
    if (!fits_int) return nb_parse_long(val, out, what);
    int n;
    nb_status st = nb_parse_int(val, &n, what);
    if (!st) *out = n;
    return st;
}

static nb_status apply_choice(const nb_opt *row, void *dest, const char *name, const char *val)
{
    for (const nb_opt_choice *c = row->choices; c->word; c++)
        if (!strcmp(val, c->word)) {
            for (int k = 0; k < NB_OPT_MAX_AT && row->at[k]; k++) *(int *)field(dest, row->at[k]) = c->value;
            return NB_OK;
        }
    return nb_error_set(NB_ERR_USAGE, "option %s: expected %s, got '%s'", name, row->expected, val);
}

/* The value types that store one value into every destination. */
static nb_status apply_scalar(const nb_opt *row, void *dest, const char *name, const char *val)
{
    nb_status st;
    double x = 0;
    long n = 0;
    if (row->type == NB_OPT_DOUBLE) {
        if ((st = nb_opt_number(row, name, val, &x))) return st;
        if (row->convert) x = row->convert(x);
    } else if ((st = parse_int(name, val, &n, row->type != NB_OPT_SEED))) {
        return st;
    }
    for (int k = 0; k < NB_OPT_MAX_AT && row->at[k]; k++) {
        void *p = field(dest, row->at[k]);
        switch (row->type) {
        case NB_OPT_DOUBLE: *(double *)p = x; break;
        case NB_OPT_INT: *(int *)p = (int)n; break;
        case NB_OPT_SEED: *(int64_t *)p = -(int64_t)n; break;
        default: break;
        }
    }
    return NB_OK;
}

/* The value types that store several values, the k-th into destination k
 * (NB_OPT_INTS), or three into one array (NB_OPT_VEC3). */
static nb_status apply_several(const nb_opt *row, void *dest, const char *name, char **vals, int nvals)
{
    nb_status st;
    if (row->type == NB_OPT_VEC3) {
        double *v = field(dest, row->at[0]);
        char what[80];
        snprintf(what, sizeof what, "option %s", name);
        for (int k = 0; k < 3; k++)
            if ((st = nb_parse_double(vals[k], &v[k], what))) return st;
        return NB_OK;
    }
    long n[NB_OPT_MAX_AT];
    if (nvals > NB_OPT_MAX_AT) return nb_error_set(NB_ERR_USAGE, "option %s: too many values", name);
    for (int k = 0; k < nvals; k++)
        if ((st = parse_int(name, vals[k], &n[k], 1))) return st;
    for (int k = 0; k < nvals && row->at[k]; k++) *(int *)field(dest, row->at[k]) = (int)n[k];
    return NB_OK;
}

nb_status nb_opt_apply(const nb_opt *row, void *dest, const char *name, char **vals, int nvals)
{
    nb_status st = NB_OK;
    switch (row->type) {
    case NB_OPT_SET: break;
    case NB_OPT_DOUBLE:
    case NB_OPT_INT:
    case NB_OPT_SEED: st = apply_scalar(row, dest, name, vals[0]); break;
    case NB_OPT_STRING: *(const char **)field(dest, row->at[0]) = vals[0]; break;
    case NB_OPT_STRDUP: {
        char **p = field(dest, row->at[0]);
        free(*p);
        *p = nb_xstrdup(vals[0]);
        break;
    }
    case NB_OPT_VEC3:
    case NB_OPT_INTS: st = apply_several(row, dest, name, vals, nvals); break;
    case NB_OPT_CHOICE: st = apply_choice(row, dest, name, vals[0]); break;
    case NB_OPT_CALLBACK: {
        const nb_opt_args a = {row, name, vals, nvals, dest};
        st = row->fn(&a);
        break;
    }
    }
    if (st) return st;
    for (int k = 0; k < NB_OPT_MAX_SETS && row->sets[k].at; k++) *(int *)field(dest, row->sets[k].at) = row->sets[k].value;
    return NB_OK;
}

/* ---- the one command-line loop -------------------------------------------------- */

/* The table's row with this spelling of its own, or NULL. */
static const nb_opt *local_row(const nb_opt_table *t, const char *arg)
{
    for (int i = 0; i < t->nrows; i++)
        if (t->rows[i].name && !strcmp(t->rows[i].name, arg)) return &t->rows[i];
    return NULL;
}

/* What argv[i] is: the row that reads it and its values (*row set), a
 * standard option the hook took, or the input stream (*row NULL). */
static nb_status recognise(const nb_opt_table *t, int argc, char **argv, int *i, const nb_opts_hooks *h,
                           int *ninputs, const nb_opt **row, int *nvals)
{
    const char *arg = argv[*i];
    nb_status st = NB_OK;
    *row = local_row(t, arg);
    *nvals = 0;
    if (*row) {
        if ((*row)->nargs && *i + (*row)->nargs >= argc)
            return (*row)->needs ? nb_error_set(NB_ERR_USAGE, "option %s needs %s", arg, (*row)->needs)
                                 : nb_error_set(NB_ERR_USAGE, "option %s needs a value (%s)", arg, (*row)->metavar);
        *nvals = (*row)->nargs;
        return NB_OK;
    }
    if (h && h->tool_option && h->tool_option(h->ctx, argc, argv, i, &st)) return st;
    const nb_flag *f = t->owner ? nb_flag_lookup_for(arg, t->owner) : NULL;
    if (!f && h && h->input && (arg[0] != '-' || !strcmp(arg, "-"))) {
        if ((*ninputs)++) return nb_error_set(NB_ERR_USAGE, "only one input stream, got '%s' too", arg);
        *h->input = arg;
        return NB_OK;
    }
    if (!t->owner) return nb_flag_unknown(arg, 0);
    if (!f || !(f->owners & t->owner)) return nb_flag_reject(arg, t->owner);
    if (!(*row = nb_opt_row(t, f->id)))
        return nb_error_set(NB_ERR_USAGE, "option %s is not handled by %s", arg, nb_tool_name());
    return nb_flag_collect(f, argc, argv, *i, nvals);
}

/* Both loops: apply each flag as it comes (dest), or record it (out). */
static nb_status walk(const nb_opt_table *t, int argc, char **argv, const nb_opts_hooks *h, void *dest,
                      nb_scanned_args *out)
{
    int ninputs = 0;
    for (int i = 0; i < argc; i++) {
        const nb_opt *row;
        int nvals;
        nb_status st = recognise(t, argc, argv, &i, h, &ninputs, &row, &nvals);
        if (st) return st;
        if (!row) continue;
        if (out) out->flags[out->count++] = (struct nb_scanned_flag){row, row->id, i, nvals};
        else if ((st = nb_opt_apply(row, dest, argv[i], argv + i + 1, nvals))) return st;
        i += nvals;
    }
    return NB_OK;
}

nb_status nb_opts_parse(const nb_opt_table *t, int argc, char **argv, const nb_opts_hooks *hooks, void *dest)
{
    return walk(t, argc, argv, hooks, dest, NULL);
}

nb_status nb_opts_scan(const nb_opt_table *t, int argc, char **argv, const nb_opts_hooks *hooks,
                       nb_scanned_args *out)
{
    memset(out, 0, sizeof *out);
    out->argc = argc;
    out->argv = argv;
    nb_status st = nb_calloc((void **)&out->flags, (size_t)argc + 1, sizeof *out->flags, "the flag list");
    if (!st) st = walk(t, argc, argv, hooks, NULL, out);
    if (st) nb_scanned_args_free(out);
    return st;
}

void nb_scanned_args_free(nb_scanned_args *args)
{
    free(args->flags);
    memset(args, 0, sizeof *args);
}
