# Dataset readers, loader and checkpoint (safetensors) sources.
list(APPEND SUBLET_RUNTIME_SOURCES)
