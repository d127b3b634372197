#!/usr/bin/env python3
"""render.py - the engine as a library from Python: ctypes and numpy only.

An nb stream (PLAN + HKL records) on standard input, the first frame's
float32 photons on standard output, rendered on the CPU: the bytes that
`nb-sim --device cpu | nb-convert -o x.bin` writes for that frame (every
panel, in panel order).

The shared library is found, in this order, at $NB_LIBRARY (a path to
libnb.so), in $(pkg-config --variable=libdir nb), or by the system's loader
(ldconfig, LD_LIBRARY_PATH):

    nb-geom -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -default_F 100 | python3 render.py > frame0.bin
"""
import ctypes
import os
import subprocess
import sys

import numpy as np


class RenderConfig(ctypes.Structure):
    """nb.h's nb_render_config."""
    _fields_ = [("device", ctypes.c_int), ("precision", ctypes.c_int), ("threads", ctypes.c_int)]


NB_DEVICE_CPU = 0
NB_RESULT_USAGE = 1


def load_library():
    """libnb.so from $NB_LIBRARY, pkg-config's libdir, or the loader's path."""
    path = os.environ.get("NB_LIBRARY")
    if not path:
        try:
            libdir = subprocess.run(["pkg-config", "--variable=libdir", "nb"], check=True,
                                    capture_output=True, text=True).stdout.strip()
            if libdir and os.path.exists(os.path.join(libdir, "libnb.so")):
                path = os.path.join(libdir, "libnb.so")
        except (OSError, subprocess.CalledProcessError):
            pass
    lib = ctypes.CDLL(path or "libnb.so")
    lib.nb_last_error.restype = ctypes.c_char_p
    lib.nb_render_config_init.argtypes = [ctypes.POINTER(RenderConfig)]
    lib.nb_renderer_from_stream.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(RenderConfig),
                                            ctypes.POINTER(ctypes.c_void_p)]
    lib.nb_renderer_pixels.argtypes = [ctypes.c_void_p]
    lib.nb_renderer_pixels.restype = ctypes.c_size_t
    lib.nb_render_frame.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p]
    lib.nb_renderer_free.argtypes = [ctypes.c_void_p]
    return lib


def main():
    lib = load_library()
    stream = sys.stdin.buffer.read()
    config = RenderConfig()
    lib.nb_render_config_init(ctypes.byref(config))
    config.device = NB_DEVICE_CPU
    renderer = ctypes.c_void_p()
    status = lib.nb_renderer_from_stream(stream, len(stream), ctypes.byref(config), ctypes.byref(renderer))
    if status:
        sys.stderr.write("render.py: %s\n" % lib.nb_last_error().decode())
        return 2 if status == NB_RESULT_USAGE else 1
    try:
        photons = np.empty(lib.nb_renderer_pixels(renderer), dtype=np.float32)
        status = lib.nb_render_frame(renderer, 0, photons.ctypes.data_as(ctypes.c_void_p))
        if status:
            sys.stderr.write("render.py: %s\n" % lib.nb_last_error().decode())
            return 1
        sys.stdout.buffer.write(photons.tobytes())
        sys.stdout.buffer.flush()
    finally:
        lib.nb_renderer_free(renderer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
