// The registered analyses (kernalyse/pipeline.h): one file each, one line each in pipeline.cpp's
// registry list. Each descriptor is built once, on first use.
#pragma once

#include "kernalyse/pipeline.h"

namespace kernalyse::registry {

const Analysis& summary();
const Analysis& gaps();
const Analysis& overlap();
const Analysis& breakdown();
const Analysis& idle();
const Analysis& ranges();
const Analysis& energy();
const Analysis& stragglers();
const Analysis& roofline();
const Analysis& hints();
const Analysis& critical_path();
const Analysis& alltoall();

// The top-N cut an analysis uses when --top is not given.
inline int top_or(const AnalysisContext& ctx, int fallback) {
  return ctx.options().top > 0 ? ctx.options().top : fallback;
}

}  // namespace kernalyse::registry
