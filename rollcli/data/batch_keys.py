"""The names of the batch's tensors and fields (RL and distillation), one constant each: every
stage that writes or reads one names it here, so a reader (or a search) finds every hop of,
say, the response mask.

| key | shape | what |
| --- | --- | --- |
| `RESPONSE_MASK` | `[B, R]` | 1 on the response tokens the loss covers (padding and env text 0) |
| `PROMPT_WIDTH` | `[B]` | the padded prompt's width (the responses start there) |
| `ADVANTAGES` | `[B, R]` | per token, from the advantage stage |
| `OLD_LOGPROBS` | `[B, R]` | the rollout policy's, by the trainer (PPO's pi_old; off-policy updates) |
| `REF_LOGPROBS` | `[B, R]` | the reference policy's (the KL term) |
| `BEHAVIOUR_LOGPROBS` | `[B, R]` | the sampler's own, sent by the engine (the off-policy correction) |
| `ACTION_MASK` | `[B, R]` | agentic: each reply's first action token (the entropy bonus) |
| `SCORES` | `[B]` | each sample's reward (an episode's return in agentic), from the rollout |
| `FINISHED` | `[B]` bool | the response ended by itself, not at the token budget / context |
| `VALUES` | `[B, R]` | the critic's value of each response token |
| `RETURNS` | `[B, R]` | the critic's targets, from the advantage stage (GAE's returns) |
| `TEACHER` | field: a dict a row | distillation: the teacher's `logits` (and top-k `ids`) |
| `ROUTED_EXPERTS` | `[B, P+R, layers, k]` int16 | an MoE sampler's experts per token (-1: none) |
| `OLD_ROUTED_EXPERTS` | `[B, P+R, layers, k]` int16 | the old policy's (R2), by the trainer |
"""

RESPONSE_MASK = "response_mask"
PROMPT_WIDTH = "prompt_width"
ADVANTAGES = "advantages"
OLD_LOGPROBS = "old_logprobs"
REF_LOGPROBS = "ref_logprobs"
BEHAVIOUR_LOGPROBS = "behaviour_logprobs"
ACTION_MASK = "action_mask"
SCORES = "scores"
FINISHED = "finished"
VALUES = "values"
RETURNS = "returns"
TEACHER = "teacher"
ROUTED_EXPERTS = "routed_experts"
OLD_ROUTED_EXPERTS = "old_routed_experts"
