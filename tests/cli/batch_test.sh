#!/bin/bash
# tests/cli/batch_test.sh: `pipefuse run` as a batch tool, one section per ctest test.
#
#   batch_test.sh SECTION PIPEFUSE HELPER SOURCE_DIR WORK_DIR PLUGIN_DIR
#
# SECTION: files (outputs never through a planted link, stale temporaries removed,
# names), faults (a stage that crashes, divides by zero, aborts, exits or hangs costs
# its file only; notices said once across restarts), unruly (a stage that overflows its
# stack, vanishes with status 0, closes descriptors, forks or changes directory: its file
# fails named, the others are done, the batch never waits for a stage's child), parallel (mixed sizes and bad files, log order, same bytes as one
# lane), resume (kill -9 mid-batch, then --skip-existing; joblog; --retry-failed), retry
# (a retried input keeps its first run's names; the documented retry form; output names
# holding the joblog's separators), temps
# (only temporaries' names removed as stale, none given to outputs), pixels (the limit
# exceeded named),
# shards (N processes, every output once), interrupt (Ctrl-C), limits (--max-memory,
# a directory without PNGs), names (long input names and output directories), gpu
# (the batch on the GPU, a kernel that traps; exit 77 without a GPU), start (the worker
# starts under a low descriptor limit, without /proc, through the dynamic loader), links
# (-r over links to a folder above, --name folders through a planted link), listing
# (Ctrl-C or SIGTERM while -r lists a tree: status 130 at once, nothing written), fresh
# (--skip-existing judges outputs by what made them; names stay with their input), killed
# (SIGKILL at random points, resumed with --retry-failed until every output is there once),
# codectime (--file-timeout ends a decode or an encode that hangs), owners (temporaries
# removed only when no process holds their lock), memory (a stage past the worker's bound
# from --max-memory fails its file).
# PLUGIN_DIR holds faulty.so (plugins/faulty.c) and unruly.so (plugins/unruly.c).
set -u
SECTION=$1 PF=$2 HELPER=$3 SRC=$4 WORK=$5 PLUG=$6
W=$WORK/batch_$SECTION
rm -rf "$W" && mkdir -p "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH JOB_COMPLETION_INDEX SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT
# under AddressSanitizer the worker's own handlers name crashing stages, not ASan's
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0:handle_sigfpe=0:handle_abort=0:allow_user_segv_handler=1"
source "$(dirname "$0")/testlib.sh"
PF_EXTRA=(--plugin-path "$PLUG")
rc=0

no_temps() {
    local t
    t=$(ls -A "$1" | grep '^\.pftmp-')
    [ -z "$t" ] || fail "$2: temporary files left in $1: $t"
}
# the PNG is whole (libpng reads it to the end)
whole_png() { "$HELPER" png "$1" >/dev/null 2>&1 || fail "$1 is not a whole PNG"; }

P=$SRC/pipelines
IMG=$SRC/samples/images

# a pipeline: brightness, then faulty_copy (mode and trigger width from --set)
faulty_pipeline() {
    cat >"$W/faulty.json" <<'EOF'
{"pipefuse": 1, "inputs": ["x"], "stages": [
  {"id": "pre", "op": "brightness", "inputs": ["x"]},
  {"id": "bad", "op": "faulty_copy", "inputs": ["pre"], "params": {"mode": 0}}],
 "outputs": {"out": "bad"}}
EOF
}

# a slow pipeline with an image and a table output: a kill or Ctrl-C finds files in flight
slow_pipeline() {
    cat >"$W/slow.json" <<EOF
{"pipefuse": 1, "inputs": ["x"], "stages": [
  {"id": "slow", "op": "faulty_slow", "inputs": ["x"], "params": {"ms": $1}},
  {"id": "hist", "op": "histogram", "inputs": ["slow"]}],
 "outputs": {"image": "slow", "histogram": "hist"}}
EOF
}

# The gate (faulty_slow waits while it exists): gate_after N DIR waits until N images
# (f*[0-9].png) are committed in DIR, then closes the gate, so the frames not yet started
# wait there and a signal or kill that follows finds files done and files in flight
# however fast or loaded the machine; gate_open lets them go on.
export PF_TEST_GATE=$W/gate
gate_after() {
    local n=$1 dir=$2 tries=0
    while [ "$(ls "$dir"/f*[0-9].png 2>/dev/null | wc -l)" -lt "$n" ]; do
        tries=$((tries + 1))
        if [ $tries -gt 6000 ]; then
            fail "no $n images in $dir after 120 s"
            break
        fi
        sleep 0.02
    done
    touch "$PF_TEST_GATE"
}
gate_open() { rm -f "$PF_TEST_GATE"; }

