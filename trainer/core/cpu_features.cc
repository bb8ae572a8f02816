#include "trainer/core/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>

namespace sf::cpu {
namespace {

struct Features {
  bool avx512 = false;
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
};

Features Detect() {
  Features f;
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const bool os_avx512 = [] {
    unsigned xa, xb, xc, xd;
    if (!__get_cpuid(1, &xa, &xb, &xc, &xd) || !(xc & (1u << 27))) return false;  // OSXSAVE
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0xe6) == 0xe6;  // XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM
  }();
  const bool f512 = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30),
             vl = b & (1u << 31);
  f.avx512 = os_avx512 && f512 && dq && bw && vl;
  f.amx_bf16 = (d & (1u << 22)) && (d & (1u << 24));  // AMX-BF16 and AMX-TILE
  unsigned a1, b1, c1, d1;
  if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) f.avx512_bf16 = f.avx512 && (a1 & (1u << 5));
  return f;
}

const Features& Get() {
  static const Features f = Detect();
  return f;
}

}  // namespace

bool HasAvx512() { return Get().avx512; }
bool HasAvx512Bf16() { return Get().avx512_bf16; }
bool HasAmxBf16() { return Get().amx_bf16; }

bool EnableAmx() {
  static const bool granted = [] {
    if (!HasAmxBf16()) return false;
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return granted;
}

std::string Describe() {
  return std::string("avx512=") + (HasAvx512() ? "1" : "0") +
         " avx512_bf16=" + (HasAvx512Bf16() ? "1" : "0") +
         " amx_bf16=" + (HasAmxBf16() ? "1" : "0");
}

}  // namespace sf::cpu
