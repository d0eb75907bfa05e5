# cmake -DIN=file.md -DOUT=file.md -DDEST=dir -DPIPELINES=FROM=>TO -DHEADERS=FROM=>TO
#       -P install_doc.cmake
# The installed copy of a guide (README.md, docs/NAME.md): its links into the source
# tree's pipelines/ and engine/include/ are rewritten to where those are installed,
# relative to DEST (the folder the copy is installed in), so they resolve in the
# installed tree as in the source tree. Links between the guides stay as they are: the
# guides are installed laid out as in the source tree.
file(READ ${IN} text)
get_filename_component(in_dir ${IN} DIRECTORY)
foreach(map PIPELINES HEADERS)
  string(REPLACE "=>" ";" pair "${${map}}")
  list(GET pair 0 from)
  list(GET pair 1 to)
  file(RELATIVE_PATH src_link ${in_dir} ${from})  # "pipelines", "../pipelines"
  file(RELATIVE_PATH dest_link ${DEST} ${to})     # "../../pipefuse/pipelines"
  string(REPLACE "](${src_link}/" "](${dest_link}/" text "${text}")
  string(REPLACE "](${src_link})" "](${dest_link})" text "${text}")
endforeach()
file(WRITE ${OUT}.tmp "${text}")
file(RENAME ${OUT}.tmp ${OUT})
