"""vllm.envs stand-in: VLLM_PLUGINS as vLLM reads it (None, or the comma-separated names)."""
import os
from typing import List, Optional


def __getattr__(name: str) -> Optional[List[str]]:
    if name == "VLLM_PLUGINS":
        value = os.environ.get("VLLM_PLUGINS")
        return None if value is None else value.split(",")
    raise AttributeError(name)
