#!/usr/bin/env python3
"""Build the Sextant demo corpus: ``data/demo/documents.jsonl.gz`` and ``data/demo/LICENSE.md``.

Why: the engine needs a small, realistic, redistributable document set for demos and
end-to-end tests that mixes long structured filings with conversational transcripts.
It is derived from two shared data sets (see ``<shared>/README.md`` for their licences):

* ``sec_filings_sections/corpus.jsonl`` + ``filings.json``: 10-K/10-Q passages (~300 words)
  split by Item section. One output document per (filing, Item section); every passage
  becomes one segment, in the original order. All passages are kept.
* ``earnings_calls_maec/calls.jsonl.gz``: MAEC earnings-call transcripts, one sentence a
  line. Every call of a ticker that also has a filing is kept, plus a deterministic,
  ticker-spread selection of other calls (40-150 sentences, so the file stays a few MB)
  up to ``--calls`` in total. Sentences are grouped into paragraph segments of roughly
  3-6 sentences / 60-120 words.

The fiscal period a call discusses is parsed from its opening lines ("fourth quarter
2014", "Q3 fiscal 2016", "second quarter of fiscal year 2017", ...; see
``parse_call_period``). When no statement is found the period falls back to the calendar
quarter before the quarter of the call date (a call in February 2015 -> Q4 2014). Many
MAEC transcripts start mid-call (in the Q&A), so the fallback is common.

Output is one JSON document per line, sorted (filings by ticker/period/section, then
calls by ticker/date), gzip with mtime 0 and no file name, so reruns are byte-identical.

Usage::

    python3 scripts/data/build_demo_corpus.py [SHARED_DATA_DIR] [--out DIR] [--calls N]
        [--min-sentences N] [--max-sentences N]
    python3 scripts/data/build_demo_corpus.py --selftest

Standard library only (Python 3.11).
"""
from __future__ import annotations

import argparse
import calendar
import datetime as dt
import gzip
import hashlib
import io
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_SHARED = REPO.parent / "shared" / "data"
DEFAULT_OUT = REPO / "data" / "demo"

# ---------------------------------------------------------------------------------------
# Filings
# ---------------------------------------------------------------------------------------

_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
_MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})


def parse_long_date(text: str | None) -> str | None:
    """'September 28, 2024' / 'DECEMBER 31, 2024' -> '2024-09-28'; None if unparseable."""
    if not text:
        return None
    m = re.fullmatch(r"\s*([A-Za-z]+)\.?\s+(\d{1,2}),?\s+(\d{4})\s*", text)
    if not m or m.group(1).lower() not in _MONTHS:
        return None
    return dt.date(int(m.group(3)), _MONTHS[m.group(1).lower()], int(m.group(2))).isoformat()


def item_label(item: str) -> str:
    """'Item 1A' -> 'Item 1A'; 'Part I Item 2' -> 'Part I, Item 2'."""
    return re.sub(r"^(Part [IVX]+) (Item )", r"\1, \2", item)


def item_sort_key(item: str) -> tuple:
    """Order sections the way a filing does: Part I before Part II, Item 1 < 1A < 2 < 10."""
    m = re.fullmatch(r"(?:Part ([IVX]+) )?Item (\d+)([A-Z]?)", item)
    if not m:
        return (9, 999, item)
    part = {"I": 1, "II": 2, "III": 3, "IV": 4}.get(m.group(1) or "", 0)
    return (part, int(m.group(2)), m.group(3))


