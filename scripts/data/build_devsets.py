#!/usr/bin/env python3
"""Builds three financial retrieval sets (BEIR layout) from `../shared/data`, for choosing
the fusion default on more than SciFact and TAT-QA. Deterministic: the same data gives the
same files. Each set has a `dev` split (for choosing), a `heldout` split (the same facts in
phrasings no dev question uses) and a `test` split (other companies, reported only).

fin-filings: questions about a reported figure, over the 4,390 ~300-word passages of 38
  10-K/10-Q filings (`sec_filings_sections`, titled with the company's name in front of the
  ticker, form, period and section). A question is made from one consolidated
  XBRL fact of that filing (`xbrl_facts/facts_ixbrl_10k10q_2024_2025.jsonl.gz`): a
  well-known concept (capital expenditure, net income, total assets, ...) for the filing's
  own period (or a 10-K's prior fiscal year). Relevant: every passage OF THAT FILING whose
  text shows the figure as the filing prints it (the value at the fact's `decimals`, with
  thousands separators, as a whole number). Facts whose figure is in no passage, or in more
  than four of the filing's passages, are skipped (not answerable, or not a defensible
  judgement).

fin-calls: questions about a figure management gave, over earnings-call transcripts
  (`earnings_calls_maec`, 600 calls drawn with a fixed seed, cut into passages of eight
  sentences, titled "TICKER earnings call, Month D, YYYY"). A question is made from one
  sentence of a call that states a known metric (revenue, EBITDA, EPS, ...) with a figure
  ("$18.7 million", "15%"). Relevant: every passage of that call holding a sentence with
  the same metric and the same figure.

fin-ratios: questions over fin-filings' passages (the same corpus and index, as its splits
  `ratios-dev` and `ratios-test`) whose answer an analyst computes from two or three of a
  filing's reported figures, in the long, definition-laden wording of FinanceBench ("What
  is the FY2024 fixed asset turnover ratio for Home Depot, Inc.? Fixed asset turnover
  ratio is defined as: total revenue divided by property, plant and equipment, net. Round
  your answer to two decimal places. Base your judgments on the information provided
  primarily in the income statement and the balance sheet."). Relevant: every passage of
  that filing printing one of the figures, each found as for fin-filings (one to four
  passages). At most six questions per filing, one per measure.

Questions are phrased by several templates, from a bare question to the long
instruction-laden wording analysts use with assistants ("You are an equity analyst. Using
the cash flow statement, ..."), so that a fusion chosen on these sets has seen both.

Splits, so that a choice made on dev says something about questions nobody tuned on:
  - By company. The companies (tickers) are split in halves by a hash of the ticker; every
    filing or call of a company, and so every question and relevant passage of it, is in
    one half. No filing, call or relevant passage is in both.
  - By phrasing. Some templates (`*_HELDOUT`: two that earlier releases saw, two new ones)
    phrase no dev question. Each fact of a dev company becomes two questions: one in a dev
    phrasing (split `dev`) and one in a held-out phrasing (split `heldout`), with the same
    relevant passages, so the two splits differ only in wording. A test company's fact
    becomes one question in any phrasing (split `test`).
  Choose on `dev`; check that a rule reading the question's wording holds on `heldout`;
  only report `test`.

CI's corpora, so that CI encodes half as much (its tests assert the default's properties on
dev splits only; docs/quality.md's figures use the full sets):
  - fin-calls-dev: the dev companies' passages only, with every split but the test ones (a
    dev question's relevant passages are all its own company's). fin-filings has none: over
    its dev companies' filings alone the default fell below plain RRF of all three on
    fin-ratios dev (0.4417 against 0.4509), where over every filing it is above, so CI
    keeps that corpus whole.
  - scifact-half: the SciFact abstracts whose id hashes to an even first byte, and the
    train and test claims whose every cited abstract is among them.

    python3 scripts/data/build_devsets.py [--data ../shared/data] [--out DIR]

DIR defaults to $SEXTANT_CACHE_DIR/devsets (else ~/.cache/sextant/devsets).
"""
import argparse
import datetime as dt
import gzip
import hashlib
import json
import os
import random
import re
from collections import defaultdict

