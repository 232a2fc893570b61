# polyaxon-deploy: the Helm chart and the installer.
#   make demo   a local production-shaped cluster with Polyaxon installed on it
#   make test   every test: unit, chart, real PostgreSQL, real control plane (e2e), OCI registry
#   make scan   trivy's misconfiguration checks on every render; fails on HIGH/CRITICAL not in scan-ignore.txt
#   make package  dist/polyaxon-<version>.tgz, linted; signed (.prov) with KEYRING=... KEY=...
#   make image  polyaxon-deploy's image (the chart's metrics.installer exporter) in the local Docker engine
#   make mutate mutation testing (gremlins) of the fast packages: efficacy per package
SHELL := /bin/bash
GO ?= go
BIN := bin/polyaxon-deploy
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
TEST_TIMEOUT ?= 70m
# Test binaries are linked without DWARF (-w): only a debugger reads it, and linking is most of
# what a changed package's test costs (cmd/polyaxon-deploy's: 14 CPU-seconds instead of 20).
TEST_FLAGS ?= -count=1 -timeout $(TEST_TIMEOUT) -ldflags=-w
# Scenarios with clusters of their own all start at once and wait for their share of the
# machine (e2e package doc: on two cores two control-plane scenarios, or one beside one running
# Polyaxon's programs); -parallel only has to let them all wait.
E2E_PARALLEL ?= 16

.PHONY: all build image release test unit lint scan mutate package deps demo-deps binaries gateway promtool cosign s3store demo demo-down kind-images kind-images-if-possible cloudnativepg-kind bench-plan bench-backup bench-bucket bench-adopt clean

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/polyaxon-deploy

# polyaxon-deploy's binary alone, static, in an image tagged as the chart's metrics.installer.image
# defaults (push it to your registry, or set IMAGE): the exporter the chart runs.
CHART_APP := $(shell awk '/^version:/ {print $$2; exit}' charts/polyaxon/Chart.yaml)
IMAGE ?= ghcr.io/polyaxon-deploy/polyaxon-deploy:$(CHART_APP)
image:
	@rm -rf bin/image && mkdir -p bin/image/tmp
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w -X main.version=$(CHART_APP)' -o bin/image/polyaxon-deploy ./cmd/polyaxon-deploy
	printf 'FROM scratch\nCOPY polyaxon-deploy /bin/polyaxon-deploy\nCOPY tmp /tmp\nUSER 65534:65534\nENTRYPOINT ["/bin/polyaxon-deploy"]\n' > bin/image/Dockerfile
	docker build -q -t '$(IMAGE)' bin/image

# The chart as a Helm archive for a registry: `helm push dist/polyaxon-<version>.tgz oci://HOST/PATH`.
# KEYRING (a secret keyring, gpg --export-secret-keys) and KEY (the key's name) add a provenance file;
# CHART_VERSION overrides Chart.yaml's version.
package:
	$(GO) run ./cmd/package-chart --chart charts/polyaxon --dest dist \
	  $(if $(CHART_VERSION),--version '$(CHART_VERSION)') \
	  $(if $(KEY),--sign --keyring '$(KEYRING)' --key '$(KEY)' $(if $(PASSPHRASE_FILE),--passphrase-file '$(PASSPHRASE_FILE)'))

# A release's files in dist/release (a new directory): polyaxon-deploy for linux and darwin, amd64
# and arm64, static, VERSION stamped in (Go records the commit and its time), a CycloneDX SBOM of
# each binary, the chart, checksums.txt, and a cosign signature of each file made with COSIGN_KEY
# (its password in COSIGN_PASSWORD; UNSIGNED=1 for a trial build). KEYRING/KEY add the chart's
# provenance file; PUSH=oci://HOST/PATH pushes the chart there, signed, with Artifact Hub's
# metadata (REGISTRY_CONFIG, CA_FILE). docs/releases.md says how to verify each file.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
release:
	$(GO) run ./cmd/make-release --version '$(VERSION)' --dest dist/release $(if $(TARGETS),--targets '$(TARGETS)') \
	  $(if $(COSIGN_KEY),--signing-key '$(COSIGN_KEY)') $(if $(UNSIGNED),--unsigned) \
	  $(if $(KEY),--keyring '$(KEYRING)' --key '$(KEY)') \
	  $(if $(PUSH),--push '$(PUSH)' $(if $(REGISTRY_CONFIG),--registry-config '$(REGISTRY_CONFIG)') $(if $(CA_FILE),--ca-file '$(CA_FILE)'))