def build_filing_documents(shared: Path, stats: Counter) -> tuple[list[dict], set[str]]:
    corpus = shared / "sec_filings_sections" / "corpus.jsonl"
    filings_meta = json.loads((shared / "sec_filings_sections" / "filings.json").read_text())
    groups: dict[str, dict] = {}
    order: list[str] = []
    with corpus.open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            meta = row["metadata"]
            doc_id = row["_id"].rsplit("_", 1)[0]  # AAPL_10K_2024FY_1A_003 -> AAPL_10K_2024FY_1A
            g = groups.get(doc_id)
            if g is None:
                g = groups[doc_id] = {"meta": meta, "chunks": []}
                order.append(doc_id)
            else:
                same = ("source_file", "item", "fiscal_year", "fiscal_period", "form")
                assert all(g["meta"][k] == meta[k] for k in same), (doc_id, meta)
            g["chunks"].append((int(meta["chunk"]), row["text"]))
            stats["filing_passages"] += 1

    docs = []
    for doc_id in order:
        g = groups[doc_id]
        meta = g["meta"]
        chunks = sorted(g["chunks"])
        assert [c for c, _ in chunks] == list(range(len(chunks))), f"gap in chunks of {doc_id}"
        form = meta["form"]
        fy = int(meta["fiscal_year"])
        fp = meta["fiscal_period"]
        quarter = None if fp == "FY" else fp
        assert form in ("10-K", "10-Q") and (quarter is None) == (form == "10-K"), meta
        company = (meta.get("company") or "").strip() or meta["ticker"]
        if not meta.get("company"):
            stats["filing_docs_without_company"] += 1
        period = f"FY{fy}" if quarter is None else f"{quarter} FY{fy}"
        title = f"{company} {form} {period} \u2014 {item_label(meta['item'])}. {meta['section']}"
        published = meta.get("filing_date") or parse_long_date(meta.get("period_end"))
        if not meta.get("filing_date"):
            stats["filing_docs_date_from_period_end"] += 1
        segments = [text.strip() for _, text in chunks]
        assert all(segments), f"empty passage in {doc_id}"
        docs.append(
            {
                "documentId": doc_id,
                "title": title,
                "documentType": form,
                "ticker": meta["ticker"],
                "year": fy,
                "quarter": quarter,
                "filingType": form,
                "sourceUrl": meta.get("source_url") or meta.get("url") or None,
                "publishedAt": published,
                "segments": segments,
                "_sort": (meta["ticker"], fy, fp, form, item_sort_key(meta["item"]), doc_id),
            }
        )
    n_listed = sum(int(f["n_passages"]) for f in filings_meta)
    if n_listed != stats["filing_passages"]:
        print(f"warning: filings.json lists {n_listed} passages, corpus has "
              f"{stats['filing_passages']}", file=sys.stderr)
    tickers = {d["ticker"] for d in docs}
    return docs, tickers


# ---------------------------------------------------------------------------------------
# Earnings-call fiscal period parser
# ---------------------------------------------------------------------------------------

_ORD = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4}
_APOS = "['\u2018\u2019`]"
# A year: 2014 | '14 | FY14 | FY'14 | FY 2014 | F'14 (the FY forms imply a fiscal year).
_YEAR = (rf"(?:(?P<fy{{n}}>\bFY\s?{_APOS}?|\bF{_APOS})(?P<yy{{n}}>(?:19|20)?\d\d)\b"
         rf"|(?P<y{{n}}>\b(?:19|20)\d\d\b|{_APOS}\d\d\b))")
_QTR = (r"(?:(?P<ord>\b(?:first|second|third|fourth|1st|2nd|3rd|4th))[\s-]+(?:fiscal[\s-]+)?quarter"
        r"|\b(?:F|fiscal\s+)?Q(?P<qn>[1-4])(?![\d.,%])"
        r"|\b(?P<nq>[1-4])Q(?=[\s']|\d\d\b|$))")
# "fiscal" / "fiscal year" / "fiscal year of" before a year
_FISCAL = r"(?P<fis{n}>\bfiscal(?:\s+year)?(?:\s+of)?\s+)?"
_AND_YEAR = (r"(?:\s+and(?:\s+the)?(?:\s+(?:full|fiscal|calendar|twelve[\s-]months?|year[\s-]end|"
             r"full[\s-]year|fiscal[\s-]year|year)(?:[\s-]year)?(?:[\s-]end(?:ed)?)?)?(?=\s))?")
_SEP = r"(?:\s*[,-]?\s*(?:of|for|in|ended|ending)?\s*(?:the\s+|our\s+|its\s+|this\s+)?)"

_PATTERNS = [
    # fourth quarter (and full year) (of) (fiscal (year)) 2014 / Q3 FY16 / Q4 '14 / 4Q14
    re.compile(_QTR + _AND_YEAR + _SEP + _FISCAL.format(n=1) + _YEAR.format(n=1)
               + r"(?P<fis_after1>\s+fiscal(?:\s+year)?)?", re.I),
    # (fiscal) 2014 (fiscal) fourth quarter / FY16 Q3 / fiscal year 2016 third quarter
    re.compile(_FISCAL.format(n=2) + _YEAR.format(n=2) + r"(?:'s)?"
               + r"(?P<fis_mid2>[\s-]+fiscal(?:[\s-]+year)?)?[\s-]+" + _QTR, re.I),
    # fiscal third quarter 2016 / fiscal Q3 2016 / fiscal third quarter of 2016
    re.compile(r"\bfiscal(?:\s+year)?\s+" + _QTR + _SEP + _YEAR.format(n=3), re.I),
    # bank style 4Q14 / 4Q 2014 / 4QFY16
    re.compile(r"\b(?P<nq>[1-4])Q\s?(?P<fy4>FY\s?)?" + _APOS + r"?(?P<y4>(?:20)?\d\d)\b", re.I),
]
# "fourth quarter ended December 31, 2014" -> quarter from the words, year from the date.
_ENDED = re.compile(
    _QTR + r"(?:\s+of\s+(?:fiscal\s+(?:year\s+)?)?(?:\d{4}|" + _APOS + r"\d\d))?"
    r",?\s+(?:which\s+)?end(?:ed|ing)\s+(?:on\s+)?(?P<mon>[A-Za-z]+)\.?\s+"
    r"(?:(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+)?"
    r"(?P<ey>(?:19|20)\d\d)\b", re.I)
