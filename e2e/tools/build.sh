#!/usr/bin/env bash
# Builds the end-to-end control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok) from the Go module proxy into $REPO/.cache/bin and copies kwok's
# Stage files into $REPO/.cache/kwok-stages. The pinned versions live in the go.mod files
# next to this script; a stamp file records what was built, so a second run is a no-op.
#
# Usage: e2e/tools/build.sh [-f]     (-f rebuilds even when the stamp matches)
# Env:   HYPEROPS_E2E_BIN   output directory for the binaries (default $REPO/.cache/bin); the
#                           Stage files go to kwok-stages next to it, where the harness looks
#        XDG_CACHE_HOME     the machine's cache (default ~/.cache): a finished build is kept in
#                           $XDG_CACHE_HOME/hyperops/controlplane/<stamp hash>, so every other clone on
#                           the machine copies it in seconds instead of building it again (about 20 min
#                           on 2 cores). A changed pin, go.mod/go.sum, this script or Go toolchain
#                           changes the hash, and so builds anew.
set -euo pipefail

force=0
if [[ "${1:-}" == "-f" ]]; then force=1; fi

tools_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$tools_dir/../.." && pwd)"
bin="${HYPEROPS_E2E_BIN:-$repo/.cache/bin}"
stages="$(dirname "$bin")/kwok-stages"
stamp="$bin/.versions"

kube_version=v1.37.2
etcd_version=v3.6.16
kwok_version=v0.8.0
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

say() { printf '[e2e-tools %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# The stamp changes whenever a pinned version, a go.mod/go.sum, this script or the Go
# toolchain changes, so a stale cache is rebuilt rather than silently reused.
want_stamp() {
	{
		echo "kubernetes $kube_version"
		echo "etcd $etcd_version"
		echo "kwok $kwok_version"
		go env GOVERSION
		cat "$tools_dir"/*/go.mod "$tools_dir"/*/go.sum "$tools_dir/build.sh" | sha256sum | cut -d' ' -f1
	}
}

up_to_date() {
	[[ -f "$stamp" ]] || return 1
	for b in "${binaries[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
	[[ -d "$stages/node" && -d "$stages/pod" ]] || return 1
	[[ "$(cat "$stamp")" == "$(want_stamp)" ]]
}

if [[ $force -eq 0 ]] && up_to_date; then
	say "up to date in $bin ($(head -3 "$stamp" | tr '\n' ' '))"
	exit 0
fi

# The machine's copy, keyed by the stamp: a build another clone made is reused.
machine="${XDG_CACHE_HOME:-$HOME/.cache}/hyperops/controlplane/$(want_stamp | sha256sum | cut -c1-16)"

# place copies a finished build from $1 (bin/ and kwok-stages/) into $bin and $stages: hard
# links when both are on one file system, a copy otherwise.
place() {
	local from=$1
	mkdir -p "$bin" "$stages"
	rm -f "$stamp"
	for b in "${binaries[@]}"; do
		rm -f "$bin/$b"
		ln "$from/bin/$b" "$bin/$b" 2>/dev/null || cp "$from/bin/$b" "$bin/$b"
	done
	rm -rf "$stages"
	cp -R "$from/kwok-stages" "$stages"
	cp "$from/bin/.versions" "$stamp"
}

if [[ $force -eq 0 && -f "$machine/bin/.versions" && "$(cat "$machine/bin/.versions")" == "$(want_stamp)" ]]; then
	place "$machine"
	say "copied the machine's build from $machine into $bin ($(head -3 "$stamp" | tr '\n' ' '))"
	exit 0
fi

mkdir -p "$bin" "$stages"
rm -f "$stamp"
export GOFLAGS=-mod=mod CGO_ENABLED=0
start=$(date +%s)

build() { # module-dir output (a file, or a directory ending in /) ldflags packages...
	local dir=$1 out=$2 ldflags=$3
	shift 3
	local t0
	t0=$(date +%s)
	say "building $* (module e2e/tools/$dir)"
	(cd "$tools_dir/$dir" && go build -trimpath -ldflags="-s -w $ldflags" -o "$out" "$@")
	say "built $* in $(($(date +%s) - t0))s"
}

kube_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	minor=${kube_version#v1.}
	minor=${minor%%.*}
	kube_ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	kube_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build etcd "$bin/etcd" "" go.etcd.io/etcd/server/v3
build kwok "$bin/" "" sigs.k8s.io/kwok/cmd/kwok
build kube "$bin/" "$kube_ldflags" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler

# kwok's own Stage files: node initialize, node heartbeat with lease, the general pod
# lifecycle, and volume provisioning. Only the stage YAMLs, not their testdata.
kwok_dir="$(cd "$tools_dir/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
rm -rf "$stages"
for sub in node/fast node/heartbeat-with-lease pod/general volume/fast; do
	dest="$stages/${sub%%/*}"
	mkdir -p "$dest"
	for f in "$kwok_dir/kustomize/stage/$sub"/*.yaml; do
		[[ "$(basename "$f")" == kustomization.yaml ]] && continue
		cp "$f" "$dest/"
	done
done
chmod -R u+w "$stages"
say "copied kwok stages to $stages: $(cd "$stages" && find . -name '*.yaml' | sort | tr '\n' ' ')"

want_stamp >"$stamp"
say "done in $(($(date +%s) - start))s: ${binaries[*]} in $bin"

# Keep it for the machine's other clones; written to a temporary directory and renamed, so a
# build interrupted half-way, or two clones finishing at once, never leave a partial copy.
if mkdir -p "$(dirname "$machine")" 2>/dev/null; then
	tmp="$(mktemp -d "$machine.tmp.XXXXXX")"
	mkdir -p "$tmp/bin"
	for b in "${binaries[@]}"; do cp "$bin/$b" "$tmp/bin/$b"; done
	cp -R "$stages" "$tmp/kwok-stages"
	cp "$stamp" "$tmp/bin/.versions"
	if mv -T "$tmp" "$machine" 2>/dev/null; then
		say "kept for this machine's other clones in $machine"
	else
		rm -rf "$tmp"
	fi
fi
