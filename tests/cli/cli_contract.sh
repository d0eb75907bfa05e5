#!/bin/bash
# tests/cli/cli_contract.sh: what the command line promises about its output streams,
# warnings and unused pipeline parts, one section per ctest test.
#
#   cli_contract.sh SECTION PIPEFUSE HELPER SOURCE_DIR WORK_DIR PLUGIN_DIR
#
# SECTION: stdout (check --dot - and run -o - write only the graph or the image to
# stdout, whatever else is said: the kernels' summary, a plugin's printf), warnings
# (each warning of loading the pipeline said once, with several lanes and after a
# worker restart), unused (an input no output uses needs no --input, and one given is
# not read), dumpdir (--dump-kernels DIR checked before any work).
# PLUGIN_DIR holds faulty.so (plugins/faulty.c).
set -u
SECTION=$1 PF=$2 HELPER=$3 SRC=$4 WORK=$5 PLUG=$6
W=$WORK/contract_$SECTION
rm -rf "$W" && mkdir -p "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH
# under AddressSanitizer the worker's own handlers name crashing stages, not ASan's
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0:handle_sigfpe=0:handle_abort=0:allow_user_segv_handler=1"
source "$(dirname "$0")/testlib.sh"
rc=0
P=$SRC/pipelines

silent() { # FILE WHAT: FILE is empty
    [ ! -s "$1" ] || { fail "$2: $(basename "$1") is not empty:"; sed 's/^/    | /' "$1" | head >&2; }
}
# times FILE TEXT N WHAT: TEXT (fixed string) is on exactly N lines of FILE
times() {
    local n
    n=$(grep -cF -- "$2" "$1")
    [ "$n" = "$3" ] || { fail "$4: '$2' on $n line(s), expected $3:"; sed 's/^/    | /' "$1" | head -20 >&2; }
}

mkdir -p "$W/gen" && "$HELPER" pngs "$W/gen" >/dev/null || fail "cannot make the input PNGs"

# ---- stdout: only what is promised -------------------------------------------------------------
section_stdout() {
    # check --dot -: a digraph and nothing after its closing brace, NVRTC or not
    for nvrtc in default off; do
        if [ $nvrtc = off ]; then
            PIPEFUSE_NVRTC=off pf check "$P/demo.json" --dot -
        else
            pf check "$P/demo.json" --dot -
        fi
        expect 0 "check --dot - (NVRTC $nvrtc)"
        head -1 "$W/stdout" | grep -q "^digraph" || fail "--dot - (NVRTC $nvrtc) does not start with digraph"
        [ "$(tail -1 "$W/stdout")" = "}" ] ||
            fail "--dot - (NVRTC $nvrtc): stdout goes on after the graph: $(tail -1 "$W/stdout")"
        grep -q "fused kernels" "$W/stdout" && fail "--dot - (NVRTC $nvrtc): the kernels' summary on stdout"
        says "$W/stderr" "fused kernels:" "--dot - (NVRTC $nvrtc): the kernels' summary on stderr"
        if command -v dot >/dev/null; then
            dot -Tsvg "$W/stdout" >/dev/null 2>&1 || fail "--dot - (NVRTC $nvrtc) is not valid dot"
        fi
    done
    # without --dot -, the summary stays part of the plan on stdout
    pf check "$P/demo.json"
    expect 0 "check"
    says "$W/stdout" "fused kernels:" "check prints the kernels' summary with the plan"

    # run -o -: the image alone, even when a stage prints to stdout (faulty mode 8)
    cat >"$W/chatty.json" <<'JSON'
{"pipefuse": 1, "inputs": ["src"],
 "stages": [{"id": "chat", "op": "faulty_copy", "inputs": ["src"], "params": {"mode": 8}}],
 "outputs": {"out": "chat"}}
JSON
    pf run "$W/chatty.json" "$W/gen/rgb8.png" -o "$W/ref" --plugin-path "$PLUG" -q
    expect 0 "the chatty pipeline to a folder"
    "$PF" run "$W/chatty.json" "$W/gen/rgb8.png" -o - --plugin-path "$PLUG" >"$W/out.png" 2>"$W/stderr"
    rc=$?
    expect 0 "the chatty pipeline to stdout"
    cmp -s "$W/ref/rgb8.png" "$W/out.png" || fail "run -o -: stdout is not the image alone ($(head -c 40 "$W/out.png" | tr -cd '[:print:]'))"
    says "$W/stderr" "hello from the stage" "the stage's print goes to stderr"
    # the same from stdin, with a table output skipped (a notice) and -q
    "$PF" run "$P/demo.json" - -o - <"$W/gen/rgb8.png" >"$W/demo.png" 2>"$W/stderr"
    rc=$?
    expect 0 "demo.json - -o -"
    "$HELPER" png "$W/demo.png" >/dev/null 2>&1 || fail "demo.json - -o -: stdout is not a whole PNG"
}

