"""The mpnet embedder: its ONNX graph computes MPNet's forward pass (checked on small random
weights against a plain numpy transcription), its files are the pinned ones, and without its
weights it says how to install them."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import math
import zipfile
from pathlib import Path

import numpy as np
import pytest

from eventlog.errors import EmbedderUnavailable
from projections import mpnet
from projections.embedders import MPNetEmbedder

needs_onnx = pytest.mark.skipif(
    importlib.util.find_spec("onnx") is None, reason="onnx is not installed (the [dev] extra)"
)


def _bucket(relative: int) -> int:
    """MPNet's relative-position bucket of one pair, transcribed term by term."""
    n = -relative
    half = 16
    bucket = half if n < 0 else 0
    n = abs(n)
    if n < 8:
        return bucket + n
    large = 8 + int(math.log(n / 8) / math.log(128 / 8) * (half - 8))
    return bucket + min(large, half - 1)


def _reference(
    w: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray, heads: int
) -> np.ndarray:
    """MPNet's last hidden states, one sequence and one head at a time, in float64."""

    def norm(x: np.ndarray, name: str) -> np.ndarray:
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * w[f"{name}.weight"] + w[f"{name}.bias"]

    def linear(x: np.ndarray, name: str) -> np.ndarray:
        return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]

    layers = len({k.split(".")[2] for k in w if k.startswith("encoder.layer.")})
    out = []
    for row, keep in zip(ids, mask, strict=True):
        tokens = len(row)
        positions = [1 + sum(keep[: i + 1]) if keep[i] else 1 for i in range(tokens)]
        x = (
            w["embeddings.word_embeddings.weight"][row]
            + w["embeddings.position_embeddings.weight"][positions]
        )
        x = norm(x, "embeddings.LayerNorm")
        size = x.shape[1] // heads
        for n in range(layers):
            at = f"encoder.layer.{n}."
            q, k, v = (linear(x, f"{at}attention.attn.{p}") for p in "qkv")
            context = np.zeros_like(x)
            for h in range(heads):
                part = slice(h * size, (h + 1) * size)
                scores = q[:, part] @ k[:, part].T / math.sqrt(size)
                for i in range(tokens):
                    for j in range(tokens):
                        scores[i, j] += w["encoder.relative_attention_bias.weight"][
                            _bucket(j - i), h
                        ]
                        if not keep[j]:
                            scores[i, j] = -1e9
                probs = np.exp(scores - scores.max(-1, keepdims=True))
                context[:, part] = (probs / probs.sum(-1, keepdims=True)) @ v[:, part]
            x = norm(linear(context, f"{at}attention.attn.o") + x, f"{at}attention.LayerNorm")
            inner = linear(x, f"{at}intermediate.dense")
            inner = 0.5 * inner * (1 + np.vectorize(math.erf)(inner / math.sqrt(2)))
            x = norm(linear(inner, f"{at}output.dense") + x, f"{at}output.LayerNorm")
        out.append(x)
    return np.array(out)


def _weights(
    hidden: int = 16, inner: int = 32, layers: int = 2, vocab: int = 30
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)

    def r(*shape: int) -> np.ndarray:
        return rng.normal(0, 0.5, shape).astype(np.float32)

    w = {
        "embeddings.word_embeddings.weight": r(vocab, hidden),
        "embeddings.position_embeddings.weight": r(60, hidden),
        "embeddings.LayerNorm.weight": 1 + r(hidden),
        "embeddings.LayerNorm.bias": r(hidden),
        "encoder.relative_attention_bias.weight": r(32, 4),
    }
    for n in range(layers):
        at = f"encoder.layer.{n}."
        for name, (rows, cols) in {
            "attention.attn.q": (hidden, hidden),
            "attention.attn.k": (hidden, hidden),
            "attention.attn.v": (hidden, hidden),
            "attention.attn.o": (hidden, hidden),
            "intermediate.dense": (inner, hidden),
            "output.dense": (hidden, inner),
        }.items():
            w[f"{at}{name}.weight"], w[f"{at}{name}.bias"] = r(rows, cols), r(rows)
        for name in ("attention.LayerNorm", "output.LayerNorm"):
            w[f"{at}{name}.weight"], w[f"{at}{name}.bias"] = 1 + r(hidden), r(hidden)
    return w


def test_buckets_follow_the_definition_at_every_distance() -> None:
    distances = np.arange(-300, 301)
    assert mpnet.buckets(distances).tolist() == [_bucket(int(d)) for d in distances]
    assert len(set(mpnet.buckets(distances).tolist())) == 31  # 16 would be "0 ahead"


@needs_onnx
def test_the_graph_computes_mpnets_forward_pass_padding_included() -> None:
    import onnxruntime

    weights = _weights()
    session = onnxruntime.InferenceSession(mpnet.build(weights, layers=2, heads=4))
    # two sequences, the second padded: long enough for logarithmic buckets (9 apart and more)
    ids = np.array([[0, *range(3, 25), 2], [0, 5, 6, 7, 2, *[1] * 19]], dtype=np.int64)
    mask = (ids != mpnet.PAD_ID).astype(np.int64)
    got = session.run(None, mpnet.inputs(ids, mask))[0]
    want = _reference({k: v.astype(np.float64) for k, v in weights.items()}, ids, mask, heads=4)
    assert got.shape == (2, 24, 16)
    real = mask.astype(bool)
    assert np.abs(got[real] - want[real]).max() < 1e-4
    # the padded sequence's tokens are what they are alone
    alone = session.run(None, mpnet.inputs(ids[1:, :5], mask[1:, :5]))[0]
    assert np.abs(alone[0] - got[1, :5]).max() < 1e-5


