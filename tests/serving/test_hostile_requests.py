"""Hostile requests against the running server: each is answered with a 4xx and the OpenAI
error object `{"error": {"message", "type", "param"}}` (never a 500, never a hang), the error
names the field at fault where there is one, and the server answers a good request after.

Hypothesis draws the wrong JSON types (a bounded number per endpoint, no deadline, no example
database); the huge numbers, lone surrogates, bodies, images, methods and paths are listed.
"""

from __future__ import annotations

import io
import json
import struct
import zlib

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PIL import Image

pytestmark = pytest.mark.slow(seconds=40)

FUZZ = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
JSON_TYPES = ("null", "bool", "int", "float", "str", "list", "dict")
NUMBER = {"int", "float"}
TEXTS = {"str", "list"}  # A string or a list of strings.
# Each JSON endpoint: a body it answers with 200, and the JSON types each field takes (null
# means "absent" for every field but the required ones, so it is never a wrong type there).
ENDPOINTS = {
    "/v1/completions": (
        {"model": "gpt", "prompt": "def", "max_tokens": 1, "temperature": 0},
        {"model": {"str"}, "prompt": TEXTS, "max_tokens": {"int"}, "temperature": NUMBER,
         "top_p": NUMBER, "top_k": {"int"}, "stop": TEXTS, "seed": {"int"}, "stream": {"bool"},
         "n": {"int"}, "best_of": {"int"}, "echo": {"bool"}, "logprobs": {"int"},
         "suffix": {"str"}, "logit_bias": {"dict"}, "stream_options": {"dict"}, "user": {"str"},
         "presence_penalty": NUMBER, "frequency_penalty": NUMBER},
    ),
    "/v1/embeddings": (
        {"model": "bert", "input": "a"},
        {"model": {"str"}, "input": TEXTS, "encoding_format": {"str"}, "dimensions": {"int"},
         "user": {"str"}},
    ),
    "/v1/classify": ({"model": "cls", "input": ["a", "b"]}, {"model": {"str"}, "input": TEXTS}),
    "/v1/fill-mask": (
        {"model": "bert", "input": "a [MASK]"},
        {"model": {"str"}, "input": TEXTS, "top_k": {"int"}},
    ),
    "/v1/translate": (
        {"model": "tiny", "text": "one", "max_length": 2},
        {"model": {"str"}, "text": TEXTS, "beam_size": {"int"}, "alpha": NUMBER,
         "max_length": {"int"}},
    ),
    "/translate": (  # LibreTranslate's, as JSON; alternatives may be a form's digits.
        {"q": "one", "target": "fr"},
        {"q": TEXTS, "source": {"str"}, "target": {"str"}, "format": {"str"},
         "api_key": {"str"}, "alternatives": {"int", "str"}},
    ),
}  # fmt: skip
REQUIRED = {"prompt", "input", "text", "q", "target"}
# Numbers written as JSON text: past every range, below every minimum, or not JSON at all.
HUGE = ("1e308", "-1e308", "1e400", "1" + "0" * 400, "-" + "9" * 400, "-1", "NaN", "Infinity")
VALID_HUGE = {("seed", "-1")}  # Any 64-bit seed is a seed.

FINITE = st.floats(allow_nan=False, allow_infinity=False)  # What JSON can write.
_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), FINITE, st.text(max_size=8))
_VALUES = {
    "null": st.none(),
    "bool": st.booleans(),
    "int": st.integers(),  # Unbounded: hypothesis draws 40-digit integers too.
    "float": FINITE.filter(lambda x: not x.is_integer()),  # 2.0 is an integer's value
    "str": st.text(max_size=12),
    "list": st.lists(_LEAF, max_size=3),
    "dict": st.dictionaries(st.text(max_size=6), _LEAF, max_size=3),
}
# A list of strings with one item that is not a string (nor a [text, text] pair).
_BAD_LIST = st.tuples(
    st.lists(st.text(max_size=6), max_size=3),
    st.one_of(st.none(), st.booleans(), st.integers(), FINITE,
              st.dictionaries(st.text(max_size=4), _LEAF, max_size=2)),
    st.integers(0, 3),
).map(lambda t: t[0][: t[2]] + [t[1]] + t[0][t[2] :])  # fmt: skip


@pytest.fixture(scope="module")
def client(server) -> httpx.Client:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


def assert_refused(response: httpx.Response, field: str | None = None) -> dict:
    """A 4xx whose JSON body is OpenAI's error object, naming `field` (or an item of it)."""
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:500])
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param"}, error
    assert isinstance(error["message"], str) and error["message"], error
    assert isinstance(error["type"], str) and error["type"], error
    assert error["param"] is None or isinstance(error["param"], str), error
    if field is not None:
        assert error["param"] is not None and error["param"].startswith(field), (field, error)
    return error


def assert_alive(client: httpx.Client) -> None:
    """The server still answers a good request of each JSON endpoint."""
    for path, (body, _) in ENDPOINTS.items():
        response = client.post(path, json=body)
        assert response.status_code == 200, (path, response.text[:500])


def post_json(client: httpx.Client, path: str, body) -> httpx.Response:
    """`body` as ASCII JSON (lone surrogates as "\\ud800" escapes, as any client may send)."""
    data = json.dumps(body).encode()
    return client.post(path, content=data, headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("path", ENDPOINTS)
def test_wrong_json_types(client, path):
    base, types = ENDPOINTS[path]

    @FUZZ
    @given(data=st.data())
    def wrong_type(data):
        field = data.draw(st.sampled_from(sorted(types)), label="field")
        accepted = types[field] | ({"null"} if field not in REQUIRED else set())
        kinds = [k for k in JSON_TYPES if k not in accepted]
        value = data.draw(st.one_of([_VALUES[k] for k in kinds]), label="value")
        if "list" in types[field] and data.draw(st.booleans(), label="bad list"):
            value = data.draw(_BAD_LIST, label="value")
        assert_refused(post_json(client, path, {**base, field: value}), field)

    wrong_type()
    assert_alive(client)


@pytest.mark.parametrize("path", ENDPOINTS)
def test_huge_and_invalid_numbers(client, path):
    base, types = ENDPOINTS[path]
    for field in [f for f, kinds in types.items() if kinds & NUMBER]:
        for literal in HUGE:
            if (field, literal) in VALID_HUGE:
                continue
            text = json.dumps({**base, field: "__N__"}).replace('"__N__"', literal)
            response = client.post(path, content=text, headers={"Content-Type": "application/json"})
            assert_refused(response, None if literal in ("NaN", "Infinity") else field)
    assert_alive(client)


@pytest.mark.parametrize("path", ENDPOINTS)
def test_malformed_bodies(client, path):
    @FUZZ
    @given(
        body=st.one_of(
            st.binary(max_size=40),  # mostly not UTF-8, or not JSON
            st.text(max_size=40).map(str.encode),
            st.binary(max_size=20).map(lambda b: b'{"a": "' + b + b'\xff"}'),  # invalid UTF-8
            st.recursive(_LEAF, lambda inner: st.lists(inner, max_size=3), max_leaves=8).map(
                lambda v: json.dumps(v).encode()  # JSON, but not an object
            ),
            st.sampled_from([b"", b"{", b"}", b'{"a": 1,}', b"{'a': 1}", b"[" * 100_000,
                             b"[" * 100_000 + b"]" * 100_000, b'{"a": NaN}', b"\xef\xbb\xbf{}",
                             b'{"a": 1e999999}', b"\x00" * 16]),
        )
    )  # fmt: skip
    def malformed(body):
        response = client.post(path, content=body, headers={"Content-Type": "application/json"})
        assert_refused(response)

    malformed()
    assert_alive(client)


@pytest.mark.parametrize("path", ENDPOINTS)
def test_unknown_fields(client, path):
    base, types = ENDPOINTS[path]
    known = set(types) | {"user", "presence_penalty", "frequency_penalty"}

    @FUZZ
    @given(name=st.text(max_size=30).filter(lambda n: n not in known), value=_LEAF)
    def unknown(name, value):
        error = assert_refused(post_json(client, path, {**base, name: value}))
        assert error["param"] == name, error

    unknown()
    for name in ("\ud800", "max_token", "x" * 100_000, "prompt\x00"):
        assert_refused(post_json(client, path, {**base, name: 1}))
    assert_alive(client)


@pytest.mark.parametrize("path", ENDPOINTS)
def test_lone_surrogates(client, path):
    base, types = ENDPOINTS[path]
    for field in [f for f, kinds in types.items() if "str" in kinds]:
        for text in ("\ud800", "a\udfffb", "\udc80" * 3, "ok\ud83d"):
            assert_refused(post_json(client, path, {**base, field: text}), field)
            if "list" in types[field]:
                pair = ["a", text] if path == "/v1/classify" else ["a", "b", text]
                wrapped = [pair] if path == "/v1/classify" else pair
                assert_refused(post_json(client, path, {**base, field: wrapped}), field)
    assert_alive(client)


def test_empty_lists(client):
    for path, field in [("/v1/completions", "prompt"), ("/v1/embeddings", "input"),
                        ("/v1/classify", "input"), ("/v1/fill-mask", "input"),
                        ("/v1/translate", "text"), ("/translate", "q"),
                        ("/v1/completions", "stop")]:  # fmt: skip
        base, _ = ENDPOINTS[path]
        assert_refused(post_json(client, path, {**base, field: []}), field)
    assert_refused(post_json(client, "/v1/classify", {"model": "cls", "input": [[]]}), "input")
    assert_alive(client)


def test_bodies_over_the_size_limit(client):
    """Over --max_body_bytes (1 MiB here): 413 by the Content-Length, or as a chunked body
    arrives (no length given)."""
    big = b'{"prompt": "' + b"a" * (1 << 20) + b'"}'
    for path in [*ENDPOINTS, "/v1/classify-image"]:
        assert_refused(client.post(path, content=big))
        chunks = iter([big[i : i + 65536] for i in range(0, len(big), 65536)])
        assert_refused(client.post(path, content=chunks))  # Transfer-Encoding: chunked
    assert_alive(client)


def _png(width: int, height: int, channels: int, pixels: bytes) -> bytes:
    """A PNG (8-bit grey or RGB) whose header says width x height, holding `pixels`."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0 if channels == 1 else 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(pixels))
            + chunk(b"IEND", b""))  # fmt: skip


def readable(data: bytes, size: tuple[int, int]) -> bool:
    """Whether Pillow reads `data` as a whole image of `size` (the server must answer it)."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            return image.size == size
    except Exception:  # noqa: BLE001 - whatever Pillow raises, the image is unreadable
        return False


def test_malformed_images(client):
    vit = next(m for m in client.get("/v1/models").json()["data"] if m["id"] == "vit")
    (w, h), c = vit["image_size"], vit["channels"]
    rows = [bytes([0]) + bytes((37 * i * i + 11 * i) % 256 for i in range(y, y + w * c))
            for y in range(h)]  # fmt: skip
    pixels = b"".join(rows)  # each row: a filter byte, then noise (a long deflate stream)
    png = _png(w, h, c, pixels)
    good = client.post("/v1/classify-image", content=png, headers={"Content-Type": "image/png"})
    assert good.status_code == 200, good.text
    # Pillow decodes a file cut after its deflate stream (no Adler-32, CRC or IEND needed).
    stream_end = 8 + 25 + 8 + len(zlib.compress(pixels)) - 4

    def image(body: bytes, kind: str = "image/png", query: str = "") -> httpx.Response:
        return client.post(f"/v1/classify-image{query}", content=body,
                           headers={"Content-Type": kind})  # fmt: skip

    @FUZZ
    @given(
        body=st.one_of(
            st.binary(max_size=200),
            st.integers(0, stream_end - 1).map(lambda n: png[:n]),  # truncated
            st.binary(min_size=1, max_size=40).map(lambda b: png[:41] + b),  # other pixels
        ),
        kind=st.sampled_from(["image/png", "image/jpeg", "application/octet-stream"]),
    )
    def broken(body, kind):
        response = image(body, kind)
        if readable(body, (w, h)):  # Random bytes can be a valid deflate stream of pixels.
            assert response.status_code == 200, response.text
        else:
            assert_refused(response, "image")

    broken()
    for width, height in [(100_000, 100_000), (7000, 7000), (2**31 - 1, 1)]:
        huge = image(_png(width, height, c, bytes(64)))  # refused before decoding
        assert huge.status_code == 413 and "pixels" in assert_refused(huge, "image")["message"]
    assert_refused(image(_png(0, 0, c, bytes(64))), "image")
    for kind in ["text/plain", "application/json", "", "image"]:
        assert_refused(image(png, kind), "image")
    for query in ["?resize=maybe", "?model=nope", "?model=gpt"]:
        assert_refused(image(png, query=query))
    multipart = "multipart/form-data; boundary=xyz"
    assert_refused(image(b"--xyz\r\nnonsense", multipart))
    assert_refused(image(png, "multipart/form-data"))  # no boundary
    files = {"other": ("a.png", png, "image/png")}
    assert_refused(client.post("/v1/classify-image", files=files), "image")
    two = {"image": ("a.png", png, "image/png"), "more": ("b.png", png, "image/png")}
    assert_refused(client.post("/v1/classify-image", files=two))
    good = client.post("/v1/classify-image", files={"image": ("a.png", png, "image/png")})
    assert good.status_code == 200, good.text
    assert_alive(client)


def test_wrong_content_types(client):
    """LibreTranslate's endpoint reads a form unless told JSON; a JSON endpoint reads JSON
    whatever the header says (curl -d sends a form's), so a form body is malformed JSON."""
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert_refused(client.post("/translate", content=b'{"q": "one", "target": "fr"}', headers=form))
    as_json = {"Content-Type": "application/json"}
    assert_refused(client.post("/translate", content=b"q=one&target=fr", headers=as_json))
    assert_refused(client.post("/translate", content=b"q=%ff&target=fr", headers=form), None)
    for path in ENDPOINTS:
        if path != "/translate":
            assert_refused(client.post(path, data={"input": "a", "prompt": "a", "text": "a"}))
            assert_refused(client.post(path, files={"input": ("a.txt", b"a", "text/plain")}))
    assert_alive(client)


def test_wrong_methods_and_unknown_paths(client):
    posts = [*ENDPOINTS, "/v1/classify-image"]
    for path in posts:
        for method in ("GET", "PUT", "DELETE", "PATCH", "OPTIONS"):
            response = client.request(method, path)
            assert response.status_code == 405, (method, path)
            assert_refused(response)
    for path in ("/healthz", "/readyz", "/metrics", "/v1/models"):
        for method in ("POST", "PUT", "DELETE"):
            assert_refused(client.request(method, path))
    known = set(posts) | {"/healthz", "/readyz", "/metrics", "/v1/models", "/languages"}

    @FUZZ
    @given(
        path=st.from_regex(r"/[a-zA-Z0-9_~\-/]{0,40}", fullmatch=True).filter(
            lambda p: p not in known
        ),
        method=st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
    )
    @example(path="//", method="GET")  # A bare "//x" is an authority to httpx: sent in a full URL.
    def unknown(path, method):
        response = client.request(method, str(client.base_url).rstrip("/") + path)
        assert response.status_code == 404, (method, path, response.status_code)
        assert_refused(response)

    unknown()
    for path in ("/v1/models/", "/V1/completions", "/v1/completions/", "/v1", "/%ED%A0%80"):
        assert_refused(client.post(path, json={"prompt": "a"}))
    assert_alive(client)
