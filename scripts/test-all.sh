#!/usr/bin/env bash
# test-all.sh — build and run the whole test suite, as CI does:
#   1. a normal build (RelWithDebInfo): every test;
#   2. an ASan+UBSan build: every test;
#   3. a TSan build: the tests labelled "threads".
# Installs what it needs beyond gcc/cmake/make (Debian packages) when it can.
# Environment: JOBS (default: cores), VG_TEST_QUICK=1 runs only step 1.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

need_pkgs=()
command -v clang >/dev/null || need_pkgs+=(clang)
command -v python3 >/dev/null || need_pkgs+=(python3)
[ -e /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a ] ||
  ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
  need_pkgs+=(libclang-rt-14-dev)
command -v chromium >/dev/null || need_pkgs+=(chromium)
command -v llvm-addr2line >/dev/null || need_pkgs+=(llvm) # (reports' file:line)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "test-all: installing ${need_pkgs[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO=sudo
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null; }; then
    echo "test-all: could not install ${need_pkgs[*]}; the tests that need them will be skipped"
  fi
fi

total_pass=0; total_fail=0; broken=()
run_suite() { # name build-dir cmake-args ctest-args
  local name=$1 dir=$2 cargs=$3 targs=$4 t0=$SECONDS
  echo "=== $name: configure and build ($dir)"
  cmake -S . -B "$dir" $cargs >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; broken+=("$name (configure)"); return 1; }
  cmake --build "$dir" -j "$JOBS" >"$dir.build.log" 2>&1 ||
    { tail -50 "$dir.build.log"; broken+=("$name (build)"); return 1; }
  local t1=$SECONDS
  echo "=== $name: tests (built in $((t1 - t0)) s)"
  local log="$dir.ctest.log" rc=0
  ctest --test-dir "$dir" -j "$JOBS" --output-on-failure $targs 2>&1 | tee "$log" | grep -vE "^ *(Start|[0-9]+/[0-9]+ Test) " || true
  grep -q "tests passed" "$log" || rc=1
  local line; line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$log" | tail -1)
  local failed; failed=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed.*/\1/')
  local all; all=$(echo "$line" | sed -E 's/.*out of ([0-9]+).*/\1/')
  total_fail=$((total_fail + ${failed:-1})); total_pass=$((total_pass + ${all:-0} - ${failed:-0}))
  [ "${failed:-1}" = 0 ] || rc=1
  echo "=== $name: tests took $((SECONDS - t1)) s"
  return $rc
}

status=0
run_suite "plain" build-ci "-DCMAKE_BUILD_TYPE=RelWithDebInfo" "" || status=1
if [ "${VG_TEST_QUICK:-0}" != 1 ]; then
  run_suite "asan+ubsan" build-asan "-DCMAKE_BUILD_TYPE=Debug -DVG_SANITIZE=address -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++" "-LE no_asan" || status=1
  run_suite "tsan" build-tsan "-DCMAKE_BUILD_TYPE=RelWithDebInfo -DVG_SANITIZE=thread -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++" "-L threads" || status=1
fi
echo
echo "all suites: $total_pass passed, $total_fail failed ($((SECONDS / 60)) min $((SECONDS % 60)) s)"
[ ${#broken[@]} -eq 0 ] || echo "suites that did not build: ${broken[*]}"
exit $status
