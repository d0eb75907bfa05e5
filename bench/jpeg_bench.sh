#!/bin/bash
# bench/jpeg_bench.sh: a JPEG photo batch through pipefuse on the GPU and the CPU, pyvips,
# OpenCV and torchvision, in one run on one machine (the GPU machine; issue 33's
# Performance section).
#
#   bench/jpeg_bench.sh [--pipefuse BIN] [--dir WORK] [--files N] [--batch B] [--keep]
#
# 1. WORK/in: N JPEGs (default 1000) made from samples/images with Pillow and NumPy:
#    half scaled to 12 MP (4000x3000) and half to 2 MP (1732x1155, aspect kept by
#    cropping), with mild noise (Gaussian, sigma 2 of 255) so that no two files are alike,
#    saved at quality 90, 4:2:0. Made once; kept between runs unless the count changes.
# 2. The same work for every contender: resize to 2048 px on the long side (antialiased
#    bilinear / area), an unsharp mask (sigma 1, amount 0.6), a colour grade (brightness
#    +0.02, contrast 1.08, saturation 1.1), written as JPEG quality 85 4:2:0:
#    - pipefuse --backend cuda (its defaults) and --backend cpu, `pipefuse run`;
#    - pyvips, one process per core (multiprocessing), libvips' own threads 1;
#    - OpenCV, one process per core, cv2.setNumThreads(1);
#    - torchvision on the GPU: torchvision.io.decode_jpeg of B files at once
#      (device='cuda'), resize (antialias), unsharp and grade in torch, encode_jpeg on the
#      GPU, files read and written by a thread pool.
#    pyvips comes from the wheels ../shared/device/prepare.sh fetches (.devdeps/wheels,
#    installed into WORK/pyvips with pip --no-index) or an installed pyvips; a contender
#    whose modules are missing is reported as such.
# 3. While pipefuse's GPU run goes, nvidia-smi -q -d UTILIZATION is sampled twice a
#    second: the JPEG engine's (JPG/NVJPG) and the GPU's mean and peak utilisation.
# 4. Quality: 24 of the outputs of each contender against pipefuse's CPU outputs, PSNR
#    in dB (mean and worst), so a fast contender doing less work shows.
# 5. WORK/jpeg_bench.md: the table (seconds, files/s, input MP/s, x pyvips, PSNR), also
#    printed. Wall time of each whole run, outputs on the same disk as the inputs.
set -u
HERE=$(cd "$(dirname "$0")/.." && pwd)
PF=${PIPEFUSE:-$HERE/build/bin/pipefuse}
WORK=${TMPDIR:-/tmp}/pipefuse_jpeg_bench
N=1000
BATCH=32
KEEP=0
while [ $# -gt 0 ]; do
    case $1 in
    --pipefuse) PF=$2; shift ;;
    --dir) WORK=$2; shift ;;
    --files) N=$2; shift ;;
    --batch) BATCH=$2; shift ;;
    --keep) KEEP=1 ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "jpeg_bench: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ -x "$PF" ] || { echo "jpeg_bench: no pipefuse at $PF (--pipefuse BIN)" >&2; exit 2; }
mkdir -p "$WORK" || exit 1
CORES=$(nproc)
PY=${PYTHON:-python3}
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.$2f\", $1 }"; }

# ---- 1. the inputs --------------------------------------------------------------------
if [ "$(cat "$WORK/in.count" 2>/dev/null)" != "$N" ]; then
    rm -rf "$WORK/in" && mkdir -p "$WORK/in"
    echo "jpeg_bench: making $N JPEGs in $WORK/in"
    "$PY" - "$HERE/samples/images" "$WORK/in" "$N" "$CORES" <<'EOF' || exit 1
