// A transformer layer's row operations fused into one kernel each way
// (kit/fused.rs): the attention's scaled, masked soft-max, the layer norm and
// the erf GELU, forward and backward, in f32 and (soft-max, GELU) bfloat16
// storage with f32 arithmetic. Compiled to PTX by build.rs with the `cuda`
// feature.
//
// Rows are handled one warp each (32 lanes striding over the row's columns),
// several warps a block; reductions are warp shuffles, so a row's sum is
// the same for every launch (no atomics: the results are deterministic).
#include "common.cuh"

#define WARP_ROW(row, rows)                                                      \
    const uint64_t row = (uint64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; \
    const uint32_t lane = threadIdx.x & 31;                                      \
    if (row >= (rows)) return;

// y[r, j] = softmax_j(scale * x[r, j] + (mask[r / per_batch, j] > 0.5 ? 0 : -1e9))
template <typename T>
__device__ void softmax_fwd(const T *x, const float *mask, T *y, uint64_t rows, uint32_t cols,
                            uint64_t per_batch, float scale) {
    WARP_ROW(r, rows)
    const T *xr = x + r * cols;
    const float *mr = mask + (r / per_batch) * cols;
    float m = -INFINITY;
    for (uint32_t j = lane; j < cols; j += 32) {
        float v = scale * ld(xr, j) + (mr[j] > 0.5f ? 0.f : -1e9f);
        m = fmaxf(m, v);
    }
    m = warp_max(m);
    float s = 0.f;
    for (uint32_t j = lane; j < cols; j += 32) {
        s += __expf(scale * ld(xr, j) + (mr[j] > 0.5f ? 0.f : -1e9f) - m);
    }
    s = warp_sum(s);
    const float inv = 1.f / s;
    T *yr = y + r * cols;
    for (uint32_t j = lane; j < cols; j += 32) {
        st(yr, j, __expf(scale * ld(xr, j) + (mr[j] > 0.5f ? 0.f : -1e9f) - m) * inv);
    }
}

// dx[r, j] = scale * y[r, j] * (dy[r, j] - sum_k dy[r, k] y[r, k])
template <typename T>
__device__ void softmax_bwd(const T *y, const T *dy, T *dx, uint64_t rows, uint32_t cols,
                            float scale) {
    WARP_ROW(r, rows)
    const T *yr = y + r * cols;
    const T *gr = dy + r * cols;
    float d = 0.f;
    for (uint32_t j = lane; j < cols; j += 32) d += ld(yr, j) * ld(gr, j);
    d = warp_sum(d);
    T *xr = dx + r * cols;
    for (uint32_t j = lane; j < cols; j += 32) st(xr, j, scale * ld(yr, j) * (ld(gr, j) - d));
}

extern "C" __global__ void softmax_fwd_f32(const float *x, const float *mask, float *y,
                                           uint64_t rows, uint32_t cols, uint64_t per_batch,
                                           float scale) {
    softmax_fwd(x, mask, y, rows, cols, per_batch, scale);
}
extern "C" __global__ void softmax_fwd_bf16(const __nv_bfloat16 *x, const float *mask,
                                            __nv_bfloat16 *y, uint64_t rows, uint32_t cols,
                                            uint64_t per_batch, float scale) {
    softmax_fwd(x, mask, y, rows, cols, per_batch, scale);
}
extern "C" __global__ void softmax_bwd_f32(const float *y, const float *dy, float *dx,
                                           uint64_t rows, uint32_t cols, float scale) {
    softmax_bwd(y, dy, dx, rows, cols, scale);
}
extern "C" __global__ void softmax_bwd_bf16(const __nv_bfloat16 *y, const __nv_bfloat16 *dy,
                                            __nv_bfloat16 *dx, uint64_t rows, uint32_t cols,
                                            float scale) {
    softmax_bwd(y, dy, dx, rows, cols, scale);
}

// The mean and 1/sqrt(var + eps) of row r (two passes over the row: the
// variance of the centred values, as the composite layer norm computes it).
__device__ __forceinline__ void row_stats(const float *xr, uint32_t cols, uint32_t lane,
                                          float eps, float *mean, float *rstd) {
    float s = 0.f;
    for (uint32_t j = lane; j < cols; j += 32) s += xr[j];
    const float mu = warp_sum(s) / (float)cols;
    float q = 0.f;
    for (uint32_t j = lane; j < cols; j += 32) {
        const float c = xr[j] - mu;
        q += c * c;
    }
    const float var = warp_sum(q) / (float)cols;
    *mean = mu;
    *rstd = rsqrtf(var + eps);
}

// y = (x - mean) * rstd * w + b, row by row
extern "C" __global__ void layer_norm_fwd_f32(const float *x, const float *w, const float *b,
                                              float *y, uint64_t rows, uint32_t cols, float eps) {
    WARP_ROW(r, rows)
    const float *xr = x + r * cols;
    float mu, rs;
    row_stats(xr, cols, lane, eps, &mu, &rs);
    float *yr = y + r * cols;
    for (uint32_t j = lane; j < cols; j += 32) yr[j] = (xr[j] - mu) * rs * w[j] + b[j];
}

// out[0 .. rows*cols): dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w;
// out[rows*cols .. 2*rows*cols): xhat (the weight's gradient is sum_rows dy * xhat).
extern "C" __global__ void layer_norm_bwd_f32(const float *x, const float *w, const float *dy,
                                              float *out, uint64_t rows, uint32_t cols,
                                              float eps) {
    WARP_ROW(r, rows)
    const float *xr = x + r * cols;
    const float *gr = dy + r * cols;
    float mu, rs;
    row_stats(xr, cols, lane, eps, &mu, &rs);
    float sg = 0.f, sgx = 0.f;
    for (uint32_t j = lane; j < cols; j += 32) {
        const float g = gr[j] * w[j];
        const float xh = (xr[j] - mu) * rs;
        sg += g;
        sgx += g * xh;
    }
    sg = warp_sum(sg) / (float)cols;
    sgx = warp_sum(sgx) / (float)cols;
    float *dx = out + r * cols;
    float *xhat = out + rows * cols + r * cols;
    for (uint32_t j = lane; j < cols; j += 32) {
        const float xh = (xr[j] - mu) * rs;
        dx[j] = rs * (gr[j] * w[j] - sg - xh * sgx);
        xhat[j] = xh;
    }
}

#define GRID_LOOP(i, n)                                                            \
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n);    \
         i += (uint64_t)blockDim.x * gridDim.x)

