"""vllm.plugins stand-in: loads the entry points of group vllm.general_plugins, once per process,
filtered by VLLM_PLUGINS, and calls each (vLLM does this in the engine and in every worker)."""
from importlib.metadata import entry_points

import vllm.envs as envs

DEFAULT_PLUGINS_GROUP = "vllm.general_plugins"
plugins_loaded = False
loaded_names: list = []  # what this process loaded (for the tests)


def load_plugins_by_group(group):
    allowed = envs.VLLM_PLUGINS
    found = {}
    for plugin in entry_points(group=group):
        if allowed is None or plugin.name in allowed:
            found[plugin.name] = plugin.load()
    return found


def load_general_plugins():
    global plugins_loaded
    if plugins_loaded:
        return
    plugins_loaded = True
    for name, func in load_plugins_by_group(DEFAULT_PLUGINS_GROUP).items():
        loaded_names.append(name)
        func()
