"""The vector cache of :class:`~plait.skills.embedding.EmbeddingRanker`: text -> unit vector,
kept by the SHA-256 of the model name and the text, optionally saved to one ``.npz`` file.

The file is written atomically (a temporary file in the same folder, created with the mode of
any new file under the process's umask, then ``os.replace``), at most ``max_vectors`` of them,
the ones still indexed first; it is read with ``allow_pickle=False``. It is only a cache, so a
file that cannot be used is ignored and rewritten by the next save: one of another ``model`` or
cache ``FORMAT``, one holding more than ``max_vectors`` rows or ``MAX_DIMS`` columns, keys that
are not 64-character strings (SHA-256 hex digests), vectors that are not floats, a ``model``
entry longer than ``MAX_MODEL_CHARS`` (all checked from the array headers before any data is
read), non-finite values, or anything unreadable (empty, cut short, not a zip file, encrypted
members, unknown compression methods). A file that
cannot be written (a folder without write access, a full disk) raises
:class:`~plait.errors.ConfigurationError`.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import zipfile
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plait.errors import ConfigurationError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

__all__ = ["FORMAT", "MAX_DIMS", "MAX_MODEL_CHARS", "VectorCache", "unit_rows"]

FORMAT = 2
"""The cache file's format: 2 since skills are embedded as several pieces (their clauses). A file
of another format (format 1 files have no ``format`` entry) is ignored."""

MAX_DIMS = 16_384
"""The widest vectors a cache file may hold (the largest common embedding models use 4,096)."""

MAX_MODEL_CHARS = 4_096
"""The longest ``model`` name a cache file may hold (a longer one is another model's file)."""


def unit_rows(np: Any, matrix: Matrix) -> Matrix:
    """Each row of ``matrix`` scaled to unit length; a zero row stays zero. Rows are first
    divided by their largest magnitude, so float32 squares neither overflow (values past
    about 1e19 would make every row zero) nor underflow (values below about 1e-19)."""
    peak = np.abs(matrix).max(axis=1, keepdims=True)
    scaled = matrix / np.where(peak == 0, 1.0, peak)
    norms = np.linalg.norm(scaled, axis=1, keepdims=True)
    return (scaled / np.where(norms == 0, 1.0, norms)).astype(np.float32)  # type: ignore[no-any-return]


class VectorCache:
    """Unit vectors by text for one ``model``, at most ``max_vectors`` of them (see the module
    docstring). ``from_file`` is true while the vectors came from the file and no ``embed`` call
    has shown their size yet (a file of an older model of the same name may differ)."""

    def __init__(self, model: str, path: Path | None, max_vectors: int) -> None:
        import numpy  # the embeddings extra

        self._np = numpy
        self.model, self.path, self.max_vectors = model, path, max_vectors
        self.vectors: dict[str, Matrix] = {}
        self.dims = 0
        self.from_file = False

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model}\0{text}".encode()).hexdigest()

    def trim(self, live: Collection[str]) -> None:
        """Drop vectors not in ``live`` (oldest first) until at most ``max_vectors`` remain."""
        extra = len(self.vectors) - self.max_vectors
        if extra > 0:
            for key in [k for k in self.vectors if k not in live][:extra]:
                del self.vectors[key]

    def load(self) -> None:
        """Read the file back, or ignore it (see the module docstring)."""
        path = self.path
        if path is None or not path.is_file():
            return
        np = self._np
        try:
            if not self._within_bounds(path):
                return
            with np.load(path, allow_pickle=False) as data:
                if "format" not in data or int(data["format"]) != FORMAT:
                    return
                if str(data["model"]) != self.model:
                    return
                keys, vectors = data["keys"].tolist(), data["vectors"].astype(np.float32)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, RuntimeError):
            # RuntimeError: an encrypted member; NotImplementedError (a RuntimeError too): a
            # compression method zipfile does not know
            return  # only a cache: rebuilt and rewritten by the next update that embeds
        if vectors.ndim != 2 or len(keys) != len(vectors) or not np.isfinite(vectors).all():
            return
        if not all(isinstance(key, str) for key in keys):
            return
        self.dims, self.from_file = vectors.shape[1], True
        self.vectors.update(zip(keys, unit_rows(np, vectors), strict=True))

    def _within_bounds(self, path: Path) -> bool:
        """Every member's shape and type, read from its header: nothing larger than the bounds
        of the module docstring is read."""
        np = self._np
        headers = {}
        with zipfile.ZipFile(path) as archive:
            for member in ("format", "model", "keys", "vectors"):
                with archive.open(f"{member}.npy") as file:
                    version = np.lib.format.read_magic(file)
                    read_header = (
                        np.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0
                    )
                    shape, _, dtype = read_header(file)
                headers[member] = shape, dtype
        (format_shape, format_type), (model_shape, model_type) = headers["format"], headers["model"]
        (keys_shape, keys_type), (shape, vectors_type) = headers["keys"], headers["vectors"]
        return (
            format_shape == ()
            and format_type.kind in "iu"
            and model_shape == ()
            and model_type.kind == "U"
            and model_type.itemsize <= 4 * MAX_MODEL_CHARS
            and len(keys_shape) == 1
            and keys_type == np.dtype("<U64")
            and len(shape) == 2
            and shape[0] == keys_shape[0] <= self.max_vectors
            and shape[1] <= MAX_DIMS
            and vectors_type.kind == "f"
            and vectors_type.itemsize <= 8
        )

    def save(self, live: Iterable[str] = ()) -> None:
        """Write at most ``max_vectors`` vectors to ``path`` atomically, those of ``live`` first
        (nothing without a path or vectors): a file :meth:`load` reads back whole, even when
        more than ``max_vectors`` are live. Raises :class:`~plait.errors.ConfigurationError`
        when the file cannot be written."""
        if self.path is None or not self.vectors:
            return
        np, vectors = self._np, self.vectors
        first = [k for k in dict.fromkeys(live) if k in vectors]
        keys = list(dict.fromkeys([*first, *vectors]))[: self.max_vectors]
        path = self.path
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # os.open applies the umask to 0o666, as for any new file (mkstemp's is 0o600:
            # a cache filled by one user could not be read by another).
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError as error:
            raise ConfigurationError(
                f"EmbeddingRanker cannot write its cache_path {str(path)[:200]!r} ({error}); "
                "pass a file path in a writable folder, or cache_path=None."
            ) from error
        try:
            with os.fdopen(handle, "wb") as file:
                np.savez(
                    file,
                    format=np.array(FORMAT),
                    model=np.array(self.model),
                    keys=np.array(keys, dtype="<U64"),
                    vectors=np.stack([vectors[k] for k in keys]),
                )
            os.replace(temporary, path)
        except OSError as error:
            temporary.unlink(missing_ok=True)
            raise ConfigurationError(
                f"EmbeddingRanker could not write its cache_path {str(path)[:200]!r} ({error}); "
                "pass a writable file path with free space, or cache_path=None."
            ) from error
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
