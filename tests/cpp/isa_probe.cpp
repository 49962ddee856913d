// Objects for the tests of check_cpu_variants.cmake itself (tests/cpp/
// CMakeLists.txt, cpu_variant_check_*): each holds a few hand-picked
// instructions, written as inline assembly so that no compiler flag is
// needed and none can change them. TMM_ISA_PROBE_<set> selects the set; the
// function is never called.
//   sse2        plain x86-64                        passes "default"
//   avx2        VEX ymm AVX2 + FMA                   passes "avx2"
//   avx512      EVEX zmm AVX-512F                    passes "avx512"
//   vex_gpr     shlx (BMI2: VEX, no v mnemonic,      fails "default"
//               no vector register)
//   vex_xmm     vaddps on xmm (AVX)                  fails "default"
//   ssse3       pshufb (legacy encoding)             fails "default"
//   evex_ymm    vpternlogd on ymm (AVX-512VL: EVEX,  fails "avx2"
//               no zmm, no mask, ymm0-15) + AVX2
//   f16c        vcvtph2ps (VEX, not AVX2) + AVX2     fails "avx2"
//   vnni        vpdpbusd on zmm (AVX-512 VNNI)       fails "avx512"
// The instructions are spelled as strings: the assembler takes any of them,
// whatever the compiler's target flags.
#if defined(TMM_ISA_PROBE_sse2)
#define TMM_ISA_PROBE_ASM "paddd %xmm1, %xmm0\n\taddps %xmm1, %xmm0"
#elif defined(TMM_ISA_PROBE_avx2)
#define TMM_ISA_PROBE_ASM "vpaddd %ymm1, %ymm2, %ymm3\n\tvfmadd231ps %ymm1, %ymm2, %ymm3"
#elif defined(TMM_ISA_PROBE_avx512)
#define TMM_ISA_PROBE_ASM "vpternlogd $0x96, %zmm2, %zmm1, %zmm0"
#elif defined(TMM_ISA_PROBE_vex_gpr)
#define TMM_ISA_PROBE_ASM "shlx %rax, %rdi, %rax"
#elif defined(TMM_ISA_PROBE_vex_xmm)
#define TMM_ISA_PROBE_ASM "vaddps %xmm1, %xmm2, %xmm3"
#elif defined(TMM_ISA_PROBE_ssse3)
#define TMM_ISA_PROBE_ASM "pshufb %xmm1, %xmm0"
#elif defined(TMM_ISA_PROBE_evex_ymm)
#define TMM_ISA_PROBE_ASM "vpaddd %ymm1, %ymm2, %ymm3\n\tvpternlogd $0x96, %ymm2, %ymm1, %ymm0"
#elif defined(TMM_ISA_PROBE_f16c)
#define TMM_ISA_PROBE_ASM "vpaddd %ymm1, %ymm2, %ymm3\n\tvcvtph2ps %xmm1, %ymm0"
#elif defined(TMM_ISA_PROBE_vnni)
#define TMM_ISA_PROBE_ASM "vpternlogd $0x96, %zmm2, %zmm1, %zmm0\n\tvpdpbusd %zmm1, %zmm2, %zmm3"
#else
#error "isa_probe.cpp: define one TMM_ISA_PROBE_<set>"
#endif

// A basic asm statement (no operands): the % signs are the assembler's. It
// clobbers registers the compiler does not know of, which is harmless: the
// function is never called.
extern "C" void tmm_isa_probe() { asm volatile(TMM_ISA_PROBE_ASM); }