# A full mention followed by these words frames the call itself: "Q4 2014 earnings call".
_FRAME_AFTER = (r"(?:\s+(?:and\s+(?:full[\s-]year|year[\s-]end|fiscal[\s-]year)\s+)?"
                r"(?:\d{4}\s+)?(?:fiscal\s+(?:year\s+)?)?(?:\d{4}\s+)?"
                r"(?:financial\s+|operating\s+|earnings\s+|conference\s+|investor\s+)?"
                r"(?:results|call|conference|earnings|performance|report))")
# A quarter without a year counts only in phrases that frame the call itself.
_NAME = r"(?:[\w&.'\u2019-]+\s+){0,3}?"
_QONLY_FRAMES = [re.compile(p, re.I) for p in (
    # "our fourth quarter results", "our first-quarter financial performance"
    _QTR + r"\s+(?:fiscal\s+)?(?:\d{4}\s+)?(?:financial\s+|operating\s+)?(?:results|performance)\b",
    # "welcome to Resources' second quarter call", "joining our first quarter earnings call"
    r"\b(?:welcome|join|joining|participating|attending|listening)\b[^.;]{0,60}?" + _QTR
    + r"\s+(?:fiscal\s+)?(?:\d{4}\s+)?(?:earnings\s+|conference\s+|investor\s+)*"
    r"(?:call|conference)\b",
    r"\bwelcome(?:\s+(?:everyone|everybody|all))?\s+to\s+(?:the\s+|our\s+|this\s+)?" + _NAME
    + r"(?:fiscal\s+)?" + _QTR,
    # "a brief assessment of the fourth quarter", "our results for the fourth quarter"
    r"\b(?:assessment|review|overview|summary|highlights|recap|discussion|results)"
    r"\s+(?:of|for|in)\s+"
    r"(?:our\s+|the\s+)?(?:fiscal\s+)?" + _QTR,
    # "we delivered a strong third quarter", "pleased to report an excellent first quarter"
    r"\b(?:delivered|reported|report|posted)\s+(?:a\s+|an\s+|our\s+)?(?:very\s+)?"
    r"(?:strong|solid|record|good|great|excellent|outstanding|terrific)\s+(?:fiscal\s+)?" + _QTR,
)]
# Sentences that look ahead: a mention there is guidance, not the period discussed.
_FUTURE = re.compile(
    r"look(?:ing)?\s+forward|\bnext\s+(?:call|quarter|year|time)|"
    r"\bwill\s+(?:report|discuss|announce|"
    r"release|be)|\bwe'll\b|\blater\s+(?:this|in)|upcoming|guidance|outlook|forecast|"
    r"\bexpect(?:s|ing)?\b|\banticipat(?:e|es|ing)\b|\bproject(?:ed|ing|ion)|plan\s+to|"
    r"going\s+to|\binto\s+the|beginning\s+of|"
    r"by\s+the\s+end\s+of|through(?:out)?\s+the|\btarget|\bestimat|\bstart(?:ing)?\s|\bbegin|"
    r"\benter(?:ing)?\s|heading\s+into|scheduled", re.I)
# Sentences that refer back to an earlier call or period.
_PAST_REF = re.compile(
    r"\b(?:last|previous|prior|earlier|ago)\b|\b(?:said|noted|mentioned|discussed|outlined|gave|"
    r"provided|talked\s+about|highlighted|indicated)\s+(?:on|during|in|at)\b|\bas\s+we\s+"
    r"(?:said|noted|mentioned)|\bsince\b|compared|versus|\bvs\b|"
    r"\bcall\b.*\b(?:we|I)\s+(?:said|noted|mentioned|discussed|outlined|gave|provided|talked|"
    r"highlighted|indicated|announced)\b", re.I)

