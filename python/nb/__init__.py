"""nb - nanoBragg's diffraction images from Python, with their derivatives.

The engine of the nb tools (libnb.so) over numpy arrays: a plan made from
nb-geom's flags, a stream or a DIALS experiment list; its named parameters
read and set; a frame rendered on the CPU or a GPU, in the fast single path
or the reference-faithful double one, into arrays the engine writes without
a copy; the derivatives of a frame by name, and their vector-Jacobian
product; detector counts (nb-noise's chain); image files read and written
in the tools' formats; and the fit of named parameters to images in memory.
nb.torch makes a render a torch.autograd.Function.

    import nb
    r = nb.Renderer(["-cell", 100, 100, 100, 90, 90, 90, "-lambda", 6.2, "-N", 5,
                     "-detpixels", 256, "-default_F", 100], threads=2)
    photons = r.render()                      # float32, (panels, slow, fast)
    image, d = r.derivatives(["distance", "Xbeam"])
    r["distance"] = 101.0                     # the plan moved, in mm

Errors of the engine raise nb.NbError (UsageError, a ValueError, for a bad
argument; FileError, an OSError; DataError; UnsupportedError) carrying its
message; arguments that never reach it (a wrong shape, dtype or a
non-contiguous array, a value that is not finite) raise ValueError or
TypeError naming the argument.  Every call into the engine releases the GIL
(ctypes does), so renders on separate renderers run in parallel threads; one
renderer serialises its own calls.

The library: $NB_LIBRARY, else the one `make install` put beside this
package, else the build tree's, else pkg-config's and the loader's (see
nb._lib).  From a build tree: PYTHONPATH=/path/to/nb/python.
"""
import ctypes
import math
import numbers
import shlex
import threading

import numpy as np

from . import _lib
from ._lib import DataError, FileError, NbError, UnsupportedError, UsageError

__all__ = ["Renderer", "Image", "FitOutcome", "NbError", "UsageError", "FileError", "DataError", "UnsupportedError",
           "parameter_names", "parameter_unit", "plan_stream", "read_image", "write_image", "noise_image",
           "set_log_level", "library_version"]

_lib_ = _lib.lib
__version__ = _lib_.nb_version().decode()

_DEVICES = ("cpu", "cuda", "auto")
_PRECISIONS = ("plan", "fast", "double")


def library_version():
    """libnb's version string ("0.2.0")."""
    return _lib_.nb_version().decode()


def set_log_level(level):
    """-1: no warnings; 0: warnings (the default); 1: the tools' -v lines too (on standard error)."""
    _lib_.nb_set_log_level(_int_arg("level", level))


def parameter_names():
    """The named parameters (docs/physics.md 14): a panel's written panel<i>_shift_fast and so on."""
    return [_lib_.nb_parameter_name(i).decode() for i in range(_lib_.nb_parameter_count())]


def parameter_unit(name):
    """A parameter's unit ("mm", "degree", ...); UsageError for an unknown name."""
    unit = _lib_.nb_parameter_unit(_lib.encode(_name_arg("name", name)))
    if unit is None:
        raise UsageError(_lib.USAGE, _lib.last_error())
    return unit.decode()


def plan_stream(flags):
    """nb-geom's stream (PLAN record and END) for its flags, as bytes: what `nb-geom FLAGS` writes."""
    argc, argv = _lib.argv(_flags_arg(flags))
    data, size = ctypes.c_void_p(), ctypes.c_size_t()
    _lib.check(_lib_.nb_plan_stream_from_args(argc, argv, ctypes.byref(data), ctypes.byref(size)))
    try:
        return ctypes.string_at(data, size.value)
    finally:
        _lib_.nb_free(data)


# ---- argument checks: errors that name the argument -----------------------------------------

def _int_arg(what, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s: expected an integer, got %r" % (what, value))
    return int(value)


def _real_arg(what, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        try:
            value = float(value)  # a 0-d array or tensor
        except (TypeError, ValueError):
            raise TypeError("%s: expected a number, got %r" % (what, value)) from None
    value = float(value)
    if not math.isfinite(value):
        raise ValueError("%s: %r is not a finite number" % (what, value))
    return value


def _name_arg(what, name):
    if not isinstance(name, str):
        raise TypeError("%s: expected a parameter name (a str), got %r" % (what, name))
    return name


def _names_arg(names):
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",")]
    names = list(names)
    if not names:
        raise ValueError("names: no parameter named")
    for n in names:
        _name_arg("names", n)
    return names


