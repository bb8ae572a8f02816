// What the AMX kernels share (attention_amx.cc, gemm_amx_bf16.cc): the one tile configuration
// they use and the names of its eight registers. Include only in translation units compiled with
// -mamx-tile -mamx-bf16, and call only after cpu::EnableAmx() succeeded.
//
// Every register holds 16 rows of 64 bytes: a C tile is 16 x 16 fp32, an A tile 16 rows of 32
// bf16 (16 pairs along the product's K), a B tile 16 pairs by 16 columns ("words", VNNI).
#pragma once

#include <immintrin.h>

#include <cstdint>

// Four C tiles (2 x 2), two A, two B. (Macros: GCC's tile intrinsics paste the register number
// into the instruction text.)
#define kC00 0
#define kC10 1
#define kC01 2
#define kC11 3
#define kA0 4
#define kA1 5
#define kB0 6
#define kB1 7

namespace sf::cpu_internal {

// Palette 1 with all eight registers at 16 rows of 64 bytes, for this thread until
// _tile_release().
inline void ConfigureTiles16x64() {
  struct alignas(64) TileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
  } cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

}  // namespace sf::cpu_internal
