"""A stand-in for vLLM, for ringcast's plug-in tests (tests/python/test_vllm_plugin.py).

Not vLLM: only the module layout, names and call pattern that ringcast.vllm meets in vLLM (read from
vLLM's public source): the plug-in loader, shm_broadcast's MessageQueue/Handle imported by name,
GroupCoordinator's message-queue broadcasters, StatelessProcessGroup, and the multiprocess executor
with spawned workers. Its own MessageQueue is a tripwire: any use of it raises, so a process where
the swap did not happen fails loudly.
"""
