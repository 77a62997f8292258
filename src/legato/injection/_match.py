"""Typed, normalised matching of sink values against what entered a run.

Content is indexed once, when it arrives (`ValueIndex.add`), so an admission check is a
handful of dictionary lookups however large the context is. Every key is typed
(`email:`, `url:`, `host:`, `acct:`, `phone:`, `tok:`) and normalised the same way on
both sides:

- text: NFKC, zero-width and soft-hyphen characters removed, common homoglyphs folded to
  Latin, case folded; HTML entities and percent-escapes decoded (both forms indexed);
  base64 runs that decode to text are indexed too (a value hidden in base64 is still
  where it came from);
- e-mail: `mailto:` and display names dropped, case folded, `+tag` removed;
- URL: scheme and host lower-cased, IDNA applied, default port, user-info and trailing
  slash dropped; the host is indexed on its own, so `https://bank.test@evil.test` is
  matched as `evil.test`, never as `bank.test`;
- account numbers (IBAN-shaped): spaces and dashes removed, case folded;
- phone numbers: digits only (with a leading `+` kept as part of the value);
- paths: `.`/`..` segments resolved, `./` dropped;
- dates: ISO (`2024-05-01`, `2024-05-01T09:00`), month names (`May 1st, 2024`, `1 May`,
  `the 14th of November`, `Jan. 2`, ranges `from the 1st to the 5th of May`) and numeric
  dates (`05/01/2024`, both day-month orders) are all the key `date:MM-DD`: the day, not
  the year (a model often writes the wrong year for a day the user named).

There is no length floor: a short id is matched only against id fields and the user's
words (`id:` keys), a short name against whole values and words.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import posixpath
import re
import unicodedata
from collections.abc import Collection, Iterator
from typing import Literal, NamedTuple, cast
from urllib.parse import unquote, urlsplit

__all__ = [
    "MIN_TOKEN",
    "Atoms",
    "Found",
    "ValueIndex",
    "clean_text",
    "compact",
    "dates",
    "embedded_links",
    "normalise_email",
    "normalise_url",
    "parse_json",
    "record_keys",
    "sink_atoms",
    "sink_keys",
]

MIN_TOKEN = 1
"""Kept for compatibility: every token counts now (ids are typed instead)."""

Found = Literal["trusted", "untrusted", "nowhere"]
"""Where a value was seen: in some trusted source, only in untrusted ones, or in none."""

_INVISIBLE = dict.fromkeys(
    map(ord, "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff"),
    None,
)
# letters that look Latin (Cyrillic, Greek) -> the Latin letter they imitate
_HOMOGLYPHS = str.maketrans(
    "аеорсухіјѕԁԛԝѵАВЕКМНОРСТХІЈЅαοτνкмтвн" + "ɑ",
    "aeopcyxijsdqwvABEKMHOPCTXIJSaotvkmtbh" + "a",
)

_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"(?:https?|ftp)://[^\s<>\"'`)\]}]+", re.IGNORECASE)
_IBAN = re.compile(r"\b[a-z]{2}\d{2}(?:[ -]?[a-z0-9]{4}){2,7}(?:[ -]?[a-z0-9]{1,4})?\b")
_PHONE = re.compile(r"(?<![\w+])\+?\d[\d ().-]{6,}\d(?!\w)")
_DOMAIN = re.compile(r"^(?:[a-z0-9-]+\.)+[a-z]{2,}$")
_B64 = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
_QUOTED = re.compile(r"['\"“‘]([^'\"”’\n]{1,80})['\"”’]")
_STRIP = "\"'`()[]{}<>,;:!?*“”‘’«»"  # quotes models and mail clients use
_TRAILING = _STRIP + "."
_QUOTES = "\"'`()[]{}<>,;“”‘’«»"  # quotes models and mail clients use
_EDGE = frozenset(_TRAILING)
"""A word that neither starts nor ends with one of these is a token as it stands."""

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_UNTIL = r"\s*(?:to|until|till|through|and|-|–|—)\s*(?:the\s+)?"
_DIGIT = re.compile(r"\d")
_ISO_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)")
_NUMERIC_DATE = re.compile(r"(?<![\d./])(\d{1,2})[/.](\d{1,2})[/.](\d{4}|\d{2})(?![\d./])")
_MONTH_DAY = re.compile(rf"\b{_MONTH}\s+{_DAY}(?:{_UNTIL}{_DAY})?\b")
_DAY_MONTH = re.compile(rf"\b{_DAY}(?:{_UNTIL}{_DAY})?\s+(?:of\s+)?{_MONTH}(?![a-z])")


def clean_text(text: str) -> str:
    """NFKC, invisible characters removed, homoglyphs folded, case folded."""
    folded = unicodedata.normalize("NFKC", text).translate(_INVISIBLE).translate(_HOMOGLYPHS)
    return folded.casefold()


def normalise_email(value: str) -> str | None:
    """The comparable form of an e-mail address, or None if `value` is not one."""
    text = clean_text(value).strip()
    if "<" in text and text.endswith(">"):
        text = text[text.rindex("<") + 1 : -1]
    text = text.removeprefix("mailto:").strip(_TRAILING)
    match = _EMAIL.fullmatch(text)
    if match is None:
        return None
    local, _, domain = text.rpartition("@")
    local = local.split("+", 1)[0]
    return f"{local}@{_idna(domain)}"


def normalise_url(value: str) -> tuple[str, str] | None:
    """The comparable `(url, host)` of a URL, or None if `value` has no host."""
    text = clean_text(value).strip().strip(_STRIP)
    if "://" not in text:
        if not _DOMAIN.match(text.split("/", 1)[0]):
            return None
        text = "https://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    host = _idna(parts.hostname or "")
    if not host:
        return None
    scheme = "https" if parts.scheme in ("http", "https") else parts.scheme
    default = {"http": 80, "https": 443, "ftp": 21}.get(parts.scheme)
    netloc = host if port is None or port == default else f"{host}:{port}"
    path = unquote(parts.path).rstrip("/")
    query = f"?{unquote(parts.query)}" if parts.query else ""
    return f"{scheme}://{netloc}{path}{query}", host


def _idna(host: str) -> str:
    host = host.strip(".")
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def _path(token: str) -> str:
    normal = posixpath.normpath(token)
    return normal.removeprefix("./")


def compact(value: str) -> str:
    """`value` without whitespace and dashes (`GB29 NWBK-6016` -> `GB29NWBK6016`)."""
    return _SPACE_DASH.sub("", value)


_SPACE_DASH = re.compile(r"[\s-]")


def _strip(raw: str, chars: str) -> str:
    """`raw` without the quotes and punctuation around it, however they nest (`'a-1'.`)."""
    while True:
        token = raw.strip(chars).rstrip(".")
        if token == raw:
            return token
        raw = token


def _tokens(text: str) -> Iterator[str]:
    return _strip_tokens(set(text.split()))


def _strip_tokens(raws: Collection[str]) -> Iterator[str]:
    edge = _EDGE
    for raw in raws:
        if raw[0] not in edge and raw[-1] not in edge:
            yield raw  # nothing to strip (most words): both forms below are the word itself
            continue
        token = _strip(raw, _STRIP)
        if token:
            yield token
        light = _strip(raw, _QUOTES)  # keeps a final "!" or "?" a secret may end in
        if light != token and light:
            yield light


def _leaves(value: object, key: str = "") -> Iterator[tuple[str, str]]:
    """(field name, scalar as text) of every leaf of a JSON value; object keys count as leaves."""
    if isinstance(value, dict):
        for k, v in cast("dict[str, object]", value).items():
            yield "", k  # results keyed by name (`{"Hotel X": 4.5}`)
            yield from _leaves(v, k)
    elif isinstance(value, list):
        for item in cast("list[object]", value):
            yield from _leaves(item, key)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, float) and value.is_integer():
        yield key, str(int(value))
    else:
        yield key, str(value)


def parse_json(text: str) -> object | None:
    """`text` parsed, when it is a JSON object or array (a structured result); else None."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def is_id_field(name: str) -> bool:
    """Whether a JSON field names an object (`id`, `file_id`, `ids`): its values are ids."""
    name = name.casefold().strip("_")
    return name in ("id", "ids") or name.endswith(("_id", "_ids"))


