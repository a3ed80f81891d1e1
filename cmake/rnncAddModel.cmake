# rnnc_add_model: a .rnn file compiled by `rnnc compile` at build time, its
# bundle built into a target (docs/install.md).
#
#   rnnc_add_model(<target> <file.rnn>
#                  [TARGET cpu|cuda] [JIT] [MODEL <name>] [ENTRY <name>]
#                  [DEFINES <NAME=VALUE>...] [OPTIONS <rnnc compile flag>...])
#
# <target>   an executable or library created in the same CMakeLists.txt (a
#            custom command's output builds only into targets of its own
#            directory); `add_library(<target> STATIC)` with no sources makes a
#            library of the model alone. The target gets the bundle's source
#            (<Model>.cpp, or <Model>.cu), the bundle's directory on its include
#            path (#include "<Model>.h"; PUBLIC for a library), rnnc::runtime, and
#              cpu         OpenMP, OpenBLAS, and -march=native on the bundle's
#                          source (RNNC_MARCH_NATIVE, default ON: the generated
#                          loops are written to be vectorized)
#              cuda        CUDA::cudart, CUDA::cublas, CUDA::cublasLt; the .cu needs the CUDA
#                          language, which is enabled when the caller has not
#              cuda JIT    the host part as C++, CUDA::cudart, CUDA::cublas(Lt) and
#                          NVRTC's library (not CUDA::nvrtc, which brings the
#                          driver stub: the runtime uses no driver API)
# TARGET     cpu (the default) or cuda; JIT: --jit.
# MODEL      the name rnnc gives the files and the class (<Model>Model): the
#            cell's or model's name. Without it, ENTRY is the name; without
#            either, `rnnc show FILE --params` reads it at configure time and
#            the file becomes a configure dependency (renaming the model
#            reconfigures). At build time the name is checked against what
#            rnnc wrote.
# ENTRY      --entry: the cell or model to compile when the file has several.
# DEFINES    -D NAME=VALUE for each.
# OPTIONS    more flags for `rnnc compile` (-O0, --time-parallel off, --tf32, ...).
#
# The bundle is written to <binary dir>/rnnc/<target>/<Model>/ and written
# again when the .rnn file, a file it imports (at any depth) or rnnc changes:
# the build step writes a depfile of the imports (Ninja and Makefile
# generators; with others, every .rnn file of the file's directory is a
# dependency). A failing `rnnc compile` fails the build with rnnc's diagnostics.

# Policies as of the CMake this was written for, whatever the caller's (a
# function keeps the policies of where it is defined): CMP0116, depfiles
# relative to the binary directory.
if(CMAKE_VERSION VERSION_LESS 3.20)
  message(FATAL_ERROR "rnnc's CMake package needs CMake 3.20 or newer (depfiles of custom commands); this is ${CMAKE_VERSION}")
endif()
cmake_policy(PUSH)
cmake_policy(VERSION 3.20)

option(RNNC_MARCH_NATIVE "rnnc_add_model: compile CPU bundles with -march=native" ON)

# A macro, not a function: enable_language must run in the caller's directory
# scope.
macro(rnnc_add_model)
  cmake_parse_arguments(_rnnc_lang "JIT" "TARGET;MODEL;ENTRY" "DEFINES;OPTIONS" ${ARGN})
  if(_rnnc_lang_TARGET STREQUAL "cuda" AND NOT _rnnc_lang_JIT AND NOT CMAKE_CUDA_COMPILER_LOADED)
    enable_language(CUDA)
  endif()
  foreach(_rnnc_lang_var JIT TARGET MODEL ENTRY DEFINES OPTIONS UNPARSED_ARGUMENTS KEYWORDS_MISSING_VALUES)
    unset(_rnnc_lang_${_rnnc_lang_var})
  endforeach()
  unset(_rnnc_lang_var)
  _rnnc_add_model(${ARGN})
endmacro()