OPENING_LINES = 40        # sentences searched for "quarter + year" statements
OPENING_LINES_FRAMING = 15  # sentences where "welcome to our Q1 2016 call" frames the call
MAX_LAG_DAYS = 100        # a call reports a period that ended at most ~3 months earlier


def _quarter_of(m: re.Match) -> int:
    g = m.groupdict()
    if g.get("ord"):
        return _ORD[g["ord"].lower()]
    return int(g.get("qn") or g.get("nq"))


def _year_of(m: re.Match, n: int) -> tuple[int, bool]:
    """(year, explicitly fiscal) from the numbered year groups of pattern n."""
    g = m.groupdict()
    if g.get(f"yy{n}"):
        raw, fiscal = g[f"yy{n}"], True
    else:
        raw, fiscal = g[f"y{n}"], bool(g.get(f"fy{n}"))
    digits = re.sub(r"\D", "", raw)
    year = int(digits) if len(digits) == 4 else 2000 + int(digits)
    return year, fiscal


def _quarter_end(year: int, quarter: int) -> dt.date:
    month = 3 * quarter
    return dt.date(year, month, calendar.monthrange(year, month)[1])


def _add_months(d: dt.date, months: int) -> dt.date:
    """Last day of the month `months` after d's month."""
    idx = d.year * 12 + d.month - 1 + months
    y, m = divmod(idx, 12)
    return dt.date(y, m + 1, calendar.monthrange(y, m + 1)[1])


def calendar_plausible(year: int, quarter: int, call_date: dt.date) -> bool:
    """The calendar quarter ended before the call, at most MAX_LAG_DAYS earlier."""
    return 0 < (call_date - _quarter_end(year, quarter)).days <= MAX_LAG_DAYS


def fiscal_plausible(year: int, quarter: int, call_date: dt.date) -> bool:
    """Fiscal year Y ends between January Y and January Y+1 (retailers name it by its start),
    so its quarter q ends between 11 months before and 1 month after the calendar quarter
    end; the call comes after the earliest and within MAX_LAG_DAYS of the latest end."""
    end = _quarter_end(year, quarter)
    earliest, latest = _add_months(end, -11), _add_months(end, 1)
    return earliest < call_date and (call_date - latest).days <= MAX_LAG_DAYS


def fallback_period(call_date: dt.date) -> tuple[int, str]:
    """The calendar quarter before the call's calendar quarter: 2015-02-25 -> (2014, 'Q4')."""
    q = (call_date.month - 1) // 3 + 1
    return (call_date.year - 1, "Q4") if q == 1 else (call_date.year, f"Q{q - 1}")


def infer_year_for_quarter(quarter: int, call_date: dt.date) -> int:
    """Year of a stated quarter with no stated year.

    Calendar reading first (the calendar quarter ended shortly before the call). Otherwise a
    fiscal reading: the fiscal quarter ended at the last month end at least two weeks before
    the call, and the fiscal year is named after the calendar year in which it ends.
    """
    for year in (call_date.year, call_date.year - 1):
        if calendar_plausible(year, quarter, call_date):
            return year
    last_end = _add_months(call_date - dt.timedelta(days=14), -1)
    return _add_months(last_end, 3 * (4 - quarter)).year


def _candidates(sentence: str):
    """(start, quarter, year, fiscal, framing) for every quarter+year mention in sentence."""
    out = []
    for m in _ENDED.finditer(sentence):
        mon = _MONTHS.get(m.group("mon").lower())
        if not mon:
            continue
        q, ey = _quarter_of(m), int(m.group("ey"))
        if m.group("day") and int(m.group("day")) <= 7:  # 52/53-week years: Apr 2 ~ Mar 31
            ey, mon = (ey - 1, 12) if mon == 1 else (ey, mon - 1)
        if mon == 3 * q:
            year = ey
        else:  # fiscal quarter ending in an off month: name the year after the fiscal year end
            fye = _add_months(dt.date(ey, mon, 1), 3 * (4 - q))
            if fye.month in (1, 2):
                continue  # retail years ending Jan/Feb are named after either end: ambiguous
            year = fye.year
        out.append((m.start(), q, year, True, False))
    for n, pat in enumerate(_PATTERNS, start=1):
        for m in pat.finditer(sentence):
            q = _quarter_of(m)
            year, fiscal = _year_of(m, n)
            fiscal = fiscal or n == 3 or any(
                m.groupdict().get(k) for k in (f"fis{n}", f"fis_after{n}", f"fis_mid{n}"))
            framing = bool(re.match(_FRAME_AFTER, sentence[m.end():], re.I))
            out.append((m.start(), q, year, fiscal, framing))
    out.sort(key=lambda c: c[0])
    return out


