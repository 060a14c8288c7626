# tenure: build, test and lint. Needs GNU make, Go, and for the real-server tests
# Java 17+ and npm (DynamoDB Local; Node.js 22 and Azurite come from the npm registry)
# and, optionally, PostgreSQL with psql, etcd and Redis (Debian 12: apt-get install
# postgresql-15 postgresql-client-15 etcd-server redis-server). scripts/testservers.sh
# (a wrapper of internal/testservers/cmd/testservers) installs the servers, PostgreSQL,
# etcd and Redis too when it runs as root, and builds kube-apiserver (over etcd) and
# nats-server from the Go module proxy; without them their tests skip, saying so
# (CI=true: fail).
#
#   make test          no tracked binaries, gofmt, go vet, go mod tidy, staticcheck, then every
#                      test (with -race) under the real servers (installed in the background
#                      meanwhile), and the simulator's full seed set without -race; each
#                      phase's time printed at the end (scripts/test.sh)
#   make integration   only the real-server tests (TestIntegration*), verbose, under the servers
#   make lint          gofmt check, go vet, go mod tidy check, staticcheck
#   make servers       install the pinned servers into the cache (~/.cache/tenure), and
#                      PostgreSQL, etcd and Redis from the system's packages (as root)
#   make cron          run the cron-leader example
#   make image         the container image of tenure, as bin/tenure-image-ARCH.tar
#                      (IMAGE_ARCH=arm64, IMAGE_TAG=registry/tenure:v1 to change them)
#
# With CI=true a real-server test that would skip for want of a server fails instead.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test
.DELETE_ON_ERROR:
MAKEFLAGS += --no-builtin-rules

GO ?= go
SERVERS := scripts/testservers.sh
# staticcheck 2026.2.2, the newest release. Its module versions are v0.x: the release
# named 2025.1.1 is v0.6.1, and `@2025.1.1` is not a version the Go proxy knows.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
STATICCHECK_BIN := $(or $(TENURE_CACHE),$(HOME)/.cache/tenure)/bin

ifeq ($(CI),true)
export TENURE_REQUIRE_SERVERS := 1
endif

.PHONY: test integration lint fmt-check vet tidy-check staticcheck race-check servers cron no-binaries image

# scripts/test.sh runs the phases (checks, vet, staticcheck, tidy, the
# tests under the servers, the simulator's full pass) with the servers
# installing in the background meanwhile, and prints each phase's time.
test:
	@GO=$(GO) STATICCHECK=$(STATICCHECK) scripts/test.sh

integration: race-check
	$(SERVERS) run -- $(GO) test -race -count=1 -v -run '^TestIntegration' ./...

lint: fmt-check vet tidy-check staticcheck

# gofmt over the Go files git knows about or would add (tracked plus untracked,
# minus .gitignore), so caches inside the tree are never scanned.
fmt-check:
	@files=(); \
	if git rev-parse --git-dir >/dev/null 2>&1; then \
		while IFS= read -r f; do if [[ -f $$f ]]; then files+=("$$f"); fi; done \
			< <(git ls-files --cached --others --exclude-standard -- '*.go'); \
	else \
		while IFS= read -r f; do files+=("$$f"); done \
			< <(find . -name '*.go' -not -path './.*' -not -path '*/testdata/*'); \
	fi; \
	bad=$$( (( $${#files[@]} == 0 )) || gofmt -l "$${files[@]}"); \
	if [[ -n $$bad ]]; then \
		echo "gofmt: these files are not formatted (run: gofmt -w FILE):" >&2; \
		printf '  %s\n' $$bad >&2; \
		exit 1; \
	fi

# -race: vet compiles what the tests under -race compile, once for both.
vet:
	$(GO) vet -race ./...

# go.mod and go.sum say exactly what the code imports.
tidy-check:
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy" >&2; exit 1; }

# staticcheck itself is built without -race; it asks go list for the race
# build, whose export data vet compiled.
staticcheck:
	GOBIN=$(STATICCHECK_BIN) CGO_ENABLED=0 GOFLAGS= $(GO) install $(STATICCHECK)
	GOFLAGS=-race $(STATICCHECK_BIN)/staticcheck ./...

# Build outputs never enter git: no tracked file may be an executable binary
# (ELF, Mach-O, PE) or larger than 1 MB.
no-binaries:
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
		bad=$$(git ls-files -z | xargs -0 -r sh -c 'for f; do [ -f "$$f" ] || continue; \
			if [ "$$(wc -c < "$$f")" -gt 1048576 ]; then echo "  $$f: larger than 1 MB"; continue; fi; \
			case "$$(head -c 4 "$$f" | od -An -tx1 | tr -d " \n")" in \
				7f454c46|cffaedfe|cefaedfe|feedfacf|feedface|4d5a*) echo "  $$f: an executable";; \
			esac; done' _); \
		if [[ -n $$bad ]]; then \
			echo "build outputs are tracked by git (git rm --cached them, and ignore them):" >&2; \
			echo "$$bad" >&2; \
			exit 1; \
		fi; \
	fi

# -race needs cgo, which needs a C compiler; say so before starting any server.
race-check:
	@if [[ "$$($(GO) env CGO_ENABLED)" != 1 ]]; then \
		echo "go test -race needs cgo and a C compiler (go env CGO_ENABLED is not 1): apt-get install gcc" >&2; \
		exit 1; \
	fi

servers:
	$(SERVERS) install

cron:
	$(GO) run ./examples/cron

# The container image: a static tenure (no cgo: the image has no libc) at /tenure, its
# entrypoint, on an empty base, built without a container daemon by
# internal/tools/image (go-containerregistry) into a tarball for docker load, podman
# load, kind load image-archive or crane push.
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
IMAGE_TAG ?= tenure:$(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
image:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags='-s -w' -o bin/tenure-linux-$(IMAGE_ARCH) ./cmd/tenure
	$(GO) run ./internal/tools/image -bin bin/tenure-linux-$(IMAGE_ARCH) -arch $(IMAGE_ARCH) -tag $(IMAGE_TAG) -o bin/tenure-image-$(IMAGE_ARCH).tar
	@echo "bin/tenure-image-$(IMAGE_ARCH).tar: $(IMAGE_TAG) (docker load -i, podman load -i, or crane push bin/tenure-image-$(IMAGE_ARCH).tar REGISTRY/tenure:TAG)"
