"""_lib.py - libnb.so through ctypes: finding it, its functions' signatures,
and its errors as Python exceptions.

The library is found, in this order, at $NB_LIBRARY (a path to libnb.so),
where `make install` recorded it (nb/_paths.py), in the build tree this
package sits in (python/nb -> build/libnb.so), in pkg-config's libdir, or by
the system's loader.  ctypes releases the GIL around every call into it, so
renders run while other Python threads do.
"""
import ctypes
import numbers
import os
import subprocess

c_double_p = ctypes.POINTER(ctypes.c_double)
c_float_p = ctypes.POINTER(ctypes.c_float)


class RenderConfig(ctypes.Structure):
    """nb.h's nb_render_config (API 1)."""
    _fields_ = [("device", ctypes.c_int), ("precision", ctypes.c_int), ("threads", ctypes.c_int)]


class FitImage(ctypes.Structure):
    """nb.h's nb_fit_image."""
    _fields_ = [("pixels", c_float_p), ("mask", ctypes.POINTER(ctypes.c_ubyte)), ("gain", ctypes.c_double),
                ("offset", ctypes.c_double), ("overload", ctypes.c_double)]


SUM_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, c_double_p, ctypes.c_size_t)


class FitSettings(ctypes.Structure):
    """nb.h's nb_fit_settings."""
    _fields_ = [("size", ctypes.c_size_t), ("loss", ctypes.c_int), ("iterations", ctypes.c_int),
                ("rank", ctypes.c_int), ("processes", ctypes.c_int), ("sum", SUM_FN), ("sum_ctx", ctypes.c_void_p)]


class FitResult(ctypes.Structure):
    """nb.h's nb_fit_result."""
    _fields_ = [("size", ctypes.c_size_t), ("nll", ctypes.c_double), ("pixels", ctypes.c_long),
                ("iterations", ctypes.c_int), ("converged", ctypes.c_int)]


class ImageData(ctypes.Structure):
    """nb.h's nb_image_data."""
    _fields_ = [("size", ctypes.c_size_t), ("width", ctypes.c_int), ("height", ctypes.c_int),
                ("pixels", ctypes.c_size_t), ("is_counts", ctypes.c_int), ("photons", c_float_p),
                ("counts", c_double_p), ("untrusted", ctypes.POINTER(ctypes.c_ubyte)), ("bits", ctypes.c_int),
                ("offset", ctypes.c_double), ("gain", ctypes.c_double), ("overload", ctypes.c_double),
                ("offset_stated", ctypes.c_int), ("overload_stated", ctypes.c_int),
                ("negative", ctypes.c_size_t), ("overloaded", ctypes.c_size_t), ("format", ctypes.c_char_p)]


# nb_result's codes
OK, USAGE, IO, DATA, NOMEM, UNSUPPORTED = 0, 1, 2, 3, 4, 5
OPTIONS_RENDER, OPTIONS_NOISE = 1, 2
PRECISION_PLAN, PRECISION_FAST, PRECISION_DOUBLE = 0, 1, 2


