"""Evaluating models: interval estimates, pass@k and paired comparisons (`stats`), and the
held-out evaluation of RLVR recipes that `roll eval` runs (`rlvr_eval`)."""
