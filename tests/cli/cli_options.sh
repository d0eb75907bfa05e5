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
# inputs), numbers (numeric options and --input refused clearly), stdio (-o - with one
# image output, '-' and stdout in messages, warnings once), dirnames ({dir} without a
# trailing '/', rendered names checked, the same file given twice), agree (--version,
# --help and '--' with every command, help COMMAND and bench --mode checked, --help and
# the man page from one source).
set -u
SECTION=$1 PF=$2 HELPER=$3 SRC=$4 WORK=$5
W=$WORK/$SECTION
rm -rf "$W" && mkdir -p "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH
source "$(dirname "$0")/testlib.sh"
rc=0
P=$SRC/pipelines

silent() { # FILE WHAT: FILE is empty
    [ ! -s "$1" ] || { fail "$2: $(basename "$1") is not empty:"; sed 's/^/    | /' "$1" | head >&2; }
}
files() { (cd "$1" && find . -type f ! -name .pipefuse-manifest | sed 's|^\./||' | LC_ALL=C sort | tr '\n' ' '); }

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
    # -q prints nothing at all on success; the run's diagnostics only with -v or --profile
    [ -s "$W/stderr" ] && fail "-q printed on success: $(cat "$W/stderr")"
    pf run "$P/demo.json" "$in" -o "$W/q" --backend cpu
    says "$W/stderr" "input(s) done" "the summary without -q"
    grep -Eq "plan\(s\) built|per file, on average" "$W/stderr" &&
        fail "diagnostics without -v: $(cat "$W/stderr")"
    for v in -v --verbose --profile; do
        pf run "$P/demo.json" "$in" -o "$W/q" --backend cpu -q "$v"
        expect 0 "-q $v"
        says "$W/stderr" "plan(s) built" "$v: the plans built"
        says "$W/stderr" "per file, on average: decode" "$v: the time per file"
    done
    printf 'not a png' >"$W/bad.png"
    pf run "$P/demo.json" "$in" "$W/bad.png" -o "$W/q" --backend cpu -q
    expect 1 "-q with a failed input"
    says "$W/stderr" "bad.png: FAILED" "-q: the failure"
    says "$W/stderr" "1 of 2 input(s) done" "-q: the summary of a run that failed"

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
    # an option no command has, and no typo of one, is named as an unknown option by
    # every command (stages took it for a stage name, check and bench for an argument)
    local cmdline
    for cmdline in "stages --verbose" "info --verbose" "check $P/demo.json --verbose" \
        "bench $P/demo.json --verbose" "plugin check x.so --frobnicate" \
        "run $P/demo.json x.png -o $W/out --frobnicate"; do
        # shellcheck disable=SC2086
        pf $cmdline
        expect 2 "$cmdline"
        says "$W/stderr" "unknown option '${cmdline##* }'" "$cmdline: an unknown option"
    done
    pf stages -- gaussian
    expect 0 "stages -- NAME"
    # a known option of plugin check with a bad value names the option and the rule
    pf plugin check x.so --arch sm_90
    expect 2 "plugin check --arch sm_90"
    says "$W/stderr" "--arch sm_90: expected e.g. 90 for sm_90" "plugin check --arch's rule"
    pf plugin check x.so --tolerance 2
    expect 2 "plugin check --tolerance 2"
    says "$W/stderr" "--tolerance 2: expected a number from 0 to 1" "plugin check --tolerance's rule"
    # a file that is no shared library gets advice about that, not about undefined symbols
    echo "not a library" >"$W/text.so"
    chmod 644 "$W/text.so"
    pf plugin check "$W/text.so"
    expect 1 "plugin check of a text file"
    says "$W/stdout" "\`file FILE\` says what this file is" "plugin check: advice for a non-library"
    grep -qF "undefined symbol" "$W/stdout" && fail "plugin check: undefined-symbol advice for a text file"
    pf plugin check x.so --seed
    expect 2 "plugin check --seed without a value"
    says "$W/stderr" "'--seed' needs a value" "plugin check --seed's missing value"
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

