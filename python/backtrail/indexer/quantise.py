"""The model file the embedder runs, derived from the packaged one by onnxruntime's own
quantiser: ``python -m backtrail.indexer.quantise SOURCE OUT [--sha256 HEX]``.

The packaged all-MiniLM-L6-v2 stores its weights as int8 but multiplies in float32: each
weight matrix is cast back to float and scaled before its ``MatMul``. This derivation
folds those casts (onnxruntime's basic graph optimisation), then lets
``onnxruntime.quantization.quantize_dynamic`` make every matrix product and the token
embedding int8 again, per output channel, with activation scales computed per call. The
products then run as integer kernels (VNNI where the CPU has it), faster than the
packaged model's float products, with vectors close to the packaged model's (the
figures, and retrieval quality with each, are in ``bench/README.md``).

It runs in its own process because it imports onnxruntime's Python module and ``onnx``,
which the processes that embed must not load (a second copy of the runtime). The result
is deterministic, written to a temporary name and renamed, so processes that derive it at
the same time all end with the same file.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path

#: Names what the derivation does; part of the derived file's name, so a changed
#: derivation never reuses an older file.
VARIANT = "dq1"


def derive(source: Path, out: Path, sha256: str | None = None) -> None:
    """Write the quantised model of ``source`` to ``out`` (atomically)."""
    from backtrail.indexer.embedding import ModelFileDamaged, sha256_file

    if sha256 is not None and (found := sha256_file(source)) != sha256:
        raise ModelFileDamaged(f"{source} has sha256 {found}, expected {sha256}")
    import onnxruntime as ort  # type: ignore[import-untyped]
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

    logging.getLogger().setLevel(logging.ERROR)  # the quantiser's advice on pre-processing
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".derive-") as work:
        folded = Path(work) / "folded.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        quantised = Path(work) / "quantised.onnx"
        quantize_dynamic(
            folded, quantised, weight_type=QuantType.QInt8, per_channel=True,
            op_types_to_quantize=["MatMul", "Gather"],
        )  # fmt: skip
        with quantised.open("rb") as stream:
            os.fsync(stream.fileno())
        os.replace(quantised, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m backtrail.indexer.quantise",
        description="Derive the int8 model the embedder runs from the packaged model file.",
    )
    parser.add_argument("source", type=Path, help="the packaged model.onnx")
    parser.add_argument("out", type=Path, help="where to write the derived model")
    parser.add_argument("--sha256", help="the expected sha256 of SOURCE (hex)")
    args = parser.parse_args(argv)
    try:
        derive(args.source, args.out, args.sha256)
    except Exception as error:  # noqa: BLE001 - reported to the parent process
        sys.stderr.write(f"cannot derive the model: {type(error).__name__}: {error}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
