#!/bin/bash
# tests/sdk/typed_params_test.sh: the parameter-row macros of plugin.h check the type of
# the field they bind at compile time: a row of the wrong kind for its field does not
# compile, and the compiler's message names what is wrong.
#
#   typed_params_test.sh CC INCLUDE_DIR WORK_DIR
set -u
CC=$1 INC=$2 WORK=$3
W=$WORK/typed_params
rm -rf "$W" && mkdir -p "$W" || exit 1
. "$(dirname "$0")/testlib.sh"

# compile NAME ROWS...: a params struct and a table of ROWS, compiled as C11 with
# warnings as errors; the output in $W/NAME.out, the status in $rc.
compile() {
    local name=$1
    shift
    {
        printf '#include "pipefuse/plugin.h"\n'
        printf 'typedef struct p { float gain; int n; int flag; int mode; float m[3]; } p;\n'
        printf 'static const char *const modes[] = {"a", "b", NULL};\n'
        printf 'static const float m_def[3] = {0, 0.5f, 1};\n'
        printf 'static const float m_def2[2] = {0, 1};\n'
        printf 'const pf_param_desc table[] = {\n'
        for row in "$@"; do printf '    %s,\n' "$row"; done
        printf '};\n'
        printf 'const int n_rows = PF_COUNTOF(table);\n'
        printf 'const void *keep[] = {m_def, m_def2, modes};\n'
    } >"$W/$name.c"
    run "$name" "$CC" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$INC" "$W/$name.c"
}

compile good 'PF_FLOAT_PARAM(p, gain, 1, 0, PF_NO_MAX, "gain")' \
    'PF_INT_PARAM(p, n, 3, PF_NO_MIN, 10, "count")' 'PF_BOOL_PARAM(p, flag, 1, "flag")' \
    'PF_ENUM_PARAM(p, mode, 1, modes, "mode")' 'PF_FLOAT_ARRAY_PARAM(p, m, m_def, 0, 1, "levels")'
expect good 0

# bad NAME TEXT ROW: ROW alone does not compile, and the compiler says TEXT.
bad() {
    compile "$1" "$3"
    [ "$rc" -ne 0 ] || fail "$1: '$3' compiled"
    says "$1" "$2"
}
bad float_on_int PF_FLOAT_PARAM_needs_a_float_field 'PF_FLOAT_PARAM(p, n, 1, 0, 4, "n")'
bad int_on_float PF_INT_PARAM_needs_an_int_field 'PF_INT_PARAM(p, gain, 1, 0, 4, "g")'
bad bool_on_float PF_BOOL_PARAM_needs_an_int_field 'PF_BOOL_PARAM(p, gain, 1, "g")'
bad enum_on_float PF_ENUM_PARAM_needs_an_int_field 'PF_ENUM_PARAM(p, gain, 0, modes, "g")'
bad array_on_float PF_FLOAT_ARRAY_PARAM_needs_a_float_array 'PF_FLOAT_ARRAY_PARAM(p, gain, m_def, 0, 1, "g")'
bad array_count PF_FLOAT_ARRAY_PARAM_needs_a_float_array 'PF_FLOAT_ARRAY_PARAM(p, m, m_def2, 0, 1, "m")'

finish typed_params_test
