# app-controller: the App operator, a Service->Ingress controller and a node labeler in one
# controller-manager binary. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c
.DEFAULT_GOAL := help

ROOT       := $(abspath .)
BIN        := $(ROOT)/bin
LOCAL      := $(ROOT)/.local
KUBECONFIG ?= $(LOCAL)/kubeconfig
export KUBECONFIG

GO         ?= go
# Log verbosity of `make run`: 2 shows every write and status change.
V          ?= 2
KUBECTL    := $(BIN)/kubectl
# The control plane binaries, built from the separate tools module in hack/tools: the
# Kubernetes components are one multi-call binary, bin/kube, run through a symbolic link
# of each component's name (hack/tools/kube).
KUBE_COMMANDS := kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
CLUSTER_BINS  := $(addprefix $(BIN)/,kube $(KUBE_COMMANDS) kwok etcd)
# The version the Kubernetes components report (as a release build stamps it).
KUBE_VERSION  := v1.37.2
# Its minor, 1.37: the column of the compatibility matrix that bin/ itself serves.
KUBE_MINOR    := $(subst v,,$(basename $(KUBE_VERSION)))
# The -ldflags that stamp Kubernetes components with version $(1) of minor $(2) (37).
kube_ldflags   = $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,-X $(p).gitVersion=$(1) -X $(p).gitMajor=1 -X $(p).gitMinor=$(2) -X $(p).gitTreeState=clean)
KUBE_LDFLAGS  := $(call kube_ldflags,$(KUBE_VERSION),$(lastword $(subst ., ,$(KUBE_MINOR))))
KWOK_STAGES  := $(BIN)/kwok-stages
# The control planes of other Kubernetes minors (make test-compat): bin/compat/MINOR.
COMPAT_BIN    := $(BIN)/compat
# Non-empty when make runs as root (the real node's tiers need it).
ROOT_USER     := $(filter 0,$(shell id -u))

UNIT_PKGS  = $(shell $(GO) list ./... | grep -v -e /test/integration -e /test/e2e -e /test/compat -e /pkg/generated/)

# What every build of the binary is stamped with (`app-controller --version`, the
# app_controller_build_info metric, the image labels), computed once per make run.
# `make VERSION=v0.1.0` overrides it.
VERSION     := $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
COMMIT      := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
VERSION_PKG := github.com/app-controller/app-controller/pkg/version
LDFLAGS     := -X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).commit=$(COMMIT)
# The flags of every go build of the controller binary (make build, make image).
GO_BUILD_FLAGS = -trimpath -ldflags '$(LDFLAGS)'
# hack/make.sh does what takes more than a line of shell (make.sh's header lists it).
MAKE_SH = MAKE="$(MAKE)" GO="$(GO)" BIN="$(BIN)" KUBECTL="$(KUBECTL)" LDFLAGS="$(LDFLAGS)" \
	TEST_PLATFORMS="$(TEST_PLATFORMS)" ./hack/make.sh
INTEGRATION_TIMEOUT ?= 30m
# make test runs each package that starts a control plane or a node (integration, e2e,
# the chart's, the compat smoke) in one of TEST_SLOTS slots shared by all its steps
# (hack/make.sh slot, as go test's -exec): so many at a time, whatever each step's -p.
# make test hands it to its steps as APP_TEST_SLOTS; a step made alone (make
# integration, make e2e...) has no slots, only its -p.
TEST_SLOTS ?= 3
SLOT_EXEC = $(if $(APP_TEST_SLOTS),-exec '$(ROOT)/hack/make.sh slot')
# Integration test packages run this many at a time, each with its own control plane.
# They mostly wait on the apiserver (a run used about one of the two cores): 2 at a time
# took 4m20s here instead of about 6 minutes one at a time. 3: the soak's smoke, two
# minutes of churn whatever the machine, runs beside the two longest packages from the
# start instead of after one of them.
INTEGRATION_PARALLEL ?= 3

# One build configuration for every go command but the race-detector tests: static
# (no cgo) and -trimpath, as the image's binaries are built. go vet, the integration
# tests, make build, the image's linux binary of the host and the control plane binaries
# then share one build cache entry per package instead of compiling client-go and its
# dependencies once per configuration (a cold `make test` is mostly compile time).
export CGO_ENABLED ?= 0
export GOFLAGS ?= -trimpath

##@ General

# The targets with a "## help" comment, under the "##@" section above them (the
# kubebuilder scaffold's help).
.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target> [VAR=value ...]\n"} \
		/^[a-zA-Z0-9_\/-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } \
		/^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Run locally

.PHONY: dev
dev: cluster-up plugin ## Local control plane, CRD and example Apps, then the controller in the foreground (NODE=real: pods run for real).
	@# Always the local cluster: never a KUBECONFIG from the environment.
	@$(MAKE) --no-print-directory install examples KUBECONFIG=$(LOCAL)/kubeconfig
	@echo
	@echo "Control plane up. In another terminal:"
	@echo "  export KUBECONFIG=$(LOCAL)/kubeconfig"
	@echo "  $(KUBECTL) get apps -A"
	@echo "  PATH=$(BIN):\$$PATH kubectl app tree test-app -n tcs"
	@if [ -f $(LOCAL)/registry ]; then echo "  Image registry of the real node: $$(cat $(LOCAL)/registry) (make image image-push IMG=$$(cat $(LOCAL)/registry)/app-controller:dev)"; fi
	@echo "Stop the controller with Ctrl-C, the control plane with 'make cluster-down'."
	@echo
	@$(MAKE) --no-print-directory run KUBECONFIG=$(LOCAL)/kubeconfig

.PHONY: run
run: build ## Run the controller in the foreground against $KUBECONFIG (ARGS=flags, V=log verbosity).
	$(BIN)/app-controller --kubeconfig "$(KUBECONFIG)" -v=$(V) $(ARGS)

.PHONY: examples
examples: $(KUBECTL) ## Apply the example Apps (namespace tcs).
	$(KUBECTL) create namespace tcs --dry-run=client -o yaml | $(KUBECTL) apply -f -
	$(KUBECTL) apply -f artifacts/example/

##@ Build

.PHONY: build
build: plugin ## Build bin/app-controller and bin/kubectl-app, stamped with VERSION and COMMIT.
	$(GO) build $(GO_BUILD_FLAGS) -o $(BIN)/app-controller ./cmd/app-controller

# kubectl runs kubectl_complete-app, next to kubectl-app on PATH, to complete `kubectl app ...`.
PLUGIN_COMPLETE := cmd/kubectl-app/kubectl_complete-app