# N copies of the helper's PNGs and a sample photo under DIR, named f000.png...
many() {
    local dir=$1 n=$2 k=0
    mkdir -p "$dir" "$W/gen"
    "$HELPER" pngs "$W/gen" || fail "cannot make the input PNGs"
    cp "$IMG/camera.png" "$W/gen/zcamera.png"
    local srcs=("$W"/gen/*.png)
    while [ $k -lt "$n" ]; do
        cp "${srcs[$((k % ${#srcs[@]}))]}" "$dir/$(printf 'f%03d.png' $k)"
        k=$((k + 1))
    done
}

# ---- files: written safely, never through a link -----------------------------------------
section_files() {
    mkdir -p "$W/in" "$W/out"
    "$HELPER" pngs "$W/in" || fail "cannot make the input PNGs"
    echo "not yours" >"$W/victim"
    # links planted at the final names of an image and of a table
    ln -s "$W/victim" "$W/out/rgb8.png"
    ln -s "$W/victim" "$W/out/rgb8.histogram.csv"
    # links planted at names of the temporaries' form, for every pid around ours
    local host
    host=$(python3 -c 'import socket
x = 2166136261
for c in socket.gethostname().encode(): x = ((x ^ c) * 16777619) & 0xffffffff
print("%08x" % x)' 2>/dev/null)
    for p in $(seq $$ $(($$ + 50))); do
        ln -s "$W/victim" "$W/out/.pftmp-$host-$p-0000000000000000"
    done
    # stale temporaries: one of a dead process of this host, one over an hour old
    echo stale >"$W/out/.pftmp-$host-999999999-0123456789abcdef"
    echo stale >"$W/out/.pftmp-00000000-1-0123456789abcdef"
    touch -d '2 hours ago' "$W/out/.pftmp-00000000-1-0123456789abcdef"
    echo fresh >"$W/out/.pftmp-00000000-2-0123456789abcdef" # another host's, now: kept
    pf run "$P/demo.json" "$W/in" -o "$W/out" --backend cpu
    expect 0 "run into a directory with planted links"
    [ "$(cat "$W/victim")" = "not yours" ] || fail "a planted link was followed: victim is now '$(head -c 40 "$W/victim")'"
    for f in rgb8.png rgb8.histogram.csv; do
        [ -L "$W/out/$f" ] && fail "$f is still the planted link"
        [ -f "$W/out/$f" ] || fail "$f was not written"
    done
    if [ -n "$host" ]; then
        absent "$W/out/.pftmp-$host-999999999-0123456789abcdef"
    fi
    absent "$W/out/.pftmp-00000000-1-0123456789abcdef"
    exists "$W/out/.pftmp-00000000-2-0123456789abcdef"
    says "$W/stderr" "temporary file(s) left by an earlier run" "stale temporaries reported"
    for n in gray16 graya8 rgb8 rgba16 rgba8; do
        whole_png "$W/out/$n.png"
        [ "$(wc -l <"$W/out/$n.histogram.csv")" = 65 ] || fail "$n.histogram.csv is not whole"
    done

    # a sticky, world-writable directory (as /tmp): outputs land, nothing else is left
    mkdir -p "$W/sticky" && chmod 1777 "$W/sticky"
    pf run "$P/demo.json" "$W/in/rgb8.png" -o "$W/sticky" -q
    expect 0 "run into a sticky directory"
    exists "$W/sticky/rgb8.png"
    [ "$(count "$W/sticky")" = 2 ] || fail "sticky: $(ls -A "$W/sticky")"

    # outputs get the mode of any new file (umask), and the same bytes as before
    local mode
    mode=$(umask 027 && "$PF" run "$P/demo.json" "$W/in/rgb8.png" -o "$W/umask" -q 2>/dev/null &&
        stat -c %a "$W/umask/rgb8.png")
    [ "$mode" = 640 ] || fail "output mode under umask 027: $mode, expected 640"

    # the PNG options: another filter or level, the same pixels
    pf run "$P/demo.json" "$IMG/camera.png" -o "$W/z9" -q --backend cpu --zlib 9 --png-filter all
    expect 0 "--zlib 9 --png-filter all"
    pf run "$P/demo.json" "$IMG/camera.png" -o "$W/z0" -q --backend cpu --zlib 0 --png-filter none
    expect 0 "--zlib 0 --png-filter none"
    [ "$(stat -c %s "$W/z0/camera.png")" -gt "$(stat -c %s "$W/z9/camera.png")" ] ||
        fail "--zlib 0 is not larger than --zlib 9"
    # the same pixels: the statistics of both files agree
    "$PF" run "$P/analysis.json" "$W/z0/camera.png" -o "$W/a0" -q 2>/dev/null
    "$PF" run "$P/analysis.json" "$W/z9/camera.png" -o "$W/a9" -q 2>/dev/null
    exists "$W/a0/camera.stats.csv"
    cmp -s "$W/a0/camera.stats.csv" "$W/a9/camera.stats.csv" || fail "--zlib/--png-filter changed the pixels"
    pf run "$P/demo.json" "$W/in/rgb8.png" -o "$W/z0" --png-filter wavelet
    expect 2 "--png-filter wavelet"

    # inputs that are no regular file: a FIFO with no writer among a folder's PNGs (opening
    # it would wait for ever), a pipe (read once, it would lose its header to the first
    # look) and a device fail alone, named, and the others are done
    mkdir -p "$W/special"
    cp "$W/in/rgb8.png" "$W/special/a.png"
    cp "$W/in/rgb8.png" "$W/special/c.png"
    mkfifo "$W/special/b.png"
    "$PF" --plugin-path "$PLUG" run "$P/demo.json" "$W/special" /dev/null \
        <(cat "$W/in/rgb8.png") -o "$W/special_out" --backend cpu -q >"$W/stdout" 2>"$W/stderr" &
    local spid=$! waited=0
    while kill -0 $spid 2>/dev/null && [ $waited -lt 300 ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    if kill -0 $spid 2>/dev/null; then
        fail "a FIFO among the inputs: the batch hangs"
        kill -9 $spid
    fi
    wait $spid
    rc=$?
    expect 1 "a FIFO, a device and a pipe among the inputs"
    grep -F "special/b.png: FAILED" "$W/stderr" | grep -qF "not a regular file (a pipe or FIFO)" ||
        fail "the FIFO not named: $(cat "$W/stderr")"
    grep -F "/dev/null: FAILED" "$W/stderr" | grep -qF "not a regular file (a character device)" ||
        fail "the device not named: $(cat "$W/stderr")"
    [ "$(grep -c 'not a regular file' "$W/stderr")" = 3 ] || fail "the pipe not named: $(cat "$W/stderr")"
    exists "$W/special_out/a.png"
    exists "$W/special_out/c.png"
    [ "$(count "$W/special_out")" = 4 ] || fail "special inputs left: $(ls -A "$W/special_out")"
    # and as --input FILE (every worker reads it): refused at once, status 2
    timeout 30 "$PF" run "$P/watermark.json" "$W/special/a.png" -o "$W/special_wm" \
        --input logo="$W/special/b.png" >"$W/stdout" 2>"$W/stderr"
    rc=$?
    expect 2 "a FIFO as --input logo"
    says "$W/stderr" "--input logo: $W/special/b.png: not a regular file (a pipe or FIFO)" \
        "the FIFO given to --input named"
    # an output that cannot be written (here past the file size limit, as on a full disk)
    # fails its input with the reason, not libpng's bare "Write Error", and leaves nothing
    (
        trap '' XFSZ
        ulimit -f 8
        exec "$PF" run "$P/sharpen.json" "$IMG/camera.png" "$W/in/rgba8.png" -o "$W/fsize" -q
    ) >"$W/stdout" 2>"$W/stderr"
    rc=$?
    expect 1 "an output past the file size limit"
    grep -F "camera.png: FAILED" "$W/stderr" | grep -qF "camera.png: write error: File too large" ||
        fail "the PNG write error without its reason: $(cat "$W/stderr")"
    exists "$W/fsize/rgba8.png"
    [ "$(count "$W/fsize")" = 1 ] || fail "past the size limit left: $(ls -A "$W/fsize")"

    # a large PNG's image data is deflated in segments (one IDAT chunk each, on the
    # codec threads the batch has to spare): one valid zlib stream, the same pixels and
    # the same bytes whole or in bands, however many threads
    "$HELPER" image "$W/big.png" 1500 1200 3 16 || fail "cli_helper image"
    for t in 1 3; do
        pf run "$P/sharpen.json" "$W/big.png" -o "$W/seg$t" --band-rows off --threads $t -q
        expect 0 "a large PNG, --threads $t"
        whole_png "$W/seg$t/big.png"
    done
    pf run "$P/sharpen.json" "$W/big.png" -o "$W/segb" --band-rows 64 -q
    expect 0 "a large PNG in bands"
    cmp -s "$W/seg1/big.png" "$W/seg3/big.png" || fail "segmented deflate: bytes differ with the threads"
    cmp -s "$W/seg1/big.png" "$W/segb/big.png" || fail "segmented deflate: bytes differ in bands"
    local idats
    idats=$(python3 -c 'import struct, sys
d = open(sys.argv[1], "rb").read(); i = 8; n = 0
while i < len(d):
    L, = struct.unpack(">I", d[i:i + 4]); n += d[i + 4:i + 8] == b"IDAT"; i += 12 + L
print(n)' "$W/seg1/big.png" 2>/dev/null)
    [ "${idats:-0}" -gt 1 ] || fail "a large PNG in one IDAT segment: ${idats:-?}"
}

# ---- faults: a stage's crash, exit or hang costs its file only ---------------------------
section_faults() {
    faulty_pipeline
    many "$W/in" 12
    # the faulty stage misbehaves on the 17-pixel-wide image only: f004.png (rgba8), f010.png
    local m what
    for m in 1 2 3 4 5; do
        case $m in
        1) what="SIGSEGV" ;;
        2) what="SIGFPE" ;;
        3) what="SIGABRT" ;;
        4) what="exit() called" ;;
        5) what="timed out after 1 s" ;;
        esac
        pf run "$W/faulty.json" "$W/in" -o "$W/out$m" --set bad.mode=$m --set bad.width=17 \
            --file-timeout 1 --backend cpu
        expect 1 "mode $m: a batch with a $what stage"
        for f in f004 f010; do
            grep -F "$f.png: FAILED" "$W/stderr" | grep -qF "$what" ||
                fail "mode $m: $f.png not reported as '$what'"
            grep -F "$f.png: FAILED" "$W/stderr" |
                grep -qF "stage bad (op faulty_copy, plugin faulty:" ||
                fail "mode $m: $f.png's failure does not name stage, op and plugin: $(grep -F "$f.png" "$W/stderr")"
            absent "$W/out$m/$f.png"
        done
        [ "$(grep -c FAILED "$W/stderr")" = 2 ] || fail "mode $m: $(grep -c FAILED "$W/stderr") failures, expected 2"
        [ "$(ls "$W/out$m" | wc -l)" = 10 ] || fail "mode $m: $(ls "$W/out$m" | wc -l) outputs, expected 10"
        no_temps "$W/out$m" "mode $m"
        says "$W/stderr" "10 of 12 input(s) done" "mode $m summary"
        says "$W/stderr" "restarted" "mode $m: the worker restart is reported"
        for k in 000 001 002 003 005 006; do whole_png "$W/out$m/f$k.png"; done
    done
    # the backend's notice is said once per run, not once per worker: with --backend auto
    # the CPU is taken (no GPU, or faulty_copy has no CUDA code) and two crashes restart
    # the worker twice; so is --band-rows's for a pipeline that cannot band
    pf run "$W/faulty.json" "$W/in" -o "$W/notice" --set bad.mode=1 --set bad.width=17 --band-rows 64
    expect 1 "a crashing stage with --backend auto"
    says "$W/stderr" "restarted 2 time(s)" "two crashes, two restarts"
    for what in 'running on the CPU' '--band-rows 64: images run whole'; do
        [ "$(grep -c -- "$what" "$W/stderr")" = 1 ] ||
            fail "'$what' said $(grep -c -- "$what" "$W/stderr") times, expected once: $(grep -- "$what" "$W/stderr")"
    done
    # a death that names no file (_exit: no handler runs): the files held run again one at
    # a time, so the culprits fail and every other file is done
    pf run "$W/faulty.json" "$W/in" -o "$W/out7" --set bad.mode=7 --set bad.width=17 --jobs 2
    expect 1 "a stage calling _exit"
    for f in f004 f010; do
        grep -F "$f.png: FAILED" "$W/stderr" | grep -qF "died while running it alone" ||
            fail "_exit: $f.png not convicted alone: $(grep -F "$f.png" "$W/stderr")"
    done
    [ "$(grep -c FAILED "$W/stderr")" = 2 ] || fail "_exit: $(grep -c FAILED "$W/stderr") failures, expected 2"
    [ "$(ls "$W/out7" | wc -l)" = 10 ] || fail "_exit: $(ls "$W/out7" | wc -l) outputs, expected 10"
    no_temps "$W/out7" "_exit"
    # a stage error is an ordinary failure, no restart
    pf run "$W/faulty.json" "$W/in" -o "$W/out6" --set bad.mode=6 --set bad.width=17
    expect 1 "a stage returning an error"
    grep -F "f004.png: FAILED" "$W/stderr" | grep -qF "asked to fail" || fail "stage error message"
    grep -q restarted "$W/stderr" && fail "a stage error restarted the worker"
    # every file crashing: each fails alone, named, exit 1
    pf run "$W/faulty.json" "$W/in/f000.png" "$W/in/f001.png" "$W/in/f002.png" -o "$W/all" \
        --set bad.mode=1
    expect 1 "every file crashing"
    [ "$(grep -c 'FAILED: SIGSEGV in stage bad' "$W/stderr")" = 3 ] || fail "three crashes, each named"
    [ "$(count "$W/all")" = 0 ] || fail "crashes left: $(ls -A "$W/all")"
}

# ---- unruly: a stage that breaks its process's rules costs its file only --------------------
section_unruly() {
    cat >"$W/u.json" <<'EOF'
{"pipefuse": 1, "inputs": ["x"], "stages": [
  {"id": "pre", "op": "brightness", "inputs": ["x"]},
  {"id": "bad", "op": "unruly_copy", "inputs": ["pre"], "params": {"mode": 0}}],
 "outputs": {"out": "bad"}}
EOF
    many "$W/in" 20
    cd "$W" || return # relative inputs: a stage's chdir must not lose them
    # the stage misbehaves on the 17-pixel-wide images: f004, f010, f016
    local m what t0 took bad f k
    for m in 1 2 3 7 8 9 11 15; do
        case $m in
        1) what="SIGSEGV in stage bad (op unruly_copy" ;; # a stack overflow, named
        2) what="died while running it alone (exit status 0)" ;;
        3) what="died while running it alone (killed by SIGKILL" ;;
        7) what="closed or replaced descriptor 0 (stdin)" ;;
        8) what="died while running it alone" ;;
        9) what="" ;; # a child holding the worker's pipes: no failure, no wait for it
        11) what="changed the working directory" ;;
        # a thread the stage started crashes: it serves no file, so the files held run
        # again one at a time and the crash, alone, convicts its file
        15) what="died while running it alone (killed by SIGSEGV" ;;
        esac
        t0=$SECONDS
        rm -f "$W/pids$m"
        UNRULY_PIDS="$W/pids$m" pf run u.json in -o "out$m" --set bad.mode=$m --set bad.width=17 \
            --backend cpu --joblog "log$m.tsv"
        took=$((SECONDS - t0))
        # a batch that waited for mode 9's children would take their 600 s (far past any
        # machine's slowness); the bound is not a speed target
        [ $took -lt 240 ] || fail "mode $m: the batch took $took s (waited for a stage's child?)"
        bad=3
        [ -z "$what" ] && bad=0
        expect $((bad ? 1 : 0)) "mode $m"
        for f in f004 f010 f016; do
            [ -n "$what" ] || continue
            grep -F "$f.png: FAILED" "$W/stderr" | grep -qF "$what" ||
                fail "mode $m: $f.png not reported as '$what': $(grep -F "$f.png" "$W/stderr")"
            absent "out$m/$f.png"
            grep -q "^in/$f.png	failed	" "log$m.tsv" || fail "mode $m: $f.png not failed in the joblog"
        done
        [ "$(grep -c FAILED "$W/stderr")" = $bad ] ||
            fail "mode $m: $(grep -c FAILED "$W/stderr") failures, expected $bad: $(grep FAILED "$W/stderr")"
        [ "$(grep -c "	failed	" "log$m.tsv")" = $bad ] || fail "mode $m: joblog failures"
        [ "$(grep -c "	ok	" "log$m.tsv")" = $((20 - bad)) ] || fail "mode $m: joblog successes"
        [ "$(ls "out$m" | wc -l)" = $((20 - bad)) ] || fail "mode $m: $(ls "out$m" | wc -l) outputs"
        says "$W/stderr" "$((20 - bad)) of 20 input(s) done" "mode $m summary"
        no_temps "out$m" "mode $m"
        for k in 000 001 002 003 005 008; do whole_png "out$m/f$k.png"; done
        if [ $m = 9 ]; then # the stage's sleeping children end with the batch
            [ -s "$W/pids9" ] || fail "mode 9: no child wrote its pid"
            local pid left
            for pid in $(cat "$W/pids9" 2>/dev/null); do
                left=1
                for _ in $(seq 600); do # a zombie not yet reaped by its new parent is gone
                    if ! kill -0 "$pid" 2>/dev/null ||
                        [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ]; then
                        left=0
                        break
                    fi
                    sleep 0.1
                done
                [ $left = 0 ] || fail "mode 9: the stage's child $pid outlived the batch"
            done
        fi
    done
    # a retry of the failed files with a well-behaved stage converges
    pf run u.json -o out1 --retry-failed log1.tsv --joblog log1.tsv --backend cpu
    expect 0 "retrying the stack overflow's files"
    [ "$(ls out1 | wc -l)" = 20 ] || fail "retry: $(ls out1 | wc -l) outputs"
    # a stage flooding stdout with -o -: the image stays whole
    pf run u.json in/f004.png -o - --set bad.mode=4 --backend cpu
    expect 0 "a stage writing to stdout with -o -"
    cp "$W/stdout" img.png && whole_png img.png
    cd - >/dev/null || return
}

# ---- parallel: mixed sizes and bad files, in input order, as one lane would --------------
section_parallel() {
    many "$W/in" 30
    cp "$IMG/chelsea.png" "$IMG/coffee.png" "$W/in/"
    "$HELPER" truncate "$W/in/f002.png" "$W/in/f007.png"
    echo "hello" >"$W/in/f013.png"
    : >"$W/in/f021.png"
    pf run "$P/demo.json" "$W/in" -o "$W/par" --backend cpu --jobs 2 -v
    expect 1 "a parallel batch with bad files"
    for bad in f007 f013 f021; do
        grep -F "$bad.png" "$W/stderr" | grep -q FAILED || fail "$bad.png not reported as failed"
        absent "$W/par/$bad.png"
        absent "$W/par/$bad.histogram.csv"
    done
    says "$W/stderr" "29 of 32 input(s) done" "summary"
    # the log is in input order
    grep -o '^\[[0-9]*/32\]' "$W/stderr" | tr -d '[' | cut -d/ -f1 >"$W/order"
    seq 1 32 | cmp -s - "$W/order" || fail "log not in input order: $(tr '\n' ' ' <"$W/order")"
    # plans: at least one per shape, at most one per shape and lane (8 shapes, 2 lanes)
    local plans
    plans=$(sed -n 's/.*: \([0-9]*\) plan(s) built/\1/p' "$W/stderr")
    [ -n "$plans" ] && [ "$plans" -ge 8 ] && [ "$plans" -le 16 ] ||
        fail "plans built: '$plans', expected 8 to 16"
    says "$W/stderr" "per file, on average: decode" "where the time goes"
    # the same bytes as one lane
    pf run "$P/demo.json" "$W/in" -o "$W/one" --backend cpu --jobs 1 -q
    expect 1 "the same batch on one lane"
    for f in "$W"/one/*; do
        cmp -s "$f" "$W/par/$(basename "$f")" || fail "$(basename "$f") differs between 1 and 2 lanes"
    done
    [ "$(count "$W/one")" = "$(count "$W/par")" ] || fail "1 lane: $(count "$W/one") files, 2 lanes: $(count "$W/par")"
    no_temps "$W/par" "parallel"
    # a progress line when asked for, off a terminal too
    pf run "$P/demo.json" "$W/in/f000.png" "$W/in/f001.png" -o "$W/prog" --progress -q
    expect 0 "--progress"
    says "$W/stderr" "files/s" "the progress line"
    says "$W/stderr" "ETA" "the progress line's ETA"
    pf run "$P/demo.json" "$W/in/f000.png" -o "$W/prog" -q
    grep -q "files/s" "$W/stderr" && fail "a progress line off a terminal without --progress"
    # tables only (no image output): each input's tables together
    pf run "$P/analysis.json" "$W/in" -o "$W/tables" --jobs 2 -q
    expect 1 "analysis in parallel"
    [ "$(ls "$W/tables" | wc -l)" = $((29 * 3)) ] || fail "analysis: $(ls "$W/tables" | wc -l) tables, expected 87"
}

# ---- resume: kill -9 mid-batch, then again with --skip-existing; joblog, retry -----------
section_resume() {
    slow_pipeline 40
    many "$W/in" 40
    "$HELPER" truncate "$W/in/f002.png" "$W/in/f005.png"
    "$PF" --plugin-path "$PLUG" run "$W/slow.json" "$W/in" -o "$W/out" --jobs 2 \
        --joblog "$W/log.tsv" -q 2>"$W/stderr1" &
    local pid=$!
    gate_after 2 "$W/out"
    local worker tries=0
    worker=$(pgrep -P $pid | head -1)
    kill -9 $pid
    wait $pid 2>/dev/null
    # the worker dies with its supervisor (its parent-death signal): wait until it is gone
    while [ -n "$worker" ] && kill -0 "$worker" 2>/dev/null && [ $tries -lt 1000 ]; do
        sleep 0.02
        tries=$((tries + 1))
    done
    gate_open
    # whatever is there is whole: each image complete, and its table beside it
    local done_images=0
    for f in "$W"/out/f*[0-9].png; do
        [ -e "$f" ] || continue
        done_images=$((done_images + 1))
        whole_png "$f"
        local t=${f%.png}.histogram.csv
        [ -f "$t" ] && tail -1 "$t" | grep -q '^255,' || fail "$(basename "$f") committed without its whole table"
    done
    [ "$done_images" -gt 0 ] && [ "$done_images" -lt 39 ] ||
        fail "the kill came at a bad time: $done_images images done; the test needs some, not all"
    # the joblog has a line per input logged, nothing torn
    [ "$(head -1 "$W/log.tsv")" = "$(printf 'input\tstatus\tseconds\toutputs\tmessage\tname')" ] ||
        fail "joblog header: $(head -1 "$W/log.tsv")"
    awk -F'\t' 'NR > 1 && NF != 6 { exit 1 }' "$W/log.tsv" || fail "a joblog line without 6 fields"

    pf run "$W/slow.json" "$W/in" -o "$W/out" --jobs 2 --skip-existing --joblog "$W/log.tsv"
    expect 1 "the resumed batch (one bad file)"
    no_temps "$W/out" "after the resume"
    says "$W/stderr" "39 of 40 input(s) done" "resumed summary"
    says "$W/stderr" "skipped (outputs exist)" "skips reported"
    [ "$(ls "$W/out" | wc -l)" = 78 ] || fail "after the resume: $(ls "$W/out" | wc -l) outputs, expected 78"
    for f in "$W"/out/f*[0-9].png; do whole_png "$f"; done
    # none done twice: no input has two "ok" lines in the joblog
    local twice
    twice=$(awk -F'\t' '$2 == "ok" { n[$1]++ } END { for (k in n) if (n[k] > 1) print k }' "$W/log.tsv")
    [ -z "$twice" ] || fail "done twice: $twice"
    grep -qP "^$W/in/f005.png\tfailed\t[0-9.]+\t\t.*(PNG|png|truncat|read)" "$W/log.tsv" ||
        fail "joblog line of the failed input: $(grep f005 "$W/log.tsv")"
    grep -qP "^$W/in/f000.png\tok\t[0-9.]+\tf000.png, f000.histogram.csv\t\tf000$" "$W/log.tsv" ||
        grep -qP "^$W/in/f000.png\tskipped\t" "$W/log.tsv" || fail "joblog line of f000: $(grep f000 "$W/log.tsv")"

    # an output older than its input is not skipped
    touch -d '1 hour ago' "$W/out/f001.png"
    pf run "$W/slow.json" "$W/in/f001.png" "$W/in/f003.png" -o "$W/out" --skip-existing
    expect 0 "--skip-existing with one stale output"
    says "$W/stderr" "1 skipped" "the fresh one skipped, the stale one redone"
    # what else the outputs are made from: an --input file's content (its time alone
    # changes nothing); an input that is gone or no regular file is never skipped (it
    # fails, named)
    mkdir -p "$W/wm" "$W/wmout"
    cp "$IMG/camera.png" "$W/wm/p.png"
    cp "$W/gen/rgba8.png" "$W/logo.png"
    pf run "$P/watermark.json" "$W/wm/p.png" -o "$W/wmout" --input logo="$W/logo.png" -q
    touch "$W/logo.png"
    pf run "$P/watermark.json" "$W/wm/p.png" -o "$W/wmout" --input logo="$W/logo.png" --skip-existing
    expect 0 "--skip-existing with --input"
    says "$W/stderr" "1 skipped" "outputs of the same --input content"
    cp "$W/gen/rgba16.png" "$W/logo.png"
    pf run "$P/watermark.json" "$W/wm/p.png" -o "$W/wmout" --input logo="$W/logo.png" --skip-existing
    expect 0 "--skip-existing with another --input file"
    grep -q "skipped (outputs" "$W/stderr" && fail "outputs of another --input file skipped: $(cat "$W/stderr")"
    says "$W/stderr" "1 input(s) run again: their outputs were made with another" "the other --input said"
    cp "$W/wmout/p.png" "$W/wmout/gone.png"
    mkfifo "$W/wm/fifo.png"
    cp "$W/wmout/p.png" "$W/wmout/fifo.png"
    pf run "$P/watermark.json" "$W/wm/gone.png" "$W/wm/fifo.png" -o "$W/wmout" --input logo="$W/logo.png" --skip-existing
    expect 1 "--skip-existing with an input that is gone and a FIFO"
    says "$W/stderr" "gone.png: FAILED: cannot open" "a gone input fails, not skipped"
    says "$W/stderr" "fifo.png: FAILED: not a regular file" "a FIFO input fails, not skipped"

    # --retry-failed: only the failed input runs again (now repaired)
    cp "$W/in/f002.png" "$W/in/f005.png"
    pf run "$W/slow.json" -o "$W/out" --retry-failed "$W/log.tsv" --joblog "$W/log2.tsv"
    expect 0 "--retry-failed"
    says "$W/stderr" "1 of 1 input(s) done" "one input retried"
    exists "$W/out/f005.png"
    [ "$(tail -n +2 "$W/log2.tsv" | grep -v "$(printf '\tpending\t')" | cut -f1,2)" = "$(printf '%s\tok' "$W/in/f005.png")" ] ||
        fail "retry joblog: $(cat "$W/log2.tsv")"
}

# an identity pipeline: the output is the input's pixels
ident_pipeline() {
    echo '{"pipefuse": 1, "inputs": ["photo"], "stages": [{"id": "b", "op": "brightness", "params": {"amount": 0}}], "outputs": {"out": "b"}}' >"$W/ident.json"
}

# ---- retry: --retry-failed names a retried input as its first run did, never over -----------
# another input's output; the documented retry form runs only the failed inputs, once
section_retry() {
    ident_pipeline
    mkdir -p "$W/gen"
    "$HELPER" pngs "$W/gen" || fail "cannot make the input PNGs"
    # an empty joblog (its run killed before its header): without inputs nothing is known,
    # said, status 2; with inputs, each never run is run
    : >"$W/empty.tsv"
    pf run "$W/ident.json" -o "$W/eout" --retry-failed "$W/empty.tsv"
    expect 2 "--retry-failed of an empty joblog, no inputs"
    says "$W/stderr" "the joblog is empty" "the empty joblog said"
    pf run "$W/ident.json" "$W/gen/rgb8.png" -o "$W/eout" --retry-failed "$W/empty.tsv" -q
    expect 0 "--retry-failed of an empty joblog with an input"
    [ -s "$W/eout/rgb8.png" ] || fail "the input beside an empty joblog was not run"
    # -r: rt/a/x.png fails (empty), rt/x.png is done
    mkdir -p "$W/rt/a"
    cp "$W/gen/rgb8.png" "$W/rt/x.png"
    : >"$W/rt/a/x.png"
    pf run "$W/ident.json" -r "$W/rt" -o "$W/rtout" --joblog "$W/rt.tsv" -q
    expect 1 "-r with a broken input"
    cp "$W/rtout/x.png" "$W/x.before"
    cp "$W/gen/gray16.png" "$W/rt/a/x.png"
    cp "$W/rt.tsv" "$W/rt-old.tsv"
    pf run "$W/ident.json" -r --retry-failed "$W/rt.tsv" -o "$W/rtout" --joblog "$W/rt.tsv"
    expect 0 "retry of a -r run"
    says "$W/stderr" "1 of 1 input(s) done" "only the failed input retried"
    cmp -s "$W/x.before" "$W/rtout/x.png" || fail "the retry replaced rt/x.png's output"
    pf run "$W/ident.json" "$W/rt/a/x.png" -o "$W/rtref" -q
    cmp -s "$W/rtref/x.png" "$W/rtout/a/x.png" || fail "the retried input is not in a/x.png: $(cd "$W/rtout" && find . -type f)"
    [ "$(tail -1 "$W/rt.tsv" | cut -f2,6)" = "$(printf 'ok\ta/x')" ] || fail "retry joblog: $(tail -1 "$W/rt.tsv")"
    # a joblog without the name column (older runs): the output of another input stays
    cut -f1-5 "$W/rt-old.tsv" >"$W/rt5.tsv"
    cp "$W/x.before" "$W/rtout/x.png"
    pf run "$W/ident.json" --retry-failed "$W/rt5.tsv" -o "$W/rtout"
    expect 1 "retry from a joblog without names"
    says "$W/stderr" "was written for $W/rt/x.png" "the other input's output named"
    cmp -s "$W/x.before" "$W/rtout/x.png" || fail "a 5-column retry replaced rt/x.png's output"
    # same stems from two folders: the second is x-2, and stays x-2 when retried
    mkdir -p "$W/d1" "$W/d2"
    cp "$W/gen/rgb8.png" "$W/d1/x.png"
    : >"$W/d2/x.png"
    pf run "$W/ident.json" "$W/d1" "$W/d2" -o "$W/dout" --joblog "$W/d.tsv" -q
    expect 1 "two folders, one broken"
    cp "$W/dout/x.png" "$W/d.before"
    cp "$W/gen/gray16.png" "$W/d2/x.png"
    pf run "$W/ident.json" --retry-failed "$W/d.tsv" -o "$W/dout" --joblog "$W/d.tsv" -q
    expect 0 "retry of x-2"
    cmp -s "$W/d.before" "$W/dout/x.png" || fail "the retry of d2/x.png replaced d1/x.png's output"
    cmp -s "$W/rtref/x.png" "$W/dout/x-2.png" || fail "d2/x.png is not x-2.png after the retry"

    # the documented form (docs/batch.md): the directory again, with --retry-failed
    mkdir -p "$W/rt2"
    cp "$W/gen/rgb8.png" "$W/rt2/p.png"
    : >"$W/rt2/q.png"
    pf run "$W/ident.json" "$W/rt2" -o "$W/rt2out" --joblog "$W/rt2.tsv" -q
    expect 1 "a folder with a broken input"
    cp "$W/gen/rgb8.png" "$W/rt2/q.png"
    pf run "$W/ident.json" "$W/rt2" --retry-failed "$W/rt2.tsv" -o "$W/rt2out" --joblog "$W/rt2.tsv"
    expect 0 "the documented retry form"
    says "$W/stderr" "1 of 1 input(s) done" "only q.png runs again"
    grep -q "already written" "$W/stderr" && fail "the retried file ran twice"
    [ "$(tail -1 "$W/rt2.tsv" | cut -f1,2)" = "$(printf '%s\tok' "$W/rt2/q.png")" ] ||
        fail "the joblog's last line of q.png: $(tail -1 "$W/rt2.tsv")"
    pf run "$W/ident.json" "$W/rt2" --retry-failed "$W/rt2.tsv" -o "$W/rt2out" --joblog "$W/rt2.tsv"
    expect 0 "the retry loop ends"
    says "$W/stderr" "0 of 0 input(s) done" "nothing left to retry"

    # one escaping in every joblog line: a newline in a name is \n on ok and skipped lines
    pf run "$W/ident.json" "$W/gen/rgb8.png" -o "$W/nl" --name $'{stem}\nz.png' --joblog "$W/nl.tsv" -q
    expect 0 "a newline in an output name"
    pf run "$W/ident.json" "$W/gen/rgb8.png" -o "$W/nl" --name $'{stem}\nz.png' --joblog "$W/nl.tsv" -q --skip-existing
    [ "$(grep -cF 'rgb8\nz.png' "$W/nl.tsv")" = 2 ] || fail "joblog escaping: $(cat -A "$W/nl.tsv")"
    awk -F'\t' 'NR > 1 && NF != 6 { exit 1 }' "$W/nl.tsv" || fail "a joblog line without 6 fields: $(cat -A "$W/nl.tsv")"

    # output names holding the outputs column's separator ", " and a tab read back whole:
    # "a, b<TAB>c.png" wrote "a, b<TAB>c.png" and "a, b<TAB>c.hist.csv", which is not a
    # claim on "b<TAB>c.png", the failed input's output
    echo '{"pipefuse": 1, "inputs": ["photo"], "stages": [{"id": "b", "op": "brightness", "params": {"amount": 0}}, {"id": "hist", "op": "histogram", "inputs": ["b"]}], "outputs": {"out": "b", "hist": "hist"}}' >"$W/two.json"
    local tab=$'\t'
    mkdir -p "$W/sep"
    cp "$W/gen/rgb8.png" "$W/sep/a, b${tab}c.png"
    cp "$W/gen/rgb8.png" "$W/sep/x.png"
    : >"$W/sep/b${tab}c.png"
    pf run "$W/two.json" "$W/sep" -o "$W/sepout" --joblog "$W/sep.tsv" -q
    expect 1 "names with ', ' and a tab, one input broken"
    cp "$W/sepout/a, b${tab}c.png" "$W/sep.before"
    cp "$W/gen/gray16.png" "$W/sep/b${tab}c.png"
    pf run "$W/two.json" "$W/sep" --retry-failed "$W/sep.tsv" -o "$W/sepout" --joblog "$W/sep.tsv"
    expect 0 "the retry of b<TAB>c.png"
    says "$W/stderr" "1 of 1 input(s) done" "only b<TAB>c.png runs again"
    cmp -s "$W/sep.before" "$W/sepout/a, b${tab}c.png" || fail "the retry replaced a, b<TAB>c.png's output"
    pf run "$W/two.json" "$W/sep/b${tab}c.png" -o "$W/sepref" -q
    for f in "b${tab}c.png" "b${tab}c.hist.csv"; do
        cmp -s "$W/sepref/$f" "$W/sepout/$f" || fail "the retried input's output $f: $(ls "$W/sepout" | cat -A)"
    done
    [ "$(ls "$W/sepout" | wc -l)" = 6 ] || fail "outputs after the retry: $(ls -A "$W/sepout" | cat -A)"
    pf run "$W/two.json" "$W/sep" --retry-failed "$W/sep.tsv" -o "$W/sepout" --joblog "$W/sep.tsv"
    expect 0 "the retry loop ends"
    says "$W/stderr" "0 of 0 input(s) done" "nothing left to retry"
    # a joblog of the old form (no comma escaped) is read as before
    printf 'input\tstatus\tseconds\toutputs\tmessage\tname\n%s\tok\t0.1\tx.png, x.hist.csv\t\tx\n%s\tfailed\t0.1\t\tbroken\tz\n' \
        "$W/sep/x.png" "$W/sep/z.png" >"$W/old.tsv"
    cp "$W/gen/rgb8.png" "$W/sep/z.png"
    pf run "$W/two.json" --retry-failed "$W/old.tsv" -o "$W/sepout" -q
    expect 0 "a joblog without escaped commas"
    exists "$W/sepout/z.hist.csv"
    # a joblog that cannot be written: at the start (nothing runs, status 2), or half way
    # (said once, the batch goes on, status 1: a resume from it would be wrong)
    ident_pipeline
    pf run "$W/ident.json" "$W/gen/rgba8.png" -o "$W/jlfull" --joblog /dev/full
    expect 2 "--joblog /dev/full"
    says "$W/stderr" "--joblog /dev/full: cannot write: No space left on device" "/dev/full named"
    [ "$(count "$W/jlfull")" = 0 ] || fail "--joblog /dev/full ran: $(ls -A "$W/jlfull")"
    head -c 9000 /dev/zero | tr '\0' x >"$W/jlbig.tsv"
    (
        trap '' XFSZ
        ulimit -f 8 # the joblog is past 8 KiB, the small outputs are not
        exec "$PF" run "$W/ident.json" "$W/gen/rgba8.png" "$W/gen/gray16.png" -o "$W/jlbig" \
            --joblog "$W/jlbig.tsv" -q
    ) >"$W/stdout" 2>"$W/stderr"
    rc=$?
    expect 1 "a joblog over the file size limit"
    [ "$(grep -c -- "--joblog $W/jlbig.tsv: cannot write: File too large" "$W/stderr")" = 1 ] ||
        fail "the joblog's write error not said once: $(cat "$W/stderr")"
    exists "$W/jlbig/rgba8.png"
    exists "$W/jlbig/gray16.png"
    # a joblog that reaches the file size limit in the middle of a line: the line is taken
    # back whole (no piece of it for the next line to be glued to), and a retry from that
    # joblog works; pipefuse ignores SIGXFSZ itself (no trap here)
    mkdir -p "$W/cut"
    cp "$W/gen/rgb8.png" "$W/cut/a.png"
    : >"$W/cut/b.png"
    pf run "$W/ident.json" "$W/cut/b.png" "$W/cut/a.png" -o "$W/cut0" --joblog "$W/cut0.tsv" -q
    expect 1 "a batch with a broken input"
    local l1 room pad
    local pend
    pend=$(sed -n 2,3p "$W/cut0.tsv" | wc -c)    # the two pending lines written first
    l1=$(sed -n 4p "$W/cut0.tsv" | wc -c)        # b's line
    room=$((16384 - pend - l1 - 10))              # a's line gets 10 bytes: inside its path
    pad=$((room - $(head -1 "$W/cut0.tsv" | wc -c) - 21))
    { head -1 "$W/cut0.tsv"; printf 'pad\tskipped\t0.000\t\t\t%s\n' "$(head -c $pad /dev/zero | tr '\0' p)"; } >"$W/cut.tsv"
    [ "$(stat -c %s "$W/cut.tsv")" = $room ] || fail "the padded joblog has $(stat -c %s "$W/cut.tsv") bytes, not $room"
    (
        ulimit -f 16 # KiB: the joblog reaches it, the outputs (9 KiB) do not
        exec "$PF" --plugin-path "$PLUG" run "$W/ident.json" "$W/cut/b.png" "$W/cut/a.png" -o "$W/cut1" \
            --joblog "$W/cut.tsv" -q
    ) >"$W/stdout" 2>"$W/stderr"
    rc=$?
    expect 1 "a joblog cut by the file size limit"
    says "$W/stderr" "--joblog $W/cut.tsv: cannot write: File too large" "the cut joblog said"
    says "$W/stderr" "the joblog $W/cut.tsv is incomplete" "the summary says the joblog is incomplete"
    [ "$(tail -c 1 "$W/cut.tsv" | od -An -c | tr -d ' ')" = '\n' ] ||
        fail "a cut line left in the joblog: $(tail -c 40 "$W/cut.tsv" | cat -A)"
    exists "$W/cut1/a.png"
    cp "$W/gen/rgb8.png" "$W/cut/b.png"
    pf run "$W/ident.json" --retry-failed "$W/cut.tsv" -o "$W/cut1" --joblog "$W/cut.tsv"
    expect 0 "a retry from the joblog cut by the size limit"
    # b failed; a's line was taken back, so its last line says pending: both run again
    says "$W/stderr" "2 of 2 input(s) done" "the failed and the unfinished input retried"
    exists "$W/cut1/b.png"
    [ "$(tail -1 "$W/cut.tsv" | cut -f1,2)" = "$(printf '%s\tok' "$W/cut/b.png")" ] ||
        fail "the retry's joblog line: $(tail -1 "$W/cut.tsv" | cat -A)"
    # a joblog whose last line was cut (an older pipefuse, a kill, a copy cut short): the
    # retry skips that line with a warning naming it; appending to it removes the piece
    { cat "$W/cut0.tsv"; printf '%s\tfai' "$W/cut/a.png"; } >"$W/cut2.tsv"
    pf run "$W/ident.json" --retry-failed "$W/cut2.tsv" -o "$W/cut2" --joblog "$W/cut2.tsv"
    expect 0 "a retry from a joblog whose last line is cut"
    local cl=$(($(wc -l <"$W/cut0.tsv") + 1))
    says "$W/stderr" "--retry-failed $W/cut2.tsv:$cl: the last line is cut short" "the cut line named"
    says "$W/stderr" "--joblog $W/cut2.tsv:$cl: the last line was cut short" "the piece removed, said"
    says "$W/stderr" "1 of 1 input(s) done" "the failed input of a joblog with a cut line retried"
    [ "$(wc -l <"$W/cut2.tsv")" = $((cl + 1)) ] && awk -F'\t' 'NR > 1 && NF != 6 { exit 1 }' "$W/cut2.tsv" ||
        fail "the joblog after appending to a cut line: $(cat -A "$W/cut2.tsv")"
    { cat "$W/cut0.tsv"; printf '%s/cut/a.p' "$W"; } >"$W/cut3.tsv" # cut inside the path
    pf run "$W/ident.json" --retry-failed "$W/cut3.tsv" -o "$W/cut3" -q
    expect 0 "a retry from a joblog cut inside its last line's path"
    exists "$W/cut3/b.png"
    # a joblog that is a FIFO is opened for writing only: opened for reading too, pipefuse
    # was a reader of its own, so a reader that quit went unsaid (the lines vanished into
    # the pipe and the run ended 0). The reader here quits at once: before the header
    # (status 2, nothing run) or after it (status 1), never SIGPIPE
    mkfifo "$W/jl.fifo"
    : <"$W/jl.fifo" &
    local reader=$!
    pf run "$W/ident.json" "$W/gen/rgba8.png" "$W/gen/gray16.png" -o "$W/jlfifo" \
        --joblog "$W/jl.fifo" -q
    wait $reader
    [ "$rc" = 1 ] || [ "$rc" = 2 ] || fail "a joblog FIFO whose reader quit: exit $rc, expected 1 or 2"
    says "$W/stderr" "--joblog $W/jl.fifo: cannot write: Broken pipe" "the gone reader said"
    cat "$W/jl.fifo" >"$W/jlfifo.tsv" &
    reader=$!
    pf run "$W/ident.json" "$W/gen/rgba8.png" -o "$W/jlfifo2" --joblog "$W/jl.fifo" -q
    wait $reader
    expect 0 "a joblog FIFO read to its end"
    [ "$(cut -f1,2 "$W/jlfifo.tsv" | tail -1)" = "$(printf '%s\tok' "$W/gen/rgba8.png")" ] ||
        fail "the joblog read from the FIFO: $(cat -A "$W/jlfifo.tsv")"
    # a joblog that may be written but not read (mode 222) is appended to as before; its
    # cut last line cannot be looked for (it was refused: 'Bad file descriptor')
    local as_user=()
    if [ "$(id -u)" = 0 ]; then # root reads any file: the run as nobody
        command -v setpriv >/dev/null && as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    fi
    if [ "$(id -u)" != 0 ] || [ ${#as_user[@]} != 0 ]; then
        local wo=$WORK/batch_retry_wo # not below $W, which nobody may not enter
        rm -rf "$wo" && mkdir -p "$wo" && cp "$W/ident.json" "$W/gen/rgba8.png" "$wo/" &&
            printf 'input\tstatus\tseconds\toutputs\tmessage\tname\n' >"$wo/log.tsv"
        chmod 222 "$wo/log.tsv"
        [ ${#as_user[@]} = 0 ] || chown -R nobody "$wo"
        ${as_user[@]+"${as_user[@]}"} "$PF" run "$wo/ident.json" "$wo/rgba8.png" -o "$wo/out" \
            --joblog "$wo/log.tsv" -q >"$W/stdout" 2>"$W/stderr"
        rc=$?
        expect 0 "a joblog that may be written, not read"
        chmod 644 "$wo/log.tsv"
        [ "$(wc -l <"$wo/log.tsv")" = 3 ] || fail "the write-only joblog: $(cat -A "$wo/log.tsv")"
        rm -rf "$wo"
    fi
}

# ---- temps: only names of the temporaries' form are removed as stale; no output is one ------
section_temps() {
    ident_pipeline
    mkdir -p "$W/gen" "$W/out"
    "$HELPER" pngs "$W/gen" || fail "cannot make the input PNGs"
    echo "mine" >"$W/out/.pftmp-notes.txt"
    echo "mine" >"$W/out/.pftmp-deadbeef-1-0123456789abcdefX"
    echo "old" >"$W/out/.pftmp-deadbeef-1-0123456789abcdef"
    touch -d '2 hours ago' "$W/out"/.pftmp-*
    pf run "$W/ident.json" "$W/gen/rgb8.png" -o "$W/out" -q
    expect 0 "a run beside old files"
    exists "$W/out/.pftmp-notes.txt"
    exists "$W/out/.pftmp-deadbeef-1-0123456789abcdefX"
    absent "$W/out/.pftmp-deadbeef-1-0123456789abcdef"
    # output names that could be taken for temporaries are refused: templates and rendered
    pf run "$W/ident.json" "$W/gen/rgb8.png" -o "$W/t2" --name '.pftmp-{stem}.png'
    expect 2 "a template of temporaries' names"
    says "$W/stderr" ".pftmp-" "the refusal says why"
    pf run "$W/ident.json" "$W/gen/rgb8.png" -o "$W/t2" --name 'sub/.pftmp-{stem}.png'
    expect 2 "a template of temporaries' names in a subfolder"
    cp "$W/gen/rgb8.png" "$W/.pftmp-x.png"
    pf run "$W/ident.json" "$W/.pftmp-x.png" -o "$W/t3"
    expect 1 "an input whose output would look like a temporary"
    says "$W/stderr" "temporary files" "the rendered name refused"
    [ "$(count "$W/t3")" = 0 ] || fail "written: $(ls -A "$W/t3")"
}

# ---- pixels: the limit really exceeded is named ------------------------------------------
section_pixels() {
    ident_pipeline
    mkdir -p "$W/gen"
    "$HELPER" pngs "$W/gen" || fail "cannot make the input PNGs"
    pf run "$W/ident.json" "$W/gen/rgb8.png" -o "$W/out" --max-pixels 10
    expect 1 "over --max-pixels"
    says "$W/stderr" "--max-pixels" "--max-pixels named"
    pf run "$W/ident.json" "$W/gen/rgb8.png" -o "$W/out" --max-pixels 10 --max-memory 1K
    expect 1 "over --max-pixels and --max-memory"
    says "$W/stderr" "--max-pixels" "--max-pixels named first"
    grep -q -- "--max-memory" "$W/stderr" && fail "over --max-pixels reported as over --max-memory"
    pf run "$W/ident.json" "$W/gen/rgb8.png" -o "$W/out" --max-memory 1K
    expect 1 "over --max-memory"
    says "$W/stderr" "over --max-memory" "--max-memory named"
}

# ---- shards: N processes, every output exactly once ---------------------------------------
section_shards() {
    many "$W/in" 25
    local n=3 i
    for i in 0 1 2; do
        "$PF" run "$P/demo.json" "$W/in" -o "$W/out" --shard $i/$n --joblog "$W/log$i.tsv" -q \
            --backend cpu 2>"$W/err$i" &
    done
    wait
    cat "$W"/log[0-2].tsv | grep -v '^input' | grep -v "$(printf '\tpending\t')" | cut -f1 | sort >"$W/all"
    ls "$W"/in/*.png | sort | cmp -s - "$W/all" || fail "shards: inputs not each done once: $(uniq -d "$W/all")"
    cat "$W"/log[0-2].tsv | grep -v '^input' | grep -v "$(printf '\tpending\t')" | cut -f2 | sort -u | tr '\n' ' ' | grep -qx 'ok ' ||
        fail "shards: not every input ok"
    [ "$(ls "$W/out" | wc -l)" = 50 ] || fail "shards: $(ls "$W/out" | wc -l) outputs, expected 50"
    no_temps "$W/out" "shards"
    # auto: a Kubernetes Indexed Job (completions given) and a Slurm array take the same shares
    JOB_COMPLETION_INDEX=1 "$PF" run "$P/demo.json" "$W/in" -o "$W/k8s" --shard auto/3 \
        --joblog "$W/k8s.tsv" -q --backend cpu 2>"$W/stderr"
    cmp -s <(cut -f1 "$W/k8s.tsv") <(cut -f1 "$W/log1.tsv") || fail "--shard auto/3 with JOB_COMPLETION_INDEX=1 differs from 1/3"
    SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=3 \
        "$PF" run "$P/demo.json" "$W/in" -o "$W/slurm" --shard auto --joblog "$W/slurm.tsv" -q \
        --backend cpu 2>"$W/stderr"
    cmp -s <(cut -f1 "$W/slurm.tsv") <(cut -f1 "$W/log2.tsv") || fail "--shard auto with Slurm task 3 of 1..3 differs from 2/3"
    pf run "$P/demo.json" "$W/in" -o "$W/x" --shard auto
    expect 2 "--shard auto outside a job"
    says "$W/stderr" "JOB_COMPLETION_INDEX" "the variables named"
    pf run "$P/demo.json" "$W/in" -o "$W/x" --shard 3/3
    expect 2 "--shard 3/3"
}

# ---- interrupt: Ctrl-C stops cleanly ------------------------------------------------------
# stop_group SIG DIR: a slow batch into $W/DIR, its process group sent SIG while files
# are in flight: status 130, the summary says what was not run, no file failed and no
# restart is claimed, the files in flight finished and committed, no temporaries, and
# as many images as ok joblog lines.
stop_group() {
    local sig=$1 dir=$2 pid n_img n_log
    setsid "$PF" --plugin-path "$PLUG" run "$W/slow.json" "$W/in" -o "$W/$dir" --jobs 2 \
        --joblog "$W/$dir.tsv" 2>"$W/stderr" &
    pid=$!
    gate_after 1 "$W/$dir"
    # twice: the run, then its group, as timeout(1) signals (one request, not two)
    [ "${3:-}" = twice ] && kill -"$sig" $pid
    kill -"$sig" -- -$pid
    gate_open
    wait $pid
    rc=$?
    expect 130 "SIG$sig to the process group"
    says "$W/stderr" "not run (interrupted)" "SIG$sig: the summary says what was not run"
    grep -q restarted "$W/stderr" && fail "SIG$sig: a restart claimed: $(grep restarted "$W/stderr")"
    grep -q FAILED "$W/stderr" && fail "SIG$sig: files failed: $(grep FAILED "$W/stderr")"
    grep -q abandoned "$W/stderr" && fail "SIG$sig ${3:-}: files abandoned: $(cat "$W/stderr")"
    sed -n '/interrupted: finishing/,$p' "$W/stderr" | grep -q -- ' -> ' ||
        fail "SIG$sig: the files in flight did not finish: $(cat "$W/stderr")"
    no_temps "$W/$dir" "after SIG$sig"
    n_img=$(ls "$W/$dir"/f*[0-9].png 2>/dev/null | wc -l)
    n_log=$(grep -c $'\tok\t' "$W/$dir.tsv")
    [ "$n_img" -gt 0 ] && [ "$n_img" = "$n_log" ] || fail "SIG$sig: $n_img images, $n_log ok lines"
}

section_interrupt() {
    slow_pipeline 150
    many "$W/in" 30
    # a background job ignores SIGINT unless the shell lets it through: run it in its own
    # session-less subshell with SIGINT restored
    (
        trap - INT
        exec "$PF" --plugin-path "$PLUG" run "$W/slow.json" "$W/in" -o "$W/out" --jobs 2 \
            --joblog "$W/log.tsv"
    ) 2>"$W/stderr" &
    local pid=$!
    gate_after 1 "$W/out"
    kill -INT $pid
    gate_open
    wait $pid
    rc=$?
    expect 130 "interrupted batch"
    says "$W/stderr" "interrupted" "the interrupt reported"
    says "$W/stderr" "not run (interrupted)" "the summary says what was not run"
    no_temps "$W/out" "after Ctrl-C"
    local n_img n_tab n_log
    n_img=$(ls "$W"/out/f*[0-9].png 2>/dev/null | wc -l)
    n_tab=$(ls "$W"/out/*.histogram.csv 2>/dev/null | wc -l)
    n_log=$(grep -c $'\tok\t' "$W/log.tsv")
    [ "$n_img" -gt 0 ] && [ "$n_img" -lt 30 ] || fail "interrupt: $n_img images done"
    [ "$n_img" = "$n_tab" ] || fail "interrupt: $n_img images, $n_tab tables"
    [ "$n_img" = "$n_log" ] || fail "interrupt: $n_img images, $n_log joblog lines ok"
    for f in "$W"/out/f*[0-9].png; do whole_png "$f"; done

    # SIGTERM to the whole process group (timeout(1), kill %1, a terminal's Ctrl-C reaches
    # the group too): the worker is the supervisor's to stop, so the files in flight
    # still finish and commit, and no restart is claimed. SIGHUP (the terminal or ssh
    # session closed) stops the batch the same way; under nohup (SIGHUP ignored) the
    # batch runs on.
    stop_group TERM term
    stop_group HUP hup
    stop_group INT int2 twice
    setsid nohup "$PF" --plugin-path "$PLUG" run "$W/slow.json" "$W/in" -o "$W/nohup" \
        --jobs 2 >/dev/null 2>"$W/stderr" &
    pid=$!
    sleep 0.8
    kill -HUP -- -$pid
    wait $pid
    rc=$?
    expect 0 "SIGHUP under nohup"
    grep -q "interrupted" "$W/stderr" && fail "nohup: the batch stopped: $(cat "$W/stderr")"

    # Ctrl-C while the worker starts (here it reads a large --input logo, and is stopped
    # before it is ready): nothing is in flight, so the run ends at once, status 130
    if python3 -c 'import zlib, struct
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
w = h = 10000
open("'"$W/logo.png"'", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) + chunk(b"IDAT", zlib.compress((b"\0" + bytes(w)) * h, 1)) + chunk(b"IEND", b""))' 2>/dev/null; then
        (
            trap - INT
            exec "$PF" run "$P/watermark.json" "$W/in/f000.png" -o "$W/wm" \
                --input logo="$W/logo.png"
        ) 2>"$W/stderr" &
        pid=$!
        local child="" tries=0
        while [ -z "$child" ] && [ $tries -lt 500 ]; do
            child=$(pgrep -P $pid)
            tries=$((tries + 1))
        done
        [ -n "$child" ] && kill -STOP $child
        kill -INT $pid
        local waited=0
        while kill -0 $pid 2>/dev/null && [ $waited -lt 50 ]; do
            sleep 0.1
            waited=$((waited + 1))
        done
        if kill -0 $pid 2>/dev/null; then
            fail "Ctrl-C while the worker starts: the run goes on waiting for it"
            kill -9 $pid
        fi
        [ -n "$child" ] && kill -CONT $child 2>/dev/null
        wait $pid
        rc=$?
        expect 130 "Ctrl-C while the worker starts"
        says "$W/stderr" "0 of 1 input(s) done" "Ctrl-C while the worker starts: the summary"
        [ "$(count "$W/wm")" = 0 ] || fail "Ctrl-C while the worker starts left: $(ls -A "$W/wm")"
    fi
}

# ---- limits: memory in bytes; a directory without PNGs -----------------------------------
section_limits() {
    mkdir -p "$W/empty" "$W/in"
    cp "$IMG/chelsea.png" "$IMG/camera.png" "$W/in/"
    pf run "$P/demo.json" "$W/in" -o "$W/out" --max-memory 300K
    expect 1 "images over --max-memory"
    grep -F "chelsea.png: FAILED" "$W/stderr" | grep -qF "over --max-memory" ||
        fail "no clear --max-memory message: $(grep chelsea "$W/stderr")"
    [ "$(count "$W/out")" = 0 ] || fail "over the limit left: $(ls -A "$W/out")"
    # small budgets and small needs are said in units that show them, never "0.0 MB"
    pf run "$P/demo.json" "$W/in/chelsea.png" -o "$W/out1k" --max-memory 1K -q
    expect 1 "an image over --max-memory 1K"
    grep -F "chelsea.png: FAILED" "$W/stderr" | grep -qF "over --max-memory 1.0 kB" ||
        fail "--max-memory 1K not named in kB: $(grep chelsea "$W/stderr")"
    grep -qF "0.0 MB" "$W/stderr" && fail "a size said as 0.0 MB: $(grep chelsea "$W/stderr")"
    pf run "$P/demo.json" "$W/in" -o "$W/out2" --max-memory 3M -q
    expect 1 "an image whose buffers are over --max-memory"
    says "$W/stderr" "over --max-memory" "the plan's buffers counted"
    pf run "$P/demo.json" "$W/in" -o "$W/out3" --max-memory 2G -q
    expect 0 "under --max-memory"
    pf run "$P/demo.json" "$W/in" -o "$W/out3" --max-memory lots
    expect 2 "--max-memory lots"
    # a directory with no PNGs first
    pf run "$P/demo.json" "$W/empty" "$W/in" -o "$W/out4" -q
    expect 0 "an empty directory first"
    says "$W/stderr" "no .png, .jpg or .jpeg files" "the empty directory reported"
    exists "$W/out4/camera.png"
    pf run "$P/demo.json" "$W/empty" -o "$W/out5"
    expect 2 "only an empty directory"
}

# ---- names: long input names, long output directories -------------------------------------
section_names() {
    mkdir -p "$W/in"
    local long
    long=$(printf 'n%.0s' $(seq 1 250))
    mkdir -p "$W/gen"
    "$HELPER" pngs "$W/gen" >/dev/null || fail "cannot make the input PNGs"
    cp "$W/gen/rgb8.png" "$W/in/$long.png"
    cp "$W/gen/rgba8.png" "$W/in/short.png"
    # one image output: the 254-byte name fits
    pf run "$P/sharpen.json" "$W/in" -o "$W/out" -q
    expect 0 "a 250-character input name, one image output"
    exists "$W/out/$long.png"
    # with a table the name would pass 255 bytes: that input fails, clearly
    pf run "$P/demo.json" "$W/in" -o "$W/out2" -q
    expect 1 "a 250-character input name whose table name is too long"
    grep -F "FAILED" "$W/stderr" | grep -qF "over the file system's 255" ||
        fail "no clear name-length message: $(grep FAILED "$W/stderr")"
    exists "$W/out2/short.png"
    [ "$(count "$W/out2")" = 2 ] || fail "long names left: $(ls -A "$W/out2")"
    # a long output directory: names are whole, not cut
    local d=$W/out3 seg
    seg=$(printf 'd%.0s' $(seq 1 200))
    while [ $((${#d} + 201)) -lt 4080 ]; do d=$d/$seg; done
    while [ ${#d} -lt 4080 ]; do d=${d}x; done
    pf run "$P/demo.json" "$W/in/short.png" -o "$d" -q
    expect 0 "an output directory of 4080 bytes"
    (cd "$d" && [ -s short.png ] && [ -s short.histogram.csv ]) || fail "outputs in the long directory: $(cd "$d" && ls -A)"
    pf run "$P/demo.json" "$W/in/short.png" -o "$d/$seg" -q
    expect 2 "an output directory longer than PATH_MAX"
    says "$W/stderr" "PATH_MAX" "the long directory named"
    # a newline or tab in a name is shown escaped: a name cannot pass for a line of the log
    mkdir -p "$W/ctl"
    cp "$W/gen/rgb8.png" "$W/ctl/a"$'\n'"x.png: FAILED: b.png"
    cp "$W/gen/rgb8.png" "$W/ctl/c"$'\t'"d.png"
    pf run "$P/sharpen.json" "$W/ctl" -o "$W/out4"
    expect 0 "names with a newline and a tab"
    grep -q '^x.png' "$W/stderr" && fail "a name made a log line: $(cat "$W/stderr")"
    says "$W/stderr" 'a\nx.png: FAILED: b.png' "the newline shown as \\n"
    says "$W/stderr" 'c\td.png' "the tab shown as \\t"
    exists "$W/out4/c"$'\t'"d.png"
}

# ---- gpu: the batch on the GPU, and lost contexts -----------------------------------------
section_gpu() {
    many "$W/in" 24
    cp "$IMG/chelsea.png" "$IMG/coffee.png" "$W/in/"
    pf run "$P/demo.json" "$W/in/f000.png" -o "$W/probe" --backend cuda
    if [ "$rc" = 2 ] && grep -q -- "--backend cuda" "$W/stderr"; then
        echo "no usable GPU: skipped"
        exit 77
    fi
    expect 0 "one file on the GPU"
    pf run "$P/demo.json" "$W/in" -o "$W/gpu" --backend cuda
    expect 0 "mixed sizes on the GPU"
    says "$W/stderr" "26 of 26 input(s) done" "GPU summary"
    grep -o '^\[[0-9]*/26\]' "$W/stderr" | tr -d '[' | cut -d/ -f1 | cmp -s - <(seq 1 26) ||
        fail "GPU log not in input order"
    [ "$(ls "$W/gpu" | wc -l)" = 52 ] || fail "GPU: $(ls "$W/gpu" | wc -l) outputs, expected 52"
    for f in "$W"/gpu/*.png; do whole_png "$f"; done
    no_temps "$W/gpu" "GPU batch"
    # a kernel that traps loses the context: each file fails alone, named, the worker restarts
    cat >"$W/trap.json" <<'EOF'
{"pipefuse": 1, "inputs": ["x"], "stages": [
  {"id": "pre", "op": "brightness", "inputs": ["x"]},
  {"id": "boom", "op": "spin_fault", "inputs": ["pre"], "params": {"trap": true}}],
 "outputs": {"out": "boom"}}
EOF
    pf run "$W/trap.json" "$W/in/f000.png" "$W/in/f001.png" "$W/in/f002.png" -o "$W/trap" \
        --backend cuda
    expect 1 "kernels that trap"
    [ "$(grep -c 'FAILED' "$W/stderr")" = 3 ] || fail "trap: $(grep -c FAILED "$W/stderr") failures, expected 3"
    says "$W/stderr" "GPU context is lost" "the lost context named"
    says "$W/stderr" "restarted" "the worker restart reported"
    [ "$(count "$W/trap")" = 0 ] || fail "trap left: $(ls -A "$W/trap")"
    # the same stage without the trap runs: the GPU is usable again
    pf run "$W/trap.json" "$W/in/f000.png" -o "$W/trap2" --backend cuda --set boom.trap=false
    expect 0 "spin_fault without trap"

    # --backend auto (the default): a pipeline whose work for the batch costs the CPU far
    # less than a GPU's start runs on the CPU, one that costs it seconds on the GPU; both
    # say so once, and give the bytes of --backend cpu
    pf run "$P/demo.json" "$W/in" -o "$W/auto_cpu"
    expect 0 "auto, light"
    says "$W/stderr" "--backend auto: the CPU" "auto, light: the CPU chosen"
    [ "$(grep -c -- '--backend auto' "$W/stderr")" = 1 ] || fail "auto, light: the choice not said once"
    # the GPU's frames in flight with tables: each file's histogram and image are its own.
    # demo.json's ops are all correctly rounded float arithmetic (no powf or expf), which
    # the GPU's kernels compute as the CPU does (no FMA contraction): the CPU's bytes; the
    # histograms are compared as tables of one file each
    for f in "$W"/auto_cpu/*.png; do
        cmp -s "$f" "$W/gpu/$(basename "$f")" ||
            fail "demo: $(basename "$f") differs between the GPU and the CPU: $("$HELPER" near "$f" "$W/gpu/$(basename "$f")" 0 2>&1)"
    done
    for f in "$W"/auto_cpu/*.csv; do
        [ "$(wc -l <"$f")" = "$(wc -l <"$W/gpu/$(basename "$f")")" ] ||
            fail "demo: $(basename "$f"): the GPU's table has other rows than the CPU's"
    done
    mkdir -p "$W/big"
    "$HELPER" image "$W/big/a.png" 3000 2000 3 8 || fail "cli_helper image"
    for k in 1 2 3 4 5; do cp "$W/big/a.png" "$W/big/a$k.png"; done
    cat >"$W/heavy.json" <<'EOF'
{"pipefuse": 1, "inputs": ["x"], "stages": [
  {"id": "g1", "op": "gaussian", "inputs": ["x"], "params": {"sigma": 24}},
  {"id": "g2", "op": "gaussian", "inputs": ["g1"], "params": {"sigma": 24}},
  {"id": "g3", "op": "gaussian", "inputs": ["g2"], "params": {"sigma": 24}},
  {"id": "m", "op": "median3", "inputs": ["g3"]},
  {"id": "u", "op": "unsharp", "inputs": ["m"], "params": {"sigma": 8, "amount": 1}}],
 "outputs": {"out": "u"}}
EOF
    pf run "$W/heavy.json" "$W/big" -o "$W/auto_gpu"
    expect 0 "auto, heavy"
    says "$W/stderr" "--backend auto: the GPU" "auto, heavy: the GPU chosen"
    says "$W/stderr" "on the GPU:" "auto, heavy: the GPU batch's choices said"
    pf run "$W/heavy.json" "$W/big" -o "$W/heavy_cpu" --backend cpu -q
    expect 0 "heavy on the CPU"
    for f in "$W"/heavy_cpu/*.png; do
        "$HELPER" near "$f" "$W/auto_gpu/$(basename "$f")" 1 2>>"$W/near.log" ||
            fail "heavy: $(basename "$f"): the GPU's image is not the CPU's within a step: $(tail -1 "$W/near.log")"
    done
}

# ---- start: the worker starts under a low descriptor limit, without /proc, through the
# dynamic loader (where it cannot be executed again and runs as the forked copy), and the
# batch ends; a limit too low for its pipes is refused at once, named -------------------
section_start() {
    many "$W/in" 6
    local o
    o=$( (ulimit -n 48 && timeout 120 "$PF" --plugin-path "$PLUG" run "$P/demo.json" "$W/in" \
        -o "$W/low" -q 2>&1); echo "rc=$?")
    case $o in *rc=0) ;; *) fail "ulimit -n 48: $o" ;; esac
    [ "$(ls "$W/low" | wc -l)" = 12 ] || fail "ulimit -n 48: $(ls "$W/low" | wc -l) outputs, expected 12"
    o=$( (ulimit -n 5 && timeout 120 "$PF" --plugin-path "$PLUG" run "$P/demo.json" "$W/in" \
        -o "$W/tiny" 2>&1); echo "rc=$?")
    case $o in *"ulimit -n is 5"*rc=2) ;; *) fail "ulimit -n 5: $o" ;; esac
    # through the loader, /proc/self/exe and the executed path are the loader: the
    # worker is the forked copy, which must not hold its own job pipe's write end
    local ld
    ld=$(readelf -l "$PF" 2>/dev/null | sed -n 's/.*interpreter: \(.*\)]$/\1/p')
    if [ -n "$ld" ] && [ -x "$ld" ]; then
        o=$(timeout 120 "$ld" "$PF" --plugin-path "$PLUG" run "$P/demo.json" "$W/in" \
            -o "$W/ldso" -q 2>&1; echo "rc=$?")
        case $o in *rc=0) ;; *) fail "run through $ld: $o" ;; esac
        [ "$(ls "$W/ldso" | wc -l)" = 12 ] || fail "through the loader: $(ls "$W/ldso" | wc -l) outputs"
    fi
    # without /proc (a private mount namespace, where unprivileged ones are allowed; not
    # under a sanitizer, whose runtime reads /proc itself)
    if unshare -r -m true 2>/dev/null && ! nm -D "$PF" 2>/dev/null | grep -Eq '__(asan|tsan)_init'; then
        o=$(timeout 120 unshare -r -m sh -c 'mount -t tmpfs none /proc && exec "$@"' sh "$PF" \
            --plugin-path "$PLUG" run "$P/demo.json" "$W/in" -o "$W/noproc" -q 2>&1; echo "rc=$?")
        case $o in *rc=0) ;; *) fail "without /proc: $o" ;; esac
        [ "$(ls "$W/noproc" | wc -l)" = 12 ] || fail "without /proc: $(ls "$W/noproc" | wc -l) outputs"
    fi
}

# ---- links: -r lists a folder once however many links lead to it; folders of --name
# are never made or entered through a planted link ----------------------------------------
section_links() {
    mkdir -p "$W/tree/a" "$W/victim" "$W/out" "$W/gen"
    "$HELPER" pngs "$W/gen" || fail "cannot make the input PNGs"
    cp "$W/gen/rgb8.png" "$W/tree/top.png"
    cp "$W/gen/rgba8.png" "$W/tree/a/low.png"
    ln -s .. "$W/tree/a/up1"
    ln -s .. "$W/tree/a/up2"
    ln -s ../../tree "$W/tree/a/again"
    timeout 120 "$PF" --plugin-path "$PLUG" run "$P/demo.json" -r "$W/tree" -o "$W/rec" \
        >"$W/stdout" 2>"$W/stderr"
    rc=$?
    expect 0 "-r over links to a folder above"
    says "$W/stderr" "listed already" "the folder reached again said"
    says "$W/stderr" "2 of 2 input(s) done" "each file once"
    [ "$(ls -R "$W/rec" | grep -c '\.png$')" = 2 ] || fail "-r over links: $(ls -R "$W/rec")"
    # a link where a folder of a --name template goes: the input fails, nothing is
    # written through it
    ln -s "$W/victim" "$W/out/thumbs"
    pf run "$P/demo.json" "$W/tree/top.png" -o "$W/out" --name 'thumbs/{stem}.{output}.{ext}'
    expect 1 "--name through a planted link"
    says "$W/stderr" "is a symbolic link" "the link named"
    [ -z "$(ls -A "$W/victim")" ] || fail "written through the link: $(ls -A "$W/victim")"
    ln -s "$W/victim" "$W/out/deep"
    pf run "$P/demo.json" "$W/tree/top.png" -o "$W/out" --name 'deep/x/{stem}.{output}.{ext}'
    expect 1 "--name through a planted link, a folder below it"
    [ -z "$(ls -A "$W/victim")" ] || fail "a folder made through the link: $(ls -A "$W/victim")"
    pf run "$P/demo.json" "$W/tree/top.png" -o "$W/out" --name 'real/x/{stem}.{output}.{ext}'
    expect 0 "--name with folders of its own"
    exists "$W/out/real/x/top.result.png"
}

# ---- listing: Ctrl-C or SIGTERM while -r lists a tree --------------------------------------
# The listing's gate (PF_TEST_LIST_GATE, cli/inputs.c): each folder the listing is about
# to read is written into the file, which then holds it there until the file is emptied.
# list_reached PID FOLDER: waits until run PID holds at FOLDER; fails naming where it is.
list_reached() {
    local tries=0
    while [ ! -s "$W/listgate" ]; do
        tries=$((tries + 1))
        if [ $tries -gt 6000 ] || ! kill -0 "$1" 2>/dev/null; then
            fail "the listing never reached $2 (the run ended, or 120 s passed)"
            return 1
        fi
        sleep 0.02
    done
    [ "$(cat "$W/listgate")" = "$2" ] && return
    fail "the listing held at '$(cat "$W/listgate")', expected $2"
    return 1
}

# A tree whose folders each link back to its top, the listing held at the deepest folder
# with the links passed on the way (each folder listed once) and images found above it,
# and folders still to come after it: the signal ends the run at once (a bound no
# machine's load comes near: the run stops in milliseconds, and one that did not stop
# would wait at the gate for ever) with status 130, saying so, no folder after it listed,
# no -o folder made and nothing written.
section_listing() {
    local dirs=("$W/tree" "$W/tree/d/" "$W/tree/d/d/" "$W/tree/d/d/d/") up="" k sig pid waited
    mkdir -p "$W/tree/d/d/d" "$W/tree/e" "$W/gen"
    "$HELPER" pngs "$W/gen" || fail "cannot make the input PNGs"
    for k in 0 1 2 3; do
        cp "$W/gen/rgb8.png" "${dirs[$k]}/p$k.png"
        if [ $k -gt 0 ]; then
            up=../$up
            ln -s "$up" "${dirs[$k]}/back"
        fi
    done
    cp "$W/gen/rgb8.png" "$W/tree/e/p4.png"
    # a deep tree: 100 folders down is listed; past 256 a folder is named, not skipped
    # without a word
    local deep="$W/deep" i
    for i in $(seq 258); do deep=$deep/d; done
    mkdir -p "$deep"
    cp "$W/gen/rgb8.png" "$deep/last.png"
    cp "$W/gen/rgb8.png" "$W/deep/top.png"
    deep=$W/deep
    for i in $(seq 100); do deep=$deep/d; done
    cp "$W/gen/rgb8.png" "$deep/mid.png"
    pf run "$P/demo.json" -r "$W/deep" -o "$W/deep_out" --backend cpu
    expect 0 "a tree 258 folders deep"
    [ "$(find "$W/deep_out" -name '*.png' | wc -l)" = 2 ] ||
        fail "deep tree: $(find "$W/deep_out" -name '*.png' | wc -l) image outputs, expected 2"
    says "$W/stderr" "more than 256 folders below" "the folder past the depth named"
    # the variable without its file changes nothing: the whole tree runs
    rm -f "$W/listgate"
    PF_TEST_LIST_GATE=$W/listgate pf run "$P/demo.json" -r "$W/tree" -o "$W/free" --backend cpu
    expect 0 "-r with no gate file"
    says "$W/stderr" "5 of 5 input(s) done" "-r with no gate file: every image"
    for sig in INT TERM; do
        : >"$W/listgate"
        (
            trap - INT
            export PF_TEST_LIST_GATE=$W/listgate
            exec "$PF" run "$P/demo.json" -r "$W/tree" -o "$W/out_$sig" --backend cpu
        ) >"$W/stdout" 2>"$W/stderr" &
        pid=$!
        for k in 0 1 2; do
            list_reached $pid "${dirs[$k]}" || break
            : >"$W/listgate" # on to the next folder
        done
        list_reached $pid "${dirs[3]}"
        kill -$sig $pid
        waited=0
        while kill -0 $pid 2>/dev/null && [ $waited -lt 600 ]; do
            sleep 0.05
            waited=$((waited + 1))
        done
        if kill -0 $pid 2>/dev/null; then
            fail "SIG$sig while listing: the run still goes on 30 s later"
            kill -9 $pid
            wait $pid
            rm -f "$W/listgate"
            continue
        fi
        wait $pid
        rc=$?
        expect 130 "SIG$sig while listing"
        says "$W/stderr" "interrupted while listing the inputs; nothing run" "SIG$sig while listing: said"
        says "$W/stderr" "listed already" "SIG$sig while listing: the links back passed on the way"
        [ "$(cat "$W/listgate")" = "${dirs[3]}" ] ||
            fail "SIG$sig while listing: listed after the signal: $(tr '\n' ' ' <"$W/listgate")"
        [ ! -e "$W/out_$sig" ] || fail "SIG$sig while listing: -o made: $(ls -AR "$W/out_$sig")"
        rm -f "$W/listgate"
    done
}

# ---- fresh: --skip-existing skips only outputs this run would make again: the pipeline's
# content, every --set and --input, the output options, the plugins and version recorded
# with them (OUTDIR/.pipefuse-manifest); names stay with their input -------------------
section_fresh() {
    many "$W/in" 6
    local skipped
    skips() { sed -n 's/.*, \([0-9]*\) skipped (outputs exist).*/\1/p' "$W/stderr"; }
    pf run "$P/demo.json" "$W/in" -o "$W/out" --set glow.sigma=2 -q
    expect 0 "the first run"
    cp "$W/out/f000.png" "$W/sigma2.png"
    pf run "$P/demo.json" "$W/in" -o "$W/out" --set glow.sigma=2 --skip-existing
    [ "$(skips)" = 6 ] || fail "the same run again: $(skips) skipped, expected 6"
    pf run "$P/demo.json" "$W/in" -o "$W/out" --set glow.sigma=5 --skip-existing
    expect 0 "another --set"
    [ -z "$(skips)" ] || fail "another --set: $(skips) skipped, expected none"
    [ "$(grep -c 'run again: their outputs were made with another' "$W/stderr")" = 1 ] ||
        fail "another --set: not said once: $(cat "$W/stderr")"
    says "$W/stderr" "6 input(s) run again" "another --set: how many said"
    cmp -s "$W/sigma2.png" "$W/out/f000.png" && fail "another --set: f000.png not made again"
    # every option that changes the bytes, and none that does not
    local opt
    for opt in "--zlib 3" "--png-filter paeth" "--format jpeg" "--quality 70" "--strip"; do
        pf run "$P/demo.json" "$W/in" -o "$W/out" --set glow.sigma=5 $opt --skip-existing -q
        [ -z "$(skips)" ] || fail "$opt: $(skips) skipped, expected none"
    done
    pf run "$P/demo.json" "$W/in" -o "$W/out" --set glow.sigma=5 --strip --jobs 1 \
        --band-rows 3 --max-memory 200M --skip-existing
    [ "$(skips)" = 6 ] || fail "options that do not change the bytes: $(skips) skipped, expected 6"
    # the pipeline's content, not its time
    cp "$P/demo.json" "$W/p.json"
    pf run "$W/p.json" "$W/in" -o "$W/p" -q
    touch "$W/p.json"
    pf run "$W/p.json" "$W/in" -o "$W/p" --skip-existing
    [ "$(skips)" = 6 ] || fail "a touched pipeline: $(skips) skipped, expected 6"
    sed -i 's/"bins": 64/"bins": 32/' "$W/p.json"
    pf run "$W/p.json" "$W/in" -o "$W/p" --skip-existing
    [ -z "$(skips)" ] || fail "an edited pipeline: $(skips) skipped"
    # an input replaced by an older file of another content, an output replaced by
    # another program, a record lost: made again
    cp "$W/gen/rgba8.png" "$W/in/f001.png"
    touch -d '1 day ago' "$W/in/f001.png"
    cp "$W/p/f003.png" "$W/p/f002.png"
    pf run "$W/p.json" "$W/in" -o "$W/p" --skip-existing
    [ "$(skips)" = 4 ] || fail "an older input and a replaced output: $(skips) skipped, expected 4"
    rm "$W/p/.pipefuse-manifest"
    pf run "$W/p.json" "$W/in" -o "$W/p" --skip-existing
    [ -z "$(skips)" ] || fail "without records: $(skips) skipped"
    says "$W/stderr" "no record says this input made them" "outputs without records said"
    # a record cut short (a full disk): its input made again, the next line whole
    truncate -s -5 "$W/p/.pipefuse-manifest"
    pf run "$W/p.json" "$W/in" -o "$W/p" --skip-existing
    [ "$(skips)" = 5 ] || fail "a cut record: $(skips) skipped, expected 5"
    pf run "$W/p.json" "$W/in" -o "$W/p" --skip-existing
    [ "$(skips)" = 6 ] || fail "after a cut record: $(skips) skipped, expected 6"
    # the manifest keeps only its latest records once most lines are superseded
    local k
    for k in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do
        pf run "$W/p.json" "$W/in" -o "$W/cmp" --set "glow.sigma=$((k % 2 + 2))" -q
    done
    [ "$(wc -l <"$W/cmp/.pipefuse-manifest")" -le 64 ] ||
        fail "the manifest grew without bound: $(wc -l <"$W/cmp/.pipefuse-manifest") lines for 6 inputs"
    pf run "$W/p.json" "$W/in" -o "$W/cmp" --set glow.sigma=2 --skip-existing
    [ "$(skips)" = 6 ] || fail "after the manifest was rewritten: $(skips) skipped, expected 6"
    no_temps "$W/cmp" "the manifest's rewrite"
    # the plugins' identities: a rebuilt plugin makes its outputs again
    mkdir -p "$W/plug"
    cp "$PLUG/faulty.so" "$W/plug/"
    faulty_pipeline
    "$PF" --plugin-path "$W/plug" run "$W/faulty.json" "$W/in" -o "$W/fa" -q 2>"$W/stderr"
    "$PF" --plugin-path "$W/plug" run "$W/faulty.json" "$W/in" -o "$W/fa" --skip-existing 2>"$W/stderr"
    [ "$(skips)" = 6 ] || fail "the same plugin: $(skips) skipped, expected 6"
    touch "$W/plug/faulty.so"
    "$PF" --plugin-path "$W/plug" run "$W/faulty.json" "$W/in" -o "$W/fa" --skip-existing 2>"$W/stderr"
    [ -z "$(skips)" ] || fail "a rebuilt plugin: $(skips) skipped"
    # names stay with their input: b/x.png's output stays b's when an older a/x.png, named
    # first in input order, comes beside it
    mkdir -p "$W/a" "$W/b"
    cp "$W/gen/rgb8.png" "$W/b/x.png"
    pf run "$P/thumbnail.json" "$W/b/x.png" -o "$W/nm" -q
    cp "$W/nm/x.png" "$W/b_out.png"
    cp "$W/gen/rgba16.png" "$W/a/x.png"
    touch -d '1 day ago' "$W/a/x.png"
    pf run "$P/thumbnail.json" "$W/a/x.png" "$W/b/x.png" -o "$W/nm" --skip-existing
    expect 0 "a/x.png added beside b/x.png"
    [ "$(skips)" = 1 ] || fail "a/x.png added: $(skips) skipped, expected b's 1"
    says "$W/stderr" "a/x.png -> x-2.png" "a/x.png named around b's output"
    cmp -s "$W/b_out.png" "$W/nm/x.png" || fail "b/x.png's output replaced by a/x.png's"
    pf run "$P/thumbnail.json" "$W/a/x.png" "$W/b/x.png" -o "$W/nm" --skip-existing
    [ "$(skips)" = 2 ] || fail "a/x.png and b/x.png again: $(skips) skipped, expected 2"
    # a run over a subset never takes the names an input outside it holds: c/x.png alone
    # is x-3, and a and b are still skipped after it, their outputs theirs
    mkdir -p "$W/c"
    cp "$W/gen/graya8.png" "$W/c/x.png"
    cp "$W/nm/x-2.png" "$W/a_out.png"
    pf run "$P/thumbnail.json" "$W/c/x.png" -o "$W/nm" --skip-existing
    expect 0 "c/x.png alone"
    says "$W/stderr" "c/x.png -> x-3.png" "c/x.png named around a's and b's outputs"
    cmp -s "$W/b_out.png" "$W/nm/x.png" || fail "b/x.png's output replaced by c/x.png's"
    cmp -s "$W/a_out.png" "$W/nm/x-2.png" || fail "a/x.png's output replaced by c/x.png's"
    pf run "$P/thumbnail.json" "$W/b/x.png" -o "$W/nm" --skip-existing
    [ "$(skips)" = 1 ] || fail "b/x.png alone after c: $(skips) skipped, expected 1"
    # an input that is gone leaves its names: c's folder removed, a new d/x.png alone
    # takes none of a's and b's but may take c's
    rm -r "$W/c"
    mkdir -p "$W/d"
    cp "$W/gen/graya8.png" "$W/d/x.png"
    pf run "$P/thumbnail.json" "$W/d/x.png" -o "$W/nm"
    expect 0 "d/x.png alone after c/ went"
    says "$W/stderr" "d/x.png -> x-3.png" "d/x.png takes the gone c's name"
}

# ---- killed: a batch killed (SIGKILL) at random points and resumed with --retry-failed
# until it ends, every output there exactly once; an interrupted run's unfinished inputs
# are pending in its joblog, and a retry without inputs runs them -------------------------
section_killed() {
    slow_pipeline 10
    many "$W/in" 20
    local round pid worker tries have target rc_final=
    images() { ls "$W"/out/*.png 2>/dev/null | wc -l; }
    for round in 1 2 3 4 5 6; do
        local args=("$W/slow.json" "$W/in" -o "$W/out" --jobs 2 --joblog "$W/log.tsv" -q)
        [ -e "$W/log.tsv" ] && args+=(--retry-failed "$W/log.tsv")
        "$PF" --plugin-path "$PLUG" run "${args[@]}" 2>"$W/err$round" &
        pid=$!
        if [ $round -lt 6 ]; then # killed once 0 to 4 more images are committed
            have=$(images)
            target=$((have + RANDOM % 5))
            tries=0
            while [ "$(images)" -lt $target ] && kill -0 $pid 2>/dev/null && [ $tries -lt 6000 ]; do
                sleep 0.02
                tries=$((tries + 1))
            done
            worker=$(pgrep -P $pid | head -1)
            kill -9 $pid 2>/dev/null
            wait $pid 2>/dev/null
            tries=0
            while [ -n "$worker" ] && kill -0 "$worker" 2>/dev/null && [ $tries -lt 3000 ]; do
                sleep 0.02
                tries=$((tries + 1))
            done
        else
            wait $pid
            rc_final=$?
        fi
    done
    [ "$rc_final" = 0 ] || fail "the last resume: exit $rc_final: $(cat "$W/err6")"
    # every output once: 20 images and 20 tables, no second name for any input
    [ "$(ls "$W/out" | wc -l)" = 40 ] || fail "after the resumes: $(ls "$W/out" | wc -l) outputs, expected 40: $(ls "$W/out" | tr '\n' ' ')"
    ls "$W/out" | grep -q -- '-[0-9]*\.' && fail "an input under a second name: $(ls "$W/out" | grep -- '-[0-9]*\.')"
    local f
    for f in "$W"/out/f*[0-9].png; do
        whole_png "$f"
        tail -1 "${f%.png}.histogram.csv" | grep -q '^255,' || fail "$(basename "$f") without its whole table"
    done
    no_temps "$W/out" "after the resumes"
    # the joblog: every input's last line says ok
    local bad
    bad=$(awk -F'\t' 'NR > 1 { last[$1] = $2 } END { for (k in last) if (last[k] != "ok") print k ": " last[k] }' "$W/log.tsv")
    [ -z "$bad" ] || fail "joblog lines not ok at the end: $bad"
    [ "$(awk -F'\t' 'NR > 1 { print $1 }' "$W/log.tsv" | sort -u | wc -l)" = 20 ] ||
        fail "the joblog does not name the 20 inputs"
    # Ctrl-C: the inputs not run are pending in the joblog, and a retry without inputs
    # runs them with the failed one
    many "$W/in2" 40
    "$HELPER" truncate "$W/in2/f002.png" "$W/in2/f003.png"
    "$PF" --plugin-path "$PLUG" run "$W/slow.json" "$W/in2" -o "$W/out2" --jobs 1 \
        --joblog "$W/log2.tsv" 2>"$W/stderr" &
    pid=$!
    gate_after 4 "$W/out2"
    kill -INT $pid
    gate_open
    wait $pid
    rc=$?
    expect 130 "Ctrl-C"
    says "$W/stderr" "not run (interrupted)" "the interrupted summary"
    local notrun
    notrun=$(sed -n 's/.*, \([0-9]*\) not run (interrupted).*/\1/p' "$W/stderr")
    if [ "${notrun:-0}" -gt 0 ]; then # none when the worker held them all (many cores)
        says "$W/stderr" "pending in the joblog: --retry-failed $W/log2.tsv" "how to run them said"
        [ "$(awk -F'\t' 'NR > 1 { last[$1] = $2 } END { for (k in last) n += last[k] == "pending"; print n + 0 }' "$W/log2.tsv")" = "$notrun" ] ||
            fail "the interrupted joblog does not hold the $notrun inputs not run as pending: $(cat "$W/log2.tsv")"
    fi
    cp "$W/in2/f000.png" "$W/in2/f003.png"
    pf run "$W/slow.json" -o "$W/out2" --retry-failed "$W/log2.tsv" --joblog "$W/log2.tsv" -q
    expect 0 "the retry of the interrupted run"
    [ "$(ls "$W"/out2/f*[0-9].png | wc -l)" = 40 ] || fail "after the retry: $(ls "$W/out2" | tr '\n' ' ')"
    # with inputs on the command line, an input the joblog never named runs too
    cp "$W/in2/f000.png" "$W/in2/new.png"
    pf run "$W/slow.json" "$W/in2" -o "$W/out2" --retry-failed "$W/log2.tsv" --joblog "$W/log2.tsv"
    expect 0 "a retry with an input never run"
    says "$W/stderr" "1 of 1 input(s) done" "only the new input ran"
    says "$W/stderr" "1 input(s) the joblog does not name (never run) run too" "the new input said"
    exists "$W/out2/new.png"
}

# ---- codectime: --file-timeout ends a file whose decode or encode hangs (no plugin code
# runs there), named, and the batch goes on ----------------------------------------------
section_codectime() {
    if nm -D "$PF" 2>/dev/null | grep -Eq '__(asan|tsan)_init'; then
        echo "a sanitizer build: its runtime must come first, before an LD_PRELOAD: skipped"
        return
    fi
    local stall
    stall=$(dirname "${PLUG%%:*}")/preload/stall.so
    [ -e "$stall" ] || { fail "no $stall (tests/cli/stall.c)"; return; }
    many "$W/in" 2
    local step
    for step in decode encode; do
        PF_TEST_STALL=$step LD_PRELOAD="$stall" timeout 120 "$PF" --plugin-path "$PLUG" \
            run "$P/demo.json" "$W/in/f000.png" -o "$W/$step" --file-timeout 1 >"$W/stdout" 2>"$W/stderr"
        rc=$?
        expect 1 "a $step that hangs"
        says "$W/stderr" "f000.png: FAILED: timed out after 1 s (--file-timeout) in its $step" \
            "the hung $step named"
        [ "$(count "$W/$step")" = 0 ] || fail "a hung $step left: $(ls -A "$W/$step")"
    done
    # a file's clock counts its own decode and its own engine run, not its wait for a
    # lane: six files of 1 s on two lanes (in strips), the last ones waiting 2 s and more
    # after their decode, all within --file-timeout 2
    cat >"$W/slow1.json" <<EOF
{"pipefuse": 1, "inputs": ["x"], "stages": [
  {"id": "slow", "op": "faulty_slow", "inputs": ["x"], "params": {"ms": 1000}}],
 "outputs": {"image": "slow"}}
EOF
    many "$W/q" 6
    pf run "$W/slow1.json" "$W/q" -o "$W/queued" --jobs 2 --file-timeout 2 --backend cpu
    expect 0 "files queued behind others within --file-timeout"
    [ "$(grep -c FAILED "$W/stderr")" = 0 ] || fail "queued files failed: $(grep FAILED "$W/stderr")"
}

# ---- owners: a temporary is removed as stale only when no process holds its lock (a run
# in another PID namespace, with another pid, or hours long, keeps its temporaries) ------
section_owners() {
    command -v flock >/dev/null || { echo "no flock(1): skipped"; return; }
    many "$W/in" 2
    mkdir -p "$W/out"
    local live=.pftmp-00000000-999999-0123456789abcdef dead=.pftmp-00000000-999998-fedcba9876543210
    : >"$W/out/$dead"
    touch -d '2 hours ago' "$W/out/$dead"
    # a writer elsewhere (its pid means nothing here) holds its temporary's lock until
    # "hold" goes (made first: a holder started before it would let go at once)
    touch "$W/hold"
    flock -x "$W/out/$live" sh -c "touch '$W/locked'; while [ -e '$W/hold' ]; do sleep 0.05; done" &
    local holder=$! tries=0
    while [ ! -e "$W/locked" ] && [ $tries -lt 30000 ]; do
        sleep 0.02
        tries=$((tries + 1))
    done
    [ -e "$W/locked" ] || fail "the lock holder did not start in 10 minutes"
    touch -d '2 hours ago' "$W/out/$live"
    pf run "$P/demo.json" "$W/in" -o "$W/out"
    expect 0 "a run beside another's live temporary"
    [ -e "$W/out/$live" ] || fail "a temporary whose writer holds its lock was removed"
    absent "$W/out/$dead"
    says "$W/stderr" "removed 1 temporary file(s)" "the dead one removed, said"
    rm -f "$W/hold"
    wait $holder
    pf run "$P/demo.json" "$W/in" -o "$W/out" -q
    expect 0 "a run after the writer ended"
    absent "$W/out/$live"
    # the folders below OUTDIR that outputs are named into (--name with '/', -r's {dir})
    # are swept too: a killed run leaves its temporaries there
    mkdir -p "$W/sub/day"
    : >"$W/sub/day/$dead"
    touch -d '2 hours ago' "$W/sub/day/$dead"
    pf run "$P/demo.json" "$W/in" -o "$W/sub" --name 'day/{stem}.{output}.{ext}'
    expect 0 "a run into a folder holding a stale temporary"
    absent "$W/sub/day/$dead"
    says "$W/stderr" "removed 1 temporary file(s) left by an earlier run in folders of" \
        "the stale one below OUTDIR removed, said"
    # the worker's own temporaries are locked while they are written: a second run on the
    # same folder never takes them (its sweep runs while the first one writes)
    slow_pipeline 40
    many "$W/in2" 16
    "$PF" --plugin-path "$PLUG" run "$W/slow.json" "$W/in2" -o "$W/two" --jobs 2 -q 2>"$W/err1" &
    local first=$!
    gate_after 2 "$W/two"
    gate_open
    pf run "$W/slow.json" "$W/in2" -o "$W/two" --jobs 2 --skip-existing -q
    wait $first
    local rc1=$?
    [ "$rc1" = 0 ] || fail "the first of two runs on one folder: exit $rc1: $(cat "$W/err1")"
    expect 0 "the second of two runs on one folder"
    no_temps "$W/two" "two runs on one folder"
}

# ---- memory: a stage that holds memory past the worker's bound from --max-memory fails
# its file, named, and the batch goes on (it reached 2.5 GB under --max-memory 512M) -----
section_memory() {
    if nm -D "$PF" 2>/dev/null | grep -Eq '__(asan|tsan)_init'; then
        echo "a sanitizer build: ulimit -v would not leave its shadow memory room: skipped"
        return
    fi
    [ -r /proc/self/statm ] || { echo "no /proc: the bound is not kept: skipped"; return; }
    many "$W/in" 6
    cat >"$W/leak.json" <<'EOF'
{"pipefuse": 1, "inputs": ["x"], "stages": [
  {"id": "pre", "op": "brightness", "inputs": ["x"]},
  {"id": "bad", "op": "unruly_copy", "inputs": ["pre"], "params": {"mode": 6, "width": 17}}],
 "outputs": {"out": "bad"}}
EOF
    # ulimit -v: should the bound fail, malloc fails at 8 GB, not the machine
    (
        ulimit -v 8388608
        exec "$PF" --plugin-path "$PLUG" run "$W/leak.json" "$W/in" -o "$W/out" --max-memory 64M \
            --jobs 1
    ) >"$W/stdout" 2>"$W/stderr"
    rc=$?
    expect 1 "a stage that holds memory"
    says "$W/stderr" "f004.png: FAILED: its worker reached" "the file over the bound named"
    says "$W/stderr" "that --max-memory 64.0 MB bounds it to" "the bound named"
    says "$W/stderr" "over the memory bound" "the summary's kind"
    [ "$(ls "$W"/out/*.png | wc -l)" = 5 ] || fail "the other files: $(ls "$W/out" | tr '\n' ' ')"
}

case $SECTION in
files | faults | unruly | parallel | resume | retry | temps | pixels | shards | interrupt | limits | names | gpu | start | links | listing | fresh | killed | codectime | owners | memory)
    "section_$SECTION" ;;
*) echo "batch_test.sh: unknown section $SECTION" >&2; exit 2 ;;
esac
if [ "$failures" -gt 0 ]; then
    echo "batch $SECTION: $failures check(s) failed" >&2
    exit 1
fi
echo "batch $SECTION: all checks passed"
