# Two commands do everything: `make run` and `make test`. Everything else here
# is a step they call.
SHELL := /bin/bash
TOOLS_DIR ?= $(CURDIR)/bin/tools
export KARPENTER_TOOLS_DIR := $(TOOLS_DIR)
CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen
GO_TEST_FLAGS ?=

.PHONY: all tools generate verify test unit run bench fmt vet image krew

all: test

## tools: build the pinned control plane (etcd, kube-apiserver, kube-controller-manager,
## kube-scheduler, kwok), controller-gen and upstream Karpenter's kwok and AWS controllers
## (test anchors, hack/anchors) into bin/tools. Skips what is built.
tools:
	@BIN_DIR=$(TOOLS_DIR) hack/tools/build.sh

## generate: deepcopy and CRD YAML from the API markers, copied into the charts.
generate: tools
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./pkg/apis/...
	$(CONTROLLER_GEN) crd paths=./pkg/apis/... output:crd:artifacts:config=pkg/apis/crds
	go run ./hack/crdpatch pkg/apis/crds
	go run ./hack/chartcrds pkg/apis/crds charts/karpenter/crds charts/karpenter-crd/templates

## verify: fail when generated files are stale or code is unformatted.
verify: generate
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/tools/'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	go vet ./...
	@git diff --exit-code -- pkg/apis || { echo "generated API files are stale: run 'make generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- pkg/apis)" || { git status --porcelain -- pkg/apis; echo "untracked generated files: run 'make generate' and commit"; exit 1; }
	@git diff --exit-code -- charts/karpenter/crds charts/karpenter-crd/templates && test -z "$$(git status --porcelain -- charts/karpenter/crds charts/karpenter-crd/templates)" || { git status --porcelain -- charts; echo "chart CRDs differ from pkg/apis/crds: run 'make generate' and commit"; exit 1; }

## test: everything CI runs.
## The Go tests run in three streams at once (hack/test.sh): test/e2e's AWS suite,
## the rest of test/e2e, and every other package.
test: tools verify
	GO_TEST_FLAGS='$(GO_TEST_FLAGS)' hack/test.sh
	go test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 300000x ./pkg/providers/aws/interruption/messages

## run: a local cluster with the examples applied and the controller on the local AWS
## (PROVIDER=aws, the default; needs moto_server) or the simulated provider
## (PROVIDER=kwok); Ctrl-C stops every process.
PROVIDER ?= aws
run:
	@case "$(PROVIDER)" in \
	aws) command -v moto_server >/dev/null || { echo "make run: moto_server (the moto AWS emulator) is not on PATH; install it with: pip install 'moto[server]'"; echo "  or run the simulated provider, which needs nothing else: make run PROVIDER=kwok"; exit 1; } ;; \
	kwok) ;; \
	*) echo "make run: unknown PROVIDER=$(PROVIDER) (aws or kwok)"; exit 1 ;; \
	esac
	@$(MAKE) --no-print-directory tools
	go build -o bin/controller ./cmd/controller
	go run ./hack/localcluster --provider $(PROVIDER) --examples examples$(if $(filter aws,$(PROVIDER)),$(comma)examples/aws) --controller bin/controller
comma := ,

## image: the controller's OCI image for linux/amd64 and linux/arm64 in bin/image
## (an OCI image layout: push it with `crane push --index bin/image REF` or
## `skopeo copy --all oci:bin/image docker://REF`). No container daemon: hack/image
## builds it; the same commit gives the same digest.
image:
	go run -C hack/image . -root $(CURDIR) -out $(CURDIR)/bin/image

## krew: kubectl-karpenter archives for linux and darwin (amd64, arm64) and the krew plugin
## manifest naming their sha256, in bin/krew. KREW_VERSION=vX.Y.Z KREW_URL=<where the archives
## are uploaded>; then `kubectl krew install --manifest=bin/krew/karpenter.yaml`.
krew:
	go run ./hack/krew -root $(CURDIR) -out $(CURDIR)/bin/krew -version $(KREW_VERSION) -url $(KREW_URL)

## bench: the benchmarks (not part of `make test`).
bench:
	go test -run '^$$' -bench . -benchmem ./...
