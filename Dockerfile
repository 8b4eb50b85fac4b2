# The controller image: a static cmd/controller on a distroless base that
# runs as the non-root user 65532 the chart's securityContext expects.
#
#   docker build -t karpenter-go/controller:1.14.1 \
#     --build-arg VERSION=1.14.1 --build-arg COMMIT=$(git rev-parse --short HEAD) .
#
# The chart's controller.image.repository / tag point at whatever name it is
# pushed under.
ARG GO_VERSION=1.26
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
ARG COMMIT=unknown
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath \
      -ldflags="-s -w -X github.com/karpenter-go/karpenter/pkg/operator.Version=${VERSION} -X github.com/karpenter-go/karpenter/pkg/operator.Commit=${COMMIT}" \
      -o /out/controller ./cmd/controller

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/controller /controller
USER 65532:65532
ENTRYPOINT ["/controller"]
