#!/bin/bash
# tests/cli/cli_options.sh: the command line as batch users write it, one section per
# ctest test.
#
#   cli_options.sh SECTION PIPEFUSE HELPER SOURCE_DIR WORK_DIR
#
# SECTION: help (every subcommand's --help, the man page), forms (GNU option forms,
# options before and after the subcommand), suggest ("did you mean" for commands,
# options and stages), notices (the no-GPU notice, -q, --backend cuda refused once),
# names (templates, --recursive, stdin/stdout, -o equal to the input folder, same-named
# inputs).
set -u
SECTION=$1 PF=$2 HELPER=$3 SRC=$4 WORK=$5
W=$WORK/$SECTION
rm -rf "$W" && mkdir -p "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH
failures=0
rc=0
P=$SRC/pipelines

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}
pf() {
    "$PF" "$@" >"$W/stdout" 2>"$W/stderr"
    rc=$?
}
expect() {
    if [ "$rc" != "$1" ]; then
        fail "$2: exit $rc, expected $1"
        sed 's/^/    | /' "$W/stderr" | head -20 >&2
    fi
}
says() {
    grep -qF -- "$2" "$1" && return
    fail "$3: no '$2' in $(basename "$1"):"
    sed 's/^/    | /' "$1" | head -20 >&2
}
silent() { # FILE WHAT: FILE is empty
    [ ! -s "$1" ] || { fail "$2: $(basename "$1") is not empty:"; sed 's/^/    | /' "$1" | head >&2; }
}
exists() { [ -s "$1" ] || fail "missing output $1"; }
absent() { [ ! -e "$1" ] || fail "unexpected file $1"; }
files() { (cd "$1" && find . -type f | sed 's|^\./||' | LC_ALL=C sort | tr '\n' ' '); }

# ---- help: every subcommand, exit 0, complete; the man page ---------------------------------
section_help() {
    for cmd in run check bench stages info plugin; do
        pf "$cmd" --help
        expect 0 "$cmd --help"
        silent "$W/stderr" "$cmd --help"
        says "$W/stdout" "usage: pipefuse $cmd" "$cmd --help"
        pf "$cmd" -h
        expect 0 "$cmd -h"
        pf help "$cmd"
        expect 0 "help $cmd"
    done
    # every option run.c, check and bench take is described in their help
    pf run --help
    for o in --output --backend --threads --plugin-path --quiet --no-fuse --max-launch-ms \
        --profile --dump-kernels --set --input --table-format --zlib --max-pixels; do
        says "$W/stdout" -- "$o" "run --help describes $o"
    done
    says "$W/stdout" "Exit status" "run --help"
    pf check --help
    for o in --size --dot --no-fuse --max-launch-ms --dump-kernels --arch; do
        says "$W/stdout" -- "$o" "check --help describes $o"
    done
    pf bench --help
    for o in --size --frames --format --mode --json; do
        says "$W/stdout" -- "$o" "bench --help describes $o"
    done
    # --help after other arguments still helps, and runs nothing
    pf run "$P/demo.json" "$W/nothing.png" -o "$W/out" --help
    expect 0 "run ... --help"
    absent "$W/out"
    pf --help
    expect 0 "--help"
    says "$W/stdout" "stages [NAME]" "--help lists the commands"

    # the man page: every command and option, valid roff
    pf --man
    expect 0 "--man"
    cp "$W/stdout" "$W/pipefuse.1"
    says "$W/pipefuse.1" ".TH PIPEFUSE 1" "man page header"
    for s in RUN CHECK BENCH STAGES INFO PLUGIN "EXIT STATUS" ENVIRONMENT; do
        says "$W/pipefuse.1" ".SH $s" "man page section $s"
    done
    says "$W/pipefuse.1" '\-\-max\-launch\-ms' "man page options"
    if command -v groff >/dev/null; then
        groff -man -Tascii -ww "$W/pipefuse.1" 2>"$W/groff.err" | sed 's/.\x08//g' >"$W/man.txt" ||
            fail "groff failed"
        silent "$W/groff.err" "groff warnings"
        grep -q "max-launch-ms" "$W/man.txt" || fail "the rendered man page lacks --max-launch-ms"
    fi
}

