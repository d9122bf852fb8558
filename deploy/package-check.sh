#!/usr/bin/env bash
# Builds and checks every artefact vigil ships (make package-check; CI runs it after the
# tests):
#   1. the release archives: goreleaser's snapshot build, their contents, checksums and the
#      version stamped into the binaries;
#   2. the container image, built with buildah from the snapshot's linux binary and checked by
#      deploy/image/check.sh;
#   3. the Helm chart: helm lint and helm template in both modes, validated by kubeconform
#      against the Kubernetes schemas client-go ships, and deploy/check's tests (the chart's
#      objects decoded strictly, the alerting rules parsed and evaluated, the compose file
#      loaded).
# The dashboard's and the alerts' metric names are checked by `go test ./deploy/` with the
# other tests of vigil's module. SKIP_IMAGE=1 leaves out the image (no buildah, not root).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
step() { echo "== $*"; }
fail() { echo "package-check: $*" >&2; exit 1; }
goreleaser() { go tool -modfile="$root/tools/release/go.mod" goreleaser "$@"; }
# GoReleaser reads the commit only when the clone names a remote; a clone without one (a local
# copy) gets the project's, through git's environment, without touching the repository.
if ! git remote get-url origin >/dev/null 2>&1; then
  export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url \
    GIT_CONFIG_VALUE_0=https://github.com/vigilhq/vigil.git
fi
helm() { (cd deploy/check && go tool helm "$@"); }
kubeconform() { (cd deploy/check && go tool kubeconform "$@"); }

[[ -f LICENSE ]] || fail "no LICENSE at the repository's root: the archives ship it"

step "goreleaser check"
goreleaser check

step "release archives: goreleaser release --snapshot --clean"
start=$SECONDS
goreleaser release --snapshot --clean --skip=publish
echo "   snapshot built in $((SECONDS - start)) s"
version=$(sed -n 's/.*"version":"\([^"]*\)".*/\1/p' dist/metadata.json)
[[ -n $version ]] || fail "no version in dist/metadata.json"
commit=$(git rev-parse HEAD)

step "archives of $version: contents, checksums, static binaries stamped with the version"
(cd dist && sha256sum --check --strict checksums.txt)
want=$(printf '%s\n' LICENSE README.md config/dynamicconfig.yaml config/server.yaml vigil)
for os in linux darwin; do
  for arch in amd64 arm64; do
    archive=dist/vigil_${version}_${os}_${arch}.tar.gz
    [[ -f $archive ]] || fail "no $archive"
    grep -q " $(basename "$archive")\$" dist/checksums.txt || fail "$archive is not in checksums.txt"
    got=$(tar -tzf "$archive" | sort)
    [[ $got == "$want" ]] || fail "$archive holds:"$'\n'"$got"$'\n'"want:"$'\n'"$want"
    dir=$(mktemp -d)
    tar -xzf "$archive" -C "$dir" vigil
    info=$(go version -m "$dir/vigil")
    for setting in CGO_ENABLED=0 "GOOS=$os" "GOARCH=$arch" -trimpath=true; do
      grep -q -- "$setting" <<<"$info" || fail "$archive: the binary's build information lacks $setting:"$'\n'"$info"
    done
    # -trimpath leaves -ldflags out of the build information: look for the stamped strings.
    for stamp in "$version" "$commit"; do
      grep -q -a -F -- "$stamp" "$dir/vigil" || fail "$archive: $stamp is not stamped into the binary (common/buildinfo)"
    done
    if [[ $os == linux && $arch == $(go env GOARCH) ]]; then
      out=$("$dir/vigil" --version 2>&1) || fail "$archive: vigil --version failed: $out"
      [[ $out == *"$version"* ]] || fail "$archive: vigil --version printed \"$out\", not $version"
      echo "   $archive: vigil --version: $out"
      host_binary=$(ls dist/vigil_linux_"$arch"*/vigil)
    fi
    rm -rf "$dir"
    echo "   $archive: ok"
  done
done

if [[ ${SKIP_IMAGE:-} != 1 ]]; then
  step "container image from $host_binary (buildah)"
  image=$(VERSION=$version IMAGE=localhost/vigil:$version deploy/image/build.sh "$host_binary" | tail -1)
  deploy/image/check.sh "$image" "$host_binary" "$version"
  buildah rmi "$image" >/dev/null
fi

step "Helm chart: lint, template and kubeconform, single host and cluster"
schemas=$(mktemp -d)
trap 'rm -rf "$schemas"' EXIT
(cd deploy/check && go run ./cmd/k8sschemas "$schemas")
for mode in single cluster; do
  values=$root/deploy/helm/vigil/ci/$mode-values.yaml
  helm lint --strict "$root/deploy/helm/vigil" -f "$values"
  helm template vigil "$root/deploy/helm/vigil" --namespace vigil -f "$values" >"$schemas/$mode.yaml"
  # PodDisruptionBudget (policy/v1) and ServiceMonitor have no schema in client-go: deploy/check's
  # TestChartObjects decodes them strictly into their Go types instead.
  kubeconform -strict -summary -output text \
    -schema-location "$schemas/{{.ResourceKind}}{{.KindSuffix}}.json" \
    -skip PodDisruptionBudget,ServiceMonitor "$schemas/$mode.yaml"
done

step "deploy/check: chart objects, alerting rules, compose file"
(cd deploy/check && go test -count=1 ./...)
