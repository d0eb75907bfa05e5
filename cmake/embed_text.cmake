# cmake -DIN=file -DOUT=file.c -DSYMBOL=name -P embed_text.cmake
file(READ ${IN} text)
string(REPLACE "\\" "\\\\" text "${text}")
string(REPLACE "\"" "\\\"" text "${text}")
string(REPLACE "\n" "\\n\"\n\"" text "${text}")
file(WRITE ${OUT}.tmp "/* generated from ${IN}; do not edit */\nconst char ${SYMBOL}[] =\n\"${text}\";\n")
file(RENAME ${OUT}.tmp ${OUT})
