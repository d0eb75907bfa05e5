/* kernels/fused_rt.h: the device-side runtime of fused kernels, compiled by NVRTC as
 * "pipefuse/fused_rt.h" ahead of every generated kernel (engine/fuse.c).
 *
 * Each thread of a fused kernel owns PF_PPT pixels of one row, as PF_PPT / VP chunks of
 * VP consecutive pixels; consecutive threads own consecutive chunks, so each load or
 * store instruction of a warp covers one contiguous span (coalesced). The generator
 * picks PF_PPT by image size (8, or fewer where 8 would leave the device short of
 * threads: pf_fuse_ppt) and VP so that a chunk of the widest format is at most 16 bytes
 * and at most PF_PPT pixels; a block of 256 threads covers rows: blockDim.x threads along
 * a row, blockDim.y rows (engine/fuse.c, pf_fuse_launch). Chunks move as
 * whole words: 16-byte vectors where the address allows (always for the engine's own
 * buffers and for tight RGBA8 rows), 8 or 4 bytes otherwise, single bytes as the last
 * resort, and per-sample accesses at the row's ragged end. Each sample converts by
 * the rules of kernels/edge.h ("pipefuse/edge.h"), which the CPU (engine/frame.c) and
 * the precompiled conversions (kernels/convert.cu) share.
 */
#ifndef PIPEFUSE_FUSED_RT_H
#define PIPEFUSE_FUSED_RT_H

#ifndef PF_PPT
#define PF_PPT 8 /* pixels per thread; a generated kernel defines its own */
#endif

#include "pipefuse/edge.h"       /* kernels/edge.h */
#include "pipefuse/frame_desc.h" /* kernels/frame_desc.h */

/* Bytes per sample, and 32-bit words holding VP pixels of format (S, C). */
#define PF_SB(S)        ((S) == 0 ? 1 : ((S) == 1 ? 2 : 4))
#define PF_NW(S, C, VP) (((VP)*PF_SB(S) * (C) + 3) / 4)

/* Loads CB bytes at p into words, with the widest access the address allows. */
template <int CB, int NW>
static __device__ __forceinline__ void pf_load_words(const unsigned char *p, unsigned int (&w)[NW])
{
    unsigned long long a = (unsigned long long)p;
    if (CB % 16 == 0 && (a & 15) == 0) {
#pragma unroll
        for (int i = 0; i < CB / 16; i++) {
            uint4 v = __ldg((const uint4 *)p + i);
            w[4 * i] = v.x;
            w[4 * i + 1] = v.y;
            w[4 * i + 2] = v.z;
            w[4 * i + 3] = v.w;
        }
    } else if (CB % 8 == 0 && (a & 7) == 0) {
#pragma unroll
        for (int i = 0; i < CB / 8; i++) {
            uint2 v = __ldg((const uint2 *)p + i);
            w[2 * i] = v.x;
            w[2 * i + 1] = v.y;
        }
    } else if (CB % 4 == 0 && (a & 3) == 0) {
#pragma unroll
        for (int i = 0; i < CB / 4; i++)
            w[i] = __ldg((const unsigned int *)p + i);
    } else {
#pragma unroll
        for (int i = 0; i < NW; i++)
            w[i] = 0;
#pragma unroll
        for (int i = 0; i < CB; i++)
            w[i >> 2] |= (unsigned int)p[i] << ((i & 3) * 8);
    }
}

