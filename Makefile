# rlshim — one GNU make file.
#
#   make                 build/librlshim.so and build/rlshim
#   make test            build and run every test (unit, integration, lint,
#                        instructions per call against their baseline)
#   make bench           benchmarks; they print ratios measured in one run
#   make asan | tsan     the tests under ASan+UBSan | TSan (own build dirs)
#   make ubsan           the tests under UBSan alone (in curl and wget too)
#   make ubsan-rest      after make asan: UBSan over only what it skipped
#   make asan-shared | asan-alone   make asan in CI's two parts
#   make ubsan-rest-shared | ubsan-rest-alone   ubsan-rest after each
#   make fuzz            the config, HTTP-scanner and robots.txt fuzzers,
#                        FUZZ_SECONDS each
#   make demo            a real program, bare and throttled, side by side
#   make docs            docs/timeline.svg and docs/adapt.svg (a Scrapy crawl
#                        adapting to a server that slows down), each drawn
#                        from a real run's decision log
#   make examples        the examples a user copies (pytest, shell), as tests
#   make install         PREFIX (/usr/local) and DESTDIR honoured
#   make deb             build/rlshim_VERSION_ARCH.deb (dpkg-deb), lintian-clean
#
# The user's CFLAGS/LDFLAGS are kept apart from the project's flags.

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
# The library lives in a private directory (as torsocks' and faketime's
# do): no program links it, and ld.so's search path never finds it.
PKGLIBDIR  ?= $(LIBDIR)/rlshim
# Debian's multiarch triplet: where the package puts the library, and one
# more place `rlshim run` looks for it.
MULTIARCH  ?= $(shell $(CC) -print-multiarch 2>/dev/null)
SYSCONFDIR ?= /etc
MANDIR     ?= $(PREFIX)/share/man
DESTDIR    ?=

CC      ?= cc
CFLAGS  ?= -O2 -g
LDFLAGS ?=
FUZZ_SECONDS ?= 20
VERSION := 0.1.0

SANITIZER ?=
ifeq ($(SANITIZER),)
  B := build
  SAN_FLAGS :=
else ifeq ($(SANITIZER),address)
  B := build-asan
  SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer \
               -fno-sanitize-recover=undefined
else ifeq ($(SANITIZER),undefined)
  B := build-ubsan
  SAN_FLAGS := -fsanitize=undefined -fno-sanitize-recover=undefined
else ifeq ($(SANITIZER),thread)
  B := build-tsan
  SAN_FLAGS := -fsanitize=thread
else
  $(error SANITIZER must be address, undefined or thread, not '$(SANITIZER)')
endif

# Packages: the build needs inih; the tests need Criterion and every real
# client they run (a missing one is installed, or make fails naming it: a
# test never skips for want of a package). Round 2's tests need Redis,
# hiredis, libseccomp, Go and Debian's pytest (pytest-3: python3 on PATH
# may not be Debian's).
BUILD_DEPS := pkg-config:cmd:pkg-config libinih-dev:pc:inih
# rlshim run --seccomp: only the CLI links libseccomp (never the .so).
BUILD_DEPS += libseccomp-dev:pc:libseccomp
SECCOMP_CFLAGS = $(shell pkg-config --cflags libseccomp 2>/dev/null)
SECCOMP_LIBS   = $(shell pkg-config --libs libseccomp 2>/dev/null)
TEST_DEPS  := $(BUILD_DEPS) libcriterion-dev:pc:criterion curl:cmd:curl \
              wget:cmd:wget python3:cmd:python3 openssl:cmd:openssl \
              mandoc:cmd:mandoc socat:cmd:socat binutils:cmd:nm \
              nodejs:cmd:node default-jdk-headless:cmd:javac \
              redis-server:cmd:redis-server libhiredis-dev:pc:hiredis \
              python3-pytest:cmd:pytest-3 strace:cmd:strace
