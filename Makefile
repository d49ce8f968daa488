# Agent libOS. `make run` and `make test` work on a fresh Debian 12 machine with Go:
# missing tools are installed (as root) or named with the exact command to run.

GO       ?= go
BUILD    := build
GUEST    := wasm/libos_guest.wasm
GOFLAGS_TEST ?=

.PHONY: all build guest guest-verify test bench bench-compare check run clean toolchain quickjs native dist soak fuzz conformance mcp-clients guest-profile

all: build

# The guest is committed (wasm/libos_guest.wasm with its record, wasm/guest_version.go), so
# the Go build never needs clang: nothing below rebuilds it implicitly. File times after a
# clone are arbitrary, so they decide nothing; 'make guest' rebuilds on request and
# 'make guest-verify' proves the committed bytes are what the sources build.
build: bin/libos

toolchain:
	@scripts/toolchain.sh

quickjs: $(BUILD)/quickjs/.verified

$(BUILD)/quickjs/.verified: | toolchain
	scripts/fetch-quickjs.sh $(BUILD)

guest: $(BUILD)/quickjs/.verified | toolchain
	wasm/guest/build.sh $(BUILD) $(GUEST) wasm/guest_version.go

# Rebuilds the guest and its record into a temporary directory and compares both with the
# committed files byte for byte. CI runs it before the tests, so a change to the shim, the
# patch, the prelude or the build script cannot land without the guest it builds.
guest-verify: $(BUILD)/quickjs/.verified | toolchain
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	wasm/guest/build.sh $(BUILD) $$tmp/libos_guest.wasm $$tmp/guest_version.go || exit 1; \
	ok=1; \
	cmp -s $$tmp/libos_guest.wasm $(GUEST) || { echo "guest-verify: $(GUEST) is not what the guest sources build (sha256 $$(sha256sum < $$tmp/libos_guest.wasm | cut -d' ' -f1), committed $$(sha256sum < $(GUEST) | cut -d' ' -f1))"; ok=0; }; \
	cmp -s $$tmp/guest_version.go wasm/guest_version.go || { echo "guest-verify: wasm/guest_version.go is not the record of this build:"; diff wasm/guest_version.go $$tmp/guest_version.go; ok=0; }; \
	if [ $$ok = 0 ]; then echo "guest-verify: run 'make guest' and commit wasm/libos_guest.wasm and wasm/guest_version.go"; exit 1; fi; \
	echo "guest-verify: $(GUEST) and wasm/guest_version.go are reproduced byte for byte"

# bin/libos carries the guest compiled for this machine (wasm/internal/seed), so that a
# first run with an empty compilation cache does not compile it.
bin/libos: FORCE
	GO=$(GO) scripts/build-seeded.sh bin/libos

# Static libos binaries for linux/amd64, linux/arm64, darwin/amd64, darwin/arm64 and
# windows/amd64 in dist/, with SHA256SUMS; two runs on one commit give the same sums.
dist:
	GO=$(GO) scripts/dist.sh dist

# The native build of the same QuickJS sources, used only by benchmarks to report the
# wasm/native ratio. Never part of the product.
native: $(BUILD)/quickjs/.verified
	wasm/guest/build-native.sh $(BUILD) $(BUILD)/native/qjs-bench

# An instruction-level profile of the guest's machine code running the CPU row's loop
# (scripts/guestperf): links the guest again with wasm-ld's --Map for the function names,
# proves it is the committed guest byte for byte, samples it with perf, and does the same
# for the native build when 'make native' made it. Needs perf (apt-get install -y
# linux-perf) and root. Its build record is written as .txt: a .go file under build/ would be
# a package of the module. Never part of 'make test'. GUEST_PROFILE_FLAGS="-js '...'" for
# another program.
GUEST_PROFILE_FLAGS ?=
guest-profile: $(BUILD)/quickjs/.verified | toolchain
	@mkdir -p $(BUILD)/guest-profile
	@if [ -f $(BUILD)/guest-profile/raw.map ] && [ -f $(BUILD)/guest-profile/raw.wasm ] && cmp -s $(BUILD)/guest-profile/libos_guest.wasm $(GUEST); then \
		echo "guest-profile: reusing $(BUILD)/guest-profile/raw.map (its build is the committed guest)"; \
	else \
		GUEST_LDFLAGS=-Wl,--Map=$(BUILD)/guest-profile/raw.map wasm/guest/build.sh $(BUILD) \
			$(BUILD)/guest-profile/libos_guest.wasm $(BUILD)/guest-profile/guest_version.txt || exit 1; \
		cmp -s $(BUILD)/guest-profile/libos_guest.wasm $(GUEST) || { \
			echo "guest-profile: the guest linked with --Map is not $(GUEST); run make guest-verify"; exit 1; }; \
		cp $(BUILD)/guest/raw.wasm $(BUILD)/guest-profile/raw.wasm; \
	fi
	$(GO) build -o $(BUILD)/guest-profile/guestperf ./scripts/guestperf
	$(BUILD)/guest-profile/guestperf -map $(BUILD)/guest-profile/raw.map -raw $(BUILD)/guest-profile/raw.wasm \
		-out $(BUILD)/guest-profile $(GUEST_PROFILE_FLAGS)
	@if [ -x $(BUILD)/native/qjs-bench ]; then \
		$(BUILD)/guest-profile/guestperf -native $(BUILD)/native/qjs-bench -out $(BUILD)/guest-profile $(GUEST_PROFILE_FLAGS); \
	else echo "guest-profile: no native build to compare with (make native)"; fi

