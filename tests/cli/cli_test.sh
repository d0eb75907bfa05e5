#!/bin/bash
# tests/cli/cli_test.sh: the pipefuse command end to end, one section per ctest test.
#
#   cli_test.sh SECTION PIPEFUSE HELPER SOURCE_DIR WORK_DIR
#
# SECTION: run (outputs and their names), batch (corrupt files in a batch), tables (JSON
# tables of any values), collisions (outputs never replace inputs or each other), args
# (global options checked), errors (exit 2 and messages), commands (check, stages,
# info, --version, --help), pipelines (every file in pipelines/ over sample images).
# HELPER is cli_helper (cli_helper.c).
set -u
SECTION=$1 PF=$2 HELPER=$3 SRC=$4 WORK=$5
W=$WORK/$SECTION
rm -rf "$W" && mkdir -p "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH
source "$(dirname "$0")/testlib.sh"
rc=0


# format_is PNG "WIDTHxHEIGHT CHANNELS BITS"
format_is() {
    local got
    got=$("$HELPER" png "$1")
    [ "$got" = "$2" ] || fail "$(basename "$1"): '$got', expected '$2'"
}

P=$SRC/pipelines
IMG=$SRC/samples/images

# ---- run: output names and formats -------------------------------------------------------
section_run() {
    mkdir -p "$W/in"
    "$HELPER" pngs "$W/in" || fail "cannot make the input PNGs"
    echo "not an image" >"$W/in/notes.txt" # a directory gives only its .png files
    local names="graya8 gray16 rgb8 rgba16 rgba8"

    # one image output: NAME.png; a table: NAME.OUTPUT.csv. Runs whose bytes are compared
    # use the CPU backend, whose results depend neither on fusion nor on threads.
    pf run "$P/demo.json" "$W/in" -o "$W/demo" --backend cpu
    expect 0 "run demo over a directory"
    for n in $names; do
        exists "$W/demo/$n.png"
        exists "$W/demo/$n.histogram.csv"
    done
    [ "$(count "$W/demo")" = 10 ] || fail "demo: $(count "$W/demo") files, expected 10: $(ls -A "$W/demo")"
    says "$W/stderr" "[5/5]" "progress"
    says "$W/stderr" "5 of 5 input(s) done" "summary"
    local csv=$W/demo/rgb8.histogram.csv
    head -1 "$csv" | grep -qx "row,r,g,b,a" || fail "csv header: $(head -1 "$csv")"
    [ "$(wc -l <"$csv")" = 65 ] || fail "histogram of 64 bins: $(wc -l <"$csv") lines"
    # "auto": the input's own channels and depth
    format_is "$W/demo/gray16.png" "33x21 1 16"
    format_is "$W/demo/rgba8.png" "17x9 4 8"
    format_is "$W/demo/graya8.png" "40x40 2 8"

    # several image outputs: NAME.OUTPUT.png, in the declared formats
    pf run "$P/edges.json" "$W/in/rgb8.png" -o "$W/edges" -q
    expect 0 "run edges on one file"
    format_is "$W/edges/rgb8.edges.png" "64x48 1 8"
    format_is "$W/edges/rgb8.gradient.png" "64x48 1 16"
    absent "$W/edges/rgb8.png"
    grep -q "^\[" "$W/stderr" && fail "-q still prints progress"

    # tables as JSON: valid, and no CSV
    pf run "$P/analysis.json" "$W/in" -o "$W/analysis" --table-format json
    expect 0 "run analysis --table-format json"
    for n in $names; do
        for o in stats histogram rowsums; do
            exists "$W/analysis/$n.$o.json"
            absent "$W/analysis/$n.$o.csv"
        done
    done
    "$HELPER" json "$W"/analysis/*.json || fail "invalid JSON tables"
    grep -q '"row": "stddev"' "$W/analysis/rgb8.stats.json" || fail "stats rows are named"
    pf run "$P/analysis.json" "$W/in/rgb8.png" -o "$W/analysis_csv" -q
    expect 0 "run analysis (csv)"
    grep -q "^mean," "$W/analysis_csv/rgb8.stats.csv" || fail "stats csv has a mean row"
    [ "$(wc -l <"$W/analysis_csv/rgb8.rowsums.csv")" = 49 ] || fail "rowsums: one row per image row"

    # geometry: the declared output size (its crop needs an input of 216x166 or more)
    pf run "$P/geometry.json" "$IMG/chelsea.png" -o "$W/geometry" -q
    expect 0 "run geometry"
    format_is "$W/geometry/chelsea.png" "320x240 3 8"
    pf run "$P/geometry.json" "$W/in/rgb8.png" -o "$W/geometry" -q
    expect 1 "geometry on an image smaller than its crop"
    says "$W/stderr" "centre" "the crop's stage named"
    absent "$W/geometry/rgb8.png"

    # --set changes the output; the same --set twice gives the same bytes
    pf run "$P/demo.json" "$W/in/rgb8.png" -o "$W/set" -q --backend cpu \
        --set bright.amount=0.5 --set 'glow.sigma=1'
    expect 0 "run --set"
    cmp -s "$W/demo/rgb8.png" "$W/set/rgb8.png" && fail "--set bright.amount=0.5 changed nothing"
    pf run "$P/demo.json" "$W/in/rgb8.png" -o "$W/set2" -q --backend cpu \
        --set bright.amount=0.5 --set 'glow.sigma=1'
    cmp -s "$W/set/rgb8.png" "$W/set2/rgb8.png" || fail "--set is not repeatable"
    # and the default value set explicitly changes nothing
    pf run "$P/demo.json" "$W/in/rgb8.png" -o "$W/set3" -q --backend cpu \
        --set bright.amount=0.04
    cmp -s "$W/demo/rgb8.png" "$W/set3/rgb8.png" || fail "--set of the file's value changed the output"

    # fusion off, one thread, the CPU backend: the same bytes
    pf run "$P/demo.json" "$W/in/rgb8.png" -o "$W/nofuse" -q --no-fuse --backend cpu
    expect 0 "run --no-fuse"
    cmp -s "$W/demo/rgb8.png" "$W/nofuse/rgb8.png" || fail "--no-fuse changed the output"
    cmp -s "$W/demo/rgb8.histogram.csv" "$W/nofuse/rgb8.histogram.csv" || fail "--no-fuse changed the table"
    pf --threads 1 run "$P/demo.json" "$W/in/rgb8.png" -o "$W/one" -q --backend cpu
    expect 0 "run --threads 1 --backend cpu"
    cmp -s "$W/demo/rgb8.png" "$W/one/rgb8.png" || fail "one thread changed the output"

    # the output directory is created, parents included; a second run overwrites
    pf run "$P/demo.json" "$W/in/rgb8.png" -o "$W/deep/er/out" -q
    expect 0 "run into a new nested directory"
    exists "$W/deep/er/out/rgb8.png"
    pf run "$P/demo.json" "$W/in/rgb8.png" -o "$W/deep/er/out" -q
    expect 0 "run again over existing outputs"
    [ "$(count "$W/deep/er/out")" = 2 ] || fail "second run left $(ls -A "$W/deep/er/out")"
}

# ---- batch: one bad file does not stop the others ----------------------------------------
section_batch() {
    mkdir -p "$W/in" "$W/gen"
    "$HELPER" pngs "$W/gen" || fail "cannot make the input PNGs"
    cp "$W/gen/rgb8.png" "$W/in/a_good.png"
    "$HELPER" truncate "$W/gen/rgb8.png" "$W/in/b_truncated.png"
    cp "$W/gen/rgba8.png" "$W/in/c_good.png"
    echo "hello" >"$W/in/d_text.png"
    : >"$W/in/e_empty.png"

    pf run "$P/demo.json" "$W/in" "$W/in/missing.png" -o "$W/out"
    expect 1 "a batch with bad files"
    for bad in b_truncated d_text e_empty missing; do
        grep -F "$bad.png" "$W/stderr" | grep -q FAILED || fail "$bad.png not reported as failed"
        absent "$W/out/$bad.png"
        absent "$W/out/$bad.histogram.csv"
    done
    for good in a_good c_good; do
        exists "$W/out/$good.png"
        exists "$W/out/$good.histogram.csv"
    done
    says "$W/stderr" "2 of 6 input(s) done" "summary"
    # nothing else: no partial or temporary files
    [ "$(count "$W/out")" = 4 ] || fail "batch left: $(ls -A "$W/out")"

    # every file bad: still exit 1, and an empty output directory
    pf run "$P/demo.json" "$W/in/b_truncated.png" -o "$W/out2"
    expect 1 "a batch of one bad file"
    [ "$(count "$W/out2")" = 0 ] || fail "bad file left: $(ls -A "$W/out2")"
    # a pixel limit is a per-file failure too
    pf run "$P/demo.json" "$W/in/a_good.png" -o "$W/out3" --max-pixels 100
    expect 1 "an image over --max-pixels"
    [ "$(count "$W/out3")" = 0 ] || fail "an image over the limit left: $(ls -A "$W/out3")"
}

# ---- tables: JSON tables stay JSON whatever the values -----------------------------------
section_tables() {
    # seven times 1e6 overflows float: the stats of inf are inf and NaN
    local stages='' prev=x
    for k in 1 2 3 4 5 6 7; do
        stages="$stages{\"id\": \"l$k\", \"op\": \"linear\", \"inputs\": [\"$prev\"],"
        stages="$stages \"params\": {\"a\": 1000000}},"
        prev=l$k
    done
    printf '{"pipefuse": 1, "inputs": ["x"], "stages": [%s
        {"id": "st", "op": "stats", "inputs": ["l7"]}], "outputs": {"stats": "st"}}\n' \
        "$stages" >"$W/overflow.json"
    pf run "$W/overflow.json" "$IMG/camera.png" -o "$W/out" --table-format json -q
    expect 0 "run a table of non-finite values"
    exists "$W/out/camera.stats.json"
    "$HELPER" json "$W/out/camera.stats.json" ||
        fail "a table holding inf or NaN is not valid JSON: $(tr -d '\n' <"$W/out/camera.stats.json")"
}

# ---- collisions: a batch never overwrites its own inputs or outputs ----------------------
section_collisions() {
    mkdir -p "$W/one" "$W/two" "$W/out"
    "$HELPER" pngs "$W/one" || fail "cannot make the input PNGs"
    cp "$W/one/rgb8.png" "$W/keep.png"
    cp "$W/one/rgba8.png" "$W/two/rgb8.png" # the same name, another image

    # two inputs of one name: both results kept, or the clash reported
    pf run "$P/demo.json" "$W/one/rgb8.png" "$W/two/rgb8.png" -o "$W/out"
    if [ "$rc" = 0 ]; then
        [ "$(ls "$W/out" | grep -c '\.png$')" = 2 ] ||
            fail "two inputs named rgb8.png: exit 0, but one output replaced the other: $(ls "$W/out")"
    else
        grep -q "rgb8.png" "$W/stderr" || fail "two inputs named rgb8.png: exit $rc without naming the clash"
    fi

    # outputs into the input directory: an input is never replaced by an output
    pf run "$P/demo.json" "$W/one" -o "$W/one"
    cmp -s "$W/keep.png" "$W/one/rgb8.png" ||
        fail "run -o INPUT_DIR replaced the input rgb8.png with its output (exit $rc)"
}

# ---- args: numeric global options are checked like the others ----------------------------
section_args() {
    pf --threads abc info
    expect 2 "--threads abc"
    pf --threads -3 info
    expect 2 "--threads -3"
    pf --threads 2 info
    expect 0 "--threads 2"
    says "$W/stdout" "cpu threads:    2" "--threads 2 reaches the engine"
}

# ---- errors: exit 2, with a message that helps -------------------------------------------
section_errors() {
    mkdir -p "$W/in" "$W/out"
    "$HELPER" pngs "$W/in" || fail "cannot make the input PNGs"
    local in=$W/in/rgb8.png

    printf '{"pipefuse": 1, "inputs": ["x"],\n "stages": [{"id": "a", "op": "invert"},],
 "outputs": {"o": "a"}}\n' >"$W/trailing.json"
    pf run "$W/trailing.json" "$in" -o "$W/out"
    expect 2 "malformed pipeline"
    says "$W/stderr" "trailing.json:2:" "malformed pipeline names file and line"
    printf '{"pipefuse": 1, "inputs": ["x"], "stages": [{"id": "a", "op": "gausian"}],
 "outputs": {"o": "a"}}\n' >"$W/typo.json"
    pf run "$W/typo.json" "$in" -o "$W/out"
    expect 2 "unknown stage"
    says "$W/stderr" "gaussian" "unknown stage suggests the closest"
    pf run "$W/nonexistent.json" "$in" -o "$W/out"
    expect 2 "missing pipeline file"
    says "$W/stderr" "nonexistent.json" "missing pipeline named"
    pf check "$W/typo.json"
    expect 2 "check of a bad pipeline"

    pf --bogus
    expect 2 "unknown global option"
    says "$W/stderr" "--bogus" "unknown option named"
    pf run "$P/demo.json" "$in" -o "$W/out" --bogus
    expect 2 "unknown run option"
    says "$W/stderr" "--bogus" "unknown run option named"
    pf frobnicate
    expect 2 "unknown command"
    pf
    expect 2 "no command"
    says "$W/stderr" "usage" "usage without a command"
    pf run "$P/demo.json" "$in"
    expect 2 "run without -o"
    pf run "$P/demo.json" -o "$W/out"
    expect 2 "run without inputs"
    pf run "$P/demo.json" "$in" -o "$W/out" --table-format xml
    expect 2 "bad --table-format"
    pf run "$P/demo.json" "$in" -o "$W/out" --zlib 12
    expect 2 "bad --zlib"
    pf run "$P/demo.json" "$in" -o "$W/out" --backend gpu
    expect 2 "bad --backend"
    pf check "$P/demo.json" --size 12by3
    expect 2 "bad --size"

    # bad --set: exit 2, the closest name suggested, nothing written
    pf run "$P/demo.json" "$in" -o "$W/out" --set bright.amout=0.5
    expect 2 "--set of an unknown param"
    says "$W/stderr" "did you mean 'amount'" "--set param suggestion"
    pf run "$P/demo.json" "$in" -o "$W/out" --set brigt.amount=0.5
    expect 2 "--set of an unknown stage"
    says "$W/stderr" "did you mean 'bright'" "--set stage suggestion"
    pf run "$P/demo.json" "$in" -o "$W/out" --set bright.amount=5
    expect 2 "--set out of range"
    says "$W/stderr" "bright.amount" "--set range names the key"
    pf run "$P/demo.json" "$in" -o "$W/out" --set bright.amount
    expect 2 "--set without a value"
    says "$W/stderr" "ID.PARAM=VALUE" "--set form"
    pf run "$P/demo.json" "$in" -o "$W/out" --set 'bright.amount=abc'
    expect 2 "--set of a non-JSON value"
    [ "$(count "$W/out")" = 0 ] || fail "failed commands wrote: $(ls -A "$W/out")"

    # two inputs: the second needs --input NAME=FILE
    pf run "$P/crossfade.json" "$in" -o "$W/out"
    expect 2 "crossfade without --input"
    says "$W/stderr" "--input b=FILE" "crossfade names the missing binding"
    pf run "$P/crossfade.json" "$in" -o "$W/out" --input b="$W/in/nonexistent.png"
    expect 2 "crossfade with a missing --input file"
    says "$W/stderr" "nonexistent.png" "missing --input file named"
    pf run "$P/crossfade.json" "$in" -o "$W/xf" --input b="$W/in/rgba8.png"
    expect 1 "crossfade of two sizes"
    says "$W/stderr" "17x9" "size mismatch names the sizes"
    pf run "$P/crossfade.json" "$in" -o "$W/xf" --input b="$in"
    expect 0 "crossfade with --input"
    exists "$W/xf/rgb8.fade.png"
    exists "$W/xf/rgb8.diff.png"

    # plugins: a directory others may write to is refused (skipped with a warning; the
    # command itself works)
    mkdir -p "$W/open" && chmod 777 "$W/open"
    pf --plugin-path "$W/open" stages
    expect 0 "world-writable plugin directory"
    says "$W/stderr" "$W/open" "refused plugin directory named"
    says "$W/stderr" "skipped" "refused plugin directory skipped"
}

# ---- commands: check, stages, info, --version, --help ------------------------------------
section_commands() {
    pf check "$P/demo.json"
    expect 0 "check demo"
    says "$W/stdout" "fusion groups" "check"
    says "$W/stdout" "launch units per frame" "check"
    says "$W/stdout" "1920x1080" "check's default size"
    pf check "$P/demo.json" --size 64x48 --no-fuse
    expect 0 "check --size --no-fuse"
    says "$W/stdout" "64x48" "check --size"
    says "$W/stdout" "[fusion off]" "check --no-fuse"

    pf check "$P/demo.json" --dot -
    expect 0 "check --dot -"
    head -1 "$W/stdout" | grep -q "^digraph" || fail "--dot - does not start with digraph"
    grep -q "fusion groups" "$W/stdout" && fail "--dot - mixes the plan into the graph"
    local open close
    open=$(tr -cd '{' <"$W/stdout" | wc -c) close=$(tr -cd '}' <"$W/stdout" | wc -c)
    [ "$open" = "$close" ] && [ "$open" -gt 0 ] || fail "--dot braces: $open { and $close }"
    says "$W/stdout" '"glow" -> "soft"' "--dot edges"
    pf check "$P/demo.json" --dot "$W/demo.dot"
    expect 0 "check --dot FILE"
    says "$W/stdout" "fusion groups" "check --dot FILE prints the plan"
    head -1 "$W/demo.dot" | grep -q "^digraph" || fail "--dot FILE is not a digraph"

    pf stages
    expect 0 "stages"
    for s in brightness contrast gamma invert grayscale threshold saturation levels linear \
        color_matrix vignette blend add multiply difference alpha_over mask gaussian box sobel \
        unsharp median3 resize crop flip rotate pad histogram colsum rowsum stats; do
        grep -q "^$s  (" "$W/stdout" || fail "stages does not list $s"
    done
    pf stages gaussian
    expect 0 "stages gaussian"
    says "$W/stdout" "sigma" "stages gaussian"
    [ "$(grep -c '^[a-z]' "$W/stdout")" = 1 ] || fail "stages gaussian lists other stages"
    pf stages nosuchstage
    expect 2 "stages of an unknown name"
    says "$W/stderr" "nosuchstage" "stages names the unknown stage"

    pf --version
    expect 0 "--version"
    grep -Eq "^pipefuse [0-9]+\.[0-9]+\.[0-9]+ .*plugin ABI [0-9]+\.[0-9]+" "$W/stdout" ||
        fail "--version: $(cat "$W/stdout")"
    pf --help
    expect 0 "--help"
    says "$W/stdout" "usage: pipefuse" "--help"
    says "$W/stdout" "run PIPELINE" "--help"
    says "$W/stdout" "Exit status" "--help"
    pf info
    expect 0 "info"
    says "$W/stdout" "plugins:" "info"
    says "$W/stdout" "filter" "info lists the built-in plugins"
}

# ---- pipelines: every example pipeline over sample images --------------------------------
section_pipelines() {
    local n=0
    for p in "$P"/*.json; do
        local name
        name=$(basename "$p" .json)
        [ "$name" = schema ] && continue # the JSON Schema of pipeline files
        n=$((n + 1))
        pf check "$p" --size 512x512
        expect 0 "check $name"
        local outputs inputs binds=()
        outputs=$(sed -n 's/^outputs (\([0-9]*\)):$/\1/p' "$W/stdout")
        inputs=$(sed -n 's/^inputs (\([0-9]*\)):$/\1/p' "$W/stdout")
        # inputs after the first are bound to another sample of the same size
        local extras
        extras=$(sed -n '/^inputs (/,/^stages (/p' "$W/stdout" | sed -n '3,$p' | grep '^  ' |
            awk '{print $1}')
        for extra in $extras; do
            binds+=(--input "$extra=$IMG/astronaut.png")
        done
        [ "${#binds[@]}" = $((2 * (inputs - 1))) ] || fail "$name: cannot bind its $inputs inputs"
        for img in camera astronaut; do
            pf run "$p" "$IMG/$img.png" -o "$W/$name" -q "${binds[@]}"
            expect 0 "run $name on $img.png"
            local made
            made=$(ls "$W/$name" | grep -c "^$img\.")
            [ "$made" = "$outputs" ] ||
                fail "$name on $img.png: $made outputs, expected $outputs: $(ls "$W/$name")"
            for f in "$W/$name/$img".*; do
                [ -s "$f" ] || fail "$name: empty output $f"
            done
        done
    done
    [ "$n" -ge 9 ] || fail "only $n pipelines found in $P"
}

# bench: the comparison table, and the same numbers as JSON. Without a device only the
# CPU mode runs and the CUDA modes say why; with one, every mode runs.
section_bench() {
    P=$SRC/pipelines
    pf bench "$P/duotone.json" --size 67x45 --frames 5
    expect 0 "bench table"
    says "$W/stdout" "a frame must move" "bench header"
    grep -qE '^cpu +1 ' "$W/stdout" || fail "bench: no cpu row with 1 launch: $(cat "$W/stdout")"
    for m in cuda-eager-unfused cuda-eager-fused cuda-graph-unfused cuda-graph-fused; do
        grep -qE "^$m +([0-9]|\(not run: no CUDA device\))" "$W/stdout" ||
            fail "bench: mode $m neither ran nor said why"
    done
    if grep -q "not run: no CUDA device" "$W/stdout"; then
        says "$W/stdout" "the CPU executor" "bench verdict on the CPU"
    else
        grep -qE "launch-bound|memory-bound|compute-bound" "$W/stdout" ||
            fail "bench: no verdict for the CUDA modes"
    fi
    pf bench "$P/duotone.json" --size 67x45 --frames 5 --json
    expect 0 "bench --json"
    cp "$W/stdout" "$W/bench.json"
    "$HELPER" json "$W/bench.json" || fail "bench --json is not valid JSON"
    says "$W/bench.json" '"mode": "cpu", "launches_per_frame": 1' "bench JSON cpu mode"
    pf bench "$P/duotone.json" --frames 1
    expect 2 "bench --frames 1"
    pf bench
    expect 2 "bench without a pipeline"
}

case $SECTION in
run | batch | tables | collisions | args | errors | commands | pipelines | bench) "section_$SECTION" ;;
*) echo "cli_test.sh: unknown section $SECTION" >&2; exit 2 ;;
esac
if [ "$failures" -gt 0 ]; then
    echo "cli $SECTION: $failures check(s) failed" >&2
    exit 1
fi
echo "cli $SECTION: all checks passed"
