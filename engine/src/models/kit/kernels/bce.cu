// A sigmoid decoder's cross-entropy from its product, the bias folded in
// (kit/logit_bce.rs), compiled to PTX by build.rs with the `cuda` feature.
//   loss = sum softplus(z + c[col]) - sum over ones (z + c[col])
//   grad = g * (sigmoid(z + c[col]) - 1_ones)
// z is r x v (row-major, n = r * v values), c has v values, ones are flat
// positions in z. The reducing kernels run in blocks of 256 threads and sum
// in double; a position at or past n makes the loss NaN and is skipped by the
// gradient.
#include <stdint.h>

#define GRID_LOOP(i, n) \
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n); \
         i += (uint64_t)blockDim.x * gridDim.x)

#define THREADS 256

// s[0] = the sum of s[0..THREADS) (a fixed tree: the same order every run)
__device__ void block_sum(double *s) {
    __syncthreads();
    for (unsigned k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
}

#define BCE_KERNELS(T, S, EXP, LOG1P, ABS, MAX)                                           \
    extern "C" __global__ void bias_bce_partial_##S(const T *z, const T *c,               \
                                                    const uint32_t *ones, uint64_t n,     \
                                                    uint64_t v, uint64_t n_ones,          \
                                                    double *partial) {                    \
        __shared__ double s[THREADS];                                                     \
        double acc = 0.0;                                                                 \
        GRID_LOOP(i, n) {                                                                 \
            T x = z[i] + c[i % v];                                                        \
            acc += (double)(MAX(x, (T)0) + LOG1P(EXP(-ABS(x))));                          \
        }                                                                                 \
        GRID_LOOP(j, n_ones) {                                                            \
            uint64_t p = ones[j];                                                         \
            acc -= p < n ? (double)(z[p] + c[p % v]) : nan("");                           \
        }                                                                                 \
        s[threadIdx.x] = acc;                                                             \
        block_sum(s);                                                                     \
        if (threadIdx.x == 0) partial[blockIdx.x] = s[0];                                 \
    }                                                                                     \
    extern "C" __global__ void bias_bce_total_##S(const double *partial, uint64_t m,      \
                                                  T *out) {                               \
        __shared__ double s[THREADS];                                                     \
        double acc = 0.0;                                                                 \
        for (uint64_t j = threadIdx.x; j < m; j += THREADS) acc += partial[j];            \
        s[threadIdx.x] = acc;                                                             \
        block_sum(s);                                                                     \
        if (threadIdx.x == 0) out[0] = (T)s[0];                                           \
    }                                                                                     \
    extern "C" __global__ void bias_bce_grad_##S(const T *z, const T *c, uint64_t n,      \
                                                 uint64_t v, T g, T *out) {               \
        GRID_LOOP(i, n) { out[i] = g / ((T)1 + EXP(-(z[i] + c[i % v]))); }                \
    }                                                                                     \
    extern "C" __global__ void bias_bce_grad_ones_##S(const uint32_t *ones, uint64_t n,   \
                                                      uint64_t n_ones, T g, T *out) {     \
        GRID_LOOP(j, n_ones) {                                                            \
            uint64_t p = ones[j];                                                         \
            if (p < n) atomicAdd(&out[p], -g);                                            \
        }                                                                                 \
    }

BCE_KERNELS(float, f32, expf, log1pf, fabsf, fmaxf)
BCE_KERNELS(double, f64, exp, log1p, fabs, fmax)
