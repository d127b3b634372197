#!/usr/bin/env bats
# Read-back by real clients: the files nb-convert writes, opened by python3-fabio,
# PIL, numpy and DIALS (dials.import / dxtbx) - programs that know nothing of nb.
#
# setup_file renders ONE small noisy image (96 x 64 pixels, i.e. 64 rows (slow) of
# 96 columns (fast), 0.172 mm pixels, 150 mm, 1 A, off-centre beam) and writes it in
# every format.  The tests compare what the clients read with the stream itself
# (noisy.nbs: its IMAGE record carries the photons and the int32 detector counts)
# and with the plan's geometry.  A client that is not installed skips its tests,
# saying which; /usr/bin/python3 is the Debian interpreter that has these modules.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}   # the Debian interpreter, with numpy, fabio, PIL, dxtbx
GEOM="-cell 78 78 37 90 90 90 -N 10 -default_F 100 -lambda 1 -distance 150 -pixel 0.172 \
      -detpixels_f 96 -detpixels_s 64 -Xbeam 7.5 -Ybeam 6.1"

setup_file() {
    SET="$BATS_FILE_TMPDIR/set"
    export SET
    mkdir -p "$SET"
    cd "$SET" || return 1
    nb-geom $GEOM -o plan.nbs || return 1
    nb-sim -q -o rendered.nbs plan.nbs || return 1
    nb-noise -q -seed 5 -o noisy.nbs rendered.nbs || return 1
    nb-convert -o x.bin -o x_0001.img -o x_0001.cbf -o x.pgm -o x.png noisy.nbs || return 1
    # the TIFFs where this nb-convert writes them (built with libtiff); their tests skip otherwise
    if can_write_tiff; then nb-convert -o x.tif --format tif-float -o xf.tif noisy.nbs || return 1; fi
    # a minimal nb stream reader: the IMAGE record's keys and arrays (slow, fast)
    cat > nbs.py <<'EOF'
import struct
import numpy as np

DT = {'f32': '<f4', 'f64': '<f8', 'u8': 'u1', 'u16': '<u2', 'u32': '<u4', 'i32': '<i4'}

def records(path):
    b = open(path, 'rb').read()
    o = 0
    while o < len(b):
        assert b[o:o + 8] == b'\x89NBS\r\n\x1a\n', 'bad magic at %d' % o
        typ = b[o + 12:o + 20].rstrip(b'\0').decode()
        h, = struct.unpack_from('<I', b, o + 20)
        p, = struct.unpack_from('<Q', b, o + 24)
        text = b[o + 32:o + 32 + h].decode()
        keys = dict(l.split('=', 1) for l in text.splitlines() if '=' in l)
        yield typ, keys, b[o + 32 + h:o + 32 + h + p]
        o += 36 + h + p

def plan(path):
    for typ, keys, _ in records(path):
        if typ == 'PLAN':
            return keys

def image(path):
    for typ, keys, pay in records(path):
        if typ != 'IMAGE':
            continue
        f, s = int(keys['FPIXELS']), int(keys['SPIXELS'])
        arrays = {}
        for k, v in keys.items():
            if k.startswith('ARRAY.'):
                dt, n, off = v.split()
                arrays[k[6:]] = np.frombuffer(pay, DT[dt], int(n), int(off)).reshape(s, f)
        return keys, arrays
EOF
    # which clients this machine has
    HAVE_NUMPY=0 HAVE_FABIO=0 HAVE_PIL=0 HAVE_DIALS=0
    $PY -c 'import numpy' 2>/dev/null && HAVE_NUMPY=1
    $PY -c 'import fabio, numpy' 2>/dev/null && HAVE_FABIO=1
    $PY -c 'import PIL.Image, numpy' 2>/dev/null && HAVE_PIL=1
    command -v dials.import >/dev/null && $PY -c 'import dxtbx.model.experiment_list, numpy' 2>/dev/null &&
        HAVE_DIALS=1
    export HAVE_NUMPY HAVE_FABIO HAVE_PIL HAVE_DIALS
}

