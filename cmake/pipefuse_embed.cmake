# pf_embed_text(OUT_C SYMBOL FILE [LINE]): generate OUT_C defining `const char SYMBOL[]`
# with FILE's text, regenerated whenever FILE changes. Used to hand point-op headers to
# NVRTC. LINE puts `#line 1 "FILE"` first, so NVRTC's messages name FILE and its lines.
set(PF_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_text.cmake)

function(pf_embed_text out_c symbol file)
  set(line OFF)
  if("LINE" IN_LIST ARGN)
    set(line ON)
  endif()
  add_custom_command(
    OUTPUT ${out_c}
    COMMAND ${CMAKE_COMMAND} -DIN=${file} -DOUT=${out_c} -DSYMBOL=${symbol} -DLINE=${line}
            -P ${PF_EMBED_SCRIPT}
    DEPENDS ${file} ${PF_EMBED_SCRIPT}
    COMMENT "Embedding ${file} as ${symbol}"
    VERBATIM)
endfunction()