# System packages (PostgreSQL, Chromium), and Polyaxon's own programs (haupt, polyaxon: pinned with hashes,
# in a virtual environment), cached outside the repo.
deps:
	@bash e2e/scripts/install-deps.sh
	@bash e2e/scripts/install-polyaxon.sh --all >/dev/null

binaries:
	@bash e2e/scripts/build-binaries.sh >/dev/null

# promtool (TestAlertRulesPassPromtool runs the chart's alerts through it), from the Go module
# proxy, cached outside the repo.
promtool:
	@bash e2e/scripts/build-promtool.sh >/dev/null

# cosign (the release tests verify every signature with it), from the Go module proxy, cached
# outside the repo.
cosign:
	@bash e2e/scripts/build-cosign.sh >/dev/null

# versitygw (Versity S3 Gateway: the real S3 store e2e/s3test starts for the tests), from the Go
# module proxy, cached outside the repo.
s3store:
	@bash e2e/scripts/build-s3store.sh >/dev/null

# Traefik (the Gateway API controller and data plane of the e2e and the demo) and the Gateway
# API CRDs, from the Go module proxy, cached outside the repo.
gateway:
	@bash e2e/scripts/build-traefik.sh >/dev/null

# e2e/oci is a module of its own (the registry's dependencies stay out of the installer's); it
# runs beside the other packages (measured: 238 s for both, against 206 s and 48 s one after the
# other), its output printed when it ends.
# The e2e package runs after the others, with the machine to itself: its scenarios share the
# machine by their own measure (e2e package doc), and beside the other packages' tests
# TestPolyaxonVersionUpgrade's adoption passed its 5-minute bound. The kind scenario
# (TestProductionOnKind) writes whether kind was tested to a file printed at the end (go test
# shows nothing of a passing package): on a machine that cannot run kind's nodes it is not, and
# the line says why; E2E_PROVIDER=kind makes that an error.
test: deps binaries gateway promtool cosign s3store kind-images-if-possible
	$(GO) vet ./...
	@report=$$(mktemp); oci=$$(mktemp); pkgs=$$($(GO) list ./... | grep -v '/e2e$$'); code=0; \
	  echo "cd e2e/oci && $(GO) vet ./... && $(GO) test $(TEST_FLAGS) ./... (beside the next command)"; \
	  (cd e2e/oci && $(GO) vet ./... && $(GO) test $(TEST_FLAGS) ./...) >$$oci 2>&1 & ocipid=$$!; \
	  echo "$(GO) test $(TEST_FLAGS) <every package but ./e2e>"; \
	  $(GO) test $(TEST_FLAGS) $$pkgs || code=$$?; \
	  wait $$ocipid || code=$$?; echo "e2e/oci:"; cat $$oci; rm -f $$oci; \
	  echo "$(GO) test $(TEST_FLAGS) -parallel $(E2E_PARALLEL) ./e2e"; \
	  POLYAXON_DEPLOY_KIND_REPORT=$$report $(GO) test $(TEST_FLAGS) -parallel $(E2E_PARALLEL) ./e2e || code=$$?; \
	  if [ -s $$report ]; then cat $$report; else echo "e2e: kind: TestProductionOnKind did not report"; fi; \
	  rm -f $$report; exit $$code

# Quick loop without the control plane (e2e), PostgreSQL and S3 suites (pgtest and s3test skip
# under -short).
unit:
	$(GO) test -count=1 -short $$($(GO) list ./... | grep -v /e2e)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd e2e/oci && $(GO) vet ./...
	$(GO) test -count=1 -run 'TestLint|TestSchema' ./charts/...

