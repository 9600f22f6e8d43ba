// The LSTM cell of src/models/lstm.rs as one kernel forward and one backward,
// compiled to PTX by build.rs with the `cuda` feature. Rows are (direction,
// text) pairs; gates are i, f, g, o (each H wide); the state is [h | c]; a
// mask of 0 keeps the previous state (padding).
#include <stdint.h>

#define GRID_LOOP(i, n) \
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n); \
         i += (uint64_t)blockDim.x * gridDim.x)

#define LSTM_KERNELS(T, S, EXP, TANH)                                                  \
    __device__ T sig_##S(T x) { return (T)1 / ((T)1 + EXP(-x)); }                      \
    /* out (rows, 2H) = the new [h | c] */                                             \
    extern "C" __global__ void lstm_cell_##S(const T *gates, const T *st, const T *m,  \
                                             T *out, uint64_t rows, uint64_t H) {      \
        GRID_LOOP(i, rows * H) {                                                       \
            uint64_t r = i / H, j = i - r * H;                                         \
            const T *a = gates + r * 4 * H;                                            \
            T ig = sig_##S(a[j]), fg = sig_##S(a[H + j]);                              \
            T gg = TANH(a[2 * H + j]), og = sig_##S(a[3 * H + j]);                     \
            T hp = st[r * 2 * H + j], cp = st[r * 2 * H + H + j];                      \
            T cn = fg * cp + ig * gg;                                                  \
            T hn = og * TANH(cn);                                                      \
            T mm = m[r];                                                               \
            out[r * 2 * H + j] = mm * hn + ((T)1 - mm) * hp;                           \
            out[r * 2 * H + H + j] = mm * cn + ((T)1 - mm) * cp;                       \
        }                                                                              \
    }                                                                                  \
    /* out (rows, 6H) = [d gates (4H) | d h_prev | d c_prev] from g = d [h | c] */     \
    extern "C" __global__ void lstm_cell_grad_##S(const T *gates, const T *st,         \
                                                  const T *m, const T *g, T *out,      \
                                                  uint64_t rows, uint64_t H) {         \
        GRID_LOOP(i, rows * H) {                                                       \
            uint64_t r = i / H, j = i - r * H;                                         \
            const T *a = gates + r * 4 * H;                                            \
            T ig = sig_##S(a[j]), fg = sig_##S(a[H + j]);                              \
            T gg = TANH(a[2 * H + j]), og = sig_##S(a[3 * H + j]);                     \
            T cp = st[r * 2 * H + H + j];                                              \
            T cn = fg * cp + ig * gg;                                                  \
            T tc = TANH(cn);                                                           \
            T mm = m[r];                                                               \
            T dh = g[r * 2 * H + j], dc = g[r * 2 * H + H + j];                        \
            T dhn = mm * dh;                                                           \
            T dcn = mm * dc + dhn * og * ((T)1 - tc * tc);                             \
            T *o = out + r * 6 * H;                                                    \
            o[j] = dcn * gg * ig * ((T)1 - ig);                                        \
            o[H + j] = dcn * cp * fg * ((T)1 - fg);                                    \
            o[2 * H + j] = dcn * ig * ((T)1 - gg * gg);                                \
            o[3 * H + j] = dhn * tc * og * ((T)1 - og);                                \
            o[4 * H + j] = ((T)1 - mm) * dh;                                           \
            o[5 * H + j] = ((T)1 - mm) * dc + dcn * fg;                                \
        }                                                                              \
    }

LSTM_KERNELS(float, f32, expf, tanhf)
LSTM_KERNELS(double, f64, exp, tanh)
