"""Simulated users: ``replay`` says a topics file's recorded utterances, ``llm`` follows the organizers' design
(a persona and questions to explore; an LLM says one utterance per turn and grades each answer 0-5; an answer
graded above 3 covers the question, three tries move on; the user leaves when the questions are done). Both take
a behaviour :class:`~ikatkit.simulate.profiles.Profile`: replay users apply its transforms, cooperativeness and
patience to the live system's answers; LLM users get its language and cooperativeness in their prompt and its
patience from the simulator. Every utterance's notes name the profile and seed, and the rubric the user pursues
(``rubric``; an LLM user also its 0-5 ``rubric_score`` of the answer before): a replay user's rubric is the
information need of the recorded turn it says (the resolved utterance, else the utterance), so turn n of a
conversation pursues its rubric n (``rub_<conversation>_<n>``); an LLM user's are its persona's questions or the
rubric questions given (``rubrics``), in order, after the 2025 overview's protocol: it scores each answer 0-5
against the current rubric, moves on above 3, otherwise rephrases, at most :data:`TRIES` tries per rubric, and says
goodbye after the last one.

A user's ``id`` is the simulated user's id the server sends; in a 2026 rehearsal the user type's id
(:func:`ikatkit.simulate.plan.user_id`), the same across conversations."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ikatkit.capabilities import ChatLLM
from ikatkit.errors import IkatError
from ikatkit.textfile import open_text
from ikatkit.simulate.profiles import Profile
from ikatkit.topics import Conversation, Topics

FAREWELL = "Thank you, that is all I wanted to know. Goodbye!"
COVERED_ABOVE = 3  # the organizers' rubric_threshold: a grade above it covers the question
TRIES = 3  # the organizers' num_retries: after this many tries at one question the user moves on


@dataclass
class Utterance:
    """What a user says, whether it ends the session, and the user's own notes (the dump's ``user_meta``)."""

    content: str
    end_of_session: bool
    meta: dict[str, Any] = field(default_factory=dict)


class User(Protocol):
    id: str

    def initiate(self, topic_id: str) -> Utterance: ...

    def respond(self, topic_id: str, history: list[dict[str, str]], metas: list[dict[str, Any]]) -> Utterance: ...


def _answers(history: list[dict[str, str]]) -> list[str]:
    return [m["content"] for m in history if m["role"] == "assistant"]


class ReplayUser:
    """Says a conversation's recorded utterances in order, changed by its profile, and leaves after its last turn
    (or earlier, when the profile is impatient)."""

    def __init__(self, conversation: Conversation, profile: Profile | None = None, user_id: str | None = None) -> None:
        self.id = user_id or f"user-{conversation.id}"
        self.conversation, self.profile = conversation, profile or Profile()
        self.turns = conversation.turns

    @staticmethod
    def need(turn: Any) -> str:
        """The information need of a recorded turn: its resolved utterance, else its utterance (the rubric)."""
        return str(turn.resolved_utterance or turn.utterance)

    def initiate(self, topic_id: str) -> Utterance:
        text, meta = self.profile.utterance(self.turns[0].qid, self.turns[0].utterance, None, self.conversation.ptkb)
        return Utterance(text, False, {**meta, "rubric": self.need(self.turns[0])})

    def respond(self, topic_id: str, history: list[dict[str, str]], metas: list[dict[str, Any]]) -> Utterance:
        said = sum(m["role"] == "user" for m in history)
        needs = [self.need(t) for t in self.turns]
        left = self.profile.leaves(list(zip(needs, _answers(history))))
        if said >= len(self.turns) or left:
            return Utterance(FAREWELL, True, {"profile": self.profile.name, "seed": self.profile.seed,
                                              **({"left": left} if left else {})})
        turn = self.turns[said]
        text, meta = self.profile.utterance(turn.qid, turn.utterance, history[-1]["content"], self.conversation.ptkb)
        return Utterance(text, False, {**meta, "rubric": self.need(turn)})


@dataclass(frozen=True)
class Persona:
    """A simulated user of the 2025 simulation data: who they are and what they set out to ask."""

    id: str
    topic_id: str
    statements: tuple[str, ...]
    questions: tuple[str, ...]


def load_personas(folder: str | Path) -> dict[str, list[Persona]]:
    """Personas by topic id from ``simulation-data.csv`` (``1_1`` = topic ``1-1``)."""
    path = Path(folder) / "simulation-data.csv"
    if not path.is_file():
        raise IkatError("simulation data not found", path=path,
                        fix="pass --persona-data: the folder of simulation-data.csv (../shared/ikat/2025-simulation)")
    personas: dict[str, list[Persona]] = {}
    with open_text(path) as handle:
        rows = csv.reader(handle, delimiter=";")
        next(rows, None)
        for row in rows:
            if len(row) < 3 or not row[0].strip():
                continue
            topic = row[0].replace("Persona_", "").strip().replace("_", "-")
            statements = tuple(s.strip() for s in row[1].split(";") if s.strip())
            questions = tuple(q.strip() for q in row[2:] if q.strip())
            personas.setdefault(topic, []).append(Persona(row[0].strip(), topic, statements, questions))
    return personas


def persona_of(conversation: Conversation, personas: dict[str, list[Persona]]) -> Persona:
    """The first simulated user of the conversation's topic; without one, a persona from the topic itself:
    its PTKB as the statements (in the second person as the organizers write them) and its resolved utterances
    as the questions."""
    if personas.get(conversation.id):
        return personas[conversation.id][0]
    statements = tuple(re.sub(r"^I am\b", "You are", re.sub(r"^I\b", "You", s)) for s in conversation.ptkb.values())
    questions = tuple(t.resolved_utterance or t.utterance for t in conversation.turns)
    return Persona(f"persona-{conversation.id}", conversation.id, statements, questions)


SYSTEM = ('You are a user of a search system, interested in "{title}". Find out as much as you can about it. '
          "Ask short questions, one utterance at a time, and never repeat what was said.\n\n"
          "What is true of you:\n- {statements}")
GRADE = ("Can the question be answered from the context? Answer with one number:\n"
         "5: complete and accurate; 4: mostly complete; 3: partly, with noticeable gaps; 2: limited; "
         "1: minimally; 0: not at all.\nQuestion: {question}\nContext: {answer}\nNumber:")


class LlmUser:
    """A persona that asks its questions through an ikatkit LLM, grading each answer like the organizers' user."""

    def __init__(self, persona: Persona, title: str, llm: ChatLLM, max_turns: int = 10,
                 profile: Profile | None = None, user_id: str | None = None) -> None:
        self.id, self.persona, self.title, self.llm = user_id or persona.id, persona, title, llm
        self.max_turns = max_turns
        self.profile = profile or Profile()

    def _system(self) -> str:
        behaviour = self.profile.prompt()
        return (SYSTEM.format(title=self.title, statements="\n- ".join(self.persona.statements))
                + (f"\n\nHow you behave: {behaviour}" if behaviour else ""))

    def _meta(self, **notes: Any) -> dict[str, Any]:
        return {**{k: v for k, v in notes.items() if v is not None}, "profile": self.profile.name,
                "seed": self.profile.seed}

    def _say(self, history: list[dict[str, str]], instruction: str, question: str) -> tuple[str, bool]:
        swapped = [{"role": "assistant" if m["role"] == "user" else "user", "content": m["content"]} for m in history]
        messages = [{"role": "system", "content": f"{self._system()}\n\n{instruction}"},
                    {"role": "user", "content": "How can I help you?"}, *swapped]
        text = self.llm.chat([messages])[0].strip().split("\n")[0].strip()
        return (text, False) if text else (question, True)  # an empty output: the question itself, noted

    def grade(self, question: str, answer: str) -> int | None:
        output = self.llm.chat([[{"role": "user", "content": GRADE.format(question=question, answer=answer)}]])[0]
        found = re.search(r"[0-5]", output)
        return int(found.group()) if found else None

    def initiate(self, topic_id: str) -> Utterance:
        question = self.persona.questions[0]
        text, fallback = self._say([], f'Ask about: "{question}"', question)
        return Utterance(text, False, self._meta(rubric=question, fallback=fallback or None))

    def respond(self, topic_id: str, history: list[dict[str, str]], metas: list[dict[str, Any]]) -> Utterance:
        asked: list[str] = [m["rubric"] for m in metas if m.get("rubric")]
        question = asked[-1]
        score = self.grade(question, history[-1]["content"])
        said = sum(m["role"] == "user" for m in history)
        left = self.profile.leaves(list(zip(asked, _answers(history))))
        if left:
            return Utterance(FAREWELL, True, self._meta(rubric_score=score, left=left))
        if (score is not None and score > COVERED_ABOVE) or asked.count(question) >= TRIES:
            remaining = [q for q in self.persona.questions if q not in asked]
            if not remaining or said >= self.max_turns:
                return Utterance(FAREWELL, True, self._meta(rubric_score=score))
            question, instruction = remaining[0], f'The answer was enough. Now ask about: "{remaining[0]}"'
        elif said >= self.max_turns:
            return Utterance(FAREWELL, True, self._meta(rubric_score=score))
        else:
            instruction = f'The answer did not help. Say so and ask more specifically about: "{question}"'
        text, fallback = self._say(history, instruction, question)
        return Utterance(text, False, self._meta(rubric=question, rubric_score=score, fallback=fallback or None))