def content_keys(text: str) -> set[str]:
    """Every typed key `text` supplies (what an index records for it).

    A JSON text (a tool result, an MCP result, a memory item) is indexed by its leaves,
    each as a value of its own, so a value next to a delimiter or an escape is still
    found. The value of an id field (`id`, `*_id`) is an object's own id (`ref:`); every
    other word is a mention (`id:`), which is what decides an id sink: an id someone
    wrote in content is theirs, an id the system returned is a reference.
    """
    keys: set[str] = set()
    parsed = parse_json(text)
    if parsed is None:
        _text_keys(text, keys)
        keys.update("id:" + token for token in _id_mentions(clean_text(text)))
        return keys
    for name, leaf in _leaves(parsed):
        whole = clean_text(leaf).strip()
        if not whole:
            continue
        if is_id_field(name):
            keys.add("ref:" + whole)
            continue
        _text_keys(leaf, keys)
        keys.add("tok:" + whole)
        keys.update("id:" + token for token in _id_mentions(whole))
    return keys


_ID_CUES = frozenset(
    "id ids no no. number # file files email emails event events message transaction item "
    "record document doc ticket order".split()
)
"""Words after which a word in prose is an id (`file 13`, `ID '13'`, `#13`)."""


def user_ids(text: str) -> set[str]:
    """The `id:` keys of trusted words: ids written as ids (`file 13`, `#13`) or quoted.

    A bare number in the user's prose ("on June 13") is not an id: were it one, an
    injected "delete file 13" would pass in every task that mentions the 13th.
    """
    base = clean_text(text)
    keys = {"id:" + token for token in _id_mentions(base)}
    keys.update("id:" + q.strip() for q in _QUOTED.findall(base) if q.strip())
    return keys


