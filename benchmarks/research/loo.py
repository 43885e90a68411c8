"""Overfitting check: leave-one-conversation-out choice of the recipe's constants.

For each conversation, pick the best grid point (mean R@10, categories 1-4) on the other six
and score it on the held-out one; compare with the fixed defaults.
"""

from __future__ import annotations

import itertools

import numpy as np
from exp03_speaker import bm, named_mask
from exp04_dense import dense
from exp10_fusion2 import maxnorm
from exp12_dates import date_mask
from lab import CONVS

CTX = [(1, 1), (2, 2), (3, 3), (2, 0)]
WEIGHTS = [(1, 0.3, 0.1), (1, 0.5, 0.2), (1, 0.7, 0.3)]
BOOST = [0.1, 0.2, 0.3, 0.5]
LEX = [0.4, 0.5, 0.6]
DEFAULT = ((2, 2), (1, 0.5, 0.2), 0.3, 0.5)


def r10(c, s):
    ids = [t.dia_id for t in c.turns]
    out = []
    for q, row in zip(c.questions, s, strict=True):
        if q.category == 5:
            continue
        top = {ids[i] for i in np.argsort(-row, kind="stable")[:10]}
        out.append(len(top & set(q.evidence)) / len(q.evidence))
    return np.array(out)


def main() -> None:
    table: dict[tuple, dict[str, np.ndarray]] = {}
    for ctx, w, boost, lw in itertools.product(CTX, WEIGHTS, BOOST, LEX):
        w_eff = (w[0], w[1], w[2] if ctx[1] else 0.0)
        table[(ctx, w, boost, lw)] = {
            c.sample_id: r10(c, lw * maxnorm(bm(c, *ctx, w_eff, True)) + (1 - lw) * dense(c, "ctx1_1")
                             + boost * named_mask(c) + 0.2 * date_mask(c, 3))
            for c in CONVS
        }
    held, fixed = [], []
    for c in CONVS:
        others = [o.sample_id for o in CONVS if o is not c]

        def train_score(cfg, others=others):
            return np.concatenate([table[cfg][o] for o in others]).mean()

        best = max(table, key=train_score)
        held.append(table[best][c.sample_id])
        fixed.append(table[DEFAULT][c.sample_id])
        print(f"{c.sample_id}: chosen {best} -> {table[best][c.sample_id].mean():.3f} "
              f"(defaults {table[DEFAULT][c.sample_id].mean():.3f})")
    print(f"LOO-chosen R@10 {np.concatenate(held).mean():.3f}  defaults {np.concatenate(fixed).mean():.3f}")
    allv = sorted((np.concatenate(list(v.values())).mean(), k) for k, v in table.items())
    print("grid R@10 min/median/max:", f"{allv[0][0]:.3f} {allv[len(allv)//2][0]:.3f} {allv[-1][0]:.3f}")
    print("best overall", allv[-1])


if __name__ == "__main__":
    main()