template <int CB, int NW>
static __device__ __forceinline__ void pf_store_words(unsigned char *p, const unsigned int (&w)[NW])
{
    unsigned long long a = (unsigned long long)p;
    if (CB % 16 == 0 && (a & 15) == 0) {
#pragma unroll
        for (int i = 0; i < CB / 16; i++)
            ((uint4 *)p)[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
    } else if (CB % 8 == 0 && (a & 7) == 0) {
#pragma unroll
        for (int i = 0; i < CB / 8; i++)
            ((uint2 *)p)[i] = make_uint2(w[2 * i], w[2 * i + 1]);
    } else if (CB % 4 == 0 && (a & 3) == 0) {
#pragma unroll
        for (int i = 0; i < CB / 4; i++)
            ((unsigned int *)p)[i] = w[i];
    } else {
#pragma unroll
        for (int i = 0; i < CB; i++)
            p[i] = (unsigned char)(w[i >> 2] >> ((i & 3) * 8));
    }
}

/* Integer samples move in and out of floats through the mantissa of 2^23 + v (exact for
   v < 2^23): a byte permute and a subtraction in (then pf_code_to_float), and out
   pf_float_to_code's add rounding toward zero, where int/float conversions would run at
   a quarter of the FP32 rate on sm_90 and bound the fused kernels. */

/* Sample j (0-based, in samples) out of packed words. */
template <int S> static __device__ __forceinline__ float pf_unpack(const unsigned int *w, int j)
{
    if (S == 0) { /* bytes: 0x4B0000vv */
        float f = __uint_as_float(__byte_perm(w[j >> 2], 0x4B000000u, 0x7540u | (j & 3)));
        return pf_code_to_float(__fsub_rn(f, 8388608.0f), 255.0f);
    }
    if (S == 1) { /* halves: 0x4B00vvvv */
        float f = __uint_as_float(__byte_perm(w[j >> 1], 0x4B000000u, (j & 1) ? 0x7532u : 0x7510u));
        return pf_code_to_float(__fsub_rn(f, 8388608.0f), 65535.0f);
    }
    return __uint_as_float(w[j]);
}

template <int S> static __device__ __forceinline__ void pf_pack(unsigned int *w, int j, float v)
{
    if (S == 0)
        w[j >> 2] |= pf_float_to_code(v, 255u) << ((j & 3) * 8);
    else if (S == 1)
        w[j >> 1] |= pf_float_to_code(v, 65535u) << ((j & 1) * 16);
    else
        w[j] = __float_as_uint(v);
}

/* Pixel i of VP unpacked pixels of format (S, C). */
template <int S, int C>
static __device__ __forceinline__ pf_float4 pf_pixel(const unsigned int *w, int i)
{
    pf_float4 v;
    if (C <= 2) {
        v = pf_gray_pixel(pf_unpack<S>(w, i * C), C == 2 ? pf_unpack<S>(w, i * C + 1) : 1.0f);
    } else {
        v.x = pf_unpack<S>(w, i * C);
        v.y = pf_unpack<S>(w, i * C + 1);
        v.z = pf_unpack<S>(w, i * C + 2);
        v.w = C == 4 ? pf_unpack<S>(w, i * C + 3) : 1.0f;
    }
    return v;
}

/* Loads the chunk of VP pixels starting at x of row y into px[0..VP); pixels past the
   width read as zero. A warp's threads load consecutive chunks, so every access
   instruction of a warp covers one contiguous span of the row. */
template <int S, int C, int VP>
static __device__ __forceinline__ void pf_load_chunk(const pf_frame_desc &d, int y, int x,
                                                     int width, pf_float4 *px)
{
    const unsigned char *row = (const unsigned char *)d.data + (unsigned long long)y * d.pitch;
    const int CB = VP * PF_SB(S) * C;
    unsigned int w[PF_NW(S, C, VP)];
    if (x + VP <= width) {
        pf_load_words<CB>(row + (unsigned long long)x * PF_SB(S) * C, w);
    } else {
#pragma unroll
        for (int i = 0; i < PF_NW(S, C, VP); i++)
            w[i] = 0;
        for (int i = 0; i < VP && x + i < width; i++) {
#pragma unroll
            for (int k = 0; k < C; k++) {
                const unsigned char *s = row + ((unsigned long long)(x + i) * C + k) * PF_SB(S);
                int j = i * C + k;
                if (S == 0)
                    w[j >> 2] |= (unsigned int)s[0] << ((j & 3) * 8);
                else if (S == 1)
                    w[j >> 1] |= (unsigned int)(*(const unsigned short *)s) << ((j & 1) * 16);
                else
                    w[j] = *(const unsigned int *)s;
            }
        }
    }
#pragma unroll
    for (int i = 0; i < VP; i++)
        px[i] = pf_pixel<S, C>(w, i);
}

/* Stores the chunk of VP pixels at x of row y, only those inside the width. */
template <int S, int C, int VP>
static __device__ __forceinline__ void pf_store_chunk(const pf_frame_desc &d, int y, int x,
                                                      int width, const pf_float4 *px)
{
    unsigned char *row = (unsigned char *)d.data + (unsigned long long)y * d.pitch;
    const int CB = VP * PF_SB(S) * C;
    unsigned int w[PF_NW(S, C, VP)];
#pragma unroll
    for (int i = 0; i < PF_NW(S, C, VP); i++)
        w[i] = 0;
#pragma unroll
    for (int i = 0; i < VP; i++) {
        pf_float4 v = px[i];
        if (C <= 2) {
            pf_pack<S>(w, i * C, pf_luma_rn(v));
            if (C == 2)
                pf_pack<S>(w, i * C + 1, v.w);
        } else {
            pf_pack<S>(w, i * C, v.x);
            pf_pack<S>(w, i * C + 1, v.y);
            pf_pack<S>(w, i * C + 2, v.z);
            if (C == 4)
                pf_pack<S>(w, i * C + 3, v.w);
        }
    }
    if (x + VP <= width) {
        pf_store_words<CB>(row + (unsigned long long)x * PF_SB(S) * C, w);
        return;
    }
    for (int i = 0; i < VP && x + i < width; i++) {
#pragma unroll
        for (int k = 0; k < C; k++) {
            unsigned char *s = row + ((unsigned long long)(x + i) * C + k) * PF_SB(S);
            int j = i * C + k;
            if (S == 0)
                s[0] = (unsigned char)(w[j >> 2] >> ((j & 3) * 8));
            else if (S == 1)
                *(unsigned short *)s = (unsigned short)(w[j >> 1] >> ((j & 1) * 16));
            else
                *(unsigned int *)s = w[j];
        }
    }
}

/* The sums of each of NV doubles v[0..NV) (NV a power of two, at most 32) over the
   lanes of a warp that share their bits below LO (a power of two: lanes LO apart hold
   the same quantities), for a summing reduce. In each of the first steps a lane keeps
   half of its values and adds its partner's sums of that half (partners `o` lanes
   apart, o = 16, 8, ... down to LO), so a value crosses lanes once a step, where a
   shuffle per value per step (5 NV) did it before; once one value is left, it adds over
   the remaining offsets. The lane then holds in v[0..pf_lane_sums_left<NV, LO>()) the
   sums of values *first, *first + 1, ...; the lanes with no bit of *dup set hold every
   sum once. The additions and their order are fixed: the same result every run. */
/* One halving step of pf_lane_sums on the M values left, partners O lanes apart, then
   the next; a template per step so that every index is a constant and v stays in
   registers (loops over a step's values were left rolled, and v went to local memory). */
template <int NV, int M, int O, int LO> struct pf_lane_step {
    static __device__ __forceinline__ void run(double (&v)[NV], int lane, int &idx, int &dup)
    {
        if constexpr (M > 1 && O >= LO) {
            const bool up = (lane & O) != 0;
#pragma unroll
            for (int i = 0; i < M / 2; i++) {
                const double send = up ? v[i] : v[i + M / 2];
                const double keep = up ? v[i + M / 2] : v[i];
                v[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
            }
            idx += up ? M / 2 : 0;
            pf_lane_step<NV, M / 2, O / 2, LO>::run(v, lane, idx, dup);
        } else {
            dup = O >= LO ? (2 * O - 1) & ~(LO - 1) : 0;
#pragma unroll
            for (int o = O; o >= LO && o > 0; o >>= 1)
                v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
        }
    }
};

/* The values a lane holds after pf_lane_sums. */
template <int NV, int LO> static __host__ __device__ constexpr int pf_lane_sums_left()
{
    int m = NV;
    for (int o = 16; m > 1 && o >= LO; o >>= 1)
        m >>= 1;
    return m;
}

template <int NV, int LO>
static __device__ __forceinline__ void pf_lane_sums(double (&v)[NV], int lane, int *first, int *dup)
{
    int idx = 0, d = 0;
    pf_lane_step<NV, NV, 16, LO>::run(v, lane, idx, d);
    *first = idx;
    *dup = d;
}

/* An op's result that another op of the kernel reads passes through here: an empty asm
   that NVVM cannot see through, so values are not folded across op boundaries (ptxas
   removes the moves). NVVM of CUDA 13.0 otherwise treated a value carried through
   several inlined ops (the alpha kept by grayscale and difference, then blended with
   itself) as undefined and stored garbage; tests/gpu/test_fused_chains.c runs such
   chains. A value only stored or summed does not pass here (engine/fuse.c). */
static __device__ __forceinline__ pf_float4 pf_opaque(pf_float4 v)
{
    pf_float4 r;
    asm("mov.b32 %0, %4;\n\tmov.b32 %1, %5;\n\tmov.b32 %2, %6;\n\tmov.b32 %3, %7;"
        : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
        : "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w));
    return r;
}

/* Thread-block clusters (sm_90), in PTX so that no header is needed: a barrier of every
   thread of the cluster (release and acquire: what was stored to shared memory anywhere
   in the cluster before it is seen after it), this block's rank in the cluster, and a
   store of v to the shared memory of the cluster's block `rank`, at the offset of p in
   this block's. Only sum-by-columns kernels launched in clusters (cluster != 0) call
   them, and only on sm_90 and later; elsewhere they are never reached. */
static __device__ __forceinline__ void pf_cluster_sync()
{
#if __CUDA_ARCH__ >= 900
    asm volatile(
        "barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::
            : "memory");
#endif
}
/* The same barrier in two halves: arrive early, wait later (DSMEM may be written only once
   every block of the cluster has started: a block that has not has no shared memory). */
static __device__ __forceinline__ void pf_cluster_arrive()
{
#if __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}
static __device__ __forceinline__ void pf_cluster_wait()
{
#if __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#endif
}
/* Blocks in this block's cluster: 1 where the launch made none. */
static __device__ __forceinline__ unsigned pf_cluster_size()
{
    unsigned n = 1;
#if __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
#endif
    return n;
}
static __device__ __forceinline__ unsigned pf_cluster_rank()
{
    unsigned r = 0;
#if __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
#endif
    return r;
}
static __device__ __forceinline__ void pf_cluster_st(double *p, double v, unsigned rank)
{
#if __CUDA_ARCH__ >= 900
    unsigned a = (unsigned)__cvta_generic_to_shared(p), ra;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(rank));
    asm volatile("st.shared::cluster.f64 [%0], %1;" ::"r"(ra), "d"(v) : "memory");
#else
    *p = v;
#endif
}

/* The x of pixel i (of PF_PPT) of this thread, with chunks of VP pixels: chunk c of a
   thread is the block's chunk number c * blockDim.x + threadIdx.x. */
#define PF_PX_X(VP, i)                                                                             \
    (blockIdx.x * blockDim.x * PF_PPT + ((i) / (VP)*blockDim.x + threadIdx.x) * (VP) + (i) % (VP))

#endif /* PIPEFUSE_FUSED_RT_H */