def _id_mentions(text: str) -> Iterator[str]:
    """The words of prose written as ids: after a cue word (`file 13`, `ID '13'`) or `#13`."""
    previous = ""
    for raw in text.split():
        token = _strip(raw, _STRIP)
        if token.startswith("#") and len(token) > 1:
            yield token[1:]
        elif previous in _ID_CUES and token:
            yield token
        previous = token.rstrip(":=")


def record_keys(value: object) -> set[str]:
    """The keys a policy vouches for in one field: each scalar as a whole value only.

    The words inside a trusted field are not vouched for one by one: a channel named
    `External_<an injected instruction>` vouches for that name, never for an address or
    a link written inside it. An address or link that is the whole value gets its typed key.
    """
    keys: set[str] = set()
    if isinstance(value, dict):
        for k, v in cast("dict[str, object]", value).items():
            keys |= record_keys(k)
            keys |= record_keys(v)
        return keys
    if isinstance(value, list):
        for item in cast("list[object]", value):
            keys |= record_keys(item)
        return keys
    if value is None or isinstance(value, bool):
        return keys
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    whole = clean_text(str(value)).strip()
    if not whole:
        return keys
    keys.update(("tok:" + whole, "id:" + whole, "ref:" + whole))
    keys.update(dates(whole))
    email = normalise_email(whole)
    if email is not None:
        keys.add(f"email:{email}")
    elif _IBAN.fullmatch(whole):
        keys.add(f"acct:{compact(whole)}")
    elif "/" in whole or "." in whole:
        url = normalise_url(whole)
        if url is not None:
            keys.update((f"url:{url[0]}", f"host:{url[1]}"))
    return keys