# The seccomp tests build a Go client (standard library only, offline).
TEST_DEPS  += golang-go:cmd:go
# `rlshim stat --prometheus` is read by a real parser of the text format
# (Debian's python3, which .ci/ensure-deps cannot probe for a module).
TEST_DEPS  += python3-prometheus-client:file:/usr/lib/python3/dist-packages/prometheus_client/parser.py
# The request tests (SPEC §11): nginx with TLS and HTTP/2 as the server, a
# forward proxy, and real clients (python modules probed by their files).
TEST_DEPS  += nginx-light:file:/usr/sbin/nginx tinyproxy:cmd:tinyproxy libssl-dev:pc:openssl \
              libgnutls28-dev:pc:gnutls \
              python3-requests:file:/usr/lib/python3/dist-packages/requests/__init__.py \
              python3-aiohttp:file:/usr/lib/python3/dist-packages/aiohttp/__init__.py \
              python3-httpx:file:/usr/lib/python3/dist-packages/httpx/__init__.py \
              python3-h2:file:/usr/lib/python3/dist-packages/h2/__init__.py \
              python3-scrapy:file:/usr/lib/python3/dist-packages/scrapy/__init__.py
# Instructions per call are counted with callgrind.
TEST_DEPS  += valgrind:cmd:valgrind
ENSURE     := sh .ci/ensure-deps

# Fleet budgets (SPEC §8): hiredis's reply parser, linked statically when
# Debian ships the archive (no new DT_NEEDED, nothing exported through the
# version script); the tests start their own redis-server, make a Redis
# Cluster of them with redis-cli --cluster create, and put simulated hosts
# in network namespaces with ip (iproute2).
BUILD_DEPS += libhiredis-dev:pc:hiredis
TEST_DEPS  += redis-server:cmd:redis-server redis-tools:cmd:redis-cli \
              iproute2:cmd:ip
# (Debian's hiredis.pc names /usr/lib as libdir: ask the compiler instead.)
HIREDIS_A    = $(shell $(CC) -print-file-name=libhiredis.a)
HIREDIS_LIBS = $(if $(filter /%,$(HIREDIS_A)),$(HIREDIS_A),$(shell pkg-config --libs hiredis 2>/dev/null))

# Requests over HTTP/2 (SPEC §11, §12): libnghttp2's HPACK inflater, linked
# statically like hiredis when Debian ships the archive.
BUILD_DEPS += libnghttp2-dev:pc:libnghttp2
NGHTTP2_A    = $(shell $(CC) -print-file-name=libnghttp2.a)
NGHTTP2_LIBS = $(if $(filter /%,$(NGHTTP2_A)),$(NGHTTP2_A),$(shell pkg-config --libs libnghttp2 2>/dev/null))
# A robots.txt body in gzip or deflate (SPEC §14): zlib's inflate, from a
# libz.so.1 the library loads with dlopen at the first such body
# (src/policy/zlibload.h), never linked into it; its header gives the
# types. The unit tests and fuzzers, which compress and inflate bodies
# themselves, link it as any program does.
BUILD_DEPS += zlib1g-dev:pc:zlib
ZLIB_LIBS = -lz
# per = domain (SPEC §3): libpsl's Public Suffix List, loaded with dlopen
# only by a process whose config asks for it (never a DT_NEEDED of the
# .so); its header gives the prototypes the loader's pointers are typed
# by. The package Recommends libpsl5 for it.
BUILD_DEPS += libpsl-dev:pc:libpsl
# Every link line: the archives the core library needs.
DEP_LIBS = $(INIH_STATIC) $(HIREDIS_LIBS) $(NGHTTP2_LIBS)

PC_CFLAGS   = $(shell pkg-config --cflags inih 2>/dev/null)
INIH_STATIC = $(shell pkg-config --variable=libdir inih 2>/dev/null)/libinih.a

RL_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC \
             -fvisibility=hidden -pthread -MMD -MP -Isrc \
             -DRL_VERSION='"$(VERSION)"' -DRL_SYSCONFDIR='"$(SYSCONFDIR)"' \
             -DRL_PKGLIBDIR='"$(PKGLIBDIR)"' \
             $(if $(MULTIARCH),-DRL_MULTIARCH='"$(MULTIARCH)"')
ALL_CFLAGS = $(RL_CFLAGS) $(PC_CFLAGS) $(SECCOMP_CFLAGS) $(SAN_FLAGS) $(CFLAGS)
ALL_LDFLAGS = $(SAN_FLAGS) -pthread $(LDFLAGS)

