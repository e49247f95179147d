build/sublet replay bench/results/2026-12-07_cpu_variable_shapes/gpt_mini_trace.json --rules pytorch --capacity-mib 80000 --alloc-conf '' --alloc-conf expandable_segments:True