.PHONY: plugin
plugin: ## Build the kubectl plugin, bin/kubectl-app, with its completion hook bin/kubectl_complete-app.
	$(GO) build $(GO_BUILD_FLAGS) -o $(BIN)/kubectl-app ./cmd/kubectl-app
	install -m 0755 $(PLUGIN_COMPLETE) $(BIN)/kubectl_complete-app

# The krew archives and manifest: one tar.gz per platform in dist/, and dist/app.yaml
# rendered from hack/krew/app.yaml with their sha256.
PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
PLUGIN_DIST      := dist
# The file the archives carry besides the binary and the completion script.
PLUGIN_DOC       := $(firstword $(wildcard LICENSE) README.md)

.PHONY: plugin-dist
plugin-dist: ## Cross-compile the plugin into krew archives and the krew manifest in dist/ (VERSION=).
	@$(MAKE_SH) plugin-dist $(VERSION) hack/krew/app.yaml $(PLUGIN_DIST) $(PLUGIN_PLATFORMS) -- $(PLUGIN_COMPLETE) $(PLUGIN_DOC)

# The one-file installer: config/default with the image IMG (kubebuilder's build-installer).
INSTALLER ?= dist/install.yaml

.PHONY: build-installer
build-installer: $(KUBECTL) ## Write dist/install.yaml: CRD, namespace, RBAC and the Deployment of IMG.
	@mkdir -p $(dir $(INSTALLER))
	$(MAKE_SH) manifests $(IMG) > $(INSTALLER)
	@echo "wrote $(INSTALLER) (image $(IMG))"

##@ Deploy to the cluster of $KUBECONFIG

.PHONY: install
install: $(KUBECTL) ## Apply the CRDs (App, AnalysisTemplate, ClusterAnalysisTemplate) to the cluster of $KUBECONFIG and wait until they are established.
	$(KUBECTL) apply --server-side --force-conflicts -f config/crd/bases
	@$(MAKE_SH) wait-established apps.appcontroller.k8s.io analysistemplates.appcontroller.k8s.io clusteranalysistemplates.appcontroller.k8s.io

.PHONY: uninstall
uninstall: $(KUBECTL) ## Delete the CRDs, and with them every App and template, from the cluster of $KUBECONFIG.
	$(KUBECTL) delete --ignore-not-found -f config/crd/bases

.PHONY: deploy
deploy: $(KUBECTL) ## Apply the CRD, RBAC and the controller Deployment of IMG (config/default) to $KUBECONFIG.
	$(MAKE_SH) manifests $(IMG) | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: $(KUBECTL) ## Delete what deploy applied, the CRD and every App included.
	$(KUBECTL) kustomize config/default | $(KUBECTL) delete --ignore-not-found -f -

##@ Container image

# The image: name and tag (the Deployment of make deploy uses it too).
IMG ?= app-controller:latest
# Platforms of the image index (make image, make docker-buildx).
PLATFORMS ?= linux/amd64,linux/arm64
CONTAINER_TOOL ?= docker
# The image creation time, for reproducible digests: the commit time unless set.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_SOURCE := https://github.com/app-controller/app-controller
# SOURCE_DATE_EPOCH as RFC 3339 (GNU date, else BSD date), for the Dockerfile's label.
IMAGE_CREATED = $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -r $(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
DOCKER_BUILD_ARGS = --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) \
	--build-arg SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) --label org.opencontainers.image.created=$(IMAGE_CREATED)

IMAGE_DIR     := $(BIN)/image
IMAGE_LAYOUT  := $(IMAGE_DIR)/oci
HOST_ARCH     := $(shell $(GO) env GOARCH)
IMAGE_TARBALL := $(IMAGE_DIR)/app-controller-linux-$(HOST_ARCH).tar
IMAGEBUILD    := $(BIN)/imagebuild
# The SBOM generator (cyclonedx-gomod, pinned in its own module hack/tools/sbom).
SBOM_TOOL     := $(BIN)/cyclonedx-gomod
# Where the image holds the SBOM and the LICENSE (ociimage.DocDir).
IMAGE_DOC_DIR := /usr/share/doc/app-controller
comma := ,

# The SBOM: a CycloneDX JSON document of each platform's binary (the modules, with
# versions and go.sum hashes, that `go version -m` reads from it, the Go standard
# library, the binary's hashes), written to bin/image/<os>-<arch>/sbom.cdx.json, the
# host platform's also to bin/image/sbom.cdx.json, and put into that platform's image at
# $(IMAGE_DOC_DIR)/sbom.cdx.json beside the LICENSE. No serial number and no timestamp,
# so that the same binary gives the same SBOM and the image stays reproducible.
.PHONY: image
image: $(IMAGEBUILD) $(SBOM_TOOL) ## Build the image index (PLATFORMS) and its SBOM into bin/image, without Docker.
	@$(MAKE_SH) cross ./cmd/app-controller $(IMAGE_DIR) $(PLATFORMS)
	@$(MAKE_SH) sbom $(SBOM_TOOL) $(VERSION) $(IMAGE_DIR) linux/$(HOST_ARCH) $(PLATFORMS)
	$(IMAGEBUILD) build --layout $(IMAGE_LAYOUT) --tag $(IMG) \
		$(foreach p,$(subst $(comma), ,$(PLATFORMS)),--platform $(p)=$(IMAGE_DIR)/$(subst /,-,$(p))/app-controller --sbom $(p)=$(IMAGE_DIR)/$(subst /,-,$(p))/sbom.cdx.json) \
		--file $(IMAGE_DOC_DIR)/LICENSE=LICENSE \
		--tarball $(IMAGE_TARBALL) --tarball-platform linux/$(HOST_ARCH) --digest-file $(IMAGE_DIR)/index.digest \
		--created-epoch $(SOURCE_DATE_EPOCH) --version $(VERSION) --revision $(COMMIT) --source $(IMAGE_SOURCE)

.PHONY: image-push
image-push: $(IMAGEBUILD) ## Push the image index of bin/image/oci to IMG (credentials of ~/.docker/config.json).
	$(IMAGEBUILD) push --layout $(IMAGE_LAYOUT) $(IMG)

.PHONY: test-image
test-image: image ## Build the image, then check it: index, config, static binary, SBOM, reproducible digest.
	cd hack/tools && IMAGE_LAYOUT=$(IMAGE_LAYOUT) IMAGE_BINARIES=$(IMAGE_DIR) IMAGE_PLATFORMS=$(PLATFORMS) IMAGE_SBOM=$(IMAGE_DIR)/sbom.cdx.json \
		$(GO) test -count=1 ./imagebuild/...