def embedded_links(text: str) -> list[tuple[str, str]]:
    """(kind, value) of each address or link written inside free text (a message body)."""
    base = clean_text(text)
    found: list[tuple[str, str]] = [("recipient", m.group(0)) for m in _EMAIL.finditer(base)]
    found += [("url", m.group(0).rstrip(_TRAILING)) for m in _URL.finditer(base)]
    for token in _tokens(base):
        if "@" not in token and "://" not in token and "." in token:
            host = token.split("/", 1)[0]
            if _DOMAIN.match(host) and host.rsplit(".", 1)[1] in _TLDS:
                found.append(("url", token))
    return found


_TLDS = frozenset("com org net io dev test example info biz co uk de fr ch app site page".split())
"""Endings that make a dotted word a link in free text (not `e.g.` or `file.txt`)."""


def _text_keys(text: str, keys: set[str]) -> None:
    base = clean_text(text)
    variants = {base, html.unescape(base), unquote(base)}
    for variant in variants:
        _typed_keys(variant, keys)
    for quoted in _QUOTED.findall(base):
        if quoted.strip():
            keys.add("tok:" + quoted.strip())  # a quoted phrase is one value: 'Hotel Le Marais'
    for blob in _B64.findall(text):
        decoded = _decode_b64(blob)
        if decoded is not None:
            _typed_keys(clean_text(decoded), keys)


def dates(text: str) -> set[str]:
    """The `date:MM-DD` keys of every date written in `text` (already `clean_text`-ed).

    Only the day counts: the user who says "May 1st" names that day whatever year a
    model then writes, and the injected "May 1st, 2024" names the same day.
    """
    found: set[str] = set()
    if _DIGIT.search(text) is None:
        return found
    for match in _ISO_DATE.finditer(text):
        _add_date(found, int(match.group(2)), int(match.group(3)))
    for match in _NUMERIC_DATE.finditer(text):
        first, second = int(match.group(1)), int(match.group(2))
        _add_date(found, first, second)  # month/day
        _add_date(found, second, first)  # day/month: both readings
    for match in _MONTH_DAY.finditer(text):
        month = _MONTHS[match.group(1)]
        for day in match.group(2, 3):
            if day is not None:
                _add_date(found, month, int(day))
    for match in _DAY_MONTH.finditer(text):
        month = _MONTHS[match.group(3)]
        for day in match.group(1, 2):
            if day is not None:
                _add_date(found, month, int(day))
    return found


def _add_date(found: set[str], month: int, day: int) -> None:
    if 1 <= month <= 12 and 1 <= day <= 31:
        found.add(f"date:{month:02d}-{day:02d}")


def _typed_keys(text: str, keys: set[str]) -> None:
    keys.update(dates(text))
    for match in _EMAIL.finditer(text):
        email = normalise_email(match.group(0))
        if email is not None:
            keys.add(f"email:{email}")
            keys.add(f"host:{email.rpartition('@')[2]}")
    for match in _URL.finditer(text):
        url = normalise_url(match.group(0).rstrip(_TRAILING))
        if url is not None:
            keys.add(f"url:{url[0]}")
            keys.add(f"host:{url[1]}")
    for match in _IBAN.finditer(text):
        keys.add(f"acct:{compact(match.group(0))}")
    for match in _PHONE.finditer(text):
        keys.add(f"phone:{_phone(match.group(0))}")
    tokens = set(_tokens(text))
    keys.update(["tok:" + t for t in tokens])
    for token in tokens:
        if "/" in token:
            keys.add(f"tok:{_path(token)}")
        if "." not in token:
            continue
        for end in (i for i, ch in enumerate(token + ".") if ch == "."):
            if _DOMAIN.match(token[:end]):  # `www.site.test.Next` (no space after a full stop)
                keys.add(f"host:{_idna(token[:end])}")
                keys.add(f"url:https://{_idna(token[:end])}")
        if _DOMAIN.match(token):
            keys.add(f"host:{_idna(token)}")
        elif "://" not in token and "@" not in token and _DOMAIN.match(token.split("/", 1)[0]):
            url = normalise_url(token)  # a bare `host/path` the user typed
            if url is not None:
                keys.add(f"url:{url[0]}")
                keys.add(f"host:{url[1]}")