def _flags_arg(flags):
    if isinstance(flags, str):
        return shlex.split(flags)
    out = []
    for f in flags:
        if isinstance(f, (str, numbers.Real)) and not isinstance(f, bool):
            out.append(str(f))
        else:
            raise TypeError("flags: %r is not a string or a number" % (f,))
    return out


def _choice_arg(what, value, choices):
    if value not in choices:
        raise ValueError("%s: %r is not one of %s" % (what, value, ", ".join(choices)))
    return value


def _array_arg(what, array, dtype, size, writeable=False):
    """array as the engine takes it: an ndarray of dtype, C-contiguous, of `size` elements (any shape)."""
    if not isinstance(array, np.ndarray):
        raise TypeError("%s: expected a numpy array, got %s" % (what, type(array).__name__))
    if array.dtype != dtype:
        raise TypeError("%s: dtype %s, expected %s" % (what, array.dtype, np.dtype(dtype)))
    if not array.flags.c_contiguous:
        raise ValueError("%s: not C-contiguous (np.ascontiguousarray makes it so)" % what)
    if writeable and not array.flags.writeable:
        raise ValueError("%s: read-only" % what)
    if array.size != size:
        raise ValueError("%s: %d elements, expected %d (shape %s)" % (what, array.size, size, array.shape))
    return array


def _finite_arg(what, array):
    bad = ~np.isfinite(array)
    if bad.any():
        raise ValueError("%s: not a finite number at index %s" % (what, np.unravel_index(int(np.argmax(bad)),
                                                                                          array.shape)))
    return array


def _ptr(array):
    return array.ctypes.data_as(ctypes.c_void_p)


