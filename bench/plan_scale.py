#!/usr/bin/env python3
"""bench/plan_scale.py: how loading and planning scale with the number of stages.

  bench/plan_scale.py [--pipefuse build/bin/pipefuse] [--sizes 20000,40000,100000]

For each size, writes two generated pipelines and times `pipefuse check --size 8x8`
on them (load, validation, topological order, fusion groups, units, streams, buffers,
the printed plan), reporting wall seconds and peak memory of the process:
  chain   K point stages in a row (bench/gen_chain.py chain K): one fusion group
  blocks  blocks of six stages as in tests/engine/test_scale.c: a point pair, a box
          stencil, a two-input add reading across it, a blend, an add of the input
          (a fan-out of K/6 readers of one input)
Linear planning shows as seconds and megabytes growing with K, not with K squared.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_chain  # noqa: E402


def blocks(k):
    st, prev = [], "x"
    for b in range(max(1, k // 6)):
        st += [
            {"id": "a%d" % b, "op": "linear", "inputs": [prev]},
            {"id": "b%d" % b, "op": "linear", "inputs": ["a%d" % b]},
            {"id": "c%d" % b, "op": "box", "inputs": ["b%d" % b]},
            {"id": "d%d" % b, "op": "add", "inputs": ["b%d" % b, "c%d" % b], "params": {"scale": 0}},
            {"id": "e%d" % b, "op": "blend", "inputs": ["d%d" % b, "a%d" % b], "params": {"opacity": 0}},
            {"id": "f%d" % b, "op": "add", "inputs": ["e%d" % b, "x"], "params": {"scale": 0}},
        ]
        prev = "f%d" % b
    return {"pipefuse": 1, "inputs": ["x"], "stages": st, "outputs": {"out": prev}}


def run(pf, doc, tmp):
    path = os.path.join(tmp, "p.json")
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    t0 = time.monotonic()
    r = subprocess.run([pf, "check", path, "--size", "8x8"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    dt = time.monotonic() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    return r.returncode, dt, rss, r.stderr.strip().splitlines()[-1:] if r.returncode else []


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pipefuse", default="build/bin/pipefuse")
    ap.add_argument("--sizes", default="20000,40000,100000")
    a = ap.parse_args(argv)
    print("%-7s %8s %9s %12s" % ("shape", "stages", "seconds", "peak MiB*"))
    with tempfile.TemporaryDirectory() as tmp:
        for k in [int(s) for s in a.sizes.split(",")]:
            for name, doc in (("chain", gen_chain.chain(k)), ("blocks", blocks(k))):
                rc, dt, rss, err = run(a.pipefuse, doc, tmp)
                print("%-7s %8d %9.2f %12.0f %s" % (name, len(doc["stages"]), dt, rss,
                                                     "" if rc == 0 else "FAILED %d %s" % (rc, err)))
    print("* the largest of the runs so far (getrusage of children)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
