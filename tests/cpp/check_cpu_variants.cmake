# Checks the objects of one CPU kernel variant (a CTest test, see
# tests/cpp/CMakeLists.txt; cmake -DVARIANT=... -DOBJECTS=a.o|b.o -P this):
#   - no instruction above the variant's target (the runtime dispatch,
#     csrc/cpu/capability.cpp, checks only that target), read from the
#     disassembly WITH the raw bytes, so the encoding is seen, not guessed
#     from register names:
#       default  no VEX (first opcode byte c4/c5) or EVEX (62) instruction:
#                no AVX of any width, no BMI, no AVX-512 on xmm; and no
#                legacy-encoded instruction above SSE2 (SSE3, SSSE3,
#                SSE4.1/4.2, POPCNT, LZCNT, MOVBE): plain x86-64;
#       avx2     (AVX2 + FMA) no EVEX instruction (AVX-512 of any width,
#                AVX-512VL on xmm/ymm included), and none of the VEX-encoded
#                extensions it does not check (F16C, BMI1/2, AVX-VNNI,
#                AVX-IFMA, AVX-NE-CONVERT, VAES, VPCLMULQDQ, GFNI, AMX, ...);
#                and some ymm, so its flags took effect;
#       avx512   (F/BW/DQ/VL) none of the later AVX-512 extensions (VNNI,
#                IFMA, VBMI/VBMI2, BITALG, VPOPCNTDQ, BF16, FP16, CD, ...)
#                nor BMI; and some EVEX instruction, so its flags took effect;
#     In 64-bit mode c4/c5 (LES/LDS) and 62 (BOUND) are invalid as legacy
#     opcodes, so an instruction whose first byte after legacy and REX
#     prefixes is one of them is VEX/EVEX encoded;
#   - no code run at load time (.init_array/.ctors), which would run on any
#     CPU (not checked under sanitizers, which add their own constructors);
#   - ISOLATED: the only global symbol is the variant's table,
#     tmm_cpu_kernels_<variant> (CMakeLists.txt, CPU kernels).
# tests/cpp/isa_probe.cpp and the cpu_variant_check_* tests show that each
# rule fires.
string(REPLACE "|" ";" OBJECTS "${OBJECTS}")

# One instruction line of `objdump -d`: "  4:\t62 f3 75 28 25 c2 96 \tvpternlogd ...";
# a long instruction's further bytes follow on lines without a mnemonic.
set(_line "^ *[0-9a-f]+:\t")
set(_prefixes "((26|2e|36|3e|64|65|66|67|f0|f2|f3|4[0-9a-f]) )*")
set(_evex "${_line}${_prefixes}62 [0-9a-f ]*\t")
set(_vex "${_line}${_prefixes}(c4|c5) [0-9a-f ]*\t")
# The mnemonic, after objdump's pseudo prefixes such as {vex} / {evex}.
set(_mnemonic "${_line}[0-9a-f ]+\t([{][a-z0-9]+[}] )?")
set(_bmi "(andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx)[lq]?( |$)")
set(_above_sse2 "addsubp[sd]|h(add|sub)p[sd]|lddqu|movddup|movs[hl]dup|fisttp|pabs[bwd]|palignr|ph(add|sub)(w|d|sw)"
    "|pmaddubsw|pmulhrsw|pshufb|psign[bwd]|blendv?p[sd]|dpp[sd]|extractps|insertps|movntdqa|mpsadbw|packusdw"
    "|pblend(vb|w)|pcmp(eq|gt)q|pextr[bdq]|phminposuw|pinsr[bdq]|pm(ax|in)(sb|sd|ud|uw)|pmov[sz]x|pmuldq"
    "|pmulld|ptest|round[ps][sd]|pcmp[ei]str[im]|crc32|popcnt|lzcnt|movbe")
string(JOIN "" _above_sse2 ${_above_sse2})
set(_later_vex "vcvtph2ps|vcvtps2ph|vpdp[bw]|vpmadd52|vcvtne|vbcstne|vaes|vpclmulqdq|vgf2p8|vsha512|vsm[34]"
    "|tile|tdp|ldtilecfg|sttilecfg")