def replay_users(topics: Topics, profile: Profile | None = None) -> dict[str, User]:
    """One replay user per conversation, keyed by topic id, all of one behaviour profile."""
    return {c.id: ReplayUser(c, profile) for c in topics.conversations}


def llm_users(topics: Topics, personas: dict[str, list[Persona]], llm: ChatLLM, max_turns: int = 10,
              profile: Profile | None = None, rubrics: dict[str, list[str]] | None = None) -> dict[str, User]:
    """One LLM user per conversation: the topic's simulated persona where the simulation data has one, pursuing
    the conversation's ``rubrics`` where given."""
    return {c.id: LlmUser(with_rubrics(persona_of(c, personas), rubrics), c.title, llm, max_turns, profile)
            for c in topics.conversations}


def with_rubrics(persona: Persona, rubrics: dict[str, list[str]] | None) -> Persona:
    """The persona pursuing its conversation's rubric questions (when ``rubrics`` has them) instead of its own."""
    questions = (rubrics or {}).get(persona.topic_id)
    return replace(persona, questions=tuple(questions)) if questions else persona


def typed_users(topics: Topics, plays: list[tuple[Any, str]], *, llm: ChatLLM | None = None,
                personas: dict[str, list[Persona]] | None = None, rubrics: dict[str, list[str]] | None = None,
                max_turns: int = 10) -> list[tuple[str, User]]:
    """The users of a 2026 rehearsal: one per (user type, conversation) of ``plays``
    (:func:`ikatkit.simulate.plan.play_order`), each with its type's id and profile; replay users without ``llm``,
    else LLM users pursuing the conversation's rubrics (``rubrics``) or persona questions."""
    out: list[tuple[str, User]] = []
    for kind, topic in plays:
        conversation = topics.conversation(topic)
        if llm is None:
            out.append((topic, ReplayUser(conversation, kind.profile, kind.id)))
        else:
            persona = with_rubrics(persona_of(conversation, personas or {}), rubrics)
            out.append((topic, LlmUser(persona, conversation.title, llm, max_turns, kind.profile, kind.id)))
    return out