CORE_SRCS := $(wildcard src/util/*.c src/limit/*.c src/state/*.c \
                        src/http/*.c src/policy/*.c src/fleet/*.c \
                        src/model/*.c)
SHIM_SRCS := $(wildcard src/shim/*.c)
CLI_SRCS  := $(wildcard src/cli/*.c)
UNIT_SRCS := $(wildcard tests/unit/*.c)
INTEG_SRCS := $(wildcard tests/integration/test_*.c)
HELPER_SRCS := $(wildcard tests/integration/helpers/*.c)
BENCH_SRCS := $(wildcard tests/bench/*.c)

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))
CORE_OBJS := $(call obj,$(CORE_SRCS))
SHIM_OBJS := $(call obj,$(SHIM_SRCS))
CLI_OBJS  := $(call obj,$(CLI_SRCS))
UNIT_OBJS := $(call obj,$(UNIT_SRCS))
INTEG_OBJS := $(call obj,$(INTEG_SRCS))

# The fleet's Lua scripts (src/fleet/lua/), linked in as read-only data by
# ld -r -b binary, whose symbols _binary_NAME_lua_start and _end come from
# the file's name (ld runs in its folder); bucket and window begin with
# prelude.lua. Comment lines are dropped: the text is sent in every EVAL,
# and the handshake's one buffer holds both decision scripts.
OBJCOPY  ?= objcopy
LUA_DIR  := $(B)/obj/src/fleet/lua
LUA_OBJS := $(LUA_DIR)/bucket.o $(LUA_DIR)/window.o $(LUA_DIR)/pause.o \
            $(LUA_DIR)/pace.o

CORE_LIB := $(B)/librlcore.a
SHIM_SO  := $(B)/librlshim.so
CLI_BIN  := $(B)/rlshim
UNIT_BIN := $(B)/tests/unit
INTEG_BIN := $(B)/tests/integration
HELPERS  := $(patsubst tests/integration/helpers/%.c,$(B)/tests/helpers/%,$(HELPER_SRCS))
BENCHES  := $(patsubst tests/bench/%.c,$(B)/bench/%,$(BENCH_SRCS))

.PHONY: all test test-suites build-tests unit integration lint check bench asan asan-shared asan-alone tsan ubsan ubsan-rest ubsan-rest-shared ubsan-rest-alone fuzz fuzz-run demo \
        docs examples deb deb-test host-test instructions instructions-baseline \
        install uninstall clean deps test-deps
.DELETE_ON_ERROR:

all: $(B)/.deps $(SHIM_SO) $(CLI_BIN)

$(B)/.deps:
	@$(ENSURE) $(BUILD_DEPS)
	@mkdir -p $(B) && touch $@

# Checked again whenever the list changes.
# After the build's (never two apt-get at once under make -j).
$(B)/.test-deps: Makefile .ci/ensure-deps | $(B)/.deps
	@$(ENSURE) $(TEST_DEPS)
	@mkdir -p $(B) && touch $@

$(B)/obj/%.o: %.c | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# The sanitizer runtimes install their own signal handlers through
# sigaction while they start, before they can run instrumented code: our
# sigaction wrapper (hook_signal.c) is never built with TSan's
# instrumentation, or a TSan shim preloaded alone crashes at load.
$(B)/obj/src/shim/hook_signal.o: SAN_FLAGS := $(filter-out -fsanitize=thread,$(SAN_FLAGS))

$(LUA_DIR)/bucket.lua: src/fleet/lua/prelude.lua src/fleet/lua/bucket.lua
$(LUA_DIR)/window.lua: src/fleet/lua/prelude.lua src/fleet/lua/window.lua
$(LUA_DIR)/pause.lua: src/fleet/lua/pause.lua
$(LUA_DIR)/pace.lua: src/fleet/lua/pace.lua
$(LUA_DIR)/%.lua:
	@mkdir -p $(dir $@)
	sed '/^[[:space:]]*--/d' $^ > $@

$(LUA_DIR)/%.o: $(LUA_DIR)/%.lua
	cd $(dir $@) && $(LD) -r -b binary -z noexecstack -o $*.o $*.lua
	$(OBJCOPY) --rename-section .data=.rodata,alloc,load,readonly,data,contents $@

$(CORE_LIB): $(CORE_OBJS) $(LUA_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# inih is linked statically so that no ini_* symbol is exported and nothing
# joins every process's DT_NEEDED; the anonymous version script exports only
# the hooked libc names. Every process loads this library (with a host-wide
# preload, every process on the host), so what loading it costs is paid
# everywhere: -Bsymbolic-functions binds the library's own references to
# its own functions at link time (no look-up of them at each start), and
# its libc imports are bound when first called, not at load (no -z now:
# Debian's default, partial RELRO; a process that never touches the
# network calls few of them). -z noseparate-code: the headers, code and
# read-only data in one mapping, not three: on a virtual machine whose
# page tables the hypervisor shadows (CI's), each mapping a process takes
# at start-up is a large part of what SPEC 13 allows. What start-up costs
# is make instructions' `true` row and tests/bench/startup.sh's. The
# price: the read-only data is executable too (more gadgets for an exploit
# to find); RELRO, which protects the pointers an exploit would overwrite,
# is kept.
$(SHIM_SO): $(SHIM_OBJS) $(CORE_LIB) src/shim/exports.map
	$(CC) -shared -o $@ $(SHIM_OBJS) $(CORE_LIB) $(DEP_LIBS) \
	    -Wl,--version-script=src/shim/exports.map -Wl,-z,relro \
	    -Wl,-z,noseparate-code \
	    -Wl,-Bsymbolic-functions $(ALL_LDFLAGS) -ldl

$(CLI_BIN): $(CLI_OBJS) $(CORE_LIB)
	$(CC) -o $@ $(CLI_OBJS) $(CORE_LIB) $(DEP_LIBS) $(ALL_LDFLAGS) \
	    -Wl,-z,now -Wl,-z,relro $(SECCOMP_LIBS)

# Test objects need Criterion's headers, so they are built after test deps.
$(B)/obj/tests/%.o: tests/%.c | $(B)/.test-deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Wno-missing-field-initializers -c $< -o $@

$(UNIT_BIN): $(UNIT_OBJS) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(UNIT_OBJS) $(CORE_LIB) $(DEP_LIBS) $(ALL_LDFLAGS) \
	    -lcriterion $(ZLIB_LIBS)

$(INTEG_BIN): $(INTEG_OBJS) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(INTEG_OBJS) $(CORE_LIB) $(DEP_LIBS) $(ALL_LDFLAGS) \
	    -lcriterion

# Helpers may use the core library (the store's racers open segments).
$(B)/tests/helpers/%: tests/integration/helpers/%.c $(CORE_LIB) | \
    $(B)/.test-deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Wno-missing-field-initializers -o $@ $< \
	    $(CORE_LIB) $(DEP_LIBS) $(ALL_LDFLAGS) -ldl $(HELPER_LIBS)

# The TLS client links OpenSSL itself (what the TLS hooks interpose).
$(B)/tests/helpers/tls_client: HELPER_LIBS := -lssl -lcrypto
$(B)/tests/helpers/bench_tls: HELPER_LIBS := -lssl -lcrypto
$(B)/tests/helpers/gnutls_get: HELPER_LIBS := -lgnutls

$(B)/bench/%: tests/bench/%.c $(CORE_LIB) | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(CORE_LIB) $(DEP_LIBS) $(ALL_LDFLAGS) \
	    $(BENCH_LIBS)

# The seccomp benchmark's floor supervisor builds its filter with libseccomp.
$(B)/bench/bench_seccomp: BENCH_LIBS := $(SECCOMP_LIBS)
$(B)/bench/bench_seccomp: tests/seccomp/floor.h tests/seccomp/clients.h

# Tests see the build through the environment, never through LD_PRELOAD of
# the runner itself: helpers are spawned with the shim in *their* env.
TEST_ENV = RLSHIM_BUILD=$(abspath $(B)) RLSHIM_SRC=$(abspath .) \
           RLSHIM_SANITIZER=$(SANITIZER) \
           LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp) \
           TSAN_OPTIONS=die_after_fork=0
CRITERION_FLAGS ?= --jobs 2
# Each suite ends on "NAME: N passed, N failed, N skipped", every skip
# listed with its reason; a skip tests/skips.allow does not allow for this
# build fails the suite.
SUITE = $(TEST_ENV) sh tests/run-suite.sh

# The build on every core first, then the suites one after another (their
# timing checks assume nothing else of ours runs beside them).
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
test:
	$(MAKE) -j$(JOBS) build-tests
	$(MAKE) -j1 test-suites
test-suites: all $(B)/.test-deps unit integration lint instructions examples \
      deb-test host-test

# Unit tests of the store exec a second program of their own; those of
# `rlshim run` preload the shim (without it they would skip).
UNIT_HELPERS := $(filter $(B)/tests/helpers/store_%,$(HELPERS))

unit: $(UNIT_BIN) $(UNIT_HELPERS) $(CLI_BIN) $(SHIM_SO)
	$(SUITE) unit $(UNIT_BIN) $(CRITERION_FLAGS)

INTEG_FLAGS ?= --jobs 1
INTEG_NAME ?= integration
integration: all $(B)/.test-deps $(INTEG_BIN) $(HELPERS)
	$(SUITE) $(INTEG_NAME) $(INTEG_BIN) $(INTEG_FLAGS)

lint: all $(B)/.test-deps
	@sh tests/lint.sh $(B)

check: test

# Instructions each call adds over a pass-through preload (callgrind), held
# to tests/bench/instructions.baseline: more than 20 % above a figure
# fails. Counts are of the plain build with the default CFLAGS: make
# asan/ubsan/tsan never run it, and it skips (saying why) in another build.
# After a change that moves a figure on purpose, make instructions-baseline
# and commit the file.
INSTR_BINS := $(B)/tests/helpers/bench_calls $(B)/tests/helpers/bench_net
instructions: all $(B)/.test-deps $(INSTR_BINS)
	@$(TEST_ENV) RLSHIM_CFLAGS='$(CFLAGS)' python3 tests/bench/instructions.py --check
instructions-baseline: all $(B)/.test-deps $(INSTR_BINS)
	$(TEST_ENV) python3 tests/bench/instructions.py --write-baseline

# Everything the suites run, built and nothing run: `make -j2 build-tests`
# compiles on both cores before the suites run one at a time.
build-tests: all $(B)/.test-deps $(UNIT_BIN) $(INTEG_BIN) $(HELPERS) $(INSTR_BINS)

# Ratios of medians of alternating runs, measured in one run, instructions
# per call (callgrind) and how costs grow; the last lines list every bar of
# the run, met or not (reported, not enforced: the machines are shared).
# A benchmark that cannot run fails (tests/bench/run.sh).
BENCH_SCRIPTS := tests/bench/instructions.py tests/bench/shim_overhead.py \
                 tests/bench/wait_overhead.py tests/bench/names_overhead.py \
                 tests/bench/startup.sh tests/bench/requests_overhead.py \
                 tests/bench/users_growth.py tests/bench/tls_overhead.py \
                 tests/bench/recv_overhead.py
bench: all $(BENCHES) $(HELPERS)
	@$(TEST_ENV) sh tests/bench/run.sh $(BENCHES) $(BENCH_SCRIPTS)

# The sanitizer builds run every integration suite but the two that time
# a whole system at scale, which make test runs: the conformance matrix
# (each of its carriers has its own suite, run here too) and fleet_scale.
SAN_INTEG_FLAGS = --jobs 1 --filter='!(matrix|fleet_scale)/*'
# make asan's build checks undefined behaviour too; it lists the tests it
# had to skip (an ASan shim hangs curl and wget) in build-asan/*.skipped.
ASAN_SKIPS := $(abspath build-asan)
ASAN_RUN = RLSHIM_SKIPS_DIR=$(ASAN_SKIPS) $(MAKE) -j1 SANITIZER=address
asan:
	$(MAKE) -j$(JOBS) SANITIZER=address build-tests
	$(ASAN_RUN) unit integration INTEG_FLAGS="$(SAN_INTEG_FLAGS)"
# CI runs make asan in two parts, built first. asan-shared runs beside
# make test, at the lowest priority: its suites hold counts, or times only
# as ratios to a control in the same test. asan-alone runs after it with
# the cores to itself: the unit suite (its fleet tests talk to Redis) and
# the integration suites that start dozens of ASan programs at once
# (dests, stress), must hear from Redis within SPEC 8's deadline (fleet,
# fleet_cluster), or hold each request's gap at the server, which a page
# answered late on a shared core shortens (crawlers, scrapy_polite: Scrapy
# under ASan; adapt, crawl_delay, backoff_on: SPEC 14's spacing).
ASAN_ALONE = dests|stress|fleet|fleet_cluster|crawlers|scrapy_polite|adapt|crawl_delay|backoff_on
asan-shared:
	$(ASAN_RUN) integration \
	    INTEG_FLAGS="--jobs 1 --filter='!(matrix|fleet_scale|$(ASAN_ALONE))/*'"
asan-alone:
	$(ASAN_RUN) unit integration INTEG_NAME=integration-alone \
	    INTEG_FLAGS="--jobs 1 --filter='@($(ASAN_ALONE))/*'"
tsan:
	$(MAKE) -j$(JOBS) SANITIZER=thread build-tests
	$(MAKE) -j1 SANITIZER=thread unit
ubsan:
	$(MAKE) -j$(JOBS) SANITIZER=undefined build-tests
	$(MAKE) -j1 SANITIZER=undefined unit integration \
	    INTEG_FLAGS="$(SAN_INTEG_FLAGS)"
# After make asan (CI): UBSan over only the tests make asan skipped, the
# rest having run under its ASan+UBSan build already.
SKIPPED_FILTER = sh tests/skipped-filter.sh $(ASAN_SKIPS)
ubsan-rest:
	@$(SKIPPED_FILTER)/unit.skipped >/dev/null
	@$(SKIPPED_FILTER)/integration*.skipped >/dev/null
	$(MAKE) -j$(JOBS) SANITIZER=undefined build-tests
	$(MAKE) -j1 SANITIZER=undefined unit integration \
	    CRITERION_FLAGS="--jobs 2 --filter='$$($(SKIPPED_FILTER)/unit.skipped)'" \
	    INTEG_FLAGS="--jobs 1 --filter='$$($(SKIPPED_FILTER)/integration*.skipped)'"
# The same in CI's two parts: what asan-shared skipped, run beside make
# test as asan-shared is (its suites are the ones that share), and what
# asan-alone skipped, after it.
ubsan-rest-shared:
	@$(SKIPPED_FILTER)/integration.skipped >/dev/null
	$(MAKE) -j$(JOBS) SANITIZER=undefined build-tests
	$(MAKE) -j1 SANITIZER=undefined integration \
	    INTEG_FLAGS="--jobs 1 --filter='$$($(SKIPPED_FILTER)/integration.skipped)'"
ubsan-rest-alone:
	@$(SKIPPED_FILTER)/unit.skipped >/dev/null
	@$(SKIPPED_FILTER)/integration-alone.skipped >/dev/null
	$(MAKE) -j$(JOBS) SANITIZER=undefined build-tests
	$(MAKE) -j1 SANITIZER=undefined unit integration \
	    CRITERION_FLAGS="--jobs 2 --filter='$$($(SKIPPED_FILTER)/unit.skipped)'" \
	    INTEG_FLAGS="--jobs 1 --filter='$$($(SKIPPED_FILTER)/integration-alone.skipped)'"

FUZZ_BIN := build-fuzz/fuzz_config
FUZZ_HTTP_BIN := build-fuzz/fuzz_http
FUZZ_ROBOTS_BIN := build-fuzz/fuzz_robots
FUZZ_DEPS = clang:cmd:clang libclang-rt-14-dev:file:/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a
FUZZ_CC = clang $(filter-out -MMD -MP -Werror,$(RL_CFLAGS)) $(PC_CFLAGS) -g -O1 \
	    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
# The config parser, then the HTTP scanners, then the robots.txt reader,
# each for FUZZ_SECONDS (the fuzzers are built side by side first).
fuzz:
	$(MAKE) -j$(JOBS) $(FUZZ_BIN) $(FUZZ_HTTP_BIN) $(FUZZ_ROBOTS_BIN)
	$(MAKE) -j1 fuzz-run
# A fuzzer that fails prints its input in base64 as its last line (CI
# shows only the end of its output): `base64 -d > crash` and run the
# fuzzer on that file to see it again.
FUZZ_SHOW = || { for f in build-fuzz/art/*; do echo "== $$f (base64):"; \
	    base64 -w0 "$$f"; echo; done; exit 1; }
fuzz-run: $(FUZZ_BIN) $(FUZZ_HTTP_BIN) $(FUZZ_ROBOTS_BIN)
	@mkdir -p build-fuzz/corpus build-fuzz/http_corpus build-fuzz/robots_corpus \
	    build-fuzz/art
	@rm -f build-fuzz/art/*
	$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/art/config- \
	    -dict=tests/fuzz/config.dict build-fuzz/corpus tests/fuzz/seeds \
	    $(FUZZ_SHOW)
	$(FUZZ_HTTP_BIN) -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/art/http- \
	    -dict=tests/fuzz/http.dict build-fuzz/http_corpus tests/fuzz/http_seeds \
	    $(FUZZ_SHOW)
	$(FUZZ_ROBOTS_BIN) -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/art/robots- \
	    -dict=tests/fuzz/robots.dict build-fuzz/robots_corpus \
	    tests/fuzz/robots_seeds $(FUZZ_SHOW)

build-fuzz/.deps: | $(B)/.deps
	@$(ENSURE) $(FUZZ_DEPS)
	@mkdir -p $(dir $@) && touch $@

$(FUZZ_BIN): tests/fuzz/fuzz_config.c $(CORE_SRCS) $(LUA_OBJS) | build-fuzz/.deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -o $@ $^ $(DEP_LIBS)

$(FUZZ_HTTP_BIN): tests/fuzz/fuzz_http.c $(wildcard src/http/*.c) | build-fuzz/.deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -o $@ $^ $(NGHTTP2_LIBS) $(ZLIB_LIBS)

$(FUZZ_ROBOTS_BIN): tests/fuzz/fuzz_robots.c src/http/robots.c \
	    src/http/robots_body.c src/http/chunked.c | build-fuzz/.deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -o $@ $^ $(ZLIB_LIBS)

demo: all
	@sh tests/demo/run.sh $(abspath $(B))

docs: all
	python3 docs/timeline.py $(abspath $(B)) docs/timeline.svg
	python3 docs/adapt_timeline.py $(abspath $(B)) docs/adapt.svg

# The examples run against this build: `rlshim` first on PATH.
examples: all
	@$(ENSURE) python3-pytest:cmd:pytest-3 curl:cmd:curl
	PATH=$(abspath $(B)):$$PATH $(TEST_ENV) sh examples/shell/polite.sh
	PATH=$(abspath $(B)):$$PATH $(TEST_ENV) pytest-3 -q -p no:cacheprovider \
	    examples/pytest

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGLIBDIR) \
	    $(DESTDIR)$(PREFIX)/etc $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5
	install -m 0755 $(CLI_BIN) $(DESTDIR)$(BINDIR)/rlshim
	install -m 0644 $(SHIM_SO) $(DESTDIR)$(PKGLIBDIR)/librlshim.so
	install -m 0644 conf/rlshim.ini $(DESTDIR)$(PREFIX)/etc/rlshim.ini.example
	install -m 0644 src/man/rlshim.1 $(DESTDIR)$(MANDIR)/man1/rlshim.1
	install -m 0644 src/man/rlshim.ini.5 $(DESTDIR)$(MANDIR)/man5/rlshim.ini.5

# The Debian package, from a build of its own configured for /usr (the
# binaries bake in where the library and the config are), staged by
# src/deb/build.sh and packed with dpkg-deb: no debhelper, no network.
DEB_B := build-deb
# One at a time (CI builds it beside make test, whose deb-test makes it
# again): flock holds a second until the first has packed.
deb:
	@$(ENSURE) dpkg-dev:cmd:dpkg-shlibdeps util-linux:cmd:flock
	@mkdir -p $(DEB_B)
	flock $(DEB_B)/.lock sh -c '$(MAKE) -j$(JOBS) B=$(DEB_B) PREFIX=/usr \
	    SYSCONFDIR=/etc LIBDIR=/usr/lib/$(MULTIARCH) MANDIR=/usr/share/man all && \
	    sh src/deb/build.sh $(DEB_B) $(VERSION)-1 $(MULTIARCH)'

# The package as an operator gets it: files, lintian, its own rlshim run.
deb-test: deb
	@$(ENSURE) lintian:cmd:lintian curl:cmd:curl
	@sh tests/deb/test_deb.sh $(DEB_B)/rlshim_$(VERSION)-1_$(shell dpkg-architecture -qDEB_HOST_ARCH).deb

# The shim preloaded host-wide, in a private mount namespace (root).
host-test: all
	@$(ENSURE) curl:cmd:curl util-linux:cmd:unshare
	@sh tests/host/test_host.sh $(B)

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/rlshim $(DESTDIR)$(PKGLIBDIR)/librlshim.so \
	    $(DESTDIR)$(PREFIX)/etc/rlshim.ini.example \
	    $(DESTDIR)$(MANDIR)/man1/rlshim.1 $(DESTDIR)$(MANDIR)/man5/rlshim.ini.5

clean:
	rm -rf build build-asan build-tsan build-ubsan build-fuzz build-deb

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
