#!/usr/bin/env bash
# Fuzzes the C API of CLegacySDK for SECONDS (default 60) and fails on any finding.
#
#   Fuzz/run.sh [SECONDS] [more libFuzzer flags...]
#
# 1. builds and runs the regression programs (Fuzz/regressions/*.c) under ASan + UBSan;
# 2. builds the libFuzzer target (Fuzz/fuzz_sdk.c with the SDK's sources compiled in) with
#    -fsanitize=fuzzer,address,undefined, and replays every saved crash input
#    (Fuzz/regressions/*.bin): each must now pass;
# 3. fuzzes from the seed corpus (Fuzz/corpus, read-only: new inputs go to a temporary directory)
#    until the time is up. A crash, an invariant violation, a leak, a timeout or running out of
#    memory stops it with a non-zero exit and leaves the input in .build-fuzz/ (crash-*, leak-*,
#    timeout-*, oom-*): minimise it (-minimize_crash=1 -runs=10000), fix the bug and move the input
#    to Fuzz/regressions/ so step 2 keeps replaying it.
#
# Environment: CLANG (default /opt/swift/usr/bin/clang), FUZZ_CORPUS_OUT (keep the new inputs in
# that directory instead of a temporary one).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
[ $# -gt 0 ] && shift
clang=${CLANG:-/opt/swift/usr/bin/clang}
out=.build-fuzz
mkdir -p "$out"
common=(-fuse-ld=lld -g -O1 -std=c11 -D_GNU_SOURCE -DLSDK_DEBUG -Wall -Wextra -Werror
        -ICLegacySDK/include -fno-sanitize-recover=undefined)

echo "fuzz: regression programs"
for program in Fuzz/regressions/*.c; do
    name=$(basename "$program" .c)
    "$clang" "${common[@]}" -fsanitize=address,undefined CLegacySDK/*.c "$program" -lpthread -o "$out/$name"
    "$out/$name"
done

echo "fuzz: building the target"
"$clang" "${common[@]}" -fsanitize=fuzzer,address,undefined CLegacySDK/*.c Fuzz/fuzz_sdk.c -lpthread \
    -o "$out/fuzz_sdk"

shopt -s nullglob
saved=(Fuzz/regressions/*.bin)
if [ ${#saved[@]} -gt 0 ]; then
    echo "fuzz: replaying ${#saved[@]} saved crash input(s)"
    "$out/fuzz_sdk" "${saved[@]}"
fi

if [ -n "${FUZZ_CORPUS_OUT:-}" ]; then
    work=$FUZZ_CORPUS_OUT
    mkdir -p "$work"
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi
echo "fuzz: ${seconds} s from $(ls Fuzz/corpus | wc -l) seeds"
"$out/fuzz_sdk" -max_total_time="$seconds" -max_len=4096 -len_control=0 -timeout=30 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$out/" "$@" "$work" Fuzz/corpus
