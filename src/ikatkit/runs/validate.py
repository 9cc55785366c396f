"""Validate a run against the topics: the organizers' rules (2023, 2024, 2025), graded as they grade
them, plus what their validators miss.

The organizers' validators (irlabamsterdam/iKAT: 2023 and 2024 ``scripts/run_validation``, 2025
``scripts/validate_trec_ikat25.py``) treat most problems as warnings and abort on a few (bad structure,
wrong turn set, 2023 PTKB provenance with an empty or unknown id or another text, 2024 PTKB keys out of
range, more warnings than ``max_warnings``: 2000 in 2023 and 2024, their final default since commit f541ea4;
warnings are counted per response, as theirs are). Added here: a run with no passage in any turn, ranks
that really increase (theirs never updates the previous rank), duplicate passages within a response,
NaN/inf scores, PTKB key 0 (2024 lets it pass), citations outside the references, over 1000 references,
unknown and missing turns in every year, and passage ids checked against an id file, the organizers' hash
file, or a Lucene index. Interactive runs (the simulation API's dump, or the 2025 runs as the organizers released
them) are checked by the API's rules: 250 tokens, citations within references, at most 1000, each conversation one
of the topics'; a run citing no passage at all is reported as closed-book.

Every limit and per-format rule comes from the format's template (:mod:`ikatkit.runs.templates`): ``max_items``,
``max_words``, ``max_tokens``, ``ranking`` (the scored passage list) and ``ranking_per`` (response or turn),
``scores_decreasing``, ``ptkb_by`` (object, key or text) and ``ptkb_required``.

Problems are grouped by kind, each with the turns it occurs in, so a run with the same problem in every
turn gives one line, not thousands.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ikatkit.errors import IkatError
from ikatkit.runs.io import from_records, interactive_edition, load_records, to_records
from ikatkit.runs.model import Run
from ikatkit.runs.passage_ids import PassageIds, passage_ids
from ikatkit.runs.templates import TEMPLATE_FILES, ShapeIssue, Template, load_template
from ikatkit.topics import Topics, load_topics, split_query_id

OFFICIAL = tuple(TEMPLATE_FILES)
INTERACTIVE = ("interactive", "2025-interactive", "2026-interactive")
RESPONSE_ONLY_TYPES = ("only_response", "generation-only")
SHOWN_TURNS = 8
SHOWN_EXAMPLES = 3


@dataclass(frozen=True)
class Rule:
    """A kind of problem: its grade (a format's template may grade it otherwise: its ``severity`` rule), what it
    means and how to fix it."""

    grade: str
    message: str
    fix: str


W, E = "warning", "error"
RULES: dict[str, Rule] = {
    "unreadable": Rule(E, "the file cannot be read as a run",
                       "pass a run written by `ikatkit run` or `ikatkit convert`"),
    "missing-required-field": Rule(E, "required field missing", "add the field (see submission_templates/)"),
    "missing-field": Rule(W, "field missing (the organizers read it as empty)",
                          "add the field (see submission_templates/)"),
    "wrong-type": Rule(E, "field of the wrong type", "use the type of the official format (see submission_templates/)"),
    "unknown-field": Rule(E, "field not in the official format", "remove the field or rename it as the template does"),
    "empty-run-name": Rule(W, "the run name is empty", "name the run"),
    "bad-run-type": Rule(E, "run type not allowed this year",
                         "use one of the template's run types"),
    "no-turns": Rule(E, "the run has no turns", "write one entry per turn of the topics"),
    "empty-run": Rule(E, "no turn has a passage (or, in a response-only run, a response text)",
                      "check the pipeline: its retrieval produced nothing"),
    "bad-turn-id": Rule(E, "malformed turn id", "turn ids look like 9-1_3"),
    "wrong-topics": Rule(E, "most of the run's turns are not in these topics (the errors below follow from it)",
                         "pass the topics the run answers (--topics)"),
    "unknown-turn": Rule(E, "turn not in the topics", "use the turn ids of this year's test topics"),
    "duplicate-turn": Rule(E, "turn appears more than once", "write each turn once, with all its responses"),
    "missing-turn": Rule(E, "turn of the topics missing from the run", "write one entry per turn of the topics"),
    "no-responses": Rule(W, "turn has no response", "give every turn at least one response"),
    "bad-rank": Rule(W, "response rank missing or below 1", "rank responses 1, 2, ..."),
    "rank-not-increasing": Rule(W, "response ranks do not increase", "rank responses 1, 2, ... in list order"),
    "empty-text": Rule(W, "response text is empty", "write the response text"),
    "long-response": Rule(W, "responses over 250 words (the organizers drop the last responses)",
                          "keep a turn's responses within 250 words"),
    "no-passages": Rule(W, "no passages", "give each response 1 to 1000 passages"),
    "too-many-passages": Rule(W, "more passages than the format allows (the organizers keep the top ones)",
                              "keep at most the template's max_items passages per response/turn"),
    "closed-book": Rule(W, "closed-book run: no turn cites a passage, so only its responses can be assessed (no "
                           "passage is pooled or ranked for it; the 2025 guidelines' generation-only runs)",
                        "nothing, if the system answers without retrieval; else send the passages as citations"),
    "no-used-passage": Rule(W, 'no passage marked "used" (the organizers take the top 5)',
                            'mark the passages the response is built from as "used"'),
    "score-not-decreasing": Rule(W, "passage scores increase down the ranking", "sort passages by descending score"),
    "bad-score": Rule(E, "score is NaN or infinite", "give every passage a finite score"),
    "duplicate-passage": Rule(E, "passage listed twice in one response", "list each passage once"),
    "bad-passage-id": Rule(W, "passage id not of the form clueweb22-enXXXX-XX-XXXXX:N",
                           "use the collection's passage ids, doc_id:passage_no"),
    "unknown-passage": Rule(W, "passage id not in the collection", "cite only passages of the collection"),
    "citation-not-in-references": Rule(E, "citation not among the turn's references",
                                       "add every cited passage to the references"),
    "no-ptkb": Rule(W, "no PTKB provenance", "list the PTKB statements the response uses"),
    "empty-ptkb-id": Rule(E, "PTKB provenance without an id (the organizers abort)",
                          "give every PTKB provenance its key in the conversation's PTKB"),
    "ptkb-key-zero": Rule(E, "PTKB key 0 (keys start at 1)", "use the PTKB's keys as in the topics"),
    "unknown-ptkb": Rule(E, "PTKB statement not in the conversation's PTKB",
                         "cite the conversation's own PTKB statements (2025: their exact text)"),
    "ptkb-text-mismatch": Rule(E, "PTKB text differs from the topics' statement (the organizers abort)",
                               "copy the statement text exactly"),
    "ptkb-score-not-decreasing": Rule(W, "PTKB scores increase down the list",
                                      "sort PTKB provenance by descending score"),
    "bad-dump-row": Rule(E, "interactive run row without metadata.topic_id or a response",
                         "pass the run file the simulation API's /run/dump returned, or a released interactive run"),
    "over-token-limit": Rule(E, "response over the simulation API's token limit (spaCy's blank English tokenizer)",
                             "cut responses to 250 tokens (ikatkit interactive cuts at a sentence boundary)"),
    "too-many-warnings": Rule(E, "more warnings than the organizers' validator allows",
                              "fix the warnings; the organizers abort above this count"),
}


@dataclass
class Problem:
    """One kind of problem with every turn it occurs in."""

    code: str
    severity: str
    message: str
    fix: str
    turns: list[str] = field(default_factory=list)
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        text = f"{self.severity.upper():7} {self.code}: {self.message}"
        if self.turns:
            shown = ", ".join(self.turns[:SHOWN_TURNS])
            more = f", ... (+{len(self.turns) - SHOWN_TURNS} more)" if len(self.turns) > SHOWN_TURNS else ""
            text += f" — {self.count}x in {len(self.turns)} turn{'s' * (len(self.turns) != 1)}: {shown}{more}"
        if self.examples:
            text += f" — e.g. {'; '.join(self.examples)}"
        return text + f" — fix: {self.fix}"


@dataclass
class ValidationReport:
    """The problems of one run; ``ok`` when there is no error (warnings allowed)."""

    source: str
    fmt: str
    year: int
    turns: int
    topic_turns: int
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == E]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == W]

    @property
    def ok(self) -> bool:
        return not self.errors

    def find(self, code: str) -> list[Problem]:
        """The problems of kind ``code`` (several for field problems, one per field)."""
        return [p for p in self.problems if p.code == code]

    def turns_of(self, code: str) -> list[str]:
        """The turns with a problem of kind ``code``, in run order."""
        return list(dict.fromkeys(t for p in self.find(code) for t in p.turns))

    def __str__(self) -> str:
        lines = [str(p) for p in sorted(self.problems, key=lambda p: p.severity != E)]
        occurrences = sum(p.count for p in self.warnings)
        lines.append(f"{self.source} ({self.fmt} run, {self.turns} turns; "
                     f"{self.year} topics, {self.topic_turns} turns): "
                     f"{len(self.errors)} error kind(s), {len(self.warnings)} warning kind(s) "
                     f"({occurrences} warning occurrences) -> {'VALID' if self.ok else 'INVALID'}")
        return "\n".join(lines)


class _Collector:
    """Groups problems by kind (and message, for field problems)."""

    def __init__(self, severities: dict[str, str] | None = None) -> None:
        self.severities = severities or {}  # the format's grades where they differ from RULES'
        self.groups: dict[tuple[str, str], Problem] = {}

    def add(self, code: str, turn: str | None = None, example: str | None = None, *,
            message: str | None = None, severity: str | None = None, count: int = 1, fix: str | None = None) -> None:
        rule = RULES[code]
        key = (code, message or rule.message)
        problem = self.groups.get(key)
        if problem is None:
            problem = self.groups[key] = Problem(code, severity or self.severities.get(code, rule.grade), key[1],
                                                     fix or rule.fix)
        problem.count += count
        if turn is not None and (not problem.turns or problem.turns[-1] != turn) and turn not in problem.turns:
            problem.turns.append(turn)
        if example is not None and len(problem.examples) < SHOWN_EXAMPLES and example not in problem.examples:
            problem.examples.append(example)

    def has_errors(self) -> bool:
        return any(p.severity == E for p in self.groups.values())


def validate_run(run_or_path: Run | str | Path, topics: Topics | str | Path, *,
                 ids: str | Path | Collection[str] | PassageIds | None = None, fmt: str | None = None,
                 max_warnings: int | None | Literal["official"] = None) -> ValidationReport:
    """Check a run (a :class:`Run` as it would be written, or a file of any format) against ``topics``.

    ``ids``: passage ids that exist (a Lucene index folder, an id or hash file, a collection of ids).
    ``max_warnings``: the warning count above which the run fails; "official" = the organizers' default
    (the template's: 25 in 2023, 2000 in 2024, none in 2025). With None, exceeding the official limit is
    only reported as a warning.
    """
    if not isinstance(topics, Topics):
        topics = load_topics(topics)
    if isinstance(run_or_path, Run):
        fmt = fmt or str(run_or_path.year)
        source = f"run {run_or_path.run_name!r}"
        records = [("", r) for r in to_records(run_or_path, fmt, topics)] if fmt in OFFICIAL else []
        path = None
    else:
        path, source = Path(run_or_path), str(run_or_path)
        try:
            fmt, records = load_records(path, fmt)
        except IkatError as err:
            collector = _Collector()
            collector.add("unreadable", example=str(IkatError(err.message, path=err.path, where=err.where)),
                          fix=err.fix)
            return _report(collector, source, fmt or "unknown", topics, 0)
    template = load_template(fmt) if fmt in OFFICIAL else None
    if fmt == "interactive" and interactive_edition(records) == 2026:
        fmt = "interactive-2026"  # a 2026 server's dump: its rows name their users; 2026's limits apply
    collector = _Collector(_rules_of(fmt, template, topics).rule("severity", {}))
    if template is not None:
        for where, record in records:
            _check_shape(template, where, record, collector)
        if collector.has_errors():  # like the organizers: a malformed file is not checked further
            return _report(collector, source, fmt, topics, _count_turns(records, fmt))
        if template.has("turn_id") and template.jsonl:
            _check_jsonl_records(records, template, collector)
    if fmt in INTERACTIVE or fmt == "interactive-2026":
        _check_dump_records(records, fmt, collector)
        if any(code == "bad-dump-row" for code, _ in collector.groups):  # rows it cannot read: nothing more
            return _report(collector, source, fmt, topics, len(records))
    if isinstance(run_or_path, Run) and fmt not in OFFICIAL:
        run = run_or_path
    else:
        run = from_records(records, fmt.removesuffix("-2026"), path, topics)
    _RunChecks(run, topics, fmt, template, collector).check()
    _check_topics(run, fmt, topics, collector)
    if ids is not None:
        _check_ids(run, passage_ids(ids), collector)
    official = template.rule("max_warnings") if template is not None else None
    limit = official if max_warnings in ("official", None) else max_warnings
    warnings = sum(p.count for p in collector.groups.values() if p.severity == W)
    if isinstance(limit, int) and warnings > limit:
        collector.add("too-many-warnings", example=f"{warnings} > {limit}",
                      severity=W if max_warnings is None else None)
    return _report(collector, source, fmt, topics, len(run.turns))


def _check_topics(run: Run, fmt: str, topics: Topics, c: _Collector) -> None:
    """Put first one error where most of the run's turns are not in the topics, naming the years where they differ
    (a TREC run or a dict says no year)."""
    unknown = next((len(p.turns) for (code, _), p in c.groups.items() if code == "unknown-turn"), 0)
    year = fmt[:4] if fmt[:4].isdigit() else None
    offline_year = year if fmt in OFFICIAL and "interactive" not in fmt else None  # a rehearsal may replay any year
    if not run.turns or unknown * 2 <= len(run.turns) and not (unknown and offline_year
                                                               and offline_year != str(topics.year)):
        return
    counts = f"{unknown} of its {len(run.turns)} turns are not in them"
    if year and year != str(topics.year):
        c.add("wrong-topics", message=f"another year's topics: a {year} run, {topics.year} topics (the errors "
                                      "below follow from it)", example=counts,
              fix=f"pass the {year} topics the run answers (--topics)")
    else:
        c.add("wrong-topics", example=f"{topics.year} topics: {counts}",
              fix="pass the topics the run answers (--topics): another year's, or train instead of test")
    key = next(key for key in c.groups if key[0] == "wrong-topics")
    c.groups = {key: c.groups[key], **c.groups}


def _rules_of(fmt: str, template: Template | None, topics: Topics) -> Template:
    """The template whose rules apply: the format's; a dump's are the released interactive runs', a TREC run's or a
    dict's the topics' year's (2023's for other years)."""
    if template is not None:
        return template
    if fmt == "interactive":
        return load_template("2025-interactive")
    if fmt == "interactive-2026":
        return load_template("2026-interactive")
    return load_template(topics.year if str(topics.year) in TEMPLATE_FILES else 2023)


def _report(collector: _Collector, source: str, fmt: str, topics: Topics, turns: int) -> ValidationReport:
    return ValidationReport(source, fmt, topics.year, turns, len(topics), list(collector.groups.values()))


def _count_turns(records: list[tuple[str, Any]], fmt: str) -> int:
    if fmt == "2025":
        return len(records)
    if fmt in ("2025-interactive", "2026-interactive"):  # answered rows: the farewell (text null) is no turn
        return sum(isinstance(r, dict) and any(isinstance(x, dict) and x.get("text") is not None
                                               for x in r.get("responses") or []) for _, r in records)
    turns = records[0][1].get("turns") if isinstance(records[0][1], dict) else None
    return len(turns) if isinstance(turns, list) else 0


SHAPE_CODES = {"missing-required": "missing-required-field", "missing": "missing-field", "type": "wrong-type",
               "unknown": "unknown-field"}


def _check_shape(template: Template, where: str, record: Any, collector: _Collector) -> None:
    for issue in template.check(record):
        severity = template.rule("unknown_fields") if issue.kind == "unknown" else None
        place = f"{where}: {issue.where}" if where else issue.where
        collector.add(SHAPE_CODES[issue.kind], _shape_turn(record, issue), place,
                      message=issue.message, severity=severity)


def _shape_turn(record: Any, issue: ShapeIssue) -> str | None:
    if not isinstance(record, dict):
        return None
    if "turn_id" in record:
        return str(record["turn_id"])
    found = re.match(r"turns\[(\d+)\]", issue.where)
    if not found:
        return None
    turn = record["turns"][int(found.group(1))]
    return str(turn["turn_id"]) if isinstance(turn, dict) and "turn_id" in turn else f"turns[{found.group(1)}]"


def _check_jsonl_records(records: list[tuple[str, Any]], template: Template, c: _Collector) -> None:
    """2025 rules on the raw lines: citations within references, at most 1000 references, 250 words."""
    max_refs = template.limit("max_items", "references")
    max_words = template.limit("max_words", "responses[].text")
    for where, entry in records:
        qid = str(entry["turn_id"])
        references = entry["references"]
        if len(references) > max_refs:
            c.add("too-many-passages", qid, f"{qid}: {len(references)} references")
        words = sum(len(r["text"].split()) for r in entry["responses"])
        if words > max_words:
            c.add("long-response", qid, f"{qid}: {words} words")
        for i, response in enumerate(entry["responses"]):
            for pid in response["citations"]:
                if pid not in references:
                    c.add("citation-not-in-references", qid, f"{where}: responses[{i}] cites {pid}")


def _check_dump_records(records: list[tuple[str, Any]], fmt: str, c: _Collector) -> None:
    """The simulation API's rules (the interactive template's of the run's edition) on an interactive run, a dump or
    as released: a topic id and a response per row, responses within 250 tokens as the server counts them, at most
    1000 citations (2026: 10) and 1000 references, each citation within the references."""
    from ikatkit.runs.tokens import count_tokens

    template = load_template("2026-interactive" if fmt in ("2026-interactive", "interactive-2026")
                             else "2025-interactive")
    max_tokens = template.limit("max_tokens", "responses[].text")
    max_cited = template.limit("max_items", "responses[].citations")
    max_refs = template.limit("max_items", "references")
    released = fmt in ("2025-interactive", "2026-interactive")
    text_key, cited_key = ("text", "citations") if released else ("assistant_text", "assistant_citations")
    for where, entry in records:
        meta = entry.get("metadata") if isinstance(entry, dict) else None
        responses = entry.get("responses") if isinstance(entry, dict) else None
        if not isinstance(meta, dict) or "topic_id" not in meta or not isinstance(responses, list) or not responses:
            c.add("bad-dump-row", None, where)
            continue
        qid, text = str(meta["topic_id"]), responses[0].get(text_key)
        if isinstance(text, str) and (n := count_tokens(text)) > max_tokens:
            c.add("over-token-limit", qid, f"{qid}: {n} tokens > {max_tokens}")
        citations = responses[0].get(cited_key) or {}
        if len(citations) > max_cited:
            c.add("too-many-passages", qid, f"{qid}: {len(citations)} citations > {max_cited}")
        if released:
            references = entry.get("references") or {}
            if len(references) > max_refs:
                c.add("too-many-passages", qid, f"{qid}: {len(references)} references > {max_refs}")
            for pid in citations:
                if pid not in references:
                    c.add("citation-not-in-references", qid, f"{where}: cites {pid}")


class _RunChecks:
    """The rules on the run model, for every format (those a format cannot carry are skipped)."""

    def __init__(self, run: Run, topics: Topics, fmt: str, template: Template | None, c: _Collector) -> None:
        self.run, self.topics, self.fmt, self.template, self.c = run, topics, fmt, template, c
        self.rules = _rules_of(fmt, template, topics)
        self.id_pattern = re.compile((template or load_template(2023)).rule("passage_id_pattern"))  # the loosest
        self.official = fmt in OFFICIAL
        self.interactive = fmt in INTERACTIVE or fmt == "interactive-2026"
        self.per_response = template is not None and template.rule("ranking_per") == "response"
        self.most = self.rules.limit("max_items", self.rules.rule("ranking"))
        self.qids = set(topics.qids)
        self.closed_book = self.interactive and not any(r.passages for t in run.turns for r in t.responses)

    def check(self) -> None:
        self.check_run()
        seen: set[str] = set()
        for turn in self.run.turns:
            if self.check_turn_id(turn.turn_id, seen, turn.key):
                self.check_turn(turn)
        missing = [q for q in self.topics.qids if q not in seen] if not self.interactive else []
        for qid in missing:  # an interactive run has the turns its users chose to have
            self.c.add("missing-turn", qid)
        responses = [r for t in self.run.turns for r in t.responses]
        if self.run.turns and not any(r.passages for r in responses):
            if self.closed_book and any(r.text.strip() for r in responses):
                self.c.add("closed-book", example=f"{len(self.run.turns)} answered turns, none cites a passage")
            elif self.run.run_type not in RESPONSE_ONLY_TYPES or not any(r.text.strip() for r in responses):
                self.c.add("empty-run", example=f"{len(self.run.turns)} turns")

    def check_run(self) -> None:
        if self.official and not self.run.run_name:
            self.c.add("empty-run-name")
        if self.template is not None:
            allowed = next(iter(self.template.rule("enums").values()))
            if self.run.run_type not in allowed:
                self.c.add("bad-run-type", example=f"{self.run.run_type!r} (allowed: {', '.join(allowed)})")
        if not self.run.turns:
            self.c.add("no-turns")

    def check_turn_id(self, qid: str, seen: set[str], key: str) -> bool:
        """Whether turn ``qid`` (``key``: with its user, where several users play one topic) is well formed, new
        and one of the topics' (interactive: of a topic's conversation)."""
        try:
            split_query_id(qid)
        except IkatError:
            self.c.add("bad-turn-id", key, repr(key))
            return False
        if key in seen:
            self.c.add("duplicate-turn", key)
            return False
        seen.add(key)
        if self.interactive:  # the turns are the users': only the topic must be one of the topics
            known = {c.id for c in self.topics.conversations}
            if split_query_id(qid)[0] not in known:
                self.c.add("unknown-turn", qid)
                return False
            return True
        if qid not in self.qids:
            self.c.add("unknown-turn", qid)
            return False
        return True

    def check_turn(self, turn: Any) -> None:
        qid = turn.turn_id
        if not turn.responses:
            self.c.add("no-responses", qid)
        previous_rank = 0
        for response in turn.responses:
            if response.rank < 1:
                self.c.add("bad-rank", qid, f"{qid}: rank {response.rank}")
            elif response.rank <= previous_rank:
                self.c.add("rank-not-increasing", qid, f"{qid}: rank {response.rank} after {previous_rank}")
            previous_rank = max(previous_rank, response.rank)
            if self.official and not response.text.strip() and self.run.run_type not in RESPONSE_ONLY_TYPES:
                self.c.add("empty-text", qid)
            if self.per_response:
                self.check_passages(qid, response.passages, per_response=True)
                if response.passages and not any(p.used for p in response.passages):
                    self.c.add("no-used-passage", qid)
            if self.official:
                self.check_ptkb(qid, response)
        if not self.per_response and not self.closed_book:  # closed-book: reported once, not per turn
            ranking = [p for r in turn.responses for p in r.passages]
            self.check_passages(qid, ranking, per_response=False)

    def check_passages(self, qid: str, passages: list[Any], per_response: bool) -> None:
        if not passages:
            self.c.add("no-passages", qid)
        if per_response and len(passages) > self.most:
            self.c.add("too-many-passages", qid, f"{qid}: {len(passages)} passages > {self.most}")
        if not per_response and self.template is None and len({p.id for p in passages}) > self.most:
            self.c.add("too-many-passages", qid, f"{qid}: {len({p.id for p in passages})} passages > {self.most}")
        seen: set[str] = set()
        previous = math.inf
        ordered = self.template.rule("scores_decreasing") if self.template is not None else True
        for p in passages:
            if math.isnan(p.score) or math.isinf(p.score):
                self.c.add("bad-score", qid, f"{qid}: {p.id} {p.score}")
            elif ordered and p.score > previous:
                self.c.add("score-not-decreasing", qid, f"{qid}: {p.id} {p.score} > {previous}")
            if not math.isnan(p.score):
                previous = p.score
            if p.id in seen:
                if per_response or self.fmt in ("trec", "dict"):
                    self.c.add("duplicate-passage", qid, f"{qid}: {p.id}")
                continue
            seen.add(p.id)
            if not self.id_pattern.match(p.id):
                self.c.add("bad-passage-id", qid, f"{qid}: {p.id!r}")

    def check_ptkb(self, qid: str, response: Any) -> None:
        assert self.template is not None
        by = self.template.rule("ptkb_by")
        if not response.ptkb:
            if not self.template.rule("ptkb_required"):
                return
            if not self.topics.turn(qid).ptkb_provenance:  # a copy of empty gold: said so
                self.c.add("no-ptkb", qid, message="no PTKB provenance, as in the topics' gold PTKB provenance",
                           fix="none where the run copies the gold (the organizers' validator counts it all the same)")
            else:
                self.c.add("no-ptkb", qid)
            return
        statements = self.topics.conversation_of(qid).ptkb
        previous = math.inf
        for ref in response.ptkb:
            if by == "text":
                if not ref.key:
                    self.c.add("unknown-ptkb", qid, f"{qid}: {ref.text[:60]!r}")
                continue
            if not ref.key.strip() and by == "object":
                self.c.add("empty-ptkb-id", qid, f"{qid}: PTKB provenance without an id")
                continue
            if ref.key.strip() == "0":
                self.c.add("ptkb-key-zero", qid, f"{qid}: key 0")
                continue
            if ref.key not in statements:
                self.c.add("unknown-ptkb", qid, f"{qid}: key {ref.key!r}")
                continue
            if by == "object":
                if ref.text != statements[ref.key]:
                    self.c.add("ptkb-text-mismatch", qid, f"{qid}: key {ref.key}")
                if ref.score > previous:
                    self.c.add("ptkb-score-not-decreasing", qid, f"{qid}: key {ref.key} {ref.score} > {previous}")
                previous = ref.score


def _check_ids(run: Run, ids: PassageIds, c: _Collector) -> None:
    per_turn = {t.turn_id: {p.id for r in t.responses for p in r.passages} for t in run.turns}
    missing = ids.missing(set().union(*per_turn.values()) if per_turn else set())
    for qid, pids in per_turn.items():
        for pid in sorted(pids & missing):
            c.add("unknown-passage", qid, pid)
