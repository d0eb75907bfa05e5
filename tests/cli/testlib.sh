# tests/cli/testlib.sh: what the command-line test scripts share. Sourced after the
# script sets PF (the pipefuse binary) and W (its work folder); PF_EXTRA (an array,
# optional) holds arguments every pf call starts with.

failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# pf ARGS...: runs pipefuse; stdout in $W/stdout, stderr in $W/stderr, status in $rc.
pf() {
    "$PF" ${PF_EXTRA[@]+"${PF_EXTRA[@]}"} "$@" >"$W/stdout" 2>"$W/stderr"
    rc=$?
}

# expect STATUS WHAT: the last pf exited with STATUS.
expect() {
    if [ "$rc" != "$1" ]; then
        fail "$2: exit $rc, expected $1"
        sed 's/^/    | /' "$W/stderr" | head -20 >&2
    fi
}

# says FILE TEXT WHAT: FILE ($W/stdout or $W/stderr) contains TEXT (fixed string).
says() {
    grep -qF -- "$2" "$1" && return
    fail "$3: no '$2' in $(basename "$1"):"
    sed 's/^/    | /' "$1" | head -20 >&2
}

exists() { [ -s "$1" ] || fail "missing output $1"; }

# absent PATH: nothing at PATH, not even a dangling link.
absent() { [ ! -e "$1" ] && [ ! -L "$1" ] || fail "unexpected file $1"; }

# count DIR: its entries, hidden ones included, but for the records of what made the
# outputs (.pipefuse-manifest, written beside any output).
count() { ls -A "$1" 2>/dev/null | grep -vxF .pipefuse-manifest | wc -l; }