# make test's check of the image: test-image with the image in bin/test-image instead of
# bin/image, so that it runs beside make e2e, whose make image writes bin/image.
.PHONY: test-image-beside
test-image-beside:
	@$(MAKE) --no-print-directory test-image IMAGE_DIR=$(BIN)/test-image

# The image builder (go-containerregistry), from the tools module.
$(IMAGEBUILD): hack/tools/go.mod hack/tools/go.sum $(shell find hack/tools/imagebuild -name '*.go' -not -name '*_test.go')
	cd hack/tools && $(GO) build -o $@ ./imagebuild

$(SBOM_TOOL): hack/tools/sbom/go.mod hack/tools/sbom/go.sum
	cd hack/tools/sbom && $(GO) build -o $@ github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod

# With Docker (or CONTAINER_TOOL=podman), as the kubebuilder scaffold has them.
.PHONY: docker-build
docker-build: ## Build IMG from the Dockerfile with CONTAINER_TOOL (default docker).
	$(CONTAINER_TOOL) build $(DOCKER_BUILD_ARGS) -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push IMG with CONTAINER_TOOL.
	$(CONTAINER_TOOL) push $(IMG)

# docker-buildx cross-compiles in the builder stage (FROM --platform=$BUILDPLATFORM) for
# each of PLATFORMS and pushes the multi-platform image to IMG.
.PHONY: docker-buildx
docker-buildx: ## Build and push IMG for PLATFORMS with docker buildx.
	sed -e '1 s/\(^FROM\)/FROM --platform=\$$\{BUILDPLATFORM\}/; t' -e ' 1,// s//FROM --platform=\$$\{BUILDPLATFORM\}/' Dockerfile > Dockerfile.cross
	- $(CONTAINER_TOOL) buildx create --name app-controller-builder
	$(CONTAINER_TOOL) buildx use app-controller-builder
	- $(CONTAINER_TOOL) buildx build --push --platform=$(PLATFORMS) --tag $(IMG) $(DOCKER_BUILD_ARGS) -f Dockerfile.cross .
	- $(CONTAINER_TOOL) buildx rm app-controller-builder
	rm Dockerfile.cross

##@ Helm chart

HELM  := $(BIN)/helm
CHART := charts/app-controller
# The Kubernetes version the chart is linted and rendered for: the local control plane's.
CHART_KUBE_VERSION := 1.37.2

.PHONY: helm
helm: $(HELM) ## Build bin/helm, the version pinned in test/chart/go.mod.

# Rebuilt only when the pinned version changes (first build: about 2 minutes).
$(HELM): test/chart/go.mod test/chart/go.sum
	cd test/chart && version=$$($(GO) list -m -f '{{.Version}}' helm.sh/helm/v3) && \
		$(GO) build -ldflags "-X helm.sh/helm/v3/internal/version.version=$$version" -o $(HELM) helm.sh/helm/v3/cmd/helm

.PHONY: helm-lint
helm-lint: $(HELM) ## helm lint --strict the chart and render it with each of its ci/ values files.
	@$(MAKE_SH) helm-lint $(HELM) $(CHART) $(CHART_KUBE_VERSION)

.PHONY: test-chart
test-chart: tools ## The chart's and the installer's tests: offline, then on a local control plane.
	cd test/chart && KUBE_CACHE_MUTATION_DETECTOR=true APP_CONTROLLER_BIN_DIR=$(BIN) \
		$(GO) test -count=1 -p 1 -timeout $(INTEGRATION_TIMEOUT) $(SLOT_EXEC) ./... $(TESTFLAGS)

##@ Release

# make release (docs/release.md): every artifact of VERSION into RELEASE_DIST; with
# REGISTRY=HOST:PORT the image and the chart pushed there; with COSIGN_KEY=PATH (its
# password in $COSIGN_PASSWORD) checksums.txt and the pushed image signed. The release's
# image is built for RELEASE_PLATFORMS, the plugin for PLUGIN_PLATFORMS, and its notes
# are CHANGELOG's section of VERSION.
RELEASE_DIST      ?= dist
RELEASE_PLATFORMS ?= $(PLATFORMS)
REGISTRY          ?=
CHANGELOG         ?= CHANGELOG.md
COSIGN_KEY        ?=
# Signatures are not uploaded to a transparency log (Rekor) by default, and cosign does
# not fetch sigstore's signing configuration: a key's signature verifies offline with
# `cosign verify --key ... --insecure-ignore-tlog`. COSIGN_FLAGS= (empty) uploads them.
COSIGN_FLAGS      ?= --tlog-upload=false --use-signing-config=false
# sigstore's cosign, pinned in its own module hack/tools/cosign (first build: about 4 CPU
# minutes and 140 MB); built only for a signed release and the end-to-end tests.
COSIGN            := $(BIN)/cosign

.PHONY: release
release: $(IMAGEBUILD) $(SBOM_TOOL) $(HELM) $(KUBECTL) $(if $(COSIGN_KEY),$(COSIGN)) ## Write every artifact of VERSION=vX.Y.Z into dist/ (image, SBOMs, chart, install.yaml, crds.yaml, plugin, notes, checksums.txt); REGISTRY=HOST:PORT pushes the image and the chart, COSIGN_KEY=PATH signs.
	@VERSION='$(VERSION)' RELEASE_DIST='$(RELEASE_DIST)' REGISTRY='$(REGISTRY)' RELEASE_PLATFORMS='$(RELEASE_PLATFORMS)' \
		PLUGIN_PLATFORMS='$(PLUGIN_PLATFORMS)' CHANGELOG='$(CHANGELOG)' SOURCE_DATE_EPOCH='$(SOURCE_DATE_EPOCH)' \
		HELM='$(HELM)' IMAGEBUILD='$(IMAGEBUILD)' COSIGN='$(COSIGN)' COSIGN_KEY='$(COSIGN_KEY)' COSIGN_FLAGS='$(COSIGN_FLAGS)' \
		$(MAKE_SH) release

.PHONY: cosign
cosign: $(COSIGN) ## Build bin/cosign, the cosign version pinned in hack/tools/cosign (signs and verifies releases).

$(COSIGN): hack/tools/cosign/go.mod hack/tools/cosign/go.sum
	cd hack/tools/cosign && $(GO) build -o $@ github.com/sigstore/cosign/v3/cmd/cosign

##@ Local control plane

