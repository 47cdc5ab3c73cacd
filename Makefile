# The README's commands, kept here so CI and people run the same thing.
GO ?= go

.PHONY: demo test build vet fmt lint bench release

# The main job: a scripted multi-agent task against the built-in simulator (no keys, no network).
# The build says what it does: a first build downloads and compiles every dependency, and names
# each package as it compiles it.
demo:
	@echo "== building bin/cortexbuild (a first build downloads and compiles every dependency, a few minutes on 2 cores; each package is named as it compiles)"
	$(GO) build -v -o bin/cortexbuild ./cmd/cortexbuild
	@echo "== running the demo"
	./bin/cortexbuild demo

# Every test, with the race detector, through gotestsum (a tool pinned in
# go.mod): go test's output, then every skipped test with its reason.
# Integration tests that need PostgreSQL or Redis skip (saying why) when
# those are absent, and fail in CI.
test:
	$(GO) tool gotestsum --format pkgname-and-test-fails -- -race -count=1 ./...

build:
	$(GO) build -o bin/cortexbuild ./cmd/cortexbuild

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# A release into dist/: static, stripped binaries for linux and darwin on
# amd64 and arm64 packed as cortexbuild_<version>_<os>_<arch>.tar.gz, an
# OCI image per linux architecture (cortexbuild_<version>_image_linux_<arch>.tar,
# for docker load / podman load) and an OCI layout of both, and
# SHA256SUMS; no Docker daemon needed (docs/operations.md, Releases).
VERSION ?= $(shell git describe --tags --always --dirty)
release:
	$(GO) run ./tools/release -version $(VERSION)
