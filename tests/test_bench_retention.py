"""The benchmark's judge on small hand-made steps: what counts as used, and as held."""

from __future__ import annotations

from bench.economics.retention import Judge, action_text, identifiers, retention, tokens


def test_identifiers_are_ids_numbers_dates_paths_urls_and_inner_capitals() -> None:
    text = (
        "My user id is mia_li_3668; flight **HAT136** on 2024-05-20 at 06:00:00 costs $121,"
        " card 7447, file src/billing/a.py, see https://x.example/r?id=9. McDonald, camelCase."
    )
    assert identifiers(text) == {
        "mia_li_3668", "hat136", "2024-05-20", "06:00:00", "121", "7447",
        "src/billing/a.py", "https://x.example/r?id=9", "mcdonald", "camelcase",
    }  # fmt: skip


def test_plain_words_short_numbers_and_abbreviations_are_not_identifiers() -> None:
    assert identifiers("Yes, 2 bags and 12 seats, e.g. the economy cabin. OK!") == set()


def test_an_action_is_its_text_and_its_arguments_values_not_their_keys() -> None:
    action = action_text(
        "Booking now.",
        ['{"user_id": "mia_li_3668", "flights": [{"flight_number": "HAT136"}], "total": 250.0}'],
    )
    assert identifiers(action) == {"mia_li_3668", "hat136", "250"}


def test_a_step_uses_what_first_came_from_a_user_or_a_tool_and_not_the_system_prompt() -> None:
    judge = Judge()
    judge.system("Today is 2024-05-15. Use tool get_user_details.")
    judge.source("User: my id is mia_li_3668")
    judge.assistant("I will check flight HAT999 for you")  # the assistant's own: not counted
    judge.source('Tool: {"reservation": "ZFA04Y", "flight": "HAT136"}')
    step = judge.step(
        action_text(
            "", ['{"id": "ZFA04Y", "user": "mia_li_3668", "f": "HAT999", "d": "2024-05-15"}']
        ),
        context=["User: my id is mia_li_3668", "Summary: reservation ZFA04Y was found."],
    )
    assert step.used == {"zfa04y", "mia_li_3668"}
    assert step.held == {"zfa04y", "mia_li_3668"}


def test_an_identifier_dropped_from_the_context_is_missing_and_a_substring_does_not_hold_it() -> (
    None
):
    judge = Judge()
    judge.source("Tool: reservations 4WQ150 and 8JX2WO, flight 136 seats")
    step = judge.step(
        "Cancelling 4WQ150 and 8JX2WO on 136", context=["Tool [cleared: 4WQ150x]", "HAT136"]
    )
    assert step.used == {"4wq150", "8jx2wo", "136"}
    assert step.held == set()
    assert step.missing == step.used


def test_retention_is_held_over_used_summed_over_steps_and_one_when_nothing_is_used() -> None:
    judge = Judge()
    judge.source("ids AAA111 BBB222 CCC333")
    judge.step("AAA111 BBB222", ["AAA111"])
    judge.step("nothing here", ["AAA111"])
    judge.step("CCC333", ["ccc333"])
    total = retention(judge.steps)
    assert (total.used, total.held, total.steps, total.steps_using) == (3, 2, 3, 2)
    assert total.ratio == 2 / 3
    assert retention([]).ratio == 1.0


def test_context_tokens_are_case_folded_and_stripped_of_edge_punctuation() -> None:
    assert {"hat136", "2024-05-20"} <= tokens('"flight": "HAT136", on 2024-05-20.')
