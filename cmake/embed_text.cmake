# cmake -DIN=file -DOUT=header.h -DNAME=symbol -P embed_text.cmake
# Writes `static const char NAME[] = "...";` holding the text of IN (PTX, HTML, ...).
file(READ "${IN}" text)
string(REPLACE "\\" "\\\\" text "${text}")
string(REPLACE "\"" "\\\"" text "${text}")
string(REPLACE "\n" "\\n\"\n\"" text "${text}")
string(RANDOM LENGTH 8 tag) # (a unique temporary: two builds of the same header may overlap)
file(WRITE "${OUT}.tmp.${tag}" "/* generated from ${IN}: do not edit */\nstatic const char ${NAME}[] =\n\"${text}\";\n")
file(COPY_FILE "${OUT}.tmp.${tag}" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp.${tag}")
