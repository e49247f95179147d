build/sublet demo variable-length-oom --device cpu --knob max_split_size_mb:21
