# cmake -DIN=file -DOUT=file.c -DSYMBOL=name [-DLINE=ON] -P embed_text.cmake
file(READ ${IN} text)
# LINE: number the text as IN's own lines, so a compiler's messages about it (NVRTC's,
# for a point-op header) name the header and its line.
if(LINE)
  string(REPLACE "\"" "_" line_name "${IN}")
  set(text "#line 1 \"${line_name}\"\n${text}")
endif()
string(REPLACE "\\" "\\\\" text "${text}")
string(REPLACE "\"" "\\\"" text "${text}")
string(REPLACE "\n" "\\n\"\n\"" text "${text}")
file(WRITE ${OUT}.tmp "/* generated from ${IN}; do not edit */\nconst char ${SYMBOL}[] =\n\"${text}\";\n")
file(RENAME ${OUT}.tmp ${OUT})
