"""The vector cache of :class:`~plait.skills.embedding.EmbeddingRanker`: text -> unit vector,
kept by the SHA-256 of the model name and the text, optionally saved to one ``.npz`` file.

The file is written atomically (a temporary file in the same folder, then ``os.replace``) and read
with ``allow_pickle=False``. It is only a cache, so a file that cannot be used is ignored and
rewritten by the next save: one of another ``model`` or cache ``FORMAT``, one holding more than
``max_vectors`` rows or ``MAX_DIMS`` columns (checked from the array headers before any data is
read), non-finite values, or anything unreadable (empty, cut short, not a zip file).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

__all__ = ["FORMAT", "MAX_DIMS", "VectorCache"]

FORMAT = 2
"""The cache file's format: 2 since skills are embedded as several pieces (their clauses). A file
of another format (format 1 files have no ``format`` entry) is ignored."""

MAX_DIMS = 16_384
"""The widest vectors a cache file may hold (the largest common embedding models use 4,096)."""


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

    def trim(self, live: Iterable[str]) -> None:
        """Drop vectors not in ``live`` (oldest first) until at most ``max_vectors`` remain."""
        extra = len(self.vectors) - self.max_vectors
        if extra > 0:
            keep = set(live)
            for key in [k for k in self.vectors if k not in keep][:extra]:
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
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return  # only a cache: rebuilt and rewritten by the next update that embeds
        if vectors.ndim != 2 or len(keys) != len(vectors) or not np.isfinite(vectors).all():
            return
        if not all(isinstance(key, str) for key in keys):
            return
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        self.dims, self.from_file = vectors.shape[1], True
        self.vectors.update(zip(keys, vectors / np.where(norms == 0, 1.0, norms), strict=True))

    def _within_bounds(self, path: Path) -> bool:
        np = self._np
        with zipfile.ZipFile(path) as archive:
            for member in ("keys.npy", "vectors.npy"):
                with archive.open(member) as file:
                    version = np.lib.format.read_magic(file)
                    read_header = (
                        np.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0
                    )
                    shape = read_header(file)[0]
                if not shape or shape[0] > self.max_vectors:
                    return False
                if member == "vectors.npy" and (len(shape) != 2 or shape[1] > MAX_DIMS):
                    return False
        return True

    def save(self) -> None:
        """Write every vector to ``path`` atomically (nothing without a path or vectors)."""
        if self.path is None or not self.vectors:
            return
        np = self._np
        keys = list(self.vectors)
        path = self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".npz")
        try:
            with os.fdopen(handle, "wb") as file:
                np.savez(
                    file,
                    format=np.array(FORMAT),
                    model=np.array(self.model),
                    keys=np.array(keys),
                    vectors=np.stack([self.vectors[k] for k in keys]),
                )
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