need_numpy() { [ "$HAVE_NUMPY" = 1 ] || skip "numpy is not installed for $PY"; }
need_fabio() { [ "$HAVE_FABIO" = 1 ] || skip "python3-fabio is not installed for $PY"; }
need_pil() { [ "$HAVE_PIL" = 1 ] || skip "python3-pil (PIL) is not installed for $PY"; }
need_dials() {
    [ "$HAVE_DIALS" = 1 ] || skip "DIALS (dials.import and dxtbx for $PY) is not installed"
}

# run a Python script (standard input) with nbs.py importable; SET names the file set
py() {
    PYTHONPATH="$SET" "$PY" - "$@"
}

@test "fabio reads the SMV: 64 rows (slow) x 96 columns (fast), uint16, equal to the stream's counts" {
    need_fabio
    py <<'EOF'
import os, fabio, numpy as np, nbs
S = os.environ['SET']
keys, a = nbs.image(S + '/noisy.nbs')
im = fabio.open(S + '/x_0001.img')
d = im.data
assert d.shape == (64, 96), d.shape
assert d.dtype == np.uint16, d.dtype
assert int(im.header['SIZE1']) == 96 and int(im.header['SIZE2']) == 64, im.header
assert float(im.header['PIXEL_SIZE']) == 0.172, im.header['PIXEL_SIZE']
assert np.array_equal(d.astype(np.int64), a['counts'].astype(np.int64)), 'SMV pixels differ from the counts'
EOF
}

@test "fabio reads the CBF: 64 x 96, int32, the stream's counts and the SMV's less the ADC offset (a CBF counts from 0)" {
    need_fabio
    py <<'EOF'
import os, fabio, numpy as np, nbs
S = os.environ['SET']
keys, a = nbs.image(S + '/noisy.nbs')
c = fabio.open(S + '/x_0001.cbf').data
s = fabio.open(S + '/x_0001.img').data
assert c.shape == (64, 96), c.shape
assert c.dtype == np.int32, c.dtype
adc = int(keys['COUNTS_ADC'])
assert adc == 40, adc
assert np.array_equal(c, a['counts'] - adc), 'CBF pixels differ from the counts less the offset'
assert np.array_equal(c, s.astype(np.int32) - adc), 'CBF pixels differ from the SMV pixels less the offset'
EOF
}

@test "fabio reads the 16-bit TIFF: 64 x 96, uint16, equal to the SMV and the counts (the CBF's plus the offset)" {
    need_fabio
    [ -e "$SET/x.tif" ] || skip "this nb-convert cannot write TIFF"
    py <<'EOF'
import os, fabio, numpy as np, nbs
S = os.environ['SET']
keys, a = nbs.image(S + '/noisy.nbs')
t = fabio.open(S + '/x.tif').data
assert t.shape == (64, 96), t.shape
assert t.dtype == np.uint16, t.dtype
assert np.array_equal(t.astype(np.int32), a['counts'])
assert np.array_equal(t.astype(np.int32) - 40, fabio.open(S + '/x_0001.cbf').data)
assert np.array_equal(t, fabio.open(S + '/x_0001.img').data)
EOF
}

@test "fabio reads the float TIFF (--format tif-float): 64 x 96 float32, bit for bit the .bin and the photons" {
    need_fabio
    [ -e "$SET/xf.tif" ] || skip "this nb-convert cannot write TIFF"
    py <<'EOF'
import os, fabio, numpy as np, nbs
S = os.environ['SET']
keys, a = nbs.image(S + '/noisy.nbs')
t = fabio.open(S + '/xf.tif').data
assert t.shape == (64, 96), t.shape
assert t.dtype == np.float32, t.dtype
b = np.fromfile(S + '/x.bin', '<f4').reshape(64, 96)
assert np.array_equal(t.view(np.uint32), b.view(np.uint32)), 'float TIFF differs from the .bin'
assert np.array_equal(b, a['pixels']), '.bin differs from the stream photons'
EOF
}