# ---- names: templates, --recursive, stdin/stdout, -o the input folder, same names -------------
section_names() {
    mkdir -p "$W/gen" "$W/tree/a/deep" "$W/tree/b"
    "$HELPER" pngs "$W/gen" || fail "cannot make the input PNGs"
    cp "$W/gen/rgb8.png" "$W/tree/top.png"
    cp "$W/gen/rgb8.png" "$W/tree/a/x.png"
    cp "$W/gen/rgba8.png" "$W/tree/a/deep/y.png"
    cp "$W/gen/gray16.png" "$W/tree/b/x.png"
    echo "not an image" >"$W/tree/b/notes.txt"

    # without --recursive a folder gives its own PNG files only
    pf run "$P/edges.json" "$W/tree" -o "$W/flat" -q
    expect 0 "a folder, not recursive"
    [ "$(files "$W/flat")" = "top.edges.png top.gradient.png " ] || fail "flat: $(files "$W/flat")"

    # --recursive keeps the tree
    pf run "$P/edges.json" -r "$W/tree" -o "$W/rec" -q
    expect 0 "--recursive"
    [ "$(files "$W/rec")" = "a/deep/y.edges.png a/deep/y.gradient.png a/x.edges.png a/x.gradient.png b/x.edges.png b/x.gradient.png top.edges.png top.gradient.png " ] ||
        fail "--recursive: $(files "$W/rec")"
    pf run "$P/edges.json" "$W/tree/a/x.png" -o "$W/one" -q
    cmp -s "$W/one/x.edges.png" "$W/rec/a/x.edges.png" || fail "--recursive changed a file's output"

    # names and formats agree: an image's name says PNG or no format, a table's its own
    # format; a contradiction is refused before any work, naming what to write
    local t
    for t in '{stem}.tif' '{stem}.webp' '{stem}.csv'; do
        pf run "$P/thumbnail.json" "$W/tree/top.png" -o "$W/fmt" --name "$t"
        expect 2 "--name $t for an image output"
        says "$W/stderr" "name it .png" "--name $t: what to write"
        absent "$W/fmt"
    done
    says "$W/stderr" ".csv says a CSV table" "--name {stem}.csv: the contradiction named"
    # .jpg and .JPEG say JPEG, which is written (tests/jpeg/jpeg_cli.sh has the rest), or
    # refused before any work by a pipefuse built without libjpeg
    for t in jpg JPEG; do
        pf run "$P/thumbnail.json" "$W/tree/top.png" -o "$W/fmtj" --name "{stem}.$t"
        if [ $rc = 2 ] && grep -qF "built without libjpeg" "$W/stderr"; then
            absent "$W/fmtj"
            continue
        fi
        expect 0 "--name {stem}.$t"
        [ "$(head -c 3 "$W/fmtj/top.$t" | od -An -tx1 | tr -d ' \n')" = ffd8ff ] ||
            fail "--name {stem}.$t: top.$t is no JPEG"
    done
    pf run "$P/demo.json" "$W/tree/top.png" -o "$W/fmt" --name '{stem}.{output}.png'
    expect 2 "--name {stem}.{output}.png with a table output"
    says "$W/stderr" "output 'histogram' is a CSV table" "a table named .png"
    pf run "$P/demo.json" "$W/tree/top.png" -o "$W/fmt" --name '{stem}.{output}.{ext}' \
        --table-format json
    expect 0 "{ext} follows --table-format"
    exists "$W/fmt/top.histogram.json"
    pf run "$P/analysis.json" "$W/tree/top.png" -o "$W/fmt" --name '{stem}.{output}.csv' \
        --table-format json
    expect 2 "a table named .csv under --table-format json"
    says "$W/stderr" "is a JSON table" "the table's format named"
    pf run "$P/thumbnail.json" "$W/tree/top.png" -o "$W/fmt2" --name '{stem}.PNG'
    expect 0 "--name {stem}.PNG"
    exists "$W/fmt2/top.PNG"
    pf run "$P/thumbnail.json" "$W/tree/top.png" -o "$W/fmt2" --name '{stem}_small'
    expect 0 "a name without an extension"
    "$HELPER" png "$W/fmt2/top_small" >/dev/null 2>&1 || fail "{stem}_small is not a PNG"
    # a rendered name the template did not foresee (the stem holds .webp) fails its input
    cp "$W/gen/rgb8.png" "$W/photo.webp.png"
    pf run "$P/thumbnail.json" "$W/photo.webp.png" -o "$W/fmt3" --name 'small/{stem}'
    expect 1 "a stem that says WebP"
    says "$W/stderr" "small/photo.webp': .webp says a format pipefuse does not write" \
        "the rendered name named"

    # a template with a subfolder; {dir} comes first unless placed
    pf run "$P/thumbnail.json" --recursive "$W/tree" -o "$W/tpl" -q --name 'thumbs/{stem}_thumb.png'
    expect 0 "--name with a subfolder"
    [ "$(files "$W/tpl")" = "a/deep/thumbs/y_thumb.png a/thumbs/x_thumb.png b/thumbs/x_thumb.png thumbs/top_thumb.png " ] ||
        fail "--name 'thumbs/{stem}_thumb.png': $(files "$W/tpl")"
    pf run "$P/edges.json" -r "$W/tree" -o "$W/tpl2" -q --name='{output}/{dir}/{stem}.{ext}'
    expect 0 "--name with {output} and {dir}"
    [ -s "$W/tpl2/edges/a/deep/y.png" ] && [ -s "$W/tpl2/gradient/b/x.png" ] &&
        [ -s "$W/tpl2/edges/top.png" ] ||
        fail "--name '{output}/{dir}/{stem}.{ext}': $(files "$W/tpl2")"
    # templates that cannot work are refused before anything runs
    pf run "$P/edges.json" "$W/tree" -o "$W/bad" --name '{stem}.png'
    expect 2 "two outputs, one name"
    says "$W/stderr" "put {output} in it" "outputs named the same"
    pf run "$P/edges.json" "$W/tree" -o "$W/bad" --name '{stme}.{output}.png'
    expect 2 "an unknown field"
    says "$W/stderr" "did you mean {stem}?" "unknown field suggestion"
    # a '{' never closed is named as such, not as a field it is not
    pf run "$P/edges.json" "$W/tree" -o "$W/bad" --name '{stem}.{output'
    expect 2 "a field not closed"
    says "$W/stderr" "'{' at '{output' is not closed" "the unclosed field named"
    grep -qF "did you mean" "$W/stderr" && fail "an unclosed field taken for a misspelt one: $(cat "$W/stderr")"
    pf run "$P/thumbnail.json" "$W/tree" -o "$W/bad" --name '../{stem}.png'
    expect 2 "a template leaving -o"
    pf run "$P/thumbnail.json" "$W/tree" -o "$W/bad" --name '/tmp/{stem}.png'
    expect 2 "an absolute template"
    pf run "$P/thumbnail.json" "$W/tree" -o "$W/bad" --name 'same.png'
    expect 2 "a template without {stem}"
    absent "$W/bad"

    # two inputs of the same name from different folders: named apart, said once
    pf run "$P/thumbnail.json" "$W/tree/a/x.png" "$W/tree/b/x.png" -o "$W/same"
    expect 0 "same-named inputs"
    [ "$(files "$W/same")" = "x-2.png x.png " ] || fail "same names: $(files "$W/same")"
    says "$W/stderr" "b/x.png has the same name as another input: its outputs are named x-2" "notice"
    pf run "$P/thumbnail.json" "$W/tree/b/x.png" -o "$W/sameb" -q
    cmp -s "$W/same/x-2.png" "$W/sameb/x.png" || fail "x-2.png is not b/x.png's output"

    # -o the input folder: a second run does not take the first run's outputs as inputs
    mkdir -p "$W/inplace"
    cp "$W/gen/rgb8.png" "$W/gen/rgba8.png" "$W/inplace/"
    pf run "$P/edges.json" "$W/inplace" -o "$W/inplace" -q
    expect 0 "edges into the input folder"
    pf run "$P/edges.json" "$W/inplace" -o "$W/inplace"
    expect 0 "edges into the input folder, again"
    [ "$(files "$W/inplace")" = "rgb8.edges.png rgb8.gradient.png rgb8.png rgba8.edges.png rgba8.gradient.png rgba8.png " ] ||
        fail "outputs taken as inputs: $(files "$W/inplace")"
    says "$W/stderr" "is an output of this pipeline: not taken as an input" "notice of the files left out"
    says "$W/stderr" "2 of 2 input(s) done" "only the two photos ran"
    # ... also with a template into a subfolder and --recursive
    pf run "$P/thumbnail.json" -r "$W/inplace" -o "$W/inplace" -q --name 'small/{stem}.png'
    pf run "$P/thumbnail.json" -r "$W/inplace" -o "$W/inplace" -q --name 'small/{stem}.png'
    expect 0 "a template into the input folder, again"
    [ -e "$W/inplace/small/small" ] && fail "a template's outputs were taken as inputs"
    # an output never replaces a file the run reads besides its inputs: a --input file
    # (a restarted worker reads it again), the pipeline, the joblog; that input fails
    mkdir -p "$W/guard/in" "$W/guard/out"
    cp "$W/gen/rgb8.png" "$W/guard/in/x.png"
    cp "$W/gen/rgba8.png" "$W/guard/out/x.png"
    cp "$W/gen/rgba8.png" "$W/guard/logo.png"
    pf run "$P/watermark.json" "$W/guard/in" -o "$W/guard/out" --input "logo=$W/guard/out/x.png"
    expect 1 "an output over the --input file"
    says "$W/stderr" "output x.png would replace the --input file $W/guard/out/x.png" "the --input file named"
    cmp -s "$W/gen/rgba8.png" "$W/guard/out/x.png" || fail "the --input file was replaced by an output"
    cp "$P/analysis.json" "$W/guard/p.json"
    cp "$W/gen/rgb8.png" "$W/guard/p.png"
    pf run "$W/guard/p.json" "$W/guard/p.png" -o "$W/guard" --name '{stem}.{ext}' --table-format json \
        --joblog "$W/guard/log.tsv"
    expect 2 "three table outputs, one name" # refused for the template, before the files
    pf run "$W/guard/p.json" "$W/guard/p.png" -o "$W/guard" --name '{stem}{output}.{ext}' -q \
        --joblog "$W/guard/pstats.csv"
    expect 1 "an output over the joblog"
    says "$W/stderr" "output pstats.csv would replace the --joblog file" "the joblog named"
    head -1 "$W/guard/pstats.csv" | grep -q '^input' || fail "the joblog was replaced by an output"
    cp "$P/analysis.json" "$W/guard/pstats.json"
    pf run "$W/guard/pstats.json" "$W/guard/p.png" -o "$W/guard" --name '{stem}{output}.{ext}' -q \
        --table-format json
    expect 1 "an output over the pipeline file"
    says "$W/stderr" "would replace the pipeline file" "the pipeline file named"
    cmp -s "$P/analysis.json" "$W/guard/pstats.json" || fail "the pipeline file was replaced"

    # -o where a file is in the way: said with -o and the part in the way, status 2
    : >"$W/afile"
    for o in "$W/afile" "$W/afile/sub" /dev/null; do
        pf run "$P/thumbnail.json" "$W/gen/rgb8.png" -o "$o" -q
        expect 2 "-o $o"
        says "$W/stderr" "-o $o: ${o%/sub} exists and is not a folder" "-o $o: what is in the way"
    done
    pf run "$P/thumbnail.json" "$W/gen/rgb8.png" -o '' -q
    expect 2 "-o ''"
    says "$W/stderr" "-o '': an empty folder name" "-o ''"
    # a template's folder blocked by a file fails the inputs that need it, not the batch
    mkdir -p "$W/blocked"
    : >"$W/blocked/rgb8"
    pf run "$P/edges.json" "$W/gen/rgb8.png" "$W/gen/rgba8.png" -o "$W/blocked" -q --name '{stem}/{output}.png'
    expect 1 "a template folder blocked by a file"
    says "$W/stderr" "rgb8.png: FAILED: cannot create the folder $W/blocked/rgb8: it exists and is not a folder" \
        "the blocked folder named"
    exists "$W/blocked/rgba8/edges.png"

    # a file that merely looks like an output (no x.png beside it) is an input
    mkdir -p "$W/look"
    cp "$W/gen/rgb8.png" "$W/look/photo.edges.png"
    pf run "$P/edges.json" "$W/look" -o "$W/look" -q
    expect 0 "a look-alike input"
    exists "$W/look/photo.edges.edges.png"

    # stdin and stdout for one image; the temporary folder they use goes away
    mkdir -p "$W/tmp"
    export TMPDIR=$W/tmp
    pf run "$P/thumbnail.json" "$W/gen/rgb8.png" -o "$W/ref" -q --backend cpu
    "$PF" run "$P/thumbnail.json" - -o - -q --backend cpu <"$W/gen/rgb8.png" >"$W/piped.png" 2>"$W/stderr"
    rc=$?
    expect 0 "stdin to stdout"
    cmp -s "$W/ref/rgb8.png" "$W/piped.png" || fail "stdin to stdout differs from a file run"
    "$PF" run "$P/thumbnail.json" - -o "$W/fromstdin" -q --backend cpu <"$W/gen/rgb8.png" 2>"$W/stderr"
    rc=$?
    expect 0 "stdin to a folder"
    cmp -s "$W/ref/rgb8.png" "$W/fromstdin/stdin.png" || fail "stdin to a folder: $(files "$W/fromstdin")"
    "$PF" run "$P/thumbnail.json" "$W/gen/rgb8.png" -o - --backend cpu >"$W/tostdout.png" 2>"$W/stderr"
    rc=$?
    expect 0 "a file to stdout"
    cmp -s "$W/ref/rgb8.png" "$W/tostdout.png" || fail "a file to stdout differs"
    "$PF" run "$P/edges.json" "$W/gen/rgb8.png" -o - >"$W/two.png" 2>"$W/stderr"
    rc=$?
    expect 2 "two outputs to stdout"
    says "$W/stderr" "has 2 image outputs" "-o - with two image outputs"
    silent "$W/two.png" "nothing on stdout after a refusal"
    "$PF" run "$P/thumbnail.json" "$W/gen/rgb8.png" "$W/gen/rgba8.png" -o - >"$W/twoin.png" 2>"$W/stderr"
    rc=$?
    expect 2 "two inputs to stdout"
    printf 'not a png' | "$PF" run "$P/thumbnail.json" - -o - >"$W/badin.png" 2>"$W/stderr"
    rc=$?
    expect 1 "a corrupt image on stdin"
    silent "$W/badin.png" "nothing on stdout after a failure"
    [ -z "$(ls -A "$W/tmp")" ] || fail "temporary files left: $(ls -A "$W/tmp")"
    unset TMPDIR
    # a file whose name starts with '-' after --
    cp "$W/gen/rgb8.png" "$W/-dash.png"
    (cd "$W" && "$PF" run "$P/thumbnail.json" -o dash -q -- -dash.png) 2>"$W/stderr"
    rc=$?
    expect 0 "an input named -dash.png after --"
    exists "$W/dash/-dash.png"
}

