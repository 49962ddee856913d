# Checks the objects of one CPU kernel variant (a CTest test, see
# tests/cpp/CMakeLists.txt; cmake -DVARIANT=... -DOBJECTS=a.o|b.o -P this):
#   - no instruction above the variant's target, read from the disassembly:
#       default  no VEX or EVEX instruction (mnemonics v...), no ymm, zmm or
#                mask registers: plain x86-64 (SSE2) only;
#       avx2     no AVX-512: no zmm, mask or xmm/ymm16-31 registers; and some
#                ymm, so the flags took effect;
#       avx512   some AVX-512 register, so the flags took effect;
#   - no code run at load time (.init_array/.ctors), which would run on any
#     CPU (not checked under sanitizers, which add their own constructors);
#   - ISOLATED: the only global symbol is the variant's table,
#     tmm_cpu_kernels_<variant> (CMakeLists.txt, CPU kernels).
string(REPLACE "|" ";" OBJECTS "${OBJECTS}")
set(_avx512_regs "%zmm|%k[0-7]|%[xy]mm(1[6-9]|2[0-9]|3[01])")
if(VARIANT STREQUAL "default")
  set(_forbidden ":\tv[a-z]|%[yz]mm|%k[0-7]")
elseif(VARIANT STREQUAL "avx2")
  set(_forbidden "${_avx512_regs}")
  set(_required "%ymm")
elseif(VARIANT STREQUAL "avx512")
  set(_required "${_avx512_regs}")
endif()

set(_failures "")
set(_found_required FALSE)
foreach(_obj IN LISTS OBJECTS)
  if(NOT EXISTS "${_obj}")
    message(FATAL_ERROR "${_obj}: missing (build first)")
  endif()
  if(_forbidden)
    execute_process(COMMAND "${OBJDUMP}" -d --no-show-raw-insn "${_obj}"
                    COMMAND grep -E -m 5 "${_forbidden}"
                    OUTPUT_VARIABLE _hits RESULT_VARIABLE _rc)
    if(_hits)
      string(APPEND _failures "${_obj}: instructions above ${VARIANT}:\n${_hits}")
    endif()
  endif()
  if(_required)
    execute_process(COMMAND "${OBJDUMP}" -d --no-show-raw-insn "${_obj}"
                    COMMAND grep -E -c "${_required}"
                    OUTPUT_VARIABLE _count OUTPUT_STRIP_TRAILING_WHITESPACE)
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
  message(FATAL_ERROR "${_failures}")
endif()
list(LENGTH OBJECTS _n)
message(STATUS "${VARIANT}: ${_n} object(s) checked")