# ---- warnings: each load warning once ----------------------------------------------------------
section_warnings() {
    cat >"$W/spare.json" <<'JSON'
{"pipefuse": 1, "inputs": ["src", "spare"],
 "stages": [{"id": "a", "op": "invert", "inputs": ["src"]},
            {"id": "b", "op": "brightness", "inputs": ["src"], "params": {"amount": 0.1}}],
 "outputs": {"out": "a"}}
JSON
    mkdir -p "$W/in"
    for i in 1 2 3 4 5 6; do cp "$W/gen/rgb8.png" "$W/in/f$i.png"; done
    for jobs in 1 3; do
        pf run "$W/spare.json" "$W/in" -o "$W/out$jobs" --jobs $jobs --input spare="$W/gen/rgb8.png"
        expect 0 "a pipeline with an unused stage and input, --jobs $jobs"
        times "$W/stderr" "stage 'b' does not reach any output" 1 "the unused stage, --jobs $jobs"
        times "$W/stderr" "input 'spare' is not used by any output" 1 "the unused input, --jobs $jobs"
    done
    # -q hides notices, not warnings
    pf run "$W/spare.json" "$W/in" -o "$W/outq" -q --input spare="$W/gen/rgb8.png"
    times "$W/stderr" "stage 'b' does not reach any output" 1 "the unused stage with -q"
    # a worker that crashes is restarted: its load does not say it again
    cat >"$W/crash.json" <<'JSON'
{"pipefuse": 1, "inputs": ["src"],
 "stages": [{"id": "bad", "op": "faulty_copy", "inputs": ["src"], "params": {"mode": 1, "width": 17}},
            {"id": "b", "op": "invert", "inputs": ["src"]}],
 "outputs": {"out": "bad"}}
JSON
    "$HELPER" image "$W/in/narrow.png" 17 9 3 8 || fail "cannot make narrow.png"
    pf run "$W/crash.json" "$W/in" -o "$W/outc" --plugin-path "$PLUG"
    expect 1 "a batch whose worker crashes once"
    says "$W/stderr" "narrow.png: FAILED" "the crashing file fails"
    times "$W/stderr" "stage 'b' does not reach any output" 1 "the unused stage, with a worker restart"
}

