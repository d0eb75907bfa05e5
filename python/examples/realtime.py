#!/usr/bin/env python3
"""A real-time loop over PyTorch CUDA tensors: pipefuse next to the same loop in plain
PyTorch.

    python realtime.py [--pipeline pipelines/demo.json] [--size 1920x1080]
                       [--frames 600] [--in-flight 3]

Frames are RGBA8 tensors already on the GPU (a camera or decoder would put them there);
each loop keeps `--in-flight` frames queued, changes a parameter every frame and prints
frames/s and latency (submit to outputs ready, host clock) for:
  pipefuse   pipeline.submit([frame], [out, None], stream=...) on PyTorch's stream,
             outputs written in place into preallocated tensors, nothing copied;
  pytorch    the same operations written as PyTorch code (demo.json only).
The outputs of the last frame are compared (max difference in 8-bit steps).
"""
import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import pipefuse

ROOT = Path(__file__).resolve().parents[2]
LUMA = (0.2126, 0.7152, 0.0722)


def demo_in_torch(p, h, w, dev):
    """demo.json as PyTorch code: uint8 RGBA in, (uint8 RGBA, histogram) out."""
    st = {s["id"]: s.get("params", {}) for s in p["stages"]}
    bright = st["bright"]["amount"]
    k = st["punch"]["amount"] - 1.0
    pivot = st["punch"].get("pivot", 0.5)
    t = 1.0 - st["vivid"]["amount"]
    sigma = st["glow"]["sigma"]
    opacity = st["soft"]["opacity"]
    strength, radius = st["frame"]["strength"], st["frame"].get("radius", 1.0)
    bins = st["hist"]["bins"]
    rgb = torch.tensor([1.0, 1.0, 1.0, 0.0], device=dev)
    luma = torch.tensor([*LUMA, 0.0], device=dev)
    r = int(math.ceil(3 * sigma))
    g = torch.tensor([math.exp(-i * i / (2 * sigma * sigma)) for i in range(-r, r + 1)], device=dev)
    g = g / g.sum()
    gx, gy = g.view(1, 1, 1, -1).repeat(4, 1, 1, 1), g.view(1, 1, -1, 1).repeat(4, 1, 1, 1)
    ys = torch.arange(h, device=dev, dtype=torch.float32).view(-1, 1) + 0.5 - 0.5 * h
    xs = torch.arange(w, device=dev, dtype=torch.float32).view(1, -1) + 0.5 - 0.5 * w
    d = torch.sqrt(xs * xs + ys * ys) * (2.0 / (math.sqrt(w * w + h * h) * radius))
    d = d.clamp(0, 1)
    vig = (1.0 - strength * d * d * (3 - 2 * d)).unsqueeze(-1)
    vig = torch.cat([vig.expand(h, w, 3), torch.ones(h, w, 1, device=dev)], -1)
    offsets = torch.arange(4, device=dev)

    def run(u8):
        x = u8.float() * (1 / 255)
        x = x + bright * rgb
        x = x + (x - pivot) * (k * rgb)
        y = (x * luma).sum(-1, keepdim=True)
        x = torch.lerp(x, y.expand_as(x), t * rgb)
        c = x.permute(2, 0, 1).unsqueeze(0)
        c = F.conv2d(F.pad(c, (r, r, 0, 0), mode="replicate"), gx, groups=4)
        c = F.conv2d(F.pad(c, (0, 0, r, r), mode="replicate"), gy, groups=4)
        x = torch.lerp(x, c.squeeze(0).permute(1, 2, 0), opacity) * vig
        out = (x * 255 + 0.5).clamp(0, 255).to(torch.uint8)
        idx = (x * bins).floor().clamp(0, bins - 1).long() * 4 + offsets
        hist = torch.bincount(idx.view(-1), minlength=bins * 4).view(bins, 4)
        return out, hist

    return run


def loop(name, step, frames, in_flight, sync_one):
    """Runs step(i) for every frame with in_flight frames queued; returns fps and
    latency percentiles in ms."""
    marks, lat = [], []
    t0 = time.perf_counter()
    for i in range(frames):
        marks.append((time.perf_counter(), step(i)))
        if i >= in_flight:
            ts, handle = marks[i - in_flight]
            sync_one(handle)
            lat.append((time.perf_counter() - ts) * 1e3)
    for ts, handle in marks[max(0, frames - in_flight):]:
        sync_one(handle)
        lat.append((time.perf_counter() - ts) * 1e3)
    total = time.perf_counter() - t0
    lat.sort()
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    print(f"{name:10s} {frames / total:9.1f} frames/s  {total / frames * 1e3:8.3f} ms/frame  "
          f"latency p50 {pct(0.5):.3f}  p99 {pct(0.99):.3f}  max {lat[-1]:.3f} ms")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pipeline", default=str(ROOT / "pipelines" / "demo.json"))
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--in-flight", type=int, default=3)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("realtime: no CUDA device for PyTorch", file=sys.stderr)
        return 2
    w, h = map(int, args.size.lower().split("x"))
    dev = torch.device("cuda", 0)
    stream = torch.cuda.current_stream(dev)
    g = torch.Generator(device="cpu").manual_seed(1)
    source = [torch.randint(0, 256, (h, w, 4), dtype=torch.uint8, generator=g).to(dev)
              for _ in range(8)]  # a few distinct frames, cycled

    p = pipefuse.Engine().load(args.pipeline, backend="cuda", slots=args.in_flight)
    images = [o.kind == "image" for o in p.outputs]
    outs = [[torch.empty_like(source[0]) if im else None for im in images]
            for _ in range(args.in_flight + 1)]
    param = next((f"{st['id']}.amount" for st in json.load(open(args.pipeline))["stages"]
                  if st["op"] == "brightness"), None)
    s = stream.cuda_stream

    def pf_step(i):
        if param:
            p.set(param, 0.04 + 0.02 * math.sin(i * 0.1))  # a live change, no re-plan
        return p.submit([source[i % len(source)]], outs[i % len(outs)], stream=s)

    for i in range(10):  # plan, compile, capture every slot
        p.wait(pf_step(i), tables=False)
    loop("pipefuse", pf_step, args.frames, args.in_flight,
         lambda t: p.wait(t, tables=False))
    st = p.stats()
    print(f"{'':10s} backend {st['backend']}, {st['launches_per_frame']} launch(es) per "
          f"frame, {st['allocations_last_frame']} allocations and "
          f"{st['device_syncs_last_frame']} device syncs in the last frame")

    if Path(args.pipeline).name != "demo.json":
        print("pytorch: the plain PyTorch loop is written for demo.json only")
        return 0
    spec = json.load(open(args.pipeline))
    fn = demo_in_torch(spec, h, w, dev)
    with torch.no_grad():
        def pt_step(i):
            out = fn(source[i % len(source)])
            ev = torch.cuda.Event()
            ev.record(stream)
            return ev, out

        for i in range(10):
            pt_step(i)[0].synchronize()
        loop("pytorch", pt_step, args.frames, args.in_flight, lambda h_: h_[0].synchronize())
        p.set(param, spec["stages"][0]["params"]["amount"])  # the file's value again
        mine = p.run(source[0])
        ref, hist = fn(source[0])
        torch.cuda.synchronize()
    diff = (mine["result"].int() - ref.int()).abs().max().item()
    t = mine["histogram"]
    counts = torch.tensor([list(t[c]) for c in ("r", "g", "b", "a")]).T
    same = bool((counts == hist.cpu().double()).all())
    print(f"last frame: max difference {diff} (8-bit steps); histograms "
          f"{'equal' if same else 'differ'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
