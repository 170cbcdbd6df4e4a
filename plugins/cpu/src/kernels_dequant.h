// Matmul kernels for weight types without a tuned kernel (dequantize_more.h): each weight row is
// decoded to floats once per call and dotted with float activation rows. Correct for every type the
// reference decodes, at the speed of an F32 matmul plus the decoding; the tuned kernels (integer dot
// products on the blocks) are the next step for the common ones (Q5_K).
#pragma once

#include "kernels.h"

namespace loom::cpu {

// The kernels for `type`, reading float activation rows; {nullptr, nullptr} when the type has no
// reference decoder.
WeightKernels dequant_kernels(loom_dtype type, const Kernels& k);

}  // namespace loom::cpu
