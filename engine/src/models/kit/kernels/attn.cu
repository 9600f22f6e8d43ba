// A transformer layer's whole self-attention as one kernel forward and two
// backward (kit/attention.rs): out = softmax(scale · Q Kᵀ + mask) V per
// (text, head), read straight from the packed [batch, tokens, 3·hidden]
// product of the query, key and value layers and written as the
// [batch, tokens, hidden] context; the tokens × tokens scores and
// probabilities live in shared memory only, never in device memory, and the
// backward pass recomputes them (as flash attention does).
//
// One warp a query row (forward, dQ) or a key row (dK, dV), several warps a
// block of one (text, head); a warp keeps its row of scores in shared
// memory. Storage f32 or bfloat16, arithmetic f32. Sums are warp shuffles
// and fixed-order loops: no atomics, the same figures at every launch.
// Compiled to PTX by build.rs with the `cuda` feature.
#include "common.cuh"

template <typename T>
__device__ __forceinline__ float dot(const T *a, const T *b, uint32_t d) {
    float acc = 0.f;
    for (uint32_t e = 0; e < d; ++e) acc += ld(a, e) * ld(b, e);
    return acc;
}

// The geometry every kernel shares: blockIdx.x = text · row_blocks + row
// block, blockIdx.y = head; warp w of the block takes row
// (blockIdx.x % row_blocks) · warps + w.
#define ATTN_SETUP                                                                  \
    const uint32_t warps = blockDim.x / 32;                                         \
    const uint32_t w = threadIdx.x / 32, lane = threadIdx.x & 31;                   \
    const uint32_t row_blocks = (t + warps - 1) / warps;                            \
    const uint64_t bi = blockIdx.x / row_blocks;                                    \
    const uint32_t row = (blockIdx.x % row_blocks) * warps + w;                     \
    const uint32_t n = blockIdx.y;                                                  \
    if (bi >= b || row >= t) return;                                                \
    const uint64_t h = (uint64_t)heads * d, W = 3 * h;                              \
    const T *qb = qkv + bi * t * W + (uint64_t)n * d; /* q_i = qb + i·W */          \
    const T *kb = qb + h;                                                           \
    const T *vb = kb + h;                                                           \
    const float *mb = mask + bi * t;                                                \
    extern __shared__ float smem[];

__device__ __forceinline__ float key_bias(const float *mb, uint32_t j) {
    return mb[j] > 0.5f ? 0.f : -1e9f;
}

// sh[j] = exp(s_j − m) for query row q, with m the row's max; returns the
// row's sum l and sets *mx = m.
template <typename T>
__device__ float score_row(const T *q, const T *kb, const float *mb, uint64_t W, uint32_t t,
                           uint32_t d, float scale, uint32_t lane, float *sh, float *mx) {
    float m = -INFINITY;
    for (uint32_t j = lane; j < t; j += 32) {
        const float s = scale * dot(q, kb + j * W, d) + key_bias(mb, j);
        sh[j] = s;
        m = fmaxf(m, s);
    }
    m = warp_max(m);
    float l = 0.f;
    for (uint32_t j = lane; j < t; j += 32) {
        const float e = __expf(sh[j] - m);
        sh[j] = e;
        l += e;
    }
    l = warp_sum(l);
    __syncwarp();
    *mx = m;
    return l;
}

// out[bi, i, n·d + e] = Σ_j p_ij v_j[e]
template <typename T>
__device__ void attn_fwd(const T *qkv, const float *mask, T *out, uint32_t b, uint32_t t,
                         uint32_t heads, uint32_t d, float scale) {
    ATTN_SETUP
    float *sh = smem + (uint64_t)w * t;
    float m;
    const float inv = 1.f / score_row(qb + row * W, kb, mb, W, t, d, scale, lane, sh, &m);
    T *o = out + (bi * t + row) * h + (uint64_t)n * d;
    for (uint32_t e = lane; e < d; e += 32) {
        float acc = 0.f;
        for (uint32_t j = 0; j < t; ++j) acc += sh[j] * ld(vb + j * W, e);
        st(o, e, acc * inv);
    }
}

