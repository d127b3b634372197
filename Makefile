# nb toolkit - plain GNU Makefile.
#   make            build every tool into bin/ and the engine library (build/libnb.a, .so),
#                   on every core (make -jN to choose)
#   make check      build, then run every test (lint, unit, CLI, parity); ends "N passed, N failed"
#   make lint       only the lint of the bats tests: every check can fail (tests/lint/)
#   make demo       install missing Debian packages (as root), build, render a default image
#                   and a PNG picture of it (demo/preview.png)
#   make bench      benchmarks (see bench/README.md)
#   make install PREFIX=/usr/local   tools, libnb (shared, static), nb.h, nb.pc, man pages, share/nb
#   make check-asan the whole suite under AddressSanitizer + UBSan
#   make check-gpu  the golden parity on this machine's GPU, and gpu.bats (fails without a GPU)
#   make ptxas      every CUDA kernel's registers and spills (nvcc -Xptxas -v; no GPU needed)
#   make check-dials  the gates of what DIALS reads from nb's files, measured with DIALS (5 min)
#   make fuzz       libFuzzer targets for every parser, FUZZ_SECONDS each (clang)

CC      ?= cc
PREFIX  ?= /usr/local
# every core by default; a -j on the command line wins (make 4.3 puts it after
# this); a sub-make (check, check-asan) shares its parent's jobs
NPROC   := $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += -j$(NPROC)
endif
OPT     ?= -O2
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

# _FORTIFY_SOURCE as Ubuntu's and Fedora's compilers turn it on by default:
# glibc's checked string and memory calls (an overlapping sprintf once lost
# nb-fit's first --refine name there); the sanitizer build sets FORTIFY=
FORTIFY ?= -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2
# -fPIC: the library's objects go into libnb.so as well as libnb.a (one
# compile for both); the layers' include paths are set per folder below, so
# that the engine cannot include formats/ and libnbcore neither
# -fvisibility=hidden: libnb.so exports nb.h's functions alone (NB_API marks
# them; engine/libnb.map lists them), the static links of the tools and tests
# are unchanged.  NB_VERSION_NUMBER_BUILT: nb.c asserts that nb.h's
# NB_VERSION_* say the VERSION file's.
VERSION_NUMBER := $(shell echo $(VERSION) | awk -F. '{print $$1 * 10000 + $$2 * 100 + $$3}')
NB_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -fopenmp -fPIC -fvisibility=hidden -g $(OPT) $(FORTIFY) \
             -Ilibnbcore -DNB_VERSION='"$(VERSION)"' -DNB_VERSION_NUMBER_BUILT=$(VERSION_NUMBER)
NB_LDLIBS := -fopenmp -lz -lm

# optional parts, probed: libtiff for .tif output.  The tools load it (dlopen,
# by its soname) only when a TIFF is written: its dependencies (libstdc++,
# libjpeg, libwebp, ...) cost every nb-convert about 2 ms of CPU at start-up,
# in a pipe while nb-sim renders.  The unit tests link it to read TIFFs back.
HAVE_TIFF ?= $(shell printf '\043include <tiffio.h>\nint main(void){return 0;}\n' | \
               $(CC) -x c - -ltiff -o /dev/null 2>/dev/null && echo 1 || echo 0)
ifeq ($(HAVE_TIFF),1)
TIFF_SONAME ?= $(shell objdump -p "$$($(CC) -print-file-name=libtiff.so)" 2>/dev/null | awk '/SONAME/ {print $$2}')
ifeq ($(TIFF_SONAME),)
TIFF_SONAME := libtiff.so.6
endif
NB_CFLAGS += -DNB_HAVE_TIFF -DNB_TIFF_SONAME='"$(TIFF_SONAME)"'
TEST_LDLIBS := -ltiff
endif

# optional part, probed: libhdf5 (Debian's serial one) for NXmx output
# (.nxs, .h5; formats/nxmx.c).  Only its headers are needed at build time:
# like libtiff it is loaded (dlopen, by its soname) when an NXmx file is
# written, so that no other run pays for loading it and its dependencies.
HDF5_CFLAGS ?= $(shell pkg-config --cflags hdf5 2>/dev/null || echo -I/usr/include/hdf5/serial)
HAVE_HDF5 ?= $(shell printf '\043include <hdf5.h>\nint main(void){return 0;}\n' | \
               $(CC) $(HDF5_CFLAGS) -x c - -o /dev/null 2>/dev/null && echo 1 || echo 0)
ifeq ($(HAVE_HDF5),1)
HDF5_LIBDIR ?= $(patsubst -L%,%,$(firstword $(shell pkg-config --libs-only-L hdf5 2>/dev/null)))
HDF5_SONAME ?= $(shell objdump -p "$(HDF5_LIBDIR)/libhdf5.so" 2>/dev/null | awk '/SONAME/ {print $$2}')
ifeq ($(HDF5_SONAME),)
HDF5_SONAME := libhdf5_serial.so.103
endif
NB_CFLAGS += $(HDF5_CFLAGS) -DNB_HAVE_HDF5 -DNB_HDF5_SONAME='"$(HDF5_SONAME)"'
endif

