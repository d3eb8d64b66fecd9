"""The web API's body limit reads Content-Length as a byte count (hostile-input round 13). A value that is none
('-1', '+5', ' 5', '5, 5') was answered 413 'request body over 1,048,576 bytes', a wrong reason; uvicorn's own
parsers refuse most of them before the application, other ASGI servers pass them on. Run in-process (no server)."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
from starlette.testclient import TestClient

from kvbudget.web.app import create_app

BODY = b'{"model": "qwen3-8b", "context": 4096}'


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), raise_server_exceptions=False, base_url="http://127.0.0.1:8000")


@pytest.mark.parametrize("length", ["-1", "+5", " 5", "5, 5", "0x10", "5e3"])
def test_a_content_length_that_is_no_byte_count_is_one_400_line(client: TestClient, length: str) -> None:
    response = client.post("/api/kv", content=BODY,
                           headers={"Content-Type": "application/json", "Content-Length": length})
    assert response.status_code == 400
    said = response.json()["error"]
    assert "is not a byte count: send the body's length in bytes" in said and "\n" not in said


def test_a_byte_count_over_the_limit_is_still_413_and_a_right_one_is_read(client: TestClient) -> None:
    over = client.post("/api/kv", content=BODY, headers={"Content-Type": "application/json",
                                                          "Content-Length": "99999999999999999999"})
    assert over.status_code == 413 and "1,048,576" in over.json()["error"]
    ok = client.post("/api/kv", content=BODY, headers={"Content-Type": "application/json"})
    assert ok.status_code == 200 and ok.json()["kv_bytes_per_token"] == 147_456  # 2 x 36 x 8 x 128 x 2 bytes
