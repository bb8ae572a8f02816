"""Writes or checks the safetensors fixture shared with tests/trainer/optim/safetensors_test.cc.

usage: /usr/bin/python3 safetensors_check.py write OUT   # numpy writes the fixture
       /usr/bin/python3 safetensors_check.py read IN     # numpy checks a C++-written fixture

The fixture: for each dtype D in F32 F64 F16 BF16 I64 I32 a tensor "t_D" of shape [2, 3] with
values 0, -1.5, 2.25, 1000, -0.0078125, 3 (integers: 0, -1, 2, 1000, -7, 2^31-1 / 2^40), a
scalar "scalar" (F32, shape [], 42.5), an empty "empty" (F32, shape [0, 4]) and metadata
{"format": "pt", "note": "quote \" and ü"}.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402

FLOATS = [0.0, -1.5, 2.25, 1000.0, -0.0078125, 3.0]
META = {"format": "pt", "note": "quote \" and \u00fc"}


def expected():
    t = {}
    t["t_F32"] = np.array(FLOATS, np.float32).reshape(2, 3)
    t["t_F64"] = np.array(FLOATS, np.float64).reshape(2, 3)
    t["t_F16"] = np.array(FLOATS, np.float16).reshape(2, 3)
    # bf16 = upper 16 bits of the fp32 pattern (all values are exact in bf16)
    t["t_BF16"] = (np.array(FLOATS, np.float32).view(np.uint32) >> 16).astype(np.uint16).reshape(2, 3)
    t["t_I64"] = np.array([0, -1, 2, 1000, -7, 1 << 40], np.int64).reshape(2, 3)
    t["t_I32"] = np.array([0, -1, 2, 1000, -7, (1 << 31) - 1], np.int32).reshape(2, 3)
    t["scalar"] = np.array(42.5, np.float32)
    t["empty"] = np.zeros((0, 4), np.float32)
    return t


def main():
    mode, path = sys.argv[1], sys.argv[2]
    want = expected()
    if mode == "write":
        safetensors_np.save(path, want, META, bf16={"t_BF16"})
        return
    got, meta = safetensors_np.load(path)
    if meta != META:
        raise SystemExit("metadata differs: %r" % (meta,))
    if set(got) != set(want):
        raise SystemExit("tensor names differ: %r" % sorted(got))
    for name, arr in want.items():
        if got[name].dtype != arr.dtype or got[name].shape != arr.shape:
            raise SystemExit("%s: %s%s, want %s%s" % (name, got[name].dtype, got[name].shape,
                                                      arr.dtype, arr.shape))
        if not np.array_equal(got[name], arr):
            raise SystemExit("%s: values differ: %r" % (name, got[name]))
    print("ok")


if __name__ == "__main__":
    main()
