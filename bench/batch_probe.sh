#!/bin/bash
# bench/batch_probe.sh: a quick look at a batch on the GPU machine, in a minute or two:
# 48 photos of 12 MP and 480 of 0.25 MP (the sample photos resized, hard links for the
# copies), a light pipeline (half size, brightness and contrast, a small blur), a heavy
# one (two large gaussians, unsharp, median3, sobel, blends) and pipelines/demo.json,
# each with --backend auto, cpu and cuda, next to the codec floor (a copy pipeline on the
# CPU). One line per run in $OUT/summary.txt: seconds, peak RSS, the per-file averages of
# -v and what --backend auto chose. bench/batch_gpu.sh is the full benchmark (more sets,
# the peers, device memory).
#   PF=build-gpu/bin/pipefuse OUT=probe-out bash bench/batch_probe.sh
set -u
PF=${PF:-build-gpu/bin/pipefuse}; OUT=${OUT:-probe-out}; W=${W:-/tmp/pf_probe}
mkdir -p "$OUT" "$W"
mk() { local d=$W/$1; [ -f "$d/.done" ] && return; rm -rf "$d" "$W/src$1"; mkdir -p "$d" "$W/src$1"
  printf '{"pipefuse": 1, "inputs": ["x"], "stages": [{"id": "s", "op": "resize", "params": {"width": %d, "height": %d, "mode": "bilinear"}}], "outputs": {"o": "s"}}' $2 $3 > "$W/rs.json"
  "$PF" run "$W/rs.json" samples/images/*.png -o "$W/src$1" --backend cpu -q || exit 1
  for f in "$W/src$1"/*.png; do for k in $(seq 1 $4); do ln "$f" "$d/$(basename "$f" .png)_$k.png"; done; done; touch "$d/.done"; }
mk large 4000 3000 8; mk small 500 500 80
cat > "$W/light.json" <<'J'
{"pipefuse": 1, "inputs": ["photo"], "stages": [
  {"id": "half", "op": "resize", "params": {"scale": 0.5, "mode": "area"}},
  {"id": "bright", "op": "brightness", "params": {"amount": 0.03}},
  {"id": "punch", "op": "contrast", "params": {"amount": 1.1}},
  {"id": "blur", "op": "gaussian", "params": {"sigma": 1.0}}], "outputs": {"out": "blur"}}
J
cat > "$W/heavy.json" <<'J'
{"pipefuse": 1, "inputs": ["photo"], "stages": [
  {"id": "soft", "op": "gaussian", "inputs": ["photo"], "params": {"sigma": 6.0}},
  {"id": "wide", "op": "gaussian", "inputs": ["photo"], "params": {"sigma": 12.0}},
  {"id": "glow", "op": "blend", "inputs": ["soft", "wide"], "params": {"opacity": 0.5}},
  {"id": "sharp", "op": "unsharp", "inputs": ["photo"], "params": {"sigma": 2.0, "amount": 0.8}},
  {"id": "clean", "op": "median3", "inputs": ["sharp"]},
  {"id": "edges", "op": "sobel", "inputs": ["clean"]},
  {"id": "mix", "op": "blend", "inputs": ["clean", "glow"], "params": {"opacity": 0.3}},
  {"id": "out", "op": "add", "inputs": ["mix", "edges"], "params": {"scale": 0.2}}], "outputs": {"out": "out"}}
J
printf '{"pipefuse": 1, "inputs": ["x"], "stages": [{"id": "c", "op": "linear", "params": {"a": 1, "b": 0}}], "outputs": {"o": "c"}}' > "$W/copy.json"
t() { local name=$1; shift; rm -rf "$W/o"; mkdir -p "$W/o"; local t0=$(date +%s.%N)
  /usr/bin/time -f '%M' -o "$W/rss" "$PF" run "$@" -o "$W/o" -v > "$OUT/$name.log" 2>&1; local rc=$?; local t1=$(date +%s.%N)
  printf '%-28s rc=%s %6.2f s rss %6d MB | %s | %s\n' "$name" $rc $(awk "BEGIN{print $t1 - $t0}") $(( $(tail -1 $W/rss) / 1024 )) \
    "$(grep -h 'per file' "$OUT/$name.log" | sed 's/pipefuse: per file, on average: //; s/ (submit to done)//; s/; each on its own thread, overlapping//')" \
    "$(grep -h 'backend auto' "$OUT/$name.log" | sed 's/.*backend auto: //' | cut -c1-60)" | tee -a "$OUT/summary.txt"; }
t large-floor-cpu "$W/copy.json" "$W/large" --backend cpu
for p in light heavy demo; do
  pj=$W/$p.json; [ $p = demo ] && pj=pipelines/demo.json
  for b in auto cpu cuda; do t large-$p-$b "$pj" "$W/large" --backend $b; done
done
t small-floor-cpu "$W/copy.json" "$W/small" --backend cpu
for p in light heavy demo; do
  pj=$W/$p.json; [ $p = demo ] && pj=pipelines/demo.json
  for b in auto cpu cuda; do t small-$p-$b "$pj" "$W/small" --backend $b; done
done