# ---- unused: an input no output uses needs no file -----------------------------------------------
section_unused() {
    cat >"$W/one.json" <<'JSON'
{"pipefuse": 1, "inputs": ["src"], "stages": [{"id": "a", "op": "invert", "inputs": ["src"]}],
 "outputs": {"o": "a"}}
JSON
    cat >"$W/two.json" <<'JSON'
{"pipefuse": 1, "inputs": ["src", "other"], "stages": [{"id": "a", "op": "invert", "inputs": ["src"]}],
 "outputs": {"o": "a"}}
JSON
    # other feeds only a stage that reaches no output: unused as well
    cat >"$W/deadblend.json" <<'JSON'
{"pipefuse": 1, "inputs": ["src", "other"],
 "stages": [{"id": "a", "op": "invert", "inputs": ["src"]},
            {"id": "b", "op": "blend", "inputs": ["src", "other"]}],
 "outputs": {"o": "a"}}
JSON
    cat >"$W/used.json" <<'JSON'
{"pipefuse": 1, "inputs": ["src", "other"],
 "stages": [{"id": "b", "op": "blend", "inputs": ["src", "other"]}], "outputs": {"o": "b"}}
JSON
    pf run "$W/one.json" "$W/gen/rgb8.png" -o "$W/ref" -q
    expect 0 "the one-input pipeline"
    for p in two deadblend; do
        pf run "$W/$p.json" "$W/gen/rgb8.png" -o "$W/$p"
        expect 0 "$p.json without --input other=FILE"
        says "$W/stderr" "input 'other' is not used by any output" "$p.json: the warning"
        grep -q "needs --input" "$W/stderr" && fail "$p.json: --input still asked for"
        cmp -s "$W/ref/rgb8.png" "$W/$p/rgb8.png" || fail "$p.json: not the one-input pipeline's image"
    done
    # given anyway: accepted, not read (a file that does not exist), with a notice
    pf run "$W/two.json" "$W/gen/rgb8.png" -o "$W/given" --input other="$W/nowhere.png"
    expect 0 "two.json with --input other=FILE"
    says "$W/stderr" "$W/nowhere.png is not read" "the notice"
    cmp -s "$W/ref/rgb8.png" "$W/given/rgb8.png" || fail "two.json with --input: not the same image"
    pf run "$W/two.json" "$W/gen/rgb8.png" -o "$W/givenq" --input other="$W/nowhere.png" -q
    expect 0 "two.json with --input other=FILE, -q"
    grep -q "is not read" "$W/stderr" && fail "-q shows the notice"
    # in bands of rows, and to stdout
    pf run "$W/two.json" "$W/gen/rgb8.png" -o "$W/band" --band-rows 16
    expect 0 "two.json in bands"
    cmp -s "$W/ref/rgb8.png" "$W/band/rgb8.png" || fail "two.json in bands: not the same image"
    "$PF" run "$W/two.json" "$W/gen/rgb8.png" -o - >"$W/stdout.png" 2>"$W/stderr"
    rc=$?
    expect 0 "two.json to stdout"
    cmp -s "$W/ref/rgb8.png" "$W/stdout.png" || fail "two.json to stdout: not the same image"
    # an input an output uses is still required
    pf run "$W/used.json" "$W/gen/rgb8.png" -o "$W/used"
    expect 2 "used.json without --input other=FILE"
    says "$W/stderr" "needs --input other=FILE" "a used input still required"
    pf run "$W/used.json" "$W/gen/rgb8.png" -o "$W/used" --input other="$W/gen/rgb8.png"
    expect 0 "used.json with --input other=FILE"
    grep -q "is not read" "$W/stderr" && fail "used.json: a used input called unused"
}

# ---- dumpdir: --dump-kernels DIR checked first ---------------------------------------------------
section_dumpdir() {
    touch "$W/afile"
    for cmd in check run; do
        local args=("$P/demo.json")
        [ $cmd = run ] && args+=("$W/gen/rgb8.png" -o "$W/out_$cmd")
        pf $cmd "${args[@]}" --dump-kernels "$W/nodir"
        expect 2 "$cmd --dump-kernels DIR that does not exist"
        says "$W/stderr" "pipefuse $cmd: --dump-kernels $W/nodir: no such directory" "$cmd: the reason"
        silent "$W/stdout" "$cmd --dump-kernels DIR that does not exist"
        grep -q "running on the CPU\|fusion groups" "$W/stderr" && fail "$cmd: work done before the check"
        absent "$W/out_$cmd"
        absent "$W/nodir"
        pf $cmd "${args[@]}" --dump-kernels="$W/afile"
        expect 2 "$cmd --dump-kernels FILE"
        says "$W/stderr" "--dump-kernels $W/afile: not a directory" "$cmd: a file"
        silent "$W/stdout" "$cmd --dump-kernels FILE"
        absent "$W/out_$cmd"
        if [ "$(id -u)" != 0 ]; then # root writes anywhere
            mkdir -p "$W/ro" && chmod 555 "$W/ro"
            pf $cmd "${args[@]}" --dump-kernels "$W/ro"
            expect 2 "$cmd --dump-kernels DIR not writable"
            says "$W/stderr" "not writable" "$cmd: a read-only folder"
            chmod 755 "$W/ro"
        fi
    done
    mkdir -p "$W/kernels"
    pf run "$P/demo.json" "$W/gen/rgb8.png" -o "$W/ok" --dump-kernels "$W/kernels"
    expect 0 "run --dump-kernels DIR that exists"
}

section_"$SECTION"
if [ "$failures" != 0 ]; then
    echo "$SECTION: $failures failure(s)" >&2
    exit 1
fi
echo "$SECTION: ok"
