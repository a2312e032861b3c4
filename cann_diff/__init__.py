"""cann-diff: compare two Ascend NPU profiles and explain what changed."""
