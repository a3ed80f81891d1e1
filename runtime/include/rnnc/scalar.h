// The scalar formulas of rnnc's pointwise functions, written once: the compiler
// (its interpreter and constant folder), rnnc/cpu.h and the CUDA prelude all
// include this text. It is included inside a namespace that has math::exp,
// math::fast_exp (an exp the target may approximate), math::log1p, math::min
// and math::max, with RNNC_SCALAR defined as the functions' qualifiers.
template <class T> RNNC_SCALAR T sigmoid(T x) { return T(1) / (T(1) + math::fast_exp(-x)); }
template <class T> RNNC_SCALAR T softplus(T x) { return x > T(20) ? x : math::log1p(math::exp(x)); }
template <class T> RNNC_SCALAR T hard_sigmoid(T x) { return math::min(math::max(x / T(6) + T(0.5), T(0)), T(1)); }
template <class T> RNNC_SCALAR T hard_sigmoid_grad(T x) { return x > T(-3) && x < T(3) ? T(1) / T(6) : T(0); }
template <class T> RNNC_SCALAR T silu(T x) { return x * sigmoid(x); }
template <class T> RNNC_SCALAR T step(T x) { return x > T(0) ? T(1) : T(0); }
template <class T> RNNC_SCALAR T sign(T x) { return x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0); }
