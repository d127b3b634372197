"""conftest.py - the Python package's tests (tests/python): where the tools are, the tools' own
images to compare with, and, for tests/run-all.sh, a TAP line per test (NB_TAP=FILE).

The package under test is the one `import nb` finds: the build tree's with PYTHONPATH=python
(make check), or an installed one (tests/cli/python.bats, with NB_EXPECT_PREFIX set: the package
and its library must then be the installed ones)."""
import os
import subprocess

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("NB_BIN", os.path.join(ROOT, "bin"))

# a triclinic, misset, mosaic crystal; the seed fixed
XTAL = ["-cell", "70", "80", "90", "80", "95", "100", "-misset", "10", "20", "30", "-lambda", "1", "-N", "5",
        "-mosaic", "0.5", "-mosaic_domains", "3", "-oversample", "1", "-seed", "5", "-default_F", "100"]
DISTANCE = ["-distance", "80"]  # for the flat detectors (-panels brings its own)


def tool(name, *args, stdin=None):
    """A tool's standard output (bytes); its failure fails the test with its message."""
    run = subprocess.run([os.path.join(BIN, name)] + [str(a) for a in args], input=stdin, capture_output=True)
    if run.returncode:
        pytest.fail("%s %s: exit %d: %s" % (name, " ".join(map(str, args)), run.returncode, run.stderr.decode()))
    return run.stdout


def sim_frames(flags, tmp_path, grad=None):
    """nb-sim --device cpu's float32 image of each frame of `nb-geom FLAGS` (every panel, in order),
    and with grad (a list of names) each name's derivative images: ([image per frame], {name: [..]})."""
    plan = tool("nb-geom", "-q", *flags)
    args = ["-q", "--device", "cpu"] + (["--grad", ",".join(grad)] if grad else [])
    path = tmp_path / "sim.nbs"
    path.write_bytes(tool("nb-sim", *args, stdin=plan))

    def frames(prefix, *extra):
        tool("nb-convert", "-q", *extra, "-o", str(tmp_path / (prefix + "_###.bin")), str(path))
        out, k = [], 1
        while (tmp_path / ("%s_%03d.bin" % (prefix, k))).exists():
            out.append(np.fromfile(tmp_path / ("%s_%03d.bin" % (prefix, k)), dtype=np.float32))
            k += 1
        return out

    return frames("img"), {n: frames("d" + n, "--grad", n) for n in grad or []}


@pytest.fixture
def two_panels(tmp_path):
    """Two tilted panels of examples/tiles.geom (64 x 48 and, narrowed, 40 x 48 pixels of 0.2 mm)."""
    with open(os.path.join(ROOT, "examples", "tiles.geom")) as f:
        lines = [line for line in f if not line.startswith(("q2/", "q3/"))]
    text = "".join(lines).replace("q1/max_fs = 63\n", "q1/max_fs = 39\n")
    assert "q1/max_fs = 39" in text
    path = tmp_path / "two.geom"
    path.write_text(text)
    return path


_tap = {"n": 0}


def pytest_runtest_logreport(report):
    """TAP for tests/run-all.sh: one line per test, its failure's or skip's reason after it."""
    path = os.environ.get("NB_TAP")
    if not path:
        return
    name = report.nodeid.split("::", 1)[-1]
    line = None
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _tap["n"] += 1
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            line = "ok %d - %s # SKIP %s" % (_tap["n"], name, reason.replace("Skipped: ", ""))
        elif report.passed:
            line = "ok %d - %s" % (_tap["n"], name)
        else:
            line = "not ok %d - %s" % (_tap["n"], name)
    elif report.when == "teardown" and report.failed:
        _tap["n"] += 1
        line = "not ok %d - %s (teardown)" % (_tap["n"], name)
    if line:
        with open(path, "a") as f:
            f.write(line + "\n")
