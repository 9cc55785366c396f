"""A 2026-style Sim.API in front of ikatkit's local simulator in its 2025 mode, for tests (the 2026 server as a
wrapper around a 2025 one, as the organizers' code would be; `ikatkit simulate --user-types` speaks 2026 itself):
an ASGI middleware that adds ``user_meta.ptkb`` (the conversation's PTKB texts, a list) to every user message,
answers ``/run/status`` with user-topic pairs, and plays one topic with several users: the simulator's topic
``T~U`` is topic ``T`` of user ``U`` on the wire (messages, status, dump)."""

from __future__ import annotations

import json
from typing import Any

from ikatkit.simulate.users import ReplayUser

SLOT = "~"


def several_users(topics: Any, users: list[str]) -> dict[str, ReplayUser]:
    """The simulator's users: each conversation replayed by each of ``users`` (topic ``T~U``)."""
    played = {}
    for conversation in topics.conversations:
        for name in users:
            user = ReplayUser(conversation)
            user.id = name
            played[f"{conversation.id}{SLOT}{name}"] = user
    return played


class As2026:
    """ASGI middleware over ``sim``'s app; ``ptkb`` False: a 2025 server (no ``user_meta``, no user in the dump)."""

    def __init__(self, app: Any, sim: Any, topics: Any, ptkb: bool = True) -> None:
        self.app, self.sim, self.with_ptkb = app, sim, ptkb
        self.ptkb = {c.id: list(c.ptkb.values()) for c in topics.conversations}

    def message(self, data: dict[str, Any]) -> dict[str, Any]:
        topic, _, user = data["topic_id"].partition(SLOT)
        if user:
            data["topic_id"], data["user_id"] = topic, user
        if self.with_ptkb:
            data["user_meta"] = {"ptkb": self.ptkb[topic]}
        return data

    def row(self, row: dict[str, Any]) -> dict[str, Any]:
        slot, _, n = row["metadata"]["topic_id"].rpartition("_")
        meta = {k: v for k, v in row["metadata"].items() if k != "topic_id"}
        user = next(u for (_, topic), u in self.sim.users.items() if topic == slot)  # the simulator's (user, topic)
        row["metadata"] = {**meta, "user_id": user.id, "topic_id": f"{slot.partition(SLOT)[0]}_{n}"}
        return row

    @staticmethod
    def status(data: dict[str, Any]) -> dict[str, Any]:
        def pairs(slots: list[str]) -> list[list[str]]:
            return [[topic, user] for topic, _, user in (s.partition(SLOT) for s in slots)]

        return {"status": "completed" if data["status"] == "complete" else data["status"],
                "open_user_topic_pairs": pairs(data["open_topics"]),
                "done_user_topic_pairs": pairs(data["done_topics"])}

    def rewrite(self, path: str, body: bytes) -> bytes:
        if path.endswith(("/start", "/continue", "/session")):
            data = json.loads(body)
            return json.dumps(self.message(data) if "utterance" in data else data).encode()
        if path == "/run/status":
            return json.dumps(self.status(json.loads(body))).encode()
        if path == "/run/dump" and self.with_ptkb:
            return "\n".join(json.dumps(self.row(json.loads(line))) for line in body.decode().splitlines()).encode()
        return body

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def capture(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = b"".join(chunks)
            if start["status"] == 200:
                body = self.rewrite(scope["path"], body)
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, capture)
