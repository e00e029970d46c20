#!/usr/bin/env bash
# Fetches Apache RocketMQ (the reference broker that bench/vs_rocketmq.py runs beside ours) from Maven
# Central and compiles bench/java/LoadGen.java against it:
#   scripts/reference-rocketmq.sh [VERSION] [grpc]      default 5.3.3
# Verified (2026-11-28): 5.3.3 (through the BOM) and 5.5.0, the newest release that resolves (plain versions:
# rocketmq-all 5.5.0's dependencyManagement does not list its own modules). 5.5.1 does not resolve: Maven
# Central has rocketmq-broker 5.5.1 but no rocketmq-namesrv, -client, -tools, -srvutil, -filter or -auth 5.5.1.
# A throw-away pom imports org.apache.rocketmq:rocketmq-all:<version> as a BOM (plain versions when the BOM
# does not resolve) and depends on rocketmq-namesrv, -broker, -tools and -client; `mvn
# dependency:copy-dependencies` puts them and everything they need into
#   ~/.cache/rocketcluster/apache-rocketmq-<version>/lib        (ROCKETCLUSTER_REFERENCE_DIR overrides the root)
# and the load generator goes into .../loadgen-<hash of its source>. A `.ok` stamp written after a check
# makes a second run a no-op. With `grpc` (bench/vs_grpc.py) also rocketmq-proxy and what it needs, resolved on
# its own into .../proxy-lib (the proxy in local mode runs the broker in its own JVM), and bench/java/GrpcLoadGen.java
# compiled against rocketmq-client-java (the `java5grpc` peer of scripts/peers.sh, which must be installed) into
# .../grpc-loadgen-<hash>. Prints the version directory on its last line. Never run by `make test` or CI.
set -euo pipefail

VERSION="${1:-5.3.3}"
GRPC="${2:-}"
[[ -z "$GRPC" || "$GRPC" == grpc ]] || { echo "usage: reference-rocketmq.sh [VERSION] [grpc]" >&2; exit 2; }
JAVA_GRPC_DIR="${ROCKETCLUSTER_JAVA_GRPC_DIR:-${HOME}/.cache/rocketcluster/java-grpc-client-5.0.8}"
ROOT="${ROCKETCLUSTER_REFERENCE_DIR:-${HOME}/.cache/rocketcluster}"
DIR="$ROOT/apache-rocketmq-$VERSION"
SOURCES="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/bench/java"

die() { echo "reference-rocketmq.sh: error: $*" >&2; exit 1; }

command -v mvn >/dev/null 2>&1 || die "mvn not found (apt-get install maven; scripts/peers.sh java does it)"
command -v javac >/dev/null 2>&1 || die "javac not found (apt-get install openjdk-17-jdk-headless)"

pom() {  # pom BOM|PLAIN ARTIFACT...: the generated pom on stdout
    local kind="$1" managed="" ver="<version>$VERSION</version>" dep a
    shift
    if [[ "$kind" == BOM ]]; then
        managed="<dependencyManagement><dependencies><dependency><groupId>org.apache.rocketmq</groupId>
      <artifactId>rocketmq-all</artifactId><version>$VERSION</version><type>pom</type><scope>import</scope>
    </dependency></dependencies></dependencyManagement>"
        ver=""
    fi
    dep=""
    for a in "$@"; do
        dep+="    <dependency><groupId>org.apache.rocketmq</groupId><artifactId>$a</artifactId>$ver</dependency>
"
    done
    cat <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.rocketcluster.bench</groupId>
  <artifactId>reference-rocketmq</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  $managed
  <dependencies>
$dep  </dependencies>
</project>
POM
}

fetch_jars() {  # fetch_jars DIRNAME ARTIFACT...: the artifacts and their runtime dependencies into $DIR/DIRNAME
    local lib="$DIR/$1"
    shift
    [[ -f "$lib/.ok" ]] && return 0
    echo "reference-rocketmq.sh: fetching Apache RocketMQ $VERSION into $lib" >&2
    local work kind ok=""
    work="$(mktemp -d)"
    for kind in BOM PLAIN; do
        pom "$kind" "$@" >"$work/pom.xml"
        rm -rf "$lib"
        if (cd "$work" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib") \
            >"$work/mvn-$kind.log" 2>&1; then
            ok="$kind"
            break
        fi
        echo "reference-rocketmq.sh: the $kind pom did not resolve" >&2
    done
    if [[ -z "$ok" ]]; then
        tail -20 "$work/mvn-PLAIN.log" >&2
        rm -rf "$work"
        die "mvn could not fetch Apache RocketMQ $VERSION (no such release on Maven Central?)"
    fi
    rm -rf "$work"
    local a
    for a in "$@"; do
        [[ -f "$lib/$a-$VERSION.jar" ]] || die "mvn finished but $lib lacks $a-$VERSION.jar"
    done
    echo "$ok" >"$lib/.ok"
}

compile_loadgen() {  # compile_loadgen NAME PREFIX LIB: bench/java/NAME.java against LIB/* into $DIR/PREFIX-<hash>
    local hash classes
    hash="$(sha256sum <"$SOURCES/$1.java" | cut -c1-16)"
    classes="$DIR/$2-$hash"
    [[ -f "$classes/.ok" ]] && return 0
    echo "reference-rocketmq.sh: compiling $SOURCES/$1.java into $classes" >&2
    find "$DIR" -mindepth 1 -maxdepth 1 -name "$2-*" -exec rm -rf {} +
    mkdir -p "$classes"
    javac -encoding UTF-8 -nowarn -cp "$3/*" -d "$classes" "$SOURCES/$1.java" \
        || die "javac failed on $SOURCES/$1.java"
    touch "$classes/.ok"
}

mkdir -p "$DIR" || die "cannot create $DIR"
fetch_jars lib rocketmq-namesrv rocketmq-broker rocketmq-tools rocketmq-client
compile_loadgen LoadGen loadgen "$DIR/lib"
if [[ -n "$GRPC" ]]; then
    fetch_jars proxy-lib rocketmq-proxy
    [[ -f "$JAVA_GRPC_DIR/lib/.ok" ]] || die "no rocketmq-client-java in $JAVA_GRPC_DIR (scripts/peers.sh java5grpc)"
    compile_loadgen GrpcLoadGen grpc-loadgen "$JAVA_GRPC_DIR/lib"
fi
echo "$DIR"
