# kreflect: a Kubernetes reflector for edge devices.
#
#   make deps        install the Debian packages building needs (as root) and fetch mbedTLS
#   make             build/kreflect (x86_64, static, stripped)
#   make install     PREFIX=/usr/local DESTDIR= TARGET=x86_64: binary, man page, header,
#                    libraries, pkg-config file
#   make test-deps   the test-only packages, the reference peers and client-node (make test runs it)
#   make cross       build/aarch64/kreflect and build/armv7/kreflect
#   make test        every test suite: host, sanitizers, TLS proof, cross under qemu
#   make realapi     fetch and build the real API server tests/realapi/ runs against
#   make test-cross  unit tests and TLS proof for aarch64 and armv7 under qemu-user
#   make demo        run kreflect against the bundled test API server
#   make check-symbols | lint | size | clean
#
# One target per sub-make: TARGET=x86_64 (default, musl), aarch64, armv7 (musl
# cross) or asan (clang with AddressSanitizer + UndefinedBehaviorSanitizer on
# glibc, for tests only). PORT=posix chooses port/posix/; PORT=sim the
# deterministic simulation (port/sim/), built into build/sim/ (make sim).

TARGET ?= x86_64
PORT ?= posix
V ?= 0
Q := $(if $(filter 1,$(V)),,@)

# Sub-makes run in parallel on every core unless the caller chose -j itself.
SUBMAKE = $(MAKE) --no-print-directory $(if $(findstring -j,$(MAKEFLAGS)),,-j$(shell nproc))

VERSION := $(shell sed -n 's/^\#define KR_VERSION "\(.*\)"/\1/p' src/kreflect.h)

# --- dependencies ---------------------------------------------------------------

# What `make`, `make cross`, `make install` and `make demo` need: the musl
# compilers, jsmn, python3 (the compressed --help is generated; the demo's API
# server), openssl (the demo server's certificates), dpkg-dev and bzip2 (the
# mbedTLS source package), binutils (strip, ar), pkg-config (the library's users).
DEB_PACKAGES := musl-tools gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf \
	musl-dev:arm64 musl-dev:armhf libjsmn-dev python3 openssl bzip2 dpkg-dev \
	binutils pkg-config
# What only the tests need (make test-deps): qemu-user (ARM builds), clang and
# its runtime (sanitizer builds), valgrind, cppcheck (lint), file, strace,
# procps, curl, prometheus (promtool), python3-yaml and yamllint (k8s-sidecar
# suite), groff-base and man-db (the man page check), systemd (systemd-analyze
# verify of the example unit), python3-kubernetes (the serve suite's client).
TEST_DEB_PACKAGES := qemu-user clang libclang-rt-14-dev valgrind cppcheck file \
	strace procps curl prometheus python3-yaml yamllint groff-base man-db systemd \
	python3-kubernetes
DEPS := build/deps
APT_DIR := $(DEPS)/apt
# MBEDTLS_DIR=PATH on the command line: an mbedTLS 3.6 source tree already
# there (a package recipe's second download) instead of the one make deps fetches.
ifeq ($(origin MBEDTLS_DIR),command line)
MBEDTLS_STAMP := $(MBEDTLS_DIR)/include/mbedtls/build_info.h
else
MBEDTLS_DIR := $(DEPS)/mbedtls
MBEDTLS_STAMP := $(MBEDTLS_DIR)/.kreflect-extracted
endif
# jsmn's single header: Debian's, or JSMN_SRC=PATH (a package recipe's copy).
JSMN_SRC ?= /usr/include/jsmn.h
JSMN_H := build/include/jsmn.h

# --- per-target toolchain ----------------------------------------------------------

ifeq ($(TARGET),x86_64)
CC := x86_64-linux-musl-gcc
CROSS_COMPILE :=
QEMU :=
ARCH_FLAGS :=
else ifeq ($(TARGET),aarch64)
CC := aarch64-linux-musl-gcc
CROSS_COMPILE := aarch64-linux-gnu-
QEMU := qemu-aarch64
ARCH_FLAGS :=
# 4 KiB pages, as on every aarch64 Linux kernel we target: no 64 KiB file padding.
ARCH_LDFLAGS := -Wl,-z,max-page-size=4096
else ifeq ($(TARGET),armv7)
CC := arm-linux-musleabihf-gcc
CROSS_COMPILE := arm-linux-gnueabihf-
QEMU := qemu-arm
ARCH_FLAGS := -march=armv7-a -mfpu=vfpv3-d16 -mfloat-abi=hard -mthumb
else ifeq ($(TARGET),asan)
CC := clang
CROSS_COMPILE :=
QEMU :=
ARCH_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer -g
else ifeq ($(TARGET),fuzz)
CC := clang
CROSS_COMPILE :=
QEMU :=
ARCH_FLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer -g
else
$(error unknown TARGET=$(TARGET): use x86_64, aarch64, armv7, asan or fuzz)
endif

# Smaller builds (config/README.md "Leaving features out"). WITHOUT="listen listen_tls sidecar state
# proxy discovery hooks dir kubeconfig dns full_help gzip sandbox" leaves those features out
# (config/kreflect_config.h's KR_WITH_*: their flags then say "not built in"); PROFILE=tiny
# is the gateway build: TLS 1.3 only with ECDSA P-256, X25519 and one AEAD
# (config/mbedtls_config_tiny.h), the compile-time resource table only, none of those
# features (flags or in-cluster instead of a kubeconfig, IP addresses instead of names, a
# short --help), capacities for ~100 objects (config/tiny.h). Each gets its own build
# directory, mbedTLS included: build/<target>-tiny/.
PROFILE ?=
ifeq ($(PROFILE),tiny)
WITHOUT := listen sidecar state proxy discovery hooks dir kubeconfig dns full_help gzip sandbox
MBEDTLS_CONFIG := config/mbedtls_config_tiny.h
PROFILE_CPPFLAGS := -DKR_USER_CONFIG='"$(CURDIR)/config/tiny.h"'
PROFILE_DIR := -tiny
# Position-dependent code: the static binary is loaded at a fixed address
# anyway (ELF type EXEC), and constant tables of pointers then stay in .rodata
# instead of a relocated .data.rel.ro (x86_64 -4 KB). Not for the default
# build, whose archives (make lib) may go into a user's PIE program.
PROFILE_CFLAGS := -fno-pie
PROFILE_LDFLAGS := -no-pie
# kreflect's own code at -Oz on x86_64 (text -1,360): for ~100 objects its speed
# does not matter; mbedTLS stays at -Os, so handshakes and records do not slow.
# Not on ARM, where -Oz made the text larger (aarch64 +448, armv7 +108 bytes).
ifeq ($(TARGET),x86_64)
PROFILE_KR_CFLAGS := -Oz
endif
else ifneq ($(PROFILE),)
$(error unknown PROFILE=$(PROFILE): use tiny, or none for the full build)
else ifneq ($(strip $(WITHOUT)),)
PROFILE_DIR := -without-$(subst $() ,-,$(sort $(strip $(WITHOUT))))
endif
MBEDTLS_CONFIG ?= config/mbedtls_config.h
KR_FEATURES := listen listen_tls sidecar state proxy discovery hooks dir kubeconfig dns full_help gzip sandbox
ifneq ($(filter-out $(KR_FEATURES),$(WITHOUT)),)
$(error WITHOUT: unknown feature $(filter-out $(KR_FEATURES),$(WITHOUT)): use $(KR_FEATURES))
endif
PROFILE_CPPFLAGS += $(foreach f,$(WITHOUT),-DKR_WITH_$(shell echo $(f) | tr a-z A-Z)=0)
# mbedTLS's server side is built only with TLS on --listen (config/mbedtls_config.h).
LISTEN_TLS_CPPFLAGS := $(if $(filter listen listen_tls,$(WITHOUT)),-DKR_WITH_LISTEN_TLS=0)

