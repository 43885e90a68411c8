import random

import numpy as np
from exp01_baselines import bm25
from lab import CONVS, render_turn

random.seed(1)
rows=[]
for c in CONVS:
    s=bm25(c); ids=[t.dia_id for t in c.turns]; byid={t.dia_id:(i,t) for i,t in enumerate(c.turns)}
    for qi,q in enumerate(c.questions):
        if q.category==5: continue
        r=list(np.argsort(-s[qi],kind='stable')[:10]); top={ids[i] for i in r}
        miss=[e for e in q.evidence if e not in top]
        if miss: rows.append((c,q,miss,r,s[qi]))
random.shuffle(rows)
for c,q,miss,r,srow in rows[:25]:
    byid={t.dia_id:(i,t) for i,t in enumerate(c.turns)}
    print(f"== [{q.category}] {q.question}  -> {q.answer}")
    for e in miss:
        i,t=byid[e]; rank=int((srow>srow[i]).sum())+1
        prev=c.turns[i-1] if i>0 and c.turns[i-1].session==t.session else None
        print(f"   MISS {e} rank{rank}: {render_turn(t)[:200]}")
        if prev: print(f"        prev: {render_turn(prev)[:150]}")
    print(f"   top1: {render_turn(c.turns[r[0]])[:150]}")
