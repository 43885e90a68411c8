import random
import sys

import numpy as np
from exp05_fusion import B, D, z
from lab import CONVS, render_turn

random.seed(2)
cat = int(sys.argv[1]) if len(sys.argv) > 1 else 1
rows = []
for c in CONVS:
    s = 0.5 * z(B(c)) + 0.5 * z(D(c, "ctx1_1", 0.2)); ids = [t.dia_id for t in c.turns]
    for qi, q in enumerate(c.questions):
        if q.category != cat: continue
        r = list(np.argsort(-s[qi], kind='stable')[:10]); top = {ids[i] for i in r}
        miss = [e for e in q.evidence if e not in top]
        if miss: rows.append((c, q, miss, r, s[qi]))
print(len(rows))
random.shuffle(rows)
for c, q, miss, r, srow in rows[:20]:
    byid = {t.dia_id: (i, t) for i, t in enumerate(c.turns)}
    print(f"== [{q.category}] {q.question}  -> {q.answer}   ev={q.evidence}")
    for e in miss:
        i, t = byid[e]; rank = int((srow > srow[i]).sum()) + 1
        print(f"   MISS {e} rank{rank}: {render_turn(t)[:220]}")
    for j in r[:3]:
        print(f"   top: {c.turns[j].dia_id} {render_turn(c.turns[j])[:150]}")