# concept -> (label, statement); the statement names where an analyst would look.
CONCEPTS = {
    "Revenues": ("total revenue", "income statement"),
    "RevenueFromContractWithCustomerExcludingAssessedTax": ("revenue", "income statement"),
    "CostOfRevenue": ("cost of revenue", "income statement"),
    "CostOfGoodsAndServicesSold": ("cost of sales", "income statement"),
    "GrossProfit": ("gross profit", "income statement"),
    "ResearchAndDevelopmentExpense": ("research and development expense", "income statement"),
    "SellingGeneralAndAdministrativeExpense": ("selling, general and administrative expense", "income statement"),
    "OperatingIncomeLoss": ("operating income", "income statement"),
    "IncomeTaxExpenseBenefit": ("provision for income taxes", "income statement"),
    "NetIncomeLoss": ("net income", "income statement"),
    "InterestExpenseNonoperating": ("interest expense", "income statement"),
    "NetCashProvidedByUsedInOperatingActivities": ("cash generated by operating activities", "cash flow statement"),
    "NetCashProvidedByUsedInInvestingActivities": ("net cash used in investing activities", "cash flow statement"),
    "NetCashProvidedByUsedInFinancingActivities": ("net cash used in financing activities", "cash flow statement"),
    "PaymentsToAcquirePropertyPlantAndEquipment": ("capital expenditure", "cash flow statement"),
    "PaymentsForRepurchaseOfCommonStock": ("share repurchases", "cash flow statement"),
    "PaymentsOfDividends": ("dividends paid", "cash flow statement"),
    "DepreciationDepletionAndAmortization": ("depreciation and amortization", "cash flow statement"),
    "ShareBasedCompensation": ("stock-based compensation expense", "cash flow statement"),
    "Assets": ("total assets", "balance sheet"),
    "AssetsCurrent": ("total current assets", "balance sheet"),
    "LiabilitiesCurrent": ("total current liabilities", "balance sheet"),
    "StockholdersEquity": ("total shareholders' equity", "balance sheet"),
    "CashAndCashEquivalentsAtCarryingValue": ("cash and cash equivalents", "balance sheet"),
    "LongTermDebtNoncurrent": ("long-term debt", "balance sheet"),
    "InventoryNet": ("inventories", "balance sheet"),
    "AccountsReceivableNetCurrent": ("accounts receivable", "balance sheet"),
    "AccountsPayableCurrent": ("accounts payable", "balance sheet"),
    "Goodwill": ("goodwill", "balance sheet"),
    "PropertyPlantAndEquipmentNet": ("property, plant and equipment, net", "balance sheet"),
    "RetainedEarningsAccumulatedDeficit": ("retained earnings", "balance sheet"),
}

FILING_TEMPLATES = [
    "You are an equity analyst. Using the {statement}, what was {company}'s {label} {period}, in USD {scale}?",
    "You are a financial analyst building a valuation model. From {company}'s {form}, report the {label} {period}. Answer in USD {scale} and cite the filing.",
    "What was {company}'s {label} {period}?",
    "{company} {label} {period}",
]
# Phrasings no dev question uses (the split `heldout`): two that earlier releases were tuned
# with, and two written for this split that no fusion was ever chosen on.
FILING_HELDOUT = [
    "Acting as a credit analyst reviewing {company}'s {form}, find the {label} reported {period} on the {statement}.",
    "Please answer using only the company's SEC filings. How much was {company}'s {label} {period}? Give the figure in {scale} of dollars.",
    "I'm putting together a comparison table and need one number: {company}, {label}, {period}. Where in the {form} is it and what does it say?",
    "How much {label} did {company} report {period}? Quote the line from the {statement}.",
]