# The kind of node of the local cluster: kwok (simulated pods, the default) or real (one
# node that runs pods with containerd, the kubelet and kube-proxy; root only).
NODE ?= kwok
# What a real node needs beyond `make tools`: the Debian packages and `make node-tools`.
CLUSTER_UP_DEPS = tools $(if $(filter real,$(NODE)),node-packages node-tools) $(if $(KUBE_BIN_DIR),$(KUBE_BIN_DIR)/kube-apiserver)
# The Kubernetes minor of the control plane (make cluster-up KUBE=1.34): one of
# COMPAT_VERSIONS other than KUBE_MINOR runs the kube-apiserver, kube-controller-manager
# and kube-scheduler of bin/compat/KUBE (built first, as make test-compat does).
KUBE ?= $(KUBE_MINOR)
KUBE_BIN_DIR = $(if $(filter $(KUBE_MINOR),$(KUBE)),,$(COMPAT_BIN)/$(KUBE))
# kube-apiserver's feature gates, e.g. FEATURE_GATES=ShardedListAndWatch=true to try an
# alpha API (docs/how-to/sharding.md measures server-side sharding with it).
FEATURE_GATES ?=

.PHONY: cluster-up
cluster-up: $(CLUSTER_UP_DEPS) $(BIN)/localcluster ## Start the local control plane in the background (NODE=real: a node that runs pods for real; FEATURE_GATES=...: kube-apiserver's; KUBE=1.34: another Kubernetes minor's control plane); admin kubeconfig at .local/kubeconfig.
	$(BIN)/localcluster up --bin-dir $(BIN) --kube-bin-dir '$(KUBE_BIN_DIR)' --state-dir $(LOCAL) --crd-dir config/crd/bases --gateway-api --node $(NODE) --feature-gates '$(FEATURE_GATES)'

.PHONY: cluster-down
cluster-down: $(BIN)/localcluster ## Stop the local control plane and remove its state.
	$(BIN)/localcluster down --state-dir $(LOCAL)

.PHONY: tools
tools: $(CLUSTER_BINS) $(KWOK_STAGES) ## Build the control plane binaries into bin/ (first time: about 8-10 minutes on 2 cores).

# One go build for all of them: it shares the compile work. Rebuilt only when the tools
# module changes.
$(CLUSTER_BINS) &: hack/tools/go.mod hack/tools/go.sum hack/tools/etcd/main.go hack/tools/kube/main.go
	@echo "Building the Kubernetes components, kwok and etcd into bin/ (the first build takes 8-10 minutes on 2 cores)..."
	@mkdir -p $(BIN)
	cd hack/tools && $(GO) build -ldflags '$(KUBE_LDFLAGS)' -o $(BIN)/ ./kube sigs.k8s.io/kwok/cmd/kwok ./etcd
	@for c in $(KUBE_COMMANDS); do ln -sfn kube $(BIN)/$$c; done
	@touch $(CLUSTER_BINS)

# The control plane of another Kubernetes minor X, for make test-compat: kube-apiserver,
# kube-controller-manager and kube-scheduler of the module hack/tools/compat/X (written by
# `hack/make.sh compat-module X vX.Y`), stamped with its version, in bin/compat/X/ (etcd,
# kwok and kubectl are bin/'s). Rebuilt only when that module changes. The first build of
# a minor compiles every package of that release: for 1.34, 441 s of CPU (about 4 minutes
# on an idle 2-core machine) and 2.2 GB of memory at peak.
$(COMPAT_BIN)/%/kube-apiserver: hack/tools/compat/%/go.mod hack/tools/compat/%/go.sum
	@echo "Building kube-apiserver, kube-controller-manager and kube-scheduler $* into $(@D)..."
	@cd hack/tools/compat/$* && $(GO) mod tidy -diff >/dev/null || \
		{ echo "hack/tools/compat/$*/go.mod is not tidy: run hack/make.sh compat-module $* VERSION" >&2; exit 1; }
	cd hack/tools/compat/$* && version=$$($(GO) list -m -f '{{.Version}}' k8s.io/kubernetes) && \
		$(GO) build -ldflags "$(call kube_ldflags,$$version,$(lastword $(subst ., ,$*)))" -o $(@D)/ tool
	@touch $(@D)/kube-apiserver $(@D)/kube-controller-manager $(@D)/kube-scheduler

# Prometheus $(PROMETHEUS_VERSION), Debian bookworm's package, for the canary analysis's
# tests: the integration tests run bin/prometheus on loopback (framework.StartPrometheus),
# the end-to-end tests its image on the real node (realnode.InstallPrometheus). Only the
# binary, downloaded and unpacked (hack/make.sh prometheus: the package's postinst would
# start a system service on *:9090), about 10 s and 19 MB the first time, then cached.
PROMETHEUS         := $(BIN)/prometheus
PROMETHEUS_VERSION := 2.42.0
# What the integration tests need of it: as root (apt-get update may be needed), the
# binary; elsewhere, the test that needs it skips, with one line, if `make prometheus`
# was not run (the package's download works without root once apt knows it).
TEST_PROMETHEUS     = $(if $(ROOT_USER),$(PROMETHEUS))

.PHONY: prometheus
prometheus: $(PROMETHEUS) ## Put Prometheus 2.42's binary, Debian's, at bin/prometheus (the canary analysis's tests).

$(PROMETHEUS):
	@$(MAKE_SH) prometheus $(PROMETHEUS_VERSION) $@

# The real node's images: agnhost and resource-consumer from the same k8s.io/kubernetes
# module as the kubelet and kube-proxy of `make tools`, the image tool, and the OCI
# layouts the cluster's registry serves: agnhost:2.66.1 (the binary at /agnhost, its
# entrypoint, as upstream), the pods' sandbox image, agnhost run as `pause`,
# resource-consumer:1.15.0 (as upstream's Dockerfile: /consumer, its entrypoint, and the
# helper it runs to burn CPU at /consume-cpu/consume-cpu; not upstream's `stress`, a
# Debian package, so its /ConsumeMem does nothing here), demoapp:$(DEMOAPP_TAG) (our
# test/images/demoapp: errors and latency from its environment, and an in-cluster load
# generator) and prometheus:$(PROMETHEUS_VERSION) (Debian's binary and the libraries it
# loads: hack/make.sh prometheus-image). And metrics-server, which the cluster runs beside
# the control plane (hack/tools/metrics-server).
NODE_BINS      := $(BIN)/agnhost $(BIN)/resource-consumer $(BIN)/consume-cpu
NODE_IMAGES    := $(BIN)/node-images
METRICS_SERVER := $(BIN)/metrics-server
DEMOAPP        := $(BIN)/demoapp
# The tag of demoapp's image (localcluster.DemoappImage).
DEMOAPP_TAG    := 1

.PHONY: node-tools
node-tools: tools $(NODE_BINS) $(IMAGEBUILD) $(NODE_IMAGES) ## Build the real node's images (agnhost, pause, resource-consumer, demoapp, prometheus) and metrics-server into bin/.

