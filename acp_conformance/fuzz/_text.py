"""Free text: realistic (Faker, several scripts, RTL included) and edge cases."""

from __future__ import annotations

import base64
import datetime
import threading
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from acp_conformance.fuzz._options import _Opts

#: The latest date a realistic timestamp takes.
_DATES_END = datetime.datetime(2026, 1, 1)
_LOCALES = ("en_US", "ja_JP", "ar_AA", "he_IL", "ru_RU", "zh_CN", "de_DE", "el_GR", "ko_KR", "fr_FR")
_FAKERS = threading.local()
#: The Faker providers the strategies below call (``person`` for ``internet``'s user names).  A
#: Faker with every provider of its locale costs 20-210 ms to make (ko_KR the most), ~0.5 s for the
#: ten locales in every pytest process that fuzzes; with these, ~7 ms each, and for a given seed
#: the same text (tests/property/test_strategies.py).
_PROVIDERS = tuple(
    f"faker.providers.{name}" for name in ("lorem", "file", "internet", "date_time", "company", "person")
)


def _faker(seed: int) -> Any:
    """A Faker of a locale picked by ``seed``, seeded with it (deterministic per seed)."""
    cache = getattr(_FAKERS, "cache", None)
    if cache is None:
        cache = _FAKERS.cache = {}
    locale = _LOCALES[seed % len(_LOCALES)]
    fake = cache.get(locale)
    if fake is None:
        from faker import Faker

        fake = cache[locale] = Faker(locale, providers=list(_PROVIDERS))
    fake.seed_instance(seed)
    return fake


def _fake(fn: Callable[[Any], str], *, english: bool = False) -> SearchStrategy[str]:
    """Realistic text from Faker, reproducible from a Hypothesis-drawn seed."""
    seeds = st.integers(0, 2**31 - 1)
    if english:
        seeds = seeds.map(lambda s: s - s % len(_LOCALES))  # en_US is locale 0
    return seeds.map(lambda s: fn(_faker(s)))


#: Strings that break naive text handling: bidi controls, zero-width and
#: combining characters, ZWJ emoji, line separators, escapes, injection bait.
EDGE_STRINGS: tuple[str, ...] = (
    "",
    " ",
    "\u202eevil.txt\u202c",  # RTL override
    "\u200f\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd\u200f",  # RLM + Hebrew
    "مرحبا بالعالم",
    "a\u200bb\u200cc\u200dd\u2060e\ufeff",  # zero-width family
    "e\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308",  # stacked combining marks
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034d",
    "👩\u200d👩\u200d👧\u200d👦",  # ZWJ sequence
    "\U0001d573\U0001d58a\U0001d591\U0001d591\U0001d594 🏳️\u200d🌈",  # mathematical letters, flag ZWJ
    "line\u2028separator\u2029paragraph",
    "tab\tcr\rlf\nnul\x00esc\x1b[31mred\x1b[0m",
    "\x7f\x80\x9f",
    "\ufffe\uffff\U0010ffff",
    '"}\n{"jsonrpc":"2.0","id":1,"method":"session/cancel"}',
    "\\u0000\\\\\\",
    "../../../../etc/passwd",
    "%s%n%x{0}${jndi:ldap://x}",
    "I\u0307stanbul İı ß ﬃ",  # case mapping traps
    "\U0001f600" * 8,
)
SURROGATES: tuple[str, ...] = ("\ud800", "\udfff", "a\ud83dz", "\udc00\ud800")


def text(
    *,
    realistic: bool = True,
    unusual: bool = False,
    surrogates: bool = False,
    max_size: int = 200,
) -> SearchStrategy[str]:
    """Free text: realistic sentences (Faker, several scripts incl. RTL),
    ``unusual`` adds edge cases (bidi, zero-width, combining, ZWJ, U+2028,
    control characters), ``surrogates`` adds lone surrogates (not
    encodable as UTF-8; ``encode`` escapes them)."""
    for name, value in (("realistic", realistic), ("unusual", unusual), ("surrogates", surrogates)):
        if not isinstance(value, bool):
            raise InvalidArgument(f"{name} must be a bool, not {value!r}")
    if not isinstance(max_size, int) or isinstance(max_size, bool) or max_size < 1:
        raise InvalidArgument(f"max_size must be a positive integer, not {max_size!r}")
    return _text(realistic, unusual, surrogates, max_size)


def _text(realistic: bool, unusual: bool, surrogates: bool = False, max_size: int = 200) -> SearchStrategy[str]:
    parts: list[SearchStrategy[str]] = []
    if realistic:
        parts.append(_fake(lambda f: f.sentence(nb_words=8)).map(lambda s: s[:max_size]))
    parts.append(st.text(max_size=min(max_size, 40)))
    if unusual:
        edge = st.sampled_from(EDGE_STRINGS)
        if surrogates:
            edge = edge | st.sampled_from(SURROGATES)
        pieces = edge | _fake(lambda f: f.word()) if realistic else edge
        parts.append(st.lists(pieces, min_size=1, max_size=4).map(lambda xs: "".join(xs)[: max_size * 4]))
        if surrogates:
            parts.append(st.text(st.characters(categories=["Cs", "Lo", "Mn", "Cf"]), max_size=min(max_size, 20)))
    return st.one_of(*parts)


def _slug(prefix: str) -> SearchStrategy[str]:
    return st.builds(
        lambda n, tail: f"{prefix}{n:03d}{tail}",
        st.integers(0, 999),
        st.text("abcdef0123456789", min_size=0, max_size=8),
    )


def _abs_paths(realistic: bool, unusual: bool) -> SearchStrategy[str]:
    parts: list[SearchStrategy[str]] = []
    if realistic:
        parts.append(_fake(lambda f: f.file_path(depth=3, absolute=True)))
        parts.append(_fake(lambda f: f"/home/{f.user_name()}/src/{f.word()}", english=True))
    parts.append(
        st.lists(st.text(st.characters(exclude_characters="/\x00"), min_size=1, max_size=8), max_size=4).map(
            lambda xs: "/" + "/".join(xs)
        )
    )
    if unusual:
        parts.append(st.sampled_from(["/", "//", "/tmp/../etc", "/a b/c\u202ed", "/" + "x" * 4096, "/😀/\u200b"]))
    return st.one_of(*parts)


def _b64(max_bytes: int = 48) -> SearchStrategy[str]:
    return st.binary(max_size=max_bytes).map(lambda b: base64.b64encode(b).decode())


_MIME = ("text/plain", "image/png", "image/jpeg", "audio/wav", "audio/mpeg", "application/json", "text/x-python")


def _strings_for(hint: str | None, opts: _Opts) -> SearchStrategy[str]:
    """Realistic strings for a property or definition name."""
    r, u = opts.realistic, opts.unusual
    free = _text(r, u)
    if hint is None or not r:
        return free
    ids = {
        "SessionId": "sess_",
        "ToolCallId": "call_",
        "TerminalId": "term_",
        "MessageId": "msg_",
        "PermissionOptionId": "opt_",
        "SessionModeId": "mode_",
        "SessionConfigId": "cfg_",
        "SessionConfigValueId": "val_",
        "SessionConfigGroupId": "grp_",
        "AuthMethodId": "auth_",
        "ElicitationId": "elic_",
        "CompactionId": "cmp_",
        "id": "id_",
        "optionId": "opt_",
        "modeId": "mode_",
        "methodId": "auth_",
        "configId": "cfg_",
        "requestId": "req_",
        "terminalId": "term_",
    }
    if hint in ids:
        base = _slug(ids[hint]) | st.uuids().map(str)
        return base | _text(False, True, max_size=20) if u else base
    if hint in ("cwd", "path", "additionalDirectories", "root"):
        return _abs_paths(r, u)
    if hint in ("uri", "url"):
        uris = _fake(lambda f: f.uri()) | _abs_paths(r, False).map(lambda p: "file://" + p)
        return uris | free if u else uris
    if hint == "mimeType":
        return st.sampled_from(_MIME) | _fake(lambda f: f.mime_type())
    if hint in ("data", "blob"):
        return _b64()
    if hint in ("updatedAt", "lastModified", "createdAt"):
        # Up to a fixed instant: Faker's default end is now, so the same seed drew another date on
        # every run (and a replayed example was not the same bytes).
        return _fake(lambda f: f.iso8601(end_datetime=_DATES_END) + "Z")
    if hint == "version":
        return st.builds(lambda a, b, c: f"{a}.{b}.{c}", st.integers(0, 9), st.integers(0, 30), st.integers(0, 99))
    if hint == "currency":
        return st.sampled_from(["USD", "EUR", "JPY", "credits"])
    if hint == "command":
        return st.sampled_from(["npx", "uvx", "python3", "/usr/local/bin/mcp-server", "node"]) | _abs_paths(r, u)
    if hint in ("name", "title", "hint"):
        return _fake(lambda f: f.catch_phrase() if f.locales[0] == "en_US" else f.word()) | free
    if hint in ("text", "content", "newText", "oldText", "output", "message", "description", "summary"):
        return _fake(lambda f: f.paragraph(nb_sentences=3)) | free
    if hint in ("signal",):
        return st.sampled_from(["SIGTERM", "SIGKILL", "SIGINT"])
    if hint in ("traceparent",):
        return st.builds(lambda a, b: f"00-{a:032x}-{b:016x}-01", st.integers(1, 2**128 - 1), st.integers(1, 2**64 - 1))
    return free
