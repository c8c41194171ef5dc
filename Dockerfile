# HyperOps image: a static binary on distroless, running as the non-root user 65532.
# Build: make image   (or: docker build --build-arg VERSION=$(git describe --always --dirty) -t hyperops .)
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Dependencies first, so source edits do not invalidate the module download layer.
COPY go.mod go.sum ./
RUN go mod download
# Only the packages the binary is built from: the build context also holds .cache/ (control-plane binaries for the
# end-to-end tests), which BuildKit then never sends. A new top-level package needs a line here; the test
# cmd/hyperops TestDockerfileCopiesWhatTheBinaryImports builds the binary from exactly these paths and fails if one
# is missing. The playground (internal/: the fake Slack, the fake AWS, the control-plane launcher) stays out of the
# image: -tags noplayground.
COPY cmd ./cmd
COPY config ./config
COPY ops ./ops
COPY approvals ./approvals
COPY handlers ./handlers
COPY bot ./bot
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -tags noplayground \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/hyperops ./cmd/hyperops

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hyperops /hyperops
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/hyperops", "run"]
# The Helm chart mounts the config here and passes the same flag; override with another -config FILE.
CMD ["-config", "/etc/hyperops/config.yaml"]
