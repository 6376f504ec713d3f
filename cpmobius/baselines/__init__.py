"""The comparison baselines' rewards (R-Zero, RENT, TTRL) as their released code computes them.

The paper compares CPMöbius with R-Zero and RENT; TTRL is the third data-free baseline of the field.
This room holds what each baseline's released code computes for its reward, as pure functions over
lists, numpy arrays and tensors (no verl, no Ray), so that a baseline run can be built on the same
engine as CPMöbius and its reward checked by hand, one module a baseline: `rzero_rewards` (R-Zero's Challenger
reward, repetition penalty, majority share and Solver filter), `rent_rewards` (RENT's negative-entropy reward),
`ttrl_rewards` (TTRL's vote and reward); `checks` (what each checks of its input).
docs/baselines.md records the released code these follow, with file and line references.

What it may import of cpmobius: nothing outside `cpmobius.baselines` (numpy, torch, nltk and
scikit-learn only). Answer equivalence is passed in as a callable, so the caller picks the grader.
"""
