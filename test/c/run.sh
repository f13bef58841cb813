#!/bin/sh
# run.sh — runs test programs, shows their per-test lines, and ends with the
# total "N passed, M failed"; exits 1 when anything failed. A program that
# crashes, or exits non-zero after passing (a leak report, say), counts as
# one more failure. RUNNER (e.g. valgrind …) prefixes each program.
# Huge allocations in the out-of-memory tests must return NULL, not abort.
ASAN_OPTIONS="allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export ASAN_OPTIONS UBSAN_OPTIONS
passed=0 failed=0 skipped=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for t in "$@"; do
    echo "== $(basename "$t")"
    $RUNNER "$t" >"$out" 2>&1
    rc=$?
    grep -v '^RESULT ' "$out"
    set -- $(grep '^RESULT ' "$out" | tail -n 1)
    if [ "$1" = RESULT ]; then
        passed=$((passed + $2)) failed=$((failed + $3)) skipped=$((skipped + $4))
        if [ "$rc" -ne 0 ] && [ "$3" -eq 0 ]; then
            echo "  FAIL  $(basename "$t") exited with status $rc after its tests"
            failed=$((failed + 1))
        fi
    else
        echo "  FAIL  $(basename "$t") crashed (status $rc) before it finished"
        failed=$((failed + 1))
    fi
done
[ "$skipped" -gt 0 ] && echo "($skipped known-bug tests skipped; make KNOWN_BUGS=1 runs them)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
