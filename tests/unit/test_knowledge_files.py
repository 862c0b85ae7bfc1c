"""Knowledge files and retrieval (voice.knowledge): the parser on text, and the index
and answer policy on scripted entries with the real sentence-embedding model (it
loads in a tenth of a second; no LLM here)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from voice.assistant.persona import load_persona
from voice.config import load_settings
from voice.embed import Embedder
from voice.errors import ConfigError
from voice.knowledge.fact_kinds import missing_kind
from voice.knowledge.parse import KnowledgeError, parse_knowledge, read_knowledge
from voice.knowledge.policy import Grounding, KnowledgeConfig
from voice.knowledge.retrieve import (
    KnowledgeIndex,
    Weights,
    stem,
    terms,
    without_fillers,
    words_of,
)

FILE = """# Notes for the editor: never read aloud

## When do you open? | Opening hours
We open at **nine** in the morning
and close at five.

## Where is the cafe?
The cafe is on the [ground floor](https://example.com/map).
### not allowed here
"""


def test_headings_start_entries_and_text_before_them_is_ignored() -> None:
    entries = parse_knowledge(FILE.replace("### not allowed here\n", ""), "museum.md")
    assert [e.phrasings for e in entries] == [
        ("When do you open?", "Opening hours"),
        ("Where is the cafe?",),
    ]
    # lines joined, Markdown marks and link targets dropped: the answer is said as written
    assert entries[0].answer == "We open at nine in the morning and close at five."
    assert entries[1].answer == "The cafe is on the ground floor."
    assert entries[1].source == "museum.md:7"


def test_markdown_as_people_write_it_is_read_as_it_would_be_heard() -> None:
    text = (
        "\ufeff## Opening hours ##\n"  # a byte-order mark, ATX closing hashes
        "We are open:\n- Monday to Friday, nine to five\n* Saturday: ten to four\n"
        "1. Sunday closed!\n"
        "<!-- check the winter hours\nwith Sam -->\n"
        "---\n"
        "# Tickets\n"  # a section: its lines up to the next entry are notes
        "Prices checked in March.\n"
        "## How much is a ticket?\n"
        "Five pounds. <!-- 2026 -->\n"
        "#museum #dinosaurs\n"  # hashtags, not a heading: said
    )
    entries = parse_knowledge(text, "kiosk.md")
    assert [e.phrasings for e in entries] == [("Opening hours",), ("How much is a ticket?",)]
    assert entries[0].answer == (
        "We are open: Monday to Friday, nine to five. Saturday: ten to four. Sunday closed!"
    )
    assert entries[1].answer == "Five pounds. #museum #dinosaurs"
    assert entries[1].source == "kiosk.md:11"  # lines still counted through the comment


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("## A question\n\n## Another\nAn answer.\n", 1, "has no answer"),
        ("## A question\nAn answer.\n##\nmore\n", 3, "heading with no text"),
        (FILE, 9, "only '## ' headings start entries"),
    ],
)
def test_a_malformed_file_names_the_file_and_line(text: str, line: int, says: str) -> None:
    with pytest.raises(KnowledgeError) as caught:
        parse_knowledge(text, "kiosk.md")
    assert f"kiosk.md, line {line}" in str(caught.value)
    assert says in str(caught.value)


def test_files_folders_and_their_errors(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("## One\nFirst.\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("## Two\nSecond.\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("## Ignored\nNot markdown.\n", encoding="utf-8")
    assert [e.heading for e in read_knowledge(tmp_path)] == ["One", "Two"]
    with pytest.raises(KnowledgeError, match="not found"):
        read_knowledge(tmp_path / "missing.md")
    (tmp_path / "empty.md").write_text("just notes\n", encoding="utf-8")
    with pytest.raises(KnowledgeError, match="no entries"):
        read_knowledge(tmp_path / "empty.md")
    (tmp_path / "bom.md").write_bytes("\ufeff## Caf\u00e9\nOpen.\n".encode())
    assert [e.heading for e in read_knowledge(tmp_path / "bom.md")] == ["Caf\u00e9"]
    (tmp_path / "latin1.md").write_bytes(b"## Caf\xe9\nline two\n")
    with pytest.raises(KnowledgeError, match="line 1: not UTF-8"):
        read_knowledge(tmp_path / "latin1.md")


def test_persona_knowledge_is_relative_to_the_persona_file(tmp_path: Path) -> None:
    folder = tmp_path / "personas"
    folder.mkdir()
    (folder / "guide.toml").write_text(
        'name = "Ada"\nknowledge = "../facts/museum.md"\nanswer = "verbatim"\n'
        'unknown_reply = "No idea, sorry."\n',
        encoding="utf-8",
    )
    persona = load_persona(folder / "guide.toml")
    settings = persona.apply(load_settings(env={}))
    assert settings.knowledge.path == str((tmp_path / "facts" / "museum.md").resolve())
    assert settings.knowledge.unknown_reply == "No idea, sorry."
    (folder / "bad.toml").write_text('name = "X"\nanswer = "maybe"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="answer 'maybe'"):
        load_persona(folder / "bad.toml")
    with pytest.raises(ConfigError, match=r"knowledge\.answer"):
        load_settings(env={"VOICE_KNOWLEDGE_ANSWER": "sometimes"})


def test_terms_are_stemmed_without_stop_words() -> None:
    assert stem("tickets") == "ticket" and stem("parking") == "park"
    assert terms("Where are the toilets?") == ["toilet"]


SCRIPTED = """
## Opening hours
We are open from nine to five, Tuesday to Sunday.
## Where is the cafe?
The cafe is on the ground floor, next to the shop.
## Parking | Where can I park?
The car park is on Mill Street and costs two pounds an hour.
## Dinosaurs
The dinosaur hall is on the first floor.
"""


@pytest.fixture(scope="module")
def index() -> KnowledgeIndex:
    return KnowledgeIndex(parse_knowledge(SCRIPTED), Embedder.default())


def test_retrieval_finds_paraphrases_and_a_cache_is_reused(
    index: KnowledgeIndex, tmp_path: Path
) -> None:
    for question, heading in [
        ("I could use a coffee", "Where is the cafe?"),
        ("what time do you close", "Opening hours"),
        ("where do I leave my car", "Parking"),
        ("are there any t-rex skeletons", "Dinosaurs"),
    ]:
        assert index.search(question)[0].entry.heading == heading, question
    cached = KnowledgeIndex(index.entries, Embedder.default(), cache_dir=tmp_path)
    assert len(list(tmp_path.glob("vectors-*.npz"))) == 1
    again = KnowledgeIndex(index.entries, _NoEmbedder(cached), cache_dir=tmp_path)
    assert again.search("where do I leave my car")[0].entry.heading == "Parking"
    assert np.allclose(again._joint, index._joint, atol=1e-6)


def test_a_close_stand_in_for_a_word_counts_for_part_of_it() -> None:
    """ "cab" is not in the taxi entry, but its vector in the encoder's word-piece table
    is close to "taxi"'s: the entry gets part of the word's weight; an unrelated word
    gets none, and with stand-ins off neither does the cab."""
    embedder = Embedder.default()
    cab, taxi, dog = embedder.word_vectors(["cab", "taxi", "dog"])
    assert float(cab @ taxi) > 0.45 and float(cab @ dog) < 0.3
    entries = parse_knowledge(
        "## Taxis\nThe taxi rank is outside the main entrance.\n"
        "## Dogs\nOnly assistance dogs may come in.\n"
    )
    index = KnowledgeIndex(entries, embedder)
    off = KnowledgeIndex(entries, embedder, Weights(similar_word=0.0))
    taxis, dogs = index.word_scores("could you call me a cab")
    assert 0.0 < taxis < 1.0 and dogs == 0.0
    assert list(off.word_scores("could you call me a cab")) == [0.0, 0.0]
    exact = "is there a taxi rank"  # the word itself: counted once, in full, either way
    assert index.word_scores(exact)[0] == off.word_scores(exact)[0]


def test_a_british_or_american_word_counts_as_its_synonym() -> None:
    """ "loo" and "toilets" are far apart in the word-piece table (0.07), so no stand-in
    helped; the synonym counts in full, and only for the entry that has it."""
    embedder = Embedder.default()
    entries = parse_knowledge(
        "## Toilets\nThe toilets are next to the main entrance.\n"
        "## Pharmacy\nThe pharmacy is on the ground floor.\n"
        "## Cafe\nThe cafe is on the first floor.\n"
    )
    for weights in (Weights(), Weights(similar_word=0.0)):
        index = KnowledgeIndex(entries, embedder, weights)
        assert list(index.word_scores("where is the loo")) == [1.0, 0.0, 0.0]
        assert list(index.word_scores("where is the chemist")) == [0.0, 1.0, 0.0]
    grounding = Grounding(KnowledgeIndex(entries, embedder), KnowledgeConfig(path="x"))
    assert "toilets" in grounding("excuse me, where's the loo?").matches[0].entry.answer


def test_an_edited_file_embeds_only_the_texts_that_changed(
    index: KnowledgeIndex, tmp_path: Path
) -> None:
    KnowledgeIndex(index.entries, Embedder.default(), cache_dir=tmp_path)
    edited = SCRIPTED.replace("two pounds an hour", "three pounds an hour")
    counting = _CountingEmbedder()
    changed = KnowledgeIndex(parse_knowledge(edited), counting, cache_dir=tmp_path)
    # The parking answer is one sentence: it and the heading-with-answer text are new.
    assert len(counting.texts) == 2, counting.texts
    assert all("three pounds" in text for text in counting.texts), counting.texts
    assert changed.search("how much is parking")[0].entry.answer.endswith("three pounds an hour.")


class _CountingEmbedder:
    """The real embedder, counting what it is asked to embed."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.name = Embedder.default().name  # the same model: the same cache

    def embed(self, texts: list[str]) -> object:
        self.texts += texts
        return Embedder.default().embed(texts)


class _NoEmbedder:
    """Embeds queries only: building the index must come from the cache."""

    def __init__(self, index: KnowledgeIndex) -> None:
        self.inner = index.embedder
        self.name = Embedder.default().name

    def embed(self, texts: list[str]) -> object:
        assert len(texts) == 1, "the entries were embedded again instead of read from cache"
        return self.inner.embed(texts)


def test_the_policy_says_entries_declines_the_rest_and_leaves_small_talk(
    index: KnowledgeIndex,
) -> None:
    grounding = Grounding(index, KnowledgeConfig(path="x", answer="verbatim"))
    said = grounding("where can I park my car")
    assert said.kind == "say" and "Mill Street" in said.text
    assert grounding("who is the director of the museum?").kind == "unknown"
    assert grounding("what is the capital of France?").text == "Sorry, I don't know that."
    for chat in ("hello", "thanks a lot", "how are you?"):
        assert grounding(chat).kind == "chat", chat
    generate = Grounding(index, KnowledgeConfig(path="x", answer="generate"))
    context = generate("where can I park my car")
    assert context.kind == "context" and "Mill Street" in context.text


def test_small_talk_is_not_answered_with_an_entry_that_shares_its_words() -> None:
    """Nearer a small-talk line than to any entry's phrasing is small talk, even where
    the entry's other texts match with confidence (the leisure centre told "can you hear
    me okay?" about its hearing loop)."""
    loop = "## Is there a hearing loop?\nYes, you can hear us through the loop at reception.\n"
    grounding = Grounding(
        KnowledgeIndex(parse_knowledge(SCRIPTED + loop), Embedder.default()),
        KnowledgeConfig(path="x"),
    )
    assert grounding("can you hear me okay?").kind == "chat"
    assert grounding("do you have a hearing loop?").kind == "say"
    assert grounding("hi, where is the cafe?").kind == "say"  # a greeting, then a question


def test_hesitations_in_a_transcript_do_not_count_against_the_question(
    index: KnowledgeIndex,
) -> None:
    """Whisper keeps some "um"s and "uh"s; as words no entry has they had counted against
    every entry (the cafe's words signal 1.0 -> 0.23)."""
    assert without_fillers("Umm... so, er, where is the, uh, cafe?") == "so where is the cafe?"
    assert without_fillers("the summer hours of the mummy room, hmm") == (
        "the summer hours of the mummy room"
    )
    assert words_of("okay, um, where's the cafe then") == ["cafe"]
    assert without_fillers("Er, where is the ER?") == "where is the ER?"  # an acronym stays
    grounding = Grounding(index, KnowledgeConfig(path="x"))
    clean, hesitant = grounding("where is the cafe"), grounding("um, where is the, uh, cafe?")
    assert hesitant.kind == clean.kind == "say" and hesitant.text == clean.text
    assert hesitant.matches[0].words == clean.matches[0].words == 1.0


def test_a_question_about_the_assistant_gets_its_introduction(index: KnowledgeIndex) -> None:
    """The 135M model, asked its name with the name in its prompt, said another name:
    with an introduction, questions about itself are answered as written; questions
    about a name of the place are not taken for them; a file's own entry wins."""
    kiosk = Grounding(index, KnowledgeConfig(path="x", introduction="I'm Ada, the guide."))
    for question in ("What's your name?", "who am I talking to", "What can you help me with?"):
        decision = kiosk(question)
        assert (decision.kind, decision.text) == ("say", "I'm Ada, the guide."), question
    named = Grounding(index, KnowledgeConfig(path="x", name="Ada"))
    assert named("What should I call you?").text == "I'm Ada."
    assert named("What can you do?").text != "I'm Ada."  # a name does not say what it does
    assert kiosk("where is the cafe?").kind == "say"
    for other in ("What's the name of the cafe?", "who is the director of the museum?"):
        assert kiosk(other).text != "I'm Ada, the guide.", other
    assert kiosk("hello").kind == "chat"
    without = Grounding(index, KnowledgeConfig(path="x"))
    assert without("What's your name?").kind == "chat"  # the model's, as small talk
    own = KnowledgeIndex(parse_knowledge(SCRIPTED + "## Who are you?\nThe robot guide.\n"),
                         Embedder.default())  # fmt: skip
    mine = Grounding(own, KnowledgeConfig(path="x", introduction="I'm Ada."))
    assert mine("Who are you?").text == "The robot guide."
    # Without a persona, an NPC's own entry answers every way of asking, not only its
    # heading's ("who are you" has no word to weigh, so its score alone was not enough)
    npc = Grounding(own, KnowledgeConfig(path="x"))
    for question in ("who are you", "who am I talking to", "tell me about yourself"):
        assert (npc(question).kind, npc(question).text) == ("say", "The robot guide."), question
    # a question about someone else is not about the assistant, however near it embeds
    for other in ("who is he?", "what's her name?", "who is it?", "do you have one?"):
        assert npc(other).kind != "say", other
        assert kiosk(other).text != "I'm Ada, the guide.", other


def test_asking_for_the_last_reply_again_is_told_apart(index: KnowledgeIndex) -> None:
    grounding = Grounding(index, KnowledgeConfig(path="x"))
    for again in ("Pardon?", "What?", "Sorry, can you say that again?", "I didn't catch that"):
        assert grounding(again).kind == "repeat", again
    for other in ("Where is the cafe?", "Can I come again tomorrow?", "Sorry", "what"):
        assert grounding(other).kind != "repeat", other


def test_a_persona_gives_its_name_and_its_introduction() -> None:
    from voice.assistant.persona import Persona

    settings = load_settings(None)
    plain = Persona(name="Ada").apply(settings).knowledge
    assert (plain.name, plain.introduction) == ("Ada", "")
    told = Persona(name="Brom", introduction="Brom. I make swords.").apply(settings)
    assert told.knowledge.introduction == "Brom. I make swords."
    # in another language "I'm Lena." would be wrong: the persona writes its own
    assert Persona(name="Lena", language="de").apply(settings).knowledge.name == ""


def test_an_entry_without_the_price_or_time_asked_for_is_asked_back(
    index: KnowledgeIndex,
) -> None:
    """Near misses: the entry for the thing wins with confidence, but it does not say
    what the visitor asked about it, so it is asked back rather than said."""
    plain = Grounding(index, KnowledgeConfig(path="x", fact_kinds=False))
    checked = Grounding(index, KnowledgeConfig(path="x"))
    for near_miss in (
        "how much does it cost to see the dinosaur hall",
        "what time does the cafe close",
        "when does the cafe open",
    ):
        assert plain(near_miss).kind == "say", near_miss  # confident without the check
        asked = checked(near_miss)
        assert asked.kind == "ask" and asked.if_yes == plain(near_miss).text, near_miss
    for answered in ("how much is the car park", "when do you close on sundays"):
        assert checked(answered).kind == "say", answered


@pytest.mark.parametrize(
    ("question", "answer", "missing"),
    [
        ("how much is a ticket?", "Adults pay twelve pounds.", ""),
        ("how much is a ticket?", "Children under three go free.", ""),
        ("how much is breakfast?", "Breakfast is included in every rate.", ""),
        ("how much is parking?", "The car park has four hundred spaces.", "price"),
        ("how much time does the tour take?", "The tour takes an hour.", ""),
        ("when does the show start?", "Shows start at half past two.", ""),
        ("when do you open?", "We are open from nine to five.", ""),
        ("what time is the feeding?", "Feeding is at 14:30 daily.", ""),
        ("when are the pandas fed?", "The pandas live in the bamboo wood.", "time"),
        ("what time is it?", "The clock is by the lifts.", "time"),
        ("when was the museum founded?", "The museum opened in 1898.", ""),
        ("when was it built?", "It was built in eighteen ninety-eight.", ""),
        ("where is the cafe?", "It is on the ground floor.", ""),
        ("wann öffnet ihr?", "Das Museum ist im Park.", ""),
        ("what's the phone number for the pharmacy?", "The pharmacy is by the lifts.", "phone"),
        ("what's the phone number?", "Ring us on 01746 762 000.", ""),
        ("is there a direct number for x-ray?", "Call oh one seven four six, two two.", ""),
        ("what number do I ring for the desk?", "Dial extension four from any room.", ""),
        ("my phone's about to die, is there a plug?", "Charging points are on the pillars.", ""),
        ("what's your email address?", "Write to bookings@example.org.", ""),
        ("what's your website?", "Book on our website.", ""),
        ("what's the email to cancel?", "Cancel at reception with a month's notice.", "address"),
        ("how many wolves are there?", "Wolves come out of the forest at night.", "count"),
        ("how many people live here?", "About three hundred souls live here.", ""),
        ("how many rooms do you have?", "We have 12 rooms.", ""),
        ("how long does a scan take?", "Scans are in the imaging suite.", "extent"),
        ("how long does a scan take?", "A scan takes about twenty minutes.", ""),
        ("how far is Greywater?", "Greywater is two days' ride north.", ""),
        ("how long ago was it built?", "It was built in 1898.", ""),
    ],
)
def test_the_kind_of_fact_a_question_asks_for(question: str, answer: str, missing: str) -> None:
    assert missing_kind(question, answer) == missing


def test_a_reply_to_a_question_back_is_read_by_its_first_word() -> None:
    from voice.knowledge.policy import answer_to_question

    for yes in ("Yes.", "yeah, please", "Yep!", "That's right", "uh huh", "correct",
                "Hmm, yes.", "Oh, yeah", "Well, I do"):  # fmt: skip
        assert answer_to_question(yes) == "yes", yes
    for no in ("No.", "nope", "No, thanks", "not really", "I don't", "Oh no", "Um, no"):
        assert answer_to_question(no) == "no", no
    for yes, no in (("Sí, gracias", "No"), ("Oui", "Non, merci"), ("Ja, genau", "Nein"),
                    ("是的", "不是")):  # fmt: skip
        assert (answer_to_question(yes), answer_to_question(no)) == ("yes", "no"), yes
    # A new question, or words that are neither, are decided on their own.
    for other in ("No, where are the toilets then?", "Where is the cafe?", "", "maybe", "Um."):
        assert answer_to_question(other) == "", other


def test_a_question_back_names_the_heading_and_yes_or_no_decides() -> None:
    from voice.knowledge.policy import Decision, clarifying_question, follow_up

    assert clarifying_question("Where is the cafe?") == "Do you mean: where is the cafe?"
    assert clarifying_question("Ticket prices") == "Do you mean: ticket prices?"
    assert clarifying_question("GP appointments") == "Do you mean: GP appointments?"
    assert clarifying_question("I lost my bag") == "Do you mean: I lost my bag?"
    assert clarifying_question("Horario", "¿Pregunta por: {heading}?") == (
        "¿Pregunta por: horario?"
    )
    for bad in ("Do you mean that?", "Do you mean {entry}?", "{heading} {"):
        with pytest.raises(ConfigError, match="heading"):
            KnowledgeConfig(ask_text=bad).validate()
    asked = Decision("ask", "Do you mean: ticket prices?", if_yes="Twelve pounds.",
                     if_no="Sorry, I don't know that.")  # fmt: skip
    assert follow_up(asked, "yes please") == Decision("say", "Twelve pounds.")
    assert follow_up(asked, "no") == Decision("unknown", "Sorry, I don't know that.")
    assert follow_up(asked, "where is the cafe") is None


def test_after_a_no_the_next_weaker_match_is_asked_then_the_unknown_reply(
    index: KnowledgeIndex,
) -> None:
    """knowledge.asks = 2: a "no" to the best entry asks about the next one if it is a
    weaker match on its own; a second "no" gets the unknown reply. asks = 1: at once."""
    from voice.knowledge.policy import follow_up

    every = KnowledgeConfig(path="x", threshold=0.99, context_threshold=0.0)  # all asked
    first = Grounding(index, every)("where do I leave my car")
    assert first.kind == "ask" and first.text == "Do you mean: parking?"
    second = follow_up(first, "no")
    assert (
        second is not None
        and second.kind == "ask"
        and second.matches[0].entry.heading != ("Parking")
    )
    yes = follow_up(second, "yes")
    assert yes is not None and yes.kind == "say" and yes.text == second.if_yes
    last = follow_up(second, "nope")
    assert last is not None and last.kind == "unknown" and last.text == every.unknown_reply
    once = Grounding(index, dataclasses.replace(every, asks=1))("where do I leave my car")
    assert (follow_up(once, "no") or once).kind == "unknown"
    best, runner_up, third = first.matches[:3]
    own = 2 * runner_up.score - third.score  # the runner-up's confidence, the best aside
    assert own < best.confidence
    between = dataclasses.replace(every, context_threshold=(own + best.confidence) / 2)
    strict = Grounding(index, between)("where do I leave my car")
    assert strict.kind == "ask" and strict.then is None  # the runner-up is too weak
    with pytest.raises(ConfigError, match="asks"):
        KnowledgeConfig(asks=0).validate()


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "knowledge"


@pytest.mark.parametrize(
    "questions", sorted(EXAMPLES.glob("*.questions.jsonl")), ids=lambda p: p.name
)
def test_every_example_question_can_be_answered_from_its_file(questions: Path) -> None:
    """The bench's sets are data: each in-scope question's expected fact is in one of
    its file's answers (else the bench scores a miss no retrieval could avoid), and
    each set asks both kinds of question."""
    from voice.bench.knowledge import carries, load_questions

    entries = read_knowledge(questions.with_name(questions.name.replace(".questions.jsonl", ".md")))
    rows = load_questions(questions)
    unanswerable = [
        q.q for q in rows if q.in_scope and not any(carries(e.answer, q.expect) for e in entries)
    ]
    assert unanswerable == []
    assert any(q.in_scope for q in rows) and any(not q.in_scope for q in rows)


def test_a_question_file_is_read_strictly_and_a_bare_phrase_is_a_group(tmp_path: Path) -> None:
    """A flat list of phrases must not be read as groups of characters (a test that
    always holds), and "in_scope": "false" must not count as true."""
    from voice.bench.knowledge import carries, load_questions

    good = tmp_path / "good.jsonl"
    good.write_text(
        '{"q": "When do you open?", "in_scope": true, "expect": ["nine", ["five", 5]]}\n'
        '{"q": "Sell umbrellas?", "in_scope": false}\n',
        encoding="utf-8",
    )
    rows = load_questions(good)
    assert rows[0].expect == [["nine"], ["five", "5"]]
    assert carries("From nine to 5.", rows[0].expect)
    assert not carries("Not on Sundays.", rows[0].expect)
    for bad in (
        '{"q": "x", "in_scope": "false"}',
        '{"q": "x", "in_scope": true, "expect": [["seven", true]]}',
        '{"q": "x", "in_scope": true, "expect": {"a": 1}}',
    ):
        (tmp_path / "bad.jsonl").write_text(bad + "\n", encoding="utf-8")
        with pytest.raises(ConfigError, match="line 1: not a question"):
            load_questions(tmp_path / "bad.jsonl")
    with pytest.raises(ConfigError, match=r"missing\.jsonl not found"):
        load_questions(tmp_path / "missing.jsonl")  # a clear error, not a traceback


def test_spoken_answers_are_matched_to_questions_by_when_they_started() -> None:
    """A question said with a pause got two replies (one cut off, then the whole
    turn's): matched in order, every later answer had moved onto the next question."""
    from voice.bench.knowledge_spoken import answers_by_question
    from voice.transports.simulate import ScriptTurn

    silence = np.zeros(160, dtype=np.float32)
    turns = [ScriptTurn(silence, f"t{i}", start_sample=i * 160_000) for i in range(3)]
    owner = [0, 1, 1]  # question 1 was asked back, and its visitor said "yes"

    def reply(reply_id: int, at_s: float, text: str) -> list[dict[str, object]]:
        start = {"type": "reply_start", "reply_id": reply_id, "utterance_id": reply_id,
                 "audio_ms": at_s * 1000}  # fmt: skip
        return [start, {"type": "reply_text", "reply_id": reply_id, "text": text}]

    events = [
        *reply(1, 2.0, "Cut off."),
        *reply(2, 4.0, "The cafe is upstairs."),  # the whole first turn's reply
        *reply(3, 12.0, "Do you mean: parking?"),
        *reply(4, 22.0, "Parking is on Mill Street."),
    ]
    answers, order = answers_by_question(events, turns, owner)
    assert answers == {0: "The cafe is upstairs.", 1: "Parking is on Mill Street."}
    assert order == [1, 2, 3, 4]
