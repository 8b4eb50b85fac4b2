#!/usr/bin/env bash
# Builds the pinned control-plane binaries, kubectl, helm and controller-gen into
# BIN_DIR (default: <repo>/bin/tools), and, from the sibling module
# hack/anchors, upstream Karpenter's own kwok and AWS controllers (test
# anchors for the migration tests and side-by-side benchmarks). A binary whose stamp matches the
# current go.sum is kept as is, so a warm run costs nothing; after a version
# bump the Go build cache makes the rebuild cost only what changed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${BIN_DIR:-$here/../../bin/tools}
mkdir -p "$bin"
bin=$(cd "$bin" && pwd)
cd "$here"
sum=$(sha256sum go.mod go.sum | sha256sum | cut -c1-16)

# name=package
tools=(
  "etcd=go.etcd.io/etcd/server/v3"
  "kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver"
  "kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager"
  "kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler"
  "kwok=sigs.k8s.io/kwok/cmd/kwok"
  "controller-gen=sigs.k8s.io/controller-tools/cmd/controller-gen"
  "kubectl=k8s.io/kubernetes/cmd/kubectl"
  "helm=helm.sh/helm/v3/cmd/helm"
)
for t in "${tools[@]}"; do
  name=${t%%=*}; pkg=${t#*=}
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/.$name.stamp" 2>/dev/null)" = "$sum" ]; then
    continue
  fi
  echo "building $name ($pkg)" >&2
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$bin/$name.tmp" "$pkg"
  mv "$bin/$name.tmp" "$bin/$name"
  echo "$sum" > "$bin/.$name.stamp"
done

# kwok refuses to start without stages. Take the ones the pinned kwok module
# ships (Node initialize + heartbeat, Pod ready / complete / delete) so the
# fake kubelet behaves exactly as that kwok version intends.
stages="$bin/kwok-stages.yaml"
if [ ! -s "$stages" ] || [ "$(cat "$bin/.kwok-stages.stamp" 2>/dev/null)" != "$sum" ]; then
  kwokdir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  {
    first=1
    for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
             pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
      [ $first = 1 ] || echo '---'
      first=0
      cat "$kwokdir/kustomize/stage/$f"
    done
  } > "$stages.tmp"
  mv "$stages.tmp" "$stages"
  echo "$sum" > "$bin/.kwok-stages.stamp"
fi

# Upstream Karpenter's controllers, pinned in hack/anchors (its own module:
# they pin other k8s.io versions than k8s.io/kubernetes does).
cd "$here/../anchors"
asum=$(sha256sum go.mod go.sum | sha256sum | cut -c1-16)
anchors=(
  "karpenter-upstream-kwok=sigs.k8s.io/karpenter/kwok"
  "karpenter-upstream-aws=github.com/aws/karpenter-provider-aws/cmd/controller"
)
for t in "${anchors[@]}"; do
  name=${t%%=*}; pkg=${t#*=}
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/.$name.stamp" 2>/dev/null)" = "$asum" ]; then
    continue
  fi
  echo "building $name ($pkg)" >&2
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$bin/$name.tmp" "$pkg"
  mv "$bin/$name.tmp" "$bin/$name"
  echo "$asum" > "$bin/.$name.stamp"
done
