"""Reads a SigMF recording with the sigmf package, SigMF's own reader, and prints as JSON
what a user of it sees: the metadata validated (any warning, such as an undeclared
extension or a partial sample, fails), the datatype and rate, the captures and annotations,
the sample count, and whether the samples equal the interleaved 16-bit I/Q of an expected
raw file. Used by crates/nvrec-cli/tests/export.rs.

usage: sigmf_read.py BASE EXPECTED_RAW
"""

import json
import sys
import warnings

import numpy as np
from sigmf import sigmffile


def main():
    base, expected_path = sys.argv[1], sys.argv[2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        recording = sigmffile.fromfile(base, autoscale=False)
        recording.validate()
        count = recording.sample_count
        samples = recording.read_samples() if count else np.zeros(0, np.complex64)
    raw = np.fromfile(expected_path, dtype="<i2").astype(np.float32)
    expected = raw[0::2] + 1j * raw[1::2]
    differing = np.flatnonzero(samples != expected) if len(samples) == len(expected) else []
    print(
        json.dumps(
            {
                "datatype": recording.get_global_field("core:datatype"),
                "sample_rate": recording.get_global_field("core:sample_rate"),
                "author": recording.get_global_field("core:author"),
                "sample_count": int(count),
                "expected_count": int(len(expected)),
                "samples_equal": len(samples) == len(expected) and len(differing) == 0,
                "first_difference": int(differing[0]) if len(differing) else None,
                "captures": recording.get_captures(),
                "annotations": recording.get_annotations(),
            }
        )
    )


if __name__ == "__main__":
    main()
