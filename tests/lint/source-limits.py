#!/usr/bin/env python3
"""source-limits.py - the rooms a newcomer can live in, checked.

Every product source file (libnbcore/, engine/, engine/physics/, fit/,
formats/, cli/, tools/: .c, .h, .inc, .cu, .cuh) has at most 1000 lines, and every
function at most 150 (from the line its name is on to its closing brace);
and the layers include one way: libnbcore nothing from engine/, formats/,
cli/ or tools/; engine/ (engine/physics/ with it: the kernels' pixel
physics) nothing from fit/, formats/, cli/ or tools/; fit/ (the fit, in
libnb with the engine) nothing from formats/ (but ALLOWED), cli/ or tools/; formats/ nothing from
engine/, cli/ or tools/; cli/ (the tools' command-line code, libnbcli, never
in libnb) nothing from engine/, formats/ or tools/: only tools/ (and the
tests) use it.  formats/ does not reach the physics even through other
headers: the includes are followed, header after header.  One file of the
engine is its door to formats/ (ALLOWED): engine/nb_api_files.c, nb.h's
image files and the readers of nb-geom's file flags, which libnb links; and
the fit's, fit/nb_fit_spots.c, DIALS's reflection tables read for its spots.

A function is what the code's style makes one: a line at column 0 that is not
a comment, preprocessor line or declaration ending in ';', whose body opens
with '{' at column 0 (or at the end of the signature line) and closes with
'}' at column 0.

    tests/lint/source-limits.py [ROOT]     exit 1 and one line per breach
"""
import os
import re
import sys

MAX_FILE, MAX_FUNCTION = 1000, 150
# each folder and the layer it belongs to
FOLDERS = (("libnbcore", "libnbcore"), ("engine", "engine"), ("engine/physics", "engine"), ("fit", "fit"),
           ("formats", "formats"), ("cli", "cli"), ("tools", "tools"))
SUFFIXES = (".c", ".h", ".inc", ".cu", ".cuh")
# what each layer may not include (by the layer its header lives in)
FORBIDDEN = {"libnbcore": ("engine", "fit", "formats", "cli", "tools"), "engine": ("fit", "formats", "cli", "tools"),
             "fit": ("formats", "cli", "tools"), "formats": ("engine", "fit", "cli", "tools"),
             "cli": ("engine", "fit", "formats", "tools"), "tools": ()}
# the files that may include a layer their own forbids: the engine's one door
# to formats/ (nb.h's image files, nb-geom's file flags in libnb)
ALLOWED = {"engine/nb_api_files.c": ("formats",), "fit/nb_fit_spots.c": ("formats",)}
# what a layer may not reach through any chain of includes (by folder)
UNREACHABLE = {"formats": ("engine/physics",)}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def sources(root):
    """(layer, folder, path) of each product source."""
    for folder, layer in FOLDERS:
        d = os.path.join(root, folder)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith(SUFFIXES):
                yield layer, folder, os.path.join(folder, name)


def reached(start, includes, where):
    """The first chain of includes from file `start` to a header in one of the
    folders `where`: [header, ..., the one in `where`], or None.  includes:
    each file's (folder, path) of the product headers it includes."""
    seen, queue = {start}, [(start, [])]
    while queue:
        path, chain = queue.pop(0)
        for folder, header in includes.get(path, ()):
            if header in seen:
                continue
            seen.add(header)
            if folder in where:
                return chain + [os.path.basename(header)]
            queue.append((header, chain + [os.path.basename(header)]))
    return None


def functions(lines):
    """(name line number, length) of each top-level function."""
    start = None
    for i, line in enumerate(lines):
        if start is None:
            if line.rstrip().endswith("}") and "{" in line:
                continue  # a function of one line
            if line[:1].isalpha() or line[:1] == "_":
                if not line.startswith(("typedef", "struct", "enum", "union", "extern \"C\"")) or "(" in line:
                    head = i
                    j = i
                    # the signature runs to the line with '{' at its end or '{' alone at column 0
                    while j < len(lines) and not lines[j].rstrip().endswith((";", "{")) and \
                            lines[j].rstrip() != "{" and j - i < 8:
                        j += 1
                    if j < len(lines) and "(" in "".join(lines[i:j + 1]) and (
                            lines[j].rstrip() == "{" or
                            (lines[j].rstrip().endswith("{") and not lines[j].rstrip().endswith("= {"))) and \
                            "=" not in "".join(lines[i:j + 1]).split("(")[0]:
                        start = head
        elif line.rstrip() == "}":
            yield start + 1, i - start + 1
            start = None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    breaches = []
    headers = {}
    for layer, folder, path in sources(root):
        headers[os.path.basename(path)] = (layer, folder, path)
    includes = {}
    for layer, folder, path in sources(root):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        if len(lines) - 1 > MAX_FILE:
            breaches.append("%s: %d lines (at most %d)" % (path, len(lines) - 1, MAX_FILE))
        for at, n in functions(lines):
            if n > MAX_FUNCTION:
                name = re.search(r"(\w+)\s*\(", " ".join(lines[at - 1:at + 2]))
                breaches.append("%s:%d: function %s is %d lines (at most %d)" %
                                (path, at, name.group(1) if name else "?", n, MAX_FUNCTION))
        includes[path] = []
        for k, line in enumerate(lines):
            m = INCLUDE.match(line)
            found = m and headers.get(os.path.basename(m.group(1)))
            if not found:
                continue
            includes[path].append((found[1], found[2]))
            if found[0] in FORBIDDEN[layer] and found[0] not in ALLOWED.get(path, ()):
                breaches.append("%s:%d: includes %s from %s/" % (path, k + 1, m.group(1), found[1]))
    for layer, folder, path in sources(root):
        where = UNREACHABLE.get(layer)
        chain = where and reached(path, includes, where)
        # a direct include is reported above, as one against the layers
        if chain and len(chain) > 1:
            breaches.append("%s: reaches %s (%s/) through %s" % (path, chain[-1], headers[chain[-1]][1],
                                                                   " -> ".join(chain[:-1])))
    for b in breaches:
        print(b)
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
