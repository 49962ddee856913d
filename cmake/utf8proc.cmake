# utf8proc (MIT; Debian/Ubuntu: libutf8proc-dev) gives csrc/text its Unicode
# data: normalization, general categories, case folding. Its static library
# is linked into libtmm_torch and its symbols kept local there, so neither
# the library, the Python package nor the installed CMake package needs
# utf8proc at run time. Another copy: -DUTF8PROC_INCLUDE_DIR=<folder of
# utf8proc.h> -DUTF8PROC_LIBRARY=<libutf8proc.a> (built with -fPIC).
find_path(UTF8PROC_INCLUDE_DIR utf8proc.h)
find_library(UTF8PROC_LIBRARY NAMES libutf8proc.a)
if(NOT UTF8PROC_INCLUDE_DIR OR NOT UTF8PROC_LIBRARY)
  message(FATAL_ERROR "tmm needs utf8proc's header and static library (Debian/Ubuntu: apt-get install "
                      "libutf8proc-dev; or -DUTF8PROC_INCLUDE_DIR=... -DUTF8PROC_LIBRARY=.../libutf8proc.a); "
                      "found UTF8PROC_INCLUDE_DIR='${UTF8PROC_INCLUDE_DIR}', UTF8PROC_LIBRARY='${UTF8PROC_LIBRARY}'")
endif()
set(_utf8proc_version "")
foreach(_part MAJOR MINOR PATCH)
  file(STRINGS "${UTF8PROC_INCLUDE_DIR}/utf8proc.h" _line REGEX "#define UTF8PROC_VERSION_${_part} ")
  string(REGEX MATCH "[0-9]+$" _n "${_line}")
  list(APPEND _utf8proc_version "${_n}")
endforeach()
list(JOIN _utf8proc_version "." _utf8proc_version)
message(STATUS "tmm: utf8proc ${_utf8proc_version}, static: ${UTF8PROC_LIBRARY}")

# UTF8PROC_STATIC: the header declares the functions without dllimport or
# default visibility.
add_library(tmm_utf8proc STATIC IMPORTED)
set_target_properties(tmm_utf8proc PROPERTIES
  IMPORTED_LOCATION "${UTF8PROC_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${UTF8PROC_INCLUDE_DIR}"
  INTERFACE_COMPILE_DEFINITIONS UTF8PROC_STATIC)

# Links utf8proc into a shared library, privately: not part of its exported
# interface, and (GNU ld, lld) its symbols not exported, so that another
# utf8proc in the same process can neither replace nor be replaced by it.
function(tmm_link_utf8proc target)
  target_link_libraries(${target} PRIVATE tmm_utf8proc)
  if(NOT APPLE AND NOT WIN32)
    get_filename_component(_archive "${UTF8PROC_LIBRARY}" NAME)
    target_link_options(${target} PRIVATE "LINKER:--exclude-libs,${_archive}")
  endif()
endfunction()