def _phone(value: str) -> str:
    digits = re.sub(r"\D", "", value)
    return ("+" if value.strip().startswith("+") else "") + digits


def _decode_b64(blob: str) -> str | None:
    padded = blob + "=" * (-len(blob) % 4)
    try:
        data = base64.b64decode(padded, altchars=b"-_" if "-" in blob or "_" in blob else None)
        text = data.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    printable = sum(ch.isprintable() or ch.isspace() for ch in text)
    return text if text and printable == len(text) else None


class Atoms(NamedTuple):
    """What a sink value is looked up by.

    `keys`: atoms, each a list of alternatives (an atom is found where any alternative
    is; the first, most exact, wins). `words`: the plain words of a free-text value, one
    atom each, looked up together as a set (a 10 kB command is ~1,000 of them).
    """

    keys: list[list[str]]
    words: frozenset[str] = frozenset()


def sink_keys(value: str, kind: str) -> list[list[str]]:
    """The keys a sink value is looked up by: a list of atoms, each a list of alternatives.

    An atom is found where any of its alternatives is (the first, most exact, wins); a
    value of several atoms (a command, a free-text sink) is judged on every atom. There
    is no length floor: an id is matched only as an id (the id field of a returned object,
    or a word the user typed), so "13" in a message body never vouches for file "13".
    """
    keys, words = sink_atoms(value, kind)
    return [*keys, *([w] for w in sorted(words))]


def sink_atoms(value: str, kind: str) -> Atoms:
    """`sink_keys`, with the plain words of free text apart (`ValueIndex.find_all`)."""
    text = clean_text(value).strip()
    if not text:
        return Atoms([])
    match kind:
        case "id":
            return Atoms([[f"id:{text}"]])
        case "recipient":
            email = normalise_email(text)
            if email is not None:
                return Atoms([[f"email:{email}"]])
            if _IBAN.fullmatch(text):
                return Atoms([[f"acct:{compact(text)}", f"tok:{compact(text)}"]])
            if _PHONE.fullmatch(text):
                return Atoms([[f"phone:{_phone(text)}"]])
            return _whole_or_words(text)
        case "account":
            return Atoms([[f"acct:{compact(text)}", f"tok:{compact(text)}", f"tok:{text}"]])
        case "url":
            url = normalise_url(text)
            if url is None:
                return _whole_or_words(text)
            return Atoms([[f"url:{url[0]}", f"host:{url[1]}"]])
        case "path":
            path = _path(text)
            return Atoms([[f"tok:{path}", f"tok:{text}"]])
        case "time":
            days = sorted(dates(text))
            if days:
                return Atoms([[day] for day in days])
            return _whole_or_words(text)
        case "credential":
            if any(ch.isspace() for ch in text):
                return _word_atoms(text)
            return Atoms([[f"tok:{text}"]])
        case _:
            return _whole_or_words(text)


def _whole_or_words(text: str) -> Atoms:
    """One atom for a one-word value; else the whole value, or failing that each word."""
    keys, words = _word_atoms(text)
    if not keys and len(words) == 1 and f"tok:{text}" in words:
        return Atoms([], words)
    return Atoms([[WHOLE + text], *keys], words)


WHOLE = "whole:"
"""Marks an atom that, found trusted, vouches for the whole value (the other atoms are then
not looked at); found anywhere else it is ignored and the words decide."""


