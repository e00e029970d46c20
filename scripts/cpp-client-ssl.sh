#!/usr/bin/env bash
# Builds Apache rocketmq-client-cpp with TLS from a git clone named by ROCKETMQ_CPP_SRC, for the C++ client's TLS
# test (tests/interop/test_cpp_tls.py).
#
# Why from source: every published build of the C++ client lacks TLS. PyPI's rocketmq-python-cvs 2.1.0.3 ships a
# 2.1.0 core built without OpenSSL, and the C calls a wrapper needs (SetProducerSsl, SetPushConsumerSsl) exist
# only on the project's main branch, in no release. Neither PyPI, Maven Central nor Debian carries that branch,
# so it comes as a git clone (a mirror from the library's fetch works; a bare repository too).
#
# The result is librocketmq.so under ~/.cache/rocketcluster/rocketmq-client-cpp-<commit>/, keyed by the
# commit, with a `.ok` stamp written after a check; a second run is a no-op. The dependencies are Debian's
# (OpenSSL, libevent with its OpenSSL bufferevents, jsoncpp, Boost), installed here if missing. A few
# minutes on 2 cores. `make cpp-client-ssl` runs it.
set -euo pipefail

CACHE="${ROCKETCLUSTER_CACHE:-${HOME}/.cache/rocketcluster}"
DEBIAN_PACKAGES=(cmake g++ make libssl-dev zlib1g-dev libevent-dev libjsoncpp-dev
  libboost-atomic-dev libboost-thread-dev libboost-system-dev libboost-chrono-dev libboost-date-time-dev
  libboost-log-dev libboost-regex-dev libboost-serialization-dev libboost-filesystem-dev libboost-locale-dev
  libboost-iostreams-dev)
# What the project's CMakeLists links on Linux, by file name under its bin/lib (see link_debian_libraries)
LINKED=(libssl libcrypto libevent libevent_core libevent_extra libevent_pthreads libevent_openssl libjsoncpp
  boost_atomic boost_thread boost_system boost_chrono boost_date_time boost_log boost_log_setup boost_regex
  boost_serialization boost_filesystem boost_locale boost_iostreams)

log() { echo "[cpp-client-ssl $(date +%T)] $*" >&2; }
die() { log "error: $*"; exit 1; }

src=${ROCKETMQ_CPP_SRC:-}
[[ -n $src && -d $src ]] || die "set ROCKETMQ_CPP_SRC to a git clone of apache/rocketmq-client-cpp (its main branch)"
commit=$(git -C "$src" rev-parse HEAD) || die "$src is not a git repository"
header=$(git -C "$src" show HEAD:include/CProducer.h 2>/dev/null || true)
grep -qw SetProducerSsl <<<"$header" \
  || die "$src at ${commit:0:12} has no SetProducerSsl in include/CProducer.h: a main branch from 2025-08 or later is needed"
out="$CACHE/rocketmq-client-cpp-${commit:0:12}"
if [[ -f $out/.ok ]]; then
  log "cached in $out"
  exit 0
fi

missing=()
for package in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$src" archive --format=tar HEAD | tar -x -C "$work"

# link_debian_libraries: on Linux the project's CMakeLists does not search for its dependencies; it links fixed
# paths, bin/lib/<name>.a, which its build.sh fills by downloading and building each one. Debian has them all:
# each fixed path becomes a link to Debian's shared library (ld reads a file by its contents, not its name, and
# Debian's static archives are not built to go into a shared object), and bin/include/jsoncpp to its headers.
mkdir -p "$work/bin/lib" "$work/bin/include"
multiarch=$(gcc -print-multiarch)
for name in "${LINKED[@]}"; do
  [[ $name == lib* ]] || name="lib$name"
  [[ -e /usr/lib/$multiarch/$name.so ]] || die "/usr/lib/$multiarch/$name.so is missing"
  ln -s "/usr/lib/$multiarch/$name.so" "$work/bin/lib/$name.a"
done
ln -s /usr/include/jsoncpp "$work/bin/include/jsoncpp"
# The one line Debian's jsoncpp (1.9, whose UInt64 is uint64_t) does not take from the project's uint64 (unsigned
# long long): the conversion is ambiguous without a cast.
sed -i 's/outJson\["consumeFailedMsgs"\] = consumeFailedMsgs;/outJson["consumeFailedMsgs"] = static_cast<Json::UInt64>(consumeFailedMsgs);/' \
  "$work/src/status/ConsumeStats.cpp"
grep -q "static_cast<Json::UInt64>(consumeFailedMsgs)" "$work/src/status/ConsumeStats.cpp" \
  || die "src/status/ConsumeStats.cpp changed: check its consumeFailedMsgs line against Debian's jsoncpp"

# Boost.Log's shared library exports another namespace than its static one: the code must say it links the shared
# one (its CMakeLists passes BOOST_ALL_DYN_LINK to the linker only, where it does nothing).
echo 'add_compile_definitions(BOOST_ALL_DYN_LINK)' >"$work/boost-shared.cmake"

log "building ${commit:0:12} (shared library only)"
cmake -S "$work" -B "$work/build" -DBUILD_ROCKETMQ_STATIC=OFF -DBUILD_ROCKETMQ_SHARED=ON \
  -DCMAKE_PROJECT_INCLUDE="$work/boost-shared.cmake" >"$work/cmake.log" 2>&1 || { tail -30 "$work/cmake.log" >&2; die "cmake failed"; }
make -C "$work/build" -j"$(nproc)" rocketmq_shared >"$work/make.log" 2>&1 \
  || { grep -m20 -B2 -A8 "error:" "$work/make.log" >&2; die "the build failed"; }

built="$work/bin/librocketmq.so"
[[ -f $built ]] || die "the build finished without $built"
symbols=$(nm -D "$built")
for symbol in SetProducerSsl SetPushConsumerSsl bufferevent_openssl_socket_new; do
  grep -qw "$symbol" <<<"$symbols" || die "$built lacks $symbol"
done
python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$built" || die "$built does not load"
rm -rf "$out"
mkdir -p "$out"
cp "$built" "$out/librocketmq.so"
git -C "$src" log -1 --format='%H %cs %s' >"$out/commit"
touch "$out/.ok"
log "built $out/librocketmq.so"