class NbError(Exception):
    """An error of libnb's: .code is its nb_result, the message the engine's."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class UsageError(NbError, ValueError):
    """The engine refused an argument (NB_RESULT_USAGE): an unknown name, a frame out of range ..."""


class FileError(NbError, OSError):
    """A file could not be read or written (NB_RESULT_IO)."""


class DataError(NbError):
    """Malformed or inconsistent input (NB_RESULT_DATA)."""


class UnsupportedError(NbError):
    """A valid request this build or machine cannot do (NB_RESULT_UNSUPPORTED): no CUDA device ..."""


_ERRORS = {USAGE: UsageError, IO: FileError, DATA: DataError, UNSUPPORTED: UnsupportedError}


def _candidates():
    path = os.environ.get("NB_LIBRARY")
    if path:
        yield path
        return
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from . import _paths  # written by make install
        yield os.path.join(_paths.LIBDIR, "libnb.so")
    except ImportError:
        pass
    yield os.path.join(here, "..", "..", "build", "libnb.so")
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "nb"], check=True, capture_output=True,
                                text=True).stdout.strip()
        if libdir:
            yield os.path.join(libdir, "libnb.so")
    except (OSError, subprocess.CalledProcessError):
        pass
    yield "libnb.so"


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("nb: cannot find libnb.so (set NB_LIBRARY to its path); tried: " + ", ".join(tried))


lib = _load()

_P = ctypes.c_void_p
_I, _L, _D, _S, _Z = ctypes.c_int, ctypes.c_long, ctypes.c_double, ctypes.c_char_p, ctypes.c_size_t
_SIGNATURES = {
    "nb_last_error": (_S, []),
    "nb_version": (_S, []),
    "nb_version_number": (_I, []),
    "nb_set_log_level": (None, [_I]),
    "nb_free": (None, [_P]),
    "nb_options_new": (_P, [_I]),
    "nb_options_free": (None, [_P]),
    "nb_options_set_int": (_I, [_P, _S, ctypes.c_longlong]),
    "nb_options_set_double": (_I, [_P, _S, _D]),
    "nb_options_set_string": (_I, [_P, _S, _S]),
    "nb_plan_stream_from_args": (_I, [_I, ctypes.POINTER(_S), ctypes.POINTER(_P), ctypes.POINTER(_Z)]),
    "nb_renderer_from_args": (_I, [_I, ctypes.POINTER(_S), _P, ctypes.POINTER(_P)]),
    "nb_renderer_from_stream_opts": (_I, [_P, _Z, _P, ctypes.POINTER(_P)]),
    "nb_renderer_free": (None, [_P]),
    "nb_renderer_set_options": (_I, [_P, _P]),
    "nb_renderer_frames": (_I, [_P]),
    "nb_renderer_panels": (_I, [_P]),
    "nb_renderer_panel_size": (_I, [_P, _I, ctypes.POINTER(_I), ctypes.POINTER(_I)]),
    "nb_renderer_pixels": (_Z, [_P]),
    "nb_render_frame": (_I, [_P, _L, _P]),
    "nb_render_panel": (_I, [_P, _L, _I, _P]),
    "nb_render_frame_double": (_I, [_P, _L, _P]),
    "nb_renderer_set_derivatives": (_I, [_P, _S]),
    "nb_renderer_derivatives": (_I, [_P]),
    "nb_render_frame_grad": (_I, [_P, _L, _P, ctypes.POINTER(_P)]),
    "nb_render_frame_grad_double": (_I, [_P, _L, _P, ctypes.POINTER(_P)]),
    "nb_render_frame_vjp": (_I, [_P, _L, _I, _P, _P]),
    "nb_renderer_set_F": (_I, [_P, _P, _P, _P, _P, _Z]),
    "nb_renderer_noise_frame": (_I, [_P, _L, _P, _P, _P]),
    "nb_noise_image": (_I, [_P, _I, _I, _P, _P]),
    "nb_parameter_count": (_I, []),
    "nb_parameter_name": (_S, [_I]),
    "nb_parameter_unit": (_S, [_S]),
    "nb_renderer_get_parameter": (_I, [_P, _S, c_double_p]),
    "nb_renderer_set_parameter": (_I, [_P, _S, _D]),
    "nb_fit_settings_init": (None, [ctypes.POINTER(FitSettings)]),
    "nb_fit_renderer": (_I, [_P, ctypes.POINTER(_S), _I, ctypes.POINTER(FitImage), ctypes.POINTER(FitSettings),
                             _P, _P, ctypes.POINTER(FitResult)]),
    "nb_image_data_init": (None, [ctypes.POINTER(ImageData)]),
    "nb_image_data_free": (None, [ctypes.POINTER(ImageData)]),
    "nb_image_read": (_I, [_S, _P, _L, ctypes.POINTER(ImageData)]),
    "nb_image_write": (_I, [_S, _S, ctypes.POINTER(ImageData), _P, _L]),
}
for _name, (_res, _args) in _SIGNATURES.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError as e:
        raise ImportError("nb: %s is older than this package (it lacks %s)" % (lib._name, _name)) from e
    _fn.restype, _fn.argtypes = _res, _args


def last_error():
    """The engine's message of the last failure on this thread."""
    message = lib.nb_last_error()
    return message.decode() if message else "unknown error"


def check(status):
    """Raise the engine's error for a non-zero nb_result."""
    if status:
        if status == NOMEM:
            raise MemoryError(last_error())
        raise _ERRORS.get(status, NbError)(status, last_error())


def encode(text):
    return text.encode() if isinstance(text, str) else bytes(text)


def argv(flags):
    """A C argv (char *[]) for a list of strings and numbers, and its keep-alive."""
    items = [encode(str(f)) for f in flags]
    return len(items), (ctypes.c_char_p * max(1, len(items)))(*items)


class Options:
    """An nb_options set of `kind`, filled from a dict; freed with the object."""

    def __init__(self, kind, values):
        self.ptr = lib.nb_options_new(kind)
        if not self.ptr:
            raise MemoryError(last_error())
        for name, value in values.items():
            if value is None:
                continue
            key = encode(name)
            if isinstance(value, bool):
                raise TypeError("option %r: %r is not a number or a name" % (name, value))
            if isinstance(value, numbers.Integral):
                check(lib.nb_options_set_int(self.ptr, key, int(value)))
            elif isinstance(value, numbers.Real):
                check(lib.nb_options_set_double(self.ptr, key, float(value)))
            elif isinstance(value, str):
                check(lib.nb_options_set_string(self.ptr, key, encode(value)))
            else:
                raise TypeError("option %r: %r is not a number or a name" % (name, value))

    def __del__(self):
        if getattr(self, "ptr", None):
            lib.nb_options_free(self.ptr)
            self.ptr = None
