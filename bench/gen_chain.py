#!/usr/bin/env python3
"""bench/gen_chain.py: writes the pipeline files the benchmark suite runs.

  gen_chain.py chain K [-o FILE] [--max-launch-ms MS]
      K point stages in a row on one RGBA input, cycling brightness, contrast,
      saturation, linear (a*x+b on all four channels). The parameters keep values
      bounded over 1000 stages (no overflow, no denormals), so long chains time the
      same arithmetic as short ones.
  gen_chain.py mixed [-o FILE] [--max-launch-ms MS] [--sigma S]
      a point chain (brightness, contrast, saturation), a gaussian blur of it, a
      Sobel gradient of the blur, and a blend of the chain with the gradient.

bench/torch_bench.py reads the same files and runs the same ops, so the PyTorch side
does exactly the arithmetic of the pipefuse side.
"""
import argparse
import json
import sys

# One cycle of the chain; stage i uses CYCLE[i % 4], brightness alternating its sign.
CYCLE = [
    ("brightness", lambda c: {"amount": 0.01 if c % 2 == 0 else -0.01}),
    ("contrast", lambda c: {"amount": 1.01, "pivot": 0.5}),
    ("saturation", lambda c: {"amount": 0.99}),
    ("linear", lambda c: {"a": 0.99, "b": 0.005}),
]


def chain(k, max_launch_ms=None):
    stages = []
    prev = "src"
    for i in range(k):
        op, params = CYCLE[i % len(CYCLE)]
        sid = "s%d" % i
        stages.append({"id": sid, "op": op, "inputs": [prev], "params": params(i // len(CYCLE))})
        prev = sid
    doc = {
        "pipefuse": 1,
        "name": "chain%d" % k,
        "description": "bench: %d point stages cycling brightness, contrast, saturation, linear" % k,
        "inputs": ["src"],
        "stages": stages,
        "outputs": {"out": prev},
    }
    if max_launch_ms is not None:
        doc["options"] = {"max_launch_ms": max_launch_ms}
    return doc


def mixed(sigma=2.0, max_launch_ms=None):
    doc = {
        "pipefuse": 1,
        "name": "mixed",
        "description": "bench: point chain, gaussian, sobel, blend of the chain with the gradient",
        "inputs": ["src"],
        "stages": [
            {"id": "bright", "op": "brightness", "inputs": ["src"], "params": {"amount": 0.03}},
            {"id": "punch", "op": "contrast", "inputs": ["bright"], "params": {"amount": 1.1, "pivot": 0.5}},
            {"id": "vivid", "op": "saturation", "inputs": ["punch"], "params": {"amount": 1.2}},
            {"id": "blur", "op": "gaussian", "inputs": ["vivid"], "params": {"sigma": sigma}},
            {"id": "edges", "op": "sobel", "inputs": ["blur"], "params": {"scale": 1.0}},
            {"id": "mix", "op": "blend", "inputs": ["vivid", "edges"], "params": {"opacity": 0.5}},
        ],
        "outputs": {"out": "mix"},
    }
    if max_launch_ms is not None:
        doc["options"] = {"max_launch_ms": max_launch_ms}
    return doc


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["chain", "mixed"])
    ap.add_argument("k", nargs="?", type=int, default=8, help="stages (chain)")
    ap.add_argument("-o", "--output", default="-")
    ap.add_argument("--max-launch-ms", type=float, default=None)
    ap.add_argument("--sigma", type=float, default=2.0, help="gaussian sigma (mixed)")
    a = ap.parse_args(argv)
    if a.kind == "chain":
        if a.k < 1:
            ap.error("K must be at least 1")
        doc = chain(a.k, a.max_launch_ms)
    else:
        doc = mixed(a.sigma, a.max_launch_ms)
    text = json.dumps(doc, indent=1) + "\n"
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