# Another port changes every object: its builds get their own directory.
ifeq ($(PORT),posix)
O := build/$(TARGET)$(PROFILE_DIR)
else ifeq ($(TARGET),x86_64)
O := build/$(PORT)
else
O := build/$(TARGET)-$(PORT)
endif
STRIP := $(CROSS_COMPILE)strip
SIZE := $(CROSS_COMPILE)size

MBEDTLS_CPPFLAGS := -isystem $(MBEDTLS_DIR)/include \
	-DMBEDTLS_CONFIG_FILE='"$(CURDIR)/$(MBEDTLS_CONFIG)"' $(LISTEN_TLS_CPPFLAGS) \
	-I$(CURDIR)/port/crypto
# No unwind tables: C needs none, and they are a tenth of the binary.
OPT := -Os -ffunction-sections -fdata-sections -fno-asynchronous-unwind-tables -fno-unwind-tables
# Link-time optimisation for the shipped binary (x86_64 -20 KB; kreflect and
# mbedTLS as one program). Objects are fat (machine code beside the GIMPLE), so
# only $(O)/kreflect links with LTO: tests and tools link as before.
LTO := -flto -ffat-lto-objects
LTO_LINK := -flto=auto
NO_LTO := -fno-lto
ifneq ($(filter asan fuzz,$(TARGET)),)
OPT := -O1 -ffunction-sections -fdata-sections
LINK_STATIC :=
LTO :=
LTO_LINK :=
NO_LTO :=
else
LINK_STATIC := -static
endif
# No -fstack-clash-protection: it guards frames larger than the guard page
# (VLAs, alloca: banned here, and no deep recursion) and cost 4 KB of binary.
HARDEN := -fstack-protector-strong -fno-plt
LDHARDEN := -Wl,-z,relro,-z,now,-z,noexecstack -Wl,--build-id=none

WARN := -Wall -Wextra -Werror -Werror=vla -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wformat=2 -Wno-unused-parameter -Wpointer-arith \
	-Wundef $(if $(filter clang,$(CC)),,-Wno-format-truncation)
# KR_RESOURCES=path/to/other.def compiles another default resource table
# instead of config/resources.def (see the README).
ifneq ($(KR_RESOURCES),)
RESOURCES_CPPFLAGS := -DKR_RESOURCES_FILE='"$(abspath $(KR_RESOURCES))"'
endif
CPPFLAGS := -Iconfig -Iport -Isrc -Ibuild/include $(MBEDTLS_CPPFLAGS) \
	-D_POSIX_C_SOURCE=200809L -DKR_TARGET='"$(TARGET)"' \
	-DKR_PORT_$(PORT)=1 $(RESOURCES_CPPFLAGS) $(PROFILE_CPPFLAGS) $(EXTRA_CPPFLAGS)
CFLAGS := -std=c11 $(OPT) $(LTO) $(ARCH_FLAGS) $(HARDEN) $(PROFILE_CFLAGS) $(PROFILE_KR_CFLAGS) $(WARN) -MMD -MP $(EXTRA_CFLAGS)
LINK_FLAGS := $(LINK_STATIC) $(ARCH_FLAGS) $(ARCH_LDFLAGS) -Wl,--gc-sections $(LDHARDEN) $(PROFILE_LDFLAGS) $(EXTRA_LDFLAGS)
LDFLAGS := $(LINK_FLAGS) $(NO_LTO)

# mbedTLS is third-party code: our warnings are not its warnings.
MBEDTLS_CFLAGS := -std=c99 $(OPT) $(LTO) $(ARCH_FLAGS) $(HARDEN) $(PROFILE_CFLAGS) -MMD -MP -w

# --- sources ----------------------------------------------------------------------