# ---- forms: --opt=value, -oDIR, options anywhere -----------------------------------------------
section_forms() {
    mkdir -p "$W/in"
    "$HELPER" pngs "$W/in" || fail "cannot make the input PNGs"
    local in=$W/in/rgb8.png
    pf run "$P/demo.json" "$in" -o "$W/ref" --backend cpu -q
    expect 0 "reference run"
    exists "$W/ref/rgb8.png"

    # every form of the same command gives the same bytes
    local n=0
    while IFS= read -r line; do
        n=$((n + 1))
        eval "set -- $line"
        pf "$@"
        expect 0 "form $n: $line"
        cmp -s "$W/ref/rgb8.png" "$W/f$n/rgb8.png" || fail "form $n: $line: different output"
    done <<EOF
run "$P/demo.json" "$in" --output="$W/f1" --backend=cpu --quiet
run "$P/demo.json" "$in" -o"$W/f2" --backend cpu -q
run -o "$W/f3" "$P/demo.json" "$in" --threads 2 --backend=cpu
--threads=2 --backend cpu run "$P/demo.json" "$in" -o "$W/f4"
-q run "$P/demo.json" --plugin-path="$W/in" "$in" -o "$W/f5" --backend=cpu --threads=1
EOF
    [ "$n" = 5 ] || fail "ran $n forms"

    # -q hides progress wherever it is written
    pf run "$P/demo.json" "$in" -o "$W/q" --backend cpu -q
    grep -q '^\[' "$W/stderr" && fail "-q after run still prints progress"
    pf -q run "$P/demo.json" "$in" -o "$W/q" --backend cpu
    grep -q '^\[' "$W/stderr" && fail "-q before run still prints progress"

    # --threads after the command reaches the engine
    pf info --threads 3
    expect 0 "info --threads 3"
    says "$W/stdout" "cpu threads:    3" "--threads after info"
    pf info --threads=abc
    expect 2 "--threads=abc"
    says "$W/stderr" "--threads abc" "bad --threads value named"

    # values that look like options are values: --set after -o, '-' as a value
    pf check "$P/demo.json" --size=64x48 --dot=-
    expect 0 "check --size=64x48 --dot=-"
    head -1 "$W/stdout" | grep -q "^digraph" || fail "--dot=- is not a digraph"
    pf check "$P/demo.json" --no-fuse=yes
    expect 2 "a flag given a value"
    says "$W/stderr" "takes no value" "flag with a value"
    pf check "$P/demo.json" --size
    expect 2 "an option without its value"
    says "$W/stderr" "needs a value" "missing value"
}

# ---- suggest: "did you mean" ---------------------------------------------------------------------
section_suggest() {
    pf rn "$P/demo.json"
    expect 2 "misspelt run"
    says "$W/stderr" "did you mean 'run'?" "rn"
    pf stage
    expect 2 "misspelt stages"
    says "$W/stderr" "did you mean 'stages'?" "stage"
    pf chekc "$P/demo.json"
    expect 2 "misspelt check"
    says "$W/stderr" "did you mean 'check'?" "chekc"
    pf stages gausian
    expect 2 "misspelt stage name"
    says "$W/stderr" "did you mean 'gaussian'?" "stages gausian"
    pf run "$P/demo.json" x.png --ouptut "$W/out"
    expect 2 "misspelt --output"
    says "$W/stderr" "did you mean '--output'?" "--ouptut"
    pf run "$P/demo.json" x.png -o "$W/out" --thread 2
    expect 2 "misspelt --threads"
    says "$W/stderr" "did you mean '--threads'?" "--thread"
    pf check "$P/demo.json" --sizes 10x10
    expect 2 "misspelt --size"
    says "$W/stderr" "did you mean '--size'?" "--sizes"
    pf --plugin-paht x info
    expect 2 "misspelt global option"
    says "$W/stderr" "did you mean '--plugin-path'?" "--plugin-paht"
    absent "$W/out"
}

# ---- notices: what the no-GPU notice says, -q, --backend cuda ---------------------------------
section_notices() {
    mkdir -p "$W/in"
    "$HELPER" pngs "$W/in" || fail "cannot make the input PNGs"
    local gpu=1 # 0: a usable device
    "$PF" info 2>/dev/null | grep -Eq "^devices: +[1-9]" && gpu=0
    pf run "$P/demo.json" "$W/in" -o "$W/auto"
    expect 0 "run with --backend auto"
    if [ "$gpu" != 0 ]; then
        # without a usable GPU: one notice, saying what is true
        [ "$(grep -c 'running on the CPU' "$W/stderr")" = 1 ] ||
            fail "expected one CPU notice: $(cat "$W/stderr")"
        grep -q "CUDA driver version is insufficient" "$W/stderr" &&
            fail "the notice repeats the runtime's misleading text"
        if [ ! -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ] && ! ldconfig -p 2>/dev/null | grep -q libcuda.so.1; then
            grep -Eq "no CUDA driver is installed|no CUDA support" "$W/stderr" ||
                fail "no driver here, the notice says: $(grep 'running on' "$W/stderr")"
        fi
        # -q hides the notice and the progress, not the summary of failures
        pf run "$P/demo.json" "$W/in" -o "$W/quiet" -q
        expect 0 "run -q"
        grep -q "running on the CPU" "$W/stderr" && fail "-q does not hide the notice"
        grep -q '^\[' "$W/stderr" && fail "-q does not hide progress"
        # --backend cuda: refused once, exit 2, before any file is read or written
        pf run "$P/demo.json" "$W/in" -o "$W/cuda" --backend cuda
        expect 2 "--backend cuda without a GPU"
        [ "$(wc -l <"$W/stderr")" = 1 ] || fail "--backend cuda: more than one line: $(cat "$W/stderr")"
        says "$W/stderr" "--backend cuda" "the refusal names the option"
        absent "$W/cuda"
        pf --backend=cuda run "$P/demo.json" "$W/in" -o "$W/cuda"
        expect 2 "--backend=cuda before run"
        pf check "$P/demo.json" --backend cuda
        expect 2 "check --backend cuda without a GPU"
    else
        pf run "$P/demo.json" "$W/in" -o "$W/cuda" --backend cuda -q
        expect 0 "--backend cuda with a GPU"
    fi
    pf run "$P/demo.json" "$W/in" -o "$W/bad" --backend gpu
    expect 2 "--backend gpu"
    says "$W/stderr" "auto, cpu or cuda" "bad --backend lists the choices"
}

section_"$SECTION"
if [ "$failures" != 0 ]; then
    echo "$SECTION: $failures failure(s)" >&2
    exit 1
fi
echo "$SECTION: ok"