// dQ rows: dq_i = scale Σ_j p_ij (dO_i·v_j − D_i) k_j, with D_i = dO_i·o_i;
// stats[0][bi, n, i] = the row's log-sum-exp, stats[1][bi, n, i] = D_i.
template <typename T>
__device__ void attn_bwd_q(const T *qkv, const float *mask, const T *o, const T *dout, T *dqkv,
                           float *stats, uint32_t b, uint32_t t, uint32_t heads, uint32_t d,
                           float scale) {
    ATTN_SETUP
    float *sh = smem + (uint64_t)w * t;
    float m;
    const float l = score_row(qb + row * W, kb, mb, W, t, d, scale, lane, sh, &m);
    const float inv = 1.f / l;
    const T *oi = o + (bi * t + row) * h + (uint64_t)n * d;
    const T *gi = dout + (bi * t + row) * h + (uint64_t)n * d;
    float di = 0.f;
    for (uint32_t e = lane; e < d; e += 32) di += ld(gi, e) * ld(oi, e);
    di = warp_sum(di);
    for (uint32_t j = lane; j < t; j += 32) {
        const float p = sh[j] * inv;
        sh[j] = p * (dot(gi, vb + j * W, d) - di);
    }
    __syncwarp();
    T *dq = dqkv + (bi * t + row) * W + (uint64_t)n * d;
    for (uint32_t e = lane; e < d; e += 32) {
        float acc = 0.f;
        for (uint32_t j = 0; j < t; ++j) acc += sh[j] * ld(kb + j * W, e);
        st(dq, e, scale * acc);
    }
    if (lane == 0) {
        const uint64_t at = (bi * heads + n) * t + row;
        stats[at] = m + logf(l);
        stats[(uint64_t)b * heads * t + at] = di;
    }
}

// dK and dV rows: dv_j = Σ_i p_ij dO_i, dk_j = scale Σ_i p_ij (dO_i·v_j − D_i) q_i,
// p_ij = exp(s_ij − lse_i) from attn_bwd_q's stats.
template <typename T>
__device__ void attn_bwd_kv(const T *qkv, const float *mask, const T *dout, const float *stats,
                            T *dqkv, uint32_t b, uint32_t t, uint32_t heads, uint32_t d,
                            float scale) {
    ATTN_SETUP
    float *shp = smem + (uint64_t)w * 2 * t;
    float *shs = shp + t;
    const T *kj = kb + row * W;
    const T *vj = vb + row * W;
    const float bias = key_bias(mb, row);
    const float *lse = stats + (bi * heads + n) * t;
    const float *dd = stats + (uint64_t)b * heads * t + (bi * heads + n) * t;
    const T *gb = dout + bi * t * h + (uint64_t)n * d; /* dO_i = gb + i·h */
    for (uint32_t i = lane; i < t; i += 32) {
        const float s = scale * dot(qb + i * W, kj, d) + bias;
        const float p = __expf(s - lse[i]);
        shp[i] = p;
        shs[i] = p * (dot(gb + i * h, vj, d) - dd[i]);
    }
    __syncwarp();
    T *dk = dqkv + (bi * t + row) * W + h + (uint64_t)n * d;
    T *dv = dk + h;
    for (uint32_t e = lane; e < d; e += 32) {
        float ak = 0.f, av = 0.f;
        for (uint32_t i = 0; i < t; ++i) {
            ak += shs[i] * ld(qb + i * W, e);
            av += shp[i] * ld(gb + i * h, e);
        }
        st(dk, e, scale * ak);
        st(dv, e, av);
    }
}

#define ATTN_KERNELS(T, S)                                                                  \
    extern "C" __global__ void attn_fwd_##S(const T *qkv, const float *mask, T *out,         \
                                            uint32_t b, uint32_t t, uint32_t heads,          \
                                            uint32_t d, float scale) {                       \
        attn_fwd(qkv, mask, out, b, t, heads, d, scale);                                     \
    }                                                                                        \
    extern "C" __global__ void attn_bwd_q_##S(const T *qkv, const float *mask, const T *o,   \
                                              const T *dout, T *dqkv, float *stats,          \
                                              uint32_t b, uint32_t t, uint32_t heads,        \
                                              uint32_t d, float scale) {                     \
        attn_bwd_q(qkv, mask, o, dout, dqkv, stats, b, t, heads, d, scale);                  \
    }                                                                                        \
    extern "C" __global__ void attn_bwd_kv_##S(const T *qkv, const float *mask,              \
                                               const T *dout, const float *stats, T *dqkv,   \
                                               uint32_t b, uint32_t t, uint32_t heads,       \
                                               uint32_t d, float scale) {                    \
        attn_bwd_kv(qkv, mask, dout, stats, dqkv, b, t, heads, d, scale);                    \
    }

ATTN_KERNELS(float, f32)
ATTN_KERNELS(__nv_bfloat16, bf16)