class Renderer:
    """A plan and its structure factors, rendered by libnb (nb.h's nb_renderer).

    Renderer(flags): nb-geom's flags (a list of strings and numbers, or one
    string split as a shell would), with nanoBragg's spellings, units and
    defaults: -cell, -misset, -lambda, -N, -distance, -detpixels,
    -default_F, -expt FILE, -panels FILE ...  Renderer.from_stream(bytes)
    takes an nb stream (nb-geom's, with nb-hkl's HKL record after the plan);
    Renderer.from_expt(path, *flags) a DIALS experiment list.

    device: "cpu", "cuda" or "auto"; precision: "plan" (the plan's: the fast
    single path unless it says -precision double), "fast" or "double" (the
    reference-faithful path); threads: the CPU's OpenMP threads (0: OpenMP's
    default).  Each can be changed later by setting the attribute.
    """

    def __init__(self, flags=(), *, stream=None, device="cpu", precision="plan", threads=0):
        self._ptr = None
        self._lock = threading.RLock()
        self._grad_names = None
        self._given = {}  # name -> the value set() last gave it
        self._weights_buffer = np.empty(0, dtype=np.float64)  # nb.torch's backward: _kept_weights
        self._device = _choice_arg("device", device, _DEVICES)
        self._precision = _choice_arg("precision", precision, _PRECISIONS)
        self._threads = _int_arg("threads", threads)
        if self._threads < 0:
            raise ValueError("threads: %d is negative" % self._threads)
        options = self._options()
        out = ctypes.c_void_p()
        if stream is not None:
            if flags:
                raise ValueError("give flags or a stream, not both")
            data = bytes(stream)
            _lib.check(_lib_.nb_renderer_from_stream_opts(data, len(data), options.ptr, ctypes.byref(out)))
        else:
            argc, argv = _lib.argv(_flags_arg(flags))
            _lib.check(_lib_.nb_renderer_from_args(argc, argv, options.ptr, ctypes.byref(out)))
        self._ptr = out
        self._panel_shapes = []
        for i in range(_lib_.nb_renderer_panels(out)):
            fast, slow = ctypes.c_int(), ctypes.c_int()
            _lib.check(_lib_.nb_renderer_panel_size(out, i, ctypes.byref(fast), ctypes.byref(slow)))
            self._panel_shapes.append((slow.value, fast.value))

    @classmethod
    def from_stream(cls, data, **options):
        """A renderer from an nb stream's bytes: its first PLAN record and the HKL record after it."""
        return cls(stream=data, **options)

    @classmethod
    def from_expt(cls, path, *flags, **options):
        """A renderer from a DIALS experiment list (nb-geom -expt PATH) and more of nb-geom's flags."""
        return cls(["-expt", str(path)] + _flags_arg(list(flags)), **options)

    def _options(self):
        return _lib.Options(_lib.OPTIONS_RENDER, {"device": self._device, "precision": self._precision,
                                                   "threads": self._threads})

    def close(self):
        """Free the engine's renderer (also done when the object goes)."""
        with self._lock:
            if self._ptr:
                _lib_.nb_renderer_free(self._ptr)
                self._ptr = None

    def __del__(self):
        if getattr(self, "_ptr", None):
            _lib_.nb_renderer_free(self._ptr)
            self._ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _handle(self):
        if not self._ptr:
            raise ValueError("the renderer is closed")
        return self._ptr

    # ---- settings ----------------------------------------------------------------------------

    def _set_options(self, device, precision, threads):
        with self._lock:
            old = (self._device, self._precision, self._threads)
            self._device, self._precision, self._threads = device, precision, threads
            try:
                options = self._options()  # kept alive through the call
                _lib.check(_lib_.nb_renderer_set_options(self._handle(), options.ptr))
            except Exception:
                self._device, self._precision, self._threads = old
                raise

    @property
    def device(self):
        """"cpu", "cuda" or "auto"."""
        return self._device

    @device.setter
    def device(self, value):
        self._set_options(_choice_arg("device", value, _DEVICES), self._precision, self._threads)

    @property
    def precision(self):
        """"plan", "fast" or "double": the path a float32 render takes (float64 renders take the double one)."""
        return self._precision

    @precision.setter
    def precision(self, value):
        self._set_options(self._device, _choice_arg("precision", value, _PRECISIONS), self._threads)

    @property
    def threads(self):
        """OpenMP threads of a CPU render (0: OpenMP's default)."""
        return self._threads

    @threads.setter
    def threads(self, value):
        value = _int_arg("threads", value)
        if value < 0:
            raise ValueError("threads: %d is negative" % value)
        self._set_options(self._device, self._precision, value)

    # ---- the plan's shape --------------------------------------------------------------------

    @property
    def frames(self):
        """The plan's frames (a rotation's or a series of stills')."""
        return _lib_.nb_renderer_frames(self._handle())

    @property
    def panels(self):
        return len(self._panel_shapes)

    @property
    def panel_shapes(self):
        """Each panel's (slow, fast) pixels."""
        return list(self._panel_shapes)

    @property
    def pixels(self):
        """Every panel's pixels together."""
        return int(_lib_.nb_renderer_pixels(self._handle()))

    @property
    def shape(self):
        """A frame's array: (panels, slow, fast); None when the panels differ in size (renders are then flat)."""
        if len(set(self._panel_shapes)) != 1:
            return None
        return (len(self._panel_shapes),) + self._panel_shapes[0]

    def _frame_arg(self, frame):
        return _int_arg("frame", frame)

    def _out(self, out, dtype):
        if out is None:
            return np.empty(self.shape or (self.pixels,), dtype=dtype)
        return _array_arg("out", out, dtype, self.pixels, writeable=True)

    def _shaped(self, array):
        return array.reshape(self.shape) if self.shape and array.ndim == 1 else array

    # ---- renders -----------------------------------------------------------------------------

    def render(self, frame=0, dtype=np.float32, out=None):
        """Frame `frame`'s photons per pixel, every panel: an array (panels, slow, fast), flat when the
        panels differ in size.

        float32: nb-sim's image, bit for bit, by the renderer's precision (the plan's, fast unless it
        says -precision double); float64: the reference-faithful double path's pixels before that
        rounding (on the CPU).  out: an array of that dtype to write into (C-contiguous, the frame's
        pixels), else a new one."""
        dtype = np.dtype(dtype)
        frame = self._frame_arg(frame)
        if dtype == np.float32:
            call = _lib_.nb_render_frame
        elif dtype == np.float64:
            call = _lib_.nb_render_frame_double
        else:
            raise TypeError("dtype: %s; expected float32 or float64" % dtype)
        out = self._out(out, dtype)
        with self._lock:
            _lib.check(call(self._handle(), frame, _ptr(out)))
        return out

    def render_panel(self, panel, frame=0):
        """One panel of a frame, float32 (slow, fast)."""
        panel = _int_arg("panel", panel)
        if not 0 <= panel < self.panels:
            raise ValueError("panel: %d, the detector has %d" % (panel, self.panels))
        out = np.empty(self._panel_shapes[panel], dtype=np.float32)
        with self._lock:
            _lib.check(_lib_.nb_render_panel(self._handle(), self._frame_arg(frame), panel, _ptr(out)))
        return out

    def _follow(self, names):
        names = _names_arg(names)
        if names != self._grad_names:
            _lib.check(_lib_.nb_renderer_set_derivatives(self._handle(), _lib.encode(",".join(names))))
            self._grad_names = names
        return names

    def derivatives(self, names, frame=0, dtype=np.float32):
        """Frame `frame`'s photons and their derivatives by name (a list, or one comma-separated string):
        (image, {name: d image / d name}), each array shaped as render's, in photons per the name's unit
        (parameter_unit).  float32: the renderer's precision (nb-sim --grad's); float64: the double path
        in double."""
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError("dtype: %s; expected float32 or float64" % dtype)
        frame = self._frame_arg(frame)
        with self._lock:
            names = self._follow(names)
            image = self._out(None, dtype)
            grads = [self._out(None, dtype) for _ in names]
            pointers = (ctypes.c_void_p * len(names))(*[g.ctypes.data for g in grads])
            call = _lib_.nb_render_frame_grad if dtype == np.float32 else _lib_.nb_render_frame_grad_double
            _lib.check(call(self._handle(), frame, _ptr(image), pointers))
        return image, dict(zip(names, grads))

    def vjp(self, weights, names, frame=0, dtype=np.float64):
        """The vector-Jacobian product of frame `frame`: {name: sum over pixels of weights x d photons /
        d name}, added in double by the engine with no image of derivatives kept.  weights: the frame's
        pixels (any shape of that size; float64 used as it is, else converted); dtype float64: the
        double path's derivatives; float32: the renderer's precision's (nb-sim --grad's). On the
        fast path on the CPU, from 5 names, it comes from one adjoint sweep whatever their number
        (docs/physics.md 14.5), equal to the derivatives' weighted sum to float's rounding."""
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError("dtype: %s; expected float32 or float64" % dtype)
        if not isinstance(weights, np.ndarray):
            raise TypeError("weights: expected a numpy array, got %s" % type(weights).__name__)
        weights = np.ascontiguousarray(weights, dtype=np.float64)
        _array_arg("weights", weights, np.float64, self.pixels)
        _finite_arg("weights", weights)
        return self._vjp(weights, names, frame, dtype)

    def _kept_weights(self, size):
        """A float64 array of size elements that this renderer keeps for the next call: nb.torch's
        backward converts grad_output into it, where a new array each time (tens of MB at 2048^2)
        cost more in page faults than the conversion."""
        if self._weights_buffer.size < size:
            self._weights_buffer = np.empty(size, dtype=np.float64)
        return self._weights_buffer[:size]

    def _vjp(self, weights, names, frame, dtype):
        """vjp with weights already a contiguous float64 array of the frame's size, not checked for
        NaN (nb.torch's backward: a NaN in grad_output gives NaN gradients, as torch's own do)."""
        frame = self._frame_arg(frame)
        precision = _lib.PRECISION_DOUBLE if dtype == np.float64 else _lib.PRECISION_PLAN
        with self._lock:
            names = self._follow(names)
            out = np.zeros(len(names), dtype=np.float64)
            _lib.check(_lib_.nb_render_frame_vjp(self._handle(), frame, precision, _ptr(weights), _ptr(out)))
        return dict(zip(names, out.tolist()))

    # ---- named parameters --------------------------------------------------------------------

    def get(self, name):
        """A parameter's value in the plan, in its unit; rot_*, scale and a panel's moves read 0, 1, 0."""
        value = ctypes.c_double()
        with self._lock:
            _lib.check(_lib_.nb_renderer_get_parameter(self._handle(), _lib.encode(_name_arg("name", name)),
                                                       ctypes.byref(value)))
        return value.value

    def set(self, name, value):
        """Move the plan: the parameter set to value (its unit); every later render is of the moved plan.
        Setting a name again to the value it was last set to does nothing (a turn set again from the
        turned plan would move it by rounding: nb.torch's backward sets what its forward set)."""
        value = _real_arg(name if isinstance(name, str) else "value", value)
        with self._lock:
            if self._given.get(name) == value:
                return
            self._given.pop(name, None)
            _lib.check(_lib_.nb_renderer_set_parameter(self._handle(), _lib.encode(_name_arg("name", name)), value))
            self._given[name] = value

    __getitem__ = get
    __setitem__ = set

    def parameters(self):
        """{name: value} of every parameter this plan has (each panel's moves by panel number)."""
        names = [n for n in parameter_names() if "<i>" not in n]
        names += [n.replace("<i>", str(i)) for i in range(self.panels) for n in parameter_names() if "<i>" in n]
        values = {}
        for n in names:
            try:
                values[n] = self.get(n)
            except UsageError:
                pass  # one this plan lacks: the mosaic of a plan without a spread
        return values

    def set_F(self, hkl, F):
        """Structure factors from arrays: hkl (n, 3) integers, F (n,) finite numbers, taken as P1 (no
        symmetry, no Friedel mates), every other index the plan's -default_F."""
        hkl = np.asarray(hkl)
        F = np.ascontiguousarray(F, dtype=np.float64)
        if hkl.ndim != 2 or hkl.shape[1] != 3:
            raise ValueError("hkl: shape %s, expected (n, 3)" % (hkl.shape,))
        if not np.issubdtype(hkl.dtype, np.integer):
            raise TypeError("hkl: dtype %s, expected integers" % hkl.dtype)
        if F.shape != (hkl.shape[0],):
            raise ValueError("F: shape %s, expected (%d,)" % (F.shape, hkl.shape[0]))
        _finite_arg("F", F)
        h, k, l = (np.ascontiguousarray(hkl[:, i], dtype=np.intc) for i in range(3))
        with self._lock:
            _lib.check(_lib_.nb_renderer_set_F(self._handle(), _ptr(h), _ptr(k), _ptr(l), _ptr(F), len(F)))

    # ---- detector counts ---------------------------------------------------------------------

    def noise(self, photons, frame=0, **options):
        """Detector counts (int32, photons' shape) of frame `frame` from its photons (float32, as render
        gives them): `nb-sim | nb-noise`'s counts, bit for bit.  options: nb-noise's (seed, adc, gain,
        scale, fluence, flicker, calibration, readout, psf, psf_fwhm, psf_radius, bits, rng)."""
        photons = _array_arg("photons", photons, np.float32, self.pixels)
        _finite_arg("photons", photons)
        counts = np.empty(photons.shape, dtype=np.int32)
        opts = _lib.Options(_lib.OPTIONS_NOISE, options)
        with self._lock:
            _lib.check(_lib_.nb_renderer_noise_frame(self._handle(), self._frame_arg(frame), _ptr(photons),
                                                     opts.ptr, _ptr(counts)))
        return counts

    # ---- the fit -----------------------------------------------------------------------------

    def fit(self, names, images, masks=None, gain=0.0, offset=0.0, overload=0.0, loss="poisson", iterations=50):
        """Refine named parameters, shared by every frame, from the plan to observed images (one per
        frame, each float32 of the frame's pixels): least squares, then (loss "poisson") the Poisson
        likelihood, on the analytic derivatives; libnb's fit (nb_fit_renderer).  gain > 0: the images
        are counts, photons = (pixel - offset) / gain, negative counts left out; a pixel at or above
        overload (0: none), masked (masks: one uint8 or bool array per frame, 0 left out) or not finite
        is left out.  The renderer's plan becomes the refined one.  Returns a FitOutcome."""
        names = _names_arg(names)
        if isinstance(images, np.ndarray):  # one frame, or every frame along the first axis
            images = [images] if images.size == self.pixels else list(images)
        images = list(images)
        if len(images) != self.frames:
            raise ValueError("images: %d, the plan has %d frames" % (len(images), self.frames))
        if masks is not None and len(masks) != len(images):
            raise ValueError("masks: %d, expected one per image (%d)" % (len(masks), len(images)))
        kept, c_images = [], (_lib.FitImage * len(images))()
        for i, image in enumerate(images):
            image = _array_arg("images[%d]" % i, image, np.float32, self.pixels)
            kept.append(image)
            c_images[i].pixels = image.ctypes.data_as(_lib.c_float_p)
            if masks is not None:
                mask = np.ascontiguousarray(masks[i]).view(np.uint8) if masks[i].dtype == bool else masks[i]
                mask = _array_arg("masks[%d]" % i, mask, np.uint8, self.pixels)
                kept.append(mask)
                c_images[i].mask = mask.ctypes.data_as(ctypes.POINTER(ctypes.c_ubyte))
            c_images[i].gain = _real_arg("gain", gain)
            c_images[i].offset = _real_arg("offset", offset)
            c_images[i].overload = _real_arg("overload", overload)
        settings = _lib.FitSettings()
        _lib_.nb_fit_settings_init(ctypes.byref(settings))
        settings.loss = {"poisson": 0, "lsq": 1}[_choice_arg("loss", loss, ("poisson", "lsq"))]
        settings.iterations = _int_arg("iterations", iterations)
        result = _lib.FitResult()
        result.size = ctypes.sizeof(result)
        values, sigmas = np.zeros(len(names)), np.zeros(len(names))
        argc, argv = _lib.argv(names)
        with self._lock:
            self._given.clear()  # the fit moves the plan
            _lib.check(_lib_.nb_fit_renderer(self._handle(), argv, argc, c_images, ctypes.byref(settings),
                                             _ptr(values), _ptr(sigmas), ctypes.byref(result)))
        return FitOutcome(dict(zip(names, values.tolist())), dict(zip(names, sigmas.tolist())), result.nll,
                          result.pixels, result.iterations, bool(result.converged))


