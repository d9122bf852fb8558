#!/usr/bin/env bash
# Builds vigil's container image with buildah, from Containerfile, without pulling anything:
# the static binary, the host's CA bundle and the files beside this script form the build
# context.
#
#   deploy/image/build.sh [BINARY]
#
# BINARY is a linux vigil binary built with CGO_ENABLED=0 (goreleaser's, in CI); without it a
# static binary for this machine's architecture is built into bin/linux_<arch>/. The image is
# tagged $IMAGE (default localhost/vigil:<version>) and its name printed on the last line.
# VERSION, REVISION and CREATED label it (default: git describe, the commit, its date).
set -euo pipefail
cd "$(dirname "$0")/../.."

command -v buildah >/dev/null || { echo "build.sh: buildah is not installed (apt-get install buildah)" >&2; exit 1; }
ca=/etc/ssl/certs/ca-certificates.crt
[[ -s $ca ]] || { echo "build.sh: no CA bundle at $ca (apt-get install ca-certificates)" >&2; exit 1; }

VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}
REVISION=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
CREATED=${CREATED:-$(git log -1 --format=%cI 2>/dev/null || echo unknown)}
IMAGE=${IMAGE:-localhost/vigil:$VERSION}

binary=${1:-}
if [[ -z $binary ]]; then
  arch=$(go env GOARCH)
  binary=bin/linux_$arch/vigil
  echo "== building a static $binary ($VERSION)" >&2
  pkg=github.com/vigilhq/vigil/common/buildinfo
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -X $pkg.Version=$VERSION -X $pkg.Commit=$REVISION -X $pkg.Date=$CREATED" \
    -o "$binary" ./cmd/vigil
fi
[[ -x $binary ]] || { echo "build.sh: $binary is not an executable" >&2; exit 1; }

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp Containerfile "$ctx/"
cp "$binary" "$ctx/vigil"
cp "$ca" "$ctx/ca-certificates.crt"
cp deploy/image/passwd deploy/image/group deploy/image/server.yaml "$ctx/"
mkdir "$ctx/data"

echo "== buildah bud -t $IMAGE" >&2
buildah bud --quiet -f "$ctx/Containerfile" \
  --build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION" --build-arg "CREATED=$CREATED" \
  -t "$IMAGE" "$ctx" >&2
echo "$IMAGE"