# Builds trivy once into the binaries' cache, renders every profile alone and with each
# values/*.yaml, and runs `trivy config` on them offline. SCAN_ARGS="-keep DIR" keeps the
# manifests and trivy's JSON report.
scan:
	@trivy=$$(bash e2e/scripts/build-trivy.sh) && $(GO) build -o bin/chartscan ./e2e/cmd/chartscan && \
	  bin/chartscan -trivy "$$trivy" -ignore scan-ignore.txt $(SCAN_ARGS)

# Builds gremlins once into the binaries' cache and mutates the fast packages one at a time:
# efficacy per package, survivors without a test or an entry in installer/mutation-survivors.txt.
# Fails when preflight, check or plan is under 80%. MUTATE_ARGS="-keep DIR" keeps the reports;
# MUTATE_ARGS="installer/plan" runs one package. About an hour on 2 cores.
mutate:
	@gremlins=$$(bash e2e/scripts/build-gremlins.sh) && \
	  $(GO) run ./e2e/cmd/mutate -gremlins "$$gremlins" $(MUTATE_ARGS)

# The demo's own dependencies: PostgreSQL (install-deps.sh, which adds Chromium for the web UI
# test), the programs of the one Polyaxon version it runs (the chart's appVersion; make deps
# installs every pinned version, for the upgrade scenarios), and the Kubeflow training
# operator its distributed runs need.
demo-deps:
	@bash e2e/scripts/install-deps.sh
	@bash e2e/scripts/install-polyaxon.sh >/dev/null
	@bash e2e/scripts/build-training-operator.sh >/dev/null

# kind's node image and every image of the kind demo, built here from Debian's packages, the Go
# module proxy and PyPI wheels in a private Docker engine (docs/kind-offline.md); stops before
# building, saying why, on a machine that cannot run kind's nodes.
kind-images:
	@bash e2e/scripts/build-kind-images.sh build >/dev/null
	@bash e2e/scripts/build-kind-images.sh polyaxon >/dev/null

# make test's: kind-images where this machine can run kind's nodes; elsewhere it says why and
# the kind scenario reports that kind was not tested.
kind-images-if-possible:
	@bash e2e/scripts/build-kind-images.sh if-possible

# CloudNativePG 1.28.0 on kind, not part of make test: its operator (built from the Go module
# proxy, build-cloudnativepg.sh) and a Postgres of Debian's packages as kind images, then
# TestCloudNativePGFailoverOnKind: three instances on three nodes, a primary's pod deleted and
# a primary's node frozen, each failover timed (e2e/cluster/addons/cloudnativepg).
cloudnativepg-kind: kind-images
	@bash e2e/scripts/build-kind-images.sh cloudnativepg >/dev/null
	E2E_CLOUDNATIVEPG=1 $(GO) test $(TEST_FLAGS) -run 'TestCloudNativePGFailoverOnKind$$' -v ./e2e

# E2E_PROVIDER=kind make demo: the same demo on kind (real kubelets, containers and CNI).
demo: $(if $(filter kind,$(E2E_PROVIDER)),kind-images binaries build,demo-deps binaries gateway build)
	@bash e2e/scripts/demo.sh up

demo-down:
	@bash e2e/scripts/demo.sh down

bench-plan:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x ./installer/plan/

bench-backup: deps
	$(GO) run ./e2e/bench/backup $(BENCH_ARGS)

# backups kept in a bucket (a real S3 store, versitygw) against the directory target, side by
# side (BENCH_ARGS="-size 1GiB -runs 3", the defaults).
bench-bucket: deps s3store
	$(GO) run ./e2e/bench/bucket $(BENCH_ARGS)

# adopt's backup and restore phases next to plain backup and restore of the same database
# (BENCH_ARGS="-size 250Mi -runs 3"; default 1Gi, one run).
bench-adopt: deps
	$(GO) run ./e2e/bench/adopt $(BENCH_ARGS)

clean:
	rm -rf bin dist