@test "the counts are Poisson deviates of the photons plus the 40 ADC offset (correlation > 0.9)" {
    need_fabio
    py <<'EOF'
import os, fabio, numpy as np, nbs
S = os.environ['SET']
keys, a = nbs.image(S + '/noisy.nbs')
photons = np.fromfile(S + '/x.bin', '<f4').reshape(64, 96).astype(np.float64)
counts = fabio.open(S + '/x_0001.img').data.astype(np.float64)
assert keys['COUNTS_ADC'] == '40' and keys['NOISE_OVERLOADS'] == '0', keys
n = photons.size
r = np.corrcoef(photons.ravel(), counts.ravel())[0, 1]
assert r > 0.9, 'correlation %g' % r
assert counts.min() >= 40, counts.min()
# sum of Poisson deviates: the photon total within 5 sigma; and the stream's own tally
total = photons.sum()
got = (counts - 40).sum()
assert abs(got - total) < 5 * np.sqrt(total), (got, total)
assert got == float(keys['NOISE_PHOTONS']), (got, keys['NOISE_PHOTONS'])
# zero-mean pixels get exactly the offset
assert (counts[photons == 0] == 40).all()
EOF
}

@test ".bin: fabio's binary reader and numpy read 64 x 96 float32; the sum is the IMAGE record's MEAN x pixels" {
    need_fabio
    py <<'EOF'
import os, numpy as np, nbs
from fabio.binaryimage import BinaryImage
S = os.environ['SET']
keys, a = nbs.image(S + '/noisy.nbs')
assert os.path.getsize(S + '/x.bin') == 96 * 64 * 4
f = BinaryImage().read(S + '/x.bin', 96, 64, 0, np.float32, '<').data
n = np.fromfile(S + '/x.bin', '<f4').reshape(64, 96)
assert f.shape == (64, 96), f.shape
assert np.array_equal(f, n)
want = float(keys['MEAN']) * 96 * 64
assert abs(n.astype(np.float64).sum() - want) <= 1e-9 * want, (n.sum(), want)
assert n.sum() > 0
EOF
}

@test "PGM: PIL and fabio read 96 x 64 bytes = min(255, floor(photons x scale)) (fabio 0.14 cannot skip the comment line: it reads a copy without it)" {
    need_fabio
    need_pil
    py <<'EOF'
import os, fabio, numpy as np, nbs
from PIL import Image
S = os.environ['SET']
raw = open(S + '/x.pgm', 'rb').read()
magic, dims, comment, maxval, data = raw.split(b'\n', 4)
assert (magic, dims, maxval) == (b'P5', b'96 64', b'255'), raw[:60]
assert comment.startswith(b'# pixels scaled by '), comment
# nanoBragg's automatic PGM scale: 250 / (5 rmsd), printed with %g
keys, a = nbs.image(S + '/noisy.nbs')
scale = 250.0 / (5.0 * float(keys['RMSD']))
assert comment == ('# pixels scaled by %g' % scale).encode(), (comment, scale)
photons = np.fromfile(S + '/x.bin', '<f4').reshape(64, 96).astype(np.float64)
p = np.asarray(Image.open(S + '/x.pgm'))
assert p.shape == (64, 96) and p.dtype == np.uint8, (p.shape, p.dtype)
want = np.minimum(255, np.floor(photons * scale))
assert np.array_equal(p, want), (p != want).sum()
assert p.max() > 0
try:
    d = fabio.open(S + '/x.pgm').data
except Exception:
    # fabio's PNM header parser compares a byte with the string '#', so it reads no
    # PGM with a comment line; prove that is the only reason, then read it without
    open('probe.pgm', 'wb').write(b'P5\n2 1\n# c\n255\n\x01\x02')
    try:
        fabio.open('probe.pgm')
        raise AssertionError('fabio reads a commented PGM but not ours')
    except AssertionError:
        raise
    except Exception:
        pass
    open('nocomment.pgm', 'wb').write(b'\n'.join([magic, dims, maxval, data]))
    d = fabio.open('nocomment.pgm').data
assert d.shape == (64, 96), d.shape
assert np.array_equal(d, p)
EOF
}

