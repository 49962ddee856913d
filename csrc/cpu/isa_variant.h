// Included first by every source compiled once per instruction set (the hot
// kernels: CMakeLists.txt, TMM_CPU_VARIANT_SOURCES). CMake defines
// TMM_CPU_VARIANT (default, avx2, avx512 or native); everything such a
// source defines lives in namespace tmm::cpu::TMM_CPU_CAPABILITY (isa_avx2,
// ...), so no two variants define the same symbol. Otherwise the linker
// would keep one copy of an inline function or template for all of them,
// possibly the AVX-512 one for an AVX2 caller. The build also links each
// variant into one object and hides every symbol but its table
// (kernel_table.h), which covers the standard library's templates too.
//
// These sources must not run code at load time (no namespace-scope objects
// with constructors): it would run on every CPU, whatever it supports.
#pragma once

#ifndef TMM_CPU_VARIANT
#error "a per-instruction-set source: CMakeLists.txt defines TMM_CPU_VARIANT for it"
#endif

#define TMM_CPU_CAT_(a, b) a##b
#define TMM_CPU_CAT(a, b) TMM_CPU_CAT_(a, b)
#define TMM_CPU_CAPABILITY TMM_CPU_CAT(isa_, TMM_CPU_VARIANT)