# ---- numbers: every numeric option refuses signs, overflow, trailing text and nothing -------
section_numbers() {
    mkdir -p "$W/gen"
    "$HELPER" pngs "$W/gen" || fail "cannot make the input PNGs"
    local in=$W/gen/rgb8.png bad
    for opt in --max-pixels --zlib --jobs --file-timeout --max-memory --band-rows --max-launch-ms --shard; do
        for bad in -1 99999999999999999999 '' 12x ' 5' 0x10 1e400 nan inf 5/; do
            pf run "$P/thumbnail.json" "$in" -o "$W/out" "$opt" "$bad" -q
            expect 2 "$opt '$bad'"
            says "$W/stderr" "$opt" "$opt '$bad' named"
        done
    done
    absent "$W/out"
    for bad in -1 99999999999999999999 '' 4x; do
        pf --threads "$bad" info
        expect 2 "--threads '$bad'"
        pf check --size "10x$bad" "$P/thumbnail.json"
        expect 2 "check --size 10x'$bad'"
        pf check --arch "$bad" "$P/thumbnail.json"
        expect 2 "check --arch '$bad'"
        pf bench --frames "$bad" "$P/thumbnail.json"
        expect 2 "bench --frames '$bad'"
    done
    # a command line refused after -o is known leaves no folder behind (status 2: nothing
    # ran), with a template of subfolders and a joblog that cannot be opened too
    pf run "$P/edges.json" "$in" -o "$W/made/a/b" --name '{stem}/{output}.png' --zlib 99
    expect 2 "--zlib 99 with a template"
    absent "$W/made"
    pf run "$P/edges.json" "$in" -o "$W/made/a/b" --joblog "$W/nowhere/log.tsv"
    expect 2 "a joblog in a missing folder"
    says "$W/stderr" "--joblog $W/nowhere/log.tsv: No such file or directory" "the joblog named"
    absent "$W/made"
    pf run "$P/edges.json" "$in" -o "$W/made/a/b" --name '{stem}/{output}.png' -q
    expect 0 "the same with good options"
    exists "$W/made/a/b/rgb8/edges.png"
    rm -rf "$W/made"
    # check --format: a list without a format (an unset variable) is refused, not taken
    # for the default rgba8; an empty item beside formats is skipped (cli_check_build)
    for bad in '' ',' ',,'; do
        pf check "$P/thumbnail.json" --format "$bad" -q
        expect 2 "check --format '$bad'"
        says "$W/stderr" "--format '$bad': no format in the list" "check --format '$bad' named"
    done
    pf check "$P/thumbnail.json" --format rgb8,,gray16 -q
    expect 0 "check --format rgb8,,gray16"
    pf run "$P/thumbnail.json" "$in" -o "$W/ok" --max-pixels 100000000 --max-memory 1.5G --zlib 9 -q
    expect 0 "good numbers"
    # --shard auto reads whole numbers from the environment
    JOB_COMPLETION_INDEX=1x pf run "$P/thumbnail.json" "$in" -o "$W/out" --shard auto/3
    expect 2 "JOB_COMPLETION_INDEX=1x"
    says "$W/stderr" "JOB_COMPLETION_INDEX='1x'" "the variable named"
    JOB_COMPLETION_INDEX=1 PIPEFUSE_SHARDS=3x pf run "$P/thumbnail.json" "$in" -o "$W/out" --shard auto
    expect 2 "PIPEFUSE_SHARDS=3x"
    JOB_COMPLETION_INDEX=1 pf run "$P/thumbnail.json" "$in" -o "$W/sh" --shard auto/3 -q
    expect 0 "JOB_COMPLETION_INDEX=1"

    # --input: each mistake its own message naming the argument
    pf run "$P/watermark.json" "$in" -o "$W/out" --input "c=$in"
    expect 2 "--input of an unknown name"
    says "$W/stderr" "--input c=$in: " "the argument named"
    says "$W/stderr" "has no input 'c'" "an unknown input"
    pf run "$P/watermark.json" "$in" -o "$W/out" --input "logo$in"
    expect 2 "--input without ="
    says "$W/stderr" "--input logo$in: expected NAME=FILE" "a malformed --input"
    pf run "$P/watermark.json" "$in" -o "$W/out" --input "logo=$in" --input "logo=$in"
    expect 2 "--input twice"
    says "$W/stderr" "input 'logo' is already given" "a repeated --input"
    pf run "$P/watermark.json" "$in" -o "$W/out" --input "photo=$in" --input "logo=$in"
    expect 2 "--input of the first input"
    says "$W/stderr" "the files on the command line go to" "the first input"
    absent "$W/out"
    pf run "$P/watermark.json" "$in" -o "$W/wm" --input "logo=$in" -q
    expect 0 "a good --input"
}