def test_without_its_weights_the_embedder_says_how_to_install_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def absent(name: str) -> importlib.metadata.Distribution:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", absent)
    monkeypatch.setenv("AIRSSPEC_MODELS", str(tmp_path))
    assert "pip install 'airsspec-memory[mpnet]'" in mpnet.status(tmp_path)
    with pytest.raises(EmbedderUnavailable, match=r"airsspec-memory\[mpnet\]"):
        mpnet.prepared(tmp_path)
    assert not any(tmp_path.rglob("*.onnx"))


def test_parts_that_do_not_hold_the_pinned_model_are_refused_and_nothing_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "fake.zip"
    with zipfile.ZipFile(archive, "w") as fake:
        fake.writestr("all-mpnet-base-v2/model.safetensors", b"not the model")
        fake.writestr("all-mpnet-base-v2/tokenizer.json", b"{}")
    data = archive.read_bytes()
    pieces = []
    for n, start in enumerate(range(0, len(data), len(data) // 5 + 1)):
        piece = tmp_path / f"part{n}"
        piece.write_bytes(data[start : start + len(data) // 5 + 1])
        pieces.append(piece)
    assert len(pieces) == 5
    names = dict(zip(mpnet.PARTS, pieces, strict=True))
    monkeypatch.setattr(mpnet, "_part", names.__getitem__)
    models = tmp_path / "models"
    assert mpnet.status(models).startswith("installed; its first use builds")
    killed = models / f"mpnet-{mpnet.MODEL_SHA256[:16]}" / "build-killed"  # a build cut short
    killed.mkdir(parents=True)
    (killed / "model.zip").write_bytes(data)
    with pytest.raises(EmbedderUnavailable, match="expected the pinned"):
        mpnet.prepared(models)
    assert [p.name for p in models.rglob("*") if p.is_file()] == [".lock"]


def _weights_installed() -> bool:
    try:
        return all(importlib.metadata.distribution(n) for n in mpnet.PARTS)
    except importlib.metadata.PackageNotFoundError:
        return False


@pytest.mark.slow
@needs_onnx
@pytest.mark.skipif(
    not _weights_installed(), reason="the mpnet weights are not installed (the [mpnet] extra)"
)
def test_the_real_model_keeps_meaning_and_ignores_the_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRSSPEC_MODELS", str(tmp_path))
    texts = [
        "The login token expired after five minutes instead of eight hours.",
        "Users were signed out early because the session TTL was 300 seconds.",
        "Webhook deliveries are signed with HMAC-SHA256.",
        "ok",
    ]
    embedder = MPNetEmbedder()
    together = embedder.embed(texts)
    alone = np.vstack([embedder.embed([t]) for t in texts])
    assert together.shape == (4, 768)
    assert np.abs(together - alone).max() < 1e-5
    assert together[0] @ together[1] > together[0] @ together[2] + 0.1


def _fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five installed parts (``_part``) that join into a zip not holding the pinned model."""
    archive = tmp_path / "fake.zip"
    with zipfile.ZipFile(archive, "w") as fake:
        fake.writestr("all-mpnet-base-v2/model.safetensors", b"not the model")
        fake.writestr("all-mpnet-base-v2/tokenizer.json", b"{}")
    data, size = archive.read_bytes(), archive.stat().st_size // 5 + 1
    parts = {}
    for n, name in enumerate(mpnet.PARTS):
        parts[name] = tmp_path / f"part{n}"
        parts[name].write_bytes(data[n * size : (n + 1) * size])
    monkeypatch.setattr(mpnet, "_part", parts.__getitem__)


@pytest.mark.parametrize("odd", ["a file", "a dangling symlink", "its folder a file", "a lock"])
def test_a_models_folder_it_cannot_build_in_is_one_clear_line_and_nothing_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, odd: str
) -> None:
    """Where the graph cannot be built (the models folder is a file, a symlink to nowhere,
    holds a file where the model's folder goes, or a folder where its lock goes), the parts
    installed: ``EmbedderUnavailable`` naming the folder (the cold tier is then left with a
    warning, as without the parts), not an ``OSError`` that fails the whole command."""
    _fake_parts(tmp_path, monkeypatch)
    models = tmp_path / "models"
    folder = models / f"mpnet-{mpnet.MODEL_SHA256[:16]}"
    if odd == "a file":
        models.write_text("x")
    elif odd == "a dangling symlink":
        models.symlink_to(tmp_path / "nowhere")
    elif odd == "its folder a file":
        models.mkdir()
        folder.write_text("x")
    else:
        (folder / ".lock").mkdir(parents=True)
    if odd in ("a file", "its folder a file"):  # said before a build is tried
        assert "is not a folder" in mpnet.status(models)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(EmbedderUnavailable, match="cannot build its graph in") as raised:
        mpnet.prepared(models)
    assert "\n" not in str(raised.value)
    assert sorted(tmp_path.rglob("*")) == before
