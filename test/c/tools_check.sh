#!/bin/sh
# tools_check.sh — the tracing outputs read by the real tools: every fixture's
# callgrind output through callgrind_annotate (valgrind) and its dot output
# through `dot -Tsvg` (graphviz). From the repository root:
#   sh test/c/tools_check.sh
# Builds report_driver (ASan/UBSan) into test/c/build/tools/, then checks:
#   callgrind_annotate exits 0 with no warning; its PROGRAM TOTALS equal the
#   call tree's self and wait sums; the functions' self costs add up to them;
#   with --inclusive=yes the root method's inclusive cost equals the total
#   (recursion counted once); dot exits 0 with nothing on stderr and writes
#   an <svg>; hostile names come out escaped, not mangled. Flat and graph
#   reports must be produced for every fixture too.
# Ends with "N passed, M failed"; exit 1 when anything failed.
cd "$(dirname "$0")" || exit 2
for tool in callgrind_annotate dot; do
    command -v "$tool" >/dev/null || { echo "tools_check: $tool missing (apt-get install valgrind graphviz)"; exit 2; }
done
B=build/tools
SRC=../../ext/hakari
mkdir -p "$B"
CORE="core/buf core/u64_map core/intern_table core/strtab core/profile core/protobuf format/pprof_encode
      format/pprof_decode core/calltree format/flat_report format/graph_report format/alloc_sites format/callgrind_encode format/dot_encode"
${CC:-gcc} -std=c11 -Wall -Wextra -Werror -g -fsanitize=address,undefined -fno-sanitize-recover=all \
    -I"$SRC/core" -I"$SRC/format" report_driver.c fixture.c $(for c in $CORE; do echo "$SRC/$c.c"; done) -lz \
    -o "$B/report_driver" || exit 2

passed=0 failed=0
ok() { passed=$((passed + 1)); printf '  ok    %s\n' "$1"; }
bad() { failed=$((failed + 1)); printf '  FAIL  %s\n' "$1"; }
# "57,000,000 (100.0%) 3,000,000 (100.0%)  PROGRAM TOTALS" -> "57000000 3000000"; "." is a zero
costs() {
    sed 's/([^)]*)//g; s/,//g' |
        awk '{ for (i = 1; i <= NF && $i ~ /^([0-9]+|\.)$/; i++) printf "%s%s", (i > 1 ? " " : ""), ($i == "." ? 0 : $i)
               print "" }'
}

for fx in fib threads sampling hostile random deep empty stackless; do
    echo "== $fx"
    cg=$B/$fx.callgrind
    if ! "$B/report_driver" callgrind "$fx" >"$cg"; then bad "$fx: callgrind encode"; continue; fi
    if callgrind_annotate --threshold=100 "$cg" >"$cg.txt" 2>"$cg.err" && ! grep -q . "$cg.err"; then
        ok "$fx: callgrind_annotate reads it"
    else
        bad "$fx: callgrind_annotate: $(head -3 "$cg.err")"
    fi
    total=$(grep 'PROGRAM TOTALS' "$cg.txt" | costs)
    written=$(sed -n 's/^totals: //p' "$cg")
    [ -n "$total" ] && [ "$total" = "$written" ] && ok "$fx: PROGRAM TOTALS $total = totals: line" ||
        bad "$fx: PROGRAM TOTALS '$total' vs totals: '$written'"
    # the function rows (after the file:function heading) add up to the totals
    sum=$(awk '/file:function/ { on = 1; getline; next } on && /^-/ { on = 0 } on && NF' "$cg.txt" | costs |
          awk '{ for (i = 1; i <= NF; i++) s[i] += $i; if (NF > n) n = NF }
               END { for (i = 1; i <= n; i++) printf "%s%.0f", (i > 1 ? " " : ""), s[i]; print "" }')
    case $fx in
    random) ;; # values near INT64_MAX: perl's doubles cannot add them exactly
    empty) ;;  # no function rows at all
    *) [ "$sum" = "$total" ] && ok "$fx: function self costs add up to the totals" ||
           bad "$fx: function self costs add up to '$sum', totals '$total'" ;;
    esac
    case $fx in fib | threads | sampling | hostile | deep | stackless)
        set -- $("$B/report_driver" totals "$fx")
        want=$1
        [ "$(grep -c '^events: .* ' "$cg")" = 1 ] && want="$1 $2"
        [ "$total" = "$want" ] && ok "$fx: totals are the call tree's ($want)" ||
            bad "$fx: totals '$total', call tree '$want'"
        incl=$(callgrind_annotate --inclusive=yes --threshold=100 "$cg" 2>&1 |
               awk '/file:function/ { getline; getline; print; exit }' | costs)
        [ "$incl" = "$total" ] && ok "$fx: root's inclusive cost = total (recursion counted once)" ||
            bad "$fx: root's inclusive '$incl', total '$total'" ;;
    esac

    dot=$B/$fx.dot
    if ! "$B/report_driver" dot "$fx" >"$dot"; then bad "$fx: dot encode"; continue; fi
    if dot -Tsvg "$dot" >"$dot.svg" 2>"$dot.err" && ! grep -q . "$dot.err" && grep -q '<svg' "$dot.svg"; then
        ok "$fx: dot -Tsvg renders it"
    else
        bad "$fx: dot -Tsvg: $(head -3 "$dot.err")"
    fi
    for r in flat graph; do
        "$B/report_driver" $r "$fx" >"$B/$fx.$r" && grep -q . "$B/$fx.$r" && ok "$fx: $r report" || bad "$fx: $r report"
    done
done

echo "== hostile names in the svg"
svg=$B/hostile.dot.svg
for want in 'Foo#&quot;quoted&quot;' 'Bar\back\slash {x|y}' 'block in &lt;class:X&gt;' 'two?lines?' \
    'bad utf8 ?? ??' 'semi;colon (3) fn=(9)'; do
    grep -Fq -e "$want" "$svg" && ok "svg has $want" || bad "svg lacks $want"
done
grep -Fq -e 'caf&#233;#na&#239;ve' -e 'café#naïve' "$svg" && ok "svg has café#naïve" || bad "svg lacks café#naïve"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