$(NODE_BINS) &: hack/tools/go.mod hack/tools/go.sum
	@mkdir -p $(BIN)
	cd hack/tools && $(GO) build -o $(BIN)/ k8s.io/kubernetes/test/images/agnhost k8s.io/kubernetes/test/images/resource-consumer/consume-cpu
	cd hack/tools && $(GO) build -o $(BIN)/resource-consumer k8s.io/kubernetes/test/images/resource-consumer
	@touch $(NODE_BINS)

# demoapp, static, from the root module.
$(DEMOAPP): go.mod go.sum $(filter-out %_test.go,$(wildcard test/images/demoapp/*.go))
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@ ./test/images/demoapp

$(NODE_IMAGES): $(NODE_BINS) $(IMAGEBUILD) $(DEMOAPP) $(PROMETHEUS)
	@rm -rf $@
	$(IMAGEBUILD) build --layout $@/agnhost --tag agnhost:2.66.1 --platform linux/$(HOST_ARCH)=$(BIN)/agnhost \
		--entrypoint /agnhost --user 0:0 --created-epoch 0 --version 2.66.1 --revision k8s.io/kubernetes@v1.37.2 \
		--source https://github.com/kubernetes/kubernetes/tree/master/test/images/agnhost >/dev/null
	$(IMAGEBUILD) build --layout $@/pause --tag pause:2.66.1 --platform linux/$(HOST_ARCH)=$(BIN)/agnhost \
		--entrypoint /agnhost --arg pause --user 65535:65535 --created-epoch 0 --version 2.66.1 --revision k8s.io/kubernetes@v1.37.2 \
		--source https://github.com/kubernetes/kubernetes/tree/master/test/images/agnhost >/dev/null
	$(IMAGEBUILD) build --layout $@/resource-consumer --tag resource-consumer:1.15.0 --platform linux/$(HOST_ARCH)=$(BIN)/resource-consumer \
		--executable /consume-cpu/consume-cpu=$(BIN)/consume-cpu \
		--entrypoint /consumer --user 0:0 --created-epoch 0 --version 1.15.0 --revision k8s.io/kubernetes@v1.37.2 \
		--source https://github.com/kubernetes/kubernetes/tree/master/test/images/resource-consumer >/dev/null
	$(IMAGEBUILD) build --layout $@/demoapp --tag demoapp:$(DEMOAPP_TAG) --platform linux/$(HOST_ARCH)=$(DEMOAPP) \
		--entrypoint /demoapp --created-epoch 0 --version $(DEMOAPP_TAG) --revision $(COMMIT) \
		--source $(IMAGE_SOURCE)/tree/main/test/images/demoapp >/dev/null
	@$(MAKE_SH) prometheus-image $(IMAGEBUILD) $@/prometheus $(PROMETHEUS) $(PROMETHEUS_VERSION)

# metrics-server, from its own module (its Kubernetes libraries are not the control
# plane's), stamped with its version as its own Makefile does; a node tool too (first
# build: about 2 minutes of 2 cores).
node-tools: $(METRICS_SERVER)
$(METRICS_SERVER): hack/tools/metrics-server/go.mod hack/tools/metrics-server/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/metrics-server && version=$$($(GO) list -m -f '{{.Version}}' sigs.k8s.io/metrics-server) && \
		$(GO) build -ldflags "-X k8s.io/client-go/pkg/version.gitVersion=$$version" -o $@ sigs.k8s.io/metrics-server/cmd/metrics-server

# Traefik v3 (hack/tools/traefik), a real ingress and Gateway API controller, and its
# image (entrypoint /traefik), for the traffic tier of the end-to-end tests
# (test/e2e/traffic: make e2e, make e2e-traffic). Its first build downloads about 2.6 GB
# of modules and takes about 9 minutes on 2 cores: make test builds it in the background
# with the other tools (the stage e2e of TEST_TOOLS), while verify, unit and test-image run.
TRAEFIK        := $(BIN)/traefik
TRAEFIK_IMAGE  := $(BIN)/traffic-images/traefik

$(TRAEFIK): hack/tools/traefik/go.mod hack/tools/traefik/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/traefik && $(GO) build -o $@ github.com/traefik/traefik/v3/cmd/traefik

$(TRAEFIK_IMAGE): $(TRAEFIK) $(IMAGEBUILD)
	@rm -rf $@
	$(IMAGEBUILD) build --layout $@ --tag traefik:v3.6.12 --platform linux/$(HOST_ARCH)=$(TRAEFIK) \
		--entrypoint /traefik --user 65532:65532 --created-epoch 0 --version v3.6.12 --revision github.com/traefik/traefik/v3@v3.6.12 \
		--source https://github.com/traefik/traefik >/dev/null

# Argo Rollouts' controller (hack/tools/argo-rollouts), the peer of `make bench
# BENCHFLAGS='-scenarios peer'` and of its smoke in make integration (docs/performance.md,
# "Argo Rollouts side by side"), stamped with its version as its own Makefile does. Its
# controller serves /metrics and /healthz on 0.0.0.0 (a constant of its controller
# package, no flag): so that every server the bench starts listens on loopback, the build
# compiles a copy of the module in bin/ whose one constant says 127.0.0.1 (checked to be
# the only line changed), through a copy of the tools module's go.mod that replaces the
# module by that copy (go build -modfile; an overlay may not replace files of the module
# cache). Its CRDs are read from the module at run time (ARGO_ROLLOUTS_CRDS). First build:
# 621 modules (348 MiB of zips) downloaded in 48 s, then 350 CPU seconds of compiling
# (docs/performance.md).
ARGO_ROLLOUTS        := $(BIN)/rollouts-controller
ARGO_ROLLOUTS_SRC    := $(BIN)/argo-rollouts-src
ARGO_ROLLOUTS_MODULE := github.com/argoproj/argo-rollouts
ARGO_ROLLOUTS_CRDS    = $$(cd hack/tools/argo-rollouts && $(GO) list -m -f '{{.Dir}}' $(ARGO_ROLLOUTS_MODULE))/manifests/crds

$(ARGO_ROLLOUTS): hack/tools/argo-rollouts/go.mod hack/tools/argo-rollouts/go.sum
	@rm -rf $(ARGO_ROLLOUTS_SRC) && mkdir -p $(ARGO_ROLLOUTS_SRC)
	cd hack/tools/argo-rollouts && $(GO) mod download $(ARGO_ROLLOUTS_MODULE) && \
		dir=$$($(GO) list -m -f '{{.Dir}}' $(ARGO_ROLLOUTS_MODULE)) && version=$$($(GO) list -m -f '{{.Version}}' $(ARGO_ROLLOUTS_MODULE)) && \
		cp -R $$dir $(ARGO_ROLLOUTS_SRC)/module && chmod -R u+w $(ARGO_ROLLOUTS_SRC)/module && \
		sed -i 's|"0.0.0.0:%d"|"127.0.0.1:%d"|' $(ARGO_ROLLOUTS_SRC)/module/controller/controller.go && \
		changed=$$({ diff -r $$dir $(ARGO_ROLLOUTS_SRC)/module || true; } | grep -c '^>') && \
		if [ "$$changed" != 1 ]; then echo "$(ARGO_ROLLOUTS): the copy of $$dir differs in $$changed lines, want 1 (the listen address)" >&2; exit 1; fi && \
		cp go.mod go.sum $(ARGO_ROLLOUTS_SRC)/ && \
		$(GO) mod edit -modfile $(ARGO_ROLLOUTS_SRC)/go.mod -replace $(ARGO_ROLLOUTS_MODULE)=$(ARGO_ROLLOUTS_SRC)/module && \
		$(GO) build -modfile $(ARGO_ROLLOUTS_SRC)/go.mod -ldflags "-X $(ARGO_ROLLOUTS_MODULE)/utils/version.version=$${version#v}" \
			-o $@ $(ARGO_ROLLOUTS_MODULE)/cmd/rollouts-controller

# The Debian packages a real node runs: containerd, runc, the CNI plugins and iptables,
# installed with apt-get when one is missing (root).
.PHONY: node-packages
node-packages:
	@missing=""; for c in containerd runc iptables /usr/lib/cni/bridge; do command -v $$c >/dev/null || missing="$$missing $$c"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing containerd runc containernetworking-plugins iptables (missing:$$missing)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containerd runc containernetworking-plugins iptables >/dev/null; \
	fi

# Chromium from Debian's packages, the browser of the dashboard's tests
# (test/integration/dashboard, driven by chromedp), installed with apt-get when missing
# (root); elsewhere one line says how, and those tests skip (fail with CI=true).
.PHONY: chromium
chromium: ## Install Debian's chromium for the dashboard's browser tests (root), when missing.
	@if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing chromium (the dashboard's browser tests)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else echo "make chromium: not root: install Debian's chromium package for the dashboard's browser tests (they skip without it)"; fi; \
	fi

# kwok's fast node and pod stages, from the kwok module pinned in hack/tools, and the
# project's own (hack/kwok: container faults for integration tests).
$(KWOK_STAGES): hack/tools/go.mod $(wildcard hack/kwok/*.yaml)
	@rm -rf $@ && mkdir -p $@
	kwok_dir=$$(cd hack/tools && $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kwok) && \
		cp $$kwok_dir/kustomize/stage/node/fast/node-*.yaml $$kwok_dir/kustomize/stage/pod/fast/pod-*.yaml hack/kwok/*.yaml $@/ && \
		chmod u+w $@/*.yaml

.PHONY: $(BIN)/localcluster
$(BIN)/localcluster:
	$(GO) build -o $@ ./cmd/localcluster

##@ Develop

.PHONY: generate
generate: ## Regenerate the clients, CRD, RBAC, chart files and the reference pages of docs/ from the code.
	./hack/update-codegen.sh

# golangci-lint v2, pinned in its own module hack/tools/lint (first build: about 2 CPU
# minutes), with the kubebuilder scaffold's linters and more (.golangci.yml says which
# and why).
GOLANGCI_LINT := $(BIN)/golangci-lint

.PHONY: verify
verify: ## Fail if generated files are stale, gofmt, go vet or golangci-lint complain, a go.mod is untidy or the supply chain checks fail.
	GOLANGCI_LINT=$(GOLANGCI_LINT) LINT_BUILD="$(MAKE) --no-print-directory $(GOLANGCI_LINT)" ./hack/verify.sh

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (.golangci.yml: the kubebuilder scaffold's set and more) on our Go code; make verify runs it too.
	@$(MAKE_SH) lint $(GOLANGCI_LINT)

$(GOLANGCI_LINT): hack/tools/lint/go.mod hack/tools/lint/go.sum
	cd hack/tools/lint && $(GO) build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# The platforms of the image `make test` builds and checks: the host's. A cross-compiled
# linux/arm64 binary is a whole second compile of the dependencies (about 2.5 minutes of
# a cold run here) and tells nothing the host's does not (no cgo); the index of several
# platforms is covered by the image builder's unit tests, and `make test-image` alone
# (like a release) builds and checks both of PLATFORMS.
TEST_PLATFORMS ?= linux/$(HOST_ARCH)
# What `make test` builds in the background while verify, unit and test-image run, in
# stages one after the other (NAME=TARGET,...; hack/make.sh test): base, the control
# plane and helm (the chart's tests and every cluster step need them); integration,
# Chromium (the dashboard's browser tests), Argo Rollouts' controller (the peer smoke)
# and Prometheus (the canary analysis's tests, root); e2e, where the end-to-end tier can
# run (root), the real node's packages, binaries and images, cosign (the end-to-end
# tests sign and verify a release) and Traefik's image (the traffic tier); compat, the
# control plane of the oldest supported Kubernetes minor (test-compat-oldest: 441 s of
# CPU the first time, cached after). TEST_STEP_NEEDS names the stage each step waits for
# (the stages before it are built by then): on a fresh machine the integration tests
# start as soon as their tools are built, while the end-to-end tier's still build.
TEST_TOOLS = base=tools,$(HELM) integration=chromium,$(ARGO_ROLLOUTS)$(if $(ROOT_USER),$(comma)$(PROMETHEUS)) \
	$(if $(ROOT_USER),e2e=node-packages$(comma)node-tools$(comma)$(COSIGN)$(comma)$(TRAEFIK_IMAGE)) \
	compat=$(COMPAT_BIN)/$(COMPAT_OLDEST)/kube-apiserver
TEST_STEP_NEEDS = test-chart=base integration=integration e2e=e2e test-compat-oldest=compat
# The steps of make test, in order (hack/make.sh test: the tools build in the background
# until the first step that needs them). verify first, alone: a stale
# file or a vet error fails the run within a minute. Then four lanes at the same time
# (A+B: at the same time; A,B: B after A): the unit tests, then the chart's tests and the
# smoke on the oldest supported Kubernetes minor (test-compat-oldest); the integration
# tests; the image's check (test-image-beside: in its own bin/test-image, since make e2e
# writes bin/image); the end-to-end tests. Every package that starts a control plane or
# a node runs in one of TEST_SLOTS slots shared by the lanes (hack/make.sh slot): on 2
# cores the whole is CPU-bound (a warm run: 36-39 CPU minutes of those packages, and
# the compiles), so more at once only makes each slower. Each package's result line is
# printed as it comes, each lane's output whole when it ends, and at the end the
# packages by CPU seconds.
TEST_STEPS = verify unit,test-chart,test-compat-oldest+integration+test-image-beside+e2e

.PHONY: clean
clean: ## Remove bin/ and .local/ (stops nothing: run cluster-down first).
	rm -rf $(BIN) $(LOCAL)

##@ Test

.PHONY: test
test: ## Everything CI runs: verify, then unit, test-image, e2e, integration, test-chart and test-compat-oldest in four lanes, at most TEST_SLOTS (3) clusters at once.
	@TEST_TOOLS='$(TEST_TOOLS)' TEST_STEP_NEEDS='$(TEST_STEP_NEEDS)' APP_TEST_SLOTS='$(TEST_SLOTS)' PREFETCH_EXTRA='hack/tools/compat/$(COMPAT_OLDEST)' $(MAKE_SH) test $(TEST_STEPS)

# Unit tests are hermetic (no cluster, no network), so go test's cache may replay the
# result of a package whose code, test data and environment did not change; the
# integration tests, which run a control plane, always run (-count=1).
# `make unit TESTFLAGS=-count=1` forces a rerun.
.PHONY: unit
unit: ## Unit tests with the race detector and the cache mutation detector.
	KUBE_CACHE_MUTATION_DETECTOR=true CGO_ENABLED=1 $(GO) test -race $(UNIT_PKGS) $(TESTFLAGS)

.PHONY: integration
# The three longest packages first (go test starts them in this order, INTEGRATION_PARALLEL
# at a time), so that the short ones fill in beside them instead of one long package
# running alone at the end; the soak's smoke (test/integration/soak) lasts its 2 minutes
# plus its setup, about 2.5 minutes. The benchmark harness's smokes (test/integration/bench:
# 5 Apps through every scenario, the canary phases' writes pinned exactly, about 45 s; the
# peer scenario, Argo Rollouts side by side at 5 objects, about 90 s) run among the short
# ones. The canary analysis's tests (test/integration/analysis, 3-4.5 minutes) were
# test/integration/app's until that package took 9 minutes, the longest of make test: apart,
# each on its own control plane, they start fourth, as one of the three longest ends.
INTEGRATION_PKGS := ./test/integration/reliability ./test/integration/app ./test/integration/soak ./test/integration/analysis ./test/integration/...

# Argo Rollouts' controller and its CRDs, when INTEGRATION_PKGS has the benchmark harness's
# smoke (test/integration/bench: its peer smoke; without them it skips).
INTEGRATION_PEER = $(if $(filter ./test/integration/... ./test/integration/bench ./test/integration/bench/ ./test/integration/bench/...,$(INTEGRATION_PKGS)),$(ARGO_ROLLOUTS))

integration: tools chromium $(TEST_PROMETHEUS) $(INTEGRATION_PEER) ## Integration tests against a local kube-apiserver, etcd, controller-manager, scheduler and kwok.
	KUBE_CACHE_MUTATION_DETECTOR=true APP_CONTROLLER_BIN_DIR=$(BIN) APP_CONTROLLER_BENCH_SMOKE=1 \
		$(if $(INTEGRATION_PEER),APP_CONTROLLER_ARGO_ROLLOUTS=$(ARGO_ROLLOUTS) APP_CONTROLLER_ARGO_ROLLOUTS_CRDS=$(ARGO_ROLLOUTS_CRDS)) \
		$(GO) test -count=1 -p $(INTEGRATION_PARALLEL) -timeout $(INTEGRATION_TIMEOUT) $(SLOT_EXEC) $(INTEGRATION_PKGS) $(TESTFLAGS)

# The screenshots of docs/dashboard.md (the list, an App in the middle of a rollout),
# taken by the dashboard's browser test.
.PHONY: dashboard-screenshots
dashboard-screenshots: ## Regenerate docs/images/dashboard-*.png with the dashboard's browser test (Chromium, a local control plane).
	APP_DASHBOARD_SCREENSHOTS=$(ROOT)/docs/images $(MAKE) --no-print-directory integration \
		INTEGRATION_PKGS=./test/integration/dashboard TESTFLAGS='-run TestDashboard -v'

# The end-to-end tests run where a real node can (root, cgroups); elsewhere `make e2e` says
# in one line what it skipped and why, except with CI=true, where that fails the run.
.PHONY: e2e
e2e: $(BIN)/localcluster ## End-to-end tests on a real node (root; elsewhere one line says why they are skipped).
	@if reason=$$($(BIN)/localcluster can-run-real-node); then \
		$(MAKE) --no-print-directory e2e-run; \
	elif [ "$${CI:-}" = true ]; then echo "make e2e: $$reason (CI=true: a skipped tier fails the run)" >&2; exit 1; \
	else echo "make e2e: skipped: $$reason"; fi

# End-to-end packages run this many at a time, each with its own real node (lcnode-N):
# they mostly wait (image pulls, probes, the kubelet's back-off, Stalled thresholds).
E2E_PARALLEL ?= 2
# The end-to-end packages (E2E_PKGS=./test/e2e/tutorial runs one). The two longest first
# (go test starts the packages in this order, E2E_PARALLEL at a time): the install test
# (two releases made, helm install, upgrade, rollback, the API server frozen 45 s), about
# 3.8 minutes, then notready (its crash loop and OOM kill wait for Stalled), about 2; the
# others, 0.5 to 1.5 minutes each, fill in beside them, alphabetically, instead of one long
# package running alone at the end.
E2E_PKGS ?= ./test/e2e/install ./test/e2e/notready ./test/e2e/...
# Traefik's image, when E2E_PKGS has a package that runs it, the traffic tier or the
# canary analysis's (TRAEFIK_IMAGE_LAYOUT names it to the tests; without it
# test/e2e/traffic and test/e2e/analysis skip).
E2E_TRAEFIK = $(if $(filter ./test/e2e/... $(foreach p,traffic analysis,./test/e2e/$(p) ./test/e2e/$(p)/ ./test/e2e/$(p)/...),$(E2E_PKGS)),$(TRAEFIK_IMAGE))

.PHONY: e2e-run
e2e-run: node-packages tools node-tools $(HELM) $(COSIGN) $(E2E_TRAEFIK)
	$(MAKE) --no-print-directory image PLATFORMS=linux/$(HOST_ARCH)
	KUBE_CACHE_MUTATION_DETECTOR=true APP_CONTROLLER_BIN_DIR=$(BIN) TRAEFIK_IMAGE_LAYOUT=$(E2E_TRAEFIK) \
		$(GO) test -count=1 -p $(E2E_PARALLEL) -timeout $(INTEGRATION_TIMEOUT) $(SLOT_EXEC) $(E2E_PKGS) $(TESTFLAGS)

.PHONY: e2e-traffic
e2e-traffic: ## The traffic tier alone (make e2e runs it too): requests through Traefik to Apps' Ingress and HTTPRoute, a canary's weights.
	@$(MAKE) --no-print-directory e2e E2E_PKGS=./test/e2e/traffic

##@ Compatibility

# The Kubernetes minors the product supports and tests (docs/compatibility.md), the oldest
# first: the control plane of each is built from hack/tools/compat/MINOR (bin/compat/MINOR),
# but KUBE_MINOR's, which is bin/'s own.
COMPAT_VERSIONS := 1.34 1.35 1.36 1.37
COMPAT_OLDEST   := $(firstword $(COMPAT_VERSIONS))
empty :=
space := $(empty) $(empty)
# make test-compat VERSIONS=1.34,1.37 runs some of them.
VERSIONS ?= $(subst $(space),$(comma),$(COMPAT_VERSIONS))
# The binaries' directory of minor $(1).
compat_bin_dir = $(if $(filter $(KUBE_MINOR),$(1)),$(BIN),$(COMPAT_BIN)/$(1))

.PHONY: test-compat
test-compat: tools $(HELM) ## The smoke of test/compat on each Kubernetes minor of VERSIONS (default: 1.34,1.35,1.36,1.37; the first build of a minor: about 4 minutes), then the matrix of version x check.
	@$(MAKE_SH) test-compat $(COMPAT_BIN)/results $(foreach v,$(subst $(comma), ,$(VERSIONS)),$(v)=$(call compat_bin_dir,$(v)))

# make test's smoke on the oldest supported minor; its binaries build in the background
# (TEST_TOOLS).
.PHONY: test-compat-oldest
test-compat-oldest:
	@$(MAKE) --no-print-directory test-compat VERSIONS=$(COMPAT_OLDEST)

# How long `make fuzz` runs each Go fuzz target.
FUZZTIME ?= 60s
# The Go fuzz targets, as package:target. `go test` (make unit) runs their seed corpus.
FUZZ_TARGETS = ./pkg/controller/app:FuzzSyncApp ./pkg/controller/app:FuzzDesiredChildren ./pkg/controller/app:FuzzArbitrationOrder

.PHONY: fuzz
fuzz: ## Run each Go fuzz target for FUZZTIME (default 60s).
	@$(MAKE_SH) fuzz $(FUZZTIME) $(FUZZ_TARGETS)

##@ Benchmarks

# make bench: N Apps of REPLICAS replicas, ROUNDS rounds (docs/performance.md).
N        ?= 1000
REPLICAS ?= 1
ROUNDS   ?= 1
BENCH_WORK_DIR := $(LOCAL)/bench
# The JSON figures of the last run (docs/performance.md says what each key means).
BENCH_OUT      ?= $(LOCAL)/bench-result.json

# BENCHFLAGS='-scenarios peer' (the peer scenario: Argo Rollouts side by side) builds Argo
# Rollouts' controller first and names it and its CRDs to the harness.
BENCH_PEER = $(findstring peer,$(BENCHFLAGS))

.PHONY: bench
bench: tools build $(if $(BENCH_PEER),$(ARGO_ROLLOUTS)) ## The benchmark harness on its own control plane (N=1000 REPLICAS=1 ROUNDS=1; BENCHFLAGS='-scenarios peer': Argo Rollouts side by side).
	rm -rf $(BENCH_WORK_DIR)
	$(GO) run ./test/bench/cmd/appbench -apps $(N) -replicas $(REPLICAS) -rounds $(ROUNDS) \
		-bin-dir $(BIN) -controller $(BIN)/app-controller -crd-dir config/crd/bases \
		$(if $(BENCH_PEER),-peer-controller $(ARGO_ROLLOUTS) -peer-crd-dir $(ARGO_ROLLOUTS_CRDS)) \
		-work-dir $(BENCH_WORK_DIR) -out $(BENCH_OUT) $(BENCHFLAGS)

# make soak: the controller for DURATION under a steady churn of Apps and faults at
# intervals, then the invariants (docs/soak.md). NODE=kwok (the default, as for
# cluster-up: any machine, no root) runs the controller as processes with the chart's
# flags; NODE=real installs the chart (the image of make image) on a real node. APPS=0:
# 300 on kwok, 30 on a real node (2 cores; its kubelet runs at most 110 pods), SOAKFLAGS=-rate
# scales the churn (0: 1 on kwok, 0.25 on a real node).
DURATION ?= 30m
APPS     ?= 0
SOAK_DIR := $(LOCAL)/soak
SOAKPLOT := $(BIN)/soakplot
SOAK_DEPS = tools $(SOAKPLOT) $(if $(filter real,$(NODE)),node-packages node-tools $(HELM) $(TRAEFIK_IMAGE),build)

.PHONY: soak
soak: $(SOAK_DEPS) ## The soak: DURATION (30m) of churn and faults, NODE=kwok|real, APPS; report and picture in .local/soak/ (docs/soak.md).
	@if [ "$(NODE)" = real ]; then $(MAKE) --no-print-directory image PLATFORMS=linux/$(HOST_ARCH); fi
	rm -rf $(SOAK_DIR)/run $(SOAK_DIR)/report.json $(SOAK_DIR)/report.png
	@status=0; $(GO) run ./test/soak/cmd/appsoak -duration $(DURATION) -node $(NODE) -apps $(APPS) \
		-bin-dir $(BIN) -controller $(BIN)/app-controller -chart $(CHART) -image-layout $(IMAGE_LAYOUT) -crd-dir config/crd/bases \
		-work-dir $(SOAK_DIR)/run -out $(SOAK_DIR)/report.json $(SOAKFLAGS) || status=$$?; \
	if [ -f $(SOAK_DIR)/report.json ]; then $(SOAKPLOT) -in $(SOAK_DIR)/report.json -out $(SOAK_DIR)/report.png && echo "picture: $(SOAK_DIR)/report.png"; fi; \
	exit $$status

# The soak's picture, drawn with gonum.org/v1/plot from its own module.
$(SOAKPLOT): hack/tools/soakplot/go.mod hack/tools/soakplot/go.sum hack/tools/soakplot/main.go
	cd hack/tools/soakplot && $(GO) build -o $@ .

.PHONY: microbench
microbench: ## Go benchmarks of pure functions (CPU, allocations), without a cluster.
	$(GO) test -run '^$$' -bench . -benchmem -count=1 $(UNIT_PKGS) $(BENCHFLAGS)

