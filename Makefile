# Agent libOS. `make run` and `make test` work on a fresh Debian 12 machine with Go:
# missing tools are installed (as root) or named with the exact command to run.

GO       ?= go
BUILD    := build
GUEST    := wasm/libos_guest.wasm
GUEST_SRC := $(wildcard wasm/guest/*) $(wildcard wasm/internal/fuel/*.go wasm/internal/fuel/instrument/*.go)
GOFLAGS_TEST ?=

.PHONY: all build guest test bench check run clean toolchain quickjs native soak

all: build

build: $(GUEST) bin/libos

toolchain:
	@scripts/toolchain.sh

quickjs: $(BUILD)/quickjs/.verified

$(BUILD)/quickjs/.verified: | toolchain
	scripts/fetch-quickjs.sh $(BUILD)

guest: $(GUEST)

$(GUEST): $(BUILD)/quickjs/.verified $(GUEST_SRC) | toolchain
	wasm/guest/build.sh $(BUILD) $(GUEST)

bin/libos: $(GUEST) FORCE
	CGO_ENABLED=0 $(GO) build -o bin/libos ./cmd/libos

# The native build of the same QuickJS sources, used only by benchmarks to report the
# wasm/native ratio. Never part of the product.
native: $(BUILD)/quickjs/.verified
	wasm/guest/build-native.sh $(BUILD) $(BUILD)/native/qjs-bench

test: $(GUEST)
	$(GO) test -race -timeout 20m $(GOFLAGS_TEST) ./...

# The long suites: every runaway guest under several budgets, four at once, repeated.
# Prints the counts RELIABILITY.md records.
soak: $(GUEST)
	LIBOS_SOAK=1 $(GO) test -run 'Soak' -v -timeout 60m ./wasm/ | grep -E '^(---|ok|FAIL|\s+\S+_test.go:[0-9]+: runaways:)'

bench: $(GUEST) native
	LIBOS_NATIVE_BENCH=$(CURDIR)/$(BUILD)/native/qjs-bench $(GO) test -run '^$$' -bench . -benchmem -timeout 30m ./...

check: $(GUEST)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@cp go.mod $(BUILD)/go.mod.bak; cp go.sum $(BUILD)/go.sum.bak; \
	$(GO) mod tidy; \
	if ! cmp -s go.mod $(BUILD)/go.mod.bak || ! cmp -s go.sum $(BUILD)/go.sum.bak; then \
		echo "go mod tidy changed go.mod/go.sum; commit the tidy result"; exit 1; fi

run: build
	bin/libos demo

clean:
	rm -rf $(BUILD) bin $(GUEST)

FORCE:
