# Writes OUTPUT, a header holding INPUT (a data file: the device parameters, the instance prices) as the string
# NAMESPACE::NAME, so that the program needs no source tree at run time.
# Run as `cmake -DINPUT=... -DOUTPUT=... -DNAME=... -DNAMESPACE=... -P embed_yaml.cmake`.
file(READ "${INPUT}" content)
string(FIND "${content}" ")embedded_yaml\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )embedded_yaml\"")
endif()
get_filename_component(input_name "${INPUT}" NAME)
file(WRITE "${OUTPUT}.tmp"
  "#pragma once\n// Generated from ${input_name} by devices/embed_yaml.cmake; do not edit.\n"
  "namespace ${NAMESPACE} {\ninline constexpr const char* ${NAME} = R\"embedded_yaml(${content})embedded_yaml\";\n}\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