function(_rnnc_add_model target file)
  set(usage "rnnc_add_model(<target> FILE.rnn [TARGET cpu|cuda] [JIT] [MODEL name] [ENTRY name] [DEFINES N=V...] [OPTIONS flag...])")
  cmake_parse_arguments(PARSE_ARGV 2 arg "JIT" "TARGET;MODEL;ENTRY" "DEFINES;OPTIONS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "rnnc_add_model: unexpected arguments '${arg_UNPARSED_ARGUMENTS}'; usage: ${usage}")
  endif()
  if(arg_KEYWORDS_MISSING_VALUES)
    message(FATAL_ERROR "rnnc_add_model: ${arg_KEYWORDS_MISSING_VALUES} needs a value; usage: ${usage}")
  endif()
  if(NOT arg_TARGET)
    set(arg_TARGET cpu)
  elseif(NOT arg_TARGET MATCHES "^(cpu|cuda)$")
    message(FATAL_ERROR "rnnc_add_model: TARGET is cpu or cuda, not '${arg_TARGET}'")
  endif()
  if(arg_JIT AND NOT arg_TARGET STREQUAL "cuda")
    message(FATAL_ERROR "rnnc_add_model: JIT goes with TARGET cuda")
  endif()
  if(NOT TARGET rnnc::rnnc)
    message(FATAL_ERROR "rnnc_add_model: no rnnc::rnnc here: call find_package(rnnc) in this directory or a parent")
  endif()
  _rnnc_check_target(${target} type)

  get_filename_component(file "${file}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${file}" OR IS_DIRECTORY "${file}")
    message(FATAL_ERROR "rnnc_add_model: no file ${file}")
  endif()
  set(defines)
  foreach(define IN LISTS arg_DEFINES)
    list(APPEND defines -D "${define}")
  endforeach()

  if(arg_MODEL)
    set(name "${arg_MODEL}")
  elseif(arg_ENTRY)
    set(name "${arg_ENTRY}")
  else()
    _rnnc_read_model_name(name "${file}" "${defines}")
  endif()
  _rnnc_identifier(model "${name}")

  # The build rule: a clean bundle directory, rnnc compile, then the check of
  # the name and the depfile (rnncCompileModel.cmake).
  set(bundle "${CMAKE_CURRENT_BINARY_DIR}/rnnc/${target}/${model}")
  set(flags --target ${arg_TARGET})
  set(extension cpp)
  if(arg_JIT)
    list(APPEND flags --jit)
  elseif(arg_TARGET STREQUAL "cuda")
    set(extension cu)
  endif()
  if(arg_ENTRY)
    list(APPEND flags --entry "${arg_ENTRY}")
  endif()
  set(source "${bundle}/${model}.${extension}")
  set(outputs "${source}" "${bundle}/${model}.h" "${bundle}/${model}.json")
  set(script "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/rnncCompileModel.cmake")
  set(depends "${file}" "$<TARGET_FILE:rnnc::rnnc>" "${script}")
  set(depfile "")
  set(depfile_option)
  if(CMAKE_GENERATOR MATCHES "Ninja|Makefiles")
    set(depfile "${bundle}.d")
    set(depfile_option DEPFILE "${depfile}")
  else()
    get_filename_component(directory "${file}" DIRECTORY)
    file(GLOB siblings CONFIGURE_DEPENDS "${directory}/*.rnn")
    list(APPEND depends ${siblings})
  endif()
  file(RELATIVE_PATH shown "${CMAKE_SOURCE_DIR}" "${file}")
  if(shown MATCHES "^\\.\\./")
    set(shown "${file}")
  endif()
  string(JOIN " " shown ${shown} ${defines} ${flags} ${arg_OPTIONS})
  add_custom_command(OUTPUT ${outputs}
    COMMAND "${CMAKE_COMMAND}" -E rm -rf "${bundle}"
    COMMAND rnnc::rnnc compile "${file}" ${defines} ${flags} ${arg_OPTIONS} -o "${bundle}"
    COMMAND "${CMAKE_COMMAND}" "-DMODEL_FILE=${file}" "-DMODEL=${model}" "-DSOURCE=${source}" "-DDEPFILE=${depfile}"
            -P "${script}"
    DEPENDS ${depends}
    ${depfile_option}
    COMMENT "rnnc compile ${shown} (${model})"
    VERBATIM)

  # The target: the source, the bundle's header, what the code links.
  set(scope PUBLIC)
  if(type STREQUAL "EXECUTABLE")
    set(scope PRIVATE)
  endif()
  target_sources(${target} PRIVATE "${source}")
  target_include_directories(${target} ${scope} "$<BUILD_INTERFACE:${bundle}>")
  target_link_libraries(${target} ${scope} rnnc::runtime)
  if(arg_TARGET STREQUAL "cpu")
    _rnnc_link_cpu(${target} "${source}")
  else()
    _rnnc_link_cuda(${target} "${arg_JIT}")
  endif()
endfunction()

# Refuses what cannot take the bundle's source; `type` is the target's TYPE.
function(_rnnc_check_target target type)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "rnnc_add_model: no target '${target}': create it first (add_executable, or "
                        "add_library(${target} STATIC) for a library of the model alone)")
  endif()
  get_target_property(kind ${target} TYPE)
  get_target_property(imported ${target} IMPORTED)
  get_target_property(aliased ${target} ALIASED_TARGET)
  if(imported)
    set(kind "an imported ${kind}")
  elseif(aliased)
    set(kind "an alias of ${aliased}")
  endif()
  if(NOT kind MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$")
    message(FATAL_ERROR "rnnc_add_model: '${target}' is ${kind}: the model's source goes into an executable or a "
                        "library built in this project")
  endif()
  get_target_property(directory ${target} SOURCE_DIR)
  if(NOT directory STREQUAL CMAKE_CURRENT_SOURCE_DIR)
    message(FATAL_ERROR "rnnc_add_model: call it in ${directory}/CMakeLists.txt, where '${target}' is created: "
                        "the generated source builds only into targets of the directory that generates it")
  endif()
  set(${type} ${kind} PARENT_SCOPE)
endfunction()

# The C identifier rnnc names a bundle after (codegen/Bundle.cpp's modelIdentifier).
function(_rnnc_identifier out name)
  string(REGEX REPLACE "[^A-Za-z0-9_]" "_" id "${name}")
  if(id STREQUAL "" OR id MATCHES "^[0-9]")
    set(id "m${id}")
  endif()
  set(${out} "${id}" PARENT_SCOPE)
endfunction()

# The name of the entity `rnnc compile` picks in `file` (the only model, else
# the only cell), from `rnnc show FILE --params`, which lists the file's cells
# and models, one heading each.
function(_rnnc_read_model_name out file defines)
  get_target_property(imported rnnc::rnnc IMPORTED)
  if(NOT imported)
    message(FATAL_ERROR "rnnc_add_model: rnnc is built in this project, so it cannot read the model's name at "
                        "configure time: give it with MODEL")
  endif()
  get_target_property(rnnc rnnc::rnnc LOCATION)
  execute_process(COMMAND "${rnnc}" show "${file}" --params ${defines}
    RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE errors)
  if(NOT rc EQUAL 0)
    string(STRIP "${errors}" errors)
    string(REPLACE "\n" "\n  " errors "  ${errors}") # indented: shown as rnnc wrote it, not wrapped
    message(FATAL_ERROR "rnnc_add_model: `rnnc show ${file} --params` failed (${rc}), so the model's name is "
                        "unknown:\n${errors}\nFix the file, or give the name with MODEL.")
  endif()
  string(REGEX MATCHALL "(^|\n)(cell|model) [A-Za-z_][A-Za-z0-9_]*" headings "${text}")
  set(all)
  set(models)
  foreach(heading IN LISTS headings)
    string(STRIP "${heading}" heading)
    string(REGEX REPLACE "^(cell|model) " "" entity "${heading}")
    list(APPEND all "${entity}")
    if(heading MATCHES "^model ")
      list(APPEND models "${entity}")
    endif()
  endforeach()
  list(LENGTH models model_count)
  list(LENGTH all count)
  if(model_count EQUAL 1)
    set(name ${models})
  elseif(model_count EQUAL 0 AND count EQUAL 1)
    set(name ${all})
  else()
    string(REPLACE ";" ", " all "${all}")
    message(FATAL_ERROR "rnnc_add_model: ${file} has several cells or models to compile (${all}): choose one with ENTRY")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${file}")
  set(${out} "${name}" PARENT_SCOPE)
endfunction()

# What generated C++ needs: OpenMP, OpenBLAS (rnnc/cpu.h calls CBLAS and
# openblas_set_num_threads) and, on the bundle's source, -march=native.
function(_rnnc_link_cpu target source)
  find_package(OpenMP REQUIRED COMPONENTS CXX)
  find_library(rnnc_OPENBLAS_LIBRARY NAMES openblas DOC "OpenBLAS, which rnnc's CPU bundles call")
  find_path(rnnc_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas DOC "where OpenBLAS's cblas.h is")
  if(NOT rnnc_OPENBLAS_LIBRARY OR NOT rnnc_CBLAS_INCLUDE_DIR)
    message(FATAL_ERROR "rnnc_add_model: OpenBLAS is not found (Debian: apt-get install libopenblas-dev; "
                        "elsewhere set rnnc_OPENBLAS_LIBRARY and rnnc_CBLAS_INCLUDE_DIR)")
  endif()
  target_include_directories(${target} PRIVATE "${rnnc_CBLAS_INCLUDE_DIR}")
  target_link_libraries(${target} PRIVATE OpenMP::OpenMP_CXX "${rnnc_OPENBLAS_LIBRARY}")
  if(RNNC_MARCH_NATIVE AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    set_property(SOURCE "${source}" APPEND PROPERTY COMPILE_OPTIONS -march=native)
  endif()
endfunction()

# What a CUDA bundle needs: the runtime API, cuBLAS and cuBLASLt; with JIT, NVRTC too.
function(_rnnc_link_cuda target jit)
  find_package(CUDAToolkit REQUIRED)
  target_link_libraries(${target} PRIVATE CUDA::cudart CUDA::cublas CUDA::cublasLt)
  if(jit)
    if(NOT TARGET CUDA::nvrtc)
      message(FATAL_ERROR "rnnc_add_model: JIT needs NVRTC, which the CUDA toolkit at ${CUDAToolkit_LIBRARY_DIR} lacks")
    endif()
    target_link_libraries(${target} PRIVATE "$<TARGET_FILE:CUDA::nvrtc>")
  else()
    target_compile_features(${target} PRIVATE cuda_std_17)
  endif()
endfunction()

cmake_policy(POP)
