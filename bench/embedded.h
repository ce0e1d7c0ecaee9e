// SPDX-License-Identifier: BSD-3-Clause
// Shared start of the benchmarks that need EAL: attach embedded (imago_attach_embedded's
// defaults: --no-huge, nodes 1 and 2 over a net_ring pair, engines on lcore 1).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>

#include "api/imago.h"

/** Initialise Google Benchmark with the command line and attach. @return nullptr (said why). */
inline imago_t* bench_init_attach(int* argc, char** argv) {
  benchmark::Initialize(argc, argv);
  imago_t* im = nullptr;
  if (int rc = imago_attach_embedded(0, nullptr, &im); rc != 0) {
    std::fprintf(stderr, "imago_attach_embedded: %d\n", rc);
    return nullptr;
  }
  return im;
}
