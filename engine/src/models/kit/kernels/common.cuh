// What the kernels of kit/fused.rs (tf.cu) and kit/attention.rs (attn.cu)
// share: loads and stores of f32 or bfloat16 storage (f32 arithmetic) and
// warp-shuffle reductions (the same sum at every launch: no atomics).
#pragma once
#include <stdint.h>
#include <cuda_bf16.h>

__device__ __forceinline__ float ld(const float *p, uint64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p, uint64_t i) {
    return __bfloat162float(p[i]);
}
__device__ __forceinline__ void st(float *p, uint64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__nv_bfloat16 *p, uint64_t i, float v) {
    p[i] = __float2bfloat16(v);
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
