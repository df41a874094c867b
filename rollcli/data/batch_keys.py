"""The names of the RL batch's tensors, one constant each: every stage that writes or reads
one names it here, so a reader (or a search) finds every hop of, say, the response mask.

| key | shape | what |
| --- | --- | --- |
| `RESPONSE_MASK` | `[B, R]` | 1 on the response tokens the loss covers (padding and env text 0) |
| `PROMPT_WIDTH` | `[B]` | the padded prompt's width (the responses start there) |
| `ADVANTAGES` | `[B, R]` | per token, from the advantage stage |
| `OLD_LOGPROBS` | `[B, R]` | the rollout policy's, by the trainer (PPO's pi_old; off-policy updates) |
| `REF_LOGPROBS` | `[B, R]` | the reference policy's (the KL term) |
| `BEHAVIOUR_LOGPROBS` | `[B, R]` | the sampler's own, sent by the engine (the off-policy correction) |
| `ACTION_MASK` | `[B, R]` | agentic: each reply's first action token (the entropy bonus) |
"""

RESPONSE_MASK = "response_mask"
PROMPT_WIDTH = "prompt_width"
ADVANTAGES = "advantages"
OLD_LOGPROBS = "old_logprobs"
REF_LOGPROBS = "ref_logprobs"
BEHAVIOUR_LOGPROBS = "behaviour_logprobs"
ACTION_MASK = "action_mask"
