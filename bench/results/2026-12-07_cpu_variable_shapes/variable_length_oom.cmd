build/sublet demo variable-length-oom --device cpu
