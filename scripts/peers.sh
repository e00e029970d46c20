#!/usr/bin/env bash
# Installs the real third-party RocketMQ clients the golden and interop tests drive:
#   PyPI rocketmq==0.4.4 (C++ 1.x core), PyPI rocketmq-python-cvs==2.1.0.3 (C++ 2.x core),
#   npm ali-ons@3.12.0 (pure JS), and Maven Central's Apache RocketMQ Java client 5.3.3
#   (rocketmq-client + rocketmq-tools with their dependencies, and tests/peers/java compiled against them),
#   and the Go client rocketmq-client-go/v2 from the Go module proxy (tests/peers/go built against it),
#   and Maven Central's Apache RocketMQ Java 5.x gRPC client rocketmq-client-java 5.0.8 (one shaded jar, gRPC inside;
#   tests/peers/java/grpc compiled against it).
# Each goes into its own prefix under ~/.cache/rocketcluster/, keyed by version (both Python
# packages install a module named `rocketmq`, so they cannot share a venv). A `.ok` stamp written
# only after a check makes a second run a fast no-op. Called by `make peers` / `make test`;
# tests/peers/__init__.py and tests/interop/java_harness.py find the clients at the same paths.
# `peers.sh java` / `peers.sh go` / `peers.sh java5grpc` install only that peer (what its interop tests ask for
# when it is missing).
set -euo pipefail

PEERS_DIR="${ROCKETCLUSTER_PEERS_DIR:-${HOME}/.cache/rocketcluster/peers}"
PYTHON="${PEERS_PYTHON:-python3}"

ROCKETMQ_VERSION="0.4.4"
CVS_VERSION="2.1.0.3"
ALI_ONS_VERSION="3.12.0"
JAVA_ROCKETMQ_VERSION="5.3.3"
JAVA_DIR="${ROCKETCLUSTER_JAVA_DIR:-${HOME}/.cache/rocketcluster/java-rocketmq-${JAVA_ROCKETMQ_VERSION}}"
JAVA_SOURCES="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/peers/java"
JAVA_GRPC_VERSION="5.0.8"
JAVA_GRPC_DIR="${ROCKETCLUSTER_JAVA_GRPC_DIR:-${HOME}/.cache/rocketcluster/java-grpc-client-${JAVA_GRPC_VERSION}}"

die() { echo "peers.sh: error: $*" >&2; exit 1; }

mkdir -p "$PEERS_DIR" || die "cannot create $PEERS_DIR"

# install_py NAME PIP_SPEC: a venv at $PEERS_DIR/NAME whose python can import rocketmq.client.
install_py() {
    local name="$1" spec="$2" dir="$PEERS_DIR/$1"
    [[ -f "$dir/.ok" ]] && return 0
    echo "peers.sh: installing $spec into $dir"
    rm -rf "$dir"
    command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set PEERS_PYTHON)"
    "$PYTHON" -m venv "$dir" || die "venv creation failed for $name (is python3-venv installed?)"
    "$dir/bin/pip" install --quiet --disable-pip-version-check "$spec" \
        || die "pip install $spec failed (registry unreachable?)"
    # The library logs under $HOME/logs; keep the check from writing into the real HOME.
    local tmp_home
    tmp_home="$(mktemp -d)"
    HOME="$tmp_home" "$dir/bin/python" -c 'from rocketmq.client import Producer, PushConsumer, Message' \
        || { rm -rf "$tmp_home"; die "$spec installed but 'from rocketmq.client import Producer' fails"; }
    rm -rf "$tmp_home"
    touch "$dir/.ok"
}

install_node() {
    local dir="$PEERS_DIR/ali-ons-$ALI_ONS_VERSION"
    [[ -f "$dir/.ok" ]] && return 0
    command -v node >/dev/null || die "node not found; ali-ons needs Node.js (>= 14)"
    command -v npm >/dev/null || die "npm not found; needed to install ali-ons"
    echo "peers.sh: installing ali-ons@$ALI_ONS_VERSION into $dir"
    rm -rf "$dir"
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "ali-ons@$ALI_ONS_VERSION" >/dev/null \
        || die "npm install ali-ons@$ALI_ONS_VERSION failed (registry unreachable?)"
    (cd "$dir" && node -e "require('ali-ons')") || die "ali-ons installed but require('ali-ons') fails"
    touch "$dir/.ok"
}

