// Run-time CPU feature detection for dispatching the engine's CPU kernels.
//
// All queries are cheap (answers are computed once) and thread-safe.
#pragma once

#include <string>

namespace sf::cpu {

bool HasAvx512();      // AVX-512 F/BW/VL/DQ
bool HasAvx512Bf16();  // AVX512_BF16 (vcvtne2ps2bf16, vdpbf16ps)
bool HasAmxBf16();     // AMX tiles with the BF16 unit

// Asks the kernel for permission to use the AMX tile data state (arch_prctl
// ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 18) once per process. Returns true when the CPU has
// AMX and the permission is granted (or already was); false otherwise. Safe to call repeatedly
// and from several threads. oneDNN asks for it too; code of ours issuing AMX instructions must
// call this first.
bool EnableAmx();

// One line describing the CPU's relevant features ("avx512=1 avx512_bf16=1 amx_bf16=0").
std::string Describe();

}  // namespace sf::cpu
