"""Minimal safetensors reader/writer with json + numpy only (torch 1.13 has no safetensors).

Independent of Steadfast's C++ implementation, so tests that read/write through it check the
C++ side against the format, not against itself.
"""
import json
import struct

import numpy as np

_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
}


def load(path):
    """Returns ({name: ndarray}, metadata). BF16 comes back as uint16 bit patterns."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dt = np.uint16 if info["dtype"] == "BF16" else _DTYPES[info["dtype"]]
        arr = np.frombuffer(data[begin:end], dtype=np.dtype(dt).newbyteorder("<"))
        out[name] = arr.reshape(info["shape"]).copy()
    return out, meta


def save(path, tensors, metadata=None, bf16=()):
    """Writes {name: ndarray}; names in `bf16` hold uint16 bit patterns stored as BF16.

    Deliberately lays tensors out in reverse name order (the C++ writer sorts by width then
    name) so the reader is exercised on a different, still valid, layout.
    """
    names = sorted(tensors, reverse=True)
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    chunks = []
    for name in names:
        arr = np.array(tensors[name], order="C", copy=True)  # keeps 0-d shapes (ascontiguousarray does not)
        if name in bf16:
            dtype = "BF16"
        else:
            dtype = {v: k for k, v in _DTYPES.items()}[arr.dtype.type]
        raw = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        chunks.append(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)
