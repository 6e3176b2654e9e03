# `cmake --install` into a fresh prefix, then the installed module and harness are imported from there (not from the
# build tree) and the installed binary answers --version.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX} RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${PREFIX}/${PYTHON_DIR}:/usr/lib/x86_64-linux-gnu
          DFMP2_BINARY=${PREFIX}/bin/dfmp2
          /usr/bin/python3 -c "import dfmp2, dfmp2_qcengine, qcengine; assert dfmp2.__file__.startswith('${PREFIX}'), dfmp2.__file__; assert 'dfmp2' in qcengine.list_available_programs(); import numpy; b = dfmp2.Backend('eigen'); assert abs(b.gemm(numpy.eye(2), numpy.eye(2))[1, 1] - 1) < 1e-15; print('installed module', dfmp2.__file__)"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the installed module or harness does not import (${rc})")
endif()
execute_process(COMMAND ${PREFIX}/bin/dfmp2 --version OUTPUT_VARIABLE version RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT version MATCHES "^[0-9]")
  message(FATAL_ERROR "the installed dfmp2 does not answer --version: ${version}")
endif()
file(REMOVE_RECURSE ${PREFIX})
