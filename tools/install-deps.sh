#!/bin/sh
# install-deps.sh - install the Debian packages the build and tests need.
# Run as root it installs what is missing with apt-get; otherwise it only
# says what is missing.  Used by 'make demo' and 'make check'.
#   NB_SKIP_DEPS=1   do nothing (offline builds, other distributions)
[ "${NB_SKIP_DEPS:-0}" = 1 ] && exit 0
command -v dpkg-query >/dev/null 2>&1 || exit 0

# build: compiler, zlib, libtiff, libccp4-dev (nb-hkl's MTZ and mmCIF), libhdf5 (NXmx; hdf5-filter-plugin and bitshuffle its
# LZ4 and bitshuffle filters); tests: bats, time, GNU parallel, groff/man, valgrind;
# read-back clients: fabio, h5py (+hdf5plugin), dials; gemmi (nb-hkl -model runs its sfcalc);
# the Python package: numpy, pytest, torch (nb.torch); a single-node Slurm for the job-array
# test; Open MPI (mpicc, mpirun) for nb-fit across processes (built where mpicc is found;
# tests/cli/mpi.bats runs mpirun -n 2)
want="gcc make zlib1g-dev python3-numpy python3-pytest python3-torch libtiff-dev libccp4-dev libhdf5-dev bats python3-fabio python3-h5py python3-hdf5plugin hdf5-filter-plugin bitshuffle dials gemmi time parallel groff-base man-db valgrind slurm-wlm munge clang openmpi-bin libopenmpi-dev"
missing=""
for p in $want; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing Debian packages:$missing" >&2
    echo "install-deps: run 'sudo apt-get install$missing' (tests that need them will skip)" >&2
    exit 0
fi
echo "install-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# a stale package index is the usual reason an install fails: refresh once and retry
if ! apt-get install -y --no-install-recommends $missing >/dev/null 2>&1; then
    apt-get update >/dev/null 2>&1
    for p in $missing; do
        apt-get install -y --no-install-recommends "$p" >/dev/null 2>&1 ||
            echo "install-deps: could not install $p (tests that need it will skip)" >&2
    done
fi
exit 0
