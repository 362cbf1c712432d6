# What other compiled modules take from the body twins: the common case of
# BodyCodec.pack, which a request writer and a reply writer meet per call.

cdef object pack_one(codec, value, char_set, little_endian)
