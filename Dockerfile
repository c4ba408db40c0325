# lull as a container: a static binary on an empty image, run as a user
# without privileges. Build: docker build -t lull .
# Run: docker compose up (docker-compose.yml), or
#      docker run -e DATABASE_URL=postgres://... -p 8080:8080 lull

# The build stage runs on the builder's own platform and cross-compiles
# for the image's (TARGETOS/TARGETARCH, set by buildx), so a multi-arch
# build (.goreleaser.yaml) needs no emulation.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS TARGETARCH
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/lull ./cmd/lull

# The final stage takes only the binary and the CA roots (for smtps://).
# CI builds this stage from a binary built outside (.ci/container), so keep
# its COPY lines in the form "COPY --from=build /path /path".
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/lull /lull
USER 65532:65532
ENV LULL_ADDR=:8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s CMD ["/lull", "healthcheck"]
ENTRYPOINT ["/lull"]
CMD ["serve"]
