"""IFEval-style instruction following: rule-checked constraints, a reward, a prompt generator."""