# ---- stdio: -o - with one image output, messages name - and stdout, warnings once ----------
section_stdio() {
    mkdir -p "$W/gen" "$W/tmp"
    "$HELPER" pngs "$W/gen" || fail "cannot make the input PNGs"
    export TMPDIR=$W/tmp
    pf run "$P/demo.json" "$W/gen/rgb8.png" -o "$W/ref" -q
    local img
    img=$(cd "$W/ref" && ls *.png | head -1)
    # demo.json: one image and a table; the --help example
    "$PF" run "$P/demo.json" - -o - <"$W/gen/rgb8.png" >"$W/out.png" 2>"$W/stderr"
    rc=$?
    expect 0 "pipefuse run demo.json - -o -"
    cmp -s "$W/ref/$img" "$W/out.png" || fail "demo.json to stdout differs from $img"
    says "$W/stderr" "is not written" "the table skipped with a notice"
    grep -q "$W/tmp\|pipefuse-" "$W/stderr" && fail "a temporary path in the messages: $(cat "$W/stderr")"
    says "$W/stderr" "[1/1] - -> stdout" "stdin and stdout named"
    "$PF" run "$P/demo.json" - -o "$W/fromstdin" --joblog "$W/log.tsv" <"$W/gen/rgb8.png" 2>"$W/stderr"
    rc=$?
    expect 0 "stdin to a folder"
    [ "$(tail -1 "$W/log.tsv" | cut -f1,2)" = "$(printf -- '-\tok')" ] || fail "joblog of stdin: $(tail -1 "$W/log.tsv")"
    # -o -: no file is written, so the joblog's outputs column names stdout, "-", as the
    # log line does (it listed the names of files that never existed)
    "$PF" run "$P/demo.json" "$W/gen/rgb8.png" -o - --joblog "$W/out.tsv" >"$W/out.png" 2>"$W/stderr"
    rc=$?
    expect 0 "-o - with --joblog"
    [ "$(tail -1 "$W/out.tsv" | cut -f2,4)" = "$(printf 'ok\t-')" ] || fail "joblog of -o -: $(tail -1 "$W/out.tsv")"
    # ... and a retry from that joblog claims no output name
    "$PF" run "$P/demo.json" "$W/gen/rgb8.png" -o "$W/afterstdout" --retry-failed "$W/out.tsv" -q 2>"$W/stderr"
    rc=$?
    expect 0 "a retry from a joblog of -o -"
    printf 'not a png' | "$PF" run "$P/demo.json" - -o - >"$W/bad.png" 2>"$W/stderr"
    rc=$?
    expect 1 "a corrupt image on stdin"
    grep -q "$W/tmp\|pipefuse-" "$W/stderr" && fail "a temporary path in a failure: $(cat "$W/stderr")"
    says "$W/stderr" "[1/1] -: FAILED" "the failure names -"
    # stdout that cannot be written (a full disk; a closed pipe): the input fails, and the
    # per-file line, the summary, the joblog and the exit status all say so
    "$PF" run "$P/thumbnail.json" "$W/gen/rgb8.png" -o - --joblog "$W/full.tsv" >/dev/full 2>"$W/stderr"
    rc=$?
    expect 1 "-o - to /dev/full"
    says "$W/stderr" "rgb8.png: FAILED: cannot write the output to stdout: No space left on device" \
        "the stdout write error as the input's failure"
    says "$W/stderr" "0 of 1 input(s) done" "the summary counts the input not written"
    says "$W/stderr" ", 1 failed" "the summary agrees with the exit status"
    [ "$(tail -1 "$W/full.tsv" | cut -f2)" = failed ] || fail "joblog of -o - to /dev/full: $(tail -1 "$W/full.tsv")"
    "$PF" run "$P/thumbnail.json" "$W/gen/rgb8.png" -o - 2>"$W/stderr" | :
    rc=${PIPESTATUS[0]}
    if [ "$rc" = 0 ]; then # the pipe took the whole image before it closed
        says "$W/stderr" ", 0 failed" "the summary of -o - into a pipe that took it"
    else
        expect 1 "-o - into a closed pipe"
        says "$W/stderr" ", 1 failed" "the summary of -o - into a closed pipe"
    fi
    [ -z "$(ls -A "$W/tmp")" ] || fail "temporary files left: $(ls -A "$W/tmp")"
    # a pipeline from a pipe (read by this process and every worker: it is copied first),
    # its errors named as given
    "$PF" run <(cat "$P/demo.json") "$W/gen/rgb8.png" -o "$W/piped" -q 2>"$W/stderr"
    rc=$?
    expect 0 "a pipeline from a pipe"
    cmp -s "$W/ref/$img" "$W/piped/$img" || fail "a pipeline from a pipe: $img differs"
    "$PF" run <(echo '{"pipefuse": 1,') "$W/gen/rgb8.png" -o "$W/piped2" -q 2>"$W/stderr"
    rc=$?
    expect 2 "a broken pipeline from a pipe"
    says "$W/stderr" "/dev/fd/" "the broken pipeline named as given"
    grep -q "$W/tmp\|pipefuse-" "$W/stderr" && fail "a temporary path named: $(cat "$W/stderr")"
    # --skip-existing with a pipeline from a pipe: judged by its content, as a file's
    cp "$W/gen/rgb8.png" "$W/old.png"
    pf run "$P/demo.json" "$W/old.png" -o "$W/skipdir" -q
    "$PF" run <(cat "$P/demo.json") "$W/old.png" -o "$W/skipdir" --skip-existing 2>"$W/stderr"
    rc=$?
    expect 0 "--skip-existing with a pipeline from a pipe"
    says "$W/stderr" "1 skipped (outputs exist)" "a piped pipeline of the same content"
    "$PF" run <(sed 's/"sigma": 4.0/"sigma": 3.0/' "$P/demo.json") "$W/old.png" -o "$W/skipdir" \
        --skip-existing 2>"$W/stderr"
    rc=$?
    expect 0 "--skip-existing, a piped pipeline of other content"
    grep -q "skipped (outputs" "$W/stderr" && fail "another pipeline's outputs skipped: $(cat "$W/stderr")"
    says "$W/stderr" "made with another pipeline" "the other pipeline said"
    touch "$W/old.png"
    "$PF" run <(sed 's/"sigma": 4.0/"sigma": 3.0/' "$P/demo.json") "$W/old.png" -o "$W/skipdir" \
        --skip-existing -q 2>"$W/stderr"
    rc=$?
    expect 0 "--skip-existing, a piped pipeline, a newer input"
    grep -q "skipped (outputs" "$W/stderr" && fail "an input newer than its outputs skipped: $(cat "$W/stderr")"
    # stdin is never skipped: its data has no time
    "$PF" run "$P/demo.json" - -o "$W/skipdir" --skip-existing <"$W/gen/rgb8.png" 2>"$W/stderr"
    rc=$?
    expect 0 "--skip-existing with stdin"
    says "$W/stderr" "standard input is never skipped" "the rule for stdin said"
    grep -q "1 skipped" "$W/stderr" && fail "stdin skipped: $(cat "$W/stderr")"
    # Ctrl-C or SIGTERM while stdin (or a piped pipeline) is still being read: status 130,
    # nothing run, the private temporary folder removed
    # (stdin is a FIFO whose writer stays open: the signal is sent once the spool file
    # exists, so pipefuse is reading, whatever the machine's speed or load)
    local sig pid what tries
    rm -f "$W/feed" && mkfifo "$W/feed" || fail "mkfifo"
    for sig in INT TERM; do
        for what in stdin pipeline; do
            if [ $what = stdin ]; then
                (trap - INT; exec "$PF" run "$P/demo.json" - -o "$W/cut" <"$W/feed" 2>"$W/stderr") &
            else
                (trap - INT; exec "$PF" run /dev/stdin "$W/gen/rgb8.png" -o "$W/cut" <"$W/feed" 2>"$W/stderr") &
            fi
            pid=$!
            exec 7>"$W/feed"
            tries=0
            while [ -z "$(find "$W/tmp" -type f 2>/dev/null)" ] && [ $tries -lt 3000 ]; do
                sleep 0.02
                tries=$((tries + 1))
            done
            kill -$sig $pid
            wait $pid
            rc=$?
            exec 7>&-
            expect 130 "SIG$sig while reading the $what"
            says "$W/stderr" "interrupted while reading" "SIG$sig while reading the $what: said"
            [ -z "$(ls -A "$W/tmp")" ] || fail "SIG$sig while reading the $what left: $(ls -A "$W/tmp")"
            [ ! -e "$W/cut" ] || fail "SIG$sig while reading the $what: $W/cut made"
        done
    done
    # stdin copied past the file size limit: a write error said, the private folder
    # removed (SIGXFSZ killed the process, status 153, and left the folder)
    (
        ulimit -f 4 # KiB: less than the image
        exec "$PF" run "$P/demo.json" - -o "$W/xfsz" <"$W/gen/rgb8.png" 2>"$W/stderr"
    )
    rc=$?
    expect 2 "stdin past ulimit -f"
    says "$W/stderr" "cannot read stdin into" "stdin past ulimit -f: said"
    says "$W/stderr" "File too large" "stdin past ulimit -f: the reason"
    [ -z "$(ls -A "$W/tmp")" ] || fail "stdin past ulimit -f left: $(ls -A "$W/tmp")"
    unset TMPDIR
    # two image outputs still refused
    "$PF" run "$P/edges.json" "$W/gen/rgb8.png" -o - >"$W/two.png" 2>"$W/stderr"
    rc=$?
    expect 2 "two image outputs to stdout"
    # a missing --plugin-path folder is said once
    pf run "$P/thumbnail.json" "$W/gen/rgb8.png" -o "$W/pp" --plugin-path "$W/nowhere" -q
    expect 0 "a missing plugin folder"
    [ "$(grep -c 'does not exist' "$W/stderr")" = 1 ] || fail "the plugin folder warning: $(cat "$W/stderr")"
}