# liblz4, for NXmx's bitshuffle+LZ4 chunks made on every thread
# (formats/bslz4.c), loaded by its soname when such a file is written;
# without it HDF5's filter plugin compresses them.  No headers needed (its
# two functions are declared there): liblz4-dev only tells the soname.
LZ4_SONAME ?= $(shell objdump -p "$$($(CC) -print-file-name=liblz4.so)" 2>/dev/null | awk '/SONAME/ {print $$2}')
ifeq ($(LZ4_SONAME),)
LZ4_SONAME := liblz4.so.1
endif
NB_CFLAGS += -DNB_LZ4_SONAME='"$(LZ4_SONAME)"'
# optional part, probed: CCP4's C library (Debian's libccp4-dev: cmtzlib,
# csymlib) for nb-hkl's MTZ and mmCIF structure factors (formats/mtz.c,
# formats/ccp4.c).  Linked, not loaded: only nb-hkl links it (TOOL_LDLIBS),
# it needs nothing but libm, and MTZ files are read with CCP4's own library,
# never ours.  csymlib's syminfo.lib: the one found here unless $SYMINFO or
# $CLIBD say otherwise.  Without it nb-hkl refuses MTZ and mmCIF files.
HAVE_CCP4 ?= $(shell printf '\043include <ccp4/cmtzlib.h>\nint main(void){return MtzNref(0);}\n' | \
               $(CC) -x c - -lccp4c -o /dev/null 2>/dev/null && echo 1 || echo 0)
ifeq ($(HAVE_CCP4),1)
CCP4_SYMINFO ?= $(firstword $(wildcard /usr/share/ccp4/syminfo.lib /usr/local/share/ccp4/syminfo.lib) /usr/share/ccp4/syminfo.lib)
NB_CFLAGS += -DNB_HAVE_CCP4 -DNB_CCP4_SYMINFO='"$(CCP4_SYMINFO)"'
CCP4_LDLIBS := -lccp4c
endif

# dlopen (libtiff, libhdf5, liblz4): in libc itself from glibc 2.34
NB_LDLIBS += -ldl

# optional part, probed: Open MPI's mpicc, for nb-fit across processes
# (mpirun -n K nb-fit; tools/nb_par.c, docs/architecture.md "nb-fit across
# processes").  Only nb_par.c is compiled with MPI's headers (-DNB_HAVE_MPI and
# mpicc --showme:compile) and only nb-fit (and the tests' par-check) link
# libmpi (--showme:link); without it nb_par is a single process.  --showme is
# Open MPI's: another MPI's mpicc counts as none.  MPICC= (empty) disables it.
MPICC ?= $(shell command -v mpicc 2>/dev/null)
MPI_LDLIBS := $(if $(strip $(MPICC)),$(shell $(MPICC) --showme:link 2>/dev/null))
ifneq ($(strip $(MPI_LDLIBS)),)
PAR_CFLAGS := -DNB_HAVE_MPI $(shell $(MPICC) --showme:compile 2>/dev/null)
else
PAR_CFLAGS :=
endif

BUILD   ?= build
BIN     ?= bin

