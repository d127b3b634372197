# sweep.mk - a rotation series as a Makefile workflow: one plan, M shards of
# frames rendered in parallel by make -j, every frame written as a numbered
# file.  The frames are bit for bit those of a single run, whatever M and -j.
#
#   make -f pipelines/sweep.mk -j3 SHARDS=3 FRAMES=30 OUT=sweep \
#        GEOM="-cell 78 78 37 90 90 90 -lambda 1 -N 10 -distance 150 -detpixels 512 \
#              -pixel 0.172 -default_F 100 -osc 1 -phisteps 4"
#
# Variables:
#   GEOM     nb-geom flags of one frame (everything but -nframes)
#   PLAN     an existing plan (nb-geom ... -nframes N | nb-hkl -o PLAN) to use
#            instead of GEOM and FRAMES
#   FRAMES   frames in the series (default 10)
#   SHARDS   how many nb-sim processes share them (default 2)
#   OUT      output directory (default sweep); the plan is OUT/plan.nbs
#   NAME     file name template in OUT (default img_###.cbf; the extension
#            picks the format, the '#' run the frame number)
#   NOISE    nb-noise flags (default: -seed 1); NOISE=off for photons only
#   THREADS  nb-sim --threads of each shard.  Default: under make -jN (N > 1,
#            or -j) a share of the cores, nproc / SHARDS (at least 1), so that
#            the shards running side by side do not each start a thread per
#            core; without -j, empty: all cores (OpenMP's choice)
#   NB       directory of the nb tools, with a trailing / (default: $NB_BIN/,
#            else bin/ of this tree, else PATH)
#
# Targets: all (default), plan, clean.  Rules: OUT/plan.nbs from GEOM (nb-geom
# | nb-hkl), OUT/.shard-K-of-M from the plan (nb-sim --shard K/M | nb-noise |
# nb-convert), OUT/.done when every shard is.  A failing pipe fails make with
# the status of the stage that caused it (ROOT_CAUSE below).

HERE   := $(dir $(lastword $(MAKEFILE_LIST)))
NB     ?= $(if $(NB_BIN),$(NB_BIN)/,$(if $(wildcard $(HERE)../bin/nb-sim),$(abspath $(HERE)../bin)/,))
GEOM   ?= -cell 78 78 37 90 90 90 -lambda 1 -N 10 -distance 150 -detpixels 256 -pixel 0.172 -default_F 100 -osc 1 -phisteps 2
FRAMES ?= 10
SHARDS ?= 2
OUT    ?= sweep
NAME   ?= img_\#\#\#.cbf
NOISE  ?= -seed 1
NCPU   := $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
# evaluated in the recipe, where MAKEFLAGS holds -j (and the job server)
PARALLEL = $(filter -j%,$(filter-out -j1,$(MAKEFLAGS)))$(findstring jobserver,$(MAKEFLAGS))
THREADS ?= $(if $(PARALLEL),$(shell n=$$(( $(NCPU) / $(SHARDS) )); echo $$(( n > 0 ? n : 1 ))))

SHARD_IDS := $(shell seq 1 $(SHARDS))
SHARD_STAMPS := $(foreach k,$(SHARD_IDS),$(OUT)/.shard-$(k)-of-$(SHARDS))
NOISE_STAGE := $(if $(filter off,$(NOISE)),,| $(NB)nb-noise -q $(NOISE))

# A failing pipe fails with its root cause's status (make shows it): that of
# its first stage that failed other than by SIGPIPE (141: a later stage
# stopped reading; the tools die of it quietly), else of its first failing
# stage.  Not pipefail's last failing stage: after nb-sim fails the stages
# after it stop quietly with its status (the ABORT record it leaves on the
# pipe), but after nb-sim is killed nb-convert fails with 1, on the truncated
# stream.  Put $(ROOT_CAUSE) after every pipe.
SHELL := /bin/bash
ROOT_CAUSE = s=($${PIPESTATUS[@]}); for c in $${s[@]/141/0} $${s[@]}; do [ $$c = 0 ] || exit $$c; done

.PHONY: all plan clean
.DELETE_ON_ERROR:

all: $(OUT)/.done

plan: $(OUT)/plan.nbs

$(OUT)/plan.nbs: $(PLAN)
	@mkdir -p $(OUT)
ifneq ($(PLAN),)
	cp $(PLAN) $@
else
	$(NB)nb-geom $(GEOM) -nframes $(FRAMES) -q | $(NB)nb-hkl -q -o $@; $(ROOT_CAUSE)
endif

# one shard: its block of frames, noised by (seed, frame), written by frame number
$(OUT)/.shard-%-of-$(SHARDS): $(OUT)/plan.nbs
	$(NB)nb-sim -q $(if $(THREADS),--threads $(THREADS)) --shard $*/$(SHARDS) $< $(NOISE_STAGE) | (cd $(OUT) && $(NB)nb-convert -q -o '$(NAME)'); $(ROOT_CAUSE)
	@touch $@

$(OUT)/.done: $(SHARD_STAMPS)
	@touch $@
	@echo "sweep.mk: $(OUT)/ from $(SHARDS) shards"

clean:
	rm -rf $(OUT)