// GELU with erf: y = x/2 (1 + erf(x/sqrt2)); dy/dx = (1 + erf(x/sqrt2))/2 + x phi(x)
template <typename T>
__device__ void gelu_fwd(const T *x, T *y, uint64_t n) {
    GRID_LOOP(i, n) {
        const float v = ld(x, i);
        st(y, i, 0.5f * v * (1.f + erff(v * 0.70710678118654752f)));
    }
}
template <typename T>
__device__ void gelu_bwd(const T *x, const T *g, T *out, uint64_t n) {
    GRID_LOOP(i, n) {
        const float v = ld(x, i);
        const float cdf = 0.5f * (1.f + erff(v * 0.70710678118654752f));
        const float pdf = 0.39894228040143268f * __expf(-0.5f * v * v);
        st(out, i, ld(g, i) * (cdf + v * pdf));
    }
}
extern "C" __global__ void gelu_fwd_f32(const float *x, float *y, uint64_t n) { gelu_fwd(x, y, n); }
extern "C" __global__ void gelu_fwd_bf16(const __nv_bfloat16 *x, __nv_bfloat16 *y, uint64_t n) {
    gelu_fwd(x, y, n);
}
extern "C" __global__ void gelu_bwd_f32(const float *x, const float *g, float *out, uint64_t n) {
    gelu_bwd(x, g, out, n);
}
extern "C" __global__ void gelu_bwd_bf16(const __nv_bfloat16 *x, const __nv_bfloat16 *g,
                                         __nv_bfloat16 *out, uint64_t n) {
    gelu_bwd(x, g, out, n);
}

// out[r, j] = y[r, j] + b[j]: a dense layer's bias (its gradient, the column sums, is a product)
template <typename T>
__device__ void bias_add(const T *y, const T *b, T *out, uint64_t n, uint32_t cols) {
    GRID_LOOP(i, n) st(out, i, ld(y, i) + ld(b, i % cols));
}
extern "C" __global__ void bias_add_f32(const float *y, const float *b, float *out, uint64_t n,
                                        uint32_t cols) {
    bias_add(y, b, out, n, cols);
}
extern "C" __global__ void bias_add_bf16(const __nv_bfloat16 *y, const __nv_bfloat16 *b,
                                         __nv_bfloat16 *out, uint64_t n, uint32_t cols) {
    bias_add(y, b, out, n, cols);
}