# javac and mvn: Debian's packages when missing (as system-deps.sh does for the runtime).
ensure_jdk() {
    local missing=()
    command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
    command -v mvn >/dev/null 2>&1 || missing+=(maven)
    [[ ${#missing[@]} -eq 0 ]] && return 0
    if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        die "the Java peer needs ${missing[*]} (root and apt-get are needed to install them)"
    fi
    echo "peers.sh: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
        || die "apt-get install ${missing[*]} failed"
}

# The jars: a throw-away pom whose dependencies are the client and the tools; Maven resolves the rest.
install_java_jars() {
    local lib="$JAVA_DIR/lib"
    [[ -f "$lib/.ok" ]] && return 0
    echo "peers.sh: fetching rocketmq-client and rocketmq-tools $JAVA_ROCKETMQ_VERSION into $lib"
    local work
    work="$(mktemp -d)"
    cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.rocketcluster.peers</groupId>
  <artifactId>java-peer</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.rocketmq</groupId><artifactId>rocketmq-client</artifactId><version>$JAVA_ROCKETMQ_VERSION</version></dependency>
    <dependency><groupId>org.apache.rocketmq</groupId><artifactId>rocketmq-tools</artifactId><version>$JAVA_ROCKETMQ_VERSION</version></dependency>
  </dependencies>
</project>
POM
    rm -rf "$lib"
    (cd "$work" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib") \
        >"$work/mvn.log" 2>&1 || { tail -30 "$work/mvn.log" >&2; rm -rf "$work"; die "mvn could not fetch the Java client"; }
    rm -rf "$work"
    [[ -f "$lib/rocketmq-client-$JAVA_ROCKETMQ_VERSION.jar" && -f "$lib/rocketmq-tools-$JAVA_ROCKETMQ_VERSION.jar" ]] \
        || die "mvn finished but $lib lacks the rocketmq-client/rocketmq-tools jars"
    touch "$lib/.ok"
}

# The driver programs, compiled into a directory named by a hash of their sources (the same hash
# tests/interop/java_harness.py computes: the sorted file names, one a line, then their contents).
java_sources_hash() {
    # Byte order for the glob, whatever the caller's locale (Python's sorted() in the harness).
    local LC_ALL=C files=() f
    for f in "$JAVA_SOURCES"/*.java; do files+=("$(basename "$f")"); done
    (cd "$JAVA_SOURCES" && { printf '%s\n' "${files[@]}"; cat "${files[@]}"; } | sha256sum | cut -c1-16)
}

install_java() {
    ensure_jdk
    install_java_jars
    local classes
    classes="$JAVA_DIR/classes-$(java_sources_hash)"
    [[ -f "$classes/.ok" ]] && return 0
    echo "peers.sh: compiling $JAVA_SOURCES into $classes"
    # Builds of older sources are never used again.
    find "$JAVA_DIR" -mindepth 1 -maxdepth 1 -name 'classes-*' -exec rm -rf {} +
    mkdir -p "$classes"
    javac -encoding UTF-8 -nowarn -cp "$JAVA_DIR/lib/*" -d "$classes" "$JAVA_SOURCES"/*.java \
        || die "javac failed on $JAVA_SOURCES"
    touch "$classes/.ok"
}

# The Java 5.x gRPC client: rocketmq-client-java is one shaded jar (gRPC, protobuf and Netty inside), so its runtime
# scope is that jar alone. The driver is tests/peers/java/grpc/*.java plus ../Json.java, compiled into a directory
# named by a hash of those sources (the hash tests/interop/java_grpc_harness.py computes).
install_java_grpc_jar() {
    local lib="$JAVA_GRPC_DIR/lib"
    [[ -f "$lib/.ok" ]] && return 0
    echo "peers.sh: fetching rocketmq-client-java $JAVA_GRPC_VERSION into $lib"
    local work
    work="$(mktemp -d)"
    cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.rocketcluster.peers</groupId>
  <artifactId>java-grpc-peer</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.rocketmq</groupId><artifactId>rocketmq-client-java</artifactId><version>$JAVA_GRPC_VERSION</version></dependency>
  </dependencies>
</project>
POM
    rm -rf "$lib"
    (cd "$work" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib") \
        >"$work/mvn.log" 2>&1 || { tail -30 "$work/mvn.log" >&2; rm -rf "$work"; die "mvn could not fetch rocketmq-client-java"; }
    rm -rf "$work"
    [[ -f "$lib/rocketmq-client-java-$JAVA_GRPC_VERSION.jar" ]] \
        || die "mvn finished but $lib lacks rocketmq-client-java-$JAVA_GRPC_VERSION.jar"
    touch "$lib/.ok"
}

java_grpc_sources_hash() {
    local LC_ALL=C files=() f
    for f in "$JAVA_SOURCES"/grpc/*.java; do files+=("grpc/$(basename "$f")"); done
    files+=("Json.java")
    (cd "$JAVA_SOURCES" && { printf '%s\n' "${files[@]}"; cat "${files[@]}"; } | sha256sum | cut -c1-16)
}

install_java_grpc() {
    ensure_jdk
    install_java_grpc_jar
    local classes
    classes="$JAVA_GRPC_DIR/classes-$(java_grpc_sources_hash)"
    [[ -f "$classes/.ok" ]] && return 0
    echo "peers.sh: compiling $JAVA_SOURCES/grpc into $classes"
    find "$JAVA_GRPC_DIR" -mindepth 1 -maxdepth 1 -name 'classes-*' -exec rm -rf {} +
    mkdir -p "$classes"
    javac -encoding UTF-8 -nowarn -cp "$JAVA_GRPC_DIR/lib/*" -d "$classes" "$JAVA_SOURCES"/grpc/*.java "$JAVA_SOURCES/Json.java" \
        || die "javac failed on $JAVA_SOURCES/grpc"
    touch "$classes/.ok"
}

# The Go client (github.com/apache/rocketmq-client-go/v2 at the version tests/peers/go/go.mod pins) from
# the Go module proxy into its own module cache, and tests/peers/go built against it into a binary named
# by a hash of its sources (the hash tests/interop/go_harness.py computes, as for the Java classes).
GO_CLIENT_VERSION="$(awk '$1 == "require" && $2 == "github.com/apache/rocketmq-client-go/v2" {print $3}' \
    "$(dirname "$JAVA_SOURCES")/go/go.mod")"
GO_DIR="${ROCKETCLUSTER_GO_DIR:-${HOME}/.cache/rocketcluster/go-rocketmq-client-${GO_CLIENT_VERSION}}"
GO_SOURCES="$(dirname "$JAVA_SOURCES")/go"

ensure_go() {
    command -v go >/dev/null 2>&1 && return 0
    [[ -x /usr/local/go/bin/go ]] && { PATH="/usr/local/go/bin:$PATH"; return 0; }
    if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        die "the Go peer needs a Go toolchain (root and apt-get are needed to install golang-go)"
    fi
    echo "peers.sh: installing golang-go"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go \
        || die "apt-get install golang-go failed"
}

go_sources_hash() {
    local LC_ALL=C files=() f
    for f in "$GO_SOURCES"/go.mod "$GO_SOURCES"/go.sum "$GO_SOURCES"/*.go; do files+=("$(basename "$f")"); done
    (cd "$GO_SOURCES" && { printf '%s\n' "${files[@]}"; cat "${files[@]}"; } | sha256sum | cut -c1-16)
}

install_go() {
    [[ -n "$GO_CLIENT_VERSION" ]] || die "tests/peers/go/go.mod does not pin github.com/apache/rocketmq-client-go/v2"
    ensure_go
    local binary
    binary="$GO_DIR/interop-$(go_sources_hash)"
    [[ -x "$binary" ]] && return 0
    echo "peers.sh: building $GO_SOURCES against rocketmq-client-go $GO_CLIENT_VERSION into $binary"
    mkdir -p "$GO_DIR"
    find "$GO_DIR" -mindepth 1 -maxdepth 1 -name 'interop-*' -delete
    (cd "$GO_SOURCES" && GOMODCACHE="$GO_DIR/mod" GOFLAGS=-modcacherw GOTOOLCHAIN=local CGO_ENABLED=0 \
        go build -o "$binary.tmp" .) || die "go build of $GO_SOURCES failed (module proxy unreachable?)"
    mv "$binary.tmp" "$binary"
}

if [[ "${1:-all}" == "go" ]]; then
    install_go
    echo "peers.sh: Go peer ready in $GO_DIR"
    exit 0
fi
if [[ "${1:-all}" == "java5grpc" ]]; then
    install_java_grpc
    echo "peers.sh: Java 5.x gRPC peer ready in $JAVA_GRPC_DIR"
    exit 0
fi
if [[ "${1:-all}" == "java" ]]; then
    install_java
    echo "peers.sh: Java peer ready in $JAVA_DIR"
    exit 0
fi
install_py "rocketmq-$ROCKETMQ_VERSION" "rocketmq==$ROCKETMQ_VERSION"
install_py "rocketmq-python-cvs-$CVS_VERSION" "rocketmq-python-cvs==$CVS_VERSION"
install_node
install_java
install_java_grpc
install_go
echo "peers.sh: peers ready in $PEERS_DIR, $JAVA_DIR, $JAVA_GRPC_DIR and $GO_DIR"
