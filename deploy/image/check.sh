#!/usr/bin/env bash
# Checks a vigil image built by build.sh: its configuration (user, ports, volume, entrypoint,
# OCI labels), that the binary inside is BINARY byte for byte, that the user, CA bundle and
# default configuration are in place, and that the binary answers --version with VERSION and
# serves with the image's own configuration.
#
#   deploy/image/check.sh IMAGE BINARY VERSION
#
# Needs root (buildah mount), as CI has.
set -euo pipefail
cd "$(dirname "$0")/../.."
image=$1 binary=$2 version=$3
fail() { echo "image check: $*" >&2; exit 1; }
inspect() { buildah inspect --type image --format "$1" "$image"; }

user=$(inspect '{{.OCIv1.Config.User}}')
[[ $user == 65532:65532 ]] || fail "user $user, want 65532:65532 (non-root)"
ports=$(inspect '{{range $p, $_ := .OCIv1.Config.ExposedPorts}}{{$p}} {{end}}')
for p in 7233/tcp 7243/tcp 7235/tcp; do [[ " $ports" == *" $p "* ]] || fail "port $p not exposed (exposed: $ports)"; done
volumes=$(inspect '{{range $v, $_ := .OCIv1.Config.Volumes}}{{$v}} {{end}}')
[[ $volumes == "/var/lib/vigil " ]] || fail "volumes $volumes, want /var/lib/vigil"
entrypoint=$(inspect '{{.OCIv1.Config.Entrypoint}}')
[[ $entrypoint == '[/usr/local/bin/vigil]' ]] || fail "entrypoint $entrypoint"
cmd=$(inspect '{{.OCIv1.Config.Cmd}}')
[[ $cmd == '[server start --config /etc/vigil/server.yaml]' ]] || fail "cmd $cmd"
label() { inspect "{{index .OCIv1.Config.Labels \"org.opencontainers.image.$1\"}}"; }
[[ $(label version) == "$version" ]] || fail "label version $(label version), want $version"
[[ $(label revision) == "$(git rev-parse HEAD)" ]] || fail "label revision $(label revision), want $(git rev-parse HEAD)"
[[ $(label source) == https://github.com/vigilhq/vigil ]] || fail "label source $(label source)"
[[ $(label licenses) == MIT ]] || fail "label licenses $(label licenses)"
echo "image check: config ok (user $user; ports $ports; volume $volumes; entrypoint $entrypoint)"

ctr=$(buildah from --pull=never "$image")
mnt=$(buildah mount "$ctr")
tmp=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  buildah umount "$ctr" >/dev/null || true
  buildah rm "$ctr" >/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

inside=$(sha256sum <"$mnt/usr/local/bin/vigil" | cut -d' ' -f1)
built=$(sha256sum <"$binary" | cut -d' ' -f1)
[[ $inside == "$built" ]] || fail "the image's binary ($inside) is not $binary ($built)"
grep -q '^vigil:x:65532:65532:' "$mnt/etc/passwd" || fail "no vigil user 65532 in /etc/passwd"
grep -q '^vigil:x:65532:' "$mnt/etc/group" || fail "no vigil group 65532 in /etc/group"
grep -q 'BEGIN CERTIFICATE' "$mnt/etc/ssl/certs/ca-certificates.crt" || fail "no CA certificates"
[[ $(stat -c %u:%g "$mnt/var/lib/vigil") == 65532:65532 ]] || fail "/var/lib/vigil does not belong to the user"
cmp -s "$mnt/etc/vigil/server.yaml" deploy/image/server.yaml || fail "/etc/vigil/server.yaml differs from deploy/image/server.yaml"
echo "image check: binary $inside is $binary; user, CA bundle, data directory and configuration in place"

# The binary is static: it runs here as it would in the container.
out=$("$mnt/usr/local/bin/vigil" --version 2>&1) || fail "vigil --version failed: $out"
[[ $out == *"$version"* ]] || fail "vigil --version printed \"$out\", not the version $version"
echo "image check: vigil --version: $out"

# With the image's configuration (loopback ports instead of 0.0.0.0:7233 and the volume), the
# binary starts and reports ready.
"$mnt/usr/local/bin/vigil" server start --config "$mnt/etc/vigil/server.yaml" \
  --ip 127.0.0.1 --port 0 --http-port 0 --db-filename "$tmp/vigil.db" >"$tmp/out" 2>"$tmp/log" &
server_pid=$!
http=
for _ in $(seq 1 300); do
  http=$(sed -n 's/.* HTTP \([0-9.:]*\) .*/\1/p' "$tmp/out")
  [[ -n $http ]] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/log" >&2; fail "the server exited"; }
  sleep 0.2
done
[[ -n $http ]] || { cat "$tmp/log" >&2; fail "the server did not start"; }
ready=
for _ in $(seq 1 150); do
  ready=$(curl -fsS "http://$http/readyz" 2>/dev/null) && break
  sleep 0.2
done
[[ $ready == ready ]] || fail "/readyz on $http answered \"$ready\""
echo "image check: the image's configuration serves: http://$http/readyz says $ready"
