# tests/api/doc_snippet.cmake: compiles the code block under "## The loop" of DOC (the
# indented lines up to the next prose line) with the public headers in INCLUDE, as an
# application would write it: wrapped in a function, fill_from_camera supplied.
file(STRINGS "${DOC}" lines)
set(in_loop 0)
set(code "")
foreach(line IN LISTS lines)
  if(line MATCHES "^## The loop")
    set(in_loop 1)
  elseif(in_loop AND line MATCHES "^    ")
    string(SUBSTRING "${line}" 4 -1 line)
    string(APPEND code "${line}\n")
  elseif(in_loop AND NOT code STREQUAL "" AND line MATCHES "[^ ]")
    break()
  endif()
endforeach()
if(code STREQUAL "")
  message(FATAL_ERROR "${DOC}: no code block under '## The loop'")
endif()
file(WRITE "${WORK}/realtime_doc_snippet.c"
     "#include <pipefuse/pipefuse.h>\nstatic void fill_from_camera(pf_frame *f) { (void)f; }\n"
     "void loop(void);\nvoid loop(void)\n{\n${code}}\n")
execute_process(COMMAND "${CC}" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I "${INCLUDE}"
                        "${WORK}/realtime_doc_snippet.c"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the loop in ${DOC} does not compile:\n${out}")
endif()
