// Rosetta's own CUDA kernels, compiled to PTX by build.rs when the `cuda`
// feature is on and loaded by src/models/rows.rs and src/models/optim.rs.
//
// candle's index_add/scatter kernels give each thread one column and loop
// over every id, so the gradient of a row gather runs almost serially; these
// give every (id, column) entry its own thread. All loops are grid-stride.
#include <stdint.h>

#define GRID_LOOP(i, n) \
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n); \
         i += (uint64_t)blockDim.x * gridDim.x)

#define ROW_KERNELS(T, S)                                                              \
    /* out[j, c] = table[ids[j], c] */                                                 \
    extern "C" __global__ void gather_rows_##S(const T *table, const uint32_t *ids,    \
                                               T *out, uint64_t n_ids, uint64_t k) {   \
        GRID_LOOP(i, n_ids * k) {                                                      \
            uint64_t j = i / k, c = i - j * k;                                         \
            out[i] = table[(uint64_t)ids[j] * k + c];                                  \
        }                                                                              \
    }                                                                                  \
    /* out[ids[j], c] += src[j, c] (out zeroed by the caller) */                       \
    extern "C" __global__ void scatter_add_rows_##S(const T *src, const uint32_t *ids, \
                                                    T *out, uint64_t n_ids,            \
                                                    uint64_t k) {                      \
        GRID_LOOP(i, n_ids * k) {                                                      \
            uint64_t j = i / k, c = i - j * k;                                         \
            atomicAdd(&out[(uint64_t)ids[j] * k + c], src[i]);                         \
        }                                                                              \
    }                                                                                  \
    /* dst[ids[j], c] = src[j, c] (ids distinct) */                                    \
    extern "C" __global__ void set_rows_##S(T *dst, const T *src, const uint32_t *ids, \
                                            uint64_t n_ids, uint64_t k) {              \
        GRID_LOOP(i, n_ids * k) {                                                      \
            uint64_t j = i / k, c = i - j * k;                                         \
            dst[(uint64_t)ids[j] * k + c] = src[i];                                    \
        }                                                                              \
    }

ROW_KERNELS(float, f32)
ROW_KERNELS(double, f64)

// Adam, as the fused CPU kernels in optim.rs: m <- b m + (1 - b) g (or g^2)
extern "C" __global__ void adam_moment_f32(float *m, const float *g, float b, float c,
                                           int square, uint64_t n) {
    GRID_LOOP(i, n) {
        float x = g[i];
        if (square) x = x * x;
        m[i] = b * m[i] + c * x;
    }
}

// theta <- theta * decay - lr * (m * sm) / (sqrt(v * sv) + eps)
extern "C" __global__ void adam_update_f32(float *theta, const float *m, const float *v,
                                           float lr, float decay, float sm, float sv,
                                           float eps, uint64_t n) {
    GRID_LOOP(i, n) {
        theta[i] = theta[i] * decay - lr * (m[i] * sm) / (sqrtf(v[i] * sv) + eps);
    }
}