def parse_call_period(lines: list[str], call_date: dt.date):
    """Return (year, 'Qn', how) with how in {'stated', 'quarter_only'}, or None.

    1. Collect the "quarter + year" mentions of the opening lines that a call on call_date
       could be reporting: the calendar quarter ended shortly before the call, or a fiscal
       quarter that can have ended shortly before it -- the latter only when the text
       says fiscal/FY, or frames the call in its first lines ("welcome to our Q1 2016
       call"), and the sentence neither looks ahead (guidance) nor back (an earlier call).
       The latest period wins: the other mentions compare with earlier periods.
    2. Otherwise a phrase that frames the call with a quarter but no year ("welcome to our
       third quarter call"); the year is inferred from the call date.
    """
    found = []
    for i, sentence in enumerate(lines[:OPENING_LINES]):
        future = bool(_FUTURE.search(sentence))
        past = bool(_PAST_REF.search(sentence))
        for start, q, year, fiscal, framing in _candidates(sentence):
            if calendar_plausible(year, q, call_date):
                found.append((year, q))
                continue
            framing = framing and not past and i < OPENING_LINES_FRAMING
            if (fiscal or framing) and not future and fiscal_plausible(year, q, call_date):
                found.append((year, q))
    if found:
        year, q = max(found)
        return year, f"Q{q}", "stated"
    for sentence in lines[:OPENING_LINES_FRAMING]:
        if _FUTURE.search(sentence) or _PAST_REF.search(sentence):
            continue
        for pat in _QONLY_FRAMES:
            m = pat.search(sentence)
            if m:
                q = _quarter_of(m)
                return infer_year_for_quarter(q, call_date), f"Q{q}", "quarter_only"
    return None


def selftest() -> None:
    d = dt.date.fromisoformat

    def check(text, date, expected):
        got = parse_call_period(text.split("\n"), d(date))
        got = got[:2] if got else None
        assert got == expected, f"{text!r} @ {date}: got {got}, expected {expected}"

    check("Good afternoon and thank you for joining us on our Q4 2014 conference call.",
          "2015-02-25", (2014, "Q4"))
    check("Welcome to the fourth quarter and full year 2014 earnings call.", "2015-02-10",
          (2014, "Q4"))
    check("Thanks, and welcome to our Q3 fiscal 2016 results.", "2016-08-20", (2016, "Q3"))
    check("as we summarize our results for the second quarter of fiscal year 2017.",
          "2017-01-23", (2017, "Q2"))
    check("We reported first-quarter 2015 results this morning.", "2015-04-28", (2015, "Q1"))
    check("And thank you all for joining us to discuss Olympic Steel's 2016 first quarter "
          "results.", "2016-04-29", (2016, "Q1"))
    check("Welcome to Cubic's second quarter fiscal 2018 earnings call.", "2018-05-02",
          (2018, "Q2"))
    check("Net income for the third quarter ended September 30, 2016 was $12 million.",
          "2016-11-03", (2016, "Q3"))
    check("Net sales for the fourth quarter ended January 2, 2016 rose 3%.", "2016-02-10",
          (2015, "Q4"))  # 52/53-week year ending near December 31
    check("Net sales for the second quarter ended December 31, 2016 rose 3%.", "2017-01-26",
          (2017, "Q2"))  # fiscal year ending in June
    check("We are starting fiscal 2018 third quarter with a higher backlog.", "2017-11-21", None)
    check("Revenue for the fiscal third quarter 2016 was up 4%.", "2016-08-09", (2016, "Q3"))
    check("This is our 4Q14 call.", "2015-01-29", (2014, "Q4"))
    check("Good afternoon, everyone, and welcome to Helen of Troy's fourth-quarter and FY15 "
          "earnings conference call.", "2015-04-28", (2015, "Q4"))
    check("Welcome to the FY16 Q2 call.", "2016-02-01", (2016, "Q2"))
    # look-ahead and comparison mentions are not the period discussed
    check("We look forward to speaking with you again when we report our FY16 third-quarter "
          "results later this year.", "2015-10-01", None)
    check("Our guidance for the first quarter of 2015 is $1.10.", "2015-02-05", None)
    check("Thank you for joining us as we discuss our results for the first quarter of 2015 "
          "and our outlook for the second quarter.", "2015-05-07", (2015, "Q1"))
    check("For the fourth quarter of 2017.", "2017-02-14", None)  # future: implausible
    check("On our fourth quarter 2015 call we outlined three priorities.", "2016-05-04", None)
    # comparisons name earlier periods: the latest plausible one is the period discussed
    check("Spot prices were consistent with the 2017 first quarter.\n"
          "Coastal revenue was 2/3 of marine revenue during the 2017 second quarter.",
          "2017-07-27", (2017, "Q2"))
    check("If you look at prior to Q2 of 2016, revenue per procedure was flat.", "2016-10-18",
          None)  # ended 110 days before the call: a back reference, not the period reported
    # quarter without a year: framing statements only, year from the call date
    check("Well, good afternoon and welcome to Resources' second quarter call.", "2016-01-06",
          (2016, "Q2"))
    check("I am pleased with our second quarter performance.", "2016-08-03", (2016, "Q2"))
    check("Good morning, and thank you for joining Invesco Mortgage Capital's fourth quarter "
          "earnings call.", "2018-02-21", (2017, "Q4"))
    check("We are very pleased to report an excellent first quarter.", "2016-05-11", (2016, "Q1"))
    check("The Street had been given detailed information via our second quarter call.",
          "2015-11-24", None)
    check("We saw strong demand in the quarter.", "2016-08-03", None)
    check("So you may recall on our third-quarter call, we talked about it.", "2017-02-09", None)
    check("Thank you for joining us for our third quarter investor call.", "2016-08-09",
          (2016, "Q3"))  # fiscal year ends in October: calendar Q3 2015 is too old
    assert fallback_period(d("2015-02-25")) == (2014, "Q4")
    assert fallback_period(d("2016-08-03")) == (2016, "Q2")
    assert fallback_period(d("2016-12-01")) == (2016, "Q3")
    # segmenter: paragraphs of a few sentences, nothing lost, no empty segments
    sents = [f"Sentence number {i} has exactly seven words." for i in range(40)] + [""]
    segs = paragraphs(sents)
    assert " ".join(segs).split() == " ".join(s for s in sents if s).split()
    assert all(3 <= s.count("Sentence number") <= 6 for s in segs), segs
    assert parse_long_date("DECEMBER 31, 2024") == "2024-12-31"
    assert item_label("Part II Item 1A") == "Part II, Item 1A"
    print("selftest ok")


