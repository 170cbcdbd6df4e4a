"""The FNV-1a 64 hash the golden tests use to prove that `loom gguf synth` rewrote a synthetic model (or
an encoder saw an input) bit for bit: the same function as the C++ tests' test::file_fnv1a64."""


def fnv1a64(data):
    """The hash of bytes, as 16 lowercase hex digits."""
    h = 0xcbf29ce484222325
    for b in data:  # small inputs only (synthetic models are a few MB)
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def file_fnv1a64(path):
    with open(path, "rb") as f:
        return fnv1a64(f.read())