@test "PNG (fabio has no PNG reader, so PIL reads it): 96 x 64, 8-bit grey, the spots brighter than the background; of the counts, --photons of the photons" {
    need_pil
    nb-convert -q --photons -o xp.png "$SET/noisy.nbs"
    py <<'EOF'
import os, numpy as np
from PIL import Image
import nbs
S = os.environ['SET']
keys, a = nbs.image(S + '/noisy.nbs')
for name, values in ((S + '/x.png', a['counts'] - float(keys['COUNTS_ADC'])), ('xp.png', a['pixels'])):
    im = Image.open(name)
    assert im.format == 'PNG', im.format
    assert im.size == (96, 64), im.size
    assert im.mode == 'L', im.mode
    p = np.asarray(im).astype(np.float64)
    # the preview's ramp: 255 sqrt(v / the 99.5th percentile of the positive values)
    v = values.astype(np.float64)
    pos = np.sort(v[v > 0])
    top = pos[int(np.ceil(0.995 * len(pos))) - 1]  # nearest rank
    want = np.round(255 * np.sqrt(np.clip(v / top, 0, 1)))
    assert np.abs(p - want).max() <= 1, (name, np.abs(p - want).max())
photons = np.fromfile(S + '/x.bin', '<f4').reshape(64, 96)
p = np.asarray(Image.open('xp.png')).astype(np.float64)
order = np.argsort(photons.ravel())
bright = p.ravel()[order[-30:]].mean()     # the 30 brightest pixels: the spots
dark = p.ravel()[order[:3000]].mean()      # the darker half: background
assert bright > dark + 50, (bright, dark)
assert p.ravel()[order[-1]] == p.max(), 'the brightest pixel is not the whitest'
assert np.corrcoef(photons.ravel().argsort().argsort(), p.ravel())[0, 1] > 0.5
EOF
}

@test "CBF: the data_ block is named after the file (x_0001), not its temporary name, so one stream gives identical files" {
    mkdir a b
    (cd a && nb-convert -o x_0001.cbf "$SET/noisy.nbs")
    (cd b && nb-convert -o x_0001.cbf "$SET/noisy.nbs")
    local block
    block=$(grep -a -m1 '^data_' a/x_0001.cbf | tr -d '\r')
    [ "$block" = "data_x_0001" ] || { echo "data block line: '$block' (want data_x_0001)"; return 1; }
    cmp a/x_0001.cbf b/x_0001.cbf
}

# dials.import the files given, then print "distance wavelength px py bf bs" (mm, A)
# and check the pixels dxtbx reads against the stream's counts
dials_geometry() {
    dials.import "$@" output.experiments=imported.expt >dials.out 2>&1 ||
        { cat dials.out; return 1; }
    py <<'EOF'
import os, numpy as np, nbs
from dxtbx.model.experiment_list import ExperimentListFactory
S = os.environ['SET']
el = ExperimentListFactory.from_json_file('imported.expt')
assert len(el) == 1, len(el)
d, b = el[0].detector[0], el[0].beam
assert d.get_image_size() == (96, 64), d.get_image_size()
keys, a = nbs.image(S + '/noisy.nbs')
# the counts as dxtbx takes them: raw less its pedestal (the SMV's ADC_OFFSET; a CBF counts from 0)
raw = el[0].imageset.get_raw_data(0)[0].as_numpy_array() - d.get_pedestal()
want = a['counts'].astype(np.int64) - int(keys['COUNTS_ADC'])
assert np.array_equal(raw.astype(np.int64), want), 'dxtbx reads other counts'
px = d.get_pixel_size()
bc = d.get_beam_centre(b.get_s0())
print(d.get_distance(), b.get_wavelength(), px[0], px[1], bc[0], bc[1])
EOF
}