# ---------------------------------------------------------------------------------------
# Earnings calls
# ---------------------------------------------------------------------------------------

MIN_WORDS, TARGET_WORDS, MAX_WORDS = 60, 120, 150
MIN_SENTS, MAX_SENTS = 3, 6


def paragraphs(sentences: list[str]) -> list[str]:
    """Group consecutive sentences into readable paragraphs (~3-6 sentences, 60-120 words).

    A paragraph closes once it has >= MIN_SENTS sentences and >= MIN_WORDS words, or
    reaches TARGET_WORDS words, or MAX_SENTS sentences with >= 40 words; a sentence that
    would push it past MAX_WORDS starts a new one. A short tail joins the previous one.
    """
    segs: list[list[str]] = []
    cur: list[str] = []
    words = 0
    for s in sentences:
        s = " ".join(s.split())
        if not s:
            continue
        w = len(s.split())
        if cur and words >= 40 and words + w > MAX_WORDS:
            segs.append(cur)
            cur, words = [], 0
        cur.append(s)
        words += w
        if ((len(cur) >= MIN_SENTS and words >= MIN_WORDS) or words >= TARGET_WORDS
                or (len(cur) >= MAX_SENTS and words >= 40) or len(cur) >= 12):
            segs.append(cur)
            cur, words = [], 0
    if cur:
        if segs and words < 25 and sum(len(x.split()) for x in segs[-1]) + words <= MAX_WORDS:
            segs[-1].extend(cur)
        else:
            segs.append(cur)
    return [" ".join(p) for p in segs]


_OPENING = re.compile(r"good\s+(?:morning|afternoon|evening|day)|welcome|joining\s+us|"
                      r"thanks?(?:\s+you)?,?\s+operator", re.I)


def starts_at_opening(text: str) -> bool:
    """Does the transcript start with the call's opening remarks (not mid-Q&A)?"""
    return any(_OPENING.search(line) for line in text.split("\n")[:3])


