"""A conservative token count, for bounds a provider states in tokens without publishing its
tokenizer: a note that fits by this count fits by any byte-level BPE count of ordinary text."""

from __future__ import annotations

import re

# Letters of the alphabetic scripts that UTF-8 writes in one or two bytes: ASCII, Latin-1,
# Latin Extended-A and -B, Greek and Coptic, Cyrillic and its supplement.
_ALPHABETIC_RUN = re.compile(r"[\u0000-\u024f\u0370-\u052f]+")
_SUPPLEMENTARY = re.compile(r"[\U00010000-\U0010ffff]")


def estimated_tokens(text: str) -> int:
    """The tokens a provider counts in `text`, estimated on the high side, for a provider that
    publishes no tokenizer (Live): a rule over scripts and UTF-8 bytes.

    Every token of a byte-level BPE tokenizer covers at least one UTF-8 byte, so a text's bytes
    are the one bound that holds for any vocabulary; a character beyond the Basic Multilingual
    Plane counts that many (four), since CJK extensions, emoji and historic scripts are rare
    enough to be split into their bytes. Any other character outside Latin, Greek and Cyrillic
    counts one token (CJK, kana, Hangul, Arabic, Devanagari, and punctuation such as "…" or
    "—"): ordinary text in those scripts takes about a token a character, or less. A run of
    Latin, Greek and Cyrillic counts one token per four UTF-8 bytes, rounded up: four ASCII
    characters, or two of Greek, Cyrillic or accented Latin, where prose takes four bytes a
    token or more. The count is monotone (a prefix never counts more than its text) and
    subadditive (joined texts never count more than their parts), so text cut to a budget by
    it stays within the budget.
    """
    tokens = 0
    in_runs = 0
    for run in _ALPHABETIC_RUN.finditer(text):
        tokens += -(-len(run.group().encode()) // 4)
        in_runs += run.end() - run.start()
    return tokens + (len(text) - in_runs) + 3 * len(_SUPPLEMENTARY.findall(text))
