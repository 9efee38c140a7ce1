# syntax=docker/dockerfile:1
# Multi-arch image: the build stage runs on the builder's platform and cross-compiles for the
# target's (no emulation). The build command is the one `make build` runs.
#   docker buildx build --platform linux/amd64,linux/arm64 --build-arg REVISION=$(git rev-parse HEAD) .
# VERSION defaults to the VERSION file; REVISION must be passed (the context has no .git).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION
ARG REVISION=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY VERSION ./
COPY cmd/ cmd/
COPY watcher/ watcher/
COPY resolver/ resolver/
COPY publisher/ publisher/
COPY metrics/ metrics/
COPY internal/ internal/
RUN VERSION="${VERSION:-$(cat VERSION)}" && \
    GOOS=$TARGETOS GOARCH=$TARGETARCH CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/nodeaddr ./cmd/nodeaddr

# scratch: a static binary needs nothing else. The in-cluster client reads the API server's CA from
# the ServiceAccount mount, so no CA bundle is needed either.
FROM scratch
ARG VERSION
ARG REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/nodeaddr/nodeaddr" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/nodeaddr /nodeaddr
USER 65532:65532
ENTRYPOINT ["/nodeaddr"]
