#!/usr/bin/env python3
"""bench/realtime_report.py OUT: the markdown table of bench/realtime_bench.sh's runs
(OUT/runs.jsonl), with the targets of docs/realtime.md checked:
  pinned   per frame <= 1.25 x max(PCIe floor, device-frame time)
  pageable per frame <= 1.5  x max(PCIe floor, fastest host memcpy of the frame)
  latency  p50 with 2 frames in flight <= 2.5 x the per-frame time (3 in flight)
"""
import json
import os
import sys

out = sys.argv[1]
runs = [json.loads(l) for l in open(os.path.join(out, "runs.jsonl")) if l.strip()]
ok_runs = [r for r in runs if not r.get("failed")]


def find(size, pipe, mode, k):
    for r in ok_runs:
        name = "invert" if r["pipeline"] == "invert" else os.path.basename(r["pipeline"])
        if (f'{r["width"]}x{r["height"]}' == size and name.startswith(pipe) and r["mode"] == mode
                and r["in_flight"] == k and "pcie_floor_ms" not in r):
            return r
    return None


def floor(size):
    for r in ok_runs:
        if f'{r["width"]}x{r["height"]}' == size and "memcpy_ms" in r:
            return r
    return None


meta = open(os.path.join(out, "meta.txt")).read().strip().splitlines() if os.path.exists(
    os.path.join(out, "meta.txt")) else []
print("### Host frames against the PCIe floor\n")
for m in meta:
    print(f"- {m}")
print("- command: `BUILD=build-rt OUT=rt-out bash bench/realtime_bench.sh` (samples/realtime, "
      "prefilled frames, 3 in flight for ms/frame, 2 in flight for latency p50/p99)\n")
print("| frame | pipeline | pageable ms/frame (p50/p99 ms) | pinned ms/frame (p50/p99) "
      "| device ms/frame (p50/p99) | PCIe floor (H2D+D2H overlapped) | host memcpy 1 thread / best "
      "| targets |")
print("|---|---|---|---|---|---|---|---|")
failed = [r["name"] for r in runs if r.get("failed")]
for size in ("1920x1080", "3840x2160"):
    fl = floor(size)
    for pipe in ("invert", "demo"):
        cells, per = [], {}
        for mode in ("pageable", "pinned", "device"):
            r3, r2 = find(size, pipe, mode, 3), find(size, pipe, mode, 2)
            per[mode] = (r3, r2)
            if not r3:
                cells.append("failed")
                continue
            lat = f' ({r2["p50_ms"]:.3f}/{r2["p99_ms"]:.3f})' if r2 else ""
            cells.append(f'{r3["ms_per_frame"]:.3f}{lat}')
        verdict = []
        if fl and "pcie_floor_ms" in fl:
            f = fl["pcie_floor_ms"]
            floor_cell = f'{f:.3f} ms (up {fl["h2d_ms"]:.3f}, down {fl["d2h_ms"]:.3f})'
            mem_cell = f'{fl["memcpy_ms"]:.3f} / {fl["memcpy_best_ms"]:.3f} ms ({fl["memcpy_best_threads"]} thr)'
            dev = per["device"][0]
            if per["pinned"][0] and dev:
                lim = 1.25 * max(f, dev["ms_per_frame"])
                verdict.append(f'pinned {"met" if per["pinned"][0]["ms_per_frame"] <= lim else "NOT met"} (<= {lim:.3f})')
            if per["pageable"][0]:
                lim = 1.5 * max(f, fl["memcpy_best_ms"])
                verdict.append(f'pageable {"met" if per["pageable"][0]["ms_per_frame"] <= lim else "NOT met"} (<= {lim:.3f})')
            for mode in ("pageable", "pinned", "device"):
                r3, r2 = per[mode]
                if r3 and r2 and r2["p50_ms"] > 2.5 * r3["ms_per_frame"]:
                    verdict.append(f"{mode} latency NOT met")
            if not any("latency" in v for v in verdict):
                verdict.append("latency met")
        else:
            floor_cell = mem_cell = "not measured"
        print(f"| {size} RGBA8 | {pipe} | " + " | ".join(cells) + f" | {floor_cell} | {mem_cell} | "
              + "; ".join(verdict) + " |")
if failed:
    print("\nFailed runs: " + ", ".join(failed) + " (their logs are in logs/)")