class FitOutcome:
    """What Renderer.fit came to: values and sigmas by name (their units), -log L (or RSS/2), the pixels
    fitted, the last stage's iterations and whether it converged."""

    def __init__(self, values, sigmas, nll, pixels, iterations, converged):
        self.values, self.sigmas, self.nll = values, sigmas, nll
        self.pixels, self.iterations, self.converged = pixels, iterations, converged

    def __repr__(self):
        return "FitOutcome(values=%r, sigmas=%r, nll=%r, pixels=%d, iterations=%d, converged=%r)" % (
            self.values, self.sigmas, self.nll, self.pixels, self.iterations, self.converged)


# ---- image files ---------------------------------------------------------------------------------

class Image:
    """An image read from a file (read_image) or to write (write_image).

    data: photons (float32) or detector counts (float64, as stored: the offset included), shaped
    (height, width); is_counts says which.  For counts: untrusted (bool, where a count is negative or
    overloaded), bits (16 or 32), offset (ADU), gain (ADU per photon), overload, and whether the file
    stated the offset and overload.  format: what it was read as ("cbf", "smv", "tif", "bin", "nbs")."""

    def __init__(self, data, is_counts=False, untrusted=None, bits=16, offset=0.0, gain=1.0, overload=0.0,
                 offset_stated=False, overload_stated=False, format=None):
        self.data, self.is_counts, self.untrusted = data, is_counts, untrusted
        self.bits, self.offset, self.gain, self.overload = bits, offset, gain, overload
        self.offset_stated, self.overload_stated, self.format = offset_stated, overload_stated, format

    def photons(self):
        """Photons per pixel: the data, or (counts - offset) / gain."""
        if not self.is_counts:
            return self.data
        return ((self.data - self.offset) / self.gain).astype(np.float32)

    def __repr__(self):
        return "Image(%s %s, format=%r)" % ("counts" if self.is_counts else "photons", self.data.shape, self.format)