string(JOIN "" _later_vex ${_later_vex})
set(_later_avx512 "vpdp[bw]|vpmadd52|vcvtne|vbcstne|vdpbf16ps|vpermb|vperm[it]2b|vpmultishiftqb|vpcompress[bw]"
    "|vpexpand[bw]|vpsh[lr]d|vpopcnt|vpshufbitqmb|vpconflict|vplzcnt|vpbroadcastm|vp2intersect|vaes|vpclmulqdq"
    "|vgf2p8|vexp2|vrcp28|vrsqrt28|v(gather|scatter)pf|vsha512|vsm[34]|tile|tdp|ldtilecfg|sttilecfg|vmovw|vmovsh"
    "|v(add|sub|mul|div|min|max|sqrt|rcp|rsqrt|scalef|getexp|getmant|reduce|rndscale|fpclass|cmp|f(n?m(add|sub)"
    "|maddsub|msubadd)[0-9]*)(ph|sh)( |$)")
string(JOIN "" _later_avx512 ${_later_avx512})

# (what, regex) pairs: any matching line is an instruction above the variant.
if(VARIANT STREQUAL "default")
  set(_forbidden "VEX or EVEX encoded (AVX and above)" "${_vex}|${_evex}"
                 "legacy-encoded, above SSE2" "${_mnemonic}(${_above_sse2})")
elseif(VARIANT STREQUAL "avx2")
  set(_forbidden "EVEX encoded (AVX-512)" "${_evex}"
                 "an extension AVX2 + FMA does not include" "${_mnemonic}(${_later_vex}|${_bmi})")
  set(_required "%ymm")
elseif(VARIANT STREQUAL "avx512")
  set(_forbidden "an extension AVX-512 F/BW/DQ/VL does not include" "${_mnemonic}(${_later_avx512}|${_bmi})")
  set(_required "${_evex}")
else()
  message(FATAL_ERROR "check_cpu_variants: unknown VARIANT '${VARIANT}' (default, avx2 or avx512)")
endif()

set(_failures "")
set(_found_required FALSE)
foreach(_obj IN LISTS OBJECTS)
  if(NOT EXISTS "${_obj}")
    message(FATAL_ERROR "${_obj}: missing (build first)")
  endif()
  # Disassembled once (the slow part), then read by each rule.
  set(_dis "${_obj}.objdump.txt")
  execute_process(COMMAND "${OBJDUMP}" -d "${_obj}" OUTPUT_FILE "${_dis}" RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${_obj}: ${OBJDUMP} -d failed (${_rc})")
  endif()
  # The rules read raw bytes: an objdump that does not print them would pass everything.
  execute_process(COMMAND grep -E -c -m 1 "${_line}[0-9a-f][0-9a-f] [0-9a-f ]*\t[a-z{]" "${_dis}"
                  OUTPUT_VARIABLE _count OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _count GREATER 0)
    string(APPEND _failures "${_obj}: no instruction with its raw bytes in `${OBJDUMP} -d` (no code, or an "
                            "objdump whose output this check cannot read)\n")
  endif()
  set(_rules ${_forbidden})
  while(_rules)
    list(POP_FRONT _rules _what _regex)
    execute_process(COMMAND grep -E -m 5 "${_regex}" "${_dis}" OUTPUT_VARIABLE _hits)
    if(_hits)
      string(APPEND _failures "${_obj}: instructions above ${VARIANT}, ${_what}:\n${_hits}")
    endif()
  endwhile()
  if(_required)
    execute_process(COMMAND grep -E -c -m 1 "${_required}" "${_dis}" OUTPUT_VARIABLE _count
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_count GREATER 0)
      set(_found_required TRUE)
    endif()
  endif()
  if(NOT SANITIZE)
    execute_process(COMMAND "${OBJDUMP}" -h "${_obj}" COMMAND grep -E "\\.(init_array|ctors)"
                    OUTPUT_VARIABLE _ctors)
    if(_ctors)
      string(APPEND _failures "${_obj}: runs code at load time:\n${_ctors}")
    endif()
  endif()
  if(ISOLATED)
    execute_process(COMMAND "${NM}" -g --defined-only "${_obj}" OUTPUT_VARIABLE _globals
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    string(REGEX REPLACE "[^\n]* [A-Za-z] " "" _names "${_globals}")
    if(NOT _names STREQUAL "tmm_cpu_kernels_${VARIANT}")
      string(APPEND _failures "${_obj}: global symbols other than tmm_cpu_kernels_${VARIANT}:\n${_globals}\n")
    endif()
  endif()
endforeach()
if(_required AND NOT _found_required)
  string(APPEND _failures "no instruction of ${VARIANT} at all (${_required}): were its flags applied?\n")
endif()
if(_failures)
  # NOTICE prints the lines as they are (FATAL_ERROR would re-wrap them).
  message(NOTICE "${_failures}")
  message(FATAL_ERROR "check_cpu_variants: ${VARIANT}: failed (above)")
endif()
list(LENGTH OBJECTS _n)
message(STATUS "${VARIANT}: ${_n} object(s) checked")