# ---- dirnames: {dir} without a '/' at its end; the same file twice taken once ----------------
section_dirnames() {
    mkdir -p "$W/gen" "$W/tree/a/b"
    "$HELPER" pngs "$W/gen" || fail "cannot make the input PNGs"
    cp "$W/gen/rgb8.png" "$W/tree/x.png"
    cp "$W/gen/rgb8.png" "$W/tree/a/x.png"
    cp "$W/gen/rgb8.png" "$W/tree/a/b/x.png"
    pf run "$P/thumbnail.json" -r "$W/tree" -o "$W/nm" --name '{stem}-{dir}.png' -q
    expect 0 "{dir} inside a name"
    [ "$(files "$W/nm")" = "x-.png x-a.png x-a/b.png " ] || fail "'{stem}-{dir}.png': $(files "$W/nm")"
    [ -z "$(cd "$W/nm" && find . -name '.*' ! -name . ! -name .pipefuse-manifest)" ] ||
        fail "hidden files: $(cd "$W/nm" && find .)"
    pf run "$P/thumbnail.json" -r "$W/tree" -o "$W/th" --name '{dir}/thumbs/{stem}_thumb.png'
    expect 0 "{dir}/ at the front"
    [ "$(files "$W/th")" = "a/b/thumbs/x_thumb.png a/thumbs/x_thumb.png thumbs/x_thumb.png " ] ||
        fail "'{dir}/thumbs/{stem}_thumb.png': $(files "$W/th")"
    grep -q -- '-> /\|//' "$W/stderr" && fail "a name with a leading or double '/': $(grep -- '->' "$W/stderr")"
    says "$W/stderr" "$W/tree/x.png -> thumbs/x_thumb.png" "the top file's name"
    pf run "$P/thumbnail.json" -r "$W/tree" -o "$W/old" --name '{dir}{stem}.png'
    expect 2 "{dir}{stem}, without the '/'"
    says "$W/stderr" "write {dir}/{stem}.png" "the fix said"
    # a rendered name passes the template's checks: a stem of '.'
    cp "$W/gen/rgb8.png" "$W/..png"
    pf run "$P/thumbnail.json" "$W/..png" -o "$W/dot" --name '{stem}/t.png'
    expect 1 "a name that renders to ./t.png"
    says "$W/stderr" "'.' and '..'" "the rendered name refused"

    # the same file twice: taken once, named as the first, no clash
    pf run "$P/thumbnail.json" "$W/gen/rgb8.png" "$W/gen/rgb8.png" -o "$W/d1"
    expect 0 "a file given twice"
    says "$W/stderr" "taken once" "the notice"
    says "$W/stderr" "1 of 1 input(s) done" "one input"
    [ "$(files "$W/d1")" = "rgb8.png " ] || fail "a file twice: $(files "$W/d1")"
    (cd "$W/gen" && "$PF" run "$P/thumbnail.json" rgb8.png ./rgb8.png -o "$W/d2") 2>"$W/stderr"
    rc=$?
    expect 0 "x.png ./x.png"
    [ "$(files "$W/d2")" = "rgb8.png " ] || fail "x.png ./x.png: $(files "$W/d2")"
    pf run "$P/thumbnail.json" -r "$W/tree" "$W/tree/a" -o "$W/d3"
    expect 0 "-r tree tree/a"
    grep -q "clash" "$W/stderr" && fail "-r tree tree/a clashed"
    [ "$(files "$W/d3")" = "a/b/x.png a/x.png x.png " ] || fail "-r tree tree/a: $(files "$W/d3")"
    # two names of one file (a hard link) are two inputs with two outputs, even under -q
    mkdir -p "$W/hl"
    cp "$W/gen/rgb8.png" "$W/hl/cat.png" && ln "$W/hl/cat.png" "$W/hl/dog.png" || fail "ln"
    pf run "$P/thumbnail.json" "$W/hl" -o "$W/d4" -q
    expect 0 "a hard link"
    [ "$(files "$W/d4")" = "cat.png dog.png " ] || fail "a hard link: $(files "$W/d4")"
}

