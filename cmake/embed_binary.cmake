# cmake -DIN=file -DOUT=header.h -DNAME=symbol -P embed_binary.cmake
# Writes `static const unsigned char NAME[] = {...};` holding the bytes of IN (a fatbin),
# aligned for the driver, which reads a fatbin's header in place.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
string(RANDOM LENGTH 8 tag)
file(WRITE "${OUT}.tmp.${tag}" "/* generated from ${IN}: do not edit */\nstatic const unsigned char ${NAME}[] __attribute__((aligned(16))) = {\n${bytes}};\n")
file(COPY_FILE "${OUT}.tmp.${tag}" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp.${tag}")
