# The step after `rnnc compile` in rnnc_add_model's build rule
# (rnncAddModel.cmake): checks that rnnc named the bundle as the build expects,
# and writes the depfile: the .rnn file and every file it imports, at any depth
# (`import "path"`, relative to the importing file), so that editing an
# imported cell compiles the model again.
#   cmake -DMODEL_FILE=F.rnn -DMODEL=NAME -DSOURCE=DIR/NAME.cpp [-DDEPFILE=D] -P rnncCompileModel.cmake
cmake_minimum_required(VERSION 3.20)

if(NOT EXISTS "${SOURCE}")
  get_filename_component(bundle "${SOURCE}" DIRECTORY)
  file(GLOB written RELATIVE "${bundle}" "${bundle}/*.json")
  list(TRANSFORM written REPLACE "\\.json$" "")
  # An indented line is not wrapped.
  message(FATAL_ERROR "rnnc_add_model: the model's name is not the one given:\n"
                      "  rnnc compile ${MODEL_FILE} named its bundle '${written}', not '${MODEL}'\n"
                      "Give MODEL ${written} to rnnc_add_model.")
endif()

if(NOT DEPFILE)
  return()
endif()
set(pending "${MODEL_FILE}")
set(seen)
while(pending)
  list(POP_FRONT pending file)
  if(file IN_LIST seen)
    continue()
  endif()
  list(APPEND seen "${file}")
  get_filename_component(directory "${file}" DIRECTORY)
  file(STRINGS "${file}" imports REGEX "^[ \t]*import[ \t]+\"[^\"]+\"")
  foreach(line IN LISTS imports)
    string(REGEX REPLACE "^[ \t]*import[ \t]+\"([^\"]+)\".*" "\\1" imported "${line}")
    get_filename_component(imported "${imported}" ABSOLUTE BASE_DIR "${directory}")
    if(EXISTS "${imported}" AND NOT IS_DIRECTORY "${imported}")
      list(APPEND pending "${imported}")
    endif()
  endforeach()
endwhile()
string(REPLACE " " "\\ " text "${SOURCE}:")
foreach(file IN LISTS seen)
  string(REPLACE " " "\\ " file "${file}")
  string(APPEND text " \\\n  ${file}")
endforeach()
file(WRITE "${DEPFILE}" "${text}\n")