CALL_TEMPLATES = [
    "You are an equity analyst. Based on {ticker}'s earnings call of {date}, what was the company's {label}?",
    "What {label} did {ticker} report on its {date} earnings call?",
    "{ticker} {label} earnings call {date}",
]
CALL_HELDOUT = [
    "As a buy-side analyst preparing a note, summarise what {ticker} management said about {label} on the {date} call, with the figure.",
    "Using only the earnings call transcript, how much was {ticker}'s {label} according to management on {date}?",
    "On the {date} call, did {ticker}'s management give a number for {label}? If so, what was it?",
    "Looking for the {label} figure {ticker} executives mentioned when they spoke to analysts on {date}.",
]

# Metric phrases looked for in call sentences (longest first, so "adjusted EBITDA" wins over "EBITDA").
CALL_METRICS = sorted(
    [
        "adjusted EBITDA", "EBITDA", "net revenue", "total revenue", "revenue", "net sales", "organic sales",
        "net income", "operating income", "gross margin", "operating margin", "free cash flow",
        "operating cash flow", "cash flow from operations", "capital expenditures", "backlog", "bookings",
        "same-store sales", "comparable sales", "diluted EPS", "adjusted EPS", "earnings per share",
    ],
    key=len,
    reverse=True,
)
FIGURE = r"\$?\d[\d,]*(?:\.\d+)?\s?(?:million|billion|%)"


def number_pattern(text):
    return re.compile(r"(?<![\d,.])" + re.escape(text) + r"(?![\d,]|\.\d)")


def printed(value, decimals):
    """The figure as a filing's table prints it: scaled by `decimals`, thousands separated."""
    try:
        d = int(decimals)
    except (TypeError, ValueError):
        return None, None
    scale = {-6: "millions", -3: "thousands"}.get(d)
    if scale is None:
        return None, None
    n = abs(float(value)) / 10 ** (-d)
    if n != int(n) or n < 1000:  # short numbers match too much text to judge by
        return None, None
    return f"{int(n):,}", scale


def parse_date(s):
    for fmt in ("%B %d, %Y", "%Y-%m-%d"):
        try:
            return dt.datetime.strptime(s.strip(), fmt).date()
        except ValueError:
            pass
    return None


def nice_company(name):
    if name.isupper():
        name = " ".join(w.capitalize() if len(w) > 3 else w for w in name.split())
    return name


def load_filings(data):
    """The passages of `sec_filings_sections` grouped by filing, and each filing's record."""
    passages = [json.loads(l) for l in open(os.path.join(data, "sec_filings_sections", "corpus.jsonl"))]
    by_filing = defaultdict(list)
    for p in passages:
        m = p["metadata"]
        by_filing[(m["ticker"], m["form"], str(m["fiscal_year"]), m["fiscal_period"])].append(p)
    filings = {(f["ticker"], f["form"], str(f["fiscal_year"]), f["fiscal_period"]): f
               for f in json.load(open(os.path.join(data, "sec_filings_sections", "filings.json")))}
    return passages, by_filing, filings


