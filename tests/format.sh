#!/usr/bin/env bash
# tests/format.sh SRC: every C and CUDA source is formatted as .clang-format says.
# Layout differs between clang-format versions, so only the version the tree is
# formatted with (14) checks; others, or none, report skipped (77).
set -u
cd "$1" || exit 1
command -v clang-format >/dev/null || { echo "no clang-format: skipped"; exit 77; }
clang-format --version | grep -q 'version 14\.' || { echo "clang-format is not 14: skipped"; exit 77; }
files=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null | grep -v '^tests/data/')
[ -n "$files" ] || { echo "not a git checkout: skipped"; exit 77; }
if ! clang-format --dry-run --Werror $files; then
    echo "run: clang-format -i \$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')"
    exit 1
fi
echo "format: $(echo "$files" | wc -l) files formatted"
