# Writes OUTPUT, a header holding INPUT (the device parameter file) as the string kNeuronDevicesYaml, so that the
# program needs no source tree at run time. Run as `cmake -DINPUT=... -DOUTPUT=... -P embed_yaml.cmake`.
file(READ "${INPUT}" content)
string(FIND "${content}" ")neuron_yaml\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )neuron_yaml\"")
endif()
file(WRITE "${OUTPUT}.tmp"
  "#pragma once\n// Generated from devices/neuron/neuron_devices.yaml by embed_yaml.cmake; do not edit.\n"
  "namespace dfmp2::devices::neuron {\ninline constexpr const char* kNeuronDevicesYaml = R\"neuron_yaml(${content})neuron_yaml\";\n}\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