# The layers, each a folder (docs/architecture.md): libnbcore (stream, plan,
# options), engine (the renderer: kernels, derivatives, CUDA; nb.h its public
# API; engine/physics the kernels' pixel physics, headers only), formats
# (files), cli (the tools' command-line code: --help, --version, the man
# pages; it prints and exits, which a library leaves to its caller), tools
# (the programs), fit (the fit: its Levenberg-Marquardt loop and likelihood,
# the reduction over processes the caller gives it).  libnb = libnbcore +
# engine + fit + the formats its API uses (NB_FORMATS below); cli is
# libnbcli, never in libnb.
CORE_SRC    := $(wildcard libnbcore/*.c)
FIT_SRC     := $(wildcard fit/*.c)
FORMATS_SRC := $(wildcard formats/*.c)
CLI_SRC     := $(wildcard cli/*.c)
ENGINE_SRC  := $(filter-out engine/nb_sim_fast.c engine/nb_sim_fast_grad.c engine/nb_sim_fast_adjoint.c engine/nb_sim_nocuda.c,$(wildcard engine/*.c))
LIB_SRC     := $(CORE_SRC) $(FORMATS_SRC)
CORE_OBJ    := $(CORE_SRC:%.c=$(BUILD)/%.o)
# the readers and writers libnb links (engine/nb_api_files.c calls them):
# nb-geom's -img/-mask (SMV), -panels (CrystFEL .geom, DIALS .expt) and
# -expt readers, the image registry (CBF, SMV, TIFF, raw float, an nb
# stream's IMAGE, NXmx) and every writer its entries name (nb-convert's:
# one-frame images, NXmx, model.expt and truth.jsonl, XDS.INP and .geom,
# the joins of shards' files), DIALS's reflection tables (the dataset fit's
# spots), with what they call; they need libz, libm and libdl alone
# (libtiff, libhdf5 and liblz4 are dlopened).  The other formats (MTZ and
# mmCIF with libccp4, HKL text, stol) stay the tools'.
NB_FORMATS  := registry image_read smv cbf tiff rawfloat json dials_expt crystfel_geom frame_write pgm png \
               dials_expt_write nxmx_read nxmx_frame nxmx_h5 h5_chunks nxmx nxmx_master bslz4 xds_inp truth_jsonl \
               dials_expt_join dials_refl msgpack
NB_FORMATS_OBJ := $(NB_FORMATS:%=$(BUILD)/formats/%.o)
FORMATS_OBJ := $(filter-out $(NB_FORMATS_OBJ),$(FORMATS_SRC:%.c=$(BUILD)/%.o))
CLI_OBJ     := $(CLI_SRC:%.c=$(BUILD)/%.o)
ENGINE_OBJ  := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
FIT_OBJ     := $(FIT_SRC:%.c=$(BUILD)/%.o)
NB_A        := $(BUILD)/libnb.a
FORMATS_A   := $(BUILD)/libnbformats.a
CLI_A       := $(BUILD)/libnbcli.a
# the tools and tests link all three, statically (cli first: it uses libnbcore;
# libnbformats holds the formats libnb does not, which may call those it does)
LIB         := $(CLI_A) $(FORMATS_A) $(NB_A)
SOVERSION   := $(firstword $(subst ., ,$(VERSION)))
NB_SO       := $(BUILD)/libnb.so.$(VERSION)

$(BUILD)/engine/%.o: LAYER_INC := -Iengine -Iengine/physics
# the engine's one door to formats/ (docs/architecture.md; tests/lint/source-limits.py)
$(BUILD)/engine/nb_api_files.o: LAYER_INC := -Iengine -Iengine/physics -Iformats
$(BUILD)/formats/%.o: LAYER_INC := -Iformats
$(BUILD)/cli/%.o: LAYER_INC := -Icli
$(BUILD)/fit/%.o: LAYER_INC := -Iengine -Iengine/physics -Ifit
# DIALS's tables tied to a plan's frames for the dataset fit (--spots): its one reader of files
$(BUILD)/fit/nb_fit_spots.o: LAYER_INC := -Iengine -Iengine/physics -Ifit -Iformats
$(BUILD)/tools/%.o: LAYER_INC := -Icli -Iengine -Iengine/physics -Ifit -Iformats

TOOLS   := nb-geom nb-hkl nb-sim nb-noise nb-convert nb-bench nb-fit nb-math nb-amorphous
TOOL_BINS := $(TOOLS:%=$(BIN)/%)

# the fast kernel is compiled once per instruction set and picked at run
# time (one binary for any x86-64), its image pass and its derivative pass
# apart (they compile in parallel); -g1: line tables only, as the debug
# information of their inlined lanes took a quarter of the build
# FAST_OPT: their optimisation; the sanitizer build (check-asan) sets
# FAST_OPT=$(ASAN_FAST_OPT), its own -O1: instrumented at -O3 they took most of
# its build (one variant's derivative pass 236 s of CPU at -O3 against 72 s at
# -O1; ASan's checks are the same, and -O1 is the level ASan asks for)
FAST_OPT ?= -O3
FAST_CFLAGS := $(FAST_OPT) -fno-math-errno -fno-trapping-math -ffp-contract=fast -Wno-psabi -g1
FAST_ISAS := generic
ARCH := $(shell uname -m)
ifeq ($(ARCH),x86_64)
NB_CFLAGS += -DNB_HAVE_X86_VARIANTS
FAST_ISAS += avx2
# the adjoint sweep's values carry 13 tangents (engine/nb_fast_adjoint.inc):
# their copies, hundreds of bytes, in vector moves where GCC's default was a
# rep movsq (1024^2 on AVX2: 8.6 to 6.9 ms); clang has no such option
ADJ_CFLAGS ?= $(if $(shell $(CC) --version 2>/dev/null | grep -q clang && echo clang),,\
              -mmemcpy-strategy=vector_loop:-1:noalign -mmemset-strategy=vector_loop:-1:noalign)
# the AVX-512 variant where the building machine runs it, or when asked
# (NB_AVX512=1: a build for other machines, a package; NB_AVX512=0: never):
# a quarter of the build's time, and unused on a CPU without it (the others'
# fast path is the AVX2 one)
NB_AVX512 ?= $(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null && grep -qw avx512bw /proc/cpuinfo && echo 1 || echo 0)
ifeq ($(NB_AVX512),1)
FAST_ISAS += avx512
NB_CFLAGS += -DNB_HAVE_AVX512_VARIANT
endif
# beside them the portable variant is a fallback: its derivatives in one
# instantiation (engine/nb_sim_fast_grad.c), the build's time kept short
GRAD_generic := -DNB_FAST_GRAD_LEAN
endif
ISA_generic := -DNB_FAST_W=4
ISA_avx2    := -mavx2 -mfma -DNB_FAST_W=8
ISA_avx512  := -mavx512f -mavx512dq -mavx512vl -mavx512bw -mprefer-vector-width=512 -DNB_FAST_W=16
ENGINE_OBJ += $(FAST_ISAS:%=$(BUILD)/engine/nb_sim_fast_%.o) $(FAST_ISAS:%=$(BUILD)/engine/nb_sim_fast_grad_%.o) \
              $(FAST_ISAS:%=$(BUILD)/engine/nb_sim_fast_adjoint_%.o)

# optional part, probed: the CUDA backend of nb-sim when nvcc is found
# (sm_80 and sm_90 code plus PTX for later GPUs); NVCC= (empty) disables it
NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
# nb-noise's counting too (--device cuda)
NOISE_OBJ := $(BUILD)/tools/nb-noise.o
ifneq ($(strip $(NVCC)),)
ENGINE_OBJ += $(BUILD)/engine/nb_sim_cuda.o
NOISE_OBJ += $(BUILD)/tools/nb_noise_cuda.o
CUDA_LDLIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -lstdc++ -ldl -lrt -lpthread
else
ENGINE_OBJ += $(BUILD)/engine/nb_sim_nocuda.o
NOISE_OBJ += $(BUILD)/tools/nb_noise_nocuda.o
CUDA_LDLIBS :=
endif

HEADERS := $(wildcard libnbcore/*.h) $(wildcard libnbcore/*.inc) $(wildcard libnbcore/*.cuh) $(wildcard formats/*.h) \
           $(wildcard engine/*.h) $(wildcard engine/*.inc) $(wildcard engine/physics/*.h) $(wildcard engine/physics/*.inc) \
           $(wildcard cli/*.h) $(wildcard fit/*.h) $(wildcard tools/*.h)

.SECONDARY:
.PHONY: all check check-gpu check-dials check-built demo-built lint test-unit test-cli test-parity demo deps bench install clean check-asan man fuzz fuzz-regressions fuzz-regressions-built ptxas print-dlopen print-syminfo

all: $(TOOL_BINS) $(NB_SO)

# rebuild everything when the flags change (a probe found libtiff, OPT=...)
FLAGS_STAMP := $(BUILD)/.flags-$(shell echo '$(CC) $(NB_CFLAGS) $(CFLAGS) $(NB_LDLIBS) $(LDFLAGS) $(NVCC) $(CUDA_ARCH) $(PAR_CFLAGS) $(MPI_LDLIBS) $(FAST_CFLAGS) $(ADJ_CFLAGS)' | cksum | cut -d' ' -f1)
# made when the Makefile is read, not by a rule: under .SECONDARY a missing
# target without prerequisites does not put what depends on it out of date
ifeq ($(wildcard $(FLAGS_STAMP)),)
$(shell mkdir -p $(BUILD) && rm -f $(BUILD)/.flags-* && touch $(FLAGS_STAMP))
endif

$(BUILD)/%.o: %.c $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(NB_CFLAGS) $(LAYER_INC) $(CFLAGS) -c $< -o $@

$(NB_A): $(CORE_OBJ) $(ENGINE_OBJ) $(FIT_OBJ) $(NB_FORMATS_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(FORMATS_A): $(FORMATS_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(CLI_A): $(CLI_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# the engine as a shared library (libnb.so.VERSION, soname libnb.so.MAJOR):
# what examples/render.py loads and other programs link (nb.h, nb.pc); its
# dynamic symbols nb.h's functions alone, version NB_1 (engine/libnb.map:
# the CUDA runtime's and libnbcore's stay inside; tests/abi/check-exports.sh)
$(NB_SO): $(CORE_OBJ) $(ENGINE_OBJ) $(FIT_OBJ) $(NB_FORMATS_OBJ) engine/libnb.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libnb.so.$(SOVERSION) -Wl,--version-script=engine/libnb.map -fopenmp -o $@ \
	    $(filter %.o,$^) $(NB_LDLIBS) $(CUDA_LDLIBS) $(LDFLAGS)
	ln -sf $(notdir $@) $(BUILD)/libnb.so.$(SOVERSION)
	ln -sf $(notdir $@) $(BUILD)/libnb.so

# the dual numbers' derivative lanes want the vectoriser: -O3 (the arithmetic,
# contraction off as everywhere, stays the double path's bit for bit)
$(BUILD)/engine/nb_sim_grad.o: engine/nb_sim_grad.c $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(NB_CFLAGS) $(LAYER_INC) $(CFLAGS) -O3 -c $< -o $@

# the bit shuffle of NXmx's bitshuffle+LZ4 chunks wants its loops unrolled
# (-O3: a third faster than -O2)
$(BUILD)/formats/bslz4.o: formats/bslz4.c $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(NB_CFLAGS) $(LAYER_INC) $(CFLAGS) -O3 -c $< -o $@

$(BUILD)/engine/nb_sim_fast_%.o: engine/nb_sim_fast.c $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(NB_CFLAGS) $(LAYER_INC) $(CFLAGS) $(FAST_CFLAGS) $(ISA_$*) -DNB_FAST_NAME=nb_render_fast_$* -c $< -o $@

$(BUILD)/engine/nb_sim_fast_grad_%.o: engine/nb_sim_fast_grad.c $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(NB_CFLAGS) $(LAYER_INC) $(CFLAGS) $(FAST_CFLAGS) $(ISA_$*) $(GRAD_$*) -DNB_FAST_GRAD_NAME=nb_render_fast_grad_$* -c $< -o $@

$(BUILD)/engine/nb_sim_fast_adjoint_%.o: engine/nb_sim_fast_adjoint.c $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(NB_CFLAGS) $(LAYER_INC) $(CFLAGS) $(FAST_CFLAGS) $(ISA_$*) $(ADJ_CFLAGS) -DNB_FAST_ADJ_NAME=nb_render_fast_adjoint_$* -c $< -o $@

NVCC_SIM_FLAGS := -std=c++17 -O3 -Xcompiler -fopenmp,-fPIC -Ilibnbcore -Iengine -Iengine/physics -DNB_VERSION='"$(VERSION)"'
$(BUILD)/engine/nb_sim_cuda.o: engine/nb_sim_cuda.cu $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_SIM_FLAGS) $(CUDA_ARCH) -c $< -o $@

# a pixel's counts on the GPU are the CPU's: the same code, compiled as the
# host's is, without contracting a * b + c into one rounding (--fmad=false)
NVCC_NOISE_FLAGS := -std=c++17 -O3 --fmad=false -Xcompiler -fPIC -Ilibnbcore -Itools
$(BUILD)/tools/nb_noise_cuda.o: tools/nb_noise_cuda.cu $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_NOISE_FLAGS) $(CUDA_ARCH) -c $< -o $@

# every CUDA kernel's registers, stack and spill stores as ptxas counts them,
# for each architecture built, on a machine with nvcc and no GPU (the
# objects are thrown away; bench/ptxas-table.sh makes a table of the log)
ptxas:
	@test -n "$(strip $(NVCC))" || { echo "make ptxas: no nvcc (CUDA's compiler) here" >&2; exit 1; }
	@mkdir -p $(BUILD)/ptxas
	$(NVCC) $(NVCC_SIM_FLAGS) $(CUDA_ARCH) -Xptxas -v -c engine/nb_sim_cuda.cu -o $(BUILD)/ptxas/nb_sim_cuda.o
	$(NVCC) $(NVCC_NOISE_FLAGS) $(CUDA_ARCH) -Xptxas -v -c tools/nb_noise_cuda.cu -o $(BUILD)/ptxas/nb_noise_cuda.o

# what bench/gpu-carry.sh carries beside the tools: the libraries they load
# by soname when a file needs one, and CCP4's space-group table
print-dlopen:
	@echo $(if $(filter 1,$(HAVE_TIFF)),$(TIFF_SONAME)) $(if $(filter 1,$(HAVE_HDF5)),$(HDF5_SONAME)) $(LZ4_SONAME)
print-syminfo:
	@echo $(if $(filter 1,$(HAVE_CCP4)),$(CCP4_SYMINFO))

$(BIN)/nb-noise: $(NOISE_OBJ) $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(NB_CFLAGS) $(CFLAGS) -o $@ $(NOISE_OBJ) $(LIB) $(NB_LDLIBS) $(CUDA_LDLIBS) $(LDFLAGS)

# a program and its parts beside it, tools/nb_<program>_*.c (nb-convert's
# writers, nb-bench's runner ...)
tool_parts = $(patsubst %.c,$(BUILD)/%.o,$(wildcard tools/$(subst -,_,$(1))_*.c))
.SECONDEXPANSION:
$(BIN)/%: $(BUILD)/tools/%.o $$(call tool_parts,$$*) $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(NB_CFLAGS) $(CFLAGS) -o $@ $(filter %.o,$^) $(LIB) $(NB_LDLIBS) $(CUDA_LDLIBS) $(TOOL_LDLIBS) $(LDFLAGS)

# nb-hkl reads MTZ and mmCIF files with CCP4's library; nb-fit takes space
# groups' operators from it (--space-group)
$(BIN)/nb-hkl: TOOL_LDLIBS := $(CCP4_LDLIBS)

# nb-fit across processes: its parallel layer, the one object compiled with
# MPI's headers, and libmpi when mpicc was found
$(BUILD)/tools/nb_par.o: tools/nb_par.c $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(NB_CFLAGS) $(LAYER_INC) $(PAR_CFLAGS) $(CFLAGS) -c $< -o $@

$(BIN)/nb-fit: $(BUILD)/tools/nb_par.o
$(BIN)/nb-fit: TOOL_LDLIBS := $(CCP4_LDLIBS) $(MPI_LDLIBS)

# ---- tests ---------------------------------------------------------------
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TEST_TOOLS := $(BUILD)/tests/nb-imgcmp $(BUILD)/tests/nb-smvcmp $(BUILD)/tests/xds-plugin-read \
              $(BUILD)/tests/par-check $(BUILD)/tests/par-check-single

$(BUILD)/tests/test_%: tests/unit/test_%.c tests/unit/tap.h tests/unit/plan_words.h $(LIB) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(NB_CFLAGS) $(CFLAGS) -Icli -Iengine -Iengine/physics -Ifit -Iformats -Itests/unit -o $@ $< $(LIB) $(NB_LDLIBS) $(CUDA_LDLIBS) $(TEST_LDLIBS)

# the MTZ writer's test reads its files back with CCP4's library
$(BUILD)/tests/test_mtz: TEST_LDLIBS += $(CCP4_LDLIBS)

$(BUILD)/tests/nb-%: tests/parity/nb-%.c $(LIB) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(NB_CFLAGS) $(CFLAGS) -Iformats -o $@ $< $(LIB) $(NB_LDLIBS)

# an XDS plugin's reader for tests/cli/durin.bats (dlopen; the plugin is not built here)
$(BUILD)/tests/xds-plugin-read: tests/tools/xds_plugin_read.c $(LIB) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(NB_CFLAGS) $(CFLAGS) -Iformats -o $@ $< $(LIB) $(NB_LDLIBS) -ldl -lpthread

# nb-fit's parallel layer run alone or under mpirun, for tests/cli/mpi.bats:
# as this build has it (with MPI where mpicc was found), and without MPI (how
# a build without mpicc answers mpirun)
$(BUILD)/tests/par-check: tests/tools/par_check.c $(BUILD)/tools/nb_par.o $(LIB) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(NB_CFLAGS) $(CFLAGS) $(filter -DNB_HAVE_MPI,$(PAR_CFLAGS)) -Itools -o $@ $< $(BUILD)/tools/nb_par.o \
	    $(LIB) $(NB_LDLIBS) $(MPI_LDLIBS)

$(BUILD)/tests/par-check-single: tests/tools/par_check.c tools/nb_par.c $(LIB) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(NB_CFLAGS) $(CFLAGS) -Itools -o $@ tests/tools/par_check.c tools/nb_par.c $(LIB) $(NB_LDLIBS)

# deps first, then a fresh make, so the probes above see what deps installed
check: deps
	@$(MAKE) --no-print-directory check-built

check-built: all $(UNIT_BINS) $(TEST_TOOLS)
	@tests/run-all.sh

# needs no build: it reads tests/cli/*.bats (tests/lint/bats-checks.py)
lint:
	@tests/run-all.sh lint

test-unit: all $(UNIT_BINS)
	@tests/run-all.sh unit

test-cli: all
	@tests/run-all.sh cli

test-parity: all $(TEST_TOOLS)
	@tests/run-all.sh parity

test-python: all
	@tests/run-all.sh python

# the CUDA backend proven on this machine's GPU: the golden parity with nb-sim
# forced onto it, and gpu.bats; fails without a GPU (tests/gpu-check.sh)
check-gpu: all $(TEST_TOOLS)
	@tests/gpu-check.sh

# DIALS's own processing of nb's files against the truth (tests/dials/truth-gates.sh): too slow
# for `make check`, whose tests/cli/truth.bats reads every field back
check-dials: deps
	@$(MAKE) --no-print-directory all
	@tests/dials/truth-gates.sh

# ---- sanitizers: the whole suite on an ASan + UBSan build (build-asan/, bin-asan/)
# -fexpensive-optimizations: GCC's pass that clears the AVX registers' upper
# halves on leaving a function (vzeroupper) runs only with it, which -O1 lacks;
# without it every SSE instruction after a kernel ran (libm's, the fit's)
# paid the AVX-SSE transition: the dataset fit's global stage took 8.5 s
# sanitized on the AVX2 kernels and 0.8 s on the portable one
ASAN_FAST_OPT := -fexpensive-optimizations
ASAN_FLAGS := -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=all
check-asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan BIN=bin-asan NVCC= FORTIFY= FAST_OPT=$(ASAN_FAST_OPT) CFLAGS="-g1 -O1 $(ASAN_FLAGS)" \
	    build-asan/.built-asan
	@NB_BIN=$(CURDIR)/bin-asan BUILD=build-asan NB_SANITIZED=1 \
	    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86 \
	    LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 tests/run-all.sh

# the tools, not libnb.so: the tests load the regular build's (api.bats, library.bats)
build-asan/.built-asan: $(TOOL_BINS) $(UNIT_BINS) $(TEST_TOOLS)
	@touch $@

# ---- fuzzing: libFuzzer targets for every parser (clang), tests/fuzz/ ------
# make fuzz [FUZZ_SECONDS=600] [FUZZ_TARGETS="stream smv"]: each target runs
# for FUZZ_SECONDS on its corpus (tests/fuzz/corpus/NAME, new inputs in
# tests/fuzz/out/NAME); a crash stops it and leaves crash-* in tests/fuzz/out.
FUZZ_TARGETS ?= stream hkl_text fdump smv geometry_files options sf_cif stol dials_refl h5_chunks nxmx_layout
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
              -Wno-unknown-pragmas -Wno-source-uses-openmp
FUZZ_LIB_SRC := $(LIB_SRC)
fuzz: fuzz-regressions
	@for t in $(FUZZ_TARGETS); do \
	    mkdir -p tests/fuzz/out/$$t; \
	    echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	    build-fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
	        -artifact_prefix=tests/fuzz/out/ tests/fuzz/out/$$t tests/fuzz/corpus/$$t 2>&1 | \
	        grep -E "^#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss|cov:|ERROR|SUMMARY" | tail -4 || exit 1; \
	done

# every input that once crashed, leaked or ran out of memory, run again first
# (CI runs this; without clang it says so and passes)
fuzz-regressions:
	@if ! command -v $(FUZZ_CC) >/dev/null 2>&1; then echo "fuzz: $(FUZZ_CC) is not installed; regressions not run"; \
	else $(MAKE) --no-print-directory fuzz-regressions-built; fi

fuzz-regressions-built: $(FUZZ_TARGETS:%=build-fuzz/fuzz_%)
	@for t in $(FUZZ_TARGETS); do \
	    [ -d tests/fuzz/regressions/$$t ] || continue; \
	    build-fuzz/fuzz_$$t -runs=1 tests/fuzz/regressions/$$t/* >/dev/null 2>&1 || \
	        { echo "fuzz: a regression input of $$t fails again"; exit 1; }; \
	    echo "fuzz: $$t regressions pass"; \
	done

# the library's sources compiled once for every target (-fsanitize=fuzzer-no-link:
# instrumented, without libFuzzer's main), then each target links them
FUZZ_COMPILE = $(FUZZ_CC) -std=c11 -D_GNU_SOURCE -Ilibnbcore -Iformats -DNB_VERSION='"$(VERSION)"' \
    $(filter -DNB_HAVE_TIFF -DNB_TIFF_SONAME=% -DNB_HAVE_HDF5 -DNB_HDF5_SONAME=% -I%,$(NB_CFLAGS))
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=build-fuzz/%.o)
build-fuzz/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_COMPILE) $(subst -fsanitize=fuzzer,-fsanitize=fuzzer-no-link,$(FUZZ_FLAGS)) -c $< -o $@

build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(FUZZ_LIB_OBJ) $(HEADERS)
	@mkdir -p build-fuzz
	$(FUZZ_COMPILE) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_LIB_OBJ) -lz -lm $(filter -ldl,$(NB_LDLIBS))

# ---- set-up and demo -------------------------------------------------------
deps:
	@tools/install-deps.sh

demo: deps
	@$(MAKE) --no-print-directory demo-built

# DEMO: where the demo's files go
DEMO ?= demo
demo-built: all
	@mkdir -p $(DEMO)
	$(BIN)/nb-geom -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 1024 \
	    -default_F 100 | $(BIN)/nb-hkl | $(BIN)/nb-sim | $(BIN)/nb-convert -o $(DEMO)/floatimage.bin -o $(DEMO)/preview.png
	@echo "demo: wrote $(DEMO)/floatimage.bin (1024 x 1024 float32 photons/pixel)"
	@echo "demo: wrote $(DEMO)/preview.png, a picture of it: open $(abspath $(DEMO)/preview.png)"

# ---- man pages: generated from each tool's --help source (cli/nb_cli.c) ---
man: all
	@mkdir -p man
	@mkdir -p man/man1
	@for t in $(TOOLS); do $(BIN)/$$t --help-man > man/man1/$$t.1 || exit 1; done
	@echo "man: wrote $(TOOLS:%=man/man1/%.1) (read them with: man -M man nb-sim)"

# ---- benchmarks: timed, so never part of check (bench/README.md) ----------
#   make bench                           our pipeline on every configuration
#   make bench NB_REF=/path/to/nanoBragg  and the reference binary, interleaved
bench: all
	$(BIN)/nb-bench --threads 1,2 --reps 5 --json bench/results.json $(if $(NB_REF),--ref $(NB_REF))

# ---- install -----------------------------------------------------------------
#   make install PREFIX=DIR [DESTDIR=...]: the tools and the drop-in (bin/), the
#   engine library (lib/libnb.so.VERSION and its links, lib/libnb.a), its
#   header (include/nb.h) and pkg-config file (lib/pkgconfig/nb.pc), a man page
#   for every program, and share/nb: examples/ (render.c, render_flags.c, render_F.c, render_noise.c,
#   render_options.c, render_params.c, render_expt.c, image_files.c, fit_arrays.c, fit_dataset.c, render.py, torch_refine.py, P1.hkl,
#   tiles.geom, helices.pdb, helices.py, helices.mtz and helices_mtz.py), pipelines/ (sweep.mk, parallel-sweep,
#   slurm-sweep.sbatch, slurm-fit.sbatch), the Python package nb in PYTHONDIR (below), bench/ (nb-bench's inputs), amorphous/ (nb-amorphous's
#   tables of water, ice, air and a cryo-oil, and the script that makes them) and dataset/
#   (bench/dataset's tools that simulate, draw, start and judge a refined stills dataset, its sigmas and its spot score:
#   they find the tools on PATH); the drop-ins nanobragg and nonbragg beside the tools
# nb-amorphous's tables (examples/amorphous/README.md: what they are made of)
AMORPHOUS_TABLES := examples/amorphous/water.stol examples/amorphous/ice.stol examples/amorphous/air.stol \
                    examples/amorphous/oil.stol
# bench/dataset's tools a user measures a refinement with (bench/README.md, "Drawn datasets")
DATASET_TOOLS := $(addprefix bench/dataset/,simulate.sh perturb.py evaluate.py wilson_hkl.py draw.py dials_start.py \
                   run-drawn.sh drawn_table.py sigmas.py sigma-runs.sh score_contrast.py)
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
# the Python package nb (python/nb): where Debian's python3 looks for a prefix's packages
# (/usr: lib/python3/dist-packages; another prefix: lib/python3.X/dist-packages, on the path
# for /usr/local); PYTHONPATH=$(PYTHONDIR) for any other prefix
NB_PYTHON ?= $(firstword $(wildcard /usr/bin/python3) python3)
PYTHON_X_Y := $(shell $(NB_PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)
PYTHONDIR ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(PREFIX)/lib/python$(PYTHON_X_Y)/dist-packages)
PYTHON_PACKAGE := python/nb/__init__.py python/nb/_lib.py python/nb/torch.py
DATADIR ?= $(PREFIX)/share/nb
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(LIBDIR)/pkgconfig \
	    $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(DATADIR)/examples $(DESTDIR)$(DATADIR)/pipelines $(DESTDIR)$(DATADIR)/bench \
	    $(DESTDIR)$(DATADIR)/amorphous $(DESTDIR)$(DATADIR)/dataset
	install -m 755 $(TOOL_BINS) pipelines/nanobragg pipelines/nonbragg $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(TOOLS:%=man/man1/%.1) man/man1/nanobragg.1 man/man1/nonbragg.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 755 $(NB_SO) $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(NB_SO)) $(DESTDIR)$(LIBDIR)/libnb.so.$(SOVERSION)
	ln -sf $(notdir $(NB_SO)) $(DESTDIR)$(LIBDIR)/libnb.so
	install -m 644 $(NB_A) $(DESTDIR)$(LIBDIR)/
	install -m 644 engine/nb.h $(DESTDIR)$(INCLUDEDIR)/
	@# nb.pc names this install's PREFIX: made here, never kept in the build tree
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@VERSION@|$(VERSION)|' \
	    -e 's|@LIBS_PRIVATE@|$(strip -fopenmp -lz -lm -ldl $(CUDA_LDLIBS))|' nb.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/nb.pc
	chmod 644 $(DESTDIR)$(LIBDIR)/pkgconfig/nb.pc
	install -m 644 examples/render.c examples/render_flags.c examples/render_F.c examples/render_noise.c \
	    examples/render_options.c examples/render_params.c examples/render_expt.c examples/image_files.c \
	    examples/fit_arrays.c examples/fit_dataset.c examples/P1.hkl examples/tiles.geom examples/helices.pdb \
	    examples/helices.mtz $(DESTDIR)$(DATADIR)/examples/
	install -m 755 examples/render.py examples/helices.py examples/helices_mtz.py examples/torch_refine.py \
	    $(DESTDIR)$(DATADIR)/examples/
	install -m 644 pipelines/sweep.mk pipelines/slurm-sweep.sbatch pipelines/slurm-fit.sbatch $(DESTDIR)$(DATADIR)/pipelines/
	install -m 755 pipelines/parallel-sweep $(DESTDIR)$(DATADIR)/pipelines/
	install -m 644 tests/golden/inputs/P1.hkl $(DESTDIR)$(DATADIR)/bench/P1.hkl
	install -m 644 $(AMORPHOUS_TABLES) examples/amorphous/README.md $(DESTDIR)$(DATADIR)/amorphous/
	install -m 755 examples/amorphous/make-tables.py $(DESTDIR)$(DATADIR)/amorphous/
	install -m 755 $(DATASET_TOOLS) $(DESTDIR)$(DATADIR)/dataset/
	install -m 644 bench/dataset/find-tools.sh $(DESTDIR)$(DATADIR)/dataset/
	install -d $(DESTDIR)$(PYTHONDIR)/nb
	install -m 644 $(PYTHON_PACKAGE) $(DESTDIR)$(PYTHONDIR)/nb/
	@# the package finds this install's libnb.so first: its LIBDIR, made here
	printf '"""Where make install put libnb.so (nb/_lib.py looks here first)."""\nLIBDIR = "%s"\n' \
	    '$(LIBDIR)' > $(DESTDIR)$(PYTHONDIR)/nb/_paths.py
	chmod 644 $(DESTDIR)$(PYTHONDIR)/nb/_paths.py

clean:
	rm -rf $(BUILD) $(BIN) build-asan bin-asan build-fuzz demo