import glob, os, sys
from multiprocessing import Pool
import numpy as np
from PIL import Image
src, out, n, cores = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
photos = sorted(glob.glob(os.path.join(src, "*.png")))
sizes = [(4000, 3000), (1732, 1155)]
def make(i):
    w, h = sizes[i % 2]
    im = Image.open(photos[(i // 2) % len(photos)]).convert("RGB")
    s = max(w / im.width, h / im.height)             # cover, then crop to w x h
    im = im.resize((round(im.width * s + 0.5), round(im.height * s + 0.5)), Image.BICUBIC)
    im = im.crop(((im.width - w) // 2, (im.height - h) // 2, (im.width - w) // 2 + w,
                  (im.height - h) // 2 + h))
    rng = np.random.default_rng(i)
    a = np.asarray(im, dtype=np.float32) + rng.normal(0, 2, (h, w, 3)).astype(np.float32)
    Image.fromarray(np.clip(a + 0.5, 0, 255).astype(np.uint8)).save(
        os.path.join(out, "p%05d_%dmp.jpg" % (i, 12 if i % 2 == 0 else 2)),
        quality=90, subsampling="4:2:0")
with Pool(cores) as p:
    p.map(make, range(n), chunksize=4)
EOF
    echo "$N" >"$WORK/in.count"
fi
MPIX=$("$PY" -c "import sys; n=int(sys.argv[1]); print((n + 1) // 2 * 12.0 + n // 2 * 1732 * 1155 / 1e6)" "$N")

# ---- 2. the work ------------------------------------------------------------------------
cat >"$WORK/photo.json" <<'EOF'
{"pipefuse": 1, "name": "jpeg_bench", "description": "2048 px long side, unsharp, a colour grade.",
 "inputs": ["photo"], "stages": [
  {"id": "fit", "op": "resize", "params": {"width": 2048, "height": 2048, "fit": "inside", "antialias": true}},
  {"id": "sharp", "op": "unsharp", "params": {"sigma": 1.0, "amount": 0.6}},
  {"id": "bright", "op": "brightness", "params": {"amount": 0.02}},
  {"id": "punch", "op": "contrast", "params": {"amount": 1.08}},
  {"id": "sat", "op": "saturation", "params": {"amount": 1.1}}],
 "outputs": {"out": "sat"}}
EOF

declare -A SECS NOTE
# bench NAME CMD...: runs CMD with outputs into WORK/out_NAME, timed
bench() {
    local name=$1
    shift
    rm -rf "$WORK/out_$name" && mkdir -p "$WORK/out_$name"
    sync
    echo "jpeg_bench: $name"
    local t0 t1
    t0=$(now)
    if "$@" >"$WORK/$name.log" 2>&1; then
        t1=$(now)
        SECS[$name]=$(calc "$t1 - $t0" 2)
    else
        SECS[$name]=""
        NOTE[$name]="failed: $(tail -n 2 "$WORK/$name.log" | tr '\n' ' ' | cut -c1-120)"
    fi
}

# pipefuse on the GPU, with the JPEG engine's utilisation sampled
HAVE_GPU=0
"$PF" info 2>/dev/null | grep -q 'compute capability' && HAVE_GPU=1
if [ $HAVE_GPU = 1 ] && command -v nvidia-smi >/dev/null; then
    (while :; do nvidia-smi -q -d UTILIZATION 2>/dev/null; sleep 0.5; done) >"$WORK/smi.log" &
    SMI=$!
    bench pipefuse_cuda "$PF" --backend cuda run "$WORK/photo.json" "$WORK/in" -o "$WORK/out_pipefuse_cuda" --quality 85 -q
    kill "$SMI" 2>/dev/null
    wait "$SMI" 2>/dev/null
    UTIL=$(awk '/Gpu/ {g += $3; ng++; if ($3 > gm) gm = $3}
                /JPG|JPEG|NVJPG/ {j += $3; nj++; if ($3 > jm) jm = $3}
                END { printf "GPU mean %.0f%% peak %d%%; JPEG engine mean %.0f%% peak %d%%",
                      ng ? g / ng : 0, gm, nj ? j / nj : 0, jm }' "$WORK/smi.log")
else
    NOTE[pipefuse_cuda]="no CUDA device"
    UTIL="no GPU"
fi
bench pipefuse_cpu "$PF" --backend cpu run "$WORK/photo.json" "$WORK/in" -o "$WORK/out_pipefuse_cpu" --quality 85 -q

# pyvips: the wheels of prepare.sh, else an installed one
PYVIPS_PATH=""
if [ -d "$HERE/.devdeps/wheels" ] && ! "$PY" -c "import pyvips" 2>/dev/null; then
    PYVIPS_PATH=$WORK/pyvips
    [ -d "$PYVIPS_PATH/pyvips" ] || "$PY" -m pip install -q --target "$PYVIPS_PATH" --no-index \
        --find-links "$HERE/.devdeps/wheels" pyvips pyvips-binary >"$WORK/pip.log" 2>&1
fi
cat >"$WORK/peers.py" <<'EOF'
import glob, os, sys, time
from multiprocessing import Pool
who, src, dst, cores = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
files = sorted(glob.glob(os.path.join(src, "*.jpg")))
LONG = 2048

def vips_one(f):
    import pyvips
    im = pyvips.Image.new_from_file(f, access="sequential")
    im = im.resize(LONG / max(im.width, im.height))              # lanczos3, antialiased
    im = im.gaussblur(1.0) * -0.6 + im * 1.6                     # unsharp: in + 0.6 (in - blur)
    im = im + 0.02 * 255                                         # brightness
    im = (im - 127.5) * 1.08 + 127.5                             # contrast
    y = im[0] * 0.2126 + im[1] * 0.7152 + im[2] * 0.0722         # saturation about luma
    im = (im - y) * 1.1 + y
    im.cast("uchar").jpegsave(os.path.join(dst, os.path.basename(f)), Q=85, subsample_mode="on")

def cv_one(f):
    import cv2, numpy as np
    im = cv2.imread(f, cv2.IMREAD_COLOR)
    h, w = im.shape[:2]
    s = LONG / max(w, h)
    im = cv2.resize(im, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA).astype(np.float32)
    im = cv2.addWeighted(im, 1.6, cv2.GaussianBlur(im, (0, 0), 1.0), -0.6, 0)
    im = (im + 0.02 * 255 - 127.5) * 1.08 + 127.5
    y = im[..., 2:3] * 0.2126 + im[..., 1:2] * 0.7152 + im[..., 0:1] * 0.0722   # BGR
    im = (im - y) * 1.1 + y
    cv2.imwrite(os.path.join(dst, os.path.basename(f)), np.clip(im + 0.5, 0, 255).astype(np.uint8),
                [cv2.IMWRITE_JPEG_QUALITY, 85])

def init_cv():
    import cv2
    cv2.setNumThreads(1)

def init_vips():
    import pyvips
    pyvips.cache_set_max(0)
    os.environ["VIPS_CONCURRENCY"] = "1"

if who == "torch":
    import torch, torch.nn.functional as F
    from concurrent.futures import ThreadPoolExecutor
    from torchvision.io import decode_jpeg, encode_jpeg, read_file
    B = int(os.environ.get("JPEG_BENCH_BATCH", "32"))
    k = torch.arange(-3, 4, dtype=torch.float32, device="cuda")
    k = torch.exp(-k * k / 2); k = (k / k.sum())
    kx, ky = k.view(1, 1, 1, 7).repeat(3, 1, 1, 1), k.view(1, 1, 7, 1).repeat(3, 1, 1, 1)
    luma = torch.tensor([0.2126, 0.7152, 0.0722], device="cuda").view(1, 3, 1, 1)
    def process(t):
        x = t.unsqueeze(0).float() / 255
        h, w = x.shape[2:]
        s = LONG / max(w, h)
        x = F.interpolate(x, size=(round(h * s), round(w * s)), mode="bilinear", antialias=True,
                          align_corners=False)
        b = F.conv2d(F.conv2d(F.pad(x, (3, 3, 3, 3), mode="replicate"), kx, groups=3), ky, groups=3)
        x = x + 0.6 * (x - b)
        x = (x + 0.02 - 0.5) * 1.08 + 0.5
        y = (x * luma).sum(1, keepdim=True)
        x = (x - y) * 1.1 + y
        return (x.clamp(0, 1) * 255 + 0.5).to(torch.uint8)[0]
    with ThreadPoolExecutor(cores) as pool:
        for i in range(0, len(files), B):
            chunk = files[i:i + B]
            datas = list(pool.map(read_file, chunk))
            imgs = decode_jpeg(datas, device="cuda")
            outs = encode_jpeg([process(t) for t in imgs], quality=85)
            def write(a):
                with open(os.path.join(dst, os.path.basename(a[0])), "wb") as fh:
                    fh.write(a[1].cpu().numpy().tobytes())
            list(pool.map(write, zip(chunk, outs)))
    torch.cuda.synchronize()
else:
    one, init = (vips_one, init_vips) if who == "vips" else (cv_one, init_cv)
    with Pool(cores, initializer=init) as p:
        p.map(one, files, chunksize=2)
EOF
if PYTHONPATH=${PYVIPS_PATH:-${PYTHONPATH:-}} "$PY" -c "import pyvips" 2>/dev/null; then
    bench pyvips env PYTHONPATH="${PYVIPS_PATH:-${PYTHONPATH:-}}" "$PY" "$WORK/peers.py" vips "$WORK/in" "$WORK/out_pyvips" "$CORES"
else
    NOTE[pyvips]="pyvips not importable (run ../shared/device/prepare.sh for the wheels)"
fi
if "$PY" -c "import cv2" 2>/dev/null; then
    bench opencv "$PY" "$WORK/peers.py" cv "$WORK/in" "$WORK/out_opencv" "$CORES"
else
    NOTE[opencv]="cv2 not importable"
fi
if [ $HAVE_GPU = 1 ] && "$PY" -c "import torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null; then
    bench torchvision env JPEG_BENCH_BATCH="$BATCH" "$PY" "$WORK/peers.py" torch "$WORK/in" "$WORK/out_torchvision" "$CORES"
else
    NOTE[torchvision]="torch/torchvision with CUDA not available"
fi

# ---- 4. quality against pipefuse's CPU outputs -----------------------------------------
declare -A PSNR
for name in pipefuse_cuda pyvips opencv torchvision; do
    [ -n "${SECS[$name]:-}" ] || continue
    PSNR[$name]=$("$PY" - "$WORK/out_pipefuse_cpu" "$WORK/out_$name" <<'EOF'
import glob, os, sys
import numpy as np
from PIL import Image
ref = sorted(glob.glob(os.path.join(sys.argv[1], "*.jpg")))[::max(1, len(glob.glob(os.path.join(sys.argv[1], "*.jpg"))) // 24)][:24]
ps = []
for r in ref:
    o = os.path.join(sys.argv[2], os.path.basename(r))
    if not os.path.exists(o):
        print("missing outputs"); sys.exit()
    a = np.asarray(Image.open(r).convert("RGB"), dtype=np.float64)
    b = np.asarray(Image.open(o).convert("RGB"), dtype=np.float64)
    if a.shape != b.shape:
        h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
        a, b = a[:h, :w], b[:h, :w]
    mse = ((a - b) ** 2).mean()
    ps.append(99.0 if mse == 0 else 10 * np.log10(255 ** 2 / mse))
print("%.1f (worst %.1f)" % (sum(ps) / len(ps), min(ps)))
EOF
)
done

# ---- 5. the table --------------------------------------------------------------------
{
    echo "JPEG batch: $N files ($(calc "$MPIX" 0) MP: half 12 MP, half 2 MP, q90 4:2:0) -> 2048 px long side + unsharp + grade, JPEG q85; $CORES cores; $(date -u +%Y-%m-%d)"
    echo
    echo "| run | seconds | files/s | input MP/s | x pyvips | PSNR vs pipefuse cpu (dB) | note |"
    echo "|---|---:|---:|---:|---:|---|---|"
    for name in pipefuse_cuda pipefuse_cpu pyvips opencv torchvision; do
        s=${SECS[$name]:-}
        if [ -n "$s" ]; then
            fps=$(calc "$N / $s" 1)
            mps=$(calc "$MPIX / $s" 0)
            xv="-"
            [ -n "${SECS[pyvips]:-}" ] && xv=$(calc "${SECS[pyvips]} / $s" 2)
            echo "| $name | $s | $fps | $mps | $xv | ${PSNR[$name]:-reference} | ${NOTE[$name]:-} |"
        else
            echo "| $name | - | - | - | - | - | ${NOTE[$name]:-} |"
        fi
    done
    echo
    echo "Utilisation during pipefuse --backend cuda: $UTIL (nvidia-smi -q -d UTILIZATION, every 0.5 s)"
} | tee "$WORK/jpeg_bench.md"
[ $KEEP = 1 ] || rm -rf "$WORK"/out_*
