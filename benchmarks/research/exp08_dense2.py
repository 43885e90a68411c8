"""Dense index text variants with the session date; dense query variants; fusion with B."""
import re

from exp03_speaker import named_mask
from exp04_dense import line
from exp05_fusion import B, z
from lab import dense_scores, evaluate_scores, fmt

cache = {}


def ctx_date(c, before, after, focus=False):
    turns = c.turns
    out = []
    for i, t in enumerate(turns):
        d = f"{t.date.day} {t.date:%B %Y}"
        parts = [line(turns[j]) for j in range(max(0, i - before), i) if turns[j].session == t.session]
        parts.append(line(t))
        parts += [line(turns[j]) for j in range(i + 1, min(len(turns), i + 1 + after)) if turns[j].session == t.session]
        out.append(f"[{d}] " + "\n".join(parts))
    return out


QW = re.compile(r"^(what|when|where|who|whom|which|why|how|did|does|do|is|are|was|were|has|have|would|could|can)\b[\w']*\s*", re.I)


def dq(c, kind, qmode="raw"):
    key = (c.sample_id, kind, qmode)
    if key in cache:
        return cache[key]
    qs = [q.question for q in c.questions]
    if qmode == "noqw":
        qs = [QW.sub("", q) for q in qs]
    b, a = map(int, kind[4:].split("_"))
    docs = ctx_date(c, b, a)
    cache[key] = dense_scores(docs, qs)
    return cache[key]


if __name__ == "__main__":
    for kind in ["ctxd0_0", "ctxd1_0", "ctxd1_1"]:
        for qm in ["raw"]:
            Dm = lambda c: dq(c, kind, qm) + 0.2 * named_mask(c)
            print(fmt(f"{kind} {qm} +0.2named", evaluate_scores(Dm)))
            for wd in (0.35, 0.5):
                print(fmt(f"  z fuse {wd}", evaluate_scores(lambda c: (1 - wd) * z(B(c)) + wd * z(Dm(c)))))
