"""A vLLM reasoning-parser plugin for the suite's tiny random model: its first N output tokens are thinking.

    vllm serve MODEL --reasoning-parser-plugin scripts/engines/count_reasoning_parser.py \
        --reasoning-parser sm_count        # N from SM_THINK_TOKENS (default 8)

The tiny model emits noise, so no real model's <think>…</think> markers can split its output. This
parser splits it by place instead, which gives the real-engine check a known truth: every request's
first N tokens arrive as vLLM's own `reasoning` deltas, the rest as `content`, and vLLM's usage
counts N in completion_tokens_details.reasoning_tokens. `chat_template_kwargs.enable_thinking: false`
turns thinking off, as a real reasoning model's template does. Everything else (the streaming
loop, the delta shape, the usage) is vLLM's own code.
"""

import os
from collections.abc import Iterable, Sequence

from vllm.entrypoints.generate.base.protocol import DeltaMessage
from vllm.reasoning import ReasoningParser, ReasoningParserManager

THINK_TOKENS = int(os.environ.get("SM_THINK_TOKENS", "8"))


@ReasoningParserManager.register_module("sm_count")
class CountReasoningParser(ReasoningParser):
    def __init__(self, tokenizer, *args, **kwargs):
        super().__init__(tokenizer, *args, **kwargs)
        template_kwargs = kwargs.get("chat_template_kwargs") or {}
        self.think = THINK_TOKENS if template_kwargs.get("enable_thinking", True) else 0

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        # Called with the prompt first: thinking is open after any prompt unless it is off.
        return self.think == 0

    def is_reasoning_end_streaming(self, input_ids: Sequence[int], delta_ids: Iterable[int]) -> bool:
        return len(input_ids) >= self.think

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        return list(input_ids[self.think :])

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        return min(self.think, len(token_ids))

    def extract_reasoning(self, model_output, request):
        ids = self.model_tokenizer.encode(model_output, add_special_tokens=False)
        reasoning = self.model_tokenizer.decode(ids[: self.think])
        return (reasoning or None), self.model_tokenizer.decode(ids[self.think :])

    def extract_reasoning_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
    ) -> DeltaMessage | None:
        # The delta's tokens before the N-th output token are thinking; those after it are answer.
        left = max(0, self.think - len(previous_token_ids))
        if left >= len(delta_token_ids):
            return DeltaMessage(reasoning=delta_text) if delta_text else None
        thought = self.model_tokenizer.decode(list(delta_token_ids[:left])) if left else None
        answer = self.model_tokenizer.decode(list(delta_token_ids[left:]))
        return DeltaMessage(reasoning=thought or None, content=answer or None)
