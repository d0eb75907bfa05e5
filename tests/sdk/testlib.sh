# tests/sdk/testlib.sh: what the SDK test scripts share (sourced, with W set to the
# script's work directory): failures counted, each command's output kept in
# $W/NAME.out with its status in $rc, and checks on both.
failures=0
rc=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# show FILE: its end, indented, on stderr.
show() { sed 's/^/    | /' "$1" | tail -25 >&2; }

# run NAME COMMAND...: runs COMMAND; stdout and stderr in $W/NAME.out, the status in $rc.
run() {
    local name=$1
    shift
    "$@" >"$W/$name.out" 2>&1
    rc=$?
}

# expect NAME STATUS: the last run exited with STATUS.
expect() {
    [ "$rc" = "$2" ] && return 0
    fail "$1: exit $rc, expected $2"
    show "$W/$1.out"
    return 1
}

# step NAME COMMAND...: run that must succeed; returns non-zero when it did not.
step() {
    run "$@"
    expect "$1" 0
}

# says NAME TEXT: the output of run NAME holds TEXT (a fixed string).
says() {
    grep -qF -- "$2" "$W/$1.out" && return 0
    fail "$1: no '$2' in its output:"
    show "$W/$1.out"
    return 1
}

# finish SCRIPT: the script's exit.
finish() {
    if [ "$failures" -ne 0 ]; then
        echo "$1: $failures failure(s)" >&2
        exit 1
    fi
    echo "$1: all passed"
    exit 0
}
