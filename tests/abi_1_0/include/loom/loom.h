/* loom/loom.h — every header of Loom's plugin C ABI. */
#ifndef LOOM_LOOM_H
#define LOOM_LOOM_H
#include "loom/abi.h"
#include "loom/dtype.h"
#include "loom/backend.h"
#include "loom/kv.h"
#include "loom/quant.h"
#include "loom/sampler.h"
#include "loom/drafter.h"
#endif
