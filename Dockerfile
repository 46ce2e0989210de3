# The app-controller image, for those who have Docker (make docker-build, make
# docker-buildx). `make image` builds the same image without Docker (hack/tools/imagebuild).

# Base images: pin each by the digest of its multi-platform index (image:tag@sha256:...),
# so that a rebuild uses the same bytes until someone moves the pin on purpose; keep the
# tag for humans. Find the digest with crane (go-containerregistry, pinned in hack/tools):
#   (cd hack/tools && go run github.com/google/go-containerregistry/cmd/crane digest golang:1.26)
#   (cd hack/tools && go run github.com/google/go-containerregistry/cmd/crane digest gcr.io/distroless/static:nonroot)
# or `docker buildx imagetools inspect IMAGE`. make verify (hack/verify-supply-chain.sh)
# fails on a FROM without a digest unless the line before it says why ("# unpinned: ...").
#
# Build the static binary.
# unpinned: no registry is reachable where this was written, so no digest could be read and verified; pin with the crane command above.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
# Stamped into the binary (app-controller --version) as make build does.
ARG VERSION=unknown
ARG COMMIT=unknown

WORKDIR /workspace
# Dependencies first: a layer cached until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download

COPY cmd/ cmd/
COPY pkg/ pkg/
COPY internal/ internal/

# GOARCH has no default, so the image builds for the platform of the host unless
# docker buildx --platform sets TARGETARCH (make docker-buildx cross-compiles here, on
# the build platform, rather than under emulation).
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath \
    -ldflags "-X github.com/app-controller/app-controller/pkg/version.version=${VERSION} -X github.com/app-controller/app-controller/pkg/version.commit=${COMMIT}" \
    -o app-controller ./cmd/app-controller

# A distroless base: no shell, no package manager, the nonroot user (65532).
# unpinned: as golang above; pin with the crane command at the top.
FROM gcr.io/distroless/static:nonroot
ARG VERSION=unknown
ARG COMMIT=unknown
# org.opencontainers.image.created comes from make (--label), the image creation time
# from the SOURCE_DATE_EPOCH build argument (BuildKit).
LABEL org.opencontainers.image.source="https://github.com/app-controller/app-controller" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.version="${VERSION}"
WORKDIR /
COPY --from=builder /workspace/app-controller /app-controller
USER 65532:65532

ENTRYPOINT ["/app-controller"]
