"""Dense (MiniLM) variants: index text, contextual text, neighbour propagation, speaker boost."""

import numpy as np
from exp02_context import propagate
from exp03_speaker import named_mask
from lab import dense_scores, evaluate_scores, fmt, render_turn


def line(t, date=False):
    s = f"{t.speaker}: {t.text}" + (f" [shares {t.caption}]" if t.caption else "")
    return render_turn(t) if date else s


def ctx_text(c, before, after):
    turns = c.turns
    out = []
    for i, t in enumerate(turns):
        parts = [line(turns[j]) for j in range(max(0, i - before), i) if turns[j].session == t.session]
        parts.append(line(t))
        parts += [line(turns[j]) for j in range(i + 1, min(len(turns), i + 1 + after)) if turns[j].session == t.session]
        out.append("\n".join(parts))
    return out


def strip_q(q, c):
    return q


cache = {}


def dense(c, kind):
    key = (c.sample_id, kind)
    if key in cache:
        return cache[key]
    qs = [q.question for q in c.questions]
    if kind == "render":
        docs = [render_turn(t) for t in c.turns]
    elif kind == "line":
        docs = [line(t) for t in c.turns]
    elif kind == "text":
        docs = [t.text + (f" [shares {t.caption}]" if t.caption else "") for t in c.turns]
    elif kind.startswith("ctx"):
        b, a = map(int, kind[3:].split("_"))
        docs = ctx_text(c, b, a)
    cache[key] = dense_scores(docs, qs)
    return cache[key]


if __name__ == "__main__":
    for kind in ["render", "line", "text", "ctx1_0", "ctx1_1", "ctx2_1", "ctx2_2"]:
        print(fmt(kind, evaluate_scores(lambda c: dense(c, kind))))
    for kind in ["line", "ctx1_0", "ctx1_1"]:
        for b in (0.1, 0.2):
            print(fmt(f"{kind} +{b}*named", evaluate_scores(lambda c: dense(c, kind) + b * named_mask(c))))
    for ap, an in [(0.3, 0.1), (0.5, 0.2)]:
        print(fmt(f"line prop {ap},{an}", evaluate_scores(lambda c: propagate(dense(c, 'line'), c, ap, an))))
    print(fmt("max(line, ctx1_1)", evaluate_scores(lambda c: np.maximum(dense(c, 'line'), dense(c, 'ctx1_1')))))
    print(fmt("line+ctx1_1", evaluate_scores(lambda c: dense(c, 'line') + dense(c, 'ctx1_1'))))