def read_image(path, renderer=None, frame=0):
    """The image in path (CBF, SMV, TIFF, raw float32 .bin, an nb stream's IMAGE record of `frame`, or
    frame `frame` of an NXmx file: nb's, or an Eiger's master with its data files), by the tools'
    readers (nb-convert --import's).  renderer: the renderer it must fit (its pixels), whose
    plan's ADC is the offset of counts whose file states none.  Returns an Image."""
    data = _lib.ImageData()
    _lib_.nb_image_data_init(ctypes.byref(data))
    handle = renderer._handle() if renderer is not None else None
    _lib.check(_lib_.nb_image_read(_lib.encode(str(path)), handle, _int_arg("frame", frame), ctypes.byref(data)))
    try:
        shape = (data.height, data.width)
        if data.is_counts:
            array = np.ctypeslib.as_array(data.counts, shape=(data.pixels,)).reshape(shape).copy()
            untrusted = np.ctypeslib.as_array(data.untrusted, shape=(data.pixels,)).reshape(shape).astype(bool)
        else:
            array = np.ctypeslib.as_array(data.photons, shape=(data.pixels,)).reshape(shape).copy()
            untrusted = None
        return Image(array, bool(data.is_counts), untrusted, data.bits, data.offset, data.gain, data.overload,
                     bool(data.offset_stated), bool(data.overload_stated),
                     data.format.decode() if data.format else None)
    finally:
        _lib_.nb_image_data_free(ctypes.byref(data))


