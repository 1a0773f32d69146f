#!/bin/sh
# Installs the foreign lock clients that the interop suite (tests/interop)
# runs against distlock, each only when missing:
#
#   - Apache Curator 5 (Debian's libcurator-recipes-java, with the slf4j
#     jars of libslf4j-java) and a JDK's javac, which compiles the suite's
#     Curator holder at test time;
#   - kazoo (Debian's python3-kazoo) for the system Python, /usr/bin/python3
#     (a python3 earlier on PATH, a pyenv one say, may lack it);
#   - etcdctl, built from the Go module proxy into bin/etcdctl at the etcd
#     version the harness module (integration) requires: the version its
#     etcd server is built at.
#
# Run from the Makefile's deps target; GO names the go command (default go).
set -eu

GO=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)

sudo=
[ "$(id -u)" = 0 ] || sudo=sudo

pkgs=
[ -f /usr/share/java/curator-recipes.jar ] || pkgs="$pkgs libcurator-recipes-java"
[ -f /usr/share/java/slf4j-nop.jar ] || pkgs="$pkgs libslf4j-java"
/usr/bin/python3 -c 'import kazoo' >/dev/null 2>&1 || pkgs="$pkgs python3-kazoo"
command -v javac >/dev/null 2>&1 || { [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/javac" ]; } || pkgs="$pkgs default-jdk-headless"
if [ -n "$pkgs" ]; then
	echo "installing Debian's$pkgs"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
fi

# etcdctl's go.mod has replace directives, so `go install etcdctl@v` refuses
# it: it is built as a dependency, of the tests module when that requires
# the same version, else of a scratch module.
v=$(cd "$root/integration" && "$GO" list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
bin=$root/bin/etcdctl
if [ -x "$bin" ] && "$bin" version 2>/dev/null | grep -qx "etcdctl version: ${v#v}"; then
	exit 0
fi
echo "building etcdctl $v"
mkdir -p "$root/bin"
if [ "$(cd "$root/tests" && "$GO" list -m -f '{{.Version}}' go.etcd.io/etcd/etcdctl/v3 2>/dev/null)" = "$v" ]; then
	(cd "$root/tests" && CGO_ENABLED=0 "$GO" build -o "$bin.tmp" go.etcd.io/etcd/etcdctl/v3)
else
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && "$GO" mod init etcdctlbuild >/dev/null 2>&1 &&
		GOFLAGS=-mod=mod "$GO" get "go.etcd.io/etcd/etcdctl/v3@$v" >/dev/null 2>&1 &&
		CGO_ENABLED=0 GOFLAGS=-mod=mod "$GO" build -o "$bin.tmp" go.etcd.io/etcd/etcdctl/v3)
fi
mv "$bin.tmp" "$bin"
