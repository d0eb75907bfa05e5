#!/usr/bin/env python3
"""bench/torch_bench.py: PyTorch doing the arithmetic of a pipefuse pipeline file.

Reads the same pipeline files that bench/gen_chain.py writes (point chains of
brightness, contrast, saturation, linear; the mixed pipeline with gaussian, sobel and
blend) and runs them as PyTorch code on RGBA8 frames: uint8 in -> float [0, 1] -> the
stages -> uint8 out (x * 255 + 0.5, clamped, truncated: pipefuse's conversion).

Modes:
  eager    plain PyTorch, one call per frame
  graph    the same function captured once with torch.cuda.graphs and replayed
  compile  torch.compile(fn) (Inductor), one call per frame; the compile time is
           reported separately and errors are reported, not raised

Timing: CUDA events around N back-to-back frames (N chosen so one repeat takes about
--target-ms), median over --repeats repeats, reported as ms per frame.

  torch_bench.py --case NAME=PIPELINE.json:WxH:MODES [--case ...] -o OUT.json
      MODES is a '+'-separated list of eager, graph, compile.
  torch_bench.py --verify PIPELINE.json [--verify ...] --pipefuse BIN --size WxH --workdir DIR
      runs each pipeline through `pipefuse run` on a random RGBA8 PNG and compares the
      output with this script's eager result (max abs difference in 8-bit steps).

The output JSON is rewritten after every case, so a timeout keeps what finished.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import time
import traceback

import torch
import torch.nn.functional as F

LUMA = (0.2126, 0.7152, 0.0722)
DEVICE = "cuda"  # --device cpu: a smoke test of this script where there is no GPU


def _f32(v):
    """v rounded to float32 (as a Python float): a params struct's float, or one float
    operation done in double and rounded once (exact for +, -, *, /: double has more
    than 2 * 24 + 2 bits)."""
    return struct.unpack("f", struct.pack("f", v))[0]


# ---- The stages, with pipefuse's semantics (kernels/point/*.h, plugins/filter) ------------

class Ops:
    """Constants live on the device, made once per pipeline (not per frame)."""

    def __init__(self, dev):
        self.dev = dev
        self.cache = {}

    def vec(self, *v):
        key = v
        if key not in self.cache:
            self.cache[key] = torch.tensor(v, dtype=torch.float32, device=self.dev)
        return self.cache[key]

    # x is (H, W, 4) float32, RGBA interleaved like pipefuse's float4 buffers.
    def brightness(self, p, x):  # RGB + amount; alpha kept
        a = p.get("amount", 0.0)
        return x + self.vec(a, a, a, 0.0)

    def contrast(self, p, x):  # RGB: x + (x - pivot) * (amount - 1); alpha kept
        k = p.get("amount", 1.0) - 1.0
        pivot = p.get("pivot", 0.5)
        return x + (x - pivot) * self.vec(k, k, k, 0.0)

    def saturation(self, p, x):  # RGB: lerp(x, luma, 1 - amount); alpha kept
        t = 1.0 - p.get("amount", 1.0)
        luma = (x * self.vec(*LUMA, 0.0)).sum(-1, keepdim=True)
        return torch.lerp(x, luma.expand_as(x), self.vec(t, t, t, 0.0))

    def linear(self, p, x):  # all four channels: a * x + b
        return x * p.get("a", 1.0) + p.get("b", 0.0)

    def blend(self, p, x, y):  # all four channels: lerp(base, other, opacity)
        return torch.lerp(x, y, p.get("opacity", 0.5))

    # Stencils work on (1, 4, H, W) views; the edge is clamped (replicate padding).
    @staticmethod
    def nchw(x):
        return x.permute(2, 0, 1).unsqueeze(0)

    @staticmethod
    def hwc(x):
        return x.squeeze(0).permute(1, 2, 0)

    def gaussian_weights(self, sigma):
        """gaussian_sep's kernel (kernels/point/filter3x3_ops.h) as filter.c builds it:
        sigma a float32 (the params struct's), clamped to [0, 64] (NaN as 0); radius
        ceil(3 sigma); taps exp(-i^2 / (2 sigma^2)) in double, 1 for radius 0, each
        divided by tap_0 + 2 tap_1 + ... + 2 tap_r (summed in double in that order) and
        rounded to float; and wsum, the float sum of those weights taken as the two
        passes sum alpha 1 (filter.c's weight_sum), which every sum is normalised by."""
        sigma = float(sigma)
        sigma = _f32(sigma) if 0 < sigma < 64.0 else (64.0 if sigma >= 64.0 else 0.0)
        key = ("gauss", sigma)
        if key not in self.cache:
            r = int(math.ceil(3.0 * sigma))
            t = [math.exp(-i * i / (2.0 * sigma * sigma)) if r else 1.0 for i in range(r + 1)]
            tot = 0.0
            for i in range(r + 1):
                tot += 2.0 * t[i] if i else t[i]
            wf = [_f32(t[i] / tot) for i in range(r + 1)]
            h = _f32(1.0 * wf[0])
            for i in range(1, r + 1):
                h = _f32(h + _f32(wf[i] * 2.0))
            wsum = _f32(h * wf[0])
            for i in range(1, r + 1):
                wsum = _f32(wsum + _f32(wf[i] * _f32(h + h)))
            w = [wf[abs(i)] for i in range(-r, r + 1)]
            k = torch.tensor(w, dtype=torch.float32, device=self.dev)
            self.cache[key] = (r, k.view(1, 1, 1, -1).repeat(4, 1, 1, 1),
                               k.view(1, 1, -1, 1).repeat(4, 1, 1, 1), wsum)
        return self.cache[key]

    def gaussian(self, p, x):  # separable, two conv2d passes, groups = channels
        """alpha "premultiplied" (pipefuse's default) or "straight", as filter.c and the
        engine's separable kernels do it (plugins/premultiply.h): premultiplied sums
        colour * alpha and alpha, alpha clamped to [0, 1] (NaN as 0) and a colour of alpha
        0 taken as 0 (pf_pm_alpha, pf_pm_mul), then divides the summed colour by the
        summed alpha, 0 where that is 0 (pf_norm_colour); straight divides every channel's
        sum by wsum; alpha is divided by wsum either way. Radius 0 is a copy."""
        r, kx, ky, wsum = self.gaussian_weights(float(p.get("sigma", 1.0)))
        if r == 0:
            return x
        pm = p.get("alpha", "premultiplied") != "straight"
        if pm:
            a = x[..., 3:]
            a = torch.where(a > 0, a.clamp(max=1.0), 0.0)
            x = torch.cat([torch.where(a == 0, 0.0, x[..., :3] * a), a], dim=-1)
        c = self.nchw(x)
        c = F.conv2d(F.pad(c, (r, r, 0, 0), mode="replicate"), kx, groups=4)
        c = F.conv2d(F.pad(c, (0, 0, r, r), mode="replicate"), ky, groups=4)
        s = self.hwc(c)
        sa = s[..., 3:]
        ws = self.vec(wsum)  # a tensor: PyTorch divides by a Python scalar as * (1 / it)
        if pm:
            rgb = torch.where(sa != 0, s[..., :3] / sa, 0.0)
        else:
            rgb = s[..., :3] / ws
        return torch.cat([rgb, sa / ws], dim=-1)

    def sobel_weights(self):
        if "sobel" not in self.cache:
            gx = [[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]
            gy = [[-1.0, -2.0, -1.0], [0.0, 0.0, 0.0], [1.0, 2.0, 1.0]]
            w = torch.tensor([gx, gy] * 3, dtype=torch.float32, device=self.dev)
            self.cache["sobel"] = w.view(6, 1, 3, 3)
        return self.cache["sobel"]

    def sobel(self, p, x):  # RGB: scale * |(gx, gy)| per channel; alpha passes through
        c = self.nchw(x)
        g = F.conv2d(F.pad(c[:, :3], (1, 1, 1, 1), mode="replicate"), self.sobel_weights(),
                     groups=3)
        gx, gy = g[:, 0::2], g[:, 1::2]
        mag = torch.sqrt(gx * gx + gy * gy) * float(p.get("scale", 1.0))
        return self.hwc(torch.cat([mag, c[:, 3:]], dim=1))


def build(pipeline, dev):
    """A function uint8 (H, W, 4) -> uint8 (H, W, 4) doing the pipeline's stages."""
    ops = Ops(dev)
    stages = pipeline["stages"]
    inputs = [i if isinstance(i, str) else i["name"] for i in pipeline.get("inputs", [pipeline.get("input")])]
    if len(inputs) != 1:
        raise ValueError("only one-input pipelines")
    outs = pipeline["outputs"]
    if len(outs) != 1:
        raise ValueError("only one-output pipelines")
    out = list(outs.values())[0]
    out = out if isinstance(out, str) else out["from"]
    plan = []
    prev = inputs[0]
    for st in stages:
        fn = getattr(ops, st["op"], None)
        if fn is None:
            raise ValueError("op %s is not implemented here" % st["op"])
        ins = st.get("inputs") or [st.get("input", prev)]
        plan.append((st["id"], fn, st.get("params", {}), ins))
        prev = st["id"]
    # every op's tensors are dropped as soon as they are not needed any more
    last_use = {}
    for i, (_, _, _, ins) in enumerate(plan):
        for n in ins:
            last_use[n] = i
    src = inputs[0]

    def run(u8):
        env = {src: u8.to(torch.float32) * (1.0 / 255.0)}
        for i, (sid, fn, params, ins) in enumerate(plan):
            env[sid] = fn(params, *[env[n] for n in ins])
            for n in ins:
                if last_use.get(n) == i and n != out:
                    env.pop(n, None)
        y = env[out]
        return (y * 255.0 + 0.5).clamp_(0.0, 255.0).to(torch.uint8)

    return run


# ---- Timing --------------------------------------------------------------------------------

class _WallEvent:
    """torch.cuda.Event's interface on the host clock, for --device cpu smoke tests."""

    def record(self):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


def time_frames(step, repeats, target_ms):
    """Median ms per frame of step() over repeats, each N frames back to back."""
    if DEVICE == "cuda":
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        sync = torch.cuda.synchronize
    else:
        e0, e1 = _WallEvent(), _WallEvent()
        sync = lambda: None
    for _ in range(3):
        step()
    sync()
    # estimate
    e0.record()
    for _ in range(3):
        step()
    e1.record()
    e1.synchronize()
    est = max(e0.elapsed_time(e1) / 3, 1e-3)
    n = int(min(max(target_ms / est, 5), 5000))
    ts = []
    for _ in range(repeats):
        e0.record()
        for _ in range(n):
            step()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) / n)
    ts.sort()
    return {"ms": ts[len(ts) // 2], "min_ms": ts[0], "max_ms": ts[-1], "frames_per_repeat": n,
            "repeats": repeats}


def bench_case(name, path, size, modes, repeats, target_ms):
    with open(path) as f:
        pipeline = json.load(f)
    w, h = size
    dev = torch.device(DEVICE)
    g = torch.Generator(device="cpu").manual_seed(12345)
    inp = torch.randint(0, 256, (h, w, 4), dtype=torch.uint8, generator=g).to(dev)
    fn = build(pipeline, dev)
    res = {"case": name, "pipeline": path, "size": [w, h], "stages": len(pipeline["stages"]),
           "bytes_per_frame": 8 * w * h, "modes": {}}
    ref = None
    for mode in modes:
        r = {}
        t0 = time.time()
        try:
            if mode == "eager":
                with torch.no_grad():
                    ref = fn(inp)
                    r.update(time_frames(lambda: fn(inp), repeats, target_ms))
            elif mode == "graph":
                with torch.no_grad():
                    static_in = inp.clone()
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        for _ in range(3):
                            fn(static_in)
                    torch.cuda.current_stream().wait_stream(s)
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        static_out = fn(static_in)
                    graph.replay()
                    torch.cuda.synchronize()
                    if ref is not None:
                        r["max_diff_vs_eager"] = int((static_out.int() - ref.int()).abs().max())
                    r.update(time_frames(graph.replay, repeats, target_ms))
            elif mode == "compile":
                with torch.no_grad():
                    if ref is None:  # eager once first: the reference, and the constants made
                        ref = fn(inp)
                cfn = torch.compile(fn)
                with torch.no_grad():
                    tc = time.time()
                    o = cfn(inp)
                    if DEVICE == "cuda":
                        torch.cuda.synchronize()
                    r["compile_s"] = round(time.time() - tc, 2)
                    if ref is not None:
                        r["max_diff_vs_eager"] = int((o.int() - ref.int()).abs().max())
                    r.update(time_frames(lambda: cfn(inp), repeats, target_ms))
            else:
                raise ValueError("unknown mode %s" % mode)
            r["gbps"] = res["bytes_per_frame"] / (r["ms"] * 1e-3) / 1e9
        except Exception as e:  # report, keep going
            r = {"error": "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0][:400] if str(e).strip() else ""),
                 "traceback_tail": traceback.format_exc().strip().splitlines()[-3:]}
        r["wall_s"] = round(time.time() - t0, 2)
        res["modes"][mode] = r
        print("torch_bench: %s %s: %s" % (name, mode,
              ("%.4f ms/frame" % r["ms"]) if "ms" in r else r.get("error")), file=sys.stderr, flush=True)
    return res


def verify(path, pipefuse, size, workdir, backend):
    """pipefuse run on a random PNG vs this script's eager result."""
    from PIL import Image
    import numpy as np
    os.makedirs(workdir, exist_ok=True)
    w, h = size
    rng = np.random.default_rng(7)
    img = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
    src = os.path.join(workdir, "verify.png")
    Image.fromarray(img, "RGBA").save(src)
    outdir = os.path.join(workdir, "out")
    cmd = [pipefuse, "run", path, src, "-o", outdir, "--backend", backend, "-q"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    res = {"pipeline": path, "size": [w, h], "backend": backend, "command": " ".join(cmd), "rc": p.returncode}
    if p.returncode != 0:
        res["error"] = (p.stderr or p.stdout).strip()[-800:]
        return res
    got = np.asarray(Image.open(os.path.join(outdir, "verify.png")).convert("RGBA")).astype(np.int32)
    with open(path) as f:
        fn = build(json.load(f), torch.device(DEVICE))
    with torch.no_grad():
        want = fn(torch.from_numpy(img).to(DEVICE)).cpu().numpy().astype(np.int32)
    d = np.abs(got - want)
    res["max_diff"] = int(d.max())
    res["frac_differing"] = float((d > 0).mean())
    return res


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", action="append", default=[], help="NAME=PIPELINE.json:WxH:MODES")
    ap.add_argument("-o", "--output", help="JSON file to write (rewritten after every case)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--target-ms", type=float, default=40.0, help="time per repeat")
    ap.add_argument("--verify", action="append", default=[],
                    help="pipeline file to check against `pipefuse run` (repeatable)")
    ap.add_argument("--pipefuse", default="build-gpu/bin/pipefuse")
    ap.add_argument("--size", default="256x256")
    ap.add_argument("--workdir", default="/tmp/pipefuse-verify")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: smoke-test this script without a GPU (timings meaningless)")
    a = ap.parse_args(argv)
    global DEVICE
    DEVICE = a.device

    doc = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
           "cases": []}
    if DEVICE == "cpu":
        doc["device"] = "cpu (smoke test)"

    def save():
        if a.output:
            tmp = a.output + ".tmp"
            with open(tmp, "w") as f:
                json.dump(doc, f, indent=1)
            os.replace(tmp, a.output)

    if DEVICE == "cuda" and not torch.cuda.is_available():
        doc["error"] = "no CUDA device for PyTorch"
        save()
        print(json.dumps(doc))
        return 1
    if a.verify:
        w, h = (int(v) for v in a.size.lower().split("x"))
        doc["verify"] = {}
        for path in a.verify:
            name = os.path.splitext(os.path.basename(path))[0]
            try:
                doc["verify"][name] = verify(path, a.pipefuse, (w, h), os.path.join(a.workdir, name), a.backend)
            except Exception as e:
                doc["verify"][name] = {"pipeline": path, "error": "%s: %s" % (type(e).__name__, e)}
            save()
        if not a.output:
            print(json.dumps(doc, indent=1))
        return 0
    save()
    for c in a.case:
        try:
            name, rest = c.split("=", 1)
            path, size, modes = rest.rsplit(":", 2)
            w, h = (int(v) for v in size.lower().split("x"))
            res = bench_case(name, path, (w, h), modes.split("+"), a.repeats, a.target_ms)
        except Exception as e:
            res = {"case": c, "error": "%s: %s" % (type(e).__name__, e)}
            print("torch_bench: %s: %s" % (c, res["error"]), file=sys.stderr, flush=True)
        doc["cases"].append(res)
        save()
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
    if not a.output:
        print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