def write_image(path, image, renderer=None, frame=0, format=None):
    """Write an image (an Image, or a float32 array of photons) to path in format (nb-convert's names:
    "cbf", "smv", "tif", "tif-float", "bin", "png" ...; None: from the name's suffix), its header frame
    `frame` of renderer's plan (None: nb-geom's default plan for a detector of the image's size).
    Photons go to the integer formats as the reference's int image; counts as they are."""
    if isinstance(image, np.ndarray):
        image = Image(image)
    if not isinstance(image, Image):
        raise TypeError("image: expected an nb.Image or a numpy array, got %s" % type(image).__name__)
    array = image.data
    dtype = np.float64 if image.is_counts else np.float32
    if not isinstance(array, np.ndarray):
        raise TypeError("image.data: expected a numpy array, got %s" % type(array).__name__)
    _array_arg("image.data", array, dtype, array.size)
    if array.ndim not in (1, 2, 3):
        raise ValueError("image.data: %d dimensions; expected (height, width) or a renderer's frame" % array.ndim)
    data = _lib.ImageData()
    _lib_.nb_image_data_init(ctypes.byref(data))
    data.height, data.width = (array.shape[0], array.shape[1]) if array.ndim == 2 else (1, array.size)
    data.pixels = array.size
    data.is_counts = int(image.is_counts)
    keep = [array]
    if image.is_counts:
        data.counts = array.ctypes.data_as(_lib.c_double_p)
        if image.untrusted is not None:
            untrusted = np.ascontiguousarray(image.untrusted, dtype=np.uint8)
            _array_arg("image.untrusted", untrusted, np.uint8, array.size)
            keep.append(untrusted)
            data.untrusted = untrusted.ctypes.data_as(ctypes.POINTER(ctypes.c_ubyte))
        data.bits, data.offset, data.gain, data.overload = image.bits, image.offset, image.gain, image.overload
        data.offset_stated, data.overload_stated = int(image.offset_stated), int(image.overload_stated)
    else:
        data.photons = array.ctypes.data_as(_lib.c_float_p)
    handle = renderer._handle() if renderer is not None else None
    fmt = _lib.encode(format) if format is not None else None
    _lib.check(_lib_.nb_image_write(_lib.encode(str(path)), fmt, ctypes.byref(data), handle,
                                    _int_arg("frame", frame)))


def noise_image(photons, seed, **options):
    """Detector counts (int32, (slow, fast)) of one image of photons (float32, (slow, fast)) without a
    plan, as nb-noise counts a one-panel plan of that size: seed needed; options as Renderer.noise's
    and pixel_size (mm, the PSF's pixel)."""
    if not isinstance(photons, np.ndarray) or photons.ndim != 2:
        raise ValueError("photons: expected a 2-d numpy array (slow, fast)")
    _array_arg("photons", photons, np.float32, photons.size)
    _finite_arg("photons", photons)
    counts = np.empty(photons.shape, dtype=np.int32)
    opts = _lib.Options(_lib.OPTIONS_NOISE, dict(options, seed=_int_arg("seed", seed)))
    _lib.check(_lib_.nb_noise_image(_ptr(photons), photons.shape[1], photons.shape[0], opts.ptr, _ptr(counts)))
    return counts
