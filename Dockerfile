# syntax=docker/dockerfile:1
# The same image `make image` assembles without Docker: a static replicafed
# binary on an empty base, running as 65532:65532, entrypoint /replicafed.
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=0.2.0 --build-arg COMMIT=$(git rev-parse HEAD) \
#     -t ghcr.io/replicafed/replicafed:0.2.0 .
#
# hack/image/image_test.go checks this file against hack/image.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=devel
ARG COMMIT=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X github.com/replicafed/replicafed/internal/version.Version=${VERSION} -X github.com/replicafed/replicafed/internal/version.Commit=${COMMIT}" \
      -o /out/replicafed ./cmd/replicafed
# The few files a scratch image needs: a user name for 65532, a writable
# /tmp, and a data directory the user owns.
RUN mkdir -p /rootfs/etc /rootfs/home/nonroot /rootfs/tmp /rootfs/var/lib/replicafed \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /rootfs/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' > /rootfs/etc/group \
 && chmod 1777 /rootfs/tmp && chmod 700 /rootfs/home/nonroot /rootfs/var/lib/replicafed \
 && chown 65532:65532 /rootfs/home/nonroot /rootfs/var/lib/replicafed

FROM scratch
ARG VERSION=devel
ARG COMMIT=unknown
ARG CREATED=1970-01-01T00:00:00Z
COPY --from=build /rootfs/ /
COPY --from=build --chmod=0555 /out/replicafed /replicafed
LABEL org.opencontainers.image.title="replicafed" \
      org.opencontainers.image.description="Multi-cluster federated replica controller" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="https://github.com/replicafed/replicafed" \
      org.opencontainers.image.url="https://github.com/replicafed/replicafed" \
      org.opencontainers.image.created="${CREATED}"
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/replicafed"]
