// Element-wise activations fused into one kernel each way (nn::softplus),
// compiled to PTX by build.rs with the `cuda` feature.
#include <stdint.h>

#define GRID_LOOP(i, n) \
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n); \
         i += (uint64_t)blockDim.x * gridDim.x)

// y = max(x, 0) + log(1 + exp(-|x|)); its gradient g * sigmoid(x)
#define ACT_KERNELS(T, S, EXP, LOG1P, ABS, MAX)                                         \
    extern "C" __global__ void softplus_##S(const T *x, T *y, uint64_t n) {             \
        GRID_LOOP(i, n) { y[i] = MAX(x[i], (T)0) + LOG1P(EXP(-ABS(x[i]))); }            \
    }                                                                                   \
    extern "C" __global__ void softplus_grad_##S(const T *x, const T *g, T *out,        \
                                                 uint64_t n) {                          \
        GRID_LOOP(i, n) { out[i] = g[i] / ((T)1 + EXP(-x[i])); }                        \
    }

ACT_KERNELS(float, f32, expf, log1pf, fabsf, fmaxf)
ACT_KERNELS(double, f64, exp, log1p, fabs, fmax)