# ---- agree: what --help, the man page, README and the code say, the same way everywhere -------
# --version and --help before or after any command, '--' ending options for every command,
# unknown names (help COMMAND, bench --mode) refused with a suggestion, one source for every
# command's help and the man page (plugin's included), info's library line.
section_agree() {
    local built=$(dirname "$PF")/../lib/pipefuse/plugins
    pf --version
    expect 0 "--version"
    local version=$(cat "$W/stdout")
    for cmd in run check bench stages info plugin; do
        pf "$cmd" --version
        expect 0 "$cmd --version"
        [ "$(cat "$W/stdout")" = "$version" ] || fail "$cmd --version: '$(cat "$W/stdout")'"
        pf "$cmd" -h
        expect 0 "$cmd -h"
        says "$W/stdout" "usage: pipefuse $cmd" "$cmd -h"
    done
    pf run "$P/demo.json" --version "$W/nothing.png" -o "$W/v"
    expect 0 "run ... --version"
    absent "$W/v"
    pf --version --help
    [ "$(cat "$W/stdout")" = "$version" ] || fail "--version --help: the first one wins"
    pf stages -- --version
    expect 2 "stages -- --version (a stage name)"
    says "$W/stderr" "no stage named '--version'" "stages -- --version"

    # help COMMAND: an unknown one is refused like `pipefuse COMMAND`
    pf help rn
    expect 2 "help rn"
    says "$W/stderr" "unknown command 'rn' (did you mean 'run'?)" "help rn"
    pf help nosuch
    expect 2 "help nosuch"
    says "$W/stderr" "unknown command 'nosuch'" "help nosuch"
    [ -s "$W/stdout" ] && fail "help nosuch printed help on stdout"

    # bench --mode: one of the list, or exit 2 with the list and a suggestion
    pf bench "$P/demo.json" --mode bogus --frames 3 --size 16x16 --json
    expect 2 "bench --mode bogus"
    says "$W/stderr" "the modes are cpu, cuda-eager-unfused" "bench --mode bogus"
    [ -s "$W/stdout" ] && fail "bench --mode bogus printed results"
    pf bench "$P/demo.json" --mode cuda-grph-fused --frames 3 --size 16x16
    expect 2 "bench --mode cuda-grph-fused"
    says "$W/stderr" "did you mean 'cuda-graph-fused'?" "bench --mode misspelt"
    pf bench "$P/demo.json" --mode cpu --frames 3 --size 16x16 --json --backend cpu
    expect 0 "bench --mode cpu"
    says "$W/stdout" '"mode": "cpu"' "bench --mode cpu"

    # '--' ends options for every command
    pf bench --mode cpu --frames 3 --size 16x16 --json -- "$P/demo.json"
    expect 0 "bench ... -- PIPELINE"
    says "$W/stdout" '"mode": "cpu"' "bench -- PIPELINE"
    pf bench "$P/demo.json" --frames 3 --size 16x16 --mode cpu --
    expect 0 "bench PIPELINE --"
    pf -- bench "$P/demo.json" --frames 3 --size 16x16 --mode cpu
    expect 2 "-- bench PIPELINE --frames (options after '--' are arguments)"
    pf check -- "$P/demo.json" --size 64x48
    expect 2 "check -- PIPELINE --size (an argument after '--')"
    pf check --size 64x48 -- "$P/demo.json"
    expect 0 "check --size 64x48 -- PIPELINE"
    pf check "$P/demo.json" --
    expect 0 "check PIPELINE --"
    pf stages gaussian --
    expect 0 "stages NAME --"
    pf info --
    expect 0 "info --"
    pf info extra
    expect 2 "info extra"
    pf plugin check --stage invert -- "$built/color.so"
    expect 0 "plugin check --stage invert -- LIB.so"
    says "$W/stdout" "result: PASS" "plugin check -- LIB.so"
    pf plugin check "$built/color.so" --dump-kernels "$W/no/such/dir"
    expect 2 "plugin check --dump-kernels MISSING"
    says "$W/stderr" "pipefuse plugin check: --dump-kernels $W/no/such/dir: no such directory" \
        "plugin check --dump-kernels MISSING"
    pf plugin
    expect 2 "plugin alone"
    says "$W/stderr" "usage: pipefuse plugin check" "plugin alone"

    # one source: each command's --help and its man page section list the same options,
    # described alike (plugin's -v included)
    pf --man
    cp "$W/stdout" "$W/pipefuse.1"
    for cmd in run check bench stages info plugin; do
        pf "$cmd" --help
        cp "$W/stdout" "$W/help-$cmd.txt"
        grep -oE '^ +(-[a-z], )?--[a-z-]+' "$W/help-$cmd.txt" | sed 's/.*--/--/' | sort -u >"$W/opts-$cmd"
        local upper=$(echo "$cmd" | tr a-z A-Z)
        sed -n "/^\.SH $upper\$/,/^\.SH /p" "$W/pipefuse.1" | grep -oE '^\\fB(\\-[a-z]\\fR, \\fB)?(\\-)+[a-z\\-]+' |
            sed 's/.*fB\\-\\-/--/; s/\\-/-/g; s/\\f$//' | sort -u >"$W/man-$cmd"
        sed -n '/^\.SH GLOBAL OPTIONS$/,/^\.SH /p' "$W/pipefuse.1" | grep -oE '^\\fB(\\-[a-z]\\fR, \\fB)?(\\-)+[a-z\\-]+' |
            sed 's/.*fB\\-\\-/--/; s/\\-/-/g; s/\\f$//' >>"$W/man-$cmd"
        sort -u -o "$W/man-$cmd" "$W/man-$cmd"
        cmp -s "$W/opts-$cmd" "$W/man-$cmd" ||
            fail "$cmd: --help and the man page list different options: $(diff "$W/opts-$cmd" "$W/man-$cmd" | tr '\n' ' ')"
    done
    says "$W/help-plugin.txt" "engine's notices" "plugin --help: -v"
    grep -q "print every check" "$W/pipefuse.1" && fail "the man page still says -v prints every check"
    says "$W/pipefuse.1" "engine's notices" "man page: plugin -v"
    # the overview's option column is aligned: every description starts in one column
    pf --help
    local cols=$(grep -E '^  (-[a-z], |    )--[a-z-]+ ' "$W/stdout" | grep -vE -- '--[a-z-]+ [A-Za-z|]+$' |
        awk '{ match($0, /^ +(-[a-z], )?--[a-z-]+( [A-Z|a-z]+)? +/); print RLENGTH }' | sort -u)
    [ "$cols" = 28 ] || fail "--help: option descriptions start at columns $(echo $cols)"
    says "$W/stdout" "      --version             the version, then exit" "--help lists --version"

    # info: the library's version and file, as --help and README say
    pf info --help
    says "$W/stdout" "library's version" "info --help"
    pf info
    expect 0 "info"
    grep -Eq "^library: +[0-9]+\.[0-9]+\.[0-9]+ \(.*libpipefuse" "$W/stdout" ||
        fail "info prints no library line: $(head -3 "$W/stdout")"
}

section_"$SECTION"
if [ "$failures" != 0 ]; then
    echo "$SECTION: $failures failure(s)" >&2
    exit 1
fi
echo "$SECTION: ok"