def filing_facts(data, by_filing, filings):
    """The consolidated facts of a well-known concept (`CONCEPTS`) that a filing reports for
    its own period (or, in a 10-K, its prior fiscal year), in file order, each as
    `(filing key, concept, figure as printed, scale, period end, the ways to say the
    period)`. A balance-sheet fact is the filing's period end; a flow is a 10-K's fiscal
    year or a 10-Q's quarter."""
    with gzip.open(os.path.join(data, "xbrl_facts", "facts_ixbrl_10k10q_2024_2025.jsonl.gz"), "rt") as f:
        for line in f:
            fact = json.loads(line)
            concept = fact["concept"].split(":")[-1]
            if fact["dims"] or concept not in CONCEPTS:
                continue
            key = (fact["ticker"], fact["form"], str(fact["fiscal_year"]), fact["fiscal_period"])
            if key not in by_filing or key not in filings:
                continue
            text, scale = printed(fact["value"], fact["decimals"])
            if text is None:
                continue
            end = parse_date(fact["end"])
            period_end = parse_date(filings[key]["period_end"])
            if end is None or period_end is None:
                continue
            if fact["instant"]:
                if end != period_end:
                    continue
                periods = [f"as of {end.strftime('%B')} {end.day}, {end.year}"]
            else:
                start = parse_date(fact["start"])
                days = (end - start).days
                if fact["form"] == "10-K" and 350 <= days <= 380:
                    fy = int(fact["fiscal_year"]) - (0 if end == period_end else 1)
                    if end != period_end and abs((period_end - end).days - 365) > 10:
                        continue
                    periods = [f"in fiscal {fy}", f"in FY{fy}", f"for fiscal year {fy}"]
                elif fact["form"] == "10-Q" and 80 <= days <= 100 and end == period_end:
                    periods = [f"for the quarter ended {end.strftime('%B')} {end.day}, {end.year}"]
                else:
                    continue
            yield key, concept, text, scale, end, periods


def passages_printing(passages, text):
    """The ids of the `passages` (one filing's) that print the figure `text`, or None when
    it is in none of them (not answerable) or in more than four (not a judgement worth
    defending)."""
    pattern = number_pattern(text)
    relevant = [p["_id"] for p in passages if pattern.search(p["text"])]
    return relevant if 1 <= len(relevant) <= 4 else None


def fin_filings(data, rng):
    passages, by_filing, filings = load_filings(data)
    seen = set()
    candidates = []
    for key, concept, text, scale, end, periods in filing_facts(data, by_filing, filings):
        period = rng.choice(periods) if len(periods) > 1 else periods[0]
        dedup = (key, concept, period.split()[-1], text)
        if dedup in seen:
            continue
        seen.add(dedup)
        relevant = passages_printing(by_filing[key], text)
        if relevant is None:
            continue
        label, statement = CONCEPTS[concept]
        candidates.append((key, concept, label, statement, period, scale, relevant))
    rng.shuffle(candidates)
    half = halves(k[0] for k in by_filing)
    # At most one question per filing and concept, eight per filing, so no table dominates.
    per = defaultdict(int)
    queries, qrels, splits = [], [], {}
    for key, concept, label, statement, period, scale, relevant in candidates:
        if per[(key, concept)] >= 1 or per[key] >= 8:
            continue
        per[(key, concept)] += 1
        per[key] += 1
        company = nice_company(filings[key]["company"])
        fields = dict(company=company, label=label, statement=statement, period=period, scale=scale, form=key[1])
        ask((queries, qrels, splits), "ff", half[key[0]], FILING_TEMPLATES, FILING_HELDOUT, rng, fields, relevant)
    # Titles name the company as well as the ticker, as a team's own filings would
    # ("Apple Inc. AAPL 10-K 2024 FY — Item 7: ..."): questions name companies, not tickers.
    corpus = [
        {"_id": p["_id"], "title": f"{nice_company(p['metadata']['company'])} {p['title']}", "text": p["text"],
         "metadata": p["metadata"]}
        for p in passages
    ]
    return corpus, queries, qrels, splits


def halves(companies):
    """`dev` or `test` for each company: the companies sorted by a hash of their ticker,
    alternately. A company's filings (or calls) are all in one half, so no filing, call or
    company is in both, and no dev question shares a passage with a test question."""
    ranked = sorted(set(companies), key=lambda t: hashlib.sha1(t.encode()).hexdigest())
    return {t: ("dev" if i % 2 == 0 else "test") for i, t in enumerate(ranked)}


def ask(asked, prefix, half, seen, heldout, rng, fields, relevant):
    """Adds the questions one fact becomes to `asked` (queries, qrels, splits), with ids
    `prefix` + a hash of the text: in a dev company, one in a dev phrasing (`dev`) and the
    same fact in a held-out phrasing (`heldout`), so that the two splits differ only in
    wording; in a test company, one question in any phrasing (`test`)."""
    queries, qrels, splits = asked
    chosen = [("dev", rng.choice(seen)), ("heldout", rng.choice(heldout))] if half == "dev" else \
        [("test", rng.choice(seen + heldout))]
    for split, template in chosen:
        q = template.format(**fields)
        qid = prefix + hashlib.sha1(q.encode()).hexdigest()[:10]
        queries.append({"_id": qid, "text": q})
        qrels.extend((qid, r) for r in relevant)
        splits[qid] = split


REVENUE = ["Revenues", "RevenueFromContractWithCustomerExcludingAssessedTax"]
COST_OF_SALES = ["CostOfRevenue", "CostOfGoodsAndServicesSold"]

# Measures an analyst computes from two or three reported figures, in FinanceBench's manner:
# (name, components as lists of alternative concepts, definition, statements, answer unit).
RATIOS = [
    ("gross margin", [["GrossProfit"], REVENUE], "gross profit divided by total revenue", "income statement", "%"),
    ("operating margin", [["OperatingIncomeLoss"], REVENUE], "operating income divided by total revenue",
     "income statement", "%"),
    ("net profit margin", [["NetIncomeLoss"], REVENUE], "net income divided by total revenue", "income statement", "%"),
    ("R&D intensity", [["ResearchAndDevelopmentExpense"], REVENUE],
     "research and development expense divided by total revenue", "income statement", "%"),
    ("SG&A to revenue ratio", [["SellingGeneralAndAdministrativeExpense"], REVENUE],
     "selling, general and administrative expense divided by total revenue", "income statement", "%"),
    ("capital expenditure to revenue ratio", [["PaymentsToAcquirePropertyPlantAndEquipment"], REVENUE],
     "capital expenditure (purchases of property, plant and equipment) divided by total revenue",
     "cash flow statement and the income statement", "%"),
    ("free cash flow", [["NetCashProvidedByUsedInOperatingActivities"], ["PaymentsToAcquirePropertyPlantAndEquipment"]],
     "cash from operations minus capital expenditure", "cash flow statement", "$"),
    ("current ratio", [["AssetsCurrent"], ["LiabilitiesCurrent"]],
     "total current assets divided by total current liabilities", "balance sheet", "x"),
    ("quick ratio", [["AssetsCurrent"], ["InventoryNet"], ["LiabilitiesCurrent"]],
     "(total current assets minus inventories) divided by total current liabilities", "balance sheet", "x"),
    ("dividend payout ratio", [["PaymentsOfDividends"], ["NetIncomeLoss"]],
     "cash dividends paid divided by net income", "cash flow statement and the income statement", "%"),
    ("return on assets", [["NetIncomeLoss"], ["Assets"]], "net income divided by total assets",
     "income statement and the balance sheet", "%"),
    ("fixed asset turnover ratio", [REVENUE, ["PropertyPlantAndEquipmentNet"]],
     "total revenue divided by property, plant and equipment, net", "income statement and the balance sheet", "x"),
    ("cash conversion ratio", [["NetCashProvidedByUsedInOperatingActivities"], ["NetIncomeLoss"]],
     "cash from operations divided by net income", "cash flow statement and the income statement", "x"),
    ("inventory turnover ratio", [COST_OF_SALES, ["InventoryNet"]], "cost of sales divided by inventories",
     "income statement and the balance sheet", "x"),
    ("cash returned to shareholders", [["PaymentsForRepurchaseOfCommonStock"], ["PaymentsOfDividends"]],
     "share repurchases plus dividends paid", "cash flow statement", "$"),
]

RATIO_TEMPLATES = [
    "{what}? {Ratio} is defined as: {definition}. {round} Base your judgments on the information provided "
    "primarily in the {statements}.",
    "You are an equity analyst. Using the {statements}, calculate {company}'s {ratio} {period}, where {ratio} "
    "is {definition}. {round}",
    "{company} {ratio} {period}",
]
RATIO_HELDOUT = [
    "Acting as a credit analyst reviewing {company}'s {form}, compute the {ratio} {period} ({definition}) and "
    "state the reported figures you used.",
    "Please answer using only the company's SEC filings. What was {company}'s {ratio} {period}? Use {definition}.",
    "I need {company}'s {ratio} {period} for a peer comparison. Take {definition}, show both inputs as reported, "
    "and {round_lower}",
    "Compute {ratio} ({definition}) for {company}, {period}, from the {statements}.",
]
ROUNDING = {
    "%": "Answer as a percentage rounded to one decimal place.",
    "x": "Round your answer to two decimal places.",
    "$": "Answer in USD {scale}.",
}


def fin_ratios(data, rng):
    """Questions over fin-filings' passages whose answer is computed from two or three of a
    filing's reported figures ("What is Apple Inc.'s FY2024 operating margin? Operating
    margin is defined as: ..."): the long, definition-laden style of question that dilutes
    the lexical paths. Relevant: every passage of that filing that prints one of the
    figures, each figure found in one to four of the filing's passages (as in fin-filings).
    All figures of a question share the period end; the question says the flow's period
    where there is one."""
    _, by_filing, filings = load_filings(data)
    facts = {}  # (filing, concept, end) -> (figure, scale, periods, passages); None: ambiguous
    for key, concept, text, scale, end, periods in filing_facts(data, by_filing, filings):
        k = (key, concept, end)
        if k in facts:
            if facts[k] is not None and facts[k][0] != text:
                facts[k] = None
            continue
        relevant = passages_printing(by_filing[key], text)
        facts[k] = None if relevant is None else (text, scale, periods, relevant)
    ends = sorted({(key, end) for key, _, end in facts})
    candidates = []
    for key, end in ends:
        for name, components, definition, statements, unit in RATIOS:
            found = []
            for alternatives in components:
                f = next((facts[(key, c, end)] for c in alternatives if facts.get((key, c, end))), None)
                if f is None:
                    break
                found.append(f)
            if len(found) != len(components):
                continue
            flows = [f[2] for f in found if len(f[2]) > 1 or not f[2][0].startswith("as of")]
            periods = flows[0] if flows else found[0][2]
            relevant = sorted({p for f in found for p in f[3]})
            candidates.append((key, name, definition, statements, unit, found[0][1], periods, relevant))
    rng.shuffle(candidates)
    half = halves(k[0] for k in by_filing)
    per = defaultdict(int)
    queries, qrels, splits = [], [], {}
    for key, name, definition, statements, unit, scale, periods, relevant in candidates:
        if per[(key, name)] >= 1 or per[key] >= 6:
            continue
        per[(key, name)] += 1
        per[key] += 1
        period = rng.choice(periods)
        company = nice_company(filings[key]["company"])
        fy = next((p[3:] for p in periods if p.startswith("in FY")), None)
        # FinanceBench's own order where the period is a fiscal year: "What is the FY2019 ... for 3M".
        what = f"What is the {fy} {name} for {company}" if fy else f"What is {company}'s {name} {period}"
        rounding = ROUNDING[unit].format(scale=scale)
        fields = dict(
            company=company, ratio=name, Ratio=name[0].upper() + name[1:], what=what, definition=definition,
            statements=statements, period=period, round=rounding, round_lower=rounding[0].lower() + rounding[1:],
            form=key[1],
        )
        ask((queries, qrels, splits), "fr", half[key[0]], RATIO_TEMPLATES, RATIO_HELDOUT, rng, fields, relevant)
    return queries, qrels, splits


def fin_calls(data, rng, calls_wanted=600, window=8):
    calls = [json.loads(l) for l in gzip.open(os.path.join(data, "earnings_calls_maec", "calls.jsonl.gz"), "rt")]
    calls.sort(key=lambda c: c["call_id"])
    rng.shuffle(calls)
    calls = sorted(calls[:calls_wanted], key=lambda c: c["call_id"])
    metric_re = re.compile(
        r"\b(" + "|".join(re.escape(m) for m in CALL_METRICS) + r")\b[^.;]{0,60}?\b(?:of|was|were|at|to|totaled|reached)\s+(" + FIGURE + ")",
        re.IGNORECASE,
    )
    corpus, candidates = [], []
    for c in calls:
        d = parse_date(c["call_date"])
        date = f"{d.strftime('%B')} {d.day}, {d.year}"
        sentences = [s for s in c["text"].split("\n") if s.strip()]
        found = defaultdict(set)  # (metric, figure) -> passage ids
        for start in range(0, len(sentences), window):
            pid = f"{c['call_id']}_{start // window:03d}"
            chunk = sentences[start : start + window]
            corpus.append({
                "_id": pid,
                "title": f"{c['ticker']} earnings call, {date}",
                "text": "\n".join(chunk),
                "metadata": {"ticker": c["ticker"], "call_date": c["call_date"], "year": c["year"]},
            })
            for s in chunk:
                for m in metric_re.finditer(s):
                    metric = next(x for x in CALL_METRICS if x.lower() == m.group(1).lower())
                    found[(metric, m.group(2).lower().replace(" ", ""))].add(pid)
        for (metric, figure), pids in found.items():
            # One figure for one metric in the call: a question with one answer.
            if sum(1 for (mm, _) in found if mm == metric) == 1 and len(pids) <= 2:
                candidates.append((c["ticker"], date, metric, sorted(pids)))
    rng.shuffle(candidates)
    half = halves(c["ticker"] for c in calls)
    per_call = defaultdict(int)
    queries, qrels, splits = [], [], {}
    for ticker, date, metric, pids in candidates:
        if per_call[(ticker, date)] >= 2:
            continue
        per_call[(ticker, date)] += 1
        fields = dict(ticker=ticker, date=date, label=metric)
        ask((queries, qrels, splits), "fc", half[ticker], CALL_TEMPLATES, CALL_HELDOUT, rng, fields, pids)
    return corpus, queries, qrels, splits


def write(out, name, corpus, queries, qrels, splits):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "qrels"), exist_ok=True)
    with open(os.path.join(d, "corpus.jsonl"), "w") as f:
        for doc in corpus:
            f.write(json.dumps(doc) + "\n")
    with open(os.path.join(d, "queries.jsonl"), "w") as f:
        pass
    add_questions(d, "", queries, qrels, splits)
    print(f"{name}: {len(corpus)} passages, {counts(splits)}, {len(qrels)} qrels -> {d}")


def counts(splits):
    return ", ".join(f"{sum(1 for s in splits.values() if s == x)} {x}" for x in ("dev", "heldout", "test"))


def add_questions(d, prefix, queries, qrels, splits):
    """Appends `queries` to the set in `d` and writes their qrels by `splits` (question id to
    `dev`, `heldout` or `test`) as `qrels/{prefix}{split}.tsv`. A question written twice (two
    facts phrased alike) is kept once."""
    seen = set()
    with open(os.path.join(d, "queries.jsonl"), "a") as f:
        for q in queries:
            if q["_id"] not in seen:
                seen.add(q["_id"])
                f.write(json.dumps(q) + "\n")
    for split in ("dev", "heldout", "test"):
        if split not in splits.values():
            continue
        with open(os.path.join(d, "qrels", f"{prefix}{split}.tsv"), "w") as f:
            f.write("query-id\tcorpus-id\tscore\n")
            for qid, pid in sorted(set(qrels)):
                if splits[qid] == split:
                    f.write(f"{qid}\t{pid}\t1\n")


def dev_companies(corpus, queries, qrels, splits):
    """A set's corpus, questions, qrels and splits restricted to its dev companies (the half
    `halves` gives): their passages only, and every question but the test ones. A dev
    question's relevant passages are all its own company's (asserted), so its qrels are
    unchanged; what goes is the test companies' passages, which dev questions only meet as
    distractors. CI asserts the default's properties on this (half the encoding of the
    full set); the figures of docs/quality.md are measured on the full sets."""
    half = halves(d["metadata"]["ticker"] for d in corpus)
    kept = [d for d in corpus if half[d["metadata"]["ticker"]] == "dev"]
    ids = {d["_id"] for d in kept}
    asked = {qid for qid, split in splits.items() if split != "test"}
    for qid, pid in qrels:
        assert qid not in asked or pid in ids, f"{qid} is relevant to {pid}, a test company's passage"
    return (kept, [q for q in queries if q["_id"] in asked], [(q, p) for q, p in qrels if q in asked],
            {q: s for q, s in splits.items() if q in asked})


def scifact_half(data, out):
    """Writes `scifact-half` in `out`: the SciFact abstracts whose id hashes to an even
    first byte (about half, chosen without looking at any claim), and for each split
    (`train`, the one CI asserts on; `test`, which `sextant bench` draws its queries from)
    the claims whose every cited abstract is among them, with their qrels. The distractors
    are a random half of the corpus, as the relevant abstracts are, so a claim meets about
    as many of them per relevant abstract as in the full corpus. docs/quality.md's SciFact
    figures use the full set."""
    src, dst = os.path.join(data, "scifact"), os.path.join(out, "scifact-half")
    lines = open(os.path.join(src, "corpus.jsonl")).read().splitlines()
    kept = [l for l in lines if hashlib.sha1(json.loads(l)["_id"].encode()).digest()[0] % 2 == 0]
    ids = {json.loads(l)["_id"] for l in kept}
    os.makedirs(os.path.join(dst, "qrels"), exist_ok=True)
    with open(os.path.join(dst, "corpus.jsonl"), "w") as f:
        f.write("\n".join(kept) + "\n")
    claims, said = set(), []
    for split in ("train", "test"):
        cited = defaultdict(set)
        qrels = open(os.path.join(src, "qrels", f"{split}.tsv")).read().splitlines()
        for line in qrels[1:]:
            qid, pid, _ = line.split("\t")
            cited[qid].add(pid)
        asked = {q for q, pids in cited.items() if pids <= ids}
        claims |= asked
        with open(os.path.join(dst, "qrels", f"{split}.tsv"), "w") as f:
            f.write("\n".join([qrels[0]] + [l for l in qrels[1:] if l.split("\t")[0] in asked]) + "\n")
        said.append(f"{len(asked)} of {len(cited)} {split} claims")
    with open(os.path.join(src, "queries.jsonl")) as f, open(os.path.join(dst, "queries.jsonl"), "w") as g:
        g.writelines(l for l in f if json.loads(l)["_id"] in claims)
    print(f"scifact-half: {len(kept)} of {len(lines)} abstracts, {', '.join(said)} -> {dst}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "..", "shared", "data"))
    cache = os.environ.get("SEXTANT_CACHE_DIR", os.path.expanduser("~/.cache/sextant"))
    ap.add_argument("--out", default=os.path.join(cache, "devsets"))
    a = ap.parse_args()
    write(a.out, "fin-filings", *fin_filings(a.data, random.Random(17)))
    # fin-ratios: other questions over the same passages (one corpus, one index), as the
    # splits ratios-dev, ratios-heldout and ratios-test of fin-filings (the same companies
    # in each half as fin-filings').
    ratios, ratio_qrels, ratio_splits = fin_ratios(a.data, random.Random(21))
    add_questions(os.path.join(a.out, "fin-filings"), "ratios-", ratios, ratio_qrels, ratio_splits)
    print(f"fin-ratios: {counts(ratio_splits)}, {len(ratio_qrels)} qrels"
          " -> fin-filings, splits ratios-dev, ratios-heldout and ratios-test")
    calls = fin_calls(a.data, random.Random(19))
    write(a.out, "fin-calls", *calls)
    write(a.out, "fin-calls-dev", *dev_companies(*calls))
    scifact_half(a.data, a.out)

if __name__ == "__main__":
    main()