# the plan's values in dials.import's units: KEY... (metres -> mm, LAMBDA0 -> A)
plan_mm() {
    local k out=""
    for k in "$@"; do
        out="$out $(plan_key "$SET/plan.nbs" "$k")"
    done
    awk -v s="$out" 'BEGIN { n = split(s, a, " "); for (i = 1; i <= n; i++) printf "%s%.10g", (i > 1 ? " " : ""), a[i] * 1000; print "" }'
}

@test "dials.import reads the SMV x_0001.img: distance = DISTANCE, wavelength, pixel size and beam centre as the plan" {
    need_dials
    cp "$SET/x_0001.img" .
    local got want
    got=$(dials_geometry x_0001.img)
    want="$(plan_mm DISTANCE) $(awk -v l="$(plan_key "$SET/plan.nbs" LAMBDA0)" 'BEGIN { printf "%.10g", l * 1e10 }') $(plan_mm PIXEL_SIZE PIXEL_SIZE FBEAM SBEAM)"
    echo "dxtbx: $got"
    echo "plan:  $want"
    # every number within 1e-3 of its own size (approx scales by the largest component)
    local i
    for i in 1 2 3 4 5 6; do
        approx "$(echo "$got" | cut -d' ' -f$i)" "$(echo "$want" | cut -d' ' -f$i)" 1e-3
    done
}

@test "dials.import reads the CBF x_0001.cbf: distance = CLOSE_DISTANCE, wavelength, pixel size and beam centre as the plan" {
    need_dials
    cp "$SET/x_0001.cbf" .
    local got want
    got=$(dials_geometry x_0001.cbf)
    want="$(plan_mm CLOSE_DISTANCE) $(awk -v l="$(plan_key "$SET/plan.nbs" LAMBDA0)" 'BEGIN { printf "%.10g", l * 1e10 }') $(plan_mm PIXEL_SIZE PIXEL_SIZE FBEAM SBEAM)"
    echo "dxtbx: $got"
    echo "plan:  $want"
    local i
    for i in 1 2 3 4 5 6; do
        approx "$(echo "$got" | cut -d' ' -f$i)" "$(echo "$want" | cut -d' ' -f$i)" 1e-3
    done
}

# three frames, -phi 0/1/2 -osc 1, one pipeline run each (nb-geom renders one frame)
sweep() {
    local ext=$1 i
    for i in 1 2 3; do
        nb-geom $GEOM -phi $((i - 1)) -osc 1 -o plan$i.nbs || return 1
        nb-sim -q plan$i.nbs | nb-noise -q -seed $i | nb-convert -o "s_000$i.$ext" || return 1
    done
    dials.import s_0001.$ext s_0002.$ext s_0003.$ext output.experiments=sweep.expt >dials.out 2>&1 ||
        { cat dials.out; return 1; }
    py <<'EOF'
from dxtbx.model.experiment_list import ExperimentListFactory
el = ExperimentListFactory.from_json_file('sweep.expt')
assert len(el) == 1, '%d experiments' % len(el)
assert len(el.imagesets()) == 1, '%d image sets' % len(el.imagesets())
assert type(el[0].imageset).__name__ == 'ImageSequence', type(el[0].imageset).__name__
sc = el[0].scan
assert sc.get_image_range() == (1, 3), sc.get_image_range()
start, width = sc.get_oscillation()
assert abs(start - 0) < 1e-6 and abs(width - 1) < 1e-6, sc.get_oscillation()
EOF
}

@test "dials.import takes 3 CBF frames (-phi 0, 1, 2 -osc 1) as one sweep: images 1..3, oscillation 1 degree" {
    need_dials
    sweep cbf
}

@test "dials.import takes 3 SMV frames (-phi 0, 1, 2 -osc 1) as one sweep: images 1..3, oscillation 1 degree" {
    need_dials
    sweep img
}
