"""Date-awareness: parse a date/month/year named in the question; boost turns of sessions in that window."""
import re
from datetime import UTC, datetime, timedelta

import numpy as np
from exp03_speaker import named_mask
from exp04_dense import dense
from exp10_fusion2 import maxnorm
from exp11_query import bm_q
from lab import evaluate_scores, fmt

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december"]
MON = "|".join(MONTHS)
P_DMY = re.compile(rf"\b(\d{{1,2}})\s+({MON}),?\s+(\d{{4}})\b", re.I)
P_MDY = re.compile(rf"\b({MON})\s+(\d{{1,2}}),?\s+(\d{{4}})\b", re.I)
P_MY = re.compile(rf"\b({MON}),?\s+(\d{{4}})\b", re.I)
P_M = re.compile(rf"\b(?:in|during|of|early|late|mid-?)\s+({MON})\b", re.I)
P_Y = re.compile(r"\b(?:in|during|of)\s+(20\d\d)\b", re.I)


def month_end(y, m):
    return datetime(y + (m == 12), m % 12 + 1, 1, tzinfo=UTC) - timedelta(seconds=1)


def windows(q):
    """List of (start, end) datetimes; month-only windows use year=None (match any year)."""
    if m := P_DMY.search(q):
        d = datetime(int(m[3]), MONTHS.index(m[2].lower()) + 1, int(m[1]), tzinfo=UTC)
        return [(d, d + timedelta(days=1))]
    if m := P_MDY.search(q):
        d = datetime(int(m[3]), MONTHS.index(m[1].lower()) + 1, int(m[2]), tzinfo=UTC)
        return [(d, d + timedelta(days=1))]
    if m := P_MY.search(q):
        y, mo = int(m[2]), MONTHS.index(m[1].lower()) + 1
        return [(datetime(y, mo, 1, tzinfo=UTC), month_end(y, mo))]
    if m := P_M.search(q):
        mo = MONTHS.index(m[1].lower()) + 1
        return [(None, mo)]
    if m := P_Y.search(q):
        y = int(m[1])
        return [(datetime(y, 1, 1, tzinfo=UTC), datetime(y, 12, 31, 23, 59, tzinfo=UTC))]
    return []


def date_mask(c, slack_days=10):
    out = np.zeros((len(c.questions), len(c.turns)), dtype=np.float32)
    dates = [t.date for t in c.turns]
    for qi, q in enumerate(c.questions):
        for a, b in windows(q.question):
            for i, d in enumerate(dates):
                if a is None:
                    ok = d.month == b or (d - timedelta(days=slack_days)).month == b
                else:
                    ok = a <= d <= b + timedelta(days=slack_days)
                if ok:
                    out[qi, i] = 1
    return out


def final(c, gamma, slack=10, beta=0.3):
    return 0.5 * maxnorm(bm_q(c, "base")) + 0.5 * dense(c, "ctx1_1") + beta * named_mask(c) + gamma * date_mask(c, slack)


if __name__ == "__main__":
    from lab import CONVS
    n = sum(1 for c in CONVS for q in c.questions if windows(q.question))
    print("questions with a date window:", n)
    for g in (0, 0.1, 0.2, 0.3):
        for slack in (3, 10, 20):
            print(fmt(f"gamma={g} slack={slack}", evaluate_scores(lambda c: final(c, g, slack))))