# 'go list -m all' fetches the go.mod file of every module in the graph, which 'go test'
# alone does not: internal/modtest builds a module that requires this one with the proxy
# off, and a dependency's graph includes modules this one never builds. 'go mod download'
# fetches the source of every module go.mod requires, also those only another platform
# builds (modtest cross-builds windows/amd64 with the proxy off).
test:
	$(GO) list -m all >/dev/null
	$(GO) mod download
	$(GO) test -race -timeout 30m $(GOFLAGS_TEST) ./...

# The long suites: every runaway guest under several budgets, four at once, repeated.
# Prints the counts RELIABILITY.md records.
soak:
	LIBOS_SOAK=1 $(GO) test -run 'Soak' -v -timeout 60m ./wasm/ | grep -E '^(---|ok|FAIL|\s+\S+_test.go:[0-9]+: runaways:)'
	LIBOS_SOAK=1 $(GO) test -run 'TestCorruptionInjection' -v -timeout 60m ./store/ | grep -E '^(---|ok|FAIL|\s+\S+_test.go:[0-9]+: corruption injection:)'
	LIBOS_SOAK=1 $(GO) test -run 'TestRandomizedOwnershipChecker' -v -timeout 60m ./cluster/ | grep -E '^(---|ok|FAIL|\s+\S+_test.go:[0-9]+: (seed|[0-9]+ steps))'

# Every fuzz target, one after another, FUZZTIME each (default 60s), on the committed
# corpora in each package's testdata/fuzz; what a run finds is added there.
FUZZTIME ?= 60s
fuzz:
	@set -e; for t in engine:FuzzAdapter internal/jsonexact:FuzzDecode internal/jsonexact:FuzzObjectMatchesReference \
		internal/jsonexact:FuzzEqualReflexive mcpserver:FuzzStdio mcpserver:FuzzHTTP \
		jsbundle:FuzzCompile syscalls:FuzzParseTape syscalls:FuzzRouterArgs syscalls:FuzzRedact; do \
		pkg=$${t%%:*}; name=$${t##*:}; echo "== $$pkg $$name"; \
		$(GO) test ./$$pkg -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -parallel 1; done

bench: native
	LIBOS_NATIVE_BENCH=$(CURDIR)/$(BUILD)/native/qjs-bench $(GO) test -run '^$$' -bench . -benchmem -timeout 30m ./...

# libOS beside Deno 2.9.6 (installed from npm into build/tools/deno) at the same jobs,
# interleaved; writes BENCHMARKS.md. Uses native QuickJS when 'make native' built it.
# Minutes long; never part of 'make test'. BENCH_COMPARE_FLAGS="-reps 5 -out ''" for a look.
BENCH_COMPARE_FLAGS ?=
bench-compare:
	GO=$(GO) scripts/bench-compare.sh $(BENCH_COMPARE_FLAGS)

check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@mkdir -p $(BUILD); cp go.mod $(BUILD)/go.mod.bak; cp go.sum $(BUILD)/go.sum.bak; \
	$(GO) mod tidy; \
	if ! cmp -s go.mod $(BUILD)/go.mod.bak || ! cmp -s go.sum $(BUILD)/go.sum.bak; then \
		echo "go mod tidy changed go.mod/go.sum; commit the tidy result"; exit 1; fi

# The TypeScript MCP clients the tests drive (testdata/mcp-client), as locked; npm from
# Debian on a bare machine. CI runs it before the tests so that they never skip.
mcp-clients:
	scripts/mcp-clients.sh

# The MCP conformance suite (pinned, from npm, with a Node.js it accepts, into
# build/conformance) against 'libos serve --http', for both requirement sets.
conformance: $(GUEST)
	scripts/conformance/run.sh

run: build
	bin/libos demo

clean:
	rm -rf $(BUILD) bin dist

FORCE:
