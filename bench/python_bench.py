#!/usr/bin/env python3
"""bench/python_bench.py: the Python real-time loop against the C loop and PyTorch.

On the GPU machine, with the package installed (pip install ./python):

    python3 bench/python_bench.py [--pipeline pipelines/demo.json] \
        [--sizes 1920x1080,3840x2160] [--frames 300] [--pipefuse BIN] [-o OUT.json]

For each size, on RGBA8 frames already on the GPU:
  C loop       `pipefuse bench PIPELINE --size WxH --format rgba8 --json`, mode
               cuda-graph-fused: device frames on one stream (cli/bench.c);
  Python loop  the same loop through `import pipefuse` over PyTorch CUDA tensors,
               outputs preallocated (pipeline.submit([x], outs, stream=s)), measured the
               way cli/bench.c measures: a frame alone (submit, stream sync, wait:
               median and p99 latency, median submit time), then frames back to back
               (wait only for the frame `slots` submits back: ms per frame);
  Python run   pipeline.run(x) per frame: outputs allocated by PyTorch each frame,
               tables converted to NumPy (the convenient form);
  PyTorch      the same operations as PyTorch code (python/examples/realtime.py
               demo_in_torch, demo.json only): eager, CUDA Graphs, torch.compile,
               back to back, timed as bench/torch_bench.py times them.
Target (issue): Python loop back to back within 10 % + 5 us of the C loop per frame.
Prints a markdown table (with the date and command) and writes the JSON to -o.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

import pipefuse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python" / "examples"))


def pipefuse_bin(arg):
    if arg:
        return arg
    here = Path(pipefuse.__file__).parent / "bin" / "pipefuse"
    return str(here) if here.exists() else shutil.which("pipefuse")


def c_loop(binary, pipeline, w, h, frames):
    cmd = [binary, "bench", pipeline, "--size", f"{w}x{h}", "--format", "rgba8", "--frames",
           str(frames), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return {"error": (r.stderr or r.stdout).strip()[-400:], "command": " ".join(cmd)}
    doc = json.loads(r.stdout)
    modes = doc.get("modes", doc)
    m = next((x for x in modes if x.get("mode", x.get("name")) == "cuda-graph-fused"), None) \
        if isinstance(modes, list) else modes.get("cuda-graph-fused")
    if not m or m.get("error"):
        return {"error": f"no cuda-graph-fused result: {m}", "command": " ".join(cmd)}
    return {"alone_ms": m["median_ms"], "p99_ms": m["p99_ms"], "submit_us": m["submit_us"],
            "frame_ms": m["throughput_ms"], "launches": m.get("launches_per_frame"),
            "command": " ".join(cmd)}


def py_loop(pipeline, w, h, frames):
    p = pipefuse.Engine().load(pipeline, backend="cuda", graph=True, fusion=True)
    x = torch.randint(0, 256, (h, w, 4), dtype=torch.uint8, device="cuda")
    outs = [torch.empty_like(x) if o.kind == "image" else None for o in p.outputs]
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()  # a stream of its own, as cli/bench.c's (non-blocking)
    with torch.cuda.stream(stream):
        return py_loop_on(p, x, outs, stream, frames)


def py_loop_on(p, x, outs, stream, frames):
    s = stream.cuda_stream
    for _ in range(8):  # plan, measure bands, compile, capture every slot
        t = p.submit([x], outs, stream=s)
        stream.synchronize()
        p.wait(t, tables=False)
    lat, sub = [], []
    for _ in range(frames):
        t0 = time.perf_counter()
        t = p.submit([x], outs, stream=s)
        t1 = time.perf_counter()
        stream.synchronize()
        p.wait(t, tables=False)
        lat.append((time.perf_counter() - t0) * 1e3)
        sub.append((t1 - t0) * 1e6)
    slots = p.slots
    tickets = []
    t0 = time.perf_counter()
    for i in range(frames):
        if i >= slots:
            p.wait(tickets[i - slots], tables=False)
        tickets.append(p.submit([x], outs, stream=s))
    stream.synchronize()
    for t in tickets[-slots:]:
        p.wait(t, tables=False)
    total = time.perf_counter() - t0
    # The convenient form: new outputs and NumPy tables every frame.
    run = []
    for _ in range(min(frames, 100)):
        t0 = time.perf_counter()
        p.run(x)
        stream.synchronize()
        run.append((time.perf_counter() - t0) * 1e3)
    lat.sort(), sub.sort(), run.sort()
    st = p.stats()
    return {"alone_ms": lat[len(lat) // 2], "p99_ms": lat[min(len(lat) - 1, int(len(lat) * .99))],
            "submit_us": sub[len(sub) // 2], "frame_ms": total * 1e3 / frames,
            "run_alone_ms": run[len(run) // 2], "launches": st["launches_per_frame"],
            "allocations_last_frame": st["allocations_last_frame"], "backend": st["backend"]}


def torch_modes(pipeline, w, h, modes):
    if Path(pipeline).name != "demo.json":
        return {m: {"error": "the PyTorch version is written for demo.json only"} for m in modes}
    from realtime import demo_in_torch
    from torch_bench import time_frames
    fn = demo_in_torch(json.load(open(pipeline)), h, w, torch.device("cuda"))
    x = torch.randint(0, 256, (h, w, 4), dtype=torch.uint8, device="cuda")
    res = {}
    with torch.no_grad():
        for mode in modes:
            try:
                if mode == "eager":
                    res[mode] = time_frames(lambda: fn(x), 5, 300)
                elif mode == "graph":
                    side = torch.cuda.Stream()
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        for _ in range(3):
                            fn(x)
                    torch.cuda.current_stream().wait_stream(side)
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        fn(x)
                    res[mode] = time_frames(g.replay, 5, 300)
                elif mode == "compile":
                    cfn = torch.compile(fn)
                    t0 = time.time()
                    cfn(x)
                    torch.cuda.synchronize()
                    res[mode] = time_frames(lambda: cfn(x), 5, 300)
                    res[mode]["compile_s"] = round(time.time() - t0, 1)
            except Exception as e:  # report, go on
                res[mode] = {"error": f"{type(e).__name__}: {str(e).strip()[:300]}"}
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pipeline", default=str(ROOT / "pipelines" / "demo.json"))
    ap.add_argument("--sizes", default="1920x1080,3840x2160")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--pipefuse", help="the pipefuse command (default: the package's)")
    ap.add_argument("--torch-modes", default="eager+graph+compile")
    ap.add_argument("-o", "--output")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("python_bench: no CUDA device", file=sys.stderr)
        return 2
    binary = pipefuse_bin(args.pipefuse)
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
           "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "pipefuse": pipefuse.__version__, "pipeline": args.pipeline, "sizes": []}
    for size in args.sizes.split(","):
        w, h = map(int, size.lower().split("x"))
        row = {"size": [w, h]}
        row["c"] = c_loop(binary, args.pipeline, w, h, args.frames) if binary \
            else {"error": "no pipefuse command"}
        row["python"] = py_loop(args.pipeline, w, h, args.frames)
        row["torch"] = torch_modes(args.pipeline, w, h, args.torch_modes.split("+"))
        c, py = row["c"], row["python"]
        if "frame_ms" in c:
            limit = c["frame_ms"] * 1.10 + 0.005
            row["target"] = {"limit_ms": limit, "met": py["frame_ms"] <= limit,
                             "overhead_us": (py["frame_ms"] - c["frame_ms"]) * 1e3}
        doc["sizes"].append(row)
        print(f"python_bench: {w}x{h} done", file=sys.stderr, flush=True)
    if args.output:
        with open(args.output, "w") as f:
            json.dump(doc, f, indent=1)
    print_table(doc)
    return 0


def fmt(v, spec=".3f"):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def print_table(doc):
    print(f"### Python loop ({doc['date']}, {doc['device']}, torch {doc['torch']})\n")
    print(f"`{doc['command']}`\n")
    print("| size | loop | frame ms (back to back) | alone ms (p50 / p99) | submit us | note |")
    print("|---|---|---|---|---|---|")
    for r in doc["sizes"]:
        size = "x".join(map(str, r["size"]))
        c, py = r["c"], r["python"]
        if "error" in c:
            print(f"| {size} | C (pipefuse bench) | - | - | - | {c['error'][:80]} |")
        else:
            print(f"| {size} | C (pipefuse bench, cuda-graph-fused) | {fmt(c['frame_ms'])} | "
                  f"{fmt(c['alone_ms'])} / {fmt(c['p99_ms'])} | {fmt(c['submit_us'], '.1f')} | "
                  f"{c.get('launches')} launches |")
        tgt = r.get("target")
        note = (f"{tgt['overhead_us']:+.1f} us vs C; target <= {tgt['limit_ms']:.3f} ms "
                f"{'met' if tgt['met'] else 'NOT met'}") if tgt else ""
        print(f"| {size} | Python submit/wait, torch tensors | {fmt(py['frame_ms'])} | "
              f"{fmt(py['alone_ms'])} / {fmt(py['p99_ms'])} | {fmt(py['submit_us'], '.1f')} | "
              f"{note} |")
        print(f"| {size} | Python run() (new outputs each frame) | - | {fmt(py['run_alone_ms'])} "
              f"| - | |")
        for mode, t in r["torch"].items():
            if "error" in t:
                print(f"| {size} | PyTorch {mode} | - | - | - | {t['error'][:80]} |")
            else:
                extra = f"compile {t['compile_s']} s" if "compile_s" in t else ""
                print(f"| {size} | PyTorch {mode} | {fmt(t['ms'])} | - | - | {extra} |")


if __name__ == "__main__":
    sys.exit(main())