def select_calls(calls: list[dict], filing_tickers: set[str], total: int,
                 min_sentences: int, max_sentences: int) -> list[dict]:
    """All calls of filing tickers, then other calls spread over tickers up to `total`.

    Other calls must have min_sentences..max_sentences sentences: MAEC has many short
    fragments, and the longest calls would blow the size budget (a few MB). They are
    ranked by (rank inside their ticker, not starting at the opening, sha256(call_id)),
    with ticker-internal ranks by (not starting at the opening, sha256): first one call
    per ticker, then a second, ...; transcripts that include the opening remarks come
    first (more readable, and they state the period). Deterministic, independent of
    input order.
    """
    chosen = [c for c in calls if c["ticker"] in filing_tickers]
    by_ticker: dict[str, list[tuple]] = defaultdict(list)
    for c in calls:
        if (c["ticker"] not in filing_tickers
                and min_sentences <= c["n_sentences"] <= max_sentences):
            key = (not starts_at_opening(c["text"]),
                   hashlib.sha256(c["call_id"].encode()).hexdigest())
            by_ticker[c["ticker"]].append((key, c))
    ranked = []
    for lst in by_ticker.values():
        lst.sort(key=lambda kc: kc[0])
        ranked.extend(((i, *key), c) for i, (key, c) in enumerate(lst))
    ranked.sort(key=lambda kc: kc[0])
    chosen.extend(c for _, c in ranked[: max(0, total - len(chosen))])
    return chosen


def build_call_documents(shared: Path, filing_tickers: set[str], total: int,
                         min_sentences: int, max_sentences: int, stats: Counter) -> list[dict]:
    path = shared / "earnings_calls_maec" / "calls.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        calls = [json.loads(line) for line in f if line.strip()]
    stats["calls_in_source"] = len(calls)
    keys = [(c["ticker"], c["call_date"]) for c in calls]
    assert len(set(keys)) == len(keys), "duplicate (ticker, call_date)"
    chosen = select_calls(calls, filing_tickers, total, min_sentences, max_sentences)
    stats["calls_of_filing_tickers"] = sum(c["ticker"] in filing_tickers for c in chosen)
    docs = []
    for c in chosen:
        call_date = dt.date.fromisoformat(c["call_date"])
        lines = [ln.strip() for ln in c["text"].split("\n")]
        lines = [ln for ln in lines if ln]
        parsed = parse_call_period(lines, call_date)
        if parsed:
            year, quarter, how = parsed
            stats[f"call_period_{how}"] += 1
        else:
            year, quarter = fallback_period(call_date)
            stats["call_period_fallback"] += 1
        if starts_at_opening(c["text"]):
            stats["calls_with_opening"] += 1
            stats["calls_with_opening_parsed"] += parsed is not None
        fb = fallback_period(call_date)
        if parsed and (year, quarter) != fb:
            stats["call_period_differs_from_fallback"] += 1
        segments = paragraphs(lines)
        if not segments:
            stats["calls_skipped_empty"] += 1
            continue
        docs.append(
            {
                "documentId": f"call-{c['ticker']}-{c['call_date']}",
                "title": f"{c['ticker']} earnings call {c['call_date']} ({quarter} {year})",
                "documentType": "earnings_call",
                "ticker": c["ticker"],
                "year": year,
                "quarter": quarter,
                "filingType": "earnings_call",
                "sourceUrl": None,
                "publishedAt": c["call_date"],
                "segments": segments,
                "_sort": (c["ticker"], c["call_date"]),
            }
        )
    return docs


# ---------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------

LICENSE_MD = """\
# Sextant demo corpus: sources and licences

`documents.jsonl.gz` is derived from two public data sets by
`scripts/data/build_demo_corpus.py`. It is not the project's own work; the terms below apply.

## SEC filings (`documentType` `10-K` / `10-Q`)

{n_filings} 10-K and 10-Q annual/quarterly reports (fiscal years {fy_min}-{fy_max}) of
{n_filing_tickers} US companies, split into Item sections and ~300-word passages. Source:
SEC EDGAR filings as kept in the test fixtures of the GitHub project `dgunning/edgartools`. SEC
EDGAR filings are public information published by the U.S. Securities and Exchange
Commission; the text is reproduced unchanged except for grouping and whitespace trimming.

## Earnings-call transcripts (`documentType` `earnings_call`)

{n_calls} earnings-conference-call transcripts (2015-2018, S&P 1500 companies) from MAEC,
*A Multimodal Aligned Earnings Conference Call Dataset for Financial Risk Prediction*
(Li et al., CIKM 2020), GitHub `Earnings-Call-Dataset/MAEC`, licensed under the
**Creative Commons Attribution-ShareAlike 4.0 International licence (CC BY-SA 4.0)**,
<https://creativecommons.org/licenses/by-sa/4.0/>. Speaker names are anonymised as
`<UNK>` in the source. Changes made here: a selection of calls, sentences grouped into
paragraphs, and a fiscal period parsed from the opening lines (or estimated from the call
date). The MAEC transcripts are partial in places (some calls are short fragments).

The call-derived part of this corpus is an adaptation of MAEC and is therefore
distributed under CC BY-SA 4.0 as well: credit MAEC, indicate changes, and share
adaptations under the same licence.
"""