SRC := $(filter-out src/main.c,$(wildcard src/*.c)) $(wildcard port/$(PORT)/*.c) $(wildcard port/common/*.c)
OBJ := $(patsubst %.c,$(O)/obj/%.o,$(SRC))
MAIN_OBJ := $(O)/obj/src/main.o
UNIT_SRC := $(wildcard tests/unit/*.c)
UNIT_OBJ := $(patsubst %.c,$(O)/obj/%.o,$(UNIT_SRC))
TOOL_SRC := $(wildcard tests/tools/*.c)
TOOLS := $(patsubst tests/tools/%.c,$(O)/tests/%,$(TOOL_SRC))
# Fuzz targets: tests/fuzz/fuzz_NAME.c defines LLVMFuzzerTestOneInput. Under
# TARGET=fuzz they link with libFuzzer; every other target links them with
# tests/fuzz/replay.c, which replays tests/corpus/NAME/ in `make test`.
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(FUZZ_SRC))
FUZZERS := $(patsubst %,$(O)/fuzz/%,$(FUZZ_NAMES))
REPLAYS := $(patsubst %,$(O)/tests/replay_%,$(FUZZ_NAMES))
FUZZ_SECONDS ?= 60
# Targets that run the whole reflector on the scripted network of
# tests/fuzz/netsim.h get the port's clock and socket calls replaced at link time.
comma := ,
NETSIM_WRAP := $(patsubst %,-Wl$(comma)--wrap=%,kr_port_now_ms kr_port_wall_seconds \
	kr_port_resolve_start kr_port_tcp_connect kr_port_connect_result kr_port_send \
	kr_port_recv kr_port_close kr_port_last_error kr_port_poll kr_port_log_write)
FUZZ_LDFLAGS_watch_path := $(NETSIM_WRAP)
FUZZ_LDFLAGS_event_apply := $(NETSIM_WRAP)
# The directory sink's file system calls, checked for confinement to its root.
FUZZ_LDFLAGS_dir_manifest := $(patsubst %,-Wl$(comma)--wrap=kr_port_fs_%,unlink rmdir rename create \
	mkdir open_append unlink_at rmdir_at rename_at create_at mkdir_at open_append_at)

# The state directory's loader and snapshots, on the power-cut file system of tests/fuzz/memfs.h.
STATE_WRAP := $(patsubst %,-Wl$(comma)--wrap=kr_port_fs_%,mkdir is_dir stat unlink open_read read \
	create open_append write sync close rename sync_dir error commit_start commit_finish) \
	-Wl,--wrap=kr_port_wall_seconds,--wrap=kr_port_log_write
FUZZ_LDFLAGS_state_load := $(STATE_WRAP)
FUZZ_LDFLAGS_state_crash := $(STATE_WRAP)

# mbedTLS depends only on the target and its config, not on O or our flags:
# variant builds (O=..., EXTRA_CPPFLAGS=...) share it instead of recompiling it.
# Builds without TLS on --listen have their own, without the server side: the
# shared one is not rebuilt back and forth.
MBEDTLS_O := build/$(TARGET)$(if $(filter tiny,$(PROFILE)),-tiny,$(if $(LISTEN_TLS_CPPFLAGS),-no-tls-server))/mbedtls
MBEDTLS_LIB := $(MBEDTLS_O)/libmbedtls.a

# The shared library (not for asan/fuzz, whose objects are not position-independent
# the same way): libkreflect.so.1 holds kreflect and mbedTLS, and exports only the
# functions of kreflect.h (config/libkreflect.map), so a program built against
# 1.x keeps running on any later 1.y (tests/abi/check.py holds that).
ifeq ($(filter asan fuzz,$(TARGET))$(PROFILE),)
SHLIB := $(O)/libkreflect.so.$(VERSION)
endif
SONAME := libkreflect.so.$(firstword $(subst ., ,$(VERSION)))

.PHONY: lib install target-lib
.PHONY: all deps packages mbedtls-src cross test test-cross check-symbols lint \
	size clean distclean demo target-bin target-tests target-fuzz fuzz fuzz-merge help \
	sim target-sim
.DEFAULT_GOAL := all

# --- top-level targets ---------------------------------------------------------------

ifeq ($(PROFILE),tiny)
all: tiny
else
all: build/kreflect
endif

# make PROFILE=tiny: build/x86_64-tiny/kreflect (and with cross, build/<target>-tiny/).
.PHONY: tiny
tiny: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=x86_64 PROFILE=tiny target-bin

build/kreflect: FORCE | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=x86_64 target-bin
	$(Q)cp build/x86_64/kreflect build/kreflect.tmp && mv -f build/kreflect.tmp build/kreflect

cross: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=aarch64 target-bin
	$(Q)+$(SUBMAKE) TARGET=armv7 target-bin

# The library (README "Use kreflect as a library"): build/<target>/libkreflect.a,
# libkreflect-mbedtls.a beside it, and a pkg-config file for the build tree
# (build/kreflect.pc for x86_64, build/<target>/kreflect.pc for each target).
lib: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=x86_64 target-lib
	$(Q)+$(SUBMAKE) TARGET=aarch64 target-lib
	$(Q)+$(SUBMAKE) TARGET=armv7 target-lib
	$(Q)cp build/x86_64/kreflect.pc build/kreflect.pc

# make install PREFIX=/usr/local [TARGET=x86_64|aarch64|armv7] [DESTDIR=...]:
# the TARGET's binary, the man page, the header, both archives and a pkg-config
# file whose paths are PREFIX's (DESTDIR is only where the files go now).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
INCLUDEDIR ?= $(PREFIX)/include
LIBDIR ?= $(PREFIX)/lib
MANDIR ?= $(PREFIX)/share/man
install: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=$(TARGET) target-bin target-lib
	$(Q)install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
	  $(DESTDIR)$(MANDIR)/man1
	$(Q)install -m 0755 $(O)/kreflect $(DESTDIR)$(BINDIR)/kreflect
	$(Q)install -m 0644 src/kreflect.1 $(DESTDIR)$(MANDIR)/man1/kreflect.1
	$(Q)install -m 0644 src/kreflect.h $(DESTDIR)$(INCLUDEDIR)/kreflect.h
	$(Q)install -m 0644 $(O)/libkreflect.a $(O)/libkreflect-mbedtls.a $(DESTDIR)$(LIBDIR)/
	$(if $(SHLIB),$(Q)install -m 0755 $(SHLIB) $(DESTDIR)$(LIBDIR)/ && \
	  ln -sfn $(notdir $(SHLIB)) $(DESTDIR)$(LIBDIR)/$(SONAME) && \
	  ln -sfn $(SONAME) $(DESTDIR)$(LIBDIR)/libkreflect.so)
	$(Q)sed -e 's|^prefix=.*|prefix=$(PREFIX)|' -e 's|^includedir=.*|includedir=$(INCLUDEDIR)|' \
	  -e 's|^libdir=.*|libdir=$(LIBDIR)|' $(O)/kreflect.pc >$(DESTDIR)$(LIBDIR)/pkgconfig/kreflect.pc
	@echo "  INSTALL $(DESTDIR): $(BINDIR)/kreflect $(MANDIR)/man1/kreflect.1 $(INCLUDEDIR)/kreflect.h"
	@echo "          $(LIBDIR)/libkreflect.a $(LIBDIR)/libkreflect-mbedtls.a $(if $(SHLIB),$(LIBDIR)/$(notdir $(SHLIB)) )$(LIBDIR)/pkgconfig/kreflect.pc"

# Everything that `make test` runs, built first so that build output and test
# output do not interleave.
# The test-only packages and peers first, then the real API server (built once per
# package set, outside the clone): a fresh machine needs only make deps.
test: test-deps realapi build/kreflect | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=x86_64 target-tests target-lib
	$(Q)cp build/x86_64/kreflect.pc build/kreflect.pc
	$(Q)+$(SUBMAKE) TARGET=x86_64 PORT=sim target-sim
	$(Q)+$(SUBMAKE) TARGET=asan PORT=sim target-sim
	$(Q)+$(SUBMAKE) TARGET=asan target-bin target-tests
	$(Q)+$(SUBMAKE) TARGET=aarch64 target-bin target-tests
	$(Q)+$(SUBMAKE) TARGET=armv7 target-bin target-tests
	$(Q)+$(SUBMAKE) TARGET=x86_64 PROFILE=tiny target-bin
	$(Q)+$(SUBMAKE) TARGET=aarch64 PROFILE=tiny target-bin
	$(Q)+$(SUBMAKE) TARGET=armv7 PROFILE=tiny target-bin
	$(Q)+$(SUBMAKE) peers
	$(Q)sh tests/run.sh x86_64 asan aarch64 armv7

# kreflect's main job against the bundled test API server (see tests/demo/run.sh).
demo: build/kreflect
	$(Q)sh tests/demo/run.sh

# libFuzzer with ASan+UBSan on every target in tests/fuzz/, FUZZ_SECONDS each,
# one after the other, with its dictionaries (tests/fuzz/run.sh), starting from
# tests/corpus/NAME/ and writing what it learns to build/fuzz-corpus/NAME/.
fuzz: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=fuzz target-fuzz
	$(Q)sh tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_NAMES)

# Keeps tests/corpus/NAME minimal (tests/fuzz/merge.sh): hash-named inputs only
# if they cover an edge nothing else does; named ones (seeds, past crashes) always.
fuzz-merge: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=fuzz target-fuzz
	$(Q)sh tests/fuzz/merge.sh $(FUZZ_NAMES)

test-cross: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=aarch64 target-bin target-tests
	$(Q)+$(SUBMAKE) TARGET=armv7 target-bin target-tests
	$(Q)sh tests/run.sh aarch64 armv7

FORCE:

# Objects made through pattern chains are kept, not deleted as intermediates.
.PRECIOUS: $(O)/obj/%.o

# --- per-target build (called with TARGET set) -------------------------------------------

target-bin: $(O)/kreflect
target-lib: $(O)/libkreflect.a $(O)/libkreflect-mbedtls.a $(O)/kreflect.pc $(SHLIB)

# Every module but main (the CLI's outputs come along; a program links only
# the objects it uses). mbedTLS in its own archive, so that a firmware that
# already has mbedTLS 3.6 can link its own instead (built with
# config/mbedtls_config.h's options: see the README).
# The objects are fat LTO objects (machine code and GIMPLE); the archives get
# the machine code only, so that a user's link needs no LTO plugin of our gcc.
# $(call plain_archive,ARCHIVE,DIR,OBJECTS)
define plain_archive
	@echo "  AR      $(1)"
	$(Q)rm -rf $(1) $(2) && mkdir -p $(2) && \
	for o in $(3); do \
	  $(CROSS_COMPILE)objcopy -R '.gnu.lto_*' -R '.gnu.debuglto_*' -N __gnu_lto_v1 -N __gnu_lto_slim \
	    $$o $(2)/$$(echo $$o | sed 's|^build/||; s|/|_|g') || exit 1; \
	done && $(CROSS_COMPILE)ar rcs $(1) $(2)/*.o
endef

$(O)/libkreflect.a: $(OBJ)
	$(call plain_archive,$@,$(O)/lib-obj,$(OBJ))

$(O)/libkreflect.so.$(VERSION): $(OBJ) $(MBEDTLS_LIB) config/libkreflect.map
	@echo "  LD      $@"
	$(Q)$(CC) -shared $(ARCH_FLAGS) $(ARCH_LDFLAGS) -Wl,--gc-sections $(LDHARDEN) $(NO_LTO) \
	  -Wl,-soname,$(SONAME) -Wl,--version-script=config/libkreflect.map -Wl,--no-undefined \
	  -o $@ $(OBJ) $(MBEDTLS_LIB)
	$(Q)ln -sfn $(@F) $(O)/$(SONAME) && ln -sfn $(SONAME) $(O)/libkreflect.so

$(O)/libkreflect-mbedtls.a: $(MBEDTLS_LIB)
	$(call plain_archive,$@,$(O)/lib-mbedtls-obj,$(MBEDTLS_OBJ))

$(O)/kreflect.pc: Makefile
	@mkdir -p $(@D)
	$(Q)printf '%s\n' 'prefix=$(CURDIR)' 'includedir=$(CURDIR)/src' 'libdir=$(CURDIR)/$(O)' '' \
	  'Name: kreflect' 'Description: Kubernetes reflector for edge devices ($(TARGET), static, musl)' \
	  'Version: $(VERSION)' 'Cflags: -I$${includedir}' \
	  'Libs: -L$${libdir} -lkreflect -lkreflect-mbedtls' >$@
target-tests: $(O)/tests/unit $(TOOLS) $(REPLAYS) $(O)/tests/gateway

# The firmware-style example (tests/example/): a program of the user's, built
# against the archives alone, as the README's pkg-config line does.
$(O)/tests/gateway: tests/example/gateway.c src/kreflect.h $(O)/libkreflect.a $(O)/libkreflect-mbedtls.a
	@mkdir -p $(@D)
	@echo "  CC+LD   $@"
	$(Q)$(CC) -std=c99 $(OPT) $(ARCH_FLAGS) -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -Isrc \
	  $(LINK_STATIC) $(ARCH_LDFLAGS) $(LTO_LINK) -Wl,--gc-sections -o $@ $< -L$(O) -lkreflect -lkreflect-mbedtls
target-fuzz: $(FUZZERS)

$(O)/kreflect: $(O)/kreflect.unstripped
	$(Q)$(STRIP) -o $@ $<

$(O)/kreflect.unstripped: $(MAIN_OBJ) $(OBJ) $(MBEDTLS_LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LINK_FLAGS) $(OPT) $(LTO_LINK) -o $@ $(MAIN_OBJ) $(OBJ) $(MBEDTLS_LIB)

$(O)/tests/unit: $(UNIT_OBJ) $(OBJ) $(MBEDTLS_LIB)
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(UNIT_OBJ) $(OBJ) $(MBEDTLS_LIB)

$(O)/tests/%: $(O)/obj/tests/tools/%.o $(OBJ) $(MBEDTLS_LIB)
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(OBJ) $(MBEDTLS_LIB)

$(O)/tests/replay_%: $(O)/obj/tests/fuzz/fuzz_%.o $(O)/obj/tests/fuzz/replay.o $(OBJ) $(MBEDTLS_LIB)
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) $(FUZZ_LDFLAGS_$*) -o $@ $^

$(O)/fuzz/%: $(O)/obj/tests/fuzz/fuzz_%.o $(OBJ) $(MBEDTLS_LIB)
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) $(FUZZ_LDFLAGS_$*) -fsanitize=fuzzer -o $@ $^

# The long --help as gzip bytes (src/help.c expands it; tests/build/README.md "Where the
# bytes go"): main.c's text through the preprocessor, for the capacities it names, then
# python3.
$(O)/gen/usage_gz.h: src/main.c tests/tools/help_gz.py $(O)/flags.stamp | $(MBEDTLS_STAMP) $(JSMN_H)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) -DKR_HELP_EXTRACT -E src/main.c | python3 tests/tools/help_gz.py > $@.tmp && mv -f $@.tmp $@
$(MAIN_OBJ): $(O)/gen/usage_gz.h
$(MAIN_OBJ): CPPFLAGS += -I$(O)/gen

# A change of compiler or flags rebuilds everything of that target.
FLAGS_LINE := $(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS)
$(O)/flags.stamp: FORCE
	@mkdir -p $(@D)
	@echo '$(FLAGS_LINE)' | cmp -s - $@ || echo '$(FLAGS_LINE)' > $@

# The mbedTLS configuration is read through a system include (-isystem), which
# -MMD does not list: without this, tls.c kept the struct layouts of the old one.
$(O)/obj/%.o: %.c $(O)/flags.stamp $(MBEDTLS_CONFIG) | $(MBEDTLS_STAMP) $(JSMN_H)
	@mkdir -p $(@D)
	@echo "  CC      $@"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# --- mbedTLS: compiled per target with our configuration --------------------------------------

MBEDTLS_C := $(notdir $(wildcard $(MBEDTLS_DIR)/library/*.c))
MBEDTLS_OBJ := $(patsubst %.c,$(MBEDTLS_O)/%.o,$(MBEDTLS_C))
# Our AES-GCM behind MBEDTLS_GCM_ALT (port/crypto/gcm.c): it defines mbedTLS's
# mbedtls_gcm_* functions, so it goes into mbedTLS's archive, with our warnings.
MBEDTLS_OBJ += $(MBEDTLS_O)/kr_gcm.o
MBEDTLS_FLAGS_LINE := $(CC) $(MBEDTLS_CPPFLAGS) $(MBEDTLS_CFLAGS)
$(MBEDTLS_O)/flags.stamp: FORCE
	@mkdir -p $(@D)
	@echo '$(MBEDTLS_FLAGS_LINE)' | cmp -s - $@ || echo '$(MBEDTLS_FLAGS_LINE)' > $@

$(MBEDTLS_LIB): $(MBEDTLS_OBJ)
	$(Q)test -n "$(MBEDTLS_OBJ)" || { echo "kreflect: no mbedTLS sources in $(MBEDTLS_DIR): run 'make deps'" >&2; exit 1; }
	@echo "  AR      $@"
	$(Q)rm -f $@ && $(CROSS_COMPILE)ar rcs $@ $(MBEDTLS_OBJ)

$(MBEDTLS_O)/%.o: $(MBEDTLS_DIR)/library/%.c $(MBEDTLS_CONFIG) $(MBEDTLS_O)/flags.stamp $(MBEDTLS_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $@"
	$(Q)$(CC) $(MBEDTLS_CPPFLAGS) -I$(MBEDTLS_DIR)/library $(MBEDTLS_CFLAGS) -c -o $@ $<

# mbedTLS's buffer allocator zeroes its whole heap at start and each block it
# hands out: with its memset named kr_tls_heap_memset (src/tls.h), pages that
# are zero already are not written, so the heap's untouched pages never become
# resident, not even for a moment at start-up (the peak RSS, VmHWM).
$(MBEDTLS_O)/memory_buffer_alloc.o: MBEDTLS_CPPFLAGS += -Dmemset=kr_tls_heap_memset
$(MBEDTLS_O)/memory_buffer_alloc.o: src/tls.h

# ChaCha20-Poly1305 is the record cipher where the CPU has no AES instructions
# (armv7): at -Os its quarter round stays a call per step (tests/bench/aead.sh).
$(MBEDTLS_O)/chacha20.o $(MBEDTLS_O)/poly1305.o: MBEDTLS_CFLAGS += -O2

# The tiny build's GCM only encrypts (MBEDTLS_BLOCK_CIPHER_NO_DECRYPT): mbedTLS's
# AES-NI inline assembly cannot leave out its decrypt rounds, its intrinsics can.
# They run only after its CPU check, as the assembly did; every file that reads
# aesni.h gets the flags, so that all agree on the 16-byte aligned round keys.
ifeq ($(PROFILE)-$(TARGET),tiny-x86_64)
$(MBEDTLS_O)/aesni.o $(MBEDTLS_O)/aes.o $(MBEDTLS_O)/gcm.o: MBEDTLS_CFLAGS += -maes -mpclmul
endif

$(MBEDTLS_O)/kr_gcm.o: port/crypto/gcm.c port/crypto/gcm_alt.h $(MBEDTLS_CONFIG) $(MBEDTLS_O)/flags.stamp $(MBEDTLS_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $@"
	$(Q)$(CC) $(MBEDTLS_CPPFLAGS) -D_POSIX_C_SOURCE=200809L $(filter-out -w,$(MBEDTLS_CFLAGS)) -std=c11 $(WARN) -c -o $@ $<

# --- fetching dependencies ----------------------------------------------------------------

deps: packages mbedtls-src

# Only what the tests use: `make test` runs it first.
.PHONY: test-deps test-packages
test-deps: test-packages peers-deps client-node

# $(call apt_install,PACKAGES): installs what is missing when root; otherwise
# says exactly what to run.
define apt_install
	$(Q)missing=""; \
	for p in $(1); do \
	  dpkg-query -W -f='$${Status}\n' "$$p" 2>/dev/null | grep -q 'install ok installed' \
	    || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "kreflect: all Debian packages present"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "kreflect: missing Debian packages:$$missing" >&2; \
	  echo "kreflect: run as root:" >&2; \
	  echo "  dpkg --add-architecture arm64 && dpkg --add-architecture armhf && apt-get update && apt-get install -y --no-install-recommends$$missing" >&2; \
	  exit 1; \
	fi; \
	dpkg --add-architecture arm64 && dpkg --add-architecture armhf && \
	apt-get update && \
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing
endef

packages:
	$(call apt_install,$(DEB_PACKAGES))

test-packages:
	$(call apt_install,$(TEST_DEB_PACKAGES))

mbedtls-src: $(MBEDTLS_STAMP)

# mbedTLS 3.6 LTS from Debian trixie's source package, through a private apt
# configuration under build/deps/apt (the machine's own apt setup is untouched).
# apt checks the signed Release file and the checksums; dpkg-source checks the
# .dsc against the files and applies Debian's patches.
APT_OPTS := -o Dir::Etc::SourceList=$(CURDIR)/$(APT_DIR)/sources.list \
	-o Dir::Etc::SourceParts=/dev/null \
	-o Dir::State::Lists=$(CURDIR)/$(APT_DIR)/lists \
	-o Dir::Cache=$(CURDIR)/$(APT_DIR)/cache \
	-o Debug::NoLocking=1 -o APT::Sandbox::User=root
DEBIAN_MIRROR ?= http://deb.debian.org/debian

ifeq ($(origin MBEDTLS_DIR),command line)
$(MBEDTLS_STAMP):
	@echo "kreflect: MBEDTLS_DIR=$(MBEDTLS_DIR) is not an mbedTLS 3.6 source tree (no $@)" >&2; exit 1
else
$(MBEDTLS_STAMP):
	@echo "  FETCH   mbedtls (Debian trixie source package)"
	$(Q)rm -rf $(APT_DIR) $(MBEDTLS_DIR) && \
	mkdir -p $(APT_DIR)/lists/partial $(APT_DIR)/cache/archives/partial $(APT_DIR)/src && \
	echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(DEBIAN_MIRROR) trixie main" \
	  > $(APT_DIR)/sources.list && \
	apt-get $(APT_OPTS) -qq update && \
	ver=$$(apt-cache $(APT_OPTS) showsrc mbedtls | sed -n 's/^Version: //p' | sort -V | tail -n 1) && \
	case "$$ver" in 3.6.*) ;; *) echo "kreflect: trixie has mbedtls '$$ver', not 3.6.x" >&2; exit 1;; esac && \
	cd $(APT_DIR)/src && apt-get $(APT_OPTS) -qq source --download-only "mbedtls=$$ver" && \
	dpkg-source -x mbedtls_*.dsc tree >../dpkg-source.log 2>&1 && \
	cd $(CURDIR) && mv $(APT_DIR)/src/tree $(MBEDTLS_DIR) && \
	grep -q '"3\.6\.' $(MBEDTLS_DIR)/include/mbedtls/build_info.h && \
	echo "$$ver" > $@ && echo "  mbedtls $$ver in $(MBEDTLS_DIR)"
endif

# The reference peers from Debian trixie's binary packages (Go 1.24, client-go
# 0.32 and the closure of its golang-*-dev dependencies, kubectl 1.32), unpacked
# under $(TRIXIE_DIR) through a private apt configuration (tests/peers/fetch.sh).
# $(TRIXIE_DIR)/usr/bin/kubectl is kubectl; `make peers` builds
# build/peers/client-go-peer, client-go's Reflector printing kreflect's lines.
TRIXIE_DIR ?= $(DEPS)/trixie
TRIXIE_STAMP := $(TRIXIE_DIR)/.stamp
GO_ENV := GOROOT=$(abspath $(TRIXIE_DIR))/usr/lib/go-1.24 \
	GOPATH=$(CURDIR)/build/peers/gopath:$(abspath $(TRIXIE_DIR))/usr/share/gocode \
	GO111MODULE=off GOPROXY=off GOFLAGS= GOTOOLCHAIN=local CGO_ENABLED=0 \
	GOCACHE=$(CURDIR)/build/gocache
.PHONY: peers peers-deps
peers-deps: $(TRIXIE_STAMP)
$(TRIXIE_STAMP):
	$(Q)sh tests/peers/fetch.sh $(TRIXIE_DIR) $(DEBIAN_MIRROR)

peers: build/peers/client-go-peer
# GOPATH mode needs the package inside a GOPATH: a link to tests/peers/client-go.
build/peers/client-go-peer: $(wildcard tests/peers/client-go/*) | $(TRIXIE_STAMP)
	@echo "  GO      $@"
	$(Q)mkdir -p build/peers/gopath/src/kreflect build/gocache && \
	ln -sfn $(CURDIR)/tests/peers/client-go build/peers/gopath/src/kreflect/client-go-peer && \
	$(GO_ENV) $(abspath $(TRIXIE_DIR))/usr/lib/go-1.24/bin/go build -trimpath -ldflags='-s -w' \
	  -o $@.tmp kreflect/client-go-peer && mv -f $@.tmp $@

# The real API server for tests/realapi/ (its README): Debian sid's Go 1.27 and
# k8s.io/apiserver 0.36 and trixie's etcd, fetched through a private apt
# configuration, and the server built from them, all in $(REALAPI_CACHE)/<key>
# (outside the clone, keyed by the package versions, so a second run on the
# machine reuses it); build/realapi/ links to it. Fails naming the versions
# if the server does not build with them.
REALAPI_CACHE ?= /var/cache/kreflect/realapi
.PHONY: realapi
realapi:
	$(Q)sh tests/realapi/build.sh $(REALAPI_CACHE) $(DEBIAN_MIRROR)

# The cross compilers' musl specs do not search /usr/include, so jsmn's header
# is copied where every target looks.
$(JSMN_H): $(JSMN_SRC)
	@mkdir -p $(@D)
	$(Q)cp $< $@

$(JSMN_SRC):
	@echo "kreflect: $@ is missing: run 'make deps' (package libjsmn-dev) or give JSMN_SRC=PATH" >&2; exit 1

# --- checks -----------------------------------------------------------------------------------

# Every symbol our objects export starts with kr_. mbedTLS calls a few hooks by
# their own names: mbedtls_psa_external_get_random (MBEDTLS_PSA_CRYPTO_EXTERNAL_RNG),
# mbedtls_hardware_poll (a firmware's own mbedTLS with MBEDTLS_ENTROPY_HARDWARE_ALT),
# mbedtls_platform_gmtime_r.
check-symbols: build/kreflect
	$(Q)bad=$$(nm -g --defined-only $(filter build/x86_64/%,$(patsubst %.c,build/x86_64/obj/%.o,$(SRC) src/main.c)) \
	  | awk 'NF==3 {print $$3}' | grep -v -E '^(kr_|main$$|mbedtls_hardware_poll$$|mbedtls_psa_external_get_random$$|mbedtls_platform_gmtime_r$$)' | sort -u); \
	if [ -n "$$bad" ]; then echo "kreflect: exported symbols without the kr_ prefix:" >&2; echo "$$bad" >&2; exit 1; fi; \
	echo "check-symbols: every exported symbol starts with kr_"
	$(Q)+$(SUBMAKE) TARGET=x86_64 target-lib
	$(Q)bad=$$(nm -g --defined-only build/x86_64/libkreflect.a 2>/dev/null | awk 'NF==3 {print $$3}' \
	  | grep -v -E '^(kr_|mbedtls_hardware_poll$$|mbedtls_psa_external_get_random$$|mbedtls_platform_gmtime_r$$)' | sort -u); \
	if [ -n "$$bad" ]; then echo "kreflect: libkreflect.a exports symbols without the kr_ prefix:" >&2; echo "$$bad" >&2; exit 1; fi; \
	bad=$$(nm -g --defined-only build/x86_64/libkreflect-mbedtls.a 2>/dev/null | awk 'NF==3 {print $$3}' \
	  | grep -v -E '^(mbedtls_|psa_)' | sort -u); \
	if [ -n "$$bad" ]; then echo "kreflect: libkreflect-mbedtls.a exports symbols without mbedtls_/psa_:" >&2; echo "$$bad" >&2; exit 1; fi; \
	echo "check-symbols: libkreflect.a exports only kr_, libkreflect-mbedtls.a only mbedtls_/psa_"

BANNED := sprintf|strcpy|strcat|strtok|atoi|atol|gets|alloca|vsprintf|strncpy
lint:
	$(Q)bad=$$(grep -n -E '\b($(BANNED))\s*\(' src/*.[ch] port/*.h port/*/*.[ch] tests/unit/*.c tests/tools/*.c 2>/dev/null); \
	if [ -n "$$bad" ]; then echo "kreflect: banned calls:" >&2; echo "$$bad" >&2; exit 1; fi
	$(Q)bad=$$(grep -n -E '\b(malloc|calloc|realloc|free|strdup)\s*\(' src/*.c port/*/*.c 2>/dev/null); \
	if [ -n "$$bad" ]; then echo "kreflect: heap calls in src/ or port/:" >&2; echo "$$bad" >&2; exit 1; fi
	$(Q)bad=$$(grep -n -E '(^|[^_a-z])(v?s?n?printf|fprintf|vfprintf|dprintf|puts|fputs|inet_ntop)\s*\(' \
	  src/*.c port/posix/*.c port/common/*.c 2>/dev/null); \
	if [ -n "$$bad" ]; then echo "kreflect: stdio formatting in src/ or port/posix/ (use kr_snprintf," \
	  "src/fmt.h: the C library's printf engine would add 12 KB to the binary):" >&2; echo "$$bad" >&2; exit 1; fi
	$(Q)cppcheck --quiet --error-exitcode=1 --std=c11 --enable=warning,portability,performance \
	  --inline-suppr -Iconfig -Iport -Isrc -DKR_TARGET='"lint"' \
	  --suppress=missingIncludeSystem src port/$(PORT) port/common
	$(Q)cppcheck --quiet --error-exitcode=1 --std=c11 --enable=warning,portability,performance \
	  --inline-suppr -Iport/crypto -DMBEDTLS_GCM_ALT --suppress=missingIncludeSystem port/crypto
	@echo "lint: no banned calls, no heap calls, cppcheck clean"

# Sizes of the default and the tiny build of every target, then where the bytes
# of each go (tests/build/linkmap.py on a link map of the same objects linked
# without LTO, $(O)/kreflect.map: LTO blurs which module a byte came from).
size: build/kreflect cross | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)for t in x86_64 aarch64 armv7; do \
	  $(SUBMAKE) TARGET=$$t PROFILE=tiny target-bin || exit 1; \
	  $(SUBMAKE) TARGET=$$t build/$$t/kreflect.map || exit 1; \
	  $(SUBMAKE) TARGET=$$t PROFILE=tiny build/$$t-tiny/kreflect.map || exit 1; \
	done
	$(Q)printf '%-14s %10s %8s %10s %12s\n' target text data bss "file bytes"; \
	for t in x86_64 aarch64 armv7 x86_64-tiny aarch64-tiny armv7-tiny; do \
	  case $$t in x86_64*) s=size;; aarch64*) s=aarch64-linux-gnu-size;; armv7*) s=arm-linux-gnueabihf-size;; esac; \
	  $$s build/$$t/kreflect | awk -v t=$$t -v f=$$(stat -c %s build/$$t/kreflect) \
	    'NR==2 {printf "%-14s %10s %8s %10s %12s\n", t, $$1, $$2, $$3, f}'; \
	done
	$(Q)for t in x86_64 aarch64 armv7 x86_64-tiny aarch64-tiny armv7-tiny; do \
	  echo; echo "== $$t: where the bytes go (link map without LTO)"; \
	  python3 tests/build/linkmap.py build/$$t/kreflect.map || exit 1; \
	done

$(O)/kreflect.map: $(MAIN_OBJ) $(OBJ) $(MBEDTLS_LIB)
	@echo "  LD      $@ (without LTO, for tests/build/linkmap.py)"
	$(Q)$(CC) $(LDFLAGS) -Wl,-Map=$@.tmp -o $(O)/kreflect.nolto $(MAIN_OBJ) $(OBJ) $(MBEDTLS_LIB) && mv -f $@.tmp $@

clean:
	rm -rf build/x86_64 build/aarch64 build/armv7 build/asan build/fuzz build/kreflect build/test \
	  build/sim build/asan-sim build/*-tiny build/*-without-* build/levers

distclean:
	rm -rf build

help:
	@sed -n '2,17p' Makefile | sed 's/^# \{0,1\}//'

-include $(wildcard $(O)/obj/*/*.d $(O)/obj/*/*/*.d $(MBEDTLS_O)/*.d)

# --- the deterministic simulation (port/sim/, tests/sim/) -----------------------------------
#
#   make sim SEEDS=100000   the convergence property test over that many seeds (default 10000);
#                           build/sim/sim --seed S -v replays one seed with a trace
#   make sim-asan SEEDS=500 the same under ASan+UBSan (build/asan-sim/sim)

SEEDS ?= 10000
SIM_SRC := $(wildcard tests/sim/*.c)
SIM_OBJ := $(patsubst %.c,$(O)/obj/%.o,$(SIM_SRC))

.PHONY: sim-asan

sim: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=x86_64 PORT=sim target-sim
	$(Q)build/sim/sim --seeds $(SEEDS)

sim-asan: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=asan PORT=sim target-sim
	$(Q)build/asan-sim/sim --seeds $(SEEDS)

target-sim: $(O)/sim

$(O)/sim: $(SIM_OBJ) $(OBJ) $(MBEDTLS_LIB)
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(SIM_OBJ) $(OBJ) $(MBEDTLS_LIB)

# --- measurements: benchmarks, malloc count, relist memory ---------------------------------
#
#   make bench-aead       instructions per KiB of TLS record decryption, every target (tests/bench/aead.sh)
#   make bench-transport  chunked decoding + object framing vs memchr/memcpy (tests/bench/)
#   make test-malloc      proves no malloc/free after start-up (tests/malloc/run.sh)
#   make bench-relist     RSS of a 10,000-object relist (tests/bench/relist_rss.sh)
#   make bench-restart    warm restart from --state-dir vs a cold start, flash per hour (tests/bench/restart.py)
#   make bench-stall      the loop's worst stall with fsync slowed down: --dir each vs batch, state
#                         snapshots of 1k/10k objects and journal groups (tests/bench/stall.py)
#   make bench-fanout     one relay kreflect before 1/10/100/500 downstream watchers: upstream
#                         requests and bytes direct vs. relayed, relay CPU and memory, change-to-last-
#                         watcher latency, paced and in a burst of 1,000 changes (tests/bench/fanout.py;
#                         build/bench/fanout.{md,json}), then the
#                         relay's instructions per event per watcher (build/bench/fanout-callgrind.*)
#   make bench            kreflect against client-node and python3-kubernetes, one table,
#                         build/bench/{table.md,results.json,bench.svg} (tests/bench/bench.py);
#                         BENCH_QUICK=1 for one repetition, BENCH_IDLE=S, BENCH_REPS=N; then
#                         bench-restart, bench-realapi, bench-fanout and bench-aead
#   make bench-realapi    against the real API server (tests/realapi/): sync of 1k/10k/100k ConfigMaps
#                         and a stream of updates, kreflect beside client-go, client-node and
#                         python3-kubernetes (tests/realapi/bench.py; build/bench/realapi.{md,json})

BENCH_SRC := $(wildcard tests/bench/*.c)
BENCHES := $(patsubst tests/bench/%.c,$(O)/bench/%,$(BENCH_SRC))
# kreflect linked with counting wrappers around the C library's allocator.
MALLOC_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free \
	-Wl,--wrap=posix_memalign,--wrap=aligned_alloc,--wrap=memalign,--wrap=kr_loop_run,--wrap=fork
MALLOC_BIN := $(O)/kreflect-malloc
# Capacities for 10,000 objects of 1 KiB, built into their own output directory.
RELIST_DIR := build/x86_64-relist
RELIST_CAPS := -DKR_MAX_OBJECTS=16384 -DKR_ARENA_BYTES=33554432u

.PHONY: bench-aead bench-transport test-malloc malloc-variant bench-relist relist-variant target-bench \
	bench bench-packages bench-restart

# Instructions per KiB of TLS record decryption on every target: AES-GCM on the
# CPU's path and the portable one, ChaCha20-Poly1305 (tests/bench/aead.sh).
bench-aead: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=x86_64 build/x86_64/bench/bench_aead
	$(Q)+$(SUBMAKE) TARGET=aarch64 build/aarch64/bench/bench_aead
	$(Q)+$(SUBMAKE) TARGET=armv7 build/armv7/bench/bench_aead
	$(Q)sh tests/bench/aead.sh

bench-transport: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=x86_64 target-bench
	$(Q)build/x86_64/bench/bench_transport

malloc-variant: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=x86_64 build/x86_64/kreflect-malloc

test-malloc: malloc-variant
	$(Q)sh tests/malloc/run.sh

relist-variant: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(SUBMAKE) TARGET=x86_64 O=$(RELIST_DIR) EXTRA_CPPFLAGS='$(RELIST_CAPS)' target-bin

bench-relist: relist-variant
	$(Q)sh tests/bench/relist_rss.sh paged $(RELIST_DIR)/kreflect
	$(Q)sh tests/bench/relist_rss.sh cache $(RELIST_DIR)/kreflect

# The peers' Debian packages (not part of `make deps`: only the bench needs them);
# the bench installs @kubernetes/client-node with npm into build/bench/ itself.
BENCH_DEB_PACKAGES := python3-kubernetes
bench-packages:
	$(Q)missing=""; \
	for p in $(BENCH_DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' "$$p" 2>/dev/null | grep -q 'install ok installed' \
	    || missing="$$missing $$p"; \
	done; \
	command -v node >/dev/null && command -v npm >/dev/null || missing="$$missing nodejs npm"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "kreflect: make bench needs:$$missing; as root: apt-get install -y --no-install-recommends$$missing" >&2; \
	  exit 1; \
	fi; \
	apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing

# One build after the other: the variants share the target's mbedTLS library.
bench: bench-packages | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(MAKE) --no-print-directory build/kreflect
	$(Q)+$(MAKE) --no-print-directory relist-variant
	$(Q)+$(MAKE) --no-print-directory cross
	$(Q)+$(MAKE) --no-print-directory peers
	$(Q)python3 tests/bench/bench.py
	$(Q)python3 tests/bench/restart.py
	$(Q)+$(MAKE) --no-print-directory bench-realapi
	$(Q)+$(MAKE) --no-print-directory bench-fanout
	$(Q)+$(MAKE) --no-print-directory bench-aead

# Against the real API server of tests/realapi/: sync of 1k, 10k and 100k ConfigMaps
# and a stream of updates, kreflect beside the three peers (build/bench/realapi.{md,json}).
.PHONY: bench-realapi
bench-realapi: bench-packages realapi | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(MAKE) --no-print-directory build/kreflect
	$(Q)+$(MAKE) --no-print-directory peers
	$(Q)python3 tests/realapi/bench.py

# The relay before 1 to 500 downstream watchers (tests/bench/fanout.py): the stock
# binary, whose KR_SERVE_MAX_CONNS (512) slots cost RAM only once a connection takes one.
.PHONY: bench-fanout
bench-fanout: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(MAKE) --no-print-directory build/kreflect
	$(Q)python3 tests/bench/fanout.py --burst 1000
	$(Q)python3 tests/bench/fanout.py --modes relay --changes 10 --callgrind

# Warm restart from --state-dir against a cold start, and the flash a snapshot costs
# (tests/bench/restart.py; build/bench/restart.{md,json}).
bench-restart: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(MAKE) --no-print-directory build/kreflect
	$(Q)+$(MAKE) --no-print-directory relist-variant
	$(Q)python3 tests/bench/restart.py

# How late watch events reach stdout while fsync is 100 ms slower (the port's test hook
# KREFLECT_FAULT_FSYNC_MS), side by side with 0 ms (tests/bench/stall.py; build/bench/stall.{md,json}).
.PHONY: bench-stall
bench-stall: | $(MBEDTLS_STAMP) $(JSMN_H)
	$(Q)+$(MAKE) --no-print-directory build/kreflect
	$(Q)+$(MAKE) --no-print-directory relist-variant
	$(Q)python3 tests/bench/stall.py

target-bench: $(BENCHES)

$(O)/bench/%: $(O)/obj/tests/bench/%.o $(OBJ) $(MBEDTLS_LIB)
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(OBJ) $(MBEDTLS_LIB)

$(MALLOC_BIN): $(MAIN_OBJ) $(OBJ) $(O)/obj/tests/malloc/malloc_count.o $(MBEDTLS_LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) $(MALLOC_WRAP) -o $@ $(MAIN_OBJ) $(OBJ) \
	  $(O)/obj/tests/malloc/malloc_count.o $(MBEDTLS_LIB)

# `make test` builds the counting variant with the x86_64 tests (tests/malloc/run.sh uses it).
ifeq ($(TARGET),x86_64)
target-tests: $(MALLOC_BIN)
endif

# --- soak: the real binary against the test API server for MINUTES (tests/soak/soak.py) ---------
#
#   make soak MINUTES=30   changes and a fault every minute; samples RSS, descriptors and arena
#                          into build/soak/soak.csv, plots build/soak/soak.svg; fails if RSS or
#                          descriptors grow after minute 2 or the mirror differs from the server

MINUTES ?= 5

.PHONY: soak

soak: build/kreflect
	$(Q)python3 tests/soak/soak.py --minutes $(MINUTES)

# --- the local endpoint with real clients (tests/serve/clients.py) and under load ----------------
#
#   make serve-clients   python3-kubernetes' watch and client-node's informer against
#                        kreflect --listen: converge with the server, keep reading without it
#   make bench-serve     the reflector's events/s with 0 and with 50 local watchers

.PHONY: serve-clients bench-serve client-node

# @kubernetes/client-node from npm into build/bench/npm (the serve suite's and the bench's),
# installed again when the version there is not CLIENT_NODE_VERSION; an install that
# fails stops make.
CLIENT_NODE_VERSION := 1.4.0
CLIENT_NODE_DIR := build/bench/npm
client-node:
	$(Q)command -v node >/dev/null && command -v npm >/dev/null || \
	  { echo "kreflect: the tests need node and npm (Debian: nodejs npm)" >&2; exit 1; }
	$(Q)grep -qs '"version": "$(CLIENT_NODE_VERSION)"' \
	    $(CLIENT_NODE_DIR)/node_modules/@kubernetes/client-node/package.json || \
	  { echo "  NPM     @kubernetes/client-node@$(CLIENT_NODE_VERSION) -> $(CLIENT_NODE_DIR)"; \
	    mkdir -p $(CLIENT_NODE_DIR) && npm install --prefix $(CLIENT_NODE_DIR) --no-audit --no-fund \
	    --no-package-lock --save-exact --loglevel=error @kubernetes/client-node@$(CLIENT_NODE_VERSION) && \
	    grep -qs '"version": "$(CLIENT_NODE_VERSION)"' \
	      $(CLIENT_NODE_DIR)/node_modules/@kubernetes/client-node/package.json || \
	    { echo "kreflect: npm did not install @kubernetes/client-node@$(CLIENT_NODE_VERSION)" >&2; exit 1; }; }

serve-clients: bench-packages client-node build/kreflect
	$(Q)python3 tests/serve/clients.py

bench-serve: build/kreflect
	$(Q)python3 tests/bench/serve_load.py
