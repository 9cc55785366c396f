"""Who plays which conversation in a rehearsal of iKAT 2026: user types and their allocation to conversations.

A user type is a name and a behaviour :class:`~ikatkit.simulate.profiles.Profile` (``u2=typos``,
``u3=terse+impatient``). Each type is one simulated user: its id (:func:`user_id`, a UUID derived from the name, so
a restarted simulator gives the same one) comes back across conversations, as the 2026 server's ``user_id`` does,
and tells a system nothing of the type; the simulator records the id -> type map (the dump's ``user_meta`` and
``--user-map``). Without an allocation every type plays every conversation.

An allocation file (JSON or TOML) maps each type to the conversations it plays: a list of conversation ids, an
integer n (the first n conversations, in topic order) or ``"all"``; e.g. 2026's 9/10/10/15 conversations per type::

    u1 = 9
    u2 = ["10-1", "15-1"]
    u4 = "all"

Sessions run conversation by conversation, and within a conversation type by type in ``--user-types`` order.
"""

from __future__ import annotations

import json
import tomllib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.textfile import read_text
from ikatkit.simulate.profiles import Profile, parse_profile

NAMESPACE = uuid.UUID("6f0c7a52-6b1e-4d38-9f58-2b8a51c0e026")  # ikatkit's namespace of simulated user ids
ALLOCATION_SHAPE = ('a JSON object or TOML table: user type -> a list of conversation ids, an integer n (the first n '
                    'conversations) or "all", e.g. u1 = 9, u2 = ["10-1", "15-1"], u4 = "all"')


def user_id(name: str) -> str:
    """The simulated user id of a user type: a UUID of its name, the same in every run and restart."""
    return str(uuid.uuid5(NAMESPACE, name))


@dataclass(frozen=True)
class UserType:
    name: str
    profile: Profile

    @property
    def id(self) -> str:
        return user_id(self.name)


def parse_user_types(specs: Sequence[str], seed: int = 0) -> list[UserType]:
    """``NAME=PROFILE`` items (``u3=terse+impatient``) as user types, names distinct."""
    types: list[UserType] = []
    for spec in specs:
        name, sep, profile = spec.partition("=")
        if not sep or not name.strip() or not profile.strip():
            raise IkatError(f"user type {spec!r} is not NAME=PROFILE", where="--user-types",
                            fix="e.g. --user-types u1=clean u2=typos u3=terse+impatient u4=cooperative")
        types.append(UserType(name.strip(), parse_profile(profile.strip(), seed)))
    names = [t.name for t in types]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise IkatError(f"user types named more than once: {repeated}", where="--user-types",
                        fix="give each type its own name")
    return types


def _load(path: Path) -> Any:
    if not path.is_file():
        raise IkatError("allocation file not found", path=path, fix=f"pass {ALLOCATION_SHAPE}")
    text = read_text(path)
    try:
        return json.loads(text) if text.lstrip()[:1] == "{" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
        raise IkatError(f"not JSON or TOML: {err}", path=path, fix=f"write {ALLOCATION_SHAPE}") from None


def read_allocation(path: str | Path, types: Sequence[UserType], conversations: Sequence[str]) -> dict[str, list[str]]:
    """The conversations each type plays (in topic order), checked against the types and the topics."""
    path = Path(path)
    data = _load(path)
    if not isinstance(data, dict) or not data:
        raise IkatError("an allocation names at least one user type", path=path, fix=f"write {ALLOCATION_SHAPE}")
    names = [t.name for t in types]
    unknown = [k for k in data if k not in names]
    if unknown:
        raise IkatError(f"the allocation names user types that --user-types does not: {unknown}", path=path,
                        fix=f"use the types of --user-types ({', '.join(names)}) or add these to it")
    out: dict[str, list[str]] = {}
    for name in names:
        value = data.get(name)
        where = f"key {name!r}"
        if value is None:
            raise IkatError(f"user type {name} plays no conversation", path=path, where=where,
                            fix=f"give it conversations, or leave it out of --user-types ({ALLOCATION_SHAPE})")
        if value == "all":
            chosen = list(conversations)
        elif isinstance(value, int) and not isinstance(value, bool):
            if not 1 <= value <= len(conversations):
                raise IkatError(f"{value} conversations for {name}, but the topics have {len(conversations)}",
                                path=path, where=where, fix=f"use 1..{len(conversations)} or a list of ids")
            chosen = list(conversations[:value])
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            missing = [v for v in value if v not in conversations]
            if missing:
                raise IkatError(f"conversations not in the topics: {missing}", path=path, where=where,
                                fix="use ids of the topics' conversations (e.g. 9-1), or --conversations")
            chosen = [c for c in conversations if c in value]
        else:
            raise IkatError(f"{value!r} is not a list of conversations, a count or \"all\"", path=path, where=where,
                            fix=f"write {ALLOCATION_SHAPE}")
        out[name] = chosen
    return out


def play_order(types: Sequence[UserType], conversations: Sequence[str],
               allocation: dict[str, list[str]] | None = None) -> list[tuple[UserType, str]]:
    """The (user type, conversation) sessions of a run in order: conversation by conversation, types in order."""
    plays = allocation or {t.name: list(conversations) for t in types}
    return [(t, c) for c in conversations for t in types if c in plays[t.name]]