def write_gzip_jsonl(path: Path, docs: list[dict]) -> None:
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
        for d in docs:
            gz.write(json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
            gz.write(b"\n")
    path.write_bytes(raw.getvalue())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shared", nargs="?", type=Path, default=DEFAULT_SHARED,
                    help="shared data dir (default: <repo>/../shared/data)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output dir (data/demo)")
    ap.add_argument("--calls", type=int, default=1500, help="total calls to include")
    ap.add_argument("--min-sentences", type=int, default=40,
                    help="minimum sentences of a call outside the filing tickers")
    ap.add_argument("--max-sentences", type=int, default=150,
                    help="maximum sentences of a call outside the filing tickers (size budget)")
    ap.add_argument("--selftest", action="store_true", help="run the parser self-check")
    args = ap.parse_args()
    if args.selftest:
        selftest()
        return 0

    stats: Counter = Counter()
    filing_docs, filing_tickers = build_filing_documents(args.shared, stats)
    call_docs = build_call_documents(args.shared, filing_tickers, args.calls,
                                     args.min_sentences, args.max_sentences, stats)
    filing_docs.sort(key=lambda d: d["_sort"])
    call_docs.sort(key=lambda d: d["_sort"])
    docs = filing_docs + call_docs
    for d in docs:
        del d["_sort"]
    ids = [d["documentId"] for d in docs]
    assert len(set(ids)) == len(ids), "duplicate documentId"

    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "documents.jsonl.gz"
    write_gzip_jsonl(out, docs)
    (args.out / "LICENSE.md").write_text(
        LICENSE_MD.format(
            n_filings=len({(d["ticker"], d["filingType"], d["year"], d["quarter"])
                           for d in filing_docs}),
            fy_min=min(d["year"] for d in filing_docs), fy_max=max(d["year"] for d in filing_docs),
            n_filing_tickers=len(filing_tickers), n_calls=len(call_docs)),
        encoding="utf-8")

    n_calls = len(call_docs)
    print("earnings-call periods:")
    for how in ("stated", "quarter_only", "fallback"):
        n = stats[f"call_period_{how}"]
        print(f"  {how:13s} {n:5d}  ({100.0 * n / max(1, n_calls):.1f}%)")
    print(f"  parsed period differs from the date fallback: "
          f"{stats['call_period_differs_from_fallback']} (fiscal years not on the calendar)")
    print(f"  transcripts that include the opening remarks: {stats['calls_with_opening']}, "
          f"period parsed in {stats['calls_with_opening_parsed']}; the others start mid-call")
    print(f"calls: {n_calls} of {stats['calls_in_source']} "
          f"({stats['calls_of_filing_tickers']} of filing tickers, "
          f"{len({d['ticker'] for d in call_docs})} tickers)")
    print(f"filings: {stats['filing_passages']} passages of {len(filing_tickers)} tickers; "
          f"publishedAt from period_end (no filing_date): "
          f"{stats['filing_docs_date_from_period_end']} docs; titles with the ticker "
          f"(no company name): {stats['filing_docs_without_company']} docs")
    print("documents by type:")
    by_type: dict[str, list[dict]] = defaultdict(list)
    for d in docs:
        by_type[d["documentType"]].append(d)
    tot_s = tot_w = 0
    for t in ("10-K", "10-Q", "earnings_call"):
        lst = by_type[t]
        s = sum(len(d["segments"]) for d in lst)
        w = sum(len(seg.split()) for d in lst for seg in d["segments"])
        tot_s += s
        tot_w += w
        print(f"  {t:14s} {len(lst):5d} docs {s:7d} segments {w:9d} words")
    print(f"  {'total':14s} {len(docs):5d} docs {tot_s:7d} segments {tot_w:9d} words")
    size = out.stat().st_size
    print(f"wrote {out} ({size:,} bytes, {size / 2**20:.2f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
