# syntax=docker/dockerfile:1
#
# relay's container image: a static binary on distroless, running as the
# unprivileged "nonroot" user (65532), without the demo and the embedded NATS
# server (build tag nodemo).
#
#   docker build --build-arg VERSION=v0.1.0 -t ghcr.io/relay-energy/relay:v0.1.0 .
#
# Multi-platform images: docker buildx build --platform linux/amd64,linux/arm64
# (the build stage runs natively and cross-compiles).
#
# For reproducible builds, pin both base images by digest
# (FROM golang:1.26@sha256:... and FROM gcr.io/distroless/static-debian12:nonroot@sha256:...).

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
ARG TARGETOS TARGETARCH
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -tags nodemo \
        -ldflags "-s -w -X main.version=${VERSION}" \
        -o /out/relay ./cmd/relay \
 && mkdir -p /out/state

# distroless static: CA certificates (HTTPS to the upstream, Slack, webhooks),
# tzdata (RELAY_UPSTREAM_TZ) and a nonroot user; no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/relay /relay
# The default RELAY_STATE_PATH is /var/lib/relay/relay.db. In Kubernetes a
# PersistentVolumeClaim is mounted there; with docker run, mount a volume:
#   docker run -v relay-state:/var/lib/relay ...
COPY --from=build --chown=65532:65532 /out/state /var/lib/relay
USER 65532:65532
EXPOSE 9477
ENTRYPOINT ["/relay"]
CMD ["run"]