def _word_atoms(text: str) -> Atoms:
    every = set(text.split())
    words = {w for w in every if w.isalnum()}  # most words: nothing to strip, no path or host
    rest = every - words
    atoms: list[list[str]] = []
    # an address or a link never spans whitespace: look for them only in the words that
    # can hold one (a regex over the whole of a 10 kB value costs more than the rest)
    for raw in sorted(w for w in rest if "@" in w):
        for match in _EMAIL.finditer(raw):
            email = normalise_email(match.group(0))
            if email is not None:
                atoms.append([f"email:{email}"])
    for raw in sorted(w for w in rest if "://" in w):
        for match in _URL.finditer(raw):
            url = normalise_url(match.group(0).rstrip(_TRAILING))
            if url is not None:
                atoms.append([f"url:{url[0]}", f"host:{url[1]}"])
    for token in _strip_tokens(rest):
        if "/" in token:
            atoms.append(["tok:" + token, "tok:" + _path(token)])
        elif "." in token and _DOMAIN.match(token):  # a bare domain (half of an address)
            atoms.append(["tok:" + token, "host:" + _idna(token)])
        else:
            words.add(token)
    return Atoms(atoms, frozenset(["tok:" + w for w in words]))


class ValueIndex:
    """Where each normalised value was seen: trusted sources, and the first untrusted one."""

    def __init__(self) -> None:
        self._trusted: dict[str, str] = {}
        """Key -> the first trusted source it came from."""
        self._untrusted: dict[str, str] = {}
        """Key -> the id of the first untrusted source it came from."""

    def add(self, text: str, *, source: str, trusted: bool) -> None:
        """Record the values in `text`, which came from `source`."""
        self.add_keys(content_keys(text), source=source, trusted=trusted)

    def add_keys(self, keys: set[str], *, source: str, trusted: bool) -> None:
        """Record typed keys (from `content_keys` or `record_keys`) under `source`."""
        if trusted:
            for key in keys:
                self._trusted.setdefault(key, source)
            return
        for key in keys:
            self._untrusted.setdefault(key, source)

    def find(self, alternatives: list[str]) -> tuple[Found, str | None]:
        """Where an atom was seen, and the untrusted source when that is the only place."""
        found, source = self.find_source(alternatives)
        return found, source if found == "untrusted" else None

    def find_source(self, alternatives: list[str]) -> tuple[Found, str | None]:
        """Where an atom was seen, and the source (trusted or untrusted) it was first seen in."""
        for key in alternatives:
            source = self._trusted.get(key)
            if source is not None:
                return "trusted", source
            source = self._untrusted.get(key)
            if source is not None:
                return "untrusted", source
        return "nowhere", None

    def find_all(
        self, atoms: list[list[str]], words: frozenset[str] = frozenset()
    ) -> tuple[Found, str | None]:
        """Where a value of several atoms (and one-key `words`, looked up as a set) was seen.

        Untrusted if any atom was only there, trusted if every atom was in a trusted
        source, else nowhere. A leading whole-value atom found trusted settles it.
        """
        trusted, untrusted = self._trusted, self._untrusted
        if atoms and atoms[0][0].startswith(WHOLE):
            if "tok:" + atoms[0][0].removeprefix(WHOLE) in trusted:
                return "trusted", None
            atoms = atoms[1:]
        found: Found = "trusted" if atoms or words else "nowhere"
        for alternatives in atoms:
            where: Found = "nowhere"
            for key in alternatives:
                if key in trusted:
                    where = "trusted"
                    break
                source = untrusted.get(key)
                if source is not None:
                    return "untrusted", source
            if where == "nowhere":
                found = "nowhere"
        if words:
            known = trusted.keys() & words  # set operations: each walks `words`, not the index
            if len(known) < len(words):
                only = (untrusted.keys() & words) - known
                if only:
                    return "untrusted", untrusted[min(only)]
                found = "nowhere"
        return found, None

    def __len__(self) -> int:
        return len(self._trusted) + len(self._untrusted)
