"""The runnable examples run as written: the offline ones alone, the provider one against a local
Chat Completions server."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from chat_completions import sse_answer
from wire_server import WireServer

EXAMPLES = Path(__file__).parents[1] / "examples"
FIXTURES = Path(__file__).parent / "models" / "fixtures" / "openai"


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("quickstart.py", "2 + 3 = 5"),
        (
            "custom_middleware.py",
            "stored tool result: {'name': 'Ada', 'email': 'ada@example.com', 'card': '•••• 1111'}",
        ),
        ("skills_disclosure.py", "answer: The table has 2 rows."),
        ("skills_ranker.py", "first skill listed for the photo request: photo-albums"),
    ],
)
def test_offline_example_runs(script: str, expected: str) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PYTHONIOENCODING": "utf-8", "PATH": ""},
    )
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout


def test_provider_example_runs_against_a_local_server() -> None:
    with WireServer(FIXTURES) as server:
        server._replies.append(sse_answer("Four words."))
        spec = f"openai-compatible:m@{server.url}/v1"
        result = subprocess.run(
            [sys.executable, str(EXAMPLES / "openai_agent.py"), spec],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={"PYTHONIOENCODING": "utf-8", "PATH": ""},
        )
        bodies = server.bodies()
    assert result.returncode == 0, result.stderr
    assert "Four words." in result.stdout
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["word_count"]


async def test_embedding_example_wires_a_model_into_search_skills(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "skills_embeddings", EXAMPLES / "skills_embeddings.py"
    )
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)  # the model is loaded only by minilm(), not on import
    cache = str(tmp_path / "vectors.npz")
    query = "relese notse"  # no word in common: the trigram embedding finds it, BM25 cannot
    answer = await example.run(str(EXAMPLES / "skills"), trigrams, cache, query)
    assert answer.splitlines()[1].startswith("- **release-notes**")
    assert answer.endswith("(texts embedded: 16)")  # 4 skills: each text and its clauses
    again = await example.run(str(EXAMPLES / "skills"), trigrams, cache, query)
    assert again.endswith("(texts embedded: 0)")  # the .npz cache served every skill


def trigrams(texts: list[str]) -> list[list[float]]:
    """A small deterministic embedding: letter trigrams hashed into 64 dimensions."""
    out = []
    for text in texts:
        vector = [0.0] * 64
        padded = f"  {text.lower()}  "
        for i in range(len(padded) - 2):
            digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=2).digest()
            vector[int.from_bytes(digest) % 64] += 1.0
        out.append(vector)
    return out
